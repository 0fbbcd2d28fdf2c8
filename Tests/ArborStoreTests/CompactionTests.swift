@testable import ArborStore
import ArborTestSupport
import Foundation
import Synchronization
import Testing

/// Compaction, restoring a file's contents from another, and online backup
/// (docs/commit-protocol.md, "Replacing a file's contents: compaction and restore" and
/// "Online backup").
@Suite("Compaction, restore and backup")
struct CompactionTests {
    /// Every tree's name, sequence and entries.
    static func contents(_ database: Database) throws -> [String: (sequence: UInt64, entries: [[UInt8]: [UInt8]])] {
        try database.read { transaction in
            var result: [String: (UInt64, [[UInt8]: [UInt8]])] = [:]
            for descriptor in try transaction.trees() {
                let tree = try #require(try transaction.tree(named: descriptor.name))
                var entries: [[UInt8]: [UInt8]] = [:]
                try tree.forEach { key, value in
                    entries[Array(key)] = Array(value)
                    return true
                }
                result[descriptor.name] = (descriptor.sequence, entries)
            }
            return result
        }
    }

    /// The entries of `tree` (-1 when there is none).
    static func count(_ tree: Tree?) throws -> Int {
        guard let tree else { return -1 }
        var count = 0
        try tree.forEach { _, _ in
            count += 1
            return true
        }
        return count
    }

    /// Whether two databases hold the same trees, sequences and entries.
    static func same(_ a: Database, _ b: Database) throws -> Bool {
        let (x, y) = (try contents(a), try contents(b))
        return x.keys == y.keys && x.allSatisfy { name, tree in tree.sequence == y[name]!.sequence && tree.entries == y[name]!.entries }
    }

    /// Fills a database with three trees of `count` entries (values large enough for overflow
    /// and compression now and then), then deletes two entries in three: many free pages.
    static func fill(_ database: Database, count: Int = 900) throws {
        try database.write { transaction in
            try transaction.setUserVersion(7)
            for name in ["a", "b", "c"] {
                let tree = try #require(try transaction.tree(named: name, create: true))
                for i in 0..<count {
                    _ = try tree.nextSequence()
                    let value = Array(repeating: UInt8(i % 251), count: i % 97 == 0 ? 2_000 : 40 + i % 60)
                    try tree.put(KeyEncoding.encode([.int(Int64(i))]), value)
                }
            }
        }
        try database.write { transaction in
            for name in ["a", "b", "c"] {
                let tree = try #require(try transaction.tree(named: name))
                for i in 0..<count where i % 3 != 0 { _ = try tree.delete(KeyEncoding.encode([.int(Int64(i))])) }
            }
            _ = try transaction.createTree(named: "empty")
        }
    }

    @Test("compaction rewrites the file without its free pages: smaller, the same trees, sequences and entries, the user version and file ID kept, sound")
    func compactionShrinks() throws {
        let disk = SimulatedDisk()
        let options = simulatedOptions(disk)
        let database = try Database(path: "/db", options: options)
        defer { database.close() }
        try Self.fill(database)
        let before = try Self.contents(database)
        let header = try database.read { $0.header }
        #expect(header.freelistCount > 50)
        let report = try database.compact()
        #expect(report.pagesBefore == Int(header.pageCount) && report.pagesAfter < report.pagesBefore - 40, "\(report)")
        let after = try database.read { $0.header }
        #expect(Int(after.pageCount) == report.pagesAfter && after.freelistCount <= 2)
        #expect(after.userVersion == 7 && after.fileID == header.fileID && after.changeCounter > header.changeCounter)
        #expect(disk.contents(of: "/db")?.count == Int(after.pageCount) * after.pageSize, "the file shrank")
        let contents = try Self.contents(database)
        #expect(contents.keys == before.keys)
        for (name, tree) in before { #expect(contents[name]!.sequence == tree.sequence && contents[name]!.entries == tree.entries, "\(name)") }
        #expect(try database.checkIntegrity().isSound)
        #expect(try !disk.exists("/db-compact"), "the separate file is gone")
        // It goes on as any file: writes, growth, another compaction.
        try database.write { try $0.tree(named: "a")!.put(bytes("new"), bytes("value")) }
        try database.compact()
        #expect(try database.read { try $0.tree(named: "a")!.get(bytes("new")) } == bytes("value"))
    }

    @Test("another connection open on the file during a compaction, and one reading in another thread, see the compacted contents afterwards and write to it")
    func otherConnections() throws {
        let disk = SimulatedDisk()
        var options = simulatedOptions(disk)
        options.busyTimeout = .seconds(10)
        let database = try Database(path: "/db", options: options)
        defer { database.close() }
        try Self.fill(database)
        let other = try Database(path: "/db", options: options)
        defer { other.close() }
        #expect(try Self.same(database, other))
        // A reader in the middle of a read transaction holds the compaction off until it ends.
        let reading = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        let seen = Mutex<Int>(0)
        DispatchQueue.global().async {
            try? other.read { transaction in
                reading.signal()
                release.wait()
                let count = try Self.count(transaction.tree(named: "a"))
                seen.withLock { $0 = count }
            }
            done.signal()
        }
        reading.wait()
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { release.signal() }
        try database.compact()
        done.wait()
        #expect(seen.withLock { $0 } == 300, "the reader's snapshot stayed whole")
        #expect(try Self.same(database, other), "the other connection reads the compacted file")
        try other.write { try $0.tree(named: "b")!.put(bytes("from other"), bytes("1")) }
        #expect(try database.read { try $0.tree(named: "b")!.get(bytes("from other")) } == bytes("1"))
        #expect(try other.checkIntegrity().isSound)
    }

    @Test("a power cut at every I/O operation of a compaction, three ways, leaves the file as it was or compacted, the same contents either way, sound; the next compaction clears what a cut left")
    func powerCutEverywhere() throws {
        let disk = SimulatedDisk()
        var options = simulatedOptions(disk, cacheSize: 16 << 10)
        options.logger.logLevel = .critical
        do {
            let database = try Database(path: "/db", options: options)
            try Self.fill(database, count: 300)
            database.close()
        }
        disk.syncAll()
        let image = disk.snapshot()
        let reference = try Database(path: "/reference", options: { var o = options; o.fileSystem = MemoryFileSystem(); o.lockTable = LockTable(); return o }())
        defer { reference.close() }
        try Self.fill(reference, count: 300)
        let originalPages = try Database(path: "/db", options: options).read { $0.header.pageCount }
        let start = disk.operationCount
        do {
            let database = try Database(path: "/db", options: options)
            try database.compact()
            database.close()
        }
        let operations = disk.operationCount - start
        #expect(operations > 50)
        var outcomes = (old: 0, new: 0)
        for point in 1...operations {
            for damage: SimulatedDisk.PowerCutDamage in [.applyAll, .dropAll, .random(seed: UInt64(point))] {
                disk.restore(image)
                disk.inject(.powerCut(damage), atOperation: point)
                if let database = try? Database(path: "/db", options: options) {
                    _ = try? database.compact()
                    database.close()
                }
                disk.clearFaults()
                let database = try Database(path: "/db", options: options)
                defer { database.close() }
                let pages = try database.read { $0.header.pageCount }
                if pages == originalPages { outcomes.old += 1 } else { outcomes.new += 1 }
                #expect(try Self.same(database, reference), "crash at \(point) \(damage): contents changed")
                #expect(try database.checkIntegrity().isSound, "crash at \(point) \(damage)")
            }
        }
        #expect(outcomes.old > 0 && outcomes.new > 0, "\(outcomes)")
        print("compaction crash images checked: \(operations) operations × 3 damages; as it was \(outcomes.old), compacted \(outcomes.new)")
        let database = try Database(path: "/db", options: options)
        defer { database.close() }
        try database.compact()
        #expect(try !disk.exists("/db-compact") && !disk.exists("/db-compact-journal"))
    }

    @Test("replacing a file's contents with another file's: the other connections see the new contents; a source of another page size is refused and changes nothing")
    func restore() throws {
        let disk = SimulatedDisk()
        let options = simulatedOptions(disk)
        let database = try Database(path: "/db", options: options)
        defer { database.close() }
        try Self.fill(database, count: 200)
        let source = try Database(path: "/source", options: options)
        try source.write { try $0.tree(named: "only", create: true)!.put(bytes("k"), bytes("v")) }
        source.close()
        let other = try Database(path: "/db", options: options)
        defer { other.close() }
        try database.replaceContents(withContentsOf: "/source", options: options)
        #expect(try other.read { try $0.trees().map(\.name) } == ["only"])
        #expect(try other.read { try $0.tree(named: "only")!.get(bytes("k")) } == bytes("v"))
        #expect(try database.checkIntegrity().isSound)
        var large = options
        large.pageSize = 4096
        _ = try Database(path: "/large", options: large)
        let before = try Self.contents(database)
        let error = try #require(throws: StoreError.self) { try database.replaceContents(withContentsOf: "/large", options: large) }
        #expect(error.code == .invalidArgument)
        #expect(try Self.contents(database).keys == before.keys)
    }

    @Test("an online backup while a writer commits all along is one commit's state (every commit's pair of entries whole), sound, with a file ID of its own; an existing destination is refused")
    func backupWhileWriting() throws {
        let disk = SimulatedDisk()
        var options = simulatedOptions(disk)
        options.busyTimeout = .seconds(10)
        let database = try Database(path: "/db", options: options)
        defer { database.close() }
        try Self.fill(database, count: 1500)
        let stop = Atomic<Bool>(false)
        let writer = DispatchGroup()
        writer.enter()
        DispatchQueue.global().async {
            defer { writer.leave() }
            var round = 0
            while !stop.load(ordering: .relaxed) {
                round += 1
                // Each commit writes a pair: the backup holds both or neither.
                try? database.write { transaction in
                    let tree = try transaction.tree(named: "pairs", create: true)!
                    try tree.put(bytes("left \(round)"), bytes("\(round)"))
                    try tree.put(bytes("right \(round)"), bytes("\(round)"))
                }
            }
        }
        var reports: [Database.BackupReport] = []
        for copy in 0..<3 {
            reports.append(try database.backup(to: "/backup-\(copy)"))
        }
        stop.store(true, ordering: .relaxed)
        writer.wait()
        for copy in 0..<3 {
            let backup = try Database(path: "/backup-\(copy)", options: options)
            defer { backup.close() }
            #expect(try backup.checkIntegrity().isSound)
            let header = try backup.read { $0.header }
            #expect(header.fileID != (try database.read { $0.header.fileID }), "a file ID of its own")
            #expect(header.changeCounter == reports[copy].changeCounter && Int(header.pageCount) == reports[copy].pages)
            let pairs = try backup.read { transaction -> [String: String] in
                var pairs: [String: String] = [:]
                try transaction.tree(named: "pairs")?.forEach { key, value in
                    pairs[String(decoding: key, as: UTF8.self)] = String(decoding: value, as: UTF8.self)
                    return true
                }
                return pairs
            }
            let lefts = Set(pairs.keys.filter { $0.hasPrefix("left") }.map { $0.dropFirst(5) })
            let rights = Set(pairs.keys.filter { $0.hasPrefix("right") }.map { $0.dropFirst(6) })
            #expect(lefts == rights, "copy \(copy): a commit's pair is whole")
            #expect(try backup.read { try Self.count($0.tree(named: "a")) } == 500)
        }
        print("backups while writing: \(reports)")
        let error = try #require(throws: StoreError.self) { try database.backup(to: "/backup-0") }
        #expect(error.code == .invalidArgument)
    }
}

extension CompactionTests {
    /// A database whose last pages were allocated and freed in one transaction: free pages never
    /// written (zeros, no checksum), as a large transaction that shrank again leaves them.
    static func unwrittenFreePages(_ options: DatabaseOptions, path: String) throws -> Database {
        let database = try Database(path: path, options: options)
        try database.write { try $0.tree(named: "kept", create: true)!.put(bytes("k"), bytes("v")) }
        try database.write { transaction in
            let pages = try (0..<6).map { _ in try transaction.pager.allocatePage() }
            for page in pages.reversed() { try transaction.pager.freePage(page) }
        }
        return database
    }

    @Test("free pages that were never written (freed at the end in the transaction that made them) are copied as they are: backup, compaction and restore succeed on such a healthy file")
    func unwrittenFreePagesAreCopied() throws {
        let disk = SimulatedDisk()
        let options = simulatedOptions(disk)
        let database = try Self.unwrittenFreePages(options, path: "/db")
        defer { database.close() }
        #expect(try database.read { $0.header.freelistCount } >= 6)
        #expect(try database.checkIntegrity().isSound)
        try database.backup(to: "/copy")
        let copy = try Database(path: "/copy", options: options)
        #expect(try copy.checkIntegrity().isSound)
        copy.close()
        let source = try Self.unwrittenFreePages(options, path: "/source")
        source.close()
        try database.replaceContents(withContentsOf: "/source", options: options)
        #expect(try database.read { try $0.tree(named: "kept")!.get(bytes("k")) } == bytes("v"))
        try database.compact()
        #expect(try database.checkIntegrity().isSound)
    }
}
