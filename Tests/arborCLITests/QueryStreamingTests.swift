import Arbor
import ArborStore
import Foundation
import Testing

/// `arbor query` writes rows as the store reads them: shown on a store whose last row is damaged,
/// so that a read reaching it fails, and the output written before it says how far the query got.
@Suite("arbor query: streamed output")
struct QueryStreamingTests {
    static let rowCount = 5_000

    /// A store of `rowCount` Rows (`name` "row N", `n` N), then a row that cannot be read, after
    /// all of them in primary-key order.
    static func damagedStore(in dir: TemporaryDirectory) throws -> String {
        let path = dir.file("rows.arbor")
        do {
            let model = try ManagedObjectModel { Entity("Row") { Attribute("name", .string); Attribute("n", .integer64) } }
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            _ = try coordinator.addNativeStore(at: path)
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            for n in 1...rowCount {
                let row = ManagedObject(entity: model.entity(named: "Row")!, insertInto: context)
                try row.setValue("row \(n)", forKey: "name")
                try row.setValue(n, forKey: "n")
            }
            try context.save()
        }
        let database = try Database(path: path)
        defer { database.close() }
        try database.write { transaction in
            try #require(try transaction.tree(named: "rows.Row")).put(KeyEncoding.encode([.int(1_000_000)], compactIntegers: true), [0xFF, 0x00])
        }
        return path
    }

    /// The line of row `n` in ndjson.
    static func line(_ n: Int) -> String { #"{"id":\#(n),"entity":"Row","name":"row \#(n)","n":\#(n)}"# }

    @Test("the rows before a damaged row are written before the read reaches it; a limit stops the read before it")
    func rowsComeAsRead() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let path = try Self.damagedStore(in: dir)

        let whole = try runArbor(["query", path, "Row", "--format", "ndjson"])
        #expect(whole.status == 1)
        // One line naming the row (its key or its object ID, as the row layout's decoder words it).
        #expect(whole.stderr.hasPrefix("arbor: the row ") && whole.stderr.hasSuffix(" [store]\n"), "\(whole.stderr)")
        #expect(whole.stderr.contains("1000000") && whole.stderr.contains("is malformed"), "\(whole.stderr)")
        #expect(whole.stderr.filter { $0 == "\n" }.count == 1, "\(whole.stderr)")
        // The output is written 64 KiB at a time: whole lines up to the last write, in order.
        let lines = whole.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        #expect(lines.count >= 1_000 && lines.count <= Self.rowCount, "\(lines.count) lines")
        #expect(lines == (1...lines.count).map(Self.line))

        // Stopped by the limit (and the offset before it), the read never reaches the damage.
        let limited = try runArbor(["query", path, "Row", "--format", "ndjson", "--offset", "4990", "--limit", "10"])
        #expect(limited.status == 0, "\(limited.stderr)")
        #expect(limited.stdout == (4_991...5_000).map { Self.line($0) + "\n" }.joined())
        let table = try runArbor(["query", path, "Row", "--where", "n > 2", "--limit", "2"])
        #expect(table.status == 0 && table.stdout == "id  name   n\n--  -----  -\n3   row 3  3\n4   row 4  4\n" && table.stderr == "2 objects\n",
                "\(table.stdout)\(table.stderr)")
    }

    @Test("a sort no index gives reads every match before the first row is written")
    func sortedInMemoryReadsFirst() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let path = try Self.damagedStore(in: dir)
        let explain = try runArbor(["query", path, "Row", "--sort", "n:desc", "--limit", "1", "--explain"])
        #expect(explain.stdout.contains("  sort: n descending"), "\(explain.stdout)")
        let sorted = try runArbor(["query", path, "Row", "--format", "csv", "--sort", "n:desc", "--limit", "1"])
        #expect(sorted.status == 1 && sorted.stdout.isEmpty, "\(sorted.stdout)")
        #expect(sorted.stderr.contains("malformed"), "\(sorted.stderr)")
    }

    @Test("--help says when memory stays flat, what holds every match first, and that the file stays read-locked")
    func help() throws {
        let help = try runArbor(["query", "--help"])
        let text = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(text.contains("Each row is written as the store reads it, and memory does not grow with the number of rows"), "\(text)")
        #expect(text.contains("a \"sort:\" line") && text.contains("a \"then in memory\" line"), "\(text)")
        #expect(text.contains("the file stays read-locked until the last row is written"), "\(text)")
        #expect(!text.contains("260 bytes"))
    }
}
