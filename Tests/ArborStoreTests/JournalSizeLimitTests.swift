import ArborTestSupport
import InMemoryLogging
import Logging
import MetricsTestKit
import Testing
@testable import ArborStore

/// Issue 26, item 8: a journal grown past `journalSizeLimit` is trimmed back to it after the
/// transaction (step 4b of docs/commit-protocol.md), durably, and only then.
@Suite("Journal size limit")
struct JournalSizeLimitTests {
    static let path = "/db"
    static let journal = "/db-journal"

    /// Pager options with a cache large enough that nothing spills (so syncs are exact).
    static func options(limit: Int?, pageSize: Int = 512, cachePages: Int = 4096, table: LockTable = LockTable()) -> PagerOptions {
        var options = ArborStoreTests.options(pageSize: pageSize, cacheSize: cachePages * pageSize, lockTable: table)
        options.journalSizeLimit = limit
        options.logger = .quietStore
        return options
    }

    /// A file of `count` pages after page 1, each committed (new pages are not journaled).
    static func populate(_ pager: Pager, pages count: Int) throws -> [PageNumber] {
        try pager.beginWrite()
        var pages: [PageNumber] = []
        for i in 0..<count {
            let page = try pager.allocatePage()
            try pager.withMutablePage(page) { $0.initializeMemory(as: UInt8.self, repeating: UInt8(i % 251)) }
            pages.append(page)
        }
        try pager.commit()
        return pages
    }

    /// Rewrites `pages` in one write transaction (each journaled once), then commits it.
    static func rewrite(_ pager: Pager, _ pages: some Collection<PageNumber>, with byte: UInt8) throws {
        try pager.beginWrite()
        for page in pages { try pager.withMutablePage(page) { $0[0] = byte } }
        try pager.commit()
    }

    /// What `pager`'s statistics counted since `before`.
    static func delta(_ pager: Pager, since before: PagerStatistics) -> (syncs: UInt64, journalSyncs: UInt64, trims: UInt64) {
        let now = pager.statistics
        return (now.syncs - before.syncs, now.journalSyncs - before.journalSyncs, now.journalTrims - before.journalTrims)
    }

    /// The length of `path` on the disk, as a running system sees it.
    static func length(_ disk: SimulatedDisk, _ path: String = journal) -> Int { disk.contents(of: path)?.count ?? -1 }

    @Test("a commit that grows the journal past the limit trims it back with one more sync, durably; commits within it trim nothing")
    func largeCommitTrims() throws {
        let disk = SimulatedDisk()
        let limit = 8 * 1024
        let pager = try Pager(path: Self.path, fileSystem: disk, options: Self.options(limit: limit))
        let pages = try Self.populate(pager, pages: 100)
        #expect(Self.length(disk) <= limit)

        // 80 records of 524 bytes: 42 KiB of journal, five times the limit.
        var before = pager.statistics
        try Self.rewrite(pager, pages.prefix(80), with: 1)
        var made = Self.delta(pager, since: before)
        #expect(made.trims == 1)
        #expect(made.syncs == 4, "journal, database, journal (the commit point), and the trim's journal sync")
        #expect(made.journalSyncs == 3)
        #expect(Self.length(disk) == limit)
        // The trim is durable: a power cut now, whatever it does to unsynced writes, keeps it.
        let committed = disk.snapshot()
        for damage in CrashHarness.damages(seed: 7) {
            disk.restore(committed)
            disk.powerCut(damage)
            #expect(Self.length(disk) == limit, "\(damage)")
        }
        disk.restore(committed)
        pager.close()

        // Within the limit: three syncs per commit, no trim, and no fstat, truncation or other
        // journal I/O beyond the commit's own (the length was learned once, by the first commit).
        let again = try Pager(path: Self.path, fileSystem: disk, options: Self.options(limit: limit))
        defer { again.close() }
        try Self.rewrite(again, pages.prefix(2), with: 2)
        before = again.statistics
        disk.startTrace()
        defer { disk.stopTrace() }
        for round in 0..<10 { try Self.rewrite(again, pages.prefix(5), with: UInt8(3 + round)) }
        made = Self.delta(again, since: before)
        #expect(made.syncs == 30 && made.trims == 0)
        #expect(!disk.trace.contains { $0.contains("truncate") || $0.contains("size \(Self.journal)") }, "\(disk.trace)")
        #expect(Self.length(disk) == limit, "records written over the kept file, which did not grow")
    }

    @Test("the first commit of a connection learns the journal's length with one fstat, before the commit point")
    func lengthLearnedBeforeCommitPoint() throws {
        let disk = SimulatedDisk()
        let setup = try Pager(path: Self.path, fileSystem: disk, options: Self.options(limit: 4096))
        let pages = try Self.populate(setup, pages: 10)
        setup.close()
        let pager = try Pager(path: Self.path, fileSystem: disk, options: Self.options(limit: 4096))
        defer { pager.close() }
        let before = disk.operationCount
        disk.startTrace()
        defer { disk.stopTrace() }
        try Self.rewrite(pager, pages.prefix(2), with: 9)
        let trace = disk.trace
        let fstats = trace.filter { $0.hasSuffix("size \(Self.journal)") }
        #expect(fstats.count == 1, "\(trace)")
        let commitPoint = try #require(CrashHarness.commitPoint(in: trace, database: Self.path, after: before))
        #expect(commitPoint.sync == disk.operationCount - before, "nothing after the commit point: \(trace)")
        #expect(commitPoint.invalidation == commitPoint.sync - 1)
    }

    @Test("no limit keeps the journal at its largest; a limit of 0 empties it after every commit, with one more sync each")
    func noLimitAndZero() throws {
        for limit in [nil, 0] as [Int?] {
            let disk = SimulatedDisk()
            let pager = try Pager(path: Self.path, fileSystem: disk, options: Self.options(limit: limit))
            defer { pager.close() }
            let pages = try Self.populate(pager, pages: 50)
            try Self.rewrite(pager, pages, with: 1)
            let largest = Self.length(disk)
            let before = pager.statistics
            try Self.rewrite(pager, pages.prefix(1), with: 2)
            let made = Self.delta(pager, since: before)
            if limit == nil {
                #expect(largest == Journal.headerSize + 51 * 524, "page 1 and 50 pages journaled")
                #expect(Self.length(disk) == largest && made.syncs == 3 && pager.statistics.journalTrims == 0)
            } else {
                #expect(largest == 0)
                #expect(Self.length(disk) == 0 && made.syncs == 4 && made.trims == 1)
            }
        }
    }

    @Test("the default is 4 MiB for a pager and a database; a negative limit is invalidArgument and creates no file")
    func optionRange() throws {
        #expect(PagerOptions().journalSizeLimit == 4 << 20)
        #expect(DatabaseOptions().journalSizeLimit == 4 << 20)
        #expect(DatabaseOptions().pagerOptions.journalSizeLimit == 4 << 20)
        let disk = SimulatedDisk()
        for limit in [-1, Int.min] {
            #expect(storeErrorCode { try Pager(path: "/refused", fileSystem: disk, options: Self.options(limit: limit)) } == .invalidArgument)
            var options = DatabaseOptions.quiet(disk)
            options.journalSizeLimit = limit
            let error = #expect(throws: StoreError.self) { try Database(path: "/refused", options: options) }
            #expect(error?.code == .invalidArgument && error?.message.contains("journalSizeLimit") == true)
        }
        #expect(disk.contents(of: "/refused") == nil)
        for limit in [nil, 0, 1, Int.max] as [Int?] {
            var options = DatabaseOptions.quiet(disk)
            options.journalSizeLimit = limit
            try Database(path: "/accepted", options: options).close()
        }
    }

    @Test("a rollback with journal records still gathered (not written) trims the journal to the limit and leaves them unwritten")
    func rollbackDropsGatheredRecords() throws {
        let disk = SimulatedDisk()
        let limit = 4096
        let pager = try Pager(path: Self.path, fileSystem: disk, options: Self.options(limit: limit, cachePages: 4096))
        defer { pager.close() }
        var model = PageModel()
        for seed in 1...8 as ClosedRange<UInt64> { model = try PageWorkload.runTransaction(pager, model: model, seed: seed, large: true) }
        let pages = model.live.prefix(Journal.bufferedRecords + 5)
        try #require(pages.count == Journal.bufferedRecords + 5)
        let trimsBefore = pager.statistics.journalTrims
        try pager.beginWrite()
        for page in pages { try pager.withMutablePage(page) { $0[0] ^= 0xFF } }
        // One buffer written (past the limit), the last few records still gathered.
        #expect(Self.length(disk) > limit)
        try pager.rollback()
        #expect(pager.statistics.journalTrims == trimsBefore + 1)
        #expect(Self.length(disk) == limit, "the gathered records were not written after the trim")
        #expect(try PageWorkload.mismatch(pager, model) == nil)
    }

    @Test("a rolled-back transaction that grew the journal trims it, spilled or not", arguments: [false, true])
    func rollbackTrims(spill: Bool) throws {
        let disk = SimulatedDisk()
        let limit = 4096
        let pager = try Pager(path: Self.path, fileSystem: disk, options: Self.options(limit: limit, cachePages: spill ? 16 : 4096))
        defer { pager.close() }
        var model = PageModel()
        model = try PageWorkload.runTransaction(pager, model: model, seed: 1, large: true)
        model = try PageWorkload.runTransaction(pager, model: model, seed: 2, large: true)
        let spillsBefore = pager.cacheStatistics.spills
        let trimsBefore = pager.statistics.journalTrims
        try pager.beginWrite()
        for page in model.live { try pager.withMutablePage(page) { $0[0] ^= 0xFF } }
        // Records are written a buffer at a time: the last ones now, as a longer transaction's.
        try pager.journal.flush()
        #expect(Self.length(disk) > limit, "the transaction journaled past the limit")
        try pager.rollback()
        #expect((pager.cacheStatistics.spills > spillsBefore) == spill)
        #expect(pager.statistics.journalTrims == trimsBefore + 1)
        #expect(Self.length(disk) == limit)
        #expect(try PageWorkload.mismatch(pager, model) == nil)
        // A rollback that journaled nothing does not look at the journal.
        try pager.beginWrite()
        let operations = disk.operationCount
        try pager.rollback()
        #expect(disk.operationCount == operations)
    }

    @Test("recovery of a hot journal longer than the limit rolls back, then trims it")
    func recoveryTrims() throws {
        let disk = SimulatedDisk()
        let limit = 4096
        let setup = try Pager(path: Self.path, fileSystem: disk, options: Self.options(limit: nil))
        var model = PageModel()
        for seed in 1...3 as ClosedRange<UInt64> { model = try PageWorkload.runTransaction(setup, model: model, seed: seed, large: true) }
        setup.close()
        let base = disk.snapshot()
        // A dry run finds the commit point of a large transaction; the cut there drops the
        // zeroing of the header: a hot journal, longer than the limit.
        let dry = try Pager(path: Self.path, fileSystem: disk, options: Self.options(limit: nil))
        let before = disk.operationCount
        disk.startTrace()
        try PageWorkload.runTransaction(dry, model: model, seed: 4, large: true)
        let commitPoint = try #require(CrashHarness.commitPoint(in: disk.trace, database: Self.path, after: before)).sync
        disk.stopTrace()
        dry.close()
        disk.restore(base)
        let writer = try Pager(path: Self.path, fileSystem: disk, options: Self.options(limit: nil))
        disk.inject(.powerCut(.dropAll), atOperation: commitPoint)
        #expect(throws: StoreError.self) { try PageWorkload.runTransaction(writer, model: model, seed: 4, large: true) }
        writer.close()
        disk.clearFaults()
        #expect(Self.length(disk) > limit)

        let recovered = try Pager(path: Self.path, fileSystem: disk, options: Self.options(limit: limit))
        defer { recovered.close() }
        #expect(recovered.statistics.recoveries == 1)
        #expect(recovered.statistics.journalTrims == 1)
        #expect(Self.length(disk) == limit)
        #expect(try PageWorkload.mismatch(recovered, model) == nil)
    }

    @Test("a journal another connection left longer is trimmed at the next commit of a connection that learns its length")
    func trimmedAfterAnotherConnection() throws {
        let disk = SimulatedDisk()
        let table = LockTable()
        let limit = 4096
        let unlimited = try Pager(path: Self.path, fileSystem: disk, options: Self.options(limit: nil, table: table))
        defer { unlimited.close() }
        let pages = try Self.populate(unlimited, pages: 40)
        let limited = try Pager(path: Self.path, fileSystem: disk, options: Self.options(limit: limit, table: table))
        defer { limited.close() }
        try Self.rewrite(limited, pages.prefix(1), with: 1)
        // The limited connection knows the journal's length; the other grows it and commits.
        try Self.rewrite(unlimited, pages, with: 2)
        #expect(Self.length(disk) > limit)
        // The change counter moved: the limited connection asks the length again and trims.
        try Self.rewrite(limited, pages.prefix(1), with: 3)
        #expect(limited.statistics.journalTrims == 1)
        #expect(Self.length(disk) == limit)
        // A connection that opens the file afterwards learns the length at its first commit.
        try Self.rewrite(unlimited, pages, with: 4)
        let fresh = try Pager(path: Self.path, fileSystem: disk, options: Self.options(limit: limit, table: LockTable()))
        defer { fresh.close() }
        try Self.rewrite(fresh, pages.prefix(1), with: 5)
        #expect(fresh.statistics.journalTrims == 1)
        #expect(Self.length(disk) == limit)
    }

    @Test("a trim is a debug line naming both lengths, and counted as arbor_store_journal_trims; nothing at info or above")
    func trimIsObserved() throws {
        let disk = SimulatedDisk()
        let handler = InMemoryLogHandler()
        let metrics = TestMetrics()
        var options = EngineObservabilityTests.options(disk, LockTable(), handler, metrics)
        options.journalSizeLimit = 2048
        let database = try Database(path: "/observed.db", options: options)
        defer { database.close() }
        try EngineObservabilityTests.fill(database, from: 0, count: 200)
        let trimsBefore = metrics.counterTotal(label: "arbor_store_journal_trims")
        try EngineObservabilityTests.fill(database, from: 0, count: 200, salt: 1)
        #expect(metrics.counterTotal(label: "arbor_store_journal_trims") == trimsBefore + 1)
        let line = try #require(handler.entries.last { "\($0.message)".hasPrefix("trimmed the journal") })
        #expect(line.level == .debug)
        #expect(line.metadata["arbor.journalSizeLimit"] == "2048")
        #expect(Int("\(line.metadata["arbor.journalBytes"] ?? "0")") ?? 0 > 2048)
        #expect(line.metadata["arbor.journal"] == "/observed.db-journal")
        #expect(!handler.entries.contains { $0.level >= .info }, "nothing at info or above")
    }

    @Test("EIO or ENOSPC at the trim's truncation: the commit stands, the journal stays long, and the next commit trims it",
          arguments: [SimulatedDisk.Fault.ioError, .diskFull])
    func truncationFails(fault: SimulatedDisk.Fault) throws {
        let (disk, pager, pages, truncation, _) = try Self.largeCommitReady()
        defer { pager.close() }
        disk.inject(fault, atOperation: truncation)
        try Self.rewrite(pager, pages, with: 7)
        disk.clearFaults()
        #expect(!pager.isPoisoned)
        #expect(pager.statistics.journalTrims == 0)
        #expect(Self.length(disk) > Self.smallLimit)
        let other = try Pager(path: Self.path, fileSystem: disk, options: Self.options(limit: nil, table: LockTable()))
        #expect(try other.withReadTransaction { try $0.withPage(pages[0]) { $0[0] } } == 7, "the commit stands")
        other.close()
        // The failed truncation left the length unknown: the next commit asks it and trims.
        try Self.rewrite(pager, pages.prefix(1), with: 8)
        #expect(pager.statistics.journalTrims == 1)
        #expect(Self.length(disk) == Self.smallLimit)
    }

    @Test("EIO at the trim's sync: the commit stands and the handle is poisoned; the next connection finds a cold journal",
          arguments: [false, true])
    func trimSyncFails(persistent: Bool) throws {
        let (disk, pager, pages, truncation, _) = try Self.largeCommitReady()
        defer { pager.close() }
        disk.inject(.ioError, atOperation: truncation + 1, persistent: persistent)
        try Self.rewrite(pager, pages, with: 7)
        disk.clearFaults()
        #expect(pager.isPoisoned)
        #expect(storeErrorCode { try pager.beginWrite() } == .poisoned)
        let next = try Pager(path: Self.path, fileSystem: disk, options: Self.options(limit: Self.smallLimit, table: LockTable()))
        defer { next.close() }
        #expect(next.statistics.recoveries == 0, "the journal is cold")
        #expect(try next.withReadTransaction { try $0.withPage(pages[0]) { $0[0] } } == 7, "the commit stands")
        #expect(try next.checkPages().isEmpty)
    }

    static let smallLimit = 4096

    /// A file of 60 pages with a connection open on it, and the operation numbers (counted from
    /// the next) of the commit point and of the trim's truncation in that connection's commit
    /// rewriting all of them, found by a dry run of a connection opened alike on the same image.
    static func largeCommitReady() throws -> (SimulatedDisk, Pager, [PageNumber], truncation: Int, commitPoint: Int) {
        let disk = SimulatedDisk()
        let setup = try Pager(path: path, fileSystem: disk, options: options(limit: smallLimit))
        let pages = try populate(setup, pages: 60)
        setup.close()
        let base = disk.snapshot()
        let dry = try Pager(path: path, fileSystem: disk, options: options(limit: smallLimit))
        let before = disk.operationCount
        disk.startTrace()
        try rewrite(dry, pages, with: 7)
        let trace = disk.trace
        disk.stopTrace()
        dry.close()
        let commitPoint = try #require(CrashHarness.commitPoint(in: trace, database: path, after: before)).sync
        let line = try #require(trace.first { $0.hasSuffix("truncate \(journal) to \(smallLimit)") })
        let truncation = try #require(Int(line.prefix { $0 != ":" })) - before
        #expect(truncation == commitPoint + 1, "the trim follows the commit point: \(trace)")
        #expect(trace.last?.hasSuffix("sync \(journal)") == true)
        disk.restore(base)
        return (disk, try Pager(path: path, fileSystem: disk, options: options(limit: smallLimit)), pages, truncation, commitPoint)
    }
}
