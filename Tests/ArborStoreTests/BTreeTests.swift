import ArborTestSupport
import Testing
@testable import ArborStore

/// The B+tree against a sorted-dictionary oracle, on tiny pages so splits, merges and overflow
/// chains happen constantly.
@Suite("B+tree")
struct BTreeTests {
    func makeTree(pageSize: Int = 512, threshold: Int = 64) throws -> (Pager, BTree) {
        let disk = SimulatedDisk()
        var options = PagerOptions()
        options.pageSize = pageSize
        options.lockTable = LockTable()
        let pager = try Pager(path: "/t", fileSystem: disk, options: options)
        pager.pageValidator = PageValidation.validate
        try pager.beginWrite()
        let root = try BTree.create(in: pager)
        return (pager, BTree(pager: pager, root: root, compressionThreshold: threshold))
    }

    func randomKey(_ random: inout SplitMix64, maxLength: Int = 24) -> [UInt8] {
        let length = 1 + Int(random.next() % UInt64(maxLength))
        return (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next() % 6 + 97) }
    }

    func randomValue(_ random: inout SplitMix64) -> [UInt8] {
        switch random.next() % 10 {
        case 0: return (0..<(200 + Int(random.next() % 3000))).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        case 1: return Array(repeating: UInt8(random.next() % 4 + 65), count: 100 + Int(random.next() % 2000))
        default: return (0..<Int(random.next() % 60)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        }
    }

    func checkMatches(_ tree: BTree, _ model: [[UInt8]: [UInt8]]) throws {
        var cursor = BTreeCursor(tree: tree)
        let sorted = model.keys.sorted { $0.lexicographicallyPrecedes($1) }
        var index = 0
        var more = try cursor.first()
        while more {
            #expect(index < sorted.count)
            guard index < sorted.count else { return }
            #expect(try cursor.key() == sorted[index])
            #expect(try cursor.value() == model[sorted[index]])
            index += 1
            more = try cursor.next()
        }
        #expect(index == sorted.count)
        // Backwards too.
        more = try cursor.last()
        index = sorted.count - 1
        while more {
            #expect(try cursor.key() == sorted[index])
            index -= 1
            more = try cursor.previous()
        }
        #expect(index == -1)
    }

    @Test("deleting a batch of keys — ascending, shuffled, with absent keys and keys listed twice, values in overflow chains — leaves what deleting them one at a time leaves", arguments: [(512, UInt64(11)), (1024, 12), (4096, 13)])
    func batchDelete(pageSize: Int, seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        for round in 0..<6 {
            let (pager, tree) = try makeTree(pageSize: pageSize)
            var model: [[UInt8]: [UInt8]] = [:]
            for _ in 0..<(600 + round * 300) {
                let key = randomKey(&random, maxLength: 12)
                let value = randomValue(&random)
                try tree.put(key, value)
                model[key] = value
            }
            // A share of the keys (a whole range in some rounds: leaves emptied, merged, the root
            // collapsed), some absent ones, some twice.
            let present = model.keys.sorted { $0.lexicographicallyPrecedes($1) }
            var doomed: [[UInt8]] = round % 3 == 2
                ? Array(present[(present.count / 8)..<(present.count * 7 / 8)])
                : present.filter { _ in random.next() % 3 == 0 }
            doomed += (0..<20).map { _ in randomKey(&random, maxLength: 14) }
            doomed += doomed.prefix(10)
            if round % 2 == 1 { doomed.shuffle(using: &random) } else { doomed.sort { $0.lexicographicallyPrecedes($1) } }
            let expected = Set(doomed).filter { model[$0] != nil }.count
            #expect(try tree.delete(batch: doomed) == expected, "round \(round)")
            for key in doomed { model[key] = nil }
            try checkMatches(tree, model)
            #expect(try tree.delete(batch: doomed) == 0, "nothing left to delete")
            _ = pager
        }
    }

    @Test("putting a sorted batch — new keys spread over the tree, keys it holds, large values, runs into one leaf — leaves what putting them one at a time leaves, a sound tree", arguments: [(512, UInt64(21)), (1024, 22), (4096, 23)])
    func batchPut(pageSize: Int, seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        for round in 0..<6 {
            let (pager, tree) = try makeTree(pageSize: pageSize)
            var model: [[UInt8]: [UInt8]] = [:]
            for _ in 0..<(round == 0 ? 0 : 400 + round * 400) {
                let key = randomKey(&random, maxLength: 12)
                let value = randomValue(&random)
                try tree.put(key, value)
                model[key] = value
            }
            var batch: [[UInt8]: [UInt8]] = [:]
            // New keys all over; in some rounds a dense run (many into one leaf); some held keys.
            for _ in 0..<(300 + round * 200) {
                batch[randomKey(&random, maxLength: 14)] = round % 2 == 0 ? [] : randomValue(&random)
            }
            if round % 3 == 1 {
                for i in 0..<800 { batch[[0x61, 0x62] + withUnsafeBytes(of: UInt32(i).bigEndian) { Array($0) }] = [UInt8(i % 7)] }
            }
            for key in model.keys.prefix(round * 10) { batch[key] = [9, 9] }
            let entries = batch.map { (key: $0.key, value: $0.value) }.sorted { $0.key.lexicographicallyPrecedes($1.key) }
            try tree.put(sortedBatch: entries)
            for (key, value) in entries { model[key] = value }
            try checkMatches(tree, model)
            var usage = PageUsage(pageCount: pager.pageCount)
            var statistics = TreeStatistics()
            var problems: [IntegrityProblem] = []
            IntegrityChecker(pager: pager).walk(tree, name: "t", usage: &usage, statistics: &statistics, problems: &problems, verifyValues: true)
            #expect(problems.isEmpty, "round \(round): \(problems)")
            // Unsorted keys are refused, nothing written.
            if entries.count > 2 {
                #expect(throws: StoreError.self) { try tree.put(sortedBatch: [entries[1], entries[0]]) }
            }
            try pager.commit()
        }
    }

    @Test("random puts, updates and deletes match a sorted dictionary", arguments: [(512, UInt64(1)), (512, 2), (1024, 3), (4096, 4)])
    func modelBased(pageSize: Int, seed: UInt64) throws {
        let (pager, tree) = try makeTree(pageSize: pageSize)
        var random = SplitMix64(seed: seed)
        var model: [[UInt8]: [UInt8]] = [:]
        for step in 0..<3000 {
            let key = randomKey(&random)
            if random.next() % 3 == 0 {
                let removed = try tree.delete(key)
                #expect(removed == (model.removeValue(forKey: key) != nil), "seed \(seed) step \(step)")
            } else {
                let value = randomValue(&random)
                try tree.put(key, value)
                model[key] = value
            }
            if step % 500 == 0 {
                #expect(try tree.get(key) == model[key], "seed \(seed) step \(step)")
            }
        }
        try checkMatches(tree, model)
        for (key, value) in model { #expect(try tree.get(key) == value) }
        // Delete everything: the tree shrinks back to an empty root.
        for key in model.keys { #expect(try tree.delete(key)) }
        try checkMatches(tree, [:])
        try pager.commit()
        #expect(try pager.checkPages().isEmpty)
    }

    @Test("updates that keep a value's length are written over the old bytes; equal values leave the page clean; other lengths, compressible and overflowing values take the general path", arguments: [(512, UInt64(31)), (4096, 32)])
    func sameLengthUpdates(pageSize: Int, seed: UInt64) throws {
        let (pager, tree) = try makeTree(pageSize: pageSize)
        var random = SplitMix64(seed: seed)
        var model: [[UInt8]: [UInt8]] = [:]
        for _ in 0..<2000 {
            let key = randomKey(&random)
            let value = randomValue(&random)
            try tree.put(key, value)
            model[key] = value
        }
        try pager.commit()
        // The same small values again: nothing changes, no page is made dirty.
        try pager.beginWrite()
        for (key, value) in model where value.count < tree.compressionThreshold { try tree.put(key, value) }
        #expect(pager.cache.dirtyCount == 0)
        // Every value changed, most to the same length (in place), some longer or shorter.
        for key in model.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            let old = model[key]!
            var value = old.map { $0 &+ 1 }
            switch random.next() % 5 {
            case 0: value.append(7)
            case 1: value = Array(value.dropLast())
            default: break
            }
            try tree.put(key, value)
            model[key] = value
        }
        #expect(pager.cache.dirtyCount > 0)
        try checkMatches(tree, model)
        for (key, value) in model { #expect(try tree.get(key) == value) }
        try pager.commit()
        #expect(try pager.checkPages().isEmpty)
    }

    @Test("sequential inserts fill leaves densely")
    func sequentialFill() throws {
        let (pager, tree) = try makeTree(pageSize: 4096)
        for i in 0..<20_000 {
            var key = withUnsafeBytes(of: UInt64(i).bigEndian) { Array($0) }
            key.append(0)
            try tree.put(key, Array(repeating: UInt8(i % 251), count: 100))
        }
        // Prefix 7 bytes, head 2, no tail: 102-byte cells and 4-byte slots, 38 to a leaf, so a
        // dense tree needs 20 000 / 38 ≈ 527 leaves (format version 1, whole keys in cells: 556).
        #expect(pager.pageCount < 540)
        try pager.commit()
    }

    @Test("random inserts share with siblings and leave leaves about 80 % full")
    func randomFill() throws {
        let (pager, tree) = try makeTree(pageSize: 4096)
        var random = SplitMix64(seed: 0xF111)
        var model: [[UInt8]: [UInt8]] = [:]
        for i in 0..<20_000 {
            let key = (0..<12).map { _ in UInt8(truncatingIfNeeded: random.next() % 26 + 97) }
            let value = withUnsafeBytes(of: UInt64(i).bigEndian) { Array($0) }
            try tree.put(key, value)
            model[key] = value
        }
        try checkMatches(tree, model)
        var usage = PageUsage(pageCount: pager.pageCount)
        var statistics = TreeStatistics()
        var problems: [IntegrityProblem] = []
        IntegrityChecker(pager: pager).walk(tree, name: "t", usage: &usage, statistics: &statistics, problems: &problems, verifyValues: true)
        #expect(problems.isEmpty, "\(problems)")
        // Plain halving leaves about 69 % (ln 2); sharing with a sibling and 2-to-3 splits more.
        #expect(statistics.fillFactor > 0.77, "fill \(statistics.fillFactor) over \(statistics.leafPages) leaves")
        try pager.commit()
    }

    @Test("a key longer than the limit is a typed error")
    func keyLimit() throws {
        let (_, tree) = try makeTree(pageSize: 512)
        let limit = NodeLayout.maxKeySize(usable: 504)
        try tree.put(Array(repeating: 1, count: limit), [1])
        #expect(storeErrorCode { try tree.put(Array(repeating: 2, count: limit + 1), [1]) } == .invalidArgument)
    }

    @Test("compressible values are stored compressed and read back exactly")
    func compression() throws {
        let (pager, tree) = try makeTree(pageSize: 4096, threshold: 128)
        let text = Array(String(repeating: "the quick brown fox jumps over the lazy dog. ", count: 400).utf8)
        let before = pager.pageCount
        try tree.put([1], text)
        #expect(try tree.get([1]) == text)
        // 18 000 bytes of text compress to well under one page.
        #expect(pager.pageCount - before <= 1)
        var random = SplitMix64(seed: 9)
        let noise = (0..<5000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        try tree.put([2], noise)
        #expect(try tree.get([2]) == noise)
    }

    @Test("the append fast path: increasing keys mixed with deletes, middle inserts and other trees", arguments: [512, 4096])
    func appendFastPath(pageSize: Int) throws {
        let (pager, tree) = try makeTree(pageSize: pageSize)
        let other = BTree(pager: pager, root: try BTree.create(in: pager), compressionThreshold: 64)
        var random = SplitMix64(seed: UInt64(pageSize))
        var model: [[UInt8]: [UInt8]] = [:]
        var next: UInt64 = 1000
        for _ in 0..<6000 {
            let roll = random.next() % 100
            if roll < 75 {
                next += 1 + random.next() % 3
                let key = withUnsafeBytes(of: next.bigEndian) { Array($0) }
                let value = randomValue(&random)
                try tree.put(key, value)
                model[key] = value
            } else if roll < 85 {
                let key = withUnsafeBytes(of: (random.next() % next).bigEndian) { Array($0) }
                #expect(try tree.delete(key) == (model.removeValue(forKey: key) != nil))
            } else if roll < 95 {
                let key = withUnsafeBytes(of: (random.next() % next).bigEndian) { Array($0) } + [1]
                let value = randomValue(&random)
                try tree.put(key, value)
                model[key] = value
            } else {
                try other.put(randomKey(&random), randomValue(&random))
            }
        }
        try checkMatches(tree, model)
        try pager.commit()
        #expect(try pager.checkPages().isEmpty)
    }

    @Test("a batch delete in a database frees every page it empties, overflow chains included: the file checks sound (each page used once) and the tree holds the rest")
    func batchDeleteFreesPages() throws {
        var options = DatabaseOptions()
        options.fileSystem = SimulatedDisk()
        options.lockTable = LockTable()
        options.pageSize = 512
        let database = try Database(path: "/batch", options: options)
        var random = SplitMix64(seed: 0xB47C)
        var keys: [[UInt8]] = []
        try database.write { (transaction) throws in
            let tree = try #require(try transaction.tree(named: "t", create: true))
            for index in 0..<2_000 {
                let key = Array("k\(100_000 + index)".utf8)
                try tree.put(key, index % 7 == 0 ? randomValue(&random) + Array(repeating: 1, count: 900) : randomValue(&random))
                keys.append(key)
            }
        }
        let doomed = keys.filter { _ in random.next() % 4 != 0 }
        try database.write { (transaction) throws in
            #expect(try #require(try transaction.tree(named: "t")).delete(batch: doomed) == doomed.count)
        }
        let report = try database.checkIntegrity()
        #expect(report.problems.isEmpty, "\(report.problems.prefix(3))")
        let left = try database.read { (transaction) throws -> Int in
            var count = 0
            try #require(try transaction.tree(named: "t")).forEach { (_, _) throws -> Bool in
                count += 1
                return true
            }
            return count
        }
        #expect(left == keys.count - doomed.count)
    }
}
