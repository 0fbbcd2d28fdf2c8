import ArgumentParser
import Arbor
import Foundation

/// `arbor import`: records (``ObjectRecords``, as `arbor export` writes them) read from standard
/// input into an empty store, with the model the store keeps.
struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read objects exported with `arbor export` (NDJSON) from standard input into an empty Arbor store.",
        discussion: """
            FILE must exist, hold no objects, and have a model with every entity and property \
            the records name (the store the records came from, or one made with the same \
            model); it is opened with the model it keeps. Each line is one object, as \
            `arbor export` writes it; blank lines are skipped. Every object is made first, then \
            relationships are set by the ids the records give (an id names an object in the \
            file: the imported objects get primary keys of their own), so a record may name \
            objects that come after it. Properties a record leaves out keep their initial \
            value (nil). Everything is saved in one transaction: on any error — a line that \
            is not a record, an unknown entity or property, a value of the wrong type, an id \
            that no record has, a save the model refuses — nothing is imported and the exit \
            status is 1. CSV is not read: export as ndjson to import.
            """
    )

    @Argument(help: "The store file (it must exist and be empty).") var file: String

    func run() throws {
        do {
            try reportingErrors {
                let objects = try ObjectStore(path: file, readOnly: false)
                let counts = try objects.objectCounts()
                guard counts.isEmpty else {
                    let held = counts.map { "\($0.entity): \($0.count)" }.joined(separator: ", ")
                    printError("arbor: \(file) already holds objects (\(held)); import reads into an empty store with the same model")
                    throw ExitCode(1)
                }
                var importer = RecordImporter(context: objects.context, model: objects.model)
                var reader = LineReader()
                while let line = reader.next() { try importer.read(line) }
                let made = try importer.relate()
                try objects.context.save()
                let summary = made.map { "\($0.entity): \($0.count)" }.joined(separator: ", ")
                print("imported \(made.reduce(0) { $0 + $1.count }) objects into \(file)\(summary.isEmpty ? "" : " (\(summary))")")
            }
        } catch let error as RecordImporter.Unreadable {
            printError("arbor: \(error)")
            throw ExitCode(1)
        }
    }
}

/// Makes the objects of records, line by line, then sets their relationships.
struct RecordImporter {
    /// A line that is not a record of the model, or a relationship naming an object no record
    /// has: where, and why.
    struct Unreadable: Error, CustomStringConvertible {
        var line: Int
        var reason: String
        var description: String { "standard input, line \(line): \(reason)" }
    }

    /// A relationship to set once every object is made.
    private struct PendingRelationship {
        var line: Int
        var object: ManagedObject
        var relationship: RelationshipDescription
        var ids: [String]
    }

    let context: ManagedObjectContext
    let model: ManagedObjectModel
    private var line = 0
    /// The object each record's id names, and the line it came from.
    private var objects: [String: (object: ManagedObject, line: Int)] = [:]
    private var pending: [PendingRelationship] = []
    private var made: [String: Int] = [:]

    init(context: ManagedObjectContext, model: ManagedObjectModel) {
        self.context = context
        self.model = model
    }

    private func unreadable(_ reason: String) -> Unreadable { Unreadable(line: line, reason: reason) }

    /// Reads one line: makes its object and sets its attributes; its relationships wait for
    /// ``relate()``.
    mutating func read(_ text: String) throws {
        line += 1
        guard !text.allSatisfy(\.isWhitespace) else { return }
        let json: JSONValue
        do {
            json = try JSONReader.value(of: text)
        } catch {
            throw unreadable("not JSON: \(error)")
        }
        let (entityName, id, values) = try recordParts(json)
        guard objects[id] == nil else { throw unreadable("the id \(id) was given on line \(objects[id]!.line) already") }
        let object: ManagedObject
        do {
            object = try EntityDescription.insertNewObject(forEntityName: entityName, into: context)
        } catch let error as ArborError {
            throw unreadable(error.message)
        }
        let entity = object.entity
        objects[id] = (object, line)
        made[entity.name, default: 0] += 1
        for (key, value) in values {
            if let attribute = entity.attributesByName[key], !attribute.isTransient {
                do {
                    try object.setValue(try ObjectRecords.value(value, kind: attribute.type.kind), forKey: key)
                } catch let error as ObjectRecords.Unreadable {
                    throw unreadable("\(entity.name).\(key): \(error.reason)")
                } catch let error as ArborError {
                    throw unreadable("\(entity.name).\(key): \(error.message)")
                }
            } else if let relationship = entity.relationshipsByName[key] {
                do {
                    pending.append(PendingRelationship(line: line, object: object, relationship: relationship,
                                                       ids: try ObjectRecords.ids(value, toMany: relationship.isToMany)))
                } catch {
                    throw unreadable("\(entity.name).\(key): \(error.reason)")
                }
            } else {
                throw unreadable("\(entity.name) has no stored property \(key) in the store's model")
            }
        }
    }

    /// A record's entity, id and values.
    private func recordParts(_ json: JSONValue) throws -> (entity: String, id: String, values: [(key: String, value: JSONValue)]) {
        guard case .object(let members) = json else { throw unreadable("expected a record (an object), found \(json.kindName)") }
        var entity: String?, id: String?, values: [(key: String, value: JSONValue)] = []
        for (key, value) in members {
            switch (key, value) {
            case ("entity", .string(let name)): entity = name
            case ("id", .string(let name)): id = name
            case ("values", .object(let properties)): values = properties
            case ("entity", _), ("id", _): throw unreadable("\"\(key)\" must be a string, not \(value.kindName)")
            case ("values", _): throw unreadable("\"values\" must be an object, not \(value.kindName)")
            default: throw unreadable("a record has \"entity\", \"id\" and \"values\", not \"\(key)\"")
            }
        }
        guard let entity else { throw unreadable("the record has no \"entity\"") }
        guard let id else { throw unreadable("the record has no \"id\"") }
        return (entity, id, values)
    }

    /// Sets every relationship the records gave, by the objects their ids name; returns how
    /// many objects of each entity were made.
    mutating func relate() throws -> [(entity: String, count: Int)] {
        // To-one relationships first: each adds its object to the inverse to-many, which a
        // to-many set afterwards puts in the recorded order.
        for relationship in pending.filter({ !$0.relationship.isToMany }) + pending.filter(\.relationship.isToMany) {
            line = relationship.line
            var destinations: [ManagedObject] = []
            for id in relationship.ids {
                guard let destination = objects[id]?.object else {
                    throw unreadable("\(relationship.object.entity.name).\(relationship.relationship.name) names \(id), which no record has")
                }
                destinations.append(destination)
            }
            let value: Any?
            if !relationship.relationship.isToMany {
                value = destinations.first
            } else {
                value = relationship.relationship.isOrdered ? destinations : Set(destinations)
            }
            do {
                try relationship.object.setValue(value, forKey: relationship.relationship.name)
            } catch let error as ArborError {
                throw unreadable("\(relationship.object.entity.name).\(relationship.relationship.name): \(error.message)")
            }
        }
        return made.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }
}
