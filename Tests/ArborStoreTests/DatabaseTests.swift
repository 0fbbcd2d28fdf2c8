import ArborTestSupport
import Foundation
import Testing
@testable import ArborStore

func simulatedOptions(_ disk: SimulatedDisk, pageSize: Int = 512, cacheSize: Int = 64 << 10) -> DatabaseOptions {
    var options = DatabaseOptions()
    options.fileSystem = disk
    options.lockTable = LockTable()
    options.pageSize = pageSize
    options.cacheSize = cacheSize
    options.compressionThreshold = 100
    options.busyTimeout = .milliseconds(200)
    return options
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// The `i`th value of the visiting tests' trees: every 50th compressible and larger than a small
/// page, every 77th large and less compressible, the rest short and inline.
func sampleValue(_ i: Int) -> [UInt8] {
    i % 50 == 0 ? Array(repeating: UInt8(i % 7), count: 3000)
        : i % 77 == 0 ? (0..<2000).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ i) } : Array(repeating: UInt8(i % 251), count: i % 30)
}

@Suite("Database")
struct DatabaseTests {
    @Test("trees are created, filled, read back after reopening, and dropped", arguments: [512, 4096])
    func lifecycle(pageSize: Int) throws {
        let disk = SimulatedDisk()
        let database = try Database(path: "/db", options: simulatedOptions(disk, pageSize: pageSize))
        try database.write { (tx) throws in
            let people = try tx.createTree(named: "people")
            let index = try tx.createTree(named: "people.byName", kind: .index)
            for i in 0..<500 {
                try people.put(KeyEncoding.encode([.int(Int64(i))]), bytes("person \(i)"))
                try index.put(KeyEncoding.encode([.string("name \(i)"), .int(Int64(i))]), [])
            }
            #expect(try people.nextSequence() == 1)
            #expect(try people.nextSequence() == 2)
        }
        database.close()

        let reopened = try Database(path: "/db", options: simulatedOptions(disk, pageSize: pageSize))
        try reopened.read { (tx) throws in
            #expect(try tx.trees().map(\.name) == ["people", "people.byName"])
            #expect(try tx.trees().map(\.kind) == [.table, .index])
            let people = try #require(try tx.tree(named: "people"))
            #expect(try people.get(KeyEncoding.encode([.int(42)])) == bytes("person 42"))
            #expect(try people.get(KeyEncoding.encode([.int(500)])) == nil)
            #expect(people.descriptor.sequence == 2)
            let stats = try people.statistics()
            #expect(stats.entries == 500)
            #expect(stats.depth >= 2)
            #expect(stats.fillFactor > 0.5)
        }
        var report = try reopened.checkIntegrity()
        #expect(report.isSound, "\(report.problems)")
        let freeBefore = report.freePages
        let treePages = report.trees["people.byName"]!.pages

        try reopened.write { (tx) throws in #expect(try tx.dropTree(named: "people.byName")) }
        report = try reopened.checkIntegrity()
        #expect(report.isSound, "\(report.problems)")
        #expect(report.freePages == freeBefore + treePages)
        try reopened.read { (tx) throws in #expect(try tx.tree(named: "people.byName") == nil) }
    }

    @Test("a renamed tree keeps its entries, sequence and kind under the new name; taken and missing names are refused; a rolled-back rename keeps the old name")
    func renameTree() throws {
        let disk = SimulatedDisk()
        let database = try Database(path: "/db", options: simulatedOptions(disk))
        try database.write { (tx) throws in
            let rows = try tx.createTree(named: "rows.Author")
            for i in 0..<300 { try rows.put(KeyEncoding.encode([.int(Int64(i))]), sampleValue(i)) }
            _ = try rows.nextSequence(reserving: 7)
            try tx.createTree(named: "index.Author.name", kind: .index)
        }
        try database.write { (tx) throws in
            try tx.renameTree(named: "rows.Author", to: "rows.Writer")
            #expect(throws: StoreError.self) { try tx.renameTree(named: "rows.Writer", to: "index.Author.name") }
            #expect(throws: StoreError.self) { try tx.renameTree(named: "rows.Nobody", to: "rows.Somebody") }
            #expect(throws: StoreError.self) { try tx.renameTree(named: "rows.Writer", to: "") }
        }
        struct Oops: Error {}
        #expect(throws: Oops.self) {
            try database.write { (tx) throws in
                try tx.renameTree(named: "index.Author.name", to: "index.Writer.name")
                throw Oops()
            }
        }
        database.close()
        let reopened = try Database(path: "/db", options: simulatedOptions(disk))
        try reopened.read { (tx) throws in
            #expect(try tx.trees().map(\.name) == ["index.Author.name", "rows.Writer"])
            let rows = try #require(try tx.tree(named: "rows.Writer"))
            #expect(rows.descriptor.sequence == 7)
            #expect(rows.descriptor.kind == .table)
            for i in [0, 50, 77, 299] { #expect(try rows.get(KeyEncoding.encode([.int(Int64(i))])) == sampleValue(i)) }
            #expect(try rows.statistics().entries == 300)
        }
        #expect(try reopened.checkIntegrity().isSound)
    }

    @Test("a tree copied from another database keeps its entries (large values included), sequence and kind; a taken name is refused")
    func copyTree() throws {
        let disk = SimulatedDisk()
        let source = try Database(path: "/source", options: simulatedOptions(disk))
        try source.write { (tx) throws in
            let rows = try tx.createTree(named: "rows.Author")
            // Random order, so the source's pages are half full; one large value overflows.
            for i in (0..<3000).shuffled() { try rows.put(KeyEncoding.encode([.int(Int64(i))]), sampleValue(i)) }
            try rows.put(KeyEncoding.encode([.int(5000)]), Array(repeating: 7, count: 20_000))
            _ = try rows.nextSequence(reserving: 3001)
            try tx.createTree(named: "index.Author.name", kind: .index)
        }
        let target = try Database(path: "/target", options: simulatedOptions(disk))
        try target.write { (tx) throws in try tx.createTree(named: "rows.Author").put([1], [1]) }
        try source.read { (from) throws in
            try target.write { (tx) throws in
                #expect(throws: StoreError.self) { try tx.copyTree(try #require(try from.tree(named: "rows.Author"))) }
                _ = try tx.dropTree(named: "rows.Author")
                try tx.copyTrees(of: from)
            }
        }
        try target.read { (tx) throws in
            #expect(try tx.trees().map(\.name) == ["index.Author.name", "rows.Author"])
            let rows = try #require(try tx.tree(named: "rows.Author"))
            #expect(rows.descriptor.sequence == 3001)
            #expect(try #require(try tx.tree(named: "index.Author.name")).descriptor.kind == .index)
            #expect(try rows.get([1]) == nil)
            for i in [0, 1, 1234, 2999] { #expect(try rows.get(KeyEncoding.encode([.int(Int64(i))])) == sampleValue(i)) }
            #expect(try rows.get(KeyEncoding.encode([.int(5000)])) == Array(repeating: 7, count: 20_000))
            let copied = try rows.statistics()
            #expect(copied.entries == 3001)
            let original = try source.read { try #require(try $0.tree(named: "rows.Author")).statistics() }
            #expect(copied.leafPages < original.leafPages)
        }
        #expect(try target.checkIntegrity().isSound)
    }

    /// A tree of 3,000 entries put in random order (half-full pages), some values compressed
    /// against the tree's dictionary, some overflowing, with a sequence: what the rewrite tests
    /// start from.
    static func makeRewritable(_ database: Database) throws {
        try database.write { (tx) throws in
            let rows = try tx.createTree(named: "rows.Item")
            for i in (0..<3000).shuffled() { try rows.put(KeyEncoding.encode([.int(Int64(i))]), sampleValue(i)) }
            _ = try rows.nextSequence(reserving: 3000)
            try tx.createTree(named: "other").put([1], [2])
        }
    }

    /// The rewrite the tests apply: the value reversed, then its length's low byte.
    static func rewritten(_ value: [UInt8]) -> [UInt8] { value.reversed() + [UInt8(truncatingIfNeeded: value.count)] }

    @Test("rewriteValues rewrites every value of a tree larger than the cache into fresh pages: keys, sequence and dictionary kept, old pages freed, a failing transform keeps nothing")
    func rewriteValues() throws {
        let disk = SimulatedDisk()
        // 32 pages of cache: the tree's hundreds of pages spill while it is rewritten.
        let database = try Database(path: "/db", options: simulatedOptions(disk, cacheSize: 16 << 10))
        try Self.makeRewritable(database)
        let (before, pagesBefore) = try database.read { (tx) throws in
            (try #require(try tx.tree(named: "rows.Item")).descriptor, tx.header.pageCount)
        }
        #expect(before.dictionaryPage != 0)
        var seen: [Int64] = []
        try database.write { (tx) throws in
            let rows = try #require(try tx.tree(named: "rows.Item"))
            #expect(try rows.statistics().pages > 32)
            let rewritten = try tx.rewriteValues(of: rows) { key, value, output in
                seen.append(try #require(KeyEncoding.integer(exactly: key)))
                output += Self.rewritten(Array(value))
            }
            #expect(rewritten.descriptor.root != before.root)
            // The old handle names a tree that is gone.
            #expect(throws: StoreError.self) { try tx.rewriteValues(of: rows) { _, value, output in output += Array(value) } }
        }
        #expect(seen == (0..<3000).map(Int64.init))
        try database.read { (tx) throws in
            let rows = try #require(try tx.tree(named: "rows.Item"))
            #expect(rows.descriptor.sequence == 3000)
            #expect(rows.descriptor.dictionaryPage == before.dictionaryPage)
            for i in 0..<3000 { #expect(try rows.get(KeyEncoding.encode([.int(Int64(i))])) == Self.rewritten(sampleValue(i)), "entry \(i)") }
            #expect(try rows.statistics().entries == 3000)
            #expect(try tx.tree(named: "other")?.get([1]) == [2])
            // Both trees were in the file at once; the old one's pages are free now.
            #expect(tx.header.pageCount > pagesBefore)
            #expect(tx.header.freelistCount > 0)
        }
        #expect(try database.checkIntegrity().isSound)

        // A transform that fails halfway: the transaction keeps nothing.
        struct Halfway: Error {}
        #expect(throws: Halfway.self) {
            try database.write { (tx) throws in
                var count = 0
                try tx.rewriteValues(of: try #require(try tx.tree(named: "rows.Item"))) { _, value, output in
                    count += 1
                    if count == 1500 { throw Halfway() }
                    output += Array(value)
                }
            }
        }
        try database.read { (tx) throws in
            let rows = try #require(try tx.tree(named: "rows.Item"))
            for i in [0, 1, 1499, 1500, 2999] { #expect(try rows.get(KeyEncoding.encode([.int(Int64(i))])) == Self.rewritten(sampleValue(i))) }
        }
        #expect(try database.checkIntegrity().isSound)
    }

    @Test("a power cut at every I/O operation of a tree's rewrite larger than the cache leaves the old tree or the new one, whole")
    func rewriteValuesPowerCut() throws {
        let disk = SimulatedDisk()
        var options = simulatedOptions(disk, cacheSize: 16 << 10)
        options.logger.logLevel = .critical
        do {
            let database = try Database(path: "/db", options: options)
            try Self.makeRewritable(database)
            database.close()
        }
        disk.syncAll()
        let image = disk.snapshot()
        func rewrite() throws {
            let database = try Database(path: "/db", options: options)
            defer { database.close() }
            try database.write { (tx) throws in
                try tx.rewriteValues(of: try #require(try tx.tree(named: "rows.Item"))) { _, value, output in output += Self.rewritten(Array(value)) }
            }
        }
        let start = disk.operationCount
        try rewrite()
        let operations = disk.operationCount - start
        #expect(operations > 100)
        print("rewriteValues: \(operations) I/O operations")
        var outcomes = (old: 0, new: 0)
        // Every operation near the commit point (the journal's sync and invalidation, the file's
        // writes), every 25th before (the spills).
        for point in 1...operations where point % 25 == 0 || point > operations - 20 {
            for damage: SimulatedDisk.PowerCutDamage in [.applyAll, .dropAll, .random(seed: UInt64(point))] {
                disk.restore(image)
                disk.inject(.powerCut(damage), atOperation: point)
                try? rewrite()
                disk.clearFaults()
                let database = try Database(path: "/db", options: options)
                defer { database.close() }
                let state = try database.read { (tx) throws -> String in
                    let rows = try #require(try tx.tree(named: "rows.Item"))
                    let isNew = try rows.get(KeyEncoding.encode([.int(0)])) == Self.rewritten(sampleValue(0))
                    var count = 0
                    try rows.forEach { key, value in
                        let i = Int(KeyEncoding.integer(exactly: key) ?? -1)
                        if Array(value) != (isNew ? Self.rewritten(sampleValue(i)) : sampleValue(i)) {
                            Issue.record("crash at \(point) \(damage): entry \(i) is neither the old value nor the new")
                        }
                        count += 1
                        return true
                    }
                    #expect(count == 3000, "crash at \(point) \(damage)")
                    #expect(rows.descriptor.sequence == 3000)
                    return isNew ? "new" : "old"
                }
                if state == "new" { outcomes.new += 1 } else { outcomes.old += 1 }
                #expect(try database.checkIntegrity().isSound, "crash at \(point) \(damage)")
            }
        }
        #expect(outcomes.old > 0 && outcomes.new > 0, "\(outcomes)")
    }

    @Test("a throwing write closure keeps nothing")
    func throwingWriteRollsBack() throws {
        struct Oops: Error {}
        let disk = SimulatedDisk()
        let database = try Database(path: "/db", options: simulatedOptions(disk))
        try database.write { (tx) throws in try tx.createTree(named: "t").put([1], [1]) }
        #expect(throws: Oops.self) {
            try database.write { (tx) throws in
                try tx.tree(named: "t")!.put([2], [2])
                try tx.createTree(named: "u")
                throw Oops()
            }
        }
        try database.read { (tx) throws in
            #expect(try tx.trees().map(\.name) == ["t"])
            #expect(try tx.tree(named: "t")!.get([2]) == nil)
        }
    }

    @Test("cursors seek, step both ways, and survive changes to their tree")
    func cursors() throws {
        let disk = SimulatedDisk()
        let database = try Database(path: "/db", options: simulatedOptions(disk))
        try database.write { (tx) throws in
            let tree = try tx.createTree(named: "t")
            for i in stride(from: 0, to: 1000, by: 2) { try tree.put(KeyEncoding.encode([.int(Int64(i))]), [UInt8(i % 256)]) }
            let cursor = try tree.makeCursor()
            #expect(try cursor.seek(KeyEncoding.encode([.int(501)])))
            #expect(cursor.key == KeyEncoding.encode([.int(502)]))
            #expect(try cursor.previous())
            #expect(cursor.key == KeyEncoding.encode([.int(500)]))
            // Delete the key under the cursor and the next one; the cursor carries on.
            #expect(try tree.delete(KeyEncoding.encode([.int(500)])))
            #expect(try tree.delete(KeyEncoding.encode([.int(502)])))
            #expect(try cursor.next())
            #expect(cursor.key == KeyEncoding.encode([.int(504)]))
            try tree.put(KeyEncoding.encode([.int(503)]), [9])
            #expect(try cursor.previous())
            #expect(cursor.key == KeyEncoding.encode([.int(503)]))
            #expect(try cursor.value() == [9])
            #expect(try cursor.last())
            #expect(cursor.key == KeyEncoding.encode([.int(998)]))
            #expect(try !cursor.next())
            #expect(!cursor.isValid)
            #expect(try cursor.first())
            #expect(cursor.key == KeyEncoding.encode([.int(0)]))
            #expect(try !cursor.previous())
        }
    }

    @Test("misuse: writing in a read transaction, using a tree after its transaction, bad names")
    func misuse() throws {
        let disk = SimulatedDisk()
        let database = try Database(path: "/db", options: simulatedOptions(disk))
        try database.write { (tx) throws in try tx.createTree(named: "t") }
        var escaped: Tree?
        try database.read { (tx) throws in
            let tree = try #require(try tx.tree(named: "t"))
            #expect(storeErrorCode { try tree.put([1], [1]) } == .misuse)
            escaped = tree
        }
        #expect(storeErrorCode { try escaped!.get([1]) } == .misuse)
        try database.write { (tx) throws in
            #expect(storeErrorCode { try tx.createTree(named: "t") } == .invalidArgument)
            #expect(storeErrorCode { try tx.createTree(named: "") } == .invalidArgument)
            #expect(storeErrorCode { try tx.tree(named: "t")!.put(Array(repeating: 0, count: 5000), []) } == .invalidArgument)
        }
    }

    @Test("concurrent readers on many threads while a writer commits")
    func threads() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-db-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var options = DatabaseOptions()
        options.busyTimeout = .seconds(20)
        let database = try Database(path: directory + "/db", options: options)
        try database.write { (tx) throws in try tx.createTree(named: "counter").put([0], withUnsafeBytes(of: UInt64(0)) { Array($0) }) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for _ in 0..<50 {
                    try database.write { (tx) throws in
                        let tree = try tx.tree(named: "counter")!
                        let value = try tree.get([0])!.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) } + 1
                        try tree.put([0], withUnsafeBytes(of: value) { Array($0) })
                        try tree.put(withUnsafeBytes(of: value.bigEndian) { Array($0) }, [1])
                    }
                }
            }
            for _ in 0..<3 {
                group.addTask {
                    for _ in 0..<50 {
                        try database.read { (tx) throws in
                            let tree = try tx.tree(named: "counter")!
                            let value = try tree.get([0])!.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                            let cursor = try tree.makeCursor()
                            var entries: UInt64 = 0
                            var more = try cursor.first()
                            while more { entries += 1; more = try cursor.next() }
                            // The counter and the number of records always agree.
                            #expect(entries == value + 1)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let total = try database.read { (tx) throws in try tx.tree(named: "counter")!.get([0])!.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) } }
        #expect(total == 50)
    }
}

@Suite("Tree.forEach")
struct ForEachTests {
    @Test("a prefilter skips exactly the values that begin with its prefix, hold its guards and fail a comparison; select then turns down more; body sees the rest in key order", arguments: [2, 9])
    func prefilterSkipsExactly(prefixLength: Int) throws {
        let database = try Database(path: "/db", options: simulatedOptions(SimulatedDisk(), pageSize: 512, cacheSize: 128 * 512))
        var random = SplitMix64(seed: UInt64(prefixLength))
        let prefix = (0..<prefixLength).map { UInt8(0x41 + $0) }
        var values: [[UInt8]] = []
        try database.write { (tx) throws in
            let tree = try tx.createTree(named: "t")
            for i in 0..<3000 {
                // The prefix (its last byte changed now and then), a tag byte, then a number.
                var value = prefix
                if random.next() % 4 == 0 { value[prefixLength - 1] ^= 1 }
                value.append(random.next() % 5 == 0 ? 0x05 : (random.next() % 2 == 0 ? 0x20 : 0x21))
                value += withUnsafeBytes(of: (random.next() % 100).bigEndian) { Array($0) }
                if i % 97 == 0 { value = Array(value.prefix(Int(random.next() % UInt64(value.count)))) }  // too short
                if i % 101 == 0 { value += Array(repeating: UInt8(i % 251), count: 700) }  // in an overflow chain
                values.append(value)
                try tree.put(KeyEncoding.encode([.int(Int64(i))]), value)
            }
        }
        let relations: [ValuePrefilter.Relation] = [.equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual]
        var skippedInAll = 0
        for round in 0..<12 {
            let comparisons = (0..<(1 + round % 2)).map { _ in
                ValuePrefilter.Comparison(offset: prefixLength + 1, relation: relations[Int(random.next() % 6)], constant: random.next() % 100)
            }
            let prefilter = ValuePrefilter(prefix: prefix, guards: [.init(offset: prefixLength, allowed: [0x20, 0x21])], comparisons: comparisons)
            #expect(prefilter.reach == prefixLength + 9)
            func skipped(_ value: [UInt8]) -> Bool {
                guard value.count >= prefixLength + 9, Array(value.prefix(prefixLength)) == prefix,
                      value[prefixLength] == 0x20 || value[prefixLength] == 0x21 else { return false }
                let number = value[(prefixLength + 1)..<(prefixLength + 9)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                return comparisons.contains { comparison in
                    switch comparison.relation {
                    case .equal: number != comparison.constant
                    case .notEqual: number == comparison.constant
                    case .less: number >= comparison.constant
                    case .lessOrEqual: number > comparison.constant
                    case .greater: number <= comparison.constant
                    case .greaterOrEqual: number < comparison.constant
                    }
                }
            }
            let expectedSelected = values.indices.filter { !skipped(values[$0]) }
            let expectedTaken = expectedSelected.filter { values[$0].count % 2 == 0 }
            var selected: [[UInt8]] = []
            var taken: [Int] = []
            try database.read { (tx) throws in
                let tree = try #require(try tx.tree(named: "t"))
                try tree.forEach(prefilter: prefilter, selecting: { value in
                    selected.append(Array(value))
                    return value.count % 2 == 0
                }) { key, value in
                    let index = Int(try #require(KeyEncoding.decode(Array(key)).first.flatMap { if case .int(let n) = $0 { n } else { nil } }))
                    #expect(value.elementsEqual(values[index]))
                    taken.append(index)
                    return true
                }
            }
            #expect(selected == expectedSelected.map { values[$0] }, "round \(round): select sees every value the prefilter passes, in order")
            #expect(taken == expectedTaken, "round \(round)")
            skippedInAll += values.count - expectedSelected.count
        }
        #expect(skippedInAll > 3000, "the rounds skip values (\(skippedInAll))")
    }

    @Test("a scan of a tree larger than the cache goes through the scan ring and evicts none of the working set")
    func scanKeepsWorkingSet() throws {
        var options = simulatedOptions(SimulatedDisk(), pageSize: 512)
        options.cacheSize = 64 * 512
        let database = try Database(path: "/db", options: options)
        let rows = 20_000
        try database.write { (tx) throws in
            let tree = try tx.createTree(named: "t")
            for i in 0..<rows { try tree.put(KeyEncoding.encode([.int(Int64(i))]), Array(repeating: UInt8(i % 251), count: 8)) }
        }
        try database.read { (tx) throws in
            let tree = try #require(try tx.tree(named: "t"))
            let workingSet = stride(from: 0, to: rows, by: 2500).map { KeyEncoding.encode([.int(Int64($0))]) }
            for key in workingSet { _ = try tree.get(key) }
            var visited = 0
            try tree.forEach { key, value in
                guard key.elementsEqual(KeyEncoding.encode([.int(Int64(visited))])), value.count == 8 else { return false }
                visited += 1
                return true
            }
            #expect(visited == rows)
            let statistics = tx.cacheStatistics
            #expect(statistics.misses > 400, "the tree (\(statistics.misses) misses) is several times the 64-page cache")
            // The working set is still cached: reading it again misses nothing.
            for key in workingSet { _ = try tree.get(key) }
            #expect(tx.cacheStatistics.misses == statistics.misses)
        }
    }

    @Test("a scan of a tree that fits in the cache's free frames leaves it cached: the next scan misses nothing")
    func scanFillsFreeFrames() throws {
        let options = simulatedOptions(SimulatedDisk(), pageSize: 512, cacheSize: 4096 * 512)
        let path = "/db"
        let rows = 5_000
        try Database(path: path, options: options).write { (tx) throws in
            let tree = try tx.createTree(named: "t")
            for i in 0..<rows { try tree.put(KeyEncoding.encode([.int(Int64(i))]), Array(repeating: UInt8(i % 251), count: 8)) }
        }
        // A fresh connection: an empty cache, far larger than the tree.
        let database = try Database(path: path, options: options)
        func scan() throws -> PageCacheStatistics {
            try database.read { (tx) throws in
                let tree = try #require(try tx.tree(named: "t"))
                var visited = 0
                try tree.forEach { _, _ in visited += 1; return true }
                #expect(visited == rows)
                return tx.cacheStatistics
            }
        }
        let first = try scan()
        #expect(first.misses > 100, "the first scan reads the tree (\(first.misses) misses)")
        let second = try scan()
        #expect(second.misses == first.misses, "the second scan finds every page cached")
        #expect(second.evictions == 0)
    }

    @Test("a scan of a tree within half of a full cache caches it (the next scan misses nothing); a larger one goes through the ring")
    func smallTreeScansStayCached() throws {
        // A 256-page cache, filled by a big tree; then a small tree (well under 128 pages).
        let database = try Database(path: "/db", options: simulatedOptions(SimulatedDisk(), pageSize: 512, cacheSize: 256 * 512))
        try database.write { (tx) throws in
            let big = try tx.createTree(named: "big")
            for i in 0..<20_000 { try big.put(KeyEncoding.encode([.int(Int64(i))]), Array(repeating: UInt8(i % 251), count: 8)) }
            let small = try tx.createTree(named: "small")
            for i in 0..<600 { try small.put(KeyEncoding.encode([.int(Int64(i))]), Array(repeating: UInt8(i % 251), count: 8)) }
        }
        func scan(_ name: String) throws -> PageCacheStatistics {
            try database.read { (tx) throws in
                let tree = try #require(try tx.tree(named: name))
                try tree.forEach { _, _ in true }
                return tx.cacheStatistics
            }
        }
        try database.read { (tx) throws in
            let small = try #require(try tx.tree(named: "small")), big = try #require(try tx.tree(named: "big"))
            let smallPages = try small.btree.pageCount(limit: .max)
            let bigPages = try big.btree.pageCount(limit: .max)
            #expect(smallPages > 1 && smallPages < 128 && bigPages > 128)
            #expect(try big.btree.pageCount(limit: 10) > 10, "a count past the limit stops there, above it")
            #expect(try small.btree.pageCount(limit: 1000) == smallPages)
        }
        _ = try scan("big")
        let first = try scan("small")
        let second = try scan("small")
        #expect(first.pages == first.capacity, "the cache is full")
        #expect(second.misses == first.misses, "the small tree stayed cached")
        let third = try scan("big")
        let fourth = try scan("big")
        #expect(fourth.misses - third.misses > 200, "the big tree is read through the ring again")
        #expect(try scan("small").misses == fourth.misses, "and evicted none of the small tree")
    }

    @Test("a scan of a small tree reads its values' overflow chains through the scan ring: they evict none of the cache")
    func overflowChainsGoThroughTheRing() throws {
        var options = simulatedOptions(SimulatedDisk(), pageSize: 512, cacheSize: 256 * 512)
        options.compressionThreshold = .max  // values stay whole: overflow chains
        let database = try Database(path: "/db", options: options)
        try database.write { (tx) throws in
            let filler = try tx.createTree(named: "filler")
            for i in 0..<20_000 { try filler.put(KeyEncoding.encode([.int(Int64(i))]), Array(repeating: UInt8(i % 251), count: 8)) }
            let work = try tx.createTree(named: "work")
            for i in 0..<600 { try work.put(KeyEncoding.encode([.int(Int64(i))]), Array(repeating: UInt8(i % 251), count: 8)) }
            let blobs = try tx.createTree(named: "blobs")
            for i in 0..<20 { try blobs.put(KeyEncoding.encode([.int(Int64(i))]), (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ i) }) }
        }
        func scan(_ name: String) throws -> PageCacheStatistics {
            try database.read { (tx) throws in
                let tree = try #require(try tx.tree(named: name))
                try tree.forEach { _, value in value.count > 0 }
                return tx.cacheStatistics
            }
        }
        _ = try scan("filler")
        _ = try scan("work")
        let before = try scan("work")
        #expect(before.pages == before.capacity, "the cache is full, the working tree in it")
        let blobs = try scan("blobs")
        #expect(blobs.misses - before.misses > 300, "the overflow pages were read (more than the cache holds)")
        #expect(try scan("work").misses == blobs.misses, "and none of the working tree was evicted")
    }

    @Test("visits every entry in order, in place, from a start key, and stops when asked", arguments: [512, 4096])
    func visits(pageSize: Int) throws {
        let database = try Database(path: "/db", options: simulatedOptions(SimulatedDisk(), pageSize: pageSize))
        var expected: [([UInt8], [UInt8])] = []
        try database.write { (tx) throws in
            let tree = try tx.createTree(named: "t")
            for i in 0..<3000 {
                let key = KeyEncoding.encode([.int(Int64(i * 2))])
                let value = sampleValue(i)
                try tree.put(key, value)
                expected.append((key, value))
            }
        }
        try database.read { (tx) throws in
            let tree = try #require(try tx.tree(named: "t"))
            var seen: [([UInt8], [UInt8])] = []
            try tree.forEach { key, value in
                seen.append((Array(key), Array(value)))
                return true
            }
            #expect(seen.count == expected.count)
            #expect(zip(seen, expected).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 })
            var fromMiddle: [[UInt8]] = []
            try tree.forEach(from: KeyEncoding.encode([.int(2001)])) { key, _ in
                fromMiddle.append(Array(key))
                return fromMiddle.count < 5
            }
            #expect(fromMiddle == (1001...1005).map { KeyEncoding.encode([.int(Int64($0 * 2))]) })
        }
        try database.write { (tx) throws in
            let tree = try tx.tree(named: "t")!
            var refused = 0
            try tree.forEach { key, _ in
                if storeErrorCode({ try tree.delete(Array(key)) }) == .misuse { refused += 1 }
                if storeErrorCode({ try tx.createTree(named: "u") }) == .misuse { refused += 1 }
                return refused < 10
            }
            #expect(refused == 10)
            #expect(try tree.delete(KeyEncoding.encode([.int(0)])))
        }
    }

    @Test("lends each value in place by its key — inline, compressed and overflowing alike — and nil for a missing key", arguments: [512, 4096])
    func lendsValues(pageSize: Int) throws {
        let database = try Database(path: "/db", options: simulatedOptions(SimulatedDisk(), pageSize: pageSize))
        var expected: [([UInt8], [UInt8])] = []
        var random = SplitMix64(seed: UInt64(pageSize))
        try database.write { (tx) throws in
            let tree = try tx.createTree(named: "t")
            for i in 0..<600 {
                let key = KeyEncoding.encode([.int(Int64(i * 2))])
                // Every 97th incompressible and larger than any page: stored uncompressed, overflowing.
                let value = i % 97 == 1 ? (0..<5000).map { _ in UInt8(truncatingIfNeeded: random.next()) } : sampleValue(i)
                try tree.put(key, value)
                expected.append((key, value))
            }
        }
        try database.read { (tx) throws in
            let tree = try #require(try tx.tree(named: "t"))
            for (key, value) in expected {
                let lent = try key.withUnsafeBytes { try tree.withValue(forKey: $0) { Array($0) } }
                #expect(lent == value)
            }
            for missing in [-1, 1, 599, 1201] {
                let lent = try KeyEncoding.withEncodedInteger(Int64(missing)) { try tree.withValue(forKey: $0) { _ in true } }
                #expect(lent == nil)
            }
        }
        // The tree cannot change while a value is lent.
        try database.write { (tx) throws in
            let tree = try tx.tree(named: "t")!
            let code = try KeyEncoding.withEncodedInteger(4) { key in
                try tree.withValue(forKey: key) { _ in storeErrorCode({ try tree.put([1], [2]) }) }
            }
            #expect(code == .misuse)
            #expect(try tree.get([1]) == nil)
        }
    }

    @Test("a batched lookup answers each key as a lookup of its own would — random order, repeats, missing keys, inline, compressed and overflowing values, trees of one leaf and of several levels, a small cache — and the tree cannot change meanwhile",
          arguments: [(512, 3), (512, 600), (4096, 600), (4096, 5000)])
    func batchedLookups(pageSize: Int, rows: Int) throws {
        // A cache of 16 pages: a group's leaves may be evicted between its phases.
        let database = try Database(path: "/db", options: simulatedOptions(SimulatedDisk(), pageSize: pageSize, cacheSize: 16 * pageSize))
        var random = SplitMix64(seed: UInt64(pageSize + rows))
        try database.write { (tx) throws in
            let tree = try tx.createTree(named: "t")
            for i in 0..<rows {
                let value = i % 97 == 1 ? (0..<5000).map { _ in UInt8(truncatingIfNeeded: random.next()) } : sampleValue(i)
                try tree.put(KeyEncoding.encode([.int(Int64(i * 2))]), value)
            }
            // Keys of other lengths beside the integers: one leaf's slots may share a head.
            for i in 0..<rows / 10 { try tree.put(KeyEncoding.encode([.int(Int64(i * 2)), .string("x\(i)")]), [UInt8(i % 256)]) }
        }
        try database.read { (tx) throws in
            let tree = try #require(try tx.tree(named: "t"))
            for round in 0..<20 {
                var keys = KeyBatch()
                var asked: [[UInt8]] = []
                for _ in 0..<(round == 0 ? 0 : Int(random.next() % 40) + 1) {
                    let n = Int64(random.next() % UInt64(2 * rows + 4)) - 2
                    let key = random.next() % 5 == 0 ? KeyEncoding.encode([.int(n), .string("x\(n / 2)")]) : KeyEncoding.encode([.int(n)])
                    keys.append(key)
                    asked.append(key)
                }
                var answered: [Int] = []
                try tree.visitValues(forKeys: keys) { position, value in
                    answered.append(position)
                    let single = try asked[position].withUnsafeBytes { try tree.withValue(forKey: $0) { Array($0) } }
                    #expect(value.map(Array.init) == single, "key \(asked[position])")
                }
                #expect(answered == Array(asked.indices))
            }
        }
        try database.write { (tx) throws in
            let tree = try tx.tree(named: "t")!
            var keys = KeyBatch()
            keys.append(KeyEncoding.encode([.int(0)]))
            var code: StoreError.Code?
            try tree.visitValues(forKeys: keys) { _, _ in code = storeErrorCode({ try tree.put([1], [2]) }) }
            #expect(code == .misuse)
            #expect(try tree.get([1]) == nil)
        }
    }

    @Test("a batched lookup in a damaged tree whose leaves lie at two depths answers as single lookups do: a leaf met above the left-most path's depth is searched, not refused")
    func batchedLookupsInALopsidedTree() throws {
        let database = try Database(path: "/db", options: simulatedOptions(SimulatedDisk(), pageSize: 512, cacheSize: 64 * 512))
        let count = 3000
        try database.write { (tx) throws in
            let tree = try tx.createTree(named: "t")
            // Values of 60 bytes: a few to a leaf, so that the tree has three levels.
            for i in 0..<count { try tree.put(KeyEncoding.encode([.int(Int64(i))]), Array(repeating: UInt8(i % 251), count: 60)) }
            // The root's right-most child (an interior node) replaced by that node's right-most
            // leaf: keys routed there now meet a leaf one level up.
            let pager = tx.pager
            let root = tree.descriptor.root
            let right = try pager.withPage(root) { NodeView(body: $0).rightChild }
            let (rightIsInterior, leaf) = try pager.withPage(right) { (NodeView(body: $0).type == NodeLayout.interiorType, NodeView(body: $0).rightChild) }
            try #require(rightIsInterior, "the tree needs three levels")
            try pager.withMutablePage(root) { $0.storeLE(leaf, at: 8) }
        }
        try database.read { (tx) throws in
            let tree = try #require(try tx.tree(named: "t"))
            var keys = KeyBatch()
            for i in 0..<count { keys.append(KeyEncoding.encode([.int(Int64(i))])) }
            var found = 0
            try tree.visitValues(forKeys: keys) { position, value in
                let single = try KeyEncoding.withEncodedInteger(Int64(position)) { try tree.withValue(forKey: $0) { Array($0) } }
                #expect(value.map(Array.init) == single, "key \(position)")
                if value != nil { found += 1 }
            }
            // The leaves the damage cut off are not found; the rest are.
            #expect(found > 0 && found < count)
        }
    }

    @Test("a record prefilter skips exactly the records whose integer columns fail a comparison, every column before holding an integer; malformed records are left to the scan")
    func recordPrefilter() throws {
        let database = try Database(path: "/db", options: simulatedOptions(SimulatedDisk(), pageSize: 512, cacheSize: 128 * 512))
        var random = SplitMix64(seed: 26)
        /// A column: nil, an integer, or text.
        enum Column { case null, integer(Int64), text(Int) }
        func varint(_ value: Int) -> [UInt8] {
            var value = value, bytes: [UInt8] = []
            while value >= 0x80 { bytes.append(UInt8(value & 0x7F) | 0x80); value >>= 7 }
            return bytes + [UInt8(value)]
        }
        func record(_ columns: [Column], version: Int) -> [UInt8] {
            var types: [UInt8] = [], payload: [UInt8] = []
            for column in columns {
                switch column {
                case .null: types.append(0)
                case .integer(0): types.append(8)
                case .integer(1): types.append(9)
                case .integer(let n):
                    let (type, size): (UInt8, Int) = (-128...127).contains(n) ? (1, 1) : (-32_768...32_767).contains(n) ? (2, 2) : (6, 8)
                    types.append(type)
                    for shift in stride(from: (size - 1) * 8, through: 0, by: -8) { payload.append(UInt8(truncatingIfNeeded: n >> Int64(shift))) }
                case .text(let count):
                    types += varint(count * 2 + 13)
                    payload += Array(repeating: 0x61, count: count)
                }
            }
            return [0x07] + varint(version) + varint(types.count + 1) + types + payload
        }
        var rows: [(columns: [Column], bytes: [UInt8])] = []
        try database.write { (tx) throws in
            let tree = try tx.createTree(named: "t")
            for i in 0..<3000 {
                let columns: [Column] = (0..<4).map { _ in
                    switch random.next() % 8 {
                    case 0: .null
                    case 1: .text(Int(random.next() % 70))
                    case 2: .integer(Int64(random.next() % 2))
                    case 3: .integer(Int64(random.next() % 100_000) - 50_000)
                    default: .integer(Int64(random.next() % 7) - 3)
                    }
                }
                var bytes = record(columns, version: Int(random.next() % 300) + 1)
                if i % 97 == 0 { bytes = Array(bytes.prefix(Int(random.next() % UInt64(bytes.count)))) }  // truncated
                if i % 89 == 0 { bytes[0] = 0x08 }  // another prefix
                if i % 83 == 0, !bytes.isEmpty { bytes[Int(random.next() % UInt64(bytes.count))] ^= 0x80 }  // damaged: skipped or not, never a trap
                rows.append((columns, bytes))
                try tree.put(KeyEncoding.encode([.int(Int64(i))]), bytes)
            }
        }
        let relations: [ValuePrefilter.Relation] = [.equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual]
        var skippedInAll = 0
        for _ in 0..<16 {
            let comparisons = try (0..<(1 + Int(random.next() % 3))).map { _ in
                try #require(ValuePrefilter.RecordComparison(column: Int(random.next() % 4), relation: relations[Int(random.next() % 6)],
                                                             constant: Int64(random.next() % 7) - 3))
            }
            #expect(ValuePrefilter.RecordComparison(column: -1, relation: .equal, constant: 0) == nil)
            let prefilter = ValuePrefilter(prefix: [0x07], recordComparisons: comparisons)
            /// The reference: in column order, a comparison whose column is not an integer stops
            /// the test (nothing skipped); the first that fails skips.
            func skipped(_ index: Int) -> Bool {
                guard index % 97 != 0, index % 89 != 0, index % 83 != 0 else { return false }
                return skippedWhole(rows[index].columns, comparisons)
            }
            let expected = rows.indices.filter { !skipped($0) }
            var taken: [Int] = []
            try database.read { (tx) throws in
                let tree = try #require(try tx.tree(named: "t"))
                try tree.forEach(prefilter: prefilter, selecting: { _ in true }) { key, _ in
                    taken.append(Int(try #require(KeyEncoding.decode(Array(key)).first.flatMap { if case .int(let n) = $0 { n } else { nil } })))
                    return true
                }
            }
            // Truncated records are never skipped wrongly: a skip needs every byte it read.
            let truncatedSkipped = Set(rows.indices).subtracting(taken).filter { $0 % 97 == 0 && $0 % 83 != 0 }
            for index in truncatedSkipped { #expect(skippedWhole(rows[index].columns, comparisons), "truncated record \(index) skipped on bytes it lacks") }
            let whole = { (index: Int) in index % 97 != 0 && index % 83 != 0 }
            #expect(taken.filter(whole) == expected.filter(whole))
            skippedInAll += rows.count - taken.count
        }
        #expect(skippedInAll > 3000, "the record prefilter skips many values (\(skippedInAll))")

        /// Whether the whole record would be skipped (a truncated one may only be skipped when
        /// the bytes it kept already fail a comparison, which the whole one fails too).
        func skippedWhole(_ columns: [Column], _ comparisons: [ValuePrefilter.RecordComparison]) -> Bool {
            for comparison in comparisons.sorted(by: { $0.column < $1.column }) {
                guard case .integer(let n) = columns[comparison.column] else { return false }
                // Written out, not the engine's `Relation.admits`: the reference must not share it.
                let passes = [n == comparison.constant, n != comparison.constant, n < comparison.constant,
                              n <= comparison.constant, n > comparison.constant, n >= comparison.constant][Int(comparison.relation.rawValue)]
                if !passes { return true }
            }
            return false
        }
    }
}

@Suite("Integrity check")
struct IntegrityCheckTests {
    @Test("keys out of order inside a leaf are reported (with valid checksums)")
    func outOfOrderKeys() throws {
        let disk = SimulatedDisk()
        let database = try Database(path: "/db", options: simulatedOptions(disk, pageSize: 512))
        try database.write { (tx) throws in
            let tree = try tx.createTree(named: "t")
            try tree.put(Array("aaaa".utf8), [1])
            try tree.put(Array("bbbb".utf8), [2])
        }
        database.close()
        // Turn the first key's head ("aa", in its slot) into "cc" in place and re-seal the page:
        // the checksum holds, the order ("ccaa" before "bbbb") does not.
        var bytes = disk.contents(of: "/db")!
        let pageCount = bytes.count / 512
        var patched = false
        for page in 2...pageCount {
            let base = (page - 1) * 512
            guard bytes[base] == 0x0A, bytes[base + 2] == 2 else { continue }   // the leaf with two keys
            let firstHead = base + NodeLayout.headerSize + Int(bytes[base + 1]) + 2
            #expect(bytes[firstHead] == UInt8(ascii: "a") && bytes[firstHead + 1] == UInt8(ascii: "a"))
            bytes[firstHead] = UInt8(ascii: "c")
            bytes[firstHead + 1] = UInt8(ascii: "c")
            patched = true
            bytes.withUnsafeMutableBytes { raw in
                PageLayout.seal(UnsafeMutableRawBufferPointer(rebasing: raw[base..<(base + 512)]), pageNumber: PageNumber(page))
            }
        }
        #expect(patched)
        disk.setContents(of: "/db", to: bytes)
        let reopened = try Database(path: "/db", options: simulatedOptions(disk, pageSize: 512))
        let report = try reopened.checkIntegrity()
        #expect(report.problems.contains { $0.message.contains("out of order") }, "\(report.problems)")
    }
}
