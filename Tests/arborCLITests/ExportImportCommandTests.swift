import Arbor
import ArborStore
import Foundation
import Testing

/// A transformable value of the export model.
struct ExportExtra: Codable, Sendable, Equatable {
    var note: String
    var scores: [Int]
}

/// `arbor export` and `arbor import`: a store's objects out as records and back into an empty
/// store, without the application.
@Suite("arbor export and import")
struct ExportImportCommandTests {
    /// Every attribute type (and a transient one), inheritance, and to-one, ordered to-many,
    /// unordered to-many and many-to-many relationships.
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Person", abstract: true) {
                Attribute("name", .string).required()
            }
            Entity("Author", parent: "Person") {
                Attribute("born", .date)
                Relationship("books", to: "Book", inverse: "author").toMany(ordered: true)
            }
            Entity("Editor", parent: "Person") {
                Relationship("edited", to: "Book", inverse: "editors").toMany()
            }
            Entity("Book") {
                Attribute("title", .string).required()
                Attribute("pages", .integer16)
                Attribute("copies", .integer32)
                Attribute("isbn", .integer64)
                Attribute("price", .decimal)
                Attribute("rating", .double)
                Attribute("weight", .float)
                Attribute("inPrint", .boolean)
                Attribute("published", .date)
                Attribute("cover", .binaryData)
                Attribute("code", .uuid)
                Attribute("link", .uri)
                Attribute("extra", .transformable(ExportExtra.self))
                Attribute("scratch", .string).transient()
                Relationship("author", to: "Author", inverse: "books")
                Relationship("editors", to: "Editor", inverse: "edited").toMany()
                Relationship("tags", to: "Tag", inverse: "books").toMany()
            }
            Entity("Tag") {
                Attribute("name", .string).required()
                Relationship("books", to: "Book", inverse: "tags").toMany()
            }
        }
    }

    /// The books' values: extremes of every type, and nil for every optional attribute once.
    static let books: [[String: any Sendable]] = [
        ["title": "Dune, \"the\" novel\nin two lines", "pages": Int16.min, "copies": Int32.max, "isbn": Int64.max,
         "price": Decimal(string: "12345678901234567890.123456789")!, "rating": 0.1, "weight": Float(0.1), "inPrint": true,
         "published": Date(timeIntervalSinceReferenceDate: 786_523_456.123_456_789), "cover": Data([0, 1, 2, 0xFE, 0xFF]),
         "code": UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!, "link": URL(string: "https://example.com/a?b=c&d=%C3%A9")!,
         "extra": ExportExtra(note: "ünï, \"q\"", scores: [3, -1])],
        ["title": "", "pages": Int16(0), "copies": Int32(-7), "isbn": Int64.min, "price": Decimal(string: "-0.5")!, "rating": Double.nan,
         "weight": -Float.infinity, "inPrint": false, "published": Date(timeIntervalSince1970: -86_400.25), "cover": Data(),
         "link": URL(string: "file:///tmp/a%20b")!],
        ["title": "Far future and just before 2001", "rating": -0.0, "weight": Float.leastNonzeroMagnitude,
         "published": Date(timeIntervalSinceReferenceDate: 315_569_520_000), "price": Decimal(0)],
        ["title": "Nothing set"],
        ["title": "The last second of 2000", "published": Date(timeIntervalSinceReferenceDate: -0.3), "rating": 1e-300],
    ]

    /// Makes the source store: authors, editors, tags, and the books related to them, with gaps
    /// in the primary keys (a deleted book and tag).
    static func makeSource(_ path: String) throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model())
        _ = try coordinator.addNativeStore(at: path)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        func insert(_ entity: String, _ values: [String: Any]) throws -> ManagedObject {
            let object = try EntityDescription.insertNewObject(forEntityName: entity, into: context)
            for (key, value) in values { try object.setValue(value, forKey: key) }
            return object
        }
        // Saved in steps, so that the keys are known: authors 1 and 2, editors 3 and 4 (one
        // hierarchy, one sequence), books 2 to 6, tags 2 to 4.
        let herbert = try insert("Author", ["name": "Herbert", "born": Date(timeIntervalSince1970: -1_547_510_400)])
        let austen = try insert("Author", ["name": "Austen"])
        try context.save()
        let editors = try ["Ed", "Edna"].map { try insert("Editor", ["name": $0]) }
        try context.save()
        let gone = try insert("Book", ["title": "Deleted"])
        let books = try books.map { try insert("Book", $0) }
        let unused = try insert("Tag", ["name": "unused"])
        let tags = try ["classic", "sf", "long, with a comma"].map { try insert("Tag", ["name": $0]) }
        try context.save()
        context.delete(gone)
        context.delete(unused)
        // Herbert's books in an order of their own (not their keys'), one with no author.
        try herbert.setValue([books[2], books[0], books[4]], forKey: "books")
        try books[1].setValue(austen, forKey: "author")
        try books[0].setValue(Set(editors), forKey: "editors")
        try books[1].setValue(Set([editors[1]]), forKey: "editors")
        try books[0].setValue(Set(tags), forKey: "tags")
        try books[2].setValue(Set([tags[1]]), forKey: "tags")
        try tags[0].setValue(Set([books[0], books[1], books[3]]), forKey: "books")
        try context.save()
    }

    /// An empty store with the model.
    static func makeEmpty(_ path: String) throws {
        _ = try PersistentStoreCoordinator(managedObjectModel: try model()).addNativeStore(at: path)
    }

    /// The records of an export, each object named by its entity and name (or title) instead of
    /// its id, so that two exports compare whatever primary keys their stores gave: a record per
    /// object, its values by key (relationships as the names of their destinations, unordered
    /// ones sorted).
    static func canonical(_ ndjson: String) throws -> [String: [String: String]] {
        let records = try ndjson.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
        var names: [String: String] = [:]
        for record in records {
            let values = try #require(record["values"] as? [String: Any])
            let name = try #require((values["name"] ?? values["title"]) as? String)
            names[try #require(record["id"] as? String)] = "\(try #require(record["entity"] as? String)) \(name)"
        }
        var result: [String: [String: String]] = [:]
        for record in records {
            let id = try #require(record["id"] as? String)
            var values: [String: String] = [:]
            for (key, value) in try #require(record["values"] as? [String: Any]) {
                if ["books", "edited", "editors", "tags"].contains(key) || key == "author" {
                    let ids = (value as? [String]) ?? (value as? String).map { [$0] } ?? []
                    var mapped = ids.map { names[$0] ?? "?\($0)" }
                    if key != "books" || record["entity"] as? String != "Author" { mapped.sort() }
                    values[key] = mapped.joined(separator: " | ")
                } else {
                    values[key] = String(decoding: try JSONSerialization.data(withJSONObject: [value], options: [.fragmentsAllowed]), as: UTF8.self)
                }
            }
            result[names[id]!] = values
        }
        return result
    }

    @Test("export every object, import into an empty store with the same model, export again: the same records, every attribute type and relationship kind exact (ids aside); the imported values read back bit for bit through the library")
    func roundTrip() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let (source, target) = (dir.file("source.arbor"), dir.file("target.arbor"))
        try Self.makeSource(source)
        try Self.makeEmpty(target)

        let exported = try runArbor(["export", source])
        #expect(exported.status == 0 && exported.stderr.isEmpty, "\(exported.stderr)")
        let lines = exported.stdout.split(separator: "\n")
        #expect(lines.count == 2 + 2 + 5 + 3, "every object once, no abstract Person: \(exported.stdout)")
        #expect(lines.first?.hasPrefix("{\"entity\":\"Author\",\"id\":\"Author/1\",\"values\":{\"name\":\"Herbert\",\"born\":\"1920-12-18T00:00:00Z\",\"books\":[\"Book/") == true,
                "\(lines.first ?? "")")
        #expect(!exported.stdout.contains("scratch"), "transient attributes are not stored, so not exported")
        #expect(exported.stdout.contains("\"isbn\":9223372036854775807") && exported.stdout.contains("\"isbn\":-9223372036854775808"))
        #expect(exported.stdout.contains("\"price\":\"12345678901234567890.123456789\"") && exported.stdout.contains("\"rating\":\"nan\""))
        #expect(exported.stdout.contains("\"published\":\"1969-12-30T23:59:59.75Z\""), "a date with its fraction, in ISO-8601")
        #expect(exported.stdout.contains("\"published\":\"2025-12-04T06:44:16.1234568Z\""), "in as few digits as read back exactly")
        #expect(exported.stdout.contains("\"published\":-0.3"), "in the last second of 2000: seconds since 2001")
        #expect(exported.stdout.contains("\"published\":315569520000.0"), "past the year 9999: seconds since 2001")

        let imported = try runArbor(["import", target], input: exported.stdout)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout == "imported 12 objects into \(target) (Author: 2, Book: 5, Editor: 2, Tag: 3)\n", "\(imported.stdout)")
        let again = try runArbor(["export", target])
        #expect(again.status == 0, "\(again.stderr)")
        let (before, after) = (try Self.canonical(exported.stdout), try Self.canonical(again.stdout))
        #expect(before.count == 12 && after == before, "\(after.filter { before[$0.key] != $0.value })")
        #expect(before["Author Herbert"]?["books"] == "Book Far future and just before 2001 | Book Dune, \"the\" novel\nin two lines | Book The last second of 2000",
                "an ordered relationship keeps its order")
        #expect(before["Tag classic"]?["books"]?.split(separator: "|").count == 3, "many-to-many, from either side")

        // Through the library, with the application's model (its transformable type): the values are the ones saved.
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.model())
        _ = try coordinator.addNativeStore(at: target)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var request = FetchRequest<ManagedObject>(entityName: "Book")
        request.sortDescriptors = [ObjectSortDescriptor(key: "title")]
        let books = Dictionary(uniqueKeysWithValues: try context.fetch(request).map { (try $0.value(forKey: "title") as! String, $0) })
        for expected in Self.books {
            let book = try #require(books[expected["title"] as! String])
            for (key, value) in expected {
                let stored = try book.value(forKey: key)
                switch value {
                case let number as Double: #expect((stored as? Double)?.bitPattern == number.bitPattern || (number.isNaN && (stored as? Double)?.isNaN == true), "\(key)")
                case let number as Float: #expect((stored as? Float)?.bitPattern == number.bitPattern, "\(key)")
                case let date as Date: #expect((stored as? Date)?.timeIntervalSinceReferenceDate.bitPattern == date.timeIntervalSinceReferenceDate.bitPattern, "\(key): \(String(describing: stored))")
                case let extra as ExportExtra: #expect(stored as? ExportExtra == extra)
                default: #expect(stored.map { String(describing: $0) } == String(describing: value), "\(key)")
                }
            }
            #expect(try Set(book.entity.attributes.map(\.name)).subtracting(expected.keys).allSatisfy { try book.value(forKey: $0) == nil }, "the rest is nil")
        }
    }

    @Test("import refuses a store that holds objects: a one-line message naming what it holds, exit status 1, nothing changed")
    func nonEmptyTarget() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let source = dir.file("source.arbor")
        try Self.makeSource(source)
        let exported = try runArbor(["export", source])
        let result = try runArbor(["import", source], input: exported.stdout)
        #expect(result.status == 1 && result.stdout.isEmpty)
        #expect(result.stderr == "arbor: \(source) already holds objects (Author: 2, Book: 5, Editor: 2, Tag: 3); import reads into an empty store with the same model\n",
                "\(result.stderr)")
        #expect(try runArbor(["export", source]).stdout == exported.stdout)
    }

    @Test("a record import cannot read — not JSON, an unknown entity or property, a value of the wrong type, an id no record has, an abstract entity — names its line; exit status 1 and nothing imported", arguments: [
        ("{\"entity\":\"Tag\",\"id\":\"Tag/1\",\"values\":{\"name\":\"a\"}}\n{\"entity\":", "line 2: not JSON"),
        ("{\"entity\":\"Shelf\",\"id\":\"Shelf/1\",\"values\":{}}", "line 1: the model has no entity Shelf"),
        ("{\"entity\":\"Tag\",\"id\":\"Tag/1\",\"values\":{\"name\":\"a\",\"colour\":\"red\"}}", "line 1: Tag has no stored property colour"),
        ("{\"entity\":\"Book\",\"id\":\"Book/1\",\"values\":{\"title\":\"a\",\"pages\":\"many\"}}", "line 1: Book.pages: expected a whole number, found the string \"many\""),
        ("{\"entity\":\"Book\",\"id\":\"Book/1\",\"values\":{\"title\":\"a\",\"pages\":70000}}", "line 1: Book.pages: Book.pages is a Int16; 70000 does not fit"),
        ("\n{\"entity\":\"Book\",\"id\":\"Book/1\",\"values\":{\"title\":\"a\",\"tags\":[\"Tag/9\"]}}", "line 2: Book.tags names Tag/9, which no record has"),
        ("{\"entity\":\"Person\",\"id\":\"Person/1\",\"values\":{\"name\":\"a\"}}", "line 1: Person is abstract"),
        ("{\"entity\":\"Tag\",\"id\":\"T\",\"values\":{\"name\":\"a\"}}\n{\"entity\":\"Tag\",\"id\":\"T\",\"values\":{\"name\":\"b\"}}", "line 2: the id T was given on line 1 already"),
        ("[1, 2]", "line 1: expected a record (an object), found an array"),
    ])
    func unreadableRecords(input: String, expected: String) throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let target = dir.file("target.arbor")
        try Self.makeEmpty(target)
        let result = try runArbor(["import", target], input: input)
        #expect(result.status == 1 && result.stdout.isEmpty)
        #expect(result.stderr.hasPrefix("arbor: standard input, ") && result.stderr.contains(expected) && result.stderr.split(separator: "\n").count == 1,
                "\(result.stderr)")
        #expect(try runArbor(["export", target]).stdout.isEmpty, "nothing was imported")
    }

    @Test("import reads JSON as RFC 8259 writes it: white space anywhere, every escape (surrogate pairs joined), exponents; it refuses leading zeros, lone surrogates, duplicate keys and nesting past 32 levels")
    func jsonText() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let target = dir.file("target.arbor")
        try Self.makeEmpty(target)
        let records = #"""
             { "entity" : "Tag" , "id" : "t1" , "values" : { "name" : "caf\u00e9 \ud83d\ude00 \/ \"q\" \\ \b\f\n\r\t" } }  
            {"entity":"Book","id":"b1","values":{"title":"x","rating":2.5E-3,"weight":-1e2,"tags":["t1"]}}
            """#
        let imported = try runArbor(["import", target], input: records)
        #expect(imported.status == 0, "\(imported.stderr)")
        let exported = try runArbor(["export", target])
        #expect(exported.stdout.contains(#""name":"café 😀 / \"q\" \\ \b\f\n\r\t","books":["Book/1"]"#), "\(exported.stdout)")
        #expect(exported.stdout.contains(#""rating":0.0025,"weight":-100.0,"#), "\(exported.stdout)")
        for (bad, reason) in [(#"{"entity":"Book","id":"b","values":{"title":"x","pages":012}}"#, "no leading zeros"),
                              (#"{"entity":"Tag","id":"t","values":{"name":"\udc00"}}"#, "a lone low surrogate"),
                              (#"{"entity":"Tag","id":"t","id":"u","values":{}}"#, "the key \"id\" appears twice"),
                              (String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000), "nest more than 32 levels")] {
            let empty = dir.file("empty-\(UUID().uuidString).arbor")
            try Self.makeEmpty(empty)
            let result = try runArbor(["import", empty], input: bad)
            #expect(result.status == 1 && result.stderr.contains("line 1: not JSON: ") && result.stderr.contains(reason), "\(result.stderr)")
        }
    }

    @Test("--format csv: a header line, then a row per object with CRLF line ends; commas, quotes and line breaks quoted, quotes doubled; nil empty, an empty string \"\"; to-many ids separated by spaces")
    func csv() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let source = dir.file("source.arbor")
        try Self.makeSource(source)
        let result = try runArbor(["export", source, "Book", "--format", "csv"])
        #expect(result.status == 0, "\(result.stderr)")
        let rows = result.stdout.components(separatedBy: "\r\n")
        #expect(rows[0] == "id,entity,title,pages,copies,isbn,price,rating,weight,inPrint,published,cover,code,link,extra,author,editors,tags", "\(rows[0])")
        #expect(rows.count == 1 + 5 + 1 && rows.last == "", "a row per book, each ended by CRLF")
        #expect(rows[1].hasPrefix("Book/2,Book,\"Dune, \"\"the\"\" novel\nin two lines\",-32768,2147483647,9223372036854775807,12345678901234567890.123456789,0.1,0.1,true,"), "\(rows[1])")
        #expect(rows[1].hasSuffix(",Author/1,Editor/3 Editor/4,Tag/2 Tag/3 Tag/4"), "\(rows[1])")
        #expect(rows[2].hasPrefix("Book/3,Book,\"\",0,-7,"), "an empty string is \"\": \(rows[2])")
        #expect(rows[4].hasPrefix("Book/5,Book,Nothing set,,,,,,,,,,,,,,"), "nil is an empty field: \(rows[4])")

        let all = try runArbor(["export", source, "--format", "csv"])
        let header = try #require(all.stdout.components(separatedBy: "\r\n").first)
        #expect(header.hasPrefix("id,entity,name,born,books,title,pages,") && header.hasSuffix(",author,editors,tags,edited"),
                "every entity's properties, each once, in the order met: \(header)")
        let person = try runArbor(["export", source, "Person"])
        #expect(person.stdout.split(separator: "\n").map { $0.prefix(22) } == ["{\"entity\":\"Author\",\"id", "{\"entity\":\"Author\",\"id", "{\"entity\":\"Editor\",\"id", "{\"entity\":\"Editor\",\"id"],
                "an abstract entity's sub-entities")
        let unknown = try runArbor(["export", source, "Shelf"])
        #expect(unknown.status == 1 && unknown.stderr.contains("the model has no entity Shelf"), "\(unknown.stderr)")
    }
}
