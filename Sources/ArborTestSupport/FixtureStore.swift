import Arbor
import Foundation

/// The model and data of the committed fixture stores (`Tests/ArborTests/Fixtures/`): every
/// attribute kind but transformable, with nils, zero bytes and non-ASCII text; a uniqueness
/// constraint and an index; a to-one and its to-many inverse; a many-to-many; a to-one whose
/// destination has a sub-entity (rows name the destination's entity). The same source is built
/// against earlier releases to write their fixtures (docs/row-format.md, "Compatibility and
/// versions"), so it uses only public API that release 0.1.0 already had.
public enum FixtureStore {
    /// The number of books a fixture holds when written.
    public static let bookCount = 40
    /// The shelves' names (unique), and the tags' labels.
    public static let shelfNames = ["A", "B", "C"]
    public static let tagLabels = ["t0", "t1", "t2", "t3", "t4"]
    /// The parties, by name: those with an age are `Person`s (a sub-entity of `Party`).
    public static let parties: [(name: String, age: Int16?)] = [("P0", nil), ("P1", 30), ("P2", nil), ("P3", 40)]

    public static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Shelf") {
                Attribute("name", .string).required()
                Relationship("books", to: "Book", inverse: "shelf").toMany()
                Unique("name")
            }
            Entity("Book") {
                Attribute("serial", .integer64).required()
                Attribute("a16", .integer16)
                Attribute("a32", .integer32)
                Attribute("dec", .decimal)
                Attribute("dbl", .double)
                Attribute("flt", .float)
                Attribute("title", .string).indexed()
                Attribute("flag", .boolean)
                Attribute("when", .date)
                Attribute("blob", .binaryData)
                Attribute("uid", .uuid)
                Attribute("link", .uri)
                Relationship("shelf", to: "Shelf", inverse: "books")
                Relationship("owner", to: "Party", inverse: "books")
                Relationship("tags", to: "Tag", inverse: "books").toMany()
            }
            Entity("Tag") {
                Attribute("label", .string)
                Relationship("books", to: "Book", inverse: "tags").toMany()
            }
            Entity("Party") {
                Attribute("name", .string)
                Relationship("books", to: "Book", inverse: "owner").toMany()
            }
            Entity("Person", parent: "Party") {
                Attribute("age", .integer16)
            }
        }
    }

    /// Book `serial`'s attribute values as written (nil: the attribute holds nil).
    public static func attributes(ofBook serial: Int) -> [String: Any?] {
        let i = serial
        return [
            "serial": Int64(i),
            "a16": i % 5 == 0 ? nil : Int16(i * 7 - 100),
            "a32": Int32(i % 2 == 1 ? -i * 100_000 : i * 100_000),
            "dec": Decimal(string: "\(i).25"),
            "dbl": Double(i) / 3,
            "flt": Float(i) * 0.5,
            "title": i % 7 == 0 ? nil : "Book \(i) — été",
            "flag": i % 3 == 0 ? nil : i % 2 == 0,
            "when": Date(timeIntervalSinceReferenceDate: Double(i) * 86_400.5),
            "blob": i % 4 == 0 ? nil : Data((0..<(i % 9)).map { UInt8(($0 * 31 + i) & 0xFF) }),
            "uid": UUID(uuidString: "00000000-0000-4000-8000-\(String(repeating: "0", count: 12 - String(i).count))\(i)"),
            "link": URL(string: "https://example.com/b/\(i)?q=1"),
        ]
    }

    /// Book `serial`'s shelf (an index into ``shelfNames``; nil: none).
    public static func shelf(ofBook serial: Int) -> Int? { serial % 5 == 0 ? nil : serial % 3 }
    /// Book `serial`'s owner (an index into ``parties``; nil: none).
    public static func owner(ofBook serial: Int) -> Int? { serial % 6 == 0 ? nil : serial % 4 }
    /// Book `serial`'s tags (indices into ``tagLabels``).
    public static func tags(ofBook serial: Int) -> [Int] { (0..<tagLabels.count).filter { (serial >> $0) & 1 == 1 } }

    /// A value in a form that compares across the kinds value(forKey:) may return (an
    /// `integer16` as `Int16` or `Int64`, say): data as hex, everything else as described.
    public static func comparable(_ value: Any?) -> String {
        switch value {
        case nil: "nil"
        case let data as Data: "data " + data.map { String($0, radix: 16) }.joined(separator: " ")
        case let value?: "\(value)"
        }
    }

    /// Writes the fixture's objects into `context` and saves it.
    public static func populate(_ context: ManagedObjectContext) throws {
        guard let model = context.persistentStoreCoordinator?.managedObjectModel else { return }
        func insert(_ entity: String, _ values: [String: Any?]) throws -> ManagedObject {
            let object = ManagedObject(entity: model.entity(named: entity)!, insertInto: context)
            for (key, value) in values { try object.setValue(value, forKey: key) }
            return object
        }
        let shelves = try shelfNames.map { try insert("Shelf", ["name": $0]) }
        let tagObjects = try tagLabels.map { try insert("Tag", ["label": $0]) }
        let owners = try parties.map { party in
            try party.age.map { try insert("Person", ["name": party.name, "age": $0]) } ?? insert("Party", ["name": party.name])
        }
        for serial in 1...bookCount {
            let book = try insert("Book", attributes(ofBook: serial))
            try book.setValue(shelf(ofBook: serial).map { shelves[$0] }, forKey: "shelf")
            try book.setValue(owner(ofBook: serial).map { owners[$0] }, forKey: "owner")
            let set = try book.mutableSetValue(forKey: "tags")
            for tag in Self.tags(ofBook: serial) { try set.insert(tagObjects[tag]) }
        }
        try context.save()
    }
}
