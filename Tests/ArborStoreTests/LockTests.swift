import ArborTestSupport
import Foundation
import Testing
@testable import ArborStore

/// Locking between connections of one process, on the simulated disk (with separate lock tables,
/// as separate processes) and on real files (one shared lock table, OFD locks underneath).
@Suite("Locking")
struct LockTests {
    enum Setup: CaseIterable, CustomStringConvertible {
        /// Two "processes" on a simulated disk: each connection has its own lock table.
        case simulatedProcesses
        /// Real files, connections of this process sharing the process-wide lock table.
        case posixOneProcess

        var description: String { self == .simulatedProcesses ? "simulated processes" : "POSIX, one process" }
    }

    final class Fixture {
        let fileSystem: any FileSystem
        let path: String
        let setup: Setup
        let directory: String?

        init(_ setup: Setup) throws {
            self.setup = setup
            if setup == .simulatedProcesses {
                fileSystem = SimulatedDisk()
                path = "/db"
                directory = nil
            } else {
                fileSystem = PosixFileSystem.shared
                let dir = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-locks-\(UUID().uuidString)").path
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
                directory = dir
                path = dir + "/db"
            }
        }

        deinit {
            if let directory { try? FileManager.default.removeItem(atPath: directory) }
        }

        func open(timeout: Duration = .milliseconds(100)) throws -> Pager {
            var options = PagerOptions()
            options.pageSize = 512
            options.busyTimeout = timeout
            options.lockTable = setup == .simulatedProcesses ? LockTable() : .processWide
            return try Pager(path: path, fileSystem: fileSystem, options: options)
        }
    }

    @Test("readers share; one writer at a time; a writer commits once readers leave", arguments: Setup.allCases)
    func readersAndWriters(setup: Setup) throws {
        let fixture = try Fixture(setup)
        let a = try fixture.open(), b = try fixture.open(), c = try fixture.open()
        try a.beginRead()
        try b.beginRead()
        try c.beginWrite()
        a.endRead()
        #expect(storeErrorCode { try a.beginWrite() } == .busy)
        let page = try c.allocatePage()
        try c.withMutablePage(page) { $0[0] = 1 }
        // b still reads: the commit cannot write the file.
        #expect(storeErrorCode { try c.commit() } == .busy)
        #expect(c.transactionState == .write)
        b.endRead()
        try c.commit()
        try b.beginRead()
        #expect(b.pageCount == 2)
        #expect(try b.withPage(page) { $0[0] } == 1)
        b.endRead()
    }

    @Test("a pending writer keeps new readers out, so writers do not starve", arguments: Setup.allCases)
    func pendingBlocksNewReaders(setup: Setup) throws {
        let fixture = try Fixture(setup)
        let writer = try fixture.open(), reader = try fixture.open(), latecomer = try fixture.open()
        try reader.beginRead()
        try writer.beginWrite()
        #expect(try writer.tryLock(.pending))
        #expect(try !writer.tryLock(.exclusive))
        #expect(storeErrorCode { try latecomer.beginRead() } == .busy)
        // The reader already in finishes undisturbed.
        #expect(try reader.withPage(1) { _ in true })
        reader.endRead()
        _ = try writer.allocatePage()
        try writer.commit()
        try latecomer.beginRead()
        #expect(latecomer.pageCount == 2)
        latecomer.endRead()
    }

    @Test("a commit by another connection invalidates cached pages", arguments: Setup.allCases)
    func changeCounterInvalidatesCache(setup: Setup) throws {
        let fixture = try Fixture(setup)
        let a = try fixture.open(), b = try fixture.open()
        try a.beginWrite()
        let page = try a.allocatePage()
        try a.withMutablePage(page) { $0[0] = 1 }
        try a.commit()

        try b.beginRead()
        #expect(try b.withPage(page) { $0[0] } == 1)
        b.endRead()
        try b.beginRead()
        let hits = b.cacheStatistics.hits
        #expect(try b.withPage(page) { $0[0] } == 1)
        #expect(b.cacheStatistics.hits == hits + 1)
        b.endRead()

        try a.beginWrite()
        try a.withMutablePage(page) { $0[0] = 2 }
        try a.commit()
        try b.beginRead()
        #expect(try b.withPage(page) { $0[0] } == 2)
        b.endRead()
    }

    @Test("a writer waiting for the lock gets it when the holder commits, within the busy timeout")
    func waitingWriter() async throws {
        let fixture = try Fixture(.posixOneProcess)
        let first = try fixture.open(timeout: .seconds(10))
        try first.beginWrite()
        let started = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let path = fixture.path
        let result = Mutex<StoreError.Code?>(StoreError.Code("not run"))
        Thread {
            var options = PagerOptions()
            options.busyTimeout = .seconds(10)
            let code = storeErrorCode {
                let second = try Pager(path: path, options: options)
                started.signal()
                try second.beginWrite()
                _ = try second.allocatePage()
                try second.commit()
                second.close()
            }
            result.withLock { $0 = code }
            done.signal()
        }.start()
        started.wait()
        _ = try first.allocatePage()
        try first.commit()
        done.wait()
        #expect(result.withLock { $0 } == nil)
        try first.beginRead()
        #expect(first.pageCount == 3)
        first.endRead()
    }

    @Test("several 'processes' creating and writing one new file at the same moment neither deadlock nor lose commits")
    func simultaneousCreation() throws {
        let fixture = try Fixture(.posixOneProcess)
        let workers = 6, commits = 20
        // The race is at creation: repeat it on fresh files.
        for round in 0..<5 {
            let path = fixture.path + "-\(round)"
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: workers) { worker in
                var options = PagerOptions()
                options.pageSize = 512
                options.busyTimeout = .seconds(20)
                options.lockTable = LockTable()   // a separate "process": OFD locks conflict
                do {
                    let pager = try Pager(path: path, options: options)
                    defer { pager.close() }
                    for _ in 0..<commits {
                        try pager.beginWrite()
                        _ = try pager.allocatePage()
                        try pager.commit()
                    }
                } catch {
                    failures.withLock { $0.append("worker \(worker): \(error)") }
                }
            }
            #expect(failures.withLock { $0 }.isEmpty, "round \(round): \(failures.withLock { $0 })")
            var options = PagerOptions()
            options.lockTable = LockTable()
            let pager = try Pager(path: path, options: options)
            try pager.beginRead()
            #expect(pager.pageCount == PageNumber(1 + workers * commits))
            pager.endRead()
            #expect(try pager.checkPages().isEmpty)
        }
    }

    @Test("closing one handle does not drop another handle's locks (OFD locks, one lock table per inode)")
    func closeKeepsLocks() throws {
        let fixture = try Fixture(.posixOneProcess)
        let holder = try fixture.open()
        try holder.beginWrite()
        // Another handle on the same file opens and closes its descriptors.
        let transient = try fixture.open()
        transient.close()
        // A separate process would still see the reserved lock: check with a raw OFD probe.
        let probe = try PosixFileSystem.shared.open(fixture.path, mode: .readWrite)
        defer { probe.close() }
        #expect(try !probe.lock(.exclusive, offset: LockBytes.reserved, length: 1))
        try holder.rollback()
        #expect(try probe.lock(.exclusive, offset: LockBytes.reserved, length: 1))
    }
}

import Synchronization
