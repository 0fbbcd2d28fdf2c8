/// What differs between two models — the one a store was made with and another — entity by
/// entity and property by property: the one statement of it, which errors, tools and migration
/// read (docs/migration.md, "Differences: one owner").
///
/// Entities and properties are matched by their `renamingIdentifier` when the new model gives one
/// that names an entity or property of the store's model (a rename), else by name. Everything a model's schema keeps is compared:
/// entities' parents and abstractness; attributes' types, optionality and transience;
/// relationships' destinations, inverses, cardinality, ordering, optionality, counts and delete
/// rules; uniqueness constraints and indexes. (Validation rules and default values are not
/// compared: a store checks its values against changed rules itself, and defaults concern new
/// objects only.)
public struct ModelDifference: Sendable, Equatable, CustomStringConvertible {
    /// One difference.
    public struct Change: Sendable, Equatable, CustomStringConvertible {
        /// What kind of thing differs.
        public enum Kind: String, Sendable, Equatable, CaseIterable {
            /// An entity only in the new model.
            case entityAdded
            /// An entity only in the store's model.
            case entityRemoved
            /// An entity the new model renamed (its `renamingIdentifier` names the store's).
            case entityRenamed
            /// An entity's parent or abstractness.
            case entityChanged
            /// An attribute only in the new model.
            case attributeAdded
            /// An attribute only in the store's model.
            case attributeRemoved
            /// An attribute the new model renamed.
            case attributeRenamed
            /// An attribute's type, optionality, transience or value rules (or a property that
            /// changed from attribute to relationship, or back).
            case attributeChanged
            /// A relationship only in the new model.
            case relationshipAdded
            /// A relationship only in the store's model.
            case relationshipRemoved
            /// A relationship the new model renamed.
            case relationshipRenamed
            /// A relationship's destination, inverse, cardinality, ordering, optionality, counts
            /// or delete rule.
            case relationshipChanged
            /// A uniqueness constraint only in the new model.
            case uniquenessAdded
            /// A uniqueness constraint only in the store's model.
            case uniquenessRemoved
            /// An index only in the new model.
            case indexAdded
            /// An index only in the store's model.
            case indexRemoved
        }

        /// The entity.
        public let entity: String
        /// The property, constraint or index (its keys joined by commas); nil for a change of
        /// the entity itself.
        public let name: String?
        /// What differs.
        public let kind: Kind
        /// The details: the added or removed property's type and options, or each changed
        /// aspect as `old → new` (`type integer32 → integer64`, `optional → required`).
        public let detail: String

        /// `Author.bio: attribute added (string, optional)`.
        public var description: String {
            let subject = name.map { "\(entity).\($0)" } ?? entity
            let what = switch kind {
            case .entityAdded: "entity added"
            case .entityRemoved: "entity removed"
            case .entityRenamed: "entity renamed"
            case .entityChanged: "entity changed"
            case .attributeAdded: "attribute added"
            case .attributeRemoved: "attribute removed"
            case .attributeRenamed: "attribute renamed"
            case .attributeChanged: "attribute changed"
            case .relationshipAdded: "relationship added"
            case .relationshipRemoved: "relationship removed"
            case .relationshipRenamed: "relationship renamed"
            case .relationshipChanged: "relationship changed"
            case .uniquenessAdded: "uniqueness constraint added"
            case .uniquenessRemoved: "uniqueness constraint removed"
            case .indexAdded: "index added"
            case .indexRemoved: "index removed"
            }
            return "\(subject): \(what)" + (detail.isEmpty ? "" : " (\(detail))")
        }
    }

    /// Every difference, entities in name order, each entity's changes in the order: the entity,
    /// attributes, relationships, constraints, indexes.
    public let changes: [Change]

    /// Whether the two models store the same.
    public var isEmpty: Bool { changes.isEmpty }

    /// One change per line.
    public var description: String { changes.map(\.description).joined(separator: "\n") }

    /// What differs from `model` (the store's, say) to `other` (the application's).
    public init(from model: ManagedObjectModel, to other: ManagedObjectModel) {
        self.init(from: ModelSchema(model), to: ModelSchema(other))
    }

    /// The store's entity each entity of the new model continues, by name (new → old; entities
    /// the new model adds have none).
    let entityMatches: [String: String]
    /// For each entity of the new model, the store's property each of its own properties
    /// continues (new name → old name).
    let propertyMatches: [String: [String: String]]

    /// What differs from schema `old` to schema `new`.
    init(from old: ModelSchema, to new: ModelSchema) {
        let olds = Dictionary(old.entities.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let entityPairs = Self.match(old.entities.map(\.name), new.entities.map { ($0.name, $0.renaming) })
        var changes: [Change] = []
        var entityMatches: [String: String] = [:], propertyMatches: [String: [String: String]] = [:]
        // Every entity's and property's match first: a relationship's destination and inverse,
        // and a parent, compare in the new model's names.
        for pair in entityPairs {
            guard let oldName = pair.old, let newName = pair.new, let before = olds[oldName],
                  let after = new.entities.first(where: { $0.name == newName }) else { continue }
            entityMatches[newName] = oldName
            propertyMatches[newName] = Dictionary(Self.propertyPairs(before, after).compactMap { pair in
                pair.new.flatMap { new in pair.old.map { (new, $0) } }
            }, uniquingKeysWith: { first, _ in first })
        }
        let renames = Renames(entityMatches: entityMatches, propertyMatches: propertyMatches)
        for pair in entityPairs {
            switch (pair.old.flatMap { olds[$0] }, pair.new.flatMap { name in new.entities.first { $0.name == name } }) {
            case (nil, let added?):
                changes.append(Change(entity: added.name, name: nil, kind: .entityAdded, detail: Self.summary(of: added)))
            case (let removed?, nil):
                changes.append(Change(entity: removed.name, name: nil, kind: .entityRemoved, detail: Self.summary(of: removed)))
            case (let before?, let after?):
                if before.name != after.name {
                    changes.append(Change(entity: after.name, name: nil, kind: .entityRenamed, detail: "renamed from \(before.name)"))
                }
                changes += Self.changes(from: before, to: after, renames)
            case (nil, nil):
                break
            }
        }
        self.changes = changes
        self.entityMatches = entityMatches
        self.propertyMatches = propertyMatches
    }

    /// The old model's names in the new one's, for comparing.
    private struct Renames {
        let newEntity: [String: String]
        let newProperty: [String: [String: String]]

        init(entityMatches: [String: String], propertyMatches: [String: [String: String]]) {
            newEntity = Dictionary(entityMatches.map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
            var properties: [String: [String: String]] = [:]
            for (entity, matches) in propertyMatches {
                properties[entity] = Dictionary(matches.map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
            }
            newProperty = properties
        }

        /// An old entity's name in the new model (itself when not matched).
        func entity(_ old: String) -> String { newEntity[old] ?? old }
        /// An old property of `entity` (a new entity's name) in the new model.
        func property(_ old: String, of entity: String) -> String { newProperty[entity]?[old] ?? old }
    }

    /// An entity's properties paired old with new (attributes and relationships alike).
    private static func propertyPairs(_ old: ModelSchema.EntitySchema, _ new: ModelSchema.EntitySchema) -> [(old: String?, new: String?)] {
        match(old.attributes.map(\.name) + old.relationships.map(\.name),
              new.attributes.map { ($0.name, $0.renaming) } + new.relationships.map { ($0.name, $0.renaming) })
    }

    /// Pairs old names with new ones (each new one with its `renamingIdentifier`): a renaming
    /// identifier that names an old one claims it — unless the old model also has the new name
    /// (an identifier kept from an earlier rename) — then the rest match by name. In name order
    /// (a pair's new name, else its old one).
    static func match(_ old: [String], _ new: [(name: String, renaming: String?)]) -> [(old: String?, new: String?)] {
        var unclaimed = Set(old)
        let oldNames = Set(old)
        var pairs: [(old: String?, new: String?)] = []
        var unmatched: [String] = []
        for (name, renaming) in new {
            // A renaming identifier kept in a later version (the old model already has the new
            // name) names a rename done before: the name matches.
            if let renaming, renaming != name, !oldNames.contains(name), unclaimed.remove(renaming) != nil {
                pairs.append((renaming, name))
            } else {
                unmatched.append(name)
            }
        }
        for name in unmatched {
            pairs.append((unclaimed.remove(name), name))
        }
        pairs += unclaimed.map { (Optional($0), nil) }
        return pairs.sorted { ($0.new ?? $0.old ?? "") < ($1.new ?? $1.old ?? "") }
    }

    // MARK: Comparing

    private static func changes(from old: ModelSchema.EntitySchema, to new: ModelSchema.EntitySchema, _ renames: Renames) -> [Change] {
        // Long: one entity's comparison: its own aspects, then each property pair (one case per way
        // a pair can differ), then constraints and indexes in the new names the pairs matched.
        let entity = new.name
        var changes: [Change] = []
        var aspects: [String] = []
        if old.parent.map(renames.entity) != new.parent { aspects.append("parent \(old.parent ?? "none") → \(new.parent ?? "none")") }
        if old.abstract != new.abstract { aspects.append(new.abstract ? "concrete → abstract" : "abstract → concrete") }
        if !aspects.isEmpty { changes.append(Change(entity: entity, name: nil, kind: .entityChanged, detail: aspects.joined(separator: ", "))) }

        // Properties: renames first (matched among attributes and relationships alike), then by
        // name; a property that changed between attribute and relationship is reported once, as
        // the attribute's change.
        let oldAttributes = Dictionary(old.attributes.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let newAttributes = Dictionary(new.attributes.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let oldRelationships = Dictionary(old.relationships.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let newRelationships = Dictionary(new.relationships.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let pairs = propertyPairs(old, new)
        var matches: [String: String] = [:]
        var attributeChanges: [Change] = [], relationshipChanges: [Change] = []
        for pair in pairs {
            let name = pair.new ?? pair.old ?? ""
            if let newName = pair.new, let oldName = pair.old { matches[newName] = oldName }
            switch (pair.old.flatMap { oldAttributes[$0] }, pair.old.flatMap { oldRelationships[$0] },
                    pair.new.flatMap { newAttributes[$0] }, pair.new.flatMap { newRelationships[$0] }) {
            case (nil, nil, let added?, nil):
                attributeChanges.append(Change(entity: entity, name: name, kind: .attributeAdded, detail: summary(of: added)))
            case (nil, nil, nil, let added?):
                relationshipChanges.append(Change(entity: entity, name: name, kind: .relationshipAdded, detail: summary(of: added)))
            case (let removed?, nil, nil, nil):
                attributeChanges.append(Change(entity: entity, name: name, kind: .attributeRemoved, detail: summary(of: removed)))
            case (nil, let removed?, nil, nil):
                relationshipChanges.append(Change(entity: entity, name: name, kind: .relationshipRemoved, detail: summary(of: removed)))
            case (nil, let was?, let now?, nil):
                attributeChanges.append(Change(entity: entity, name: name, kind: .attributeChanged,
                                               detail: "relationship (\(summary(of: was))) → attribute (\(summary(of: now)))"))
            case (let was?, nil, nil, let now?):
                attributeChanges.append(Change(entity: entity, name: name, kind: .attributeChanged,
                                               detail: "attribute (\(summary(of: was))) → relationship (\(summary(of: now)))"))
            case (let before?, nil, let after?, nil):
                if before.name != after.name {
                    attributeChanges.append(Change(entity: entity, name: name, kind: .attributeRenamed, detail: "renamed from \(before.name)"))
                }
                var aspects: [String] = []
                let (oldType, newType) = (typeName(before), typeName(after))
                if oldType != newType { aspects.append("type \(oldType) → \(newType)") }
                if before.optional != after.optional { aspects.append(after.optional ? "required → optional" : "optional → required") }
                if before.transient != after.transient { aspects.append(after.transient ? "stored → transient" : "transient → stored") }
                if before.rules != after.rules { aspects.append("rules \(before.rules ?? "none") → \(after.rules ?? "none")") }
                if !aspects.isEmpty {
                    attributeChanges.append(Change(entity: entity, name: name, kind: .attributeChanged, detail: aspects.joined(separator: ", ")))
                }
            case (nil, let before?, nil, let after?):
                if before.name != after.name {
                    relationshipChanges.append(Change(entity: entity, name: name, kind: .relationshipRenamed, detail: "renamed from \(before.name)"))
                }
                var aspects: [String] = []
                if renames.entity(before.destination) != after.destination { aspects.append("destination \(before.destination) → \(after.destination)") }
                if renames.property(before.inverse, of: after.destination) != after.inverse { aspects.append("inverse \(before.inverse) → \(after.inverse)") }
                if before.toMany != after.toMany { aspects.append(after.toMany ? "to-one → to-many" : "to-many → to-one") }
                if before.ordered != after.ordered { aspects.append(after.ordered ? "unordered → ordered" : "ordered → unordered") }
                if before.optional != after.optional { aspects.append(after.optional ? "required → optional" : "optional → required") }
                if (before.minimumCount, before.maximumCount) != (after.minimumCount, after.maximumCount) {
                    aspects.append("count \(countText(before)) → \(countText(after))")
                }
                if before.deleteRule != after.deleteRule { aspects.append("delete rule \(before.deleteRule) → \(after.deleteRule)") }
                if !aspects.isEmpty {
                    relationshipChanges.append(Change(entity: entity, name: name, kind: .relationshipChanged, detail: aspects.joined(separator: ", ")))
                }
            default:
                break
            }
        }
        changes += attributeChanges + relationshipChanges

        // Constraints and indexes compare in the new names of renamed properties.
        let newNames = Dictionary(matches.map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        let translated = { (keys: [String]) in keys.map { newNames[$0] ?? $0 } }
        let oldUniqueKeys = old.unique.map(translated)
        let oldIndexes = old.indexes.map { ModelSchema.IndexSchema(keys: translated($0.keys), folded: $0.folded) }
        let (oldUnique, newUnique) = (Set(oldUniqueKeys), Set(new.unique))
        for keys in new.unique where !oldUnique.contains(keys) {
            changes.append(Change(entity: entity, name: keys.joined(separator: ","), kind: .uniquenessAdded, detail: ""))
        }
        for keys in oldUniqueKeys where !newUnique.contains(keys) {
            changes.append(Change(entity: entity, name: keys.joined(separator: ","), kind: .uniquenessRemoved, detail: ""))
        }
        let indexName = { (index: ModelSchema.IndexSchema) in index.keys.joined(separator: ",") }
        let indexDetail = { (index: ModelSchema.IndexSchema) in index.folded ? "case- and diacritic-insensitive" : "" }
        for index in new.indexes where !oldIndexes.contains(index) {
            changes.append(Change(entity: entity, name: indexName(index), kind: .indexAdded, detail: indexDetail(index)))
        }
        for index in oldIndexes where !new.indexes.contains(index) {
            changes.append(Change(entity: entity, name: indexName(index), kind: .indexRemoved, detail: indexDetail(index)))
        }
        return changes
    }

    // MARK: Wording

    private static func typeName(_ attribute: ModelSchema.AttributeSchema) -> String {
        attribute.valueType.map { "\(attribute.type) of \($0)" } ?? attribute.type
    }

    private static func summary(of attribute: ModelSchema.AttributeSchema) -> String {
        var parts = [typeName(attribute), attribute.optional ? "optional" : "required"]
        if attribute.transient { parts.append("transient") }
        return parts.joined(separator: ", ")
    }

    private static func countText(_ relationship: ModelSchema.RelationshipSchema) -> String {
        "\(relationship.minimumCount)…\(relationship.maximumCount == 0 ? "" : String(relationship.maximumCount))"
    }

    private static func summary(of relationship: ModelSchema.RelationshipSchema) -> String {
        var parts = ["\(relationship.toMany ? (relationship.ordered ? "ordered to-many" : "to-many") : "to-one") \(relationship.destination)",
                     "inverse \(relationship.inverse)", relationship.optional ? "optional" : "required"]
        if relationship.deleteRule != DeleteRule.nullify.rawValue { parts.append("delete rule \(relationship.deleteRule)") }
        return parts.joined(separator: ", ")
    }

    private static func summary(of entity: ModelSchema.EntitySchema) -> String {
        var parts: [String] = []
        if entity.abstract { parts.append("abstract") }
        if let parent = entity.parent { parts.append("parent \(parent)") }
        parts.append("\(entity.attributes.count) attribute\(entity.attributes.count == 1 ? "" : "s")")
        parts.append("\(entity.relationships.count) relationship\(entity.relationships.count == 1 ? "" : "s")")
        return parts.joined(separator: ", ")
    }
}
