import Foundation

/// A model's structure as JSON, kept in every store's metadata so that tools (`arbor query`) can
/// read a store without the application's code: entities, their own attributes (type,
/// optionality, transience), relationships, uniqueness constraints and indexes — everything the
/// version hashes cover — and, for tools, attributes' default values and validation rules (in
/// words). Classes are not kept; a model made from a schema has the same version hashes as the
/// model that wrote it, and its attributes' default values (not its rules).
struct ModelSchema: Codable, Equatable {
    struct AttributeSchema: Codable, Equatable {
        var name: String
        var type: String
        /// For transformable attributes, the Swift type's name.
        var valueType: String?
        var optional: Bool
        var transient: Bool
        /// The name in the previous model version (`renamingIdentifier`), when renamed.
        var renaming: String?
        /// The value rules (minimum, maximum, length, pattern) in words, when there are any
        /// (schemas recorded before they were kept have none): a migration checks existing
        /// values against rules that changed.
        var rules: String?
        /// The default value (``ModelSchema/recordedDefault(_:)``), when there is one (schemas
        /// recorded before they were kept have none).
        var defaultValue: String?
    }

    /// The default value of `attribute` as a schema records it: the column a row would hold,
    /// in hexadecimal (nil for none, a transient attribute, or a transformable one, whose value
    /// needs the application's transformer to read).
    static func recordedDefault(_ attribute: AttributeDescription) -> String? {
        guard !attribute.isTransient, attribute.type.kind != .transformable, let value = attribute.defaultValue else { return nil }
        return RowFormat.columnText(of: value)
    }

    struct RelationshipSchema: Codable, Equatable {
        var name: String
        var destination: String
        var inverse: String
        var toMany: Bool
        var ordered: Bool
        var optional: Bool
        var minimumCount: Int
        var maximumCount: Int
        var deleteRule: String
        /// The name in the previous model version, when renamed.
        var renaming: String?
    }

    struct IndexSchema: Codable, Equatable {
        var keys: [String]
        var folded: Bool
    }

    struct EntitySchema: Codable, Equatable {
        var name: String
        var parent: String?
        var abstract: Bool
        var attributes: [AttributeSchema]
        var relationships: [RelationshipSchema]
        var unique: [[String]]
        var indexes: [IndexSchema]
        /// The name in the previous model version, when renamed.
        var renaming: String?
    }

    var entities: [EntitySchema]
    var configurations: [String: [String]]

    init(_ model: ManagedObjectModel) {
        entities = model.entities.map { entity in
            EntitySchema(
                name: entity.name, parent: entity.superentityName, abstract: entity.isAbstract,
                attributes: entity.ownAttributes.map {
                    AttributeSchema(name: $0.name, type: $0.type.kind.rawValue,
                                    valueType: $0.type.kind == .transformable ? $0.type.valueTypeName : nil,
                                    optional: $0.isOptional, transient: $0.isTransient, renaming: $0.renamingIdentifier,
                                    rules: Validation.rulesDescription($0), defaultValue: Self.recordedDefault($0))
                },
                relationships: entity.ownRelationships.map {
                    RelationshipSchema(name: $0.name, destination: $0.destinationEntityName, inverse: $0.inverseName,
                                       toMany: $0.isToMany, ordered: $0.isOrdered, optional: $0.isOptional,
                                       minimumCount: $0.minimumCount, maximumCount: $0.maximumCount, deleteRule: $0.deleteRule.rawValue,
                                       renaming: $0.renamingIdentifier)
                },
                unique: entity.ownUniqueness,
                indexes: entity.ownIndexes.map { IndexSchema(keys: $0.keys, folded: $0.caseAndDiacriticInsensitive) },
                renaming: entity.renamingIdentifier)
        }
        configurations = model.configurations.mapValues { $0.sorted() }
    }

    /// The model the schema describes.
    ///
    /// - Throws: ``ArborError/Code/invalidModel`` when the schema is inconsistent.
    func model() throws -> ManagedObjectModel {
        let specs = try entities.map { entity in
            var members: [any EntityMember] = []
            for attribute in entity.attributes {
                guard let kind = AttributeType.Kind(rawValue: attribute.type) else {
                    throw ArborError(.invalidModel, "the stored schema gives \(entity.name).\(attribute.name) the unknown type \(attribute.type)")
                }
                let type = kind == .transformable
                    ? AttributeType(.transformable, transformer: Transformer(opaqueTypeName: attribute.valueType ?? "?"))
                    : AttributeType(kind)
                var member = Attribute(attribute.name, type).optional(attribute.optional)
                if attribute.transient { member = member.transient() }
                // A recorded default only informs tools: one that does not fit its type (a
                // damaged schema) is left out rather than making the whole model unreadable.
                if let text = attribute.defaultValue, let value = RowFormat.attributeValue(ofColumnText: text, kind: kind),
                   (try? type.storedValue(from: value.sendableValue, entity: entity.name, key: attribute.name)) != nil {
                    member = member.defaultValue(value.sendableValue)
                }
                if let previous = attribute.renaming { member = member.renamingIdentifier(previous) }
                members.append(member)
            }
            for relationship in entity.relationships {
                var member = Relationship(relationship.name, to: relationship.destination, inverse: relationship.inverse)
                if relationship.toMany {
                    member = member.toMany(ordered: relationship.ordered)
                    member.minimumCount = relationship.minimumCount
                    member.maximumCount = relationship.maximumCount
                }
                if !relationship.optional { member = member.required() }
                if let rule = DeleteRule(rawValue: relationship.deleteRule) { member = member.deleteRule(rule) }
                if let previous = relationship.renaming { member = member.renamingIdentifier(previous) }
                members.append(member)
            }
            for keys in entity.unique { members.append(Unique(keys: keys)) }
            for index in entity.indexes { members.append(Indexed(keys: index.keys, caseInsensitive: index.folded)) }
            let spec = Entity(entity.name, abstract: entity.abstract, parent: entity.parent, members: members)
            return entity.renaming.map(spec.renamingIdentifier) ?? spec
        }
        return try ManagedObjectModel(entities: specs, configurations: configurations.mapValues(Set.init))
    }
}
