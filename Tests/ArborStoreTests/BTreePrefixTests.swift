import ArborTestSupport
import Testing
@testable import ArborStore

/// Splits, merges and redistributions of nodes whose keys share long prefixes: a node rewritten
/// whole takes the prefix its keys share, so the same entries take more room in a node whose
/// keys share less. Before the fix, a split that measured both halves at the whole node's prefix
/// (and a redistribution after a delete) could write a half that did not fit its page, and the
/// process stopped ("rebuilt node overflows its page").
@Suite("B+tree with long shared key prefixes")
struct BTreePrefixTests {
    func makeTree(pageSize: Int) throws -> (Pager, BTree) {
        var options = PagerOptions()
        options.pageSize = pageSize
        options.lockTable = LockTable()
        let pager = try Pager(path: "/t", fileSystem: SimulatedDisk(), options: options)
        pager.pageValidator = PageValidation.validate
        try pager.beginWrite()
        let root = try BTree.create(in: pager)
        return (pager, BTree(pager: pager, root: root, compressionThreshold: 64))
    }

    static func catalogKey(_ n: Int) -> [UInt8] {
        let digits = String(n)
        return Array(("https://shop.example.com/catalog/item/" + String(repeating: "0", count: max(0, 6 - digits.count)) + digits).utf8)
    }

    /// A root over two hand-made leaves: `left` and `right` (each sorted, each fitting a page),
    /// the separator between them the shortest that works.
    func twoLeafTree(_ tree: BTree, left: [([UInt8], [UInt8])], right: [([UInt8], [UInt8])]) throws -> [[UInt8]: [UInt8]] {
        func leaf(_ entries: [([UInt8], [UInt8])]) throws -> NodeImage {
            var image = NodeImage(leaf: true)
            for (index, (key, value)) in entries.enumerated() {
                image.insert(key: key, payload: try tree.makeLeafPayload(key: key, value: value), at: index)
            }
            #expect(image.fits(usable: tree.usable))
            return image
        }
        let leftPage = try tree.pager.allocatePage(), rightPage = try tree.pager.allocatePage()
        try tree.write(try leaf(left), to: leftPage)
        try tree.write(try leaf(right), to: rightPage)
        var root = NodeImage(leaf: false, rightChild: rightPage)
        root.insert(key: BTree.shortestSeparator(left.last!.0, right.first!.0), child: leftPage, at: 0)
        try tree.write(root, to: tree.root)
        var model: [[UInt8]: [UInt8]] = [:]
        for (key, value) in left + right { model[key] = value }
        return model
    }

    /// How many catalog keys with `valueLength`-byte values fill a leaf of `usable` bytes (less
    /// `spare` entries).
    func fullLeaf(_ tree: BTree, valueLength: Int, spare: Int = 0) throws -> [([UInt8], [UInt8])] {
        var entries: [([UInt8], [UInt8])] = []
        var image = NodeImage(leaf: true)
        while true {
            let key = Self.catalogKey(entries.count), value = [UInt8](repeating: UInt8(entries.count % 251), count: valueLength)
            image.insert(key: key, payload: try tree.makeLeafPayload(key: key, value: value), at: entries.count)
            guard image.fits(usable: tree.usable) else { break }
            entries.append((key, value))
        }
        return Array(entries.dropLast(spare))
    }

    func checkTree(_ pager: Pager, _ tree: BTree, _ model: [[UInt8]: [UInt8]], _ context: String) throws {
        var cursor = BTreeCursor(tree: tree)
        let sorted = model.keys.sorted(by: Self.precedes)
        var index = 0
        var more = try cursor.first()
        while more, index < sorted.count {
            let key = try cursor.key()
            #expect(key == sorted[index], "\(context): entry \(index)")
            guard key == sorted[index] else { return }
            #expect(try cursor.value() == model[key], "\(context): value of entry \(index)")
            index += 1
            more = try cursor.next()
        }
        #expect(index == sorted.count && !more, "\(context): \(index) entries of \(sorted.count)")
        var usage = PageUsage(pageCount: pager.pageCount)
        var statistics = TreeStatistics()
        var problems: [IntegrityProblem] = []
        IntegrityChecker(pager: pager).walk(tree, name: "t", usage: &usage, statistics: &statistics, problems: &problems, verifyValues: true)
        #expect(problems.isEmpty, "\(context): \(problems)")
    }

    @Test("a key that sorts at the end of a full leaf of long-prefix keys, sharing 8 bytes with them", arguments: [512, 4096])
    func insertAfterLongPrefixLeaf(pageSize: Int) throws {
        let (pager, tree) = try makeTree(pageSize: pageSize)
        let left = try fullLeaf(tree, valueLength: 4)
        var model = try twoLeafTree(tree, left: left, right: [(Array("https://www.example.org/".utf8), [1])])
        // Sorts after every catalog key and before the right leaf's first key; shares "https://".
        let key = Array("https://t".utf8)
        try tree.put(key, [2])
        model[key] = [2]
        try checkTree(pager, tree, model, "page size \(pageSize)")
        try pager.commit()
        #expect(try pager.checkPages().isEmpty)
    }

    @Test("a key that sorts before a full leaf of long-prefix keys", arguments: [512, 4096])
    func insertBeforeLongPrefixLeaf(pageSize: Int) throws {
        let (pager, tree) = try makeTree(pageSize: pageSize)
        let right = try fullLeaf(tree, valueLength: 4)
        var model = try twoLeafTree(tree, left: [(Array("https://a".utf8), [1])], right: right)
        let key = Array("https://s".utf8)
        try tree.put(key, [2])
        model[key] = [2]
        try checkTree(pager, tree, model, "page size \(pageSize)")
        try pager.commit()
    }

    @Test("a delete merges a small leaf into a full leaf of long-prefix keys, or redistributes with it", arguments: [512, 4096])
    func deleteNextToLongPrefixLeaf(pageSize: Int) throws {
        for spare in [0, 1, 3, 8] {
            for side in ["left", "right"] {
                let (pager, tree) = try makeTree(pageSize: pageSize)
                let full = try fullLeaf(tree, valueLength: 4, spare: spare)
                let small: [([UInt8], [UInt8])] = (0..<3).map { (Array("https://\(side == "left" ? "a" : "z")\($0)".utf8), [UInt8($0)]) }
                var model = side == "left" ? try twoLeafTree(tree, left: small, right: full) : try twoLeafTree(tree, left: full, right: small)
                let victim = small[1].0
                #expect(try tree.delete(victim))
                model[victim] = nil
                try checkTree(pager, tree, model, "page size \(pageSize), \(spare) spare, small leaf \(side)")
                try pager.commit()
            }
        }
    }

    @Test("interior nodes of long-prefix separators take a separator that shares little with them", arguments: [512, 1024])
    func interiorSplitAndMerge(pageSize: Int) throws {
        let (pager, tree) = try makeTree(pageSize: pageSize)
        var model: [[UInt8]: [UInt8]] = [:]
        // Sequential keys: dense leaves under interior nodes whose separators share 38 bytes or more.
        let count = pageSize == 512 ? 3000 : 12000
        for n in 0..<count {
            let key = Self.catalogKey(n)
            try tree.put(key, [UInt8(n % 251)])
            model[key] = [UInt8(n % 251)]
        }
        // Keys before, between and after that share 8 bytes ("https://"), or 1: each new leaf's
        // separator goes into a parent of long-prefix separators, which rewritten whole at the
        // shorter prefix fills more than a page.
        for (i, text) in ["https://a", "https://shop.example.com/catalog/item/0015", "https://t", "h", "https://s", "https://shop.example.com/catalog/item/0029z"].enumerated() {
            for j in 0..<40 {
                let key = Array(text.utf8) + Array(String(j).utf8)
                try tree.put(key, [UInt8(i)])
                model[key] = [UInt8(i)]
            }
            try checkTree(pager, tree, model, "page size \(pageSize), after \(text)")
        }
        // Then deletes of every other run: leaves and interior nodes of different prefixes merge.
        var random = SplitMix64(seed: UInt64(pageSize))
        let keys = model.keys.sorted(by: Self.precedes)
        var start = 0
        while start < keys.count {
            let length = 1 + Int(random.next() % 300)
            if random.next() % 2 == 0 {
                for key in keys[start..<min(keys.count, start + length)] {
                    #expect(try tree.delete(key))
                    model[key] = nil
                }
            }
            start += length
        }
        try checkTree(pager, tree, model, "page size \(pageSize), after deletes")
        try pager.commit()
        #expect(try pager.checkPages().isEmpty)
    }

    @Test("the cuts of a node are the fewest parts that fit, the larger as small as a search of every cut finds")
    func cutsAgainstExhaustiveSearch() throws {
        let (_, tree) = try makeTree(pageSize: 512)
        let usable = tree.usable
        var random = SplitMix64(seed: 0xC075)
        for round in 0..<300 {
            // A sorted run of keys from a few families sharing prefixes of different lengths.
            let leaf = round % 3 != 0
            var keys = Set<[UInt8]>()
            let families = (0..<(1 + Int(random.next() % 4))).map { _ in Array(Self.base.prefix(Int(random.next() % 70))) + [UInt8(97 + random.next() % 26)] }
            for _ in 0..<(8 + Int(random.next() % 60)) {
                let family = families[Int(random.next() % UInt64(families.count))]
                keys.insert(family + (0..<Int(random.next() % 5)).map { _ in UInt8(48 + random.next() % 10) })
            }
            var node = NodeImage(leaf: leaf, rightChild: leaf ? 0 : 2)
            for (index, key) in keys.sorted(by: Self.precedes).enumerated() {
                if leaf {
                    let value = [UInt8](repeating: 1, count: Int(random.next() % 12))
                    node.insert(key: key, payload: try tree.makeLeafPayload(key: key, value: value), at: index)
                } else {
                    node.insert(key: key, child: 3, at: index)
                }
            }
            let context = "round \(round), \(leaf ? "leaf" : "interior"), \(node.count) entries"
            // Every set of one or two cuts, the best largest part for each number of parts.
            var best: [Int: Int] = [:]
            for first in 1..<node.count {
                for second in [nil] + Array((first + 1)..<node.count).map(Optional.some) {
                    let cuts = [first] + (second.map { [$0] } ?? [])
                    guard node.partsFit(cuts, usable: usable) else { continue }
                    let largest = node.parts(cuts).map(node.partSize).max()!
                    best[cuts.count + 1] = min(best[cuts.count + 1] ?? .max, largest)
                }
            }
            let cuts = node.balancedCuts(maximumParts: 3, usable: usable)
            if node.fits(usable: usable) {
                #expect(cuts == [], "\(context)")
            } else if let fewest = best.keys.min() {
                let found = try #require(cuts, "\(context): no cuts, though \(fewest) parts fit")
                #expect(found.count + 1 == fewest, "\(context)")
                #expect(node.partsFit(found, usable: usable), "\(context)")
                let largest = node.parts(found).map(node.partSize).max()!
                // Two parts: the best there is; three: within the search's 64th of a page.
                #expect(largest <= best[fewest]! + (fewest == 2 ? 0 : usable / 64), "\(context): \(largest) against \(best[fewest]!)")
            } else {
                #expect(cuts == nil, "\(context)")
            }
        }
    }

    @Test("a node written in three parts: leaves and interior nodes, each part with its own prefix")
    func threeParts() throws {
        let (pager, tree) = try makeTree(pageSize: 512)
        // Two runs of long-prefix keys with keys between them that share 8 bytes with each: a
        // middle key with either run takes that run to an 8-byte prefix, so three parts (an
        // interior node's cut entries move up, so it has three middle keys).
        let runA = (0..<30).map { Array("https://shop.example.com/catalog/item/0000\($0 + 10)".utf8) }
        let runB = (0..<30).map { Array("https://www.example.org/catalog/item/0000\($0 + 10)".utf8) }
        let middle = ["https://t", "https://u", "https://v"].map { Array($0.utf8) }
        for leaf in [true, false] {
            var node = NodeImage(leaf: leaf, rightChild: leaf ? 0 : 9)
            for (index, key) in (runA + middle + runB).enumerated() {
                if leaf {
                    node.insert(key: key, payload: try tree.makeLeafPayload(key: key, value: [UInt8(index)]), at: index)
                } else {
                    node.insert(key: key, child: PageNumber(10 + index), at: index)
                }
            }
            let cuts = try #require(node.balancedCuts(usable: tree.usable))
            #expect(cuts.count == 2, "\(leaf ? "leaf" : "interior"): \(cuts)")
            let pages = try (0...cuts.count).map { _ in try pager.allocatePage() }
            try tree.write(node, cuts: cuts, to: pages)
            var read: [[UInt8]] = []
            for (i, page) in pages.enumerated() {
                let image = try tree.image(of: page)
                for index in 0..<image.count { read.append(image.key(index)) }
                if i < cuts.count {
                    if !leaf {
                        read.append(node.key(cuts[i]))
                        #expect(image.rightChild == node.child(cuts[i]))
                    }
                } else if !leaf {
                    #expect(image.rightChild == 9)
                }
            }
            #expect(read == runA + middle + runB)
        }
    }

    // MARK: Random and adversarial

    /// Stems of a key family: cuts of one long string at lengths from 0 to 80 (so keys share
    /// prefixes of many lengths), each followed by a letter and digits.
    static let base = Array("https://shop.example.com/catalog/item/electronics/audio/headphones/wireless/over-ear/black".utf8)

    func randomKey(_ random: inout SplitMix64, maxKey: Int) -> [UInt8] {
        let cuts = [0, 1, 8, 9, 24, 25, 38, 39, 50, 60, 70, 80]
        let cut = min(cuts[Int(random.next() % UInt64(cuts.count))], maxKey - 8)
        var key = Array(Self.base[..<cut])
        key.append(UInt8(97 + random.next() % 4))
        for _ in 0..<(1 + Int(random.next() % 6)) { key.append(UInt8(48 + random.next() % 10)) }
        return Array(key.prefix(maxKey))
    }

    func randomValue(_ random: inout SplitMix64, pageSize: Int) -> [UInt8] {
        switch random.next() % 20 {
        case 0: return [UInt8](repeating: UInt8(random.next() % 200), count: Int(random.next() % UInt64(pageSize / 2)))
        case 1, 2: return (0..<Int(random.next() % 40)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        default: return (0..<Int(random.next() % 6)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        }
    }

    @Test("random runs of long-prefix keys, gap keys and deletes in adversarial orders match a sorted dictionary",
          arguments: [(512, UInt64(1)), (512, 2), (512, 3), (1024, 4), (4096, 5), (4096, 6)])
    func adversarial(pageSize: Int, seed: UInt64) throws {
        let (pager, tree) = try makeTree(pageSize: pageSize)
        let maxKey = NodeLayout.maxKeySize(usable: tree.usable)
        var random = SplitMix64(seed: seed)
        var model = Model()
        let steps = pageSize >= 4096 ? 6000 : 4000
        for step in 0..<steps {
            let context = "seed \(seed), page size \(pageSize), step \(step)"
            let roll = random.next() % 100
            if roll < 35 {
                // A run of increasing keys under one stem (the append path and dense leaves).
                var key = randomKey(&random, maxKey: maxKey)
                for _ in 0..<Int(1 + random.next() % 40) {
                    let value = randomValue(&random, pageSize: pageSize)
                    try tree.put(key, value)
                    model.put(key, value)
                    key = Self.successor(key, maxKey: maxKey)
                }
            } else if roll < 55 {
                let key = randomKey(&random, maxKey: maxKey)
                let value = randomValue(&random, pageSize: pageSize)
                try tree.put(key, value)
                model.put(key, value)
            } else if roll < 70, !model.isEmpty {
                // A gap key: just after an existing key, sharing only its first few bytes.
                let existing = model.randomKey(&random)
                var key = Array(existing.prefix(1 + Int(random.next() % 10)))
                if key[key.count - 1] < 0xFF { key[key.count - 1] += 1 }
                let value = randomValue(&random, pageSize: pageSize)
                try tree.put(key, value)
                model.put(key, value)
            } else if roll < 90, !model.isEmpty {
                let key = model.randomKey(&random)
                #expect(try tree.delete(key), "\(context)")
                model.remove(key)
            } else if !model.isEmpty {
                // Delete a whole run: every key starting with a short prefix of a random key, in
                // ascending or descending order, merging neighbours of different prefixes.
                let existing = model.randomKey(&random)
                let stem = Array(existing.prefix(1 + Int(random.next() % 40)))
                var run = model.values.keys.filter { $0.starts(with: stem) }.sorted(by: Self.precedes)
                if random.next() % 2 == 0 { run.reverse() }
                for key in run.prefix(200) {
                    #expect(try tree.delete(key), "\(context)")
                    model.remove(key)
                }
            }
            if step % 1000 == 999 { try checkTree(pager, tree, model.values, context) }
        }
        try checkTree(pager, tree, model.values, "seed \(seed), page size \(pageSize), the end")
        for key in model.values.keys.sorted(by: Self.precedes) { #expect(try tree.delete(key), "seed \(seed)") }
        try checkTree(pager, tree, [:], "seed \(seed), page size \(pageSize), emptied")
        try pager.commit()
        #expect(try pager.checkPages().isEmpty, "seed \(seed)")
    }

    /// The sorted-dictionary oracle, with its keys also in an array so that a seeded generator
    /// picks the same key on every run (a dictionary's order changes from process to process).
    struct Model {
        var values: [[UInt8]: [UInt8]] = [:]
        var keys: [[UInt8]] = []
        var positions: [[UInt8]: Int] = [:]
        var isEmpty: Bool { keys.isEmpty }

        mutating func put(_ key: [UInt8], _ value: [UInt8]) {
            if values.updateValue(value, forKey: key) == nil {
                positions[key] = keys.count
                keys.append(key)
            }
        }

        mutating func remove(_ key: [UInt8]) {
            guard values.removeValue(forKey: key) != nil, let position = positions.removeValue(forKey: key) else { return }
            let last = keys.removeLast()
            if position < keys.count {
                keys[position] = last
                positions[last] = position
            }
        }

        func randomKey(_ random: inout SplitMix64) -> [UInt8] { keys[Int(random.next() % UInt64(keys.count))] }
    }

    /// Byte order (`lexicographicallyPrecedes` is slow in debug builds).
    static func precedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBytes { a in b.withUnsafeBytes { b in compareBytes(a, b) < 0 } }
    }

    /// The next key in a run: the last digit counted up, or a digit appended.
    static func successor(_ key: [UInt8], maxKey: Int) -> [UInt8] {
        var key = key
        if let last = key.last, last >= 48, last < 57 {
            key[key.count - 1] += 1
        } else if key.count < maxKey {
            key.append(48)
        } else {
            key[key.count - 1] &+= 1
        }
        return key
    }
}
