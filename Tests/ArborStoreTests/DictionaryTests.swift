import ArborTestSupport
import Testing
@testable import ArborStore

/// Per-tree LZ4 dictionaries (docs/file-format.md, "Compression dictionaries").
@Suite("Compression dictionaries")
struct DictionaryTests {
    /// English-like text: words from a small vocabulary, so values share much with each other
    /// and little within themselves.
    static func text(_ row: Int, length: Int = 600) -> [UInt8] {
        let words = ["the", "object", "graph", "keeps", "every", "managed", "context", "in", "step", "with", "its",
                     "store", "while", "faults", "fire", "lazily", "and", "relationships", "stay", "consistent"]
        var random = SplitMix64(seed: UInt64(row) &+ 0xD1C7)
        var text: [UInt8] = []
        while text.count < length {
            text.append(contentsOf: words[Int(random.next() % UInt64(words.count))].utf8)
            text.append(random.next() % 9 == 0 ? 0x2E : 0x20)
        }
        return Array(text.prefix(length))
    }

    static func key(_ row: Int) -> [UInt8] { KeyEncoding.encode([.int(Int64(row))]) }

    func options(_ disk: SimulatedDisk, dictionarySize: Int) -> DatabaseOptions {
        var options = simulatedOptions(disk, pageSize: 4096, cacheSize: 1 << 20)
        options.compressionDictionarySize = dictionarySize
        return options
    }

    @Test("a tree gets a dictionary from its first large values; every value reads back; the file is smaller")
    func dictionaryShrinksFile() throws {
        let rows = 1500
        var sizes: [Int: Int] = [:]
        for dictionarySize in [0, 8192] {
            let disk = SimulatedDisk()
            let database = try Database(path: "/db", options: options(disk, dictionarySize: dictionarySize))
            try database.write { (tx) throws in
                let tree = try tx.createTree(named: "texts")
                for row in 0..<rows { try tree.put(Self.key(row), Self.text(row)) }
                // Read back inside the transaction too: the dictionary was made in it.
                for row in stride(from: 0, to: rows, by: 7) { #expect(try tree.get(Self.key(row)) == Self.text(row)) }
            }
            database.close()
            let reopened = try Database(path: "/db", options: options(disk, dictionarySize: dictionarySize))
            try reopened.read { (tx) throws in
                let tree = try #require(try tx.tree(named: "texts"))
                #expect(tree.descriptor.dictionaryLength == dictionarySize)
                #expect((tree.descriptor.dictionaryPage != 0) == (dictionarySize > 0))
                var row = 0
                try tree.forEach { key, value in
                    #expect(key.elementsEqual(Self.key(row)) && value.elementsEqual(Self.text(row)), "row \(row)")
                    row += 1
                    return true
                }
                #expect(row == rows)
                let statistics = try tree.statistics()
                #expect(statistics.compressedValues == rows)
                #expect(statistics.dictionaryPages == (dictionarySize + 4079) / 4080)
            }
            let report = try reopened.checkIntegrity()
            #expect(report.isSound, "\(report.problems)")
            sizes[dictionarySize] = disk.contents(of: "/db")!.count
        }
        let ratio = Double(sizes[8192]!) / Double(sizes[0]!)
        #expect(ratio < 0.8, "with a dictionary the file is \(ratio) of its size without")
    }

    @Test("a handle opened before the dictionary was made reads and writes values against it")
    func staleHandle() throws {
        let disk = SimulatedDisk()
        let database = try Database(path: "/db", options: options(disk, dictionarySize: 4096))
        try database.write { (tx) throws in
            let early = try tx.createTree(named: "texts")
            let late = try #require(try tx.tree(named: "texts"))
            for row in 0..<40 { try late.put(Self.key(row), Self.text(row)) }
            #expect(late.descriptor.dictionaryPage != 0)
            #expect(early.descriptor.dictionaryPage == 0)
            for row in 0..<40 { #expect(try early.get(Self.key(row)) == Self.text(row)) }
            for row in 40..<60 { try early.put(Self.key(row), Self.text(row)) }
            for row in 0..<60 { #expect(try late.get(Self.key(row)) == Self.text(row)) }
        }
        #expect(try database.checkIntegrity().isSound)
    }

    @Test("rolling back forgets a dictionary made in the transaction; dropping a tree frees its dictionary")
    func rollbackAndDrop() throws {
        let disk = SimulatedDisk()
        let database = try Database(path: "/db", options: options(disk, dictionarySize: 4096))
        struct Abandon: Error {}
        #expect(throws: Abandon.self) {
            try database.write { (tx) throws in
                let tree = try tx.createTree(named: "texts")
                for row in 0..<40 { try tree.put(Self.key(row), Self.text(row)) }
                throw Abandon()
            }
        }
        try database.write { (tx) throws in
            let tree = try tx.createTree(named: "texts")
            for row in 0..<40 { try tree.put(Self.key(row), Self.text(row)) }
            #expect(tree.descriptor.dictionaryPage != 0)
        }
        #expect(try database.read { (tx) throws in try tx.tree(named: "texts")?.get(Self.key(39)) } == Self.text(39))
        let pages = try database.read { (tx) throws in tx.header.pageCount }
        try database.write { (tx) throws in #expect(try tx.dropTree(named: "texts")) }
        let report = try database.checkIntegrity()
        #expect(report.isSound, "\(report.problems)")
        // Everything but the header and the catalog's root is free again.
        #expect(report.freePages == Int(pages) - 2)
    }
}
