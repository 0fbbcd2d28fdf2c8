import ArgumentParser
import Arbor
import Foundation

/// `arbor model`: the model an Arbor store keeps in its metadata, as text or JSON.
struct ModelCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "model",
        abstract: "Print the model a store keeps: entities, attributes, relationships, indexes, constraints, hashes.",
        discussion: """
            Every Arbor store records its model's schema (docs/model.md): this prints it without \
            the application. For each entity: its parent and whether it is abstract; its own \
            attributes with their type and options (required or optional, transient, indexed), \
            their fill and their validation rules; its own relationships (destination, inverse, \
            to-one or to-many, ordered, optional, counts, delete rule); the indexes and uniqueness \
            constraints it adds; its version hash. Then the model's version hash. The hashes are \
            the ones the store recorded: opening the store with this model checks they match.

            An attribute's default ("default 0") is the value a new object gets, as the model \
            declared it when the store last recorded its schema: when it was made, migrated, or \
            opened with changed validation rules (a changed default alone is not recorded; a \
            transformable attribute's default never is, since reading it needs the \
            application's transformer). Its fill \
            ("fill 1990") is the value that the rows written before the attribute was added read \
            for it: the default it was added with by a migration that did not rewrite those \
            rows. Validation rules (minimum and maximum, length, pattern) print as the store \
            records them, in words, after "rules:"; the store keeps them to check existing values \
            when they change (validating new values is the application's). In JSON: "default", \
            "fill" and "rules", strings, absent when there are none.
            """
    )

    @Argument(help: "The store file.") var file: String
    @Option(name: .long, help: "text or json.") var format: ModelFormat = .text
    @Flag(name: .long, help: "Print the model versions the store has been at (its history), oldest first, and what changed from each to the next, instead of the model.")
    var history = false

    enum ModelFormat: String, ExpressibleByArgument, CaseIterable {
        case text, json
    }

    func run() throws {
        try reportingErrors {
            var options = DatabaseOptions()
            options.readOnly = true
            options.create = false
            if history {
                try printHistory(options: options)
                return
            }
            let model = try ManagedObjectModel.stored(in: file, options: options)
            // Opening the store compares the model's hashes with those the store recorded.
            let store = try NativeStore(path: file, model: model, options: options)
            let described = StoredModel(model, file: file, identifier: store.identifier,
                                        recorded: try NativeStore.recordedAttributes(at: file, options: options))
            switch format {
            case .text: print(described.text, terminator: "")
            case .json:
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                print(String(decoding: try encoder.encode(described), as: UTF8.self))
            }
        }
    }
}

extension ModelCommand {
    /// `--history`: each version, and the differences from the one before.
    func printHistory(options: DatabaseOptions) throws {
        let versions = try NativeStore.modelHistory(at: file, options: options)
        let dates = ISO8601DateFormatter()
        switch format {
        case .text:
            var lines: [String] = []
            for (index, version) in versions.enumerated() {
                var line = "version \(version.version)  \(version.recorded.map(dates.string(from:)) ?? "date unknown")  hash \(version.versionHash)  "
                line += version.migration.map { "reached by a \($0) migration" } ?? "the model the store was made with"
                if version.synthesized { line += " (recorded after the fact)" }
                lines.append(line)
                lines.append("  entities: \(version.entityHashes.keys.sorted().joined(separator: ", "))")
                if index > 0 {
                    if let difference = version.difference(from: versions[index - 1]) {
                        lines += difference.changes.map { "  \($0)" }
                    } else {
                        lines.append("  (the differences are unknown: an earlier version's schema was not kept)")
                    }
                }
            }
            print(lines.joined(separator: "\n"))
        case .json:
            struct Entry: Encodable {
                var version: Int
                var recorded: String?
                var synthesized: Bool
                var migration: String?
                var hash: String
                var entities: [String: String]
                var changes: [String]?
            }
            let entries = versions.enumerated().map { index, version in
                Entry(version: version.version, recorded: version.recorded.map(dates.string(from:)), synthesized: version.synthesized,
                      migration: version.migration, hash: version.versionHash, entities: version.entityHashes,
                      changes: index == 0 ? nil : version.difference(from: versions[index - 1])?.changes.map(\.description))
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(entries), as: UTF8.self))
        }
    }
}

/// A model as `arbor model` prints it (and as its JSON is shaped).
struct StoredModel: Encodable {
    struct Attribute: Encodable {
        var name: String
        var type: String
        var optional: Bool
        var transient: Bool
        var indexed: Bool
        /// The value a new object gets, as text (strings quoted).
        var defaultValue: String?
        /// The value rows from before the attribute was added read for it, as text (strings
        /// quoted).
        var fill: String?
        /// The validation rules, in words, as the store records them.
        var rules: String?

        enum CodingKeys: String, CodingKey {
            case name, type, optional, transient, indexed, fill, rules
            case defaultValue = "default"
        }

        /// `year: integer16, optional, indexed, default 2000, fill 1990, rules: minimum 1450,
        /// maximum 2100`
        /// (the rules last: a pattern may hold commas).
        var text: String {
            var options = [optional ? "optional" : "required"]
            if transient { options.append("transient") }
            if indexed { options.append("indexed") }
            if let defaultValue { options.append("default \(defaultValue)") }
            if let fill { options.append("fill \(fill)") }
            if let rules { options.append("rules: \(rules)") }
            return "\(name): \(type), " + options.joined(separator: ", ")
        }

        /// A default or fill as text: a string quoted as JSON quotes it, a date in ISO-8601, data
        /// in base64.
        static func text(_ fill: AttributeValue) -> String {
            if case .string(let string) = fill { return Cell.jsonString(string) }
            return Cell(fill).text ?? "nil"
        }
    }

    struct Relationship: Encodable {
        var name: String
        var destination: String
        var inverse: String
        var toMany: Bool
        var ordered: Bool
        var optional: Bool
        var minimumCount: Int
        var maximumCount: Int
        var deleteRule: String

        /// `employees: to-many Employee, inverse department, optional, delete rule cascade`.
        var text: String {
            var options = ["\(toMany ? (ordered ? "ordered to-many" : "to-many") : "to-one") \(destination)", "inverse \(inverse)"]
            options.append(optional ? "optional" : "required")
            if toMany && (minimumCount > 0 || maximumCount > 0) {
                options.append("count \(minimumCount)…\(maximumCount > 0 ? String(maximumCount) : "")")
            }
            options.append("delete rule \(deleteRule)")
            return "\(name): " + options.joined(separator: ", ")
        }
    }

    struct Index: Encodable {
        var keys: [String]
        var caseAndDiacriticInsensitive: Bool
    }

    struct Entity: Encodable {
        var name: String
        var parent: String?
        var abstract: Bool
        var versionHash: String
        var attributes: [Attribute]
        var relationships: [Relationship]
        var indexes: [Index]
        var uniquenessConstraints: [[String]]
    }

    var file: String
    var identifier: String
    var versionHash: String
    var configurations: [String: [String]]
    var entities: [Entity]

    /// - Parameter recorded: what the store records of attributes besides the model, by entity
    ///   and attribute name (``NativeStore/recordedAttributes(at:options:)``).
    init(_ model: ManagedObjectModel, file: String, identifier: UUID, recorded: [String: [String: RecordedAttribute]]) {
        self.file = file
        self.identifier = identifier.uuidString
        versionHash = model.versionHashString
        configurations = model.configurations.mapValues { $0.sorted() }
        entities = model.entities.map { entity in
            // Indexes and constraints list the inherited ones first: these are the entity's own.
            let indexes = entity.indexes.dropFirst(entity.superentity?.indexes.count ?? 0)
            let unique = entity.uniquenessConstraints.dropFirst(entity.superentity?.uniquenessConstraints.count ?? 0)
            return Entity(
                name: entity.name, parent: entity.superentityName, abstract: entity.isAbstract, versionHash: entity.versionHashString,
                attributes: entity.ownAttributes.map { attribute in
                    let notes = recorded[entity.name]?[attribute.name]
                    return Attribute(name: attribute.name, type: attribute.type.description, optional: attribute.isOptional,
                                     transient: attribute.isTransient, indexed: entity.indexes.contains { $0.keys.first == attribute.name },
                                     defaultValue: notes?.defaultValue.map(Attribute.text), fill: notes?.fill.map(Attribute.text),
                                     rules: notes?.rules)
                },
                relationships: entity.ownRelationships.map {
                    Relationship(name: $0.name, destination: $0.destinationEntityName, inverse: $0.inverseName, toMany: $0.isToMany,
                                 ordered: $0.isOrdered, optional: $0.isOptional, minimumCount: $0.minimumCount,
                                 maximumCount: $0.maximumCount, deleteRule: $0.deleteRule.rawValue)
                },
                indexes: indexes.map { Index(keys: $0.keys, caseAndDiacriticInsensitive: $0.caseAndDiacriticInsensitive) },
                uniquenessConstraints: Array(unique))
        }
    }

    /// The model as text: one block per entity, one line per property, index and constraint.
    var text: String {
        var lines = ["store \(file) (identifier \(identifier))"]
        for entity in entities {
            var header = "entity \(entity.name)"
            if let parent = entity.parent { header += " : \(parent)" }
            if entity.abstract { header += " (abstract)" }
            lines.append("")
            lines.append(header + "  version hash \(entity.versionHash)")
            lines += entity.attributes.map { "  attribute     \($0.text)" }
            lines += entity.relationships.map { "  relationship  \($0.text)" }
            lines += entity.indexes.map { "  index         \($0.keys.joined(separator: ", "))\($0.caseAndDiacriticInsensitive ? " [cd]" : "")" }
            lines += entity.uniquenessConstraints.map { "  unique        \($0.joined(separator: ", "))" }
        }
        if !configurations.isEmpty {
            lines.append("")
            for (name, members) in configurations.sorted(by: { $0.key < $1.key }) {
                lines.append("configuration \(name): \(members.joined(separator: ", "))")
            }
        }
        lines.append("")
        lines.append("model version hash \(versionHash)")
        return lines.joined(separator: "\n") + "\n"
    }
}
