import ArborStore
import Foundation
import Testing

/// The README's example, verbatim but for the path, so the front page never shows code that does
/// not work.
@Suite("README example")
struct ReadmeExampleTests {
    @Test("the engine example runs and prints what the README says")
    func example() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-readme-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }

        let database = try Database(path: directory + "/example.arbor")     // creates the file, or recovers it

        try database.write { transaction in                         // atomic and durable when it returns
            let people = try transaction.tree(named: "people", create: true)!
            let id = try people.nextSequence()                      // 1, 2, 3, … (a primary-key allocator)
            try people.put(KeyEncoding.encode([.int(Int64(id))]), Array("Ada Lovelace".utf8))

            let byName = try transaction.tree(named: "people.byName", create: true)!
            try byName.put(KeyEncoding.encode([.string("Lovelace"), .int(Int64(id))]), [])
        }

        let names = try database.read { transaction in              // a consistent snapshot
            var names: [String] = []
            try transaction.tree(named: "people")?.forEach { _, value in
                names.append(String(decoding: value, as: UTF8.self))
                return true
            }
            return names
        }
        #expect(names == ["Ada Lovelace"])

        do {
            try database.write { _ in }
        } catch StoreError.busy {
            Issue.record("no other process holds the lock")
        }
    }
}
