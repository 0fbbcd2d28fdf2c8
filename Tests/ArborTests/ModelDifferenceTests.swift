import ArborStore
import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// `ModelDifference`: what differs between a store's model and another, entity by entity and
/// property by property, and the `incompatibleModel` errors that name it (docs/migration.md).
@Suite("Model differences")
struct ModelDifferenceTests {
    /// The first version of a small library model (with `bio`: and one more optional attribute).
    static func version1(bio: Bool = false) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Item", abstract: true) { Attribute("added", .date) }
            Entity("Author") {
                Attribute("name", .string).required()
                Attribute("born", .integer32)
                Attribute("nickname", .string)
                Attribute("cache", .string).transient()
                if bio { Attribute("bio", .string) }
                Relationship("books", to: "Book", inverse: "author").toMany()
                Unique("name")
                Indexed("nickname")
            }
            Entity("Book", parent: "Item") {
                Attribute("title", .string)
                Relationship("author", to: "Author", inverse: "books")
                Relationship("shelf", to: "Shelf", inverse: "books")
            }
            Entity("Shelf") {
                Attribute("label", .string)
                Relationship("books", to: "Book", inverse: "shelf").toMany()
            }
            Entity("Pamphlet") { Attribute("pages", .integer16) }
        }
    }

    /// The next version: every kind of change once.
    static func version2() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Item") { Attribute("added", .date) }
            Entity("Author") {
                Attribute("name", .string)
                Attribute("born", .integer64)
                Attribute("nickname", .string)
                Attribute("cache", .string)
                Attribute("bio", .string)
                Relationship("books", to: "Book", inverse: "author").toMany(ordered: true).count(0...50).deleteRule(.cascade)
                Indexed("nickname", caseInsensitive: true)
                Unique("nickname")
            }
            Entity("Book") {
                Attribute("title", .string)
                Attribute("shelf", .string)
                Relationship("author", to: "Author", inverse: "books").required()
            }
            Entity("Review") { Attribute("stars", .integer16) }
        }
    }

    @Test("every kind of change is found once, with the old and the new of each aspect; a model against itself differs in nothing")
    func everyKind() throws {
        let (old, new) = (try Self.version1(), try Self.version2())
        let difference = ModelDifference(from: old, to: new)
        let lines = difference.changes.map(\.description)
        let expected = [
            "Author.born: attribute changed (type integer32 → integer64)",
            "Author.cache: attribute changed (transient → stored)",
            "Author.name: attribute changed (required → optional)",
            "Author.bio: attribute added (string, optional)",
            "Author.books: relationship changed (unordered → ordered, count 0… → 0…50, delete rule nullify → cascade)",
            "Author.nickname: uniqueness constraint added",
            "Author.name: uniqueness constraint removed",
            "Author.nickname: index added (case- and diacritic-insensitive)",
            "Author.nickname: index removed",
            "Book: entity changed (parent Item → none)",
            "Book.shelf: attribute changed (relationship (to-one Shelf, inverse books, optional) → attribute (string, optional))",
            "Book.author: relationship changed (optional → required)",
            "Item: entity changed (abstract → concrete)",
            "Pamphlet: entity removed (1 attribute, 0 relationships)",
            "Review: entity added (1 attribute, 0 relationships)",
            "Shelf: entity removed (1 attribute, 1 relationship)",
        ]
        #expect(Set(lines) == Set(expected), "\(difference)")
        #expect(lines.count == expected.count, "each change once: \(difference)")
        // Entities in name order; within one, the entity, attributes, relationships, constraints, indexes.
        #expect(difference.changes.map(\.entity) == difference.changes.map(\.entity).sorted())
        let kinds = Set(difference.changes.map(\.kind))
        #expect(kinds.isSuperset(of: [.entityAdded, .entityRemoved, .entityChanged, .attributeAdded, .attributeChanged, .relationshipChanged,
                                      .uniquenessAdded, .uniquenessRemoved, .indexAdded, .indexRemoved]))
        #expect(ModelDifference(from: old, to: try Self.version1()).isEmpty)

        // Backwards: what was added is removed, and each aspect reads the other way.
        let back = ModelDifference(from: new, to: old)
        #expect(back.changes.contains { $0.description == "Author.bio: attribute removed (string, optional)" })
        #expect(back.changes.contains { $0.description == "Author.born: attribute changed (type integer64 → integer32)" })
        #expect(back.changes.contains { $0.description == "Book.shelf: attribute changed (attribute (string, optional) → relationship (to-one Shelf, inverse books, optional))" })
        #expect(back.changes.count == difference.changes.count)

        // A relationship added and removed on its own (not turned into an attribute).
        let withTag = try ManagedObjectModel {
            Entity("Shelf") { Relationship("tags", to: "Tag", inverse: "shelf").toMany() }
            Entity("Tag") { Relationship("shelf", to: "Shelf", inverse: "tags") }
        }
        let bare = try ManagedObjectModel { Entity("Shelf") { Attribute("label", .string) }; Entity("Tag") { Attribute("name", .string) } }
        let kindsAdded = Set(ModelDifference(from: bare, to: withTag).changes.map(\.kind))
        #expect(kindsAdded == [.attributeRemoved, .relationshipAdded])
        #expect(Set(ModelDifference(from: withTag, to: bare).changes.map(\.kind)) == [.attributeAdded, .relationshipRemoved])
    }

    @Test("opening a store with another model is incompatibleModel naming every difference, each also a detailed error; the file is not touched")
    func storeErrorNamesEveryDifference() throws {
        let path = try temporaryDirectory() + "/library.arbor"
        do {
            let stack = try Stack(model: try Self.version1(), path: path)
            let context = ManagedObjectContext(persistentStoreCoordinator: stack.coordinator)
            let author = ManagedObject(entity: try #require(stack.model.entity(named: "Author")), insertInto: context)
            try author.setValue("Ada", forKey: "name")
            try context.save()
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let journalBefore = try? Data(contentsOf: URL(fileURLWithPath: path + "-journal"))
        // With migration off, every difference is named (with it on, those it cannot infer are:
        // MigrationTests).
        let error = try #require(throws: ArborError.self) { try MigrationTests.open(path, try Self.version2(), migration: .never) }
        #expect(error.code == .incompatibleModel)
        #expect(error.message.contains("16 differences"), "\(error.message)")
        #expect(error.message.contains("Author.bio: attribute added (string, optional)"), "\(error.message)")
        #expect(error.message.contains("Review: entity added"), "\(error.message)")
        #expect(error.detailedErrors.count == 16)
        #expect(error.detailedErrors.allSatisfy { $0.code == .incompatibleModel })
        #expect(error.detailedErrors.contains { $0.entityName == "Author" && $0.key == "bio" })
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "a refused open leaves the file as it was")
        #expect((try? Data(contentsOf: URL(fileURLWithPath: path + "-journal"))) == journalBefore, "nor its journal")

        // One added optional attribute: one difference, worded alone.
        let oneMore = try Self.version1(bio: true)
        let single = try #require(throws: ArborError.self) { try MigrationTests.open(path, oneMore, migration: .never) }
        #expect(single.message.contains("(1 difference: Author.bio: attribute added (string, optional))"), "\(single.message)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }
}

/// The model history a store keeps (docs/migration.md, "What the store records").
@Suite("Model history")
struct ModelHistoryTests {
    static func metadata(_ path: String, _ key: String) throws -> [UInt8]? {
        let database = try Database(path: path)
        defer { database.close() }
        return try database.read { try $0.tree(named: "arbor.metadata")?.get(Array(key.utf8)) }
    }

    static func setMetadata(_ path: String, _ key: String, _ value: [UInt8]?) throws {
        let database = try Database(path: path)
        defer { database.close() }
        try database.write { transaction in
            let metadata = try #require(try transaction.tree(named: "arbor.metadata"))
            if let value { try metadata.put(Array(key.utf8), value) } else { _ = try metadata.delete(Array(key.utf8)) }
        }
    }

    @Test("a new store records its model as version 1, dated, with every entity's hash and a schema that makes the same model")
    func newStoreRecordsVersionOne() throws {
        let path = try temporaryDirectory() + "/library.arbor"
        let model = try ModelDifferenceTests.version1()
        let started = Date()
        _ = try Stack(model: model, path: path)
        let history = try NativeStore.modelHistory(at: path)
        #expect(history.count == 1)
        let first = try #require(history.first)
        #expect(first.version == 1 && first.migration == nil && !first.synthesized)
        #expect(first.versionHash == model.versionHashString)
        #expect(first.entityHashes == Dictionary(uniqueKeysWithValues: model.entities.map { ($0.name, $0.versionHashString) }))
        let recorded = try #require(first.recorded)
        #expect(abs(recorded.timeIntervalSince(started)) < 60)
        #expect(try first.model().versionHash == model.versionHash)
    }

    @Test("a store made before the history: read-only, one undated version derived, the file untouched; the first writable open records it, marked as recorded after the fact")
    func olderStoreRecordsItOnce() throws {
        let path = try temporaryDirectory() + "/library.arbor"
        let model = try ModelDifferenceTests.version1()
        _ = try Stack(model: model, path: path)
        try Self.setMetadata(path, "history", nil)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let derived = try NativeStore.modelHistory(at: path)
        #expect(derived.count == 1 && derived[0].recorded == nil && derived[0].synthesized)
        #expect(derived[0].versionHash == model.versionHashString)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "reading the history writes nothing")

        _ = try Stack(model: model, path: path)
        let recorded = try NativeStore.modelHistory(at: path)
        #expect(recorded.count == 1 && recorded[0].recorded != nil && recorded[0].synthesized)
        #expect(recorded[0].versionHash == model.versionHashString)
        #expect(try Self.metadata(path, "history") != nil)

        // A damaged history is a typed error that names it.
        try Self.setMetadata(path, "history", Array("[{\"version\":".utf8))
        let error = try #require(throws: ArborError.self) { try NativeStore.modelHistory(at: path) }
        #expect(error.code == .storeOpen && error.message.contains("model history is unreadable"), "\(error.message)")
    }

    @Test("a model the store was at before is refused as older, naming both versions, the file untouched; the newest opens; another model names its differences")
    func olderModelIsRefused() throws {
        let path = try temporaryDirectory() + "/library.arbor"
        let (old, new) = (try ModelDifferenceTests.version1(), try ModelDifferenceTests.version1(bio: true))
        // A store at `new` whose history says it was at `old` first (as a migration will leave it).
        _ = try Stack(model: new, path: path)
        let newest = try #require(try NativeStore.modelHistory(at: path).first)
        let first = StoreModelVersion(first: old, recorded: Date(timeIntervalSince1970: 1_700_000_000), synthesized: false)
        let second = StoreModelVersion(version: 2, recorded: newest.recorded, synthesized: false, migration: "lightweight",
                                       versionHash: newest.versionHash, entityHashes: newest.entityHashes, schema: newest.schema)
        try Self.setMetadata(path, "history", try NativeStore.historyBytes([first, second]))
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        let error = try #require(throws: ArborError.self) { try Stack(model: old, path: path) }
        #expect(error.code == .incompatibleModel)
        #expect(error.message.contains("was migrated to a newer model (version 2 of its history"), "\(error.message)")
        #expect(error.message.contains("this model is its version 1, recorded 2023-11-14T22:13:20Z"), "\(error.message)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)

        _ = try Stack(model: new, path: path)
        let history = try NativeStore.modelHistory(at: path)
        #expect(history.map(\.version) == [1, 2] && history[1].migration == "lightweight")
        #expect(history[1].difference(from: history[0])?.changes.map(\.description) == ["Author.bio: attribute added (string, optional)"])

        let other = try #require(throws: ArborError.self) { try MigrationTests.open(path, try ModelDifferenceTests.version2(), migration: .never) }
        #expect(other.code == .incompatibleModel && other.message.contains("another model ("), "\(other.message)")
    }

    /// The fixtures made before stores recorded their model history (2026-11-26): `keys-2.arbor`
    /// was made with it.
    static let fixturesWithoutHistory = FixtureStoreTests.cases.map(\.file).filter { $0 != "keys-2.arbor" }

    @Test("the fixture stores of earlier builds give their model history without being written to, and record it on their first writable open", arguments: fixturesWithoutHistory)
    func fixtures(file: String) throws {
        let path = try FixtureStoreTests.copy(file)
        let model = try FixtureStore.model()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let derived = try NativeStore.modelHistory(at: path)
        #expect(derived.count == 1 && derived[0].version == 1 && derived[0].recorded == nil && derived[0].synthesized)
        #expect(derived[0].versionHash == model.versionHashString)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        _ = try Stack(model: model, path: path)
        let recorded = try NativeStore.modelHistory(at: path)
        #expect(recorded.count == 1 && recorded[0].recorded != nil && recorded[0].synthesized && recorded[0].versionHash == model.versionHashString)
    }

    @Test("the history's dates are written as ISO8601DateFormatter writes them and read back to the second, across centuries (from 1600: before the Gregorian calendar, Foundation's formatter counts Julian days), leap days and before 1970")
    func historyDates() throws {
        let formatter = ISO8601DateFormatter()
        var random = SplitMix64(seed: 27)
        var seconds: [Double] = [0, -1, 86_399, 86_400, 951_782_400 /* 2000-02-29 */, -2_208_988_800 /* 1900-01-01 */,
                                 4_107_542_399 /* 2100-02-28T23:59:59 */, 1_795_833_258.75, -0.5]
        for _ in 0..<2000 { seconds.append(Double(Int64.random(in: -11_676_096_000...253_402_300_799, using: &random)) + 0.25) }
        for value in seconds {
            let date = Date(timeIntervalSince1970: value)
            let written = ISO8601Date.string(from: date)
            #expect(written == formatter.string(from: date), "\(value)")
            #expect(try ISO8601Date.date(from: written).timeIntervalSince1970 == value.rounded(.down), "\(value)")
        }
    }
}
