import ArborTestSupport
import Testing
@testable import ArborStore

/// The page sizes every pager test runs with: the smallest (so splits and spills happen with
/// little data) and the default.
let testPageSizes = [512, 4096]

func options(pageSize: Int, cacheSize: Int = 1 << 20, lockTable: LockTable = LockTable()) -> PagerOptions {
    var options = PagerOptions()
    options.pageSize = pageSize
    options.cacheSize = cacheSize
    options.lockTable = lockTable
    options.busyTimeout = .milliseconds(200)
    return options
}

@Suite("Pager")
struct PagerTests {
    @Test("a new file holds one header page; reopening reads it back", arguments: testPageSizes)
    func createAndReopen(pageSize: Int) throws {
        let disk = SimulatedDisk()
        let pager = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: pageSize))
        #expect(pager.pageCount == 1)
        #expect(pager.pageSize == pageSize)
        let id = pager.currentHeader.fileID
        pager.close()
        #expect(disk.contents(of: "/db")?.count == pageSize)

        // An existing file keeps its page size whatever the options say.
        let again = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: 1024))
        #expect(again.pageSize == pageSize)
        #expect(again.currentHeader.fileID == id)
        #expect(id != (0, 0))
        #expect(try again.checkPages().isEmpty)
    }

    @Test("committed pages survive reopening; rolled-back ones do not", arguments: testPageSizes)
    func commitAndRollback(pageSize: Int) throws {
        let disk = SimulatedDisk()
        let pager = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: pageSize))
        var model = PageModel()
        for seed in 1...20 as ClosedRange<UInt64> {
            model = try PageWorkload.runTransaction(pager, model: model, seed: seed)
        }
        // A rolled-back transaction leaves nothing behind.
        try pager.beginWrite()
        let page = try pager.allocatePage()
        try pager.withMutablePage(page) { $0[0] = 0xAB }
        if let live = model.live.first {
            try pager.withMutablePage(live) { $0[0] = ~$0[0] }
        }
        try pager.rollback()
        #expect(try PageWorkload.mismatch(pager, model) == nil)
        pager.close()

        let reopened = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: pageSize))
        #expect(try PageWorkload.mismatch(reopened, model) == nil)
    }

    @Test("freed pages are reused before the file grows")
    func freelistReuse() throws {
        let disk = SimulatedDisk()
        let pager = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: 512))
        try pager.beginWrite()
        let pages = try (0..<300).map { _ in try pager.allocatePage() }
        try pager.commit()
        #expect(pager.pageCount == 301)

        try pager.beginWrite()
        for page in pages { try pager.freePage(page) }
        try pager.commit()
        #expect(pager.currentHeader.freelistCount == 300)
        // 300 entries need more than one trunk at 512 bytes (125 entries per trunk).
        var problems: [IntegrityProblem] = []
        let layout = try pager.withReadTransaction { try $0.freelist(problems: &problems) }
        #expect(problems.isEmpty)
        #expect(layout.trunks.count > 1)
        #expect(layout.all == Set(pages))

        try pager.beginWrite()
        let again = try (0..<300).map { _ in try pager.allocatePage() }
        try pager.commit()
        #expect(Set(again) == Set(pages))
        #expect(pager.pageCount == 301)
        #expect(pager.currentHeader.freelistCount == 0)
        #expect(try pager.checkPages().isEmpty)
    }

    @Test("a transaction larger than the cache spills and still commits or rolls back", arguments: testPageSizes)
    func spill(pageSize: Int) throws {
        let disk = SimulatedDisk()
        let pager = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: pageSize, cacheSize: 16 * pageSize))
        var model = PageModel()
        model = try PageWorkload.runTransaction(pager, model: model, seed: 1, large: true)
        model = try PageWorkload.runTransaction(pager, model: model, seed: 2, large: true)
        #expect(pager.cacheStatistics.spills > 0)
        #expect(try PageWorkload.mismatch(pager, model) == nil)

        // Spill, then roll back: the journal restores what the spill overwrote.
        try pager.beginWrite()
        for page in model.live { try pager.withMutablePage(page) { $0.initializeMemory(as: UInt8.self, repeating: 0xEE) } }
        for _ in 0..<40 { _ = try pager.allocatePage() }
        let spillsBefore = pager.cacheStatistics.spills
        try pager.rollback()
        #expect(spillsBefore > 0)
        #expect(try PageWorkload.mismatch(pager, model) == nil)
        pager.close()
        let reopened = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: pageSize))
        #expect(try PageWorkload.mismatch(reopened, model) == nil)
    }

    @Test("the cache stays within its budget and counts hits, misses and evictions")
    func cacheBounds() throws {
        let disk = SimulatedDisk()
        let pager = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: 512, cacheSize: 32 * 512))
        try pager.beginWrite()
        for _ in 0..<200 { _ = try pager.allocatePage() }
        try pager.commit()
        try pager.beginRead()
        for page in 2...PageNumber(201) { try pager.withPage(page) { _ in } }
        for page in 190...PageNumber(201) { try pager.withPage(page) { _ in } }
        pager.endRead()
        let stats = pager.cacheStatistics
        #expect(stats.capacity == 32)
        #expect(stats.pages <= 32)
        #expect(stats.misses >= 200)
        #expect(stats.hits >= 12)
        #expect(stats.evictions > 0)
    }

    @Test("journal records are gathered: a rollback that never spilled writes nothing at all; a commit of more pages than a buffer holds journals every one and reads back after reopening", arguments: testPageSizes)
    func gatheredJournalRecords(pageSize: Int) throws {
        let disk = SimulatedDisk()
        let pager = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: pageSize))
        var model = PageModel()
        for seed in 1...8 as ClosedRange<UInt64> { model = try PageWorkload.runTransaction(pager, model: model, seed: seed, large: true) }
        let live = Array(model.live)
        #expect(live.count > Journal.bufferedRecords)
        // A few pages changed, then rolled back: no journal write, no database write.
        try pager.beginWrite()
        let operations = disk.operationCount
        for page in live.prefix(Journal.bufferedRecords - 1) { try pager.withMutablePage(page) { $0[0] = ~$0[0] } }
        try pager.rollback()
        #expect(disk.operationCount == operations)
        #expect(try PageWorkload.mismatch(pager, model) == nil)
        // Every live page changed and committed (power cuts in such commits: CrashTests).
        let before = pager.statistics
        try pager.beginWrite()
        for page in live { try pager.withMutablePage(page) { $0[0] = ~$0[0] } }
        try pager.commit()
        #expect(pager.statistics.journalRecords - before.journalRecords == UInt64(live.count) + 1, "the pages and the header page")
        pager.close()
        let reopened = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: pageSize))
        try reopened.beginRead()
        for page in live {
            let first = try reopened.withPage(page) { $0[0] }
            let expected = try #require(model.pages[page]?.first)
            #expect(first == ~expected)
        }
        reopened.endRead()
        reopened.close()
    }

    @Test("one durable commit costs three syncs")
    func syncsPerCommit() throws {
        let disk = SimulatedDisk()
        let pager = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: 4096))
        try pager.beginWrite()
        let page = try pager.allocatePage()
        try pager.commit()
        let before = pager.statistics
        for i in 0..<10 {
            try pager.beginWrite()
            try pager.withMutablePage(page) { $0[0] = UInt8(i) }
            try pager.commit()
        }
        let after = pager.statistics
        #expect(after.commits - before.commits == 10)
        #expect(after.syncs - before.syncs == 30)
        #expect(after.directorySyncs == before.directorySyncs)
    }

    @Test("a damaged page is a corruption error naming the page")
    func checksumFailure() throws {
        let disk = SimulatedDisk()
        let pager = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: 512))
        try pager.beginWrite()
        let page = try pager.allocatePage()
        try pager.withMutablePage(page) { $0[10] = 1 }
        try pager.commit()
        pager.close()

        var bytes = disk.contents(of: "/db")!
        bytes[Int(page - 1) * 512 + 100] ^= 0x40
        disk.setContents(of: "/db", to: bytes)
        let reopened = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: 512))
        try reopened.beginRead()
        defer { reopened.endRead() }
        let error = #expect(throws: StoreError.self) { try reopened.withPage(page) { _ in } }
        #expect(error?.code == .corrupt)
        #expect(error?.page == page)
        #expect(try reopened.checkPages().map(\.page) == [page])
    }

    @Test("foreign, empty, truncated and damaged-header files give typed errors")
    func hostileFiles() throws {
        let disk = SimulatedDisk()
        var readOnly = options(pageSize: 512)
        readOnly.readOnly = true

        disk.setContents(of: "/text", to: Array("hello, this is not a database at all".utf8))
        #expect(storeErrorCode { try Pager(path: "/text", fileSystem: disk, options: readOnly) } == .notADatabase)
        disk.setContents(of: "/empty", to: [])
        #expect(storeErrorCode { try Pager(path: "/empty", fileSystem: disk, options: readOnly) } == .notADatabase)
        #expect(storeErrorCode { try Pager(path: "/missing", fileSystem: disk, options: readOnly) } == .notFound)

        let pager = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: 512))
        try pager.beginWrite()
        for _ in 0..<4 { _ = try pager.allocatePage() }
        try pager.commit()
        pager.close()
        let good = disk.contents(of: "/db")!

        disk.setContents(of: "/short", to: Array(good.prefix(700)))
        #expect(storeErrorCode { try Pager(path: "/short", fileSystem: disk, options: readOnly) } == .corrupt)
        var header = good
        header[24] ^= 0x01
        disk.setContents(of: "/header", to: header)
        #expect(storeErrorCode { try Pager(path: "/header", fileSystem: disk, options: readOnly) } == .corrupt)
        var size = good
        size[20] = 0x33
        disk.setContents(of: "/pagesize", to: size)
        #expect(storeErrorCode { try Pager(path: "/pagesize", fileSystem: disk, options: readOnly) } == .corrupt)
        var version = good
        version[18] = 9
        disk.setContents(of: "/version", to: version)
        #expect(storeErrorCode { try Pager(path: "/version", fileSystem: disk, options: readOnly) } == .unsupportedVersion)
        #expect(storeErrorCode { try Pager(path: "/new", fileSystem: disk, options: options(pageSize: 1000)) } == .invalidArgument)
    }

    @Test("misuse is a typed error, not a crash")
    func misuse() throws {
        let disk = SimulatedDisk()
        let pager = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: 512))
        #expect(storeErrorCode { try pager.withPage(1) { _ in } } == .misuse)
        #expect(storeErrorCode { try pager.commit() } == .misuse)
        try pager.beginRead()
        #expect(storeErrorCode { try pager.allocatePage() } == .misuse)
        #expect(storeErrorCode { try pager.beginWrite() } == .misuse)
        #expect(storeErrorCode { try pager.withPage(99) { _ in } } == .invalidArgument)
        pager.endRead()
        try pager.beginWrite()
        #expect(storeErrorCode { try pager.freePage(1) } == .invalidArgument)
        try pager.rollback()
    }
}
