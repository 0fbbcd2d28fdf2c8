import ArborTestSupport
import Foundation
import InMemoryLogging
import Logging
import MetricsTestKit
import Testing
@testable import ArborStore

/// Issue 25, item 6: the engine's log (`arbor.store`) and metrics (docs/observability.md), seen
/// through an in-memory log handler and a test metrics factory given in the options.
@Suite("Engine observability")
struct EngineObservabilityTests {
    /// Options on `disk` logging to `handler` and counting into `metrics`.
    static func options(_ disk: SimulatedDisk, _ table: LockTable, _ handler: InMemoryLogHandler, _ metrics: TestMetrics) -> DatabaseOptions {
        var options = DatabaseOptions()
        options.fileSystem = disk
        options.lockTable = table
        options.pageSize = 512
        options.cacheSize = 16 * 512
        options.logger = Logger(label: "arbor.store") { _ in handler }
        options.logger.logLevel = .trace
        options.metricsFactory = metrics
        return options
    }

    /// Puts keys `from..<from + count` in the tree "t", each with 60 bytes of `(key + salt) % 251`
    /// (a put of the bytes a key already holds changes no page: a rewrite takes another salt).
    static func fill(_ database: Database, from: Int, count: Int, salt: Int = 0) throws {
        try database.write { transaction in
            let tree = try transaction.tree(named: "t", create: true)!
            for key in from..<(from + count) { try tree.put(KeyEncoding.encode([.int(Int64(key))]), [UInt8](repeating: UInt8((key + salt) % 251), count: 60)) }
        }
    }

    @Test("a hot journal rolled back at open is a warning naming the pages restored, and counts as a recovery; opening and closing log at debug")
    func recoveryIsLogged() throws {
        let disk = SimulatedDisk()
        let path = "/observed.db"
        let quiet = DatabaseOptions.quiet(disk)
        let setup = try Database(path: path, options: quiet)
        try Self.fill(setup, from: 0, count: 40)
        setup.close()
        let base = disk.snapshot()
        // A dry run counts the operations of a transaction that rewrites many pages.
        let dry = try Database(path: path, options: quiet)
        let before = disk.operationCount
        try Self.fill(dry, from: 0, count: 40, salt: 1)
        let operations = disk.operationCount - before
        dry.close()
        // A power cut at each of the transaction's last operations, from the last back, until
        // one leaves a hot journal (the database written, the journal not yet invalidated).
        for back in 1...6 {
            disk.restore(base)
            let writer = try Database(path: path, options: quiet)
            disk.inject(.powerCut(.applyAll), atOperation: operations + 1 - back)
            _ = try? Self.fill(writer, from: 0, count: 40, salt: 1)
            writer.close()
            disk.clearFaults()
            let handler = InMemoryLogHandler()
            let metrics = TestMetrics()
            let reopened = try Database(path: path, options: Self.options(disk, LockTable(), handler, metrics))
            let recoveries = metrics.counterTotal(label: "arbor_store_recoveries")
            guard recoveries > 0 else {
                reopened.close()
                continue
            }
            #expect(recoveries == 1)
            let warning = try #require(handler.entries.first { $0.level == .warning })
            #expect("\(warning.message)".contains("rolled back a hot journal"))
            let restored = Int("\(warning.metadata["arbor.pagesRestored"] ?? "0")") ?? 0
            #expect(restored > 0 && warning.metadata["arbor.path"] == "\(path)")
            #expect(handler.entries.contains { $0.level == .debug && "\($0.message)".hasPrefix("opened \(path)") })
            reopened.close()
            #expect(handler.entries.contains { $0.level == .debug && "\($0.message)" == "closed \(path)" })
            #expect(handler.entries.allSatisfy { $0.level <= .warning }, "nothing above warning")
            return
        }
        Issue.record("no power cut near the end of the transaction left a hot journal")
    }

    @Test("commits, syncs, pages written, cache hits and misses are counted once per transaction; the commit is timed")
    func transactionMetrics() throws {
        let disk = SimulatedDisk()
        let handler = InMemoryLogHandler()
        let metrics = TestMetrics()
        let database = try Database(path: "/metrics.db", options: Self.options(disk, LockTable(), handler, metrics))
        // Making the file was a commit of its own.
        let file = ("path", "/metrics.db")
        let made = metrics.counterTotal(label: "arbor_store_commits")
        let madeSyncs = metrics.counterTotal(label: "arbor_store_syncs", dimensions: [file, ("file", "database")])
        for round in 0..<3 { try Self.fill(database, from: round * 50, count: 50) }
        #expect(metrics.counterTotal(label: "arbor_store_commits") == made + 3)
        #expect(metrics.counterTotal(label: "arbor_store_syncs", dimensions: [file, ("file", "database")]) == madeSyncs + 3)
        #expect(metrics.counterTotal(label: "arbor_store_syncs", dimensions: [file, ("file", "journal")]) >= 6)
        #expect(metrics.counterTotal(label: "arbor_store_pages_written") > 3)
        #expect(try metrics.expectTimer("arbor_store_commit_duration", [file]).values.count == 3)
        let missesBefore = metrics.counterTotal(label: "arbor_store_page_cache_misses")
        let hitsBefore = metrics.counterTotal(label: "arbor_store_page_cache_hits")
        var found = 0
        try database.read { transaction in
            try transaction.tree(named: "t")!.forEach { _, _ in
                found += 1
                return true
            }
        }
        #expect(found == 150)
        #expect(metrics.counterTotal(label: "arbor_store_page_cache_hits") + metrics.counterTotal(label: "arbor_store_page_cache_misses")
                > hitsBefore + missesBefore, "the read's page lookups were reported at its end")
        #expect(try metrics.expectGauge("arbor_store_page_cache_pages", [file]).lastValue ?? 0 > 0)
        #expect(!handler.entries.contains { $0.level >= .info }, "nothing at info or above on these paths")
    }

    @Test("a lock not granted within the busy timeout is a busy count and a debug line (the caller receives the error), nothing above debug")
    func lockWaits() throws {
        let disk = SimulatedDisk()
        let table = LockTable()
        let handler = InMemoryLogHandler()
        let metrics = TestMetrics()
        var options = Self.options(disk, table, handler, metrics)
        options.busyTimeout = .milliseconds(30)
        options.slowLockWait = .milliseconds(5)
        let database = try Database(path: "/locks.db", options: options)
        try Self.fill(database, from: 0, count: 5)
        // Another connection (another process: its own database object on the same lock table)
        // holds the write lock through a commit-time exclusive lock while the first writes.
        var holderOptions = DatabaseOptions.quiet(disk)
        holderOptions.lockTable = table
        let holder = try Pager(path: "/locks.db", fileSystem: disk, options: holderOptions.pagerOptions)
        try holder.beginRead()
        // Readers block a commit: the writer waits for its exclusive lock, past the busy timeout.
        let error = #expect(throws: StoreError.self) { try Self.fill(database, from: 5, count: 5) }
        #expect(error?.code == .busy)
        #expect(metrics.counterTotal(label: "arbor_store_busy") == 1)
        let line = try #require(handler.entries.first { "\($0.message)".contains("gave up waiting") })
        #expect(line.level == .debug && line.metadata["arbor.lock"] == "exclusive")
        #expect(!handler.entries.contains { $0.level > .debug }, "the caller has the error: nothing above debug")
        holder.endRead()
        holder.close()
        try Self.fill(database, from: 5, count: 5)
    }

    @Test("a lock granted after a wait of at least slowLockWait is an info line naming the lock and the wait (nobody else is told)")
    func slowLockWaitIsNoticed() throws {
        let disk = SimulatedDisk()
        let table = LockTable()
        let handler = InMemoryLogHandler()
        var options = Self.options(disk, table, handler, TestMetrics())
        options.busyTimeout = .seconds(30)
        options.slowLockWait = .milliseconds(1)
        let database = try Database(path: "/slow.db", options: options)
        try Self.fill(database, from: 0, count: 5)
        var holderOptions = DatabaseOptions.quiet(disk)
        holderOptions.lockTable = table
        let holder = try Pager(path: "/slow.db", fileSystem: disk, options: holderOptions.pagerOptions)
        try holder.beginRead()
        // The reader lets go once the writer is in its transaction (it holds the reserved lock,
        // so the reader cannot take it) and a while has passed: the writer's commit waits for it.
        let released = DispatchSemaphore(value: 0)
        let box = PagerBox(holder)
        let reader = Thread {
            while (try? box.pager.tryLock(.reserved)) == true { box.pager.unlock(to: .shared) }
            usleep(50_000)
            box.pager.endRead()
            released.signal()
        }
        reader.start()
        try Self.fill(database, from: 5, count: 5)
        released.wait()
        holder.close()
        let notice = try #require(handler.entries.first { $0.level == .info && $0.metadata["arbor.lock"] == "exclusive" })
        #expect("\(notice.message)".hasPrefix("waited "))
    }
}

extension DatabaseOptions {
    /// Options on `disk` that log only critical messages (for the set-up around a test).
    static func quiet(_ disk: SimulatedDisk) -> DatabaseOptions {
        var options = DatabaseOptions()
        options.fileSystem = disk
        options.pageSize = 512
        options.cacheSize = 16 * 512
        options.logger = .quietStore
        return options
    }
}
