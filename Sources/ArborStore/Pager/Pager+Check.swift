/// A problem found by an integrity check: what is wrong, where.
///
/// Each part of the context is given once: `owner` says which structure the page belongs to,
/// `page` which page, `message` only what is wrong there, so the description reads
/// `tree "index.Book.year", page 501: checksum mismatch`.
public struct IntegrityProblem: Sendable, Equatable, CustomStringConvertible {
    /// What the page belongs to, as a phrase (`tree "rows.Book"`, `the catalog`), when the
    /// problem lies in one structure.
    public var owner: String?
    /// The page concerned, when the problem concerns one page.
    public var page: PageNumber?
    /// What is wrong (naming neither the owner nor the page).
    public var message: String

    /// Creates a problem.
    public init(owner: String? = nil, page: PageNumber?, _ message: String) {
        self.owner = owner
        self.page = page
        self.message = message
    }

    public var description: String {
        let context = [owner, page.map { "page \($0)" }].compactMap { $0 }
        return context.isEmpty ? message : context.joined(separator: ", ") + ": " + message
    }
}

/// The freelist as found in the file.
public struct FreelistLayout: Sendable, Equatable {
    /// Trunk pages, in chain order.
    public var trunks: [PageNumber] = []
    /// Leaf pages, in the order the trunks list them.
    public var leaves: [PageNumber] = []

    /// Creates an empty layout.
    public init() {}

    /// Every free page.
    public var all: Set<PageNumber> { Set(trunks).union(leaves) }
}

extension Pager {
    /// Walks the freelist, collecting problems (cycles, pages outside the file, pages listed twice,
    /// a count that disagrees with the header) instead of throwing.
    ///
    /// Must be called inside a transaction.
    public func freelist(problems: inout [IntegrityProblem]) throws -> FreelistLayout {
        var layout = FreelistLayout()
        var seen = Set<PageNumber>()
        let header = currentHeader
        var trunk = header.freelistHead
        while trunk != 0 {
            guard trunk >= 2, trunk <= header.pageCount else {
                problems.append(IntegrityProblem(owner: "the freelist", page: trunk, "trunk is outside the file (\(header.pageCount) pages)"))
                break
            }
            guard seen.insert(trunk).inserted else {
                problems.append(IntegrityProblem(owner: "the freelist", page: trunk, "trunk appears twice (a cycle)"))
                break
            }
            layout.trunks.append(trunk)
            let entries: (PageNumber, [PageNumber])
            do {
                entries = try withPage(trunk) { body in
                    let next = body.loadLE(UInt32.self, at: FreelistTrunk.nextOffset)
                    let count = Int(body.loadLE(UInt32.self, at: FreelistTrunk.countOffset))
                    guard body[0] == FreelistTrunk.type, count <= FreelistTrunk.capacity(usable: body.count) else {
                        return (next, [PageNumber.max])
                    }
                    return (next, (0..<count).map { body.loadLE(UInt32.self, at: FreelistTrunk.entriesOffset + 4 * $0) })
                }
            } catch let error as StoreError where error.code == .corrupt {
                problems.append(IntegrityProblem(owner: "the freelist", page: trunk, "trunk unreadable: \(error.detail)"))
                break
            }
            if entries.1 == [PageNumber.max] {
                problems.append(IntegrityProblem(owner: "the freelist", page: trunk, "trunk has a wrong type byte or claims more entries than fit"))
                break
            }
            for leaf in entries.1 {
                if leaf < 2 || leaf > header.pageCount {
                    problems.append(IntegrityProblem(owner: "the freelist", page: trunk, "leaf \(leaf) is outside the file"))
                } else if !seen.insert(leaf).inserted {
                    problems.append(IntegrityProblem(owner: "the freelist", page: leaf, "page is listed twice"))
                } else {
                    layout.leaves.append(leaf)
                }
            }
            trunk = entries.0
        }
        let found = layout.trunks.count + layout.leaves.count
        if found != Int(header.freelistCount) {
            problems.append(IntegrityProblem(page: 1, "header counts \(header.freelistCount) free pages; the freelist holds \(found)"))
        }
        return layout
    }

    /// The page-level consistency check: the header, the file length, the freelist, and the
    /// checksum of every page that is not a free leaf (whose content means nothing).
    ///
    /// Opens a read transaction when none is open. Returns the problems found; an empty array
    /// means the file is consistent at the page level.
    public func checkPages() throws -> [IntegrityProblem] {
        try withReadTransaction { pager in
            var problems: [IntegrityProblem] = []
            let header = pager.currentHeader
            let expected = Int64(header.pageCount) * Int64(header.pageSize)
            let size = try pager.file.size()
            if size != expected {
                problems.append(IntegrityProblem(page: nil, "the file holds \(size) bytes; \(header.pageCount) pages of \(header.pageSize) make \(expected)"))
            }
            let layout = try pager.freelist(problems: &problems)
            let leaves = Set(layout.leaves)
            if header.pageCount >= 2 {
                for page in 2...header.pageCount where !leaves.contains(page) {
                    do {
                        _ = try pager.withPage(page) { _ in () }
                    } catch let error as StoreError where error.code == .corrupt {
                        problems.append(IntegrityProblem(page: page, error.detail))
                    }
                }
            }
            return problems
        }
    }

    /// Runs `body` inside a read transaction, opening one (and closing it afterwards) when the
    /// connection has none.
    public func withReadTransaction<R>(_ body: (Pager) throws -> R) throws -> R {
        if state != .none { return try body(self) }
        try beginRead()
        defer { endRead() }
        return try body(self)
    }
}
