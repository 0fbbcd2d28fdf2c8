import ArborStore
import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// ``RowFormat``, the one owner of a stored row's layout: what it encodes, its lookup of one
/// component, its fixed head and its decoder agree, for every entity and every layout this build
/// reads.
@Suite("Row format")
struct RowFormatTests {
    static func randomValue(_ kind: AttributeType.Kind, _ random: inout SplitMix64) -> AttributeValue? {
        guard Int.random(in: 0..<5, using: &random) > 0 else { return nil }
        let n = Int64.random(in: -300...300, using: &random)
        return switch kind {
        case .integer16, .integer32, .integer64: .integer(Bool.random(using: &random) ? n : n << 40)
        case .decimal: .decimal(Decimal(string: "\(n).5")!)
        case .double: .double(Double(n) / 7)
        case .float: .float(Float(n) / 4)
        case .string: .string(["", "a", "é", "zero\u{0}byte", String(repeating: "x", count: Int(n & 63))].randomElement(using: &random)!)
        case .boolean: .boolean(Bool.random(using: &random))
        case .date: .date(Date(timeIntervalSinceReferenceDate: Double(n) * 1_000.25))
        case .binaryData: .data(Data((0..<Int(n & 15)).map { UInt8(truncatingIfNeeded: $0 * 37) }))
        case .uuid: .uuid(UUID())
        case .uri: .uri(URL(string: "https://example.com/\(n)")!)
        case .transformable: .transformable(Data([0, 1, 2]))
        }
    }

    @Test("encode, the lookup of one component, the fixed head and decode agree for every entity, in every layout", arguments: RowFormat.Layout.allCases)
    func partsAgree(layout: RowFormat.Layout) throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SplitMix64(seed: seed)
        let model = try FixtureStore.model()
        let store = try #require(try Stack(model: model, rowLayout: layout).coordinator.persistentStores.first as? NativeStore)
        for entity in model.entities {
            let format = store.format(of: entity)
            #expect(format.layout == layout)
            for round in 0..<200 {
                var attributes: [String: AttributeValue] = [:]
                var toOne: [String: ManagedObjectID] = [:]
                for attribute in entity.attributes where !attribute.isTransient {
                    attributes[attribute.name] = Self.randomValue(attribute.type.kind, &random)
                }
                for relationship in entity.relationships where !relationship.isToMany && Bool.random(using: &random) {
                    let destination = try #require(relationship.destinationEntity)
                    let named = ([destination] + destination.subentities).randomElement(using: &random)!
                    toOne[relationship.name] = store.objectID(named.name, Int64.random(in: 1...1 << 40, using: &random))
                }
                let version = Int64.random(in: 1...1_000_000, using: &random)
                let row = StoreRow(entityName: entity.name, version: version, attributes: attributes, toOne: toOne)
                let bytes = try store.encode(row, entity: entity)
                try bytes.withUnsafeBytes { bytes in
                    let context = "seed \(seed), \(layout), \(entity.name), round \(round)"
                    #expect(format.owns(bytes), "\(context)")
                    #expect(store.entityName(ofRow: bytes, hierarchy: entity.rootEntity) == entity.name, "\(context)")
                    for other in model.entities where other !== entity && other.rootEntity === entity.rootEntity {
                        #expect(!store.format(of: other).owns(bytes), "\(context): \(other.name) owns it too")
                    }
                    let id = store.objectID(entity.name, 1)
                    let decoded = try format.decode(bytes, objectID: id, store: store)
                    #expect(decoded.version == version, "\(context)")
                    #expect(decoded.attributes == attributes, "\(context)")
                    #expect(decoded.toOne == toOne, "\(context)")
                    // Each place holds its property's value, read alone.
                    for (name, place) in format.places {
                        switch place {
                        case .attribute(let component, let type):
                            let value = try format.attributeValue(atComponent: component, kind: type.kind, in: bytes)
                            #expect(value == attributes[name], "\(context): \(name)")
                            #expect(try format.component(component, of: bytes) == attributes[name].map(NativeStore.component) ?? .null, "\(context): \(name)")
                        case .toOne(let component, _, let nameComponent):
                            #expect(try format.component(component, of: bytes) == (toOne[name].map { KeyComponent.int($0.primaryKey!) } ?? .null), "\(context): \(name)")
                            if let nameComponent {
                                // Layouts 1 and 2 name the entity; records give its place in the store's list.
                                let named = toOne[name].map { id in
                                    layout == .records ? KeyComponent.int(Int64(store.recordedEntities.firstIndex(of: id.entityName)!)) : .string(id.entityName)
                                }
                                #expect(try format.component(nameComponent, of: bytes) == named ?? .null, "\(context): \(name)")
                            }
                        }
                    }
                    #expect(try format.component(RowFormat.versionComponent, of: bytes) == .int(version), "\(context)")
                    guard layout != .records else { return }
                    // The fixed head: where every component of it starts, when its guards hold.
                    let head = format.fixedHead(through: Int.max)
                    var offsets: [Int] = []
                    #expect(RowFormat.locateComponents(bytes, into: &offsets), "\(context)")
                    let holds = bytes.count >= head.starts.last! && head.guards.allSatisfy { $0.offset < bytes.count && $0.holds(bytes[$0.offset]) }
                    let required = zip(format.columns, RowFormat.firstColumnComponent...).prefix(head.starts.count - 3).allSatisfy { column, component in
                        guard case .attribute(let slot, let type) = column, type.kind != .boolean else { return true }
                        return attributes[entity.propertyLayout.names[slot]] != nil
                    }
                    #expect(holds == required, "\(context): the guards hold exactly when no fixed-size value of the head is nil")
                    if holds {
                        #expect(Array(offsets.prefix(head.starts.count)) == head.starts, "\(context)")
                    }
                }
            }
        }
    }

    @Test("damaged rows of every layout (truncated, bytes flipped, bytes appended) decode to values or a typed error, never a trap; the scan filter leaves them undecided or decides them", arguments: RowFormat.Layout.allCases)
    func damagedRows(layout: RowFormat.Layout) throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SplitMix64(seed: seed)
        let model = try FixtureStore.model()
        let store = try #require(try Stack(model: model, rowLayout: layout).coordinator.persistentStores.first as? NativeStore)
        let book = try #require(model.entity(named: "Book"))
        let format = store.format(of: book)
        let filters = try ["a16 > 0 AND title BEGINSWITH[c] 'b'", "serial == 3", "title CONTAINS 'x' OR a32 < 0"].map {
            ScanFilter(try ObjectPredicate(format: $0), format: format, accepted: true)
        }
        var decoded = 0, refused = 0
        for round in 0..<3000 {
            var attributes: [String: AttributeValue] = [:]
            for attribute in book.attributes where !attribute.isTransient {
                attributes[attribute.name] = Self.randomValue(attribute.type.kind, &random)
            }
            let row = StoreRow(entityName: "Book", version: 1, attributes: attributes,
                               toOne: ["owner": store.objectID("Person", Int64.random(in: 1...1_000, using: &random))])
            var bytes = try store.encode(row, entity: book)
            switch round % 3 {
            case 0: bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &random)))
            case 1:
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    bytes[Int.random(in: 0..<bytes.count, using: &random)] ^= UInt8.random(in: 1...255, using: &random)
                }
            default: bytes += (0..<Int.random(in: 1...20, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            }
            try bytes.withUnsafeBytes { bytes in
                do {
                    _ = try format.decode(bytes, objectID: store.objectID("Book", 1), store: store)
                    decoded += 1
                } catch let error as ArborError {
                    #expect(error.code == .store, "seed \(seed), round \(round)")
                    refused += 1
                }
                for case .attribute(let component, let type) in format.places.values {
                    _ = try? format.attributeValue(atComponent: component, kind: type.kind, in: bytes)
                    _ = try? format.component(component, of: bytes)
                }
                _ = store.entityName(ofRow: bytes, hierarchy: book)
                for filter in filters { _ = filter.decide(bytes) }
            }
        }
        #expect(decoded > 0 && refused > 0, "seed \(seed): both kinds of damage met (\(decoded) decoded, \(refused) refused)")
    }

    @Test("the row's layout is stated in RowFormat alone: no other source file counts components or walks a row's bytes")
    func oneOwner() throws {
        let stores = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Sources/Arbor").standardized
        let files = try #require(FileManager.default.enumerator(atPath: stores.path)).compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
        #expect(files.count > 20)
        for file in files where !file.hasSuffix("RowFormat.swift") {
            let text = try String(contentsOfFile: stores.path + "/" + file, encoding: .utf8)
            for marker in ["index = 2", "nameCount + 9", "offsets.count >= 3", "KeyEncoding.componentEnd", "KeyReader(", "component(index - 1)"] {
                #expect(!text.contains(marker), "\(file) contains \(marker)")
            }
        }
    }
}

/// The column order a store records (`columns.<Entity>`): reordering a model's properties never
/// misreads a row, whoever made the store.
@Suite("Recorded column order")
struct ColumnOrderTests {
    /// The fixture model with every entity's attributes and relationships declared in reverse.
    static func reversedFixtureModel() throws -> ManagedObjectModel {
        let original = try FixtureStore.model()
        let schema = ModelSchema(original)
        var reversed = schema
        reversed.entities = schema.entities.map { entity in
            var entity = entity
            entity.attributes.reverse()
            entity.relationships.reverse()
            return entity
        }
        return try reversed.model()
    }

    static func recordedColumns(_ path: String, _ entity: String) throws -> [String]? {
        let database = try Database(path: path)
        return try database.read { transaction in
            try transaction.tree(named: "arbor.metadata")?.get(NativeStore.columnsKey(entity)).map { try JSONDecoder().decode([String].self, from: Data($0)) }
        }
    }

    @Test("a store made by this build records each entity's columns; reopened with the properties declared in another order, it reads and writes every row right")
    func reorderedModel() throws {
        let path = try temporaryDirectory() + "/reordered.arbor"
        let model = try FixtureStore.model()
        do {
            let stack = try Stack(model: model, path: path)
            try FixtureStore.populate(stack.context())
        }
        let book = try #require(model.entity(named: "Book"))
        let layout = try #require(try Stack(model: model, path: path).coordinator.persistentStores.first as? NativeStore).rowLayout
        #expect(try Self.recordedColumns(path, "Book") == RowFormat.derivedColumnNames(book, layout: layout))
        let reversed = try Self.reversedFixtureModel()
        #expect(reversed.entity(named: "Book")?.attributes.first?.name == "link")
        do {
            // The hashes do not cover the order: the store opens, in its recorded order.
            let stack = try Stack(model: reversed, path: path)
            let context = stack.context()
            try FixtureStoreTests.checkContents(context, removed: [], changed: [:])
            try FixtureStoreTests.checkSearches(context)
            try FixtureStoreTests.edit(context, stack)
        }
        // Written in the reversed model, read in the original one.
        let stack = try Stack(model: model, path: path)
        try FixtureStoreTests.checkContents(stack.context(), removed: [8], changed: [3: "Retitled"], added: [99])
    }

    @Test("a store that records no column order (made by an earlier build) opened with a reordered model reads its rows in the order of the model that made it, and records it",
          arguments: ["rows-1.arbor", "release-0.1.0.arbor"])
    func earlierStoreReordered(file: String) throws {
        let path = try FixtureStoreTests.copy(file)
        #expect(try Self.recordedColumns(path, "Book") == nil)
        let original = try FixtureStore.model()
        let book = try #require(original.entity(named: "Book"))
        let layout: RowFormat.Layout = file == "rows-1.arbor" ? .declared : .fixedFirst
        do {
            let stack = try Stack(model: try Self.reversedFixtureModel(), path: path)
            try FixtureStoreTests.checkContents(stack.context(), removed: [], changed: [:])
            try FixtureStoreTests.checkSearches(stack.context())
        }
        #expect(try Self.recordedColumns(path, "Book") == RowFormat.derivedColumnNames(book, layout: layout))
    }

    @Test("a recorded column order that does not fit the model is a typed error naming the difference, and the file is left as it was")
    func mismatchedRecord() throws {
        let path = try temporaryDirectory() + "/mismatched.arbor"
        let model = try FixtureStore.model()
        do { _ = try Stack(model: model, path: path) }
        for (record, expected): ([UInt8], String) in [
            (Array(#"["name", "title"]"#.utf8), "the model has no property title"),
            (Array(#"["name", "name"]"#.utf8), "recorded twice"),
            (Array("not json".utf8), "unreadable"),
        ] {
            let database = try Database(path: path)
            try database.write { try $0.tree(named: "arbor.metadata")!.put(NativeStore.columnsKey("Shelf"), record) }
            let before = try Data(contentsOf: URL(fileURLWithPath: path))
            do {
                _ = try Stack(model: model, path: path)
                Issue.record("opened with the columns \(String(decoding: record, as: UTF8.self))")
            } catch let error as ArborError {
                #expect([.incompatibleModel, .storeOpen].contains(error.code))
                #expect(error.message.contains(expected), "\(error.message)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        }
    }
}
