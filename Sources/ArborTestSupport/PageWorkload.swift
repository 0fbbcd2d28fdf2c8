import ArborStore

/// An oracle for page-level tests: the pages a database should hold, with their exact bodies.
public struct PageModel: Equatable, Sendable {
    /// The body of every page in use (pages other than page 1 and the freelist).
    public var pages: [PageNumber: [UInt8]] = [:]
    /// The file's page count.
    public var pageCount: PageNumber = 1

    /// Creates the model of a new, empty database.
    public init() {}

    /// The pages in use, sorted.
    public var live: [PageNumber] { pages.keys.sorted() }
}

/// Random multi-page write transactions over a ``Pager``, checked against a ``PageModel``.
///
/// A transaction is a seeded sequence of operations: rewrite a page in use, allocate a page and
/// fill it, free a page. Executing the same seed on the same file always makes the same calls, so
/// a crash test can run a transaction once to count its I/O operations and then again, crashing at
/// each one.
public enum PageWorkload {
    /// Runs one write transaction chosen by `seed` against `pager` and commits it.
    ///
    /// - Returns: the model after the transaction.
    /// - Parameter large: make a transaction big enough to overflow a small cache (and spill).
    @discardableResult
    public static func runTransaction(_ pager: Pager, model: PageModel, seed: UInt64, large: Bool = false) throws -> PageModel {
        var random = SplitMix64(seed: seed)
        var next = model
        try pager.beginWrite()
        do {
            let operations = large ? 30 + Int(random.next() % 40) : 1 + Int(random.next() % 10)
            for _ in 0..<operations {
                let live = next.live
                let choice = random.next() % 10
                if choice < 4, !live.isEmpty {
                    let page = live[Int(random.next() % UInt64(live.count))]
                    let body = randomBody(pager.usableSize, &random)
                    try pager.withMutablePage(page) { $0.copyBytes(from: body) }
                    next.pages[page] = body
                } else if choice < 8 || live.isEmpty {
                    let page = try pager.allocatePage()
                    let body = randomBody(pager.usableSize, &random)
                    try pager.withMutablePage(page) { $0.copyBytes(from: body) }
                    next.pages[page] = body
                } else {
                    let page = live[Int(random.next() % UInt64(live.count))]
                    try pager.freePage(page)
                    next.pages[page] = nil
                }
            }
            if random.next() % 4 == 0 {
                try pager.setUserVersion(UInt32(truncatingIfNeeded: random.next()))
            }
            next.pageCount = pager.pageCount
            try pager.commit()
        } catch {
            if pager.transactionState == .write { try? pager.rollback() }
            throw error
        }
        return next
    }

    /// A page body of random bytes (with a recognisable prefix so dumps are readable).
    static func randomBody(_ size: Int, _ random: inout SplitMix64) -> [UInt8] {
        var body = [UInt8](repeating: 0, count: size)
        var i = 0
        while i < size {
            var word = random.next()
            for _ in 0..<8 where i < size {
                body[i] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                i += 1
            }
        }
        return body
    }

    /// Compares the database with `model`: the page-level consistency check, the page count, every
    /// page in use byte for byte, and the freelist holding exactly the remaining pages.
    ///
    /// - Returns: nil when they match, else what differs.
    public static func mismatch(_ pager: Pager, _ model: PageModel) throws -> String? {
        let problems = try pager.checkPages()
        if !problems.isEmpty {
            return "consistency check: " + problems.map(\.description).joined(separator: "; ")
        }
        return try pager.withReadTransaction { pager -> String? in
            if pager.pageCount != model.pageCount {
                return "page count \(pager.pageCount), expected \(model.pageCount)"
            }
            for (page, expected) in model.pages.sorted(by: { $0.key < $1.key }) {
                let same = try pager.withPage(page) { body in body.elementsEqual(expected) }
                if !same { return "page \(page) differs" }
            }
            var problems: [IntegrityProblem] = []
            let free = try pager.freelist(problems: &problems).all
            var expectedFree = Set<PageNumber>()
            if model.pageCount >= 2 {
                for page in 2...model.pageCount where model.pages[page] == nil { expectedFree.insert(page) }
            }
            if free != expectedFree {
                return "free pages \(free.sorted()), expected \(expectedFree.sorted())"
            }
            return nil
        }
    }
}
