import Arbor
import ArborStore
import Foundation
import Testing

/// `arbor model`: the model a store keeps, printed without the application.
@Suite("arbor model")
struct ModelCommandTests {
    static func libraryModel() throws -> ManagedObjectModel {
        try ManagedObjectModel(configurations: ["Library": ["Person", "Author", "Book"]]) {
            Entity("Person", abstract: true) {
                Attribute("name", .string).required()
                Attribute("nickname", .string).transient()
                Unique("name")
            }
            Entity("Author", parent: "Person") {
                Attribute("born", .date).indexed()
                Relationship("books", to: "Book", inverse: "author").toMany(ordered: true).count(0...50).deleteRule(.cascade)
            }
            Entity("Book") {
                Attribute("title", .string).required()
                Attribute("year", .integer16)
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
              attribute     title: string, required, indexed
              attribute     year: integer16, optional
              attribute     isbn: uuid, optional
              relationship  author: to-one Author, inverse books, required, delete rule deny
              index         title [cd]
              unique        isbn

            entity Person (abstract)  version hash \(hash("Person"))
              attribute     name: string, required
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
