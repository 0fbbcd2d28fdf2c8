import ArborStore
import Foundation
import Testing
@testable import Arbor

/// Issue 25, item 2: bytes of a damaged or hostile file, and input a user gives, end in a typed
/// error — never in a trap. Each case here stopped the process before (an overflow, a negation of
/// Int64.min, an out-of-range conversion, or recursion without a bound).
@Suite("Hostile input")
struct HostileInputTests {
    @Test("a key path splits at every dot as String.split does — empty keys, non-ASCII keys, dots alone — and more than 100 keys are refused")
    func keyPathSplits() throws {
        for path in ["", ".", "a", "a.b", "a..b", ".a.", "départ.ément", "名前.値", "a.b.c.d.e", "@sum.salary", "\u{301}.x"] {
            #expect(try KeyPathEvaluator.keys(of: path) == path.split(separator: ".", omittingEmptySubsequences: false).map(String.init), "\(path)")
        }
        #expect(try KeyPathEvaluator.keys(of: Array(repeating: "k", count: 100).joined(separator: ".")).count == 100)
        #expect(throws: ArborError.self) { try KeyPathEvaluator.keys(of: Array(repeating: "k", count: 101).joined(separator: ".")) }
    }

    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Writer") {
                Attribute("name", .string)
                Relationship("books", to: "Book", inverse: "writer").toMany()
            }
            Entity("Book") {
                Relationship("writer", to: "Writer", inverse: "books")
            }
            Entity("Person") {
                Attribute("name", .string)
                Relationship("manager", to: "Person", inverse: "reports")
                Relationship("reports", to: "Person", inverse: "manager").toMany()
            }
        }
    }

    /// A store file with one writer and one book of theirs, saved and closed; its path.
    static func savedStore() throws -> String {
        let path = try temporaryDirectory() + "/hostile.arbor"
        // Rows rewritten as layout 2's components.
        let stack = try Stack(model: try model(), path: path, rowLayout: .fixedFirst)
        let context = stack.context()
        let writer = try stack.insert("Writer", in: context, ["name": "Ada"])
        let book = try stack.insert("Book", in: context, [:])
        try book.setValue(writer, forKey: "writer")
        try context.save()
        return path
    }

    /// Rewrites the row of primary key 1 in `tree`, changing its components with `change`.
    static func rewriteRow(_ path: String, tree name: String, _ change: (inout [KeyComponent]) -> Void) throws {
        let database = try Database(path: path)
        defer { database.close() }
        try database.write { transaction in
            let tree = try #require(try transaction.tree(named: name))
            let key = KeyEncoding.encode([.int(1)])
            var components = try KeyEncoding.decode(try #require(try tree.get(key)))
            change(&components)
            try tree.put(key, KeyEncoding.encode(components))
        }
    }

    @Test("a row whose version is Int64.max is a malformed row (its next save added one: an overflow)")
    func versionAtTheLimit() throws {
        let path = try Self.savedStore()
        try Self.rewriteRow(path, tree: "rows.Writer") { $0[1] = .int(Int64.max) }
        let stack = try Stack(model: try Self.model(), path: path)
        let error = try #require(throws: ArborError.self) {
            try stack.context().fetch(FetchRequest<ManagedObject>(entityName: "Writer"))
        }
        #expect(error.code == .store && error.message.contains("version"))
    }

    @Test("a to-one foreign key of Int64.min is a malformed row (printing its ID negated Int64.min)")
    func foreignKeyOutOfRange() throws {
        let path = try Self.savedStore()
        try Self.rewriteRow(path, tree: "rows.Book") { components in
            #expect(components.count == 3 && components[2] == .int(1), "name, version, writer")
            components[2] = .int(Int64.min)
        }
        let stack = try Stack(model: try Self.model(), path: path)
        let context = stack.context()
        let error = try #require(throws: ArborError.self) {
            let books = try context.fetch(FetchRequest<ManagedObject>(entityName: "Book"))
            _ = try books.first?.value(forKey: "writer")
        }
        #expect(error.code == .store && error.message.contains("not a primary key"))
    }

    @Test("a rows tree whose sequence is past Int64.max refuses the next insert with a typed error (Int64(key) trapped)")
    func sequencePastPrimaryKeys() throws {
        let path = try Self.savedStore()
        let database = try Database(path: path)
        try database.write { transaction in
            let rows = try #require(try transaction.tree(named: "rows.Writer"))
            _ = try rows.nextSequence(reserving: Int.max - 1)    // the sequence is now Int64.max
        }
        database.close()
        let stack = try Stack(model: try Self.model(), path: path)
        let context = stack.context()
        _ = try stack.insert("Writer", in: context, ["name": "Grace"])
        let error = try #require(throws: ArborError.self) { try context.save() }
        #expect(error.code == .storeSave && error.storeError?.code == .corrupt)
        #expect(context.hasChanges, "nothing was saved; the changes stay")
        let ids = try #require(throws: ArborError.self) { try context.obtainPermanentIDs(for: Array(context.insertedObjects)) }
        #expect(ids.storeError?.code == .corrupt)
    }

    @Test("fetch windows: a negative limit, offset or batch size is invalidFetchRequest; Int.max with an offset is all the rest (offset + limit overflowed)")
    func fetchWindows() throws {
        let stack = try Stack(model: try Self.model())
        let context = stack.context()
        for name in ["a", "b", "c"] { _ = try stack.insert("Writer", in: context, ["name": name]) }
        try context.save()
        var request = FetchRequest<ManagedObject>(entityName: "Writer")
        request.sortDescriptors = [ObjectSortDescriptor(key: "name")]
        request.fetchLimit = Int.max
        request.fetchOffset = 1
        #expect(try context.fetch(request).map { try $0.value(forKey: "name") as? String } == ["b", "c"])
        #expect(try context.count(for: request) == 2)
        var dictionaries = FetchRequest<[String: any Sendable]>(entityName: "Writer")
        dictionaries.fetchLimit = Int.max
        dictionaries.fetchOffset = 2
        #expect(try context.fetch(dictionaries).count == 1)
        for change in [{ (r: inout FetchRequest<ManagedObject>) in r.fetchLimit = -1 }, { $0.fetchOffset = -1 }, { $0.fetchBatchSize = -5 }] {
            var bad = FetchRequest<ManagedObject>(entityName: "Writer")
            change(&bad)
            #expect(arborErrorCode { try context.fetch(bad) } == .invalidFetchRequest)
            #expect(arborErrorCode { try context.count(for: bad) } == .invalidFetchRequest)
        }
        dictionaries.fetchOffset = -1
        #expect(arborErrorCode { try context.fetch(dictionaries) } == .invalidFetchRequest)
        var storeFetch = StoreFetch(entityName: "Writer")
        storeFetch.offset = -1
        #expect(arborErrorCode { try stack.coordinator.persistentStores[0].fetch(storeFetch) } == .invalidFetchRequest)
    }

    /// Runs `body` on a thread with a 2 MiB stack and returns its result. (Linux gives every
    /// thread 8 MiB; the limits keep a debug build's deepest predicate under 2 MiB — measured:
    /// 97 nested parentheses in an expression need more than 1 MiB there.)
    static func onTwoMegabyteStack<R: Sendable>(_ body: @escaping @Sendable () -> R) -> R {
        let box = LockedBox<R?>(nil)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            box.set(body())
            done.signal()
        }
        thread.stackSize = 2 << 20
        thread.start()
        done.wait()
        return box.get()!
    }

    @Test("predicates at every limit — 200 arithmetic operators in a chain (a chain of 300,000 exhausted any stack), 100 levels of nesting, both at once — parse, print, parse back, evaluate and are freed on a 2 MiB stack in a debug build; past a limit, a syntax error", arguments: [
        "x == " + Array(repeating: "0.5", count: 201).joined(separator: " + "),
        String(repeating: "(", count: 97) + "x == 100" + String(repeating: ")", count: 97),
        "x == " + String(repeating: "(", count: 97) + "100" + String(repeating: ")", count: 97),
        String(repeating: "NOT ", count: 98) + "x == 100",
        String(repeating: "NOT ", count: 48) + "x == " + String(repeating: "(", count: 48) + Array(repeating: "0.5", count: 201).joined(separator: " + ") + String(repeating: ")", count: 48),
        "x == " + String(repeating: "-(", count: 48) + "100" + String(repeating: ")", count: 48),
    ])
    func predicateLimits(format: String) throws {
        let ok = Self.onTwoMegabyteStack { () -> Bool in
            guard let predicate = try? ObjectPredicate(format: format),
                  let again = try? ObjectPredicate(format: predicate.predicateFormat), again == predicate else { return false }
            return (try? predicate.evaluate(with: ["x": 100])) != nil
        }
        #expect(ok)
        let longer = "x == " + Array(repeating: "1", count: 202).joined(separator: " + ")
        let error = try #require(throws: ArborError.self) { try ObjectPredicate(format: longer) }
        #expect(error.code == .predicateSyntax && error.message.contains("200 arithmetic operators"))
    }

    @Test("key paths of more than 100 keys are refused where they come in: format strings, value(forKeyPath:), setValue(_:forKeyPath:), sort keys")
    func longKeyPaths() throws {
        let path = Array(repeating: "manager", count: 101).joined(separator: ".") + ".name"
        #expect(arborErrorCode { try ObjectPredicate(format: "\(path) == 'x'") } == .predicateSyntax)
        #expect(arborErrorCode { try ObjectPredicate(format: "%K == 'x'", path) } == .predicateSyntax)
        let stack = try Stack(model: try Self.model())
        let context = stack.context()
        let person = try stack.insert("Person", in: context, ["name": "Boss"])
        try person.setValue(person, forKey: "manager")              // a cycle: a path never ends
        #expect(arborErrorCode { try person.value(forKeyPath: path) } == .unknownKey)
        #expect(arborErrorCode { try person.setValue("x", forKeyPath: path) } == .unknownKey)
        let fine = Array(repeating: "manager", count: 99).joined(separator: ".") + ".name"
        #expect(try person.value(forKeyPath: fine) as? String == "Boss")
        try context.save()
        var request = FetchRequest<ManagedObject>(entityName: "Person")
        request.sortDescriptors = [ObjectSortDescriptor(key: path)]
        #expect(arborErrorCode { try context.fetch(request) } == .invalidFetchRequest)
        request.sortDescriptors = []
        request.predicate = .comparison(ComparisonPredicate(.key(path), .equalTo, .value("x")))
        #expect(arborErrorCode { try context.fetch(request) } == .invalidFetchRequest)
    }

    @Test("a model whose entities have more than 64 levels of parents is invalidModel (a schema read from a file could nest without bound)")
    func deepInheritance() throws {
        func chain(_ levels: Int) throws -> ManagedObjectModel {
            try ManagedObjectModel(entities: (0...levels).map { level in
                Entity("E\(level)", parent: level == 0 ? nil : "E\(level - 1)", members: [Attribute("a\(level)", .integer64)])
            })
        }
        _ = try chain(64)
        let error = try #require(throws: ArborError.self) { try chain(65) }
        #expect(error.code == .invalidModel && error.message.contains("64 levels"))
    }

    @Test("a transformable default value that does not decode back is invalidModel (a typed property could not read it)")
    func transformableDefaultRoundTrip() throws {
        struct Lossy: Codable, Sendable, Equatable {
            var value: Int
            init(value: Int) { self.value = value }
            init(from decoder: any Decoder) throws { throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "never")) }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.singleValueContainer()
                try container.encode(value)
            }
        }
        let error = try #require(throws: ArborError.self) {
            _ = try ManagedObjectModel { Entity("T") { Attribute("t", .transformable(Lossy.self)).defaultValue(Lossy(value: 1)) } }
        }
        #expect(error.code == .invalidModel && error.message.contains("does not decode back"))
    }
}

/// A value shared between threads under a lock (tests only).
final class LockedBox<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func get() -> Value { lock.withLock { value } }
    func set(_ newValue: Value) { lock.withLock { value = newValue } }
}
