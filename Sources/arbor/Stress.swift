import ArgumentParser
import ArborStore

/// A hidden command used by the multi-process tests: several processes run it on one file at
/// once, as writers or readers, and each checks what it sees.
///
/// Layout: every page the workload writes starts with the type byte ``pageType`` and 7 zero
/// bytes, so that no page reads as one of the engine's typed pages (a counter or writer number
/// of 5 or 10 in byte 0 would pass for a B-tree node and fail the structural check of a
/// `Database` that copies the file, such as `arbor backup`). After it, page 2 holds one 8-byte
/// commit counter per writer (up to 32 writers). Every writer commit increments its counter and
/// appends a record page holding (writer, sequence number).
/// Invariant a reader checks in every read transaction: the counters add up to the number of
/// record pages (page count − 2), and each record page's sequence number is within its writer's
/// counter.
///
/// Arguments out of range are usage errors; a file whose counters or pages break the layout (a
/// counter at `UInt64.max`, page 2 missing) is reported as inconsistent, exit status 2.
struct Stress: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stress",
        abstract: "Multi-process test workload (for the test suite).",
        shouldDisplay: false
    )

    @Argument(help: "The database file.")
    var file: String

    @Option(help: "Write as writer N (0…31); without it, read.")
    var writer: Int?

    @Option(help: "Commits to make (writer) or read transactions to run (reader).")
    var count: Int = 100

    @Flag(help: "Verify the final state: every writer's counter equals --count, every record present.")
    var verify = false

    @Option(help: "Number of writers, for --verify (1…32).")
    var writers: Int = 2

    /// Byte 0 of every page of the workload: a type the engine's page check does not own.
    static let pageType: UInt8 = 0x53
    /// Where the 8-byte fields of a page begin, after the type byte and its padding.
    static let fieldsStart = 8

    /// The offset of a page's 8-byte field `index`.
    static func field(_ index: Int) -> Int { fieldsStart + 8 * index }

    /// A file that does not hold the stress layout.
    struct Inconsistent: Error {
        var why: String
    }

    func validate() throws {
        if let writer, !(0..<32).contains(writer) { throw ValidationError("--writer must be 0…31, not \(writer)") }
        guard count >= 0 else { throw ValidationError("--count must be 0 or more, not \(count)") }
        guard (1...32).contains(writers) else { throw ValidationError("--writers must be 1…32, not \(writers)") }
    }

    func run() throws {
        do {
            try runChecked()
        } catch let error as Inconsistent {
            printError("arbor: \(file) is not a consistent stress file: \(error.why)")
            throw ExitCode(2)
        }
    }

    private func runChecked() throws {
        try reportingErrors {
            var options = PagerOptions()
            options.busyTimeout = .seconds(30)
            options.pageSize = 512
            let pager = try Pager(path: file, options: options)
            defer { pager.close() }
            if verify {
                try verifyFinal(pager)
            } else if let writer {
                for _ in 0..<count { try commitOne(pager, writer: writer) }
                print("writer \(writer): \(count) commits")
            } else {
                var checked = 0
                for _ in 0..<count {
                    try pager.beginRead()
                    defer { pager.endRead() }
                    if let problem = try check(pager) {
                        printError("arbor: reader saw an inconsistent state: \(problem)")
                        throw ExitCode(2)
                    }
                    checked += 1
                }
                print("reader: \(checked) consistent read transactions")
            }
        }
    }

    func commitOne(_ pager: Pager, writer: Int) throws {
        try pager.beginWrite()
        do {
            if pager.pageCount < 2 {
                let page = try pager.allocatePage()
                guard page == 2 else { throw Inconsistent(why: "the counters belong on page 2, but the file gave page \(page)") }
            }
            let sequence = try pager.withMutablePage(2) { body -> UInt64 in
                body.storeBytes(of: Self.pageType, toByteOffset: 0, as: UInt8.self)
                let (value, overflow) = body.load(fromByteOffset: Self.field(writer), as: UInt64.self).addingReportingOverflow(1)
                guard !overflow else { throw Inconsistent(why: "writer \(writer)'s commit counter is already \(UInt64.max)") }
                body.storeBytes(of: value, toByteOffset: Self.field(writer), as: UInt64.self)
                return value
            }
            let record = try pager.allocatePage()
            try pager.withMutablePage(record) { body in
                body.storeBytes(of: Self.pageType, toByteOffset: 0, as: UInt8.self)
                body.storeBytes(of: UInt64(writer), toByteOffset: Self.field(0), as: UInt64.self)
                body.storeBytes(of: sequence, toByteOffset: Self.field(1), as: UInt64.self)
            }
            try pager.commit()
        } catch {
            try? pager.rollback()
            throw error
        }
    }

    /// Checks the invariant inside a read transaction; returns what is wrong, if anything.
    func check(_ pager: Pager) throws -> String? {
        guard pager.pageCount >= 2 else { return nil }
        let counters = try pager.withPage(2) { body in (0..<32).map { body.load(fromByteOffset: Self.field($0), as: UInt64.self) } }
        let records = UInt64(pager.pageCount - 2)
        var total: UInt64 = 0
        for counter in counters {
            let (sum, overflow) = total.addingReportingOverflow(counter)
            if overflow { return "the counters add up to more than \(UInt64.max)" }
            total = sum
        }
        if total != records { return "counters add up to \(total) but there are \(records) record pages" }
        var seen = Set<[UInt64]>()
        if pager.pageCount >= 3 {
            for page in 3...pager.pageCount {
                let (type, writer, sequence) = try pager.withPage(page) { body in
                    (body[0], body.load(fromByteOffset: Self.field(0), as: UInt64.self), body.load(fromByteOffset: Self.field(1), as: UInt64.self))
                }
                guard type == Self.pageType else { return "page \(page) is of type \(type), not a record page" }
                guard writer < 32, sequence >= 1, sequence <= counters[Int(writer)] else {
                    return "page \(page) holds writer \(writer) sequence \(sequence), beyond its counter"
                }
                guard seen.insert([writer, sequence]).inserted else { return "record \(writer)/\(sequence) appears twice" }
            }
        }
        return nil
    }

    func verifyFinal(_ pager: Pager) throws {
        try pager.beginRead()
        defer { pager.endRead() }
        if let problem = try check(pager) {
            printError("arbor: final state inconsistent: \(problem)")
            throw ExitCode(2)
        }
        let counters = try pager.withPage(2) { body in (0..<writers).map { body.load(fromByteOffset: Self.field($0), as: UInt64.self) } }
        guard counters.allSatisfy({ $0 == UInt64(count) }) else {
            printError("arbor: lost commits: counters \(counters), expected \(count) each")
            throw ExitCode(2)
        }
        print("verified: \(writers) writers x \(count) commits, \(pager.pageCount - 2) records")
    }
}
