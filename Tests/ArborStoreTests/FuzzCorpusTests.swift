import ArborTestSupport
import Foundation
import Testing
@testable import ArborStore

/// Writes the seed corpus of `Fuzz/Corpus/FuzzPager` (real small files made by the engine) when
/// `ARBOR_WRITE_FUZZ_CORPUS` names a directory; otherwise checks the committed corpus still opens
/// as expected, so a format change cannot silently turn the corpus into noise.
@Suite("Fuzz corpus")
struct FuzzCorpusTests {
    /// One fuzz input: a 4-byte length, the database image, then the journal image.
    static func input(database: [UInt8], journal: [UInt8]) -> [UInt8] {
        let n = UInt32(database.count)
        return [UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 24)] + database + journal
    }

    static func corpus() throws -> [(String, [UInt8])] {
        var entries: [(String, [UInt8])] = []
        let harness = CrashHarness(pageSize: 512, cachePages: 16)
        let disk = SimulatedDisk()
        var model = PageModel()
        let pager = try harness.open(disk)
        entries.append(("empty-database", input(database: disk.contents(of: harness.path)!, journal: [])))
        for seed in 1...4 as ClosedRange<UInt64> { model = try PageWorkload.runTransaction(pager, model: model, seed: seed) }
        entries.append(("pages-and-freelist", input(database: disk.contents(of: harness.path)!, journal: disk.contents(of: harness.path + "-journal") ?? [])))
        pager.close()
        // A crash in the middle of a large commit, just before the database sync, with every write
        // before it on the disk: a hot journal over a half-changed file.
        let base = disk.snapshot()
        let dry = try harness.open(disk)
        let before = disk.operationCount
        _ = try PageWorkload.runTransaction(dry, model: model, seed: 99, large: true)
        let operations = disk.operationCount - before
        dry.close()
        disk.restore(base)
        let victim = try harness.open(disk)
        disk.inject(.powerCut(.applyAll), atOperation: operations - 3)
        let survived = (try? PageWorkload.runTransaction(victim, model: model, seed: 99, large: true)) != nil
        precondition(!survived, "the power cut must interrupt the commit")
        victim.close()
        disk.clearFaults()
        entries.append(("hot-journal", input(database: disk.contents(of: harness.path)!, journal: disk.contents(of: harness.path + "-journal")!)))
        // Databases with trees: small values, overflow chains, compressed values, several levels.
        for (name, pageSize) in [("trees-512", 512), ("trees-1024", 1024)] {
            let treeDisk = SimulatedDisk()
            var options = DatabaseOptions()
            options.fileSystem = treeDisk
            options.lockTable = LockTable()
            options.pageSize = pageSize
            options.compressionThreshold = 64
            options.compressionDictionarySize = 1000
            let database = try Database(path: "/t", options: options)
            try database.write { (tx) throws in
                let rows = try tx.createTree(named: "rows")
                for i in 0..<60 {
                    let value: [UInt8] = i % 10 == 0 ? Array(repeating: UInt8(i), count: 700) : Array(repeating: UInt8(i), count: i % 5)
                    try rows.put(KeyEncoding.encode([.int(Int64(i))]), value)
                }
                let index = try tx.createTree(named: "rows.index", kind: .index)
                for i in 0..<30 { try index.put(KeyEncoding.encode([.string("key \(i)"), .int(Int64(i))]), []) }
                try rows.put([0x7F], (0..<900).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            }
            try database.write { (tx) throws in
                for i in stride(from: 0, to: 60, by: 3) { try tx.tree(named: "rows")!.delete(KeyEncoding.encode([.int(Int64(i))])) }
            }
            database.close()
            entries.append((name, input(database: treeDisk.contents(of: "/t")!, journal: [])))
        }
        return entries
    }

    @Test("the committed corpus holds real database images that open cleanly")
    func committedCorpus() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Fuzz/Corpus/FuzzPager").standardized
        if let target = ProcessInfo.processInfo.environment["ARBOR_WRITE_FUZZ_CORPUS"] {
            for (name, bytes) in try Self.corpus() {
                try Data(bytes).write(to: URL(fileURLWithPath: target).appendingPathComponent(name))
            }
            return
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { !$0.hasPrefix(".") }
        #expect(names.count >= 3)
        for name in names where !name.hasPrefix("hostile-") {
            let bytes = [UInt8](try Data(contentsOf: directory.appendingPathComponent(name)))
            let length = Int(bytes[0]) | Int(bytes[1]) << 8 | Int(bytes[2]) << 16 | Int(bytes[3]) << 24
            let disk = SimulatedDisk()
            disk.setContents(of: "/db", to: Array(bytes[4..<(4 + length)]))
            if bytes.count > 4 + length { disk.setContents(of: "/db-journal", to: Array(bytes[(4 + length)...])) }
            var options = PagerOptions()
            options.create = false
            options.lockTable = LockTable()
            let pager = try Pager(path: "/db", fileSystem: disk, options: options)
            #expect(try pager.checkPages().isEmpty, "\(name)")
            if name == "hot-journal" {
                #expect(pager.statistics.recoveries == 1, "the hot-journal entry must need recovery")
            }
            pager.close()
        }
    }
}
