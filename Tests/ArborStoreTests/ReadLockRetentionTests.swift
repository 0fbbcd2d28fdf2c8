import ArborTestSupport
import Foundation
import Synchronization
import Testing
@testable import ArborStore

/// Lock rules 9 and 10 (`docs/locking.md`): a connection keeps its shared lock for a short while
/// after a read transaction, and gives it up to writers — of its own process at once, of other
/// processes within the retention.
@Suite("Read-lock retention")
struct ReadLockRetentionTests {
    /// A connection on `disk`; a fresh lock table unless one is given (a separate "process").
    func open(_ disk: SimulatedDisk, table: LockTable = LockTable(), retention: Duration = .zero,
              timeout: Duration = .milliseconds(100)) throws -> Pager {
        var options = PagerOptions()
        options.pageSize = 512
        options.busyTimeout = timeout
        options.lockTable = table
        options.readLockRetention = retention
        return try Pager(path: "/db", fileSystem: disk, options: options)
    }

    /// Writes `value` into the first byte of page 2 (creating it) and commits.
    func commitValue(_ pager: Pager, _ value: UInt8) throws {
        try pager.beginWrite()
        if pager.pageCount < 2 { _ = try pager.allocatePage() }
        try pager.withMutablePage(2) { $0[0] = value }
        try pager.commit()
    }

    func readValue(_ pager: Pager) throws -> UInt8 {
        try pager.beginRead()
        defer { pager.endRead() }
        return try pager.withPage(2) { $0[0] }
    }

    @Test("a resumed read transaction makes no I/O; without retention each one reads the header")
    func resumeMakesNoIO() throws {
        let disk = SimulatedDisk()
        let setup = try open(disk)
        try commitValue(setup, 7)
        setup.close()

        let retaining = try open(disk, retention: .seconds(60))
        #expect(try readValue(retaining) == 7)
        #expect(retaining.lockLevel == .shared, "the lock is kept after the transaction")
        let before = disk.operationCount
        for _ in 0..<10 { #expect(try readValue(retaining) == 7) }
        #expect(disk.operationCount == before)
        retaining.close()

        let plain = try open(disk)
        #expect(try readValue(plain) == 7)
        #expect(plain.lockLevel == .none)
        let plainBefore = disk.operationCount
        #expect(try readValue(plain) == 7)
        #expect(disk.operationCount > plainBefore, "a fresh lock re-reads the header")
        plain.close()
    }

    @Test("a writer of the same process revokes retained locks at once, and the reader then sees its commit")
    func sameProcessWriterRevokes() throws {
        let disk = SimulatedDisk()
        let table = LockTable()
        let writer = try open(disk, table: table, timeout: .milliseconds(50))
        try commitValue(writer, 1)
        let reader = try open(disk, table: table, retention: .seconds(60))
        #expect(try readValue(reader) == 1)   // page 2 is now in the reader's cache
        // The retention is far longer than the writer's busy timeout: the commit succeeds only
        // because it revokes the retained lock.
        try commitValue(writer, 2)
        #expect(try readValue(reader) == 2, "the revoked reader took the lock afresh and dropped its stale cache")
        // It retains again, and a write transaction on the retaining connection itself works.
        try commitValue(reader, 3)
        #expect(try readValue(writer) == 3)
        reader.close()
        writer.close()
    }

    @Test("another process's writer is kept out by a retained lock, and gets in once it expires")
    func otherProcessWaitsForExpiry() throws {
        let disk = SimulatedDisk()
        let setup = try open(disk)
        try commitValue(setup, 1)
        setup.close()

        // A long retention holds the operating-system lock: the other process cannot commit.
        let holder = try open(disk, retention: .seconds(60))
        #expect(try readValue(holder) == 1)
        let blocked = try open(disk, timeout: .milliseconds(30))
        try blocked.beginWrite()
        try blocked.withMutablePage(2) { $0[0] = 9 }
        #expect(storeErrorCode { try blocked.commit() } == .busy)
        try blocked.rollback()
        blocked.close()
        holder.close()

        // A short one is given up by the idle timer: the writer gets in within its busy timeout,
        // and the reader's next transaction sees the commit.
        let reader = try open(disk, retention: .milliseconds(20))
        #expect(try readValue(reader) == 1)
        let writer = try open(disk, timeout: .seconds(10))
        try commitValue(writer, 2)
        #expect(try readValue(reader) == 2)
        reader.close()
        writer.close()
    }

    @Test("closing a connection releases its retained lock")
    func closeReleases() throws {
        let disk = SimulatedDisk()
        let setup = try open(disk)
        try commitValue(setup, 1)
        setup.close()
        let reader = try open(disk, retention: .seconds(60))
        #expect(try readValue(reader) == 1)
        reader.close()
        let writer = try open(disk, timeout: .milliseconds(30))
        try commitValue(writer, 2)
        writer.close()
    }

    @Test("connections reading without pause, alone or taking turns, cannot keep another process's writer out", arguments: [1, 2])
    func busyReadersDoNotStarveWriters(connections: Int) throws {
        let disk = SimulatedDisk()
        let setup = try open(disk)
        try commitValue(setup, 1)
        setup.close()

        let table = LockTable()
        let readers = Handoff(try (0..<connections).map { _ in try open(disk, table: table, retention: .milliseconds(5), timeout: .seconds(10)) })
        let stop = Atomic<Bool>(false)
        let failures = Mutex<[String]>([])
        let seenCommit = Atomic<Bool>(false)
        let finished = DispatchSemaphore(value: 0)
        // A thread of its own: a block on a global queue may wait for a worker while other
        // tests hold them all, and the wait below would then never end.
        Thread {
            // One thread, the connections taking turns: each one's lock is retained while the
            // other reads, so the process always holds the operating-system lock unless
            // retention is given up as rule 10 says.
            var turn = 0
            while !stop.load(ordering: .relaxed) {
                do {
                    let value = try readValue(readers.value[turn % readers.value.count])
                    if value == 2 { seenCommit.store(true, ordering: .relaxed) }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                    break
                }
                turn += 1
            }
            finished.signal()
        }.start()
        let writer = try open(disk, timeout: .seconds(10))
        try commitValue(writer, 2)
        // The readers go on and see the commit; then stop them (a bounded wait: a failure, never
        // a hang).
        let deadline = ContinuousClock.now + .seconds(60)
        while !seenCommit.load(ordering: .relaxed) && failures.withLock({ $0.isEmpty }) {
            guard ContinuousClock.now < deadline else {
                failures.withLock { $0.append("the readers did not see the commit within 60 s") }
                break
            }
            Thread.sleep(forTimeInterval: 0.001)
        }
        stop.store(true, ordering: .relaxed)
        finished.wait()
        #expect(failures.withLock { $0 }.isEmpty)
        for reader in readers.value { reader.close() }
        writer.close()
    }
}

/// Hands connections to the one thread that uses them while the test waits.
final class Handoff<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
