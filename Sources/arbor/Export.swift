import ArgumentParser
import Arbor
import Foundation

/// `arbor export`: a store's objects as records (``ObjectRecords``), for `arbor import` or
/// other tools, read with the model the store keeps.
struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write the objects of an Arbor store to standard output, as NDJSON (for `arbor import`) or CSV.",
        discussion: """
            Reads the model stored in FILE, so any Arbor store can be exported without its \
            application. Every object of ENTITY and its sub-entities is written (of every \
            entity without ENTITY), entity by entity in the model's order, by primary key.

            ndjson (the default): one object per line, \
            {"entity":"Book","id":"Book/12","values":{"title":"Dune","author":"Author/3","tags":["Tag/1"]}}: \
            "id" names the object (ENTITY/KEY), "values" holds each stored attribute and \
            relationship by name: integers and doubles as numbers, exact; decimals as strings \
            ("9.99"); dates as ISO-8601 strings in UTC, exact to the bit; data, and transformable \
            values' encodings, as base64; nil as null; a to-one relationship as the destination's \
            id, a to-many one as an array of ids (in order when ordered). `arbor import` reads it \
            back into an empty store with the same model.

            csv: RFC 4180 with a header line (id, entity, then every property of the entities \
            written) and CRLF line ends; nil is an empty field, an empty string is "", a to-many \
            relationship is its ids separated by spaces. `arbor import` does not read CSV.

            The export holds the file read-locked from the first object to the last, so the \
            objects are those of one moment (a writer's commit waits for it). Objects are read \
            \(Export.batchSize) at a time and let go: memory holds a batch, and the ids of one \
            entity.
            """
    )

    /// The objects read (and held) at a time.
    static let batchSize = 500

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case ndjson, csv
    }

    @Argument(help: "The store file.") var file: String
    @Argument(help: "The entity to export (its sub-entities' objects included); every entity when omitted.") var entity: String?
    @Option(name: .long, help: "ndjson or csv.") var format: Format = .ndjson

    func run() throws {
        try reportingErrors {
            let objects = try ObjectStore(path: file, readOnly: true)
            let entities = try objects.entities(named: entity)
            var writer = RecordWriter(format: format, entities: entities)
            // A read transaction of its own keeps writers from committing until the end.
            let snapshot = try openDatabase(file, readOnly: true)
            defer { snapshot.close() }
            try snapshot.read { _ in
                for entity in entities {
                    try export(entity, from: objects, to: &writer)
                }
            }
            writer.finish()
        }
    }

    /// Writes every object of `entity` (not of its sub-entities), by primary key, a batch at a
    /// time (the context is reset after each).
    func export(_ entity: EntityDescription, from objects: ObjectStore, to writer: inout RecordWriter) throws {
        let context = objects.context
        var request = FetchRequest<ManagedObjectID>(entityName: entity.name)
        request.includesSubentities = false
        let ids = try context.fetch(request).sorted { ($0.primaryKey ?? 0) < ($1.primaryKey ?? 0) }
        for start in stride(from: 0, to: ids.count, by: Self.batchSize) {
            var batch = FetchRequest<ManagedObject>(entityName: entity.name)
            batch.includesSubentities = false
            batch.returnsObjectsAsFaults = false
            batch.predicate = try ObjectPredicate(format: "SELF IN %@", Array(ids[start..<min(ids.count, start + Self.batchSize)]))
            let fetched = try context.fetch(batch).sorted { ($0.objectID.primaryKey ?? 0) < ($1.objectID.primaryKey ?? 0) }
            for object in fetched { try writer.write(object) }
            context.reset()
        }
    }
}

/// Writes records as NDJSON or CSV to standard output, as they come.
struct RecordWriter {
    let format: Export.Format
    /// CSV's columns after `id` and `entity`: every property of the entities written, once.
    let columns: [String]
    private var output = StandardOutput()

    init(format: Export.Format, entities: [EntityDescription]) {
        self.format = format
        var names: [String] = []
        var seen = Set<String>()
        for entity in entities {
            let (attributes, relationships) = ObjectStore.recordedProperties(of: entity)
            for name in attributes.map(\.name) + relationships.map(\.name) where seen.insert(name).inserted { names.append(name) }
        }
        columns = names
        if format == .csv {
            for (index, column) in (["id", "entity"] + columns).enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                QueryOutput.appendCSVField(column, to: &output.buffer)
            }
            output.write("\r\n")
        }
    }

    /// The fields of `object`'s record, by property name, in the entity's order.
    static func fields(of object: ManagedObject) throws -> [(name: String, field: ObjectRecords.Field)] {
        let (attributes, relationships) = ObjectStore.recordedProperties(of: object.entity)
        var fields: [(name: String, field: ObjectRecords.Field)] = []
        for attribute in attributes {
            fields.append((attribute.name, ObjectRecords.field(try object.value(forKey: attribute.name), kind: attribute.type.kind)))
        }
        for relationship in relationships {
            let value = try object.value(forKey: relationship.name)
            if !relationship.isToMany {
                fields.append((relationship.name, (value as? ManagedObject).map { .text(ObjectRecords.id($0.objectID)) } ?? .null))
                continue
            }
            var destinations = (value as? [ManagedObject]) ?? Array((value as? Set<ManagedObject>) ?? [])
            if !relationship.isOrdered {
                destinations.sort { ($0.objectID.entityName, $0.objectID.primaryKey ?? 0) < ($1.objectID.entityName, $1.objectID.primaryKey ?? 0) }
            }
            fields.append((relationship.name, .list(destinations.map { ObjectRecords.id($0.objectID) })))
        }
        return fields
    }

    /// Writes `object`'s record.
    mutating func write(_ object: ManagedObject) throws {
        let fields = try Self.fields(of: object)
        let id = ObjectRecords.id(object.objectID)
        switch format {
        case .ndjson:
            output.write("{\"entity\":")
            Cell.appendJSONString(object.entity.name, to: &output.buffer)
            output.write(",\"id\":")
            Cell.appendJSONString(id, to: &output.buffer)
            output.write(",\"values\":{")
            for (index, (name, field)) in fields.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                Cell.appendJSONString(name, to: &output.buffer)
                output.append(UInt8(ascii: ":"))
                field.appendJSON(to: &output.buffer)
            }
            output.write("}}\n")
        case .csv:
            let byName = Dictionary(fields.map { ($0.name, $0.field) }, uniquingKeysWith: { first, _ in first })
            QueryOutput.appendCSVField(id, to: &output.buffer)
            output.append(UInt8(ascii: ","))
            QueryOutput.appendCSVField(object.entity.name, to: &output.buffer)
            for column in columns {
                output.append(UInt8(ascii: ","))
                if let text = byName[column]?.csvText { QueryOutput.appendCSVField(text, to: &output.buffer) }
            }
            output.write("\r\n")
        }
        output.flushIfFull()
    }

    /// Writes what is buffered.
    mutating func finish() { output.flush() }
}
