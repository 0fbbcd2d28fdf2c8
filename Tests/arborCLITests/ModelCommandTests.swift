import Arbor
import ArborStore
import Foundation
import Testing

/// `arbor model`: the model a store keeps, printed without the application.
@Suite("arbor model")
struct ModelCommandTests {
    /// The library model (`year`: with Book.year, as every test but `history` has it; required
    /// with `yearRequired`).
    static func libraryModel(year: Bool = true, yearRequired: Bool = false, yearDefault: Int16? = nil, yearMaximum: Int = 2100) throws -> ManagedObjectModel {
        try ManagedObjectModel(configurations: ["Library": ["Person", "Author", "Book"]]) {
            Entity("Person", abstract: true) {
                Attribute("name", .string).required().pattern("^[A-Z][a-z, ]*$")
                Attribute("nickname", .string).transient()
                Unique("name")
            }
            Entity("Author", parent: "Person") {
                Attribute("born", .date).indexed()
                Relationship("books", to: "Book", inverse: "author").toMany(ordered: true).count(0...50).deleteRule(.cascade)
            }
            Entity("Book") {
                Attribute("title", .string).required().length(1...200)
                if year, let yearDefault {
                    Attribute("year", .integer16).optional(!yearRequired).defaultValue(yearDefault).minimum(1450).maximum(yearMaximum)
                } else if year {
                    Attribute("year", .integer16).optional(!yearRequired)
                }
                Attribute("isbn", .uuid)
                Relationship("author", to: "Author", inverse: "books").required().deleteRule(.deny)
                Indexed("title", caseInsensitive: true)
                Unique("isbn")
            }
        }
    }

    @Test("text: each entity's parent, attributes, relationships, indexes, constraints and version hash, then the model's")
    func text() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let path = dir.file("library.arbor")
        let model = try Self.libraryModel()
        let identifier = try PersistentStoreCoordinator(managedObjectModel: model).addNativeStore(at: path).identifier
        func hash(_ entity: String) -> String { model.entity(named: entity)!.versionHashString }

        let result = try runArbor(["model", path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == """
            store \(path) (identifier \(identifier.uuidString))

            entity Author : Person  version hash \(hash("Author"))
              attribute     born: date, optional, indexed
              relationship  books: ordered to-many Book, inverse author, optional, count 0…50, delete rule cascade
              index         born

            entity Book  version hash \(hash("Book"))
              attribute     title: string, required, indexed, rules: length ≥ 1, length ≤ 200
              attribute     year: integer16, optional
              attribute     isbn: uuid, optional
              relationship  author: to-one Author, inverse books, required, delete rule deny
              index         title [cd]
              unique        isbn

            entity Person (abstract)  version hash \(hash("Person"))
              attribute     name: string, required, rules: pattern ^[A-Z][a-z, ]*$
              attribute     nickname: string, optional, transient
              unique        name

            configuration Library: Author, Book, Person

            model version hash \(model.versionHashString)

            """, "\(result.stdout)")
        #expect(result.stderr.isEmpty)
    }

    @Test("the hashes printed are the ones the store recorded; --format json holds the same model")
    func json() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let path = dir.file("library.arbor")
        let model = try Self.libraryModel()
        _ = try PersistentStoreCoordinator(managedObjectModel: model).addNativeStore(at: path)
        let recorded = try Database(path: path).read { transaction in
            try JSONDecoder().decode([String: String].self, from: Data(try transaction.tree(named: "arbor.metadata")!.get(Array("hashes".utf8))!))
        }

        let result = try runArbor(["model", path, "--format", "json"])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let entities = try #require(json["entities"] as? [[String: Any]])
        // In the model's order: by name.
        #expect(entities.map { $0["name"] as? String } == ["Author", "Book", "Person"])
        for entity in entities {
            let name = entity["name"] as! String
            #expect(entity["versionHash"] as? String == recorded[name], "\(name)")
        }
        #expect(json["versionHash"] as? String == model.versionHashString)
        let author = entities[0]
        #expect(author["parent"] as? String == "Person" && author["abstract"] as? Bool == false)
        let books = try #require((author["relationships"] as? [[String: Any]])?.first)
        #expect(books["ordered"] as? Bool == true && books["toMany"] as? Bool == true && books["maximumCount"] as? Int == 50
                && books["deleteRule"] as? String == "cascade" && books["destination"] as? String == "Book")
        let book = entities[1]
        #expect((book["attributes"] as? [[String: Any]])?.map { $0["type"] as? String } == ["string", "integer16", "uuid"])
        #expect(book["uniquenessConstraints"] as? [[String]] == [["isbn"]])
        let index = try #require((book["indexes"] as? [[String: Any]])?.first)
        #expect(index["keys"] as? [String] == ["title"] && index["caseAndDiacriticInsensitive"] as? Bool == true)
        #expect(json["configurations"] as? [String: [String]] == ["Library": ["Author", "Book", "Person"]])
    }

    @Test("defaults, fills and rules: an attribute a migration added with a default shows that default, the fill rows from before it read, and the rules the store records, in text and JSON; a changed default alone migrates nothing and is recorded by the next schema write")
    func fillsAndRules() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let path = dir.file("library.arbor")
        do {
            // Version 1 has no Book.year; one book is written before it is added.
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.libraryModel(year: false))
            _ = try coordinator.addNativeStore(at: path)
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            let author = try EntityDescription.insertNewObject(forEntityName: "Author", into: context)
            try author.setValue("Herbert", forKey: "name")
            let book = try EntityDescription.insertNewObject(forEntityName: "Book", into: context)
            try book.setValue("Dune", forKey: "title")
            try book.setValue(author, forKey: "author")
            try context.save()
        }
        // Version 2 adds it with a default and rules: the old row is not rewritten, it reads the fill.
        let later = try Self.libraryModel(yearDefault: 1990)
        let store = try PersistentStoreCoordinator(managedObjectModel: later).addNativeStore(at: path)
        #expect(store.migration?.entities.allSatisfy { $0.rewrittenRows == 0 } == true)

        let text = try runArbor(["model", path])
        #expect(text.status == 0, "\(text.stderr)")
        let lines = text.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("  attribute     year: integer16, optional, default 1990, fill 1990, rules: minimum 1450, maximum 2100"), "\(text.stdout)")
        #expect(lines.contains("  attribute     title: string, required, indexed, rules: length ≥ 1, length ≤ 200"), "\(text.stdout)")
        #expect(lines.contains("  attribute     isbn: uuid, optional"), "no default, no fill and no rules: nothing more")

        let json = try runArbor(["model", path, "--format", "json"])
        #expect(json.status == 0, "\(json.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let entities = try #require(object["entities"] as? [[String: Any]])
        let book = try #require(entities.first { $0["name"] as? String == "Book" })
        let attributes = try #require(book["attributes"] as? [[String: Any]])
        let year = try #require(attributes.first { $0["name"] as? String == "year" })
        #expect(year["default"] as? String == "1990" && year["fill"] as? String == "1990", "\(year)")
        #expect(year["rules"] as? String == "minimum 1450, maximum 2100", "\(year)")
        let isbn = try #require(attributes.first { $0["name"] as? String == "isbn" })
        #expect(isbn["default"] == nil && isbn["fill"] == nil && isbn["rules"] == nil)

        // The same model with another default: no migration (a model may compute its defaults
        // as it is built); the schema keeps the default it recorded, the fill stays.
        let same = try PersistentStoreCoordinator(managedObjectModel: try Self.libraryModel(yearDefault: 2000)).addNativeStore(at: path)
        #expect(same.migration == nil)
        #expect(try runArbor(["model", path]).stdout.contains("year: integer16, optional, default 1990, fill 1990,"))
        // Changed rules rewrite the schema, with the default of then.
        _ = try PersistentStoreCoordinator(managedObjectModel: try Self.libraryModel(yearDefault: 2000, yearMaximum: 2200)).addNativeStore(at: path)
        let changed = try runArbor(["model", path])
        #expect(changed.stdout.contains("year: integer16, optional, default 2000, fill 1990, rules: minimum 1450, maximum 2200"), "\(changed.stdout)")
        let reopened = PersistentStoreCoordinator(managedObjectModel: try Self.libraryModel(yearDefault: 2000))
        _ = try reopened.addNativeStore(at: path)
        let context = ManagedObjectContext(persistentStoreCoordinator: reopened)
        let books = try context.fetch(FetchRequest<ManagedObject>(entityName: "Book"))
        #expect(try books.map { try $0.value(forKey: "year") as? Int16 } == [1990], "the row from before the attribute reads its fill")

        let help = try runArbor(["model", "--help"])
        #expect(help.stdout.replacingOccurrences(of: "\n", with: " ").contains("when the store last recorded its schema"), "\(help.stdout)")
    }

    @Test("--history: each version the store has been at, oldest first, with what changed from the one before; as JSON too")
    func history() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        // Version 1: the library without Book.year; version 2, the store's model now: with it.
        let (earlier, later) = (dir.file("earlier.arbor"), dir.file("library.arbor"))
        let earlierModel = try Self.libraryModel(year: false)
        _ = try PersistentStoreCoordinator(managedObjectModel: earlierModel).addNativeStore(at: earlier)
        _ = try PersistentStoreCoordinator(managedObjectModel: try Self.libraryModel()).addNativeStore(at: later)
        func history(_ path: String) throws -> [[String: Any]] {
            let database = try Database(path: path)
            defer { database.close() }
            let bytes = try #require(try database.read { try $0.tree(named: "arbor.metadata")?.get(Array("history".utf8)) })
            return try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [[String: Any]])
        }
        var first = try history(earlier)[0]
        first["recorded"] = "2026-01-02T03:04:05Z"
        var second = try history(later)[0]
        second["version"] = 2
        second["migration"] = "lightweight"
        let database = try Database(path: later)
        try database.write { transaction in
            try transaction.tree(named: "arbor.metadata")!.put(Array("history".utf8), Array(try JSONSerialization.data(withJSONObject: [first, second])))
        }
        database.close()

        let text = try runArbor(["model", later, "--history"])
        #expect(text.status == 0, "\(text.stderr)")
        let lines = text.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 5, "\(text.stdout)")
        #expect(lines[0] == "version 1  2026-01-02T03:04:05Z  hash \(earlierModel.versionHashString)  the model the store was made with", "\(text.stdout)")
        #expect(lines[1] == "  entities: Author, Book, Person")
        let laterHash = try Self.libraryModel().versionHashString
        #expect(lines[2].hasPrefix("version 2  ") && lines[2].hasSuffix("hash \(laterHash)  reached by a lightweight migration"),
                "\(text.stdout)")
        #expect(lines[4] == "  Book.year: attribute added (integer16, optional)", "\(text.stdout)")

        let json = try runArbor(["model", later, "--history", "--format", "json"])
        #expect(json.status == 0, "\(json.stderr)")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(entries.map { $0["version"] as? Int } == [1, 2])
        #expect(entries[0]["changes"] == nil && entries[1]["changes"] as? [String] == ["Book.year: attribute added (integer16, optional)"])
        #expect(entries[1]["migration"] as? String == "lightweight" && entries[0]["hash"] as? String == earlierModel.versionHashString)
    }

    @Test("files that are not Arbor stores: a one-line message, exit status 1")
    func notAStore() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let plain = dir.file("plain.arbor")
        #expect(try runArbor(["put", plain, "t", "k", "v"]).status == 0)
        for (path, expected) in [(plain, "not an Arbor store"), (dir.file("missing.arbor"), "could not be opened")] {
            let result = try runArbor(["model", path])
            #expect(result.status == 1 && result.stdout.isEmpty)
            #expect(result.stderr.hasPrefix("arbor: ") && result.stderr.contains(expected) && result.stderr.split(separator: "\n").count == 1,
                    "\(result.stderr)")
        }
    }
}
