import ArborTestSupport
import Foundation
import Testing
@testable import ArborStore

/// Defects a review of the engine found (each test fails, or crashes, without its fix): locks,
/// journals that belong elsewhere, errors in the middle of a change, numbers read from the file.
@Suite("Engine robustness")
struct RobustnessTests {
    /// A scratch directory on the real file system (locks, links).
    private func scratch(_ name: String) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-\(name)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test("a read-only connection opened first does not stop the process's writers (its lock descriptor is read-write)")
    func readOnlyConnectionFirst() throws {
        let directory = try scratch("readonly-first")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/db"
        let creator = try Database(path: path)
        try creator.write { (tx) throws in try tx.createTree(named: "t").put([1], [1]) }
        creator.close()

        var readOnly = DatabaseOptions()
        readOnly.readOnly = true
        let reader = try Database(path: path, options: readOnly)
        defer { reader.close() }
        let writer = try Database(path: path)
        defer { writer.close() }
        // Before the fix: the write lock failed (EBADF on the shared read-only descriptor), the
        // connection kept its shared lock, and the next transaction on it trapped.
        try writer.write { (tx) throws in try tx.tree(named: "t")!.put([2], [2]) }
        try writer.read { (tx) throws in #expect(try tx.tree(named: "t")!.get([2]) == [2]) }
        try reader.read { (tx) throws in #expect(try tx.tree(named: "t")!.get([2]) == [2]) }
    }

    @Test("a file opened through a symbolic link keeps its journal under its real name")
    func journalFollowsTheRealPath() throws {
        let directory = try scratch("symlink")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let real = directory + "/real.arbor", link = directory + "/link.arbor"
        let creator = try Database(path: real)
        try creator.write { (tx) throws in try tx.createTree(named: "t").put([1], [1]) }
        creator.close()
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
        let linked = try Database(path: link)
        try linked.write { (tx) throws in try tx.tree(named: "t")!.put([2], [2]) }
        linked.close()
        // One journal for one file, whatever name a connection used: a second journal under the
        // link's name would be missed by connections opening the real path.
        #expect(FileManager.default.fileExists(atPath: real + "-journal"))
        #expect(!FileManager.default.fileExists(atPath: link + "-journal"))
    }

    @Test("a hot journal of another database is refused, not replayed over this file")
    func foreignJournalRefused() throws {
        let disk = SimulatedDisk()
        func make(_ path: String) throws -> (UInt64, UInt64) {
            let pager = try Pager(path: path, fileSystem: disk, options: options(pageSize: 512))
            defer { pager.close() }
            try pager.beginWrite()
            let page = try pager.allocatePage()
            try pager.withMutablePage(page) { $0[0] = 7 }
            try pager.commit()
            return pager.currentHeader.fileID
        }
        let first = try make("/db")
        let other = try make("/backup")
        #expect(first != other)
        // The backup is copied over the database while the database's interrupted first commit
        // left a hot journal (no records, original length 0: replaying it empties the file).
        let backup = try #require(disk.contents(of: "/backup"))
        disk.setContents(of: "/db", to: backup)
        let journal = Journal(fileSystem: disk, path: "/db-journal", pageSize: 512)
        _ = try journal.openOrCreate()
        try journal.writeHeader(Journal.Header(pageSize: 512, nonce: 1, originalPageCount: 0, recordCount: 0,
                                               fileID: first))
        try journal.sync()
        journal.close()

        #expect {
            try Pager(path: "/db", fileSystem: disk, options: options(pageSize: 512)).close()
        } throws: { error in
            (error as? StoreError)?.code == .corrupt && "\(error)".contains("belongs to another database")
        }
        #expect(disk.contents(of: "/db") == backup, "the file was changed by a journal that is not its own")
    }

    @Test("every connection syncs the directory the first time it relies on a journal it did not create")
    func directorySyncedByEveryConnection() throws {
        let disk = SimulatedDisk()
        let first = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: 512))
        try first.beginWrite()
        let page = try first.allocatePage()
        try first.commit()
        #expect(first.statistics.directorySyncs == 1)
        first.close()
        // The journal file exists now; a new connection (another process) writes into it.
        let second = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: 512))
        defer { second.close() }
        try second.beginWrite()
        try second.withMutablePage(page) { $0[0] = 1 }
        try second.commit()
        #expect(second.statistics.directorySyncs == 1)
    }

    @Test("a spill that fails while a page is pinned (a read inside Tree.forEach) is an error, not a trap")
    func spillFailureUnderPin() throws {
        let disk = SimulatedDisk()
        let pager = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: 512, cacheSize: 16 * 512))
        try pager.beginWrite()
        var pages: [PageNumber] = []
        for i in 0..<40 {
            let page = try pager.allocatePage()
            try pager.withMutablePage(page) { $0[0] = UInt8(i) }
            pages.append(page)
        }
        try pager.commit()
        let capacity = pager.cacheStatistics.capacity

        try pager.beginWrite()
        // Every frame but one dirty: the next page loaded takes the last, the one after spills.
        var next = 0
        while pager.cache.dirtyCount < capacity - 1 {
            try pager.withMutablePage(pages[next]) { $0[1] = 1 }
            next += 1
        }
        var failure: (any Error)?
        try pager.withPage(pages[30]) { _ in
            disk.inject(.diskFull, atOperation: 1, persistent: true)
            do {
                try pager.withPage(pages[31]) { _ in }
            } catch {
                failure = error
            }
        }
        #expect((failure as? StoreError)?.code == .full)
        disk.clearFaults()
        pager.close()

        // Nothing of the failed transaction reached the file.
        let reopened = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: 512))
        defer { reopened.close() }
        try reopened.beginRead()
        for (i, page) in pages.enumerated() {
            try reopened.withPage(page) { body in
                #expect(body[0] == UInt8(i))
                #expect(body[1] == 0)
            }
        }
        reopened.endRead()
    }

    @Test("a change that failed midway (busy during a spill) makes the transaction roll back even when its closure goes on")
    func failedChangeNeverCommits() throws {
        let disk = SimulatedDisk()
        let writer = try Database(path: "/db", options: simulatedOptions(disk, cacheSize: 16 * 512))
        defer { writer.close() }
        try writer.write { (tx) throws in try tx.createTree(named: "t").put([0], [0]) }
        // Another process reads; the writer's spill waits for it past the busy timeout.
        let reader = try Database(path: "/db", options: simulatedOptions(disk))
        let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? reader.read { _ in
                holding.signal()
                release.wait()
            }
            reader.close()
            done.signal()
        }
        holding.wait()
        var caught: (any Error)?
        #expect {
            try writer.write { (tx) throws in
                let tree = try #require(try tx.tree(named: "t"))
                do {
                    for i in 0..<5000 { try tree.put(KeyEncoding.encode([.int(Int64(i))]), [UInt8](repeating: 1, count: 40)) }
                } catch {
                    caught = error
                }
                // The reader goes: a commit would now succeed, with a tree the busy error may
                // have left half split.
                release.signal()
                done.wait()
            }
        } throws: { error in
            (error as? StoreError)?.code == .busy
        }
        #expect((caught as? StoreError)?.code == .busy)
        try writer.read { (tx) throws in
            let tree = try #require(try tx.tree(named: "t"))
            #expect(try tree.get(KeyEncoding.encode([.int(1)])) == nil, "the failed transaction committed")
        }
        #expect(try writer.checkIntegrity().isSound)
    }

    @Test("a sequence number read from the file that leaves no room is an error, not an overflow trap")
    func sequenceOverflow() throws {
        let disk = SimulatedDisk()
        let database = try Database(path: "/db", options: simulatedOptions(disk))
        defer { database.close() }
        try database.write { (tx) throws in
            let tree = try tx.createTree(named: "t")
            _ = try tree.nextSequence(reserving: Int.max)
            _ = try tree.nextSequence(reserving: Int.max)
            #expect {
                try tree.nextSequence(reserving: Int.max)
            } throws: { error in
                (error as? StoreError)?.code == .corrupt
            }
        }
    }
}
