/// What differs between two models — the one a store was made with and another — entity by
/// entity and property by property: the one statement of it, which errors, tools and migration
/// read (docs/migration.md, "Differences: one owner").
///
/// Entities and properties are matched by name. Everything a model's schema keeps is compared:
/// entities' parents and abstractness; attributes' types, optionality and transience;
/// relationships' destinations, inverses, cardinality, ordering, optionality, counts and delete
/// rules; uniqueness constraints and indexes. (Validation rules and default values are not kept
/// by a store, so they never differ here.)
public struct ModelDifference: Sendable, Equatable, CustomStringConvertible {
    /// One difference.
    public struct Change: Sendable, Equatable, CustomStringConvertible {
        /// What kind of thing differs.
        public enum Kind: String, Sendable, Equatable, CaseIterable {
            /// An entity only in the new model.
            case entityAdded
            /// An entity only in the store's model.
            case entityRemoved
            /// An entity's parent or abstractness.
            case entityChanged
            /// An attribute only in the new model.
            case attributeAdded
            /// An attribute only in the store's model.
            case attributeRemoved
            /// An attribute's type, optionality or transience (or a property that changed from
            /// attribute to relationship, or back).
            case attributeChanged
            /// A relationship only in the new model.
            case relationshipAdded
            /// A relationship only in the store's model.
            case relationshipRemoved
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
            case .entityChanged: "entity changed"
            case .attributeAdded: "attribute added"
            case .attributeRemoved: "attribute removed"
            case .attributeChanged: "attribute changed"
            case .relationshipAdded: "relationship added"
            case .relationshipRemoved: "relationship removed"
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

    /// What differs from schema `old` to schema `new`.
    init(from old: ModelSchema, to new: ModelSchema) {
        let olds = Dictionary(old.entities.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let news = Dictionary(new.entities.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var changes: [Change] = []
        for name in Set(olds.keys).union(news.keys).sorted() {
            switch (olds[name], news[name]) {
            case (nil, let added?):
                changes.append(Change(entity: name, name: nil, kind: .entityAdded, detail: Self.summary(of: added)))
            case (let removed?, nil):
                changes.append(Change(entity: name, name: nil, kind: .entityRemoved, detail: Self.summary(of: removed)))
            case (let before?, let after?):
                changes += Self.changes(from: before, to: after)
            case (nil, nil):
                break
            }
        }
        self.changes = changes
    }

    // MARK: Comparing

    private static func changes(from old: ModelSchema.EntitySchema, to new: ModelSchema.EntitySchema) -> [Change] {
        let entity = new.name
        var changes: [Change] = []
        var aspects: [String] = []
        if old.parent != new.parent { aspects.append("parent \(old.parent ?? "none") → \(new.parent ?? "none")") }
        if old.abstract != new.abstract { aspects.append(new.abstract ? "concrete → abstract" : "abstract → concrete") }
        if !aspects.isEmpty { changes.append(Change(entity: entity, name: nil, kind: .entityChanged, detail: aspects.joined(separator: ", "))) }

        let oldAttributes = Dictionary(old.attributes.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let newAttributes = Dictionary(new.attributes.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let oldRelationships = Dictionary(old.relationships.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let newRelationships = Dictionary(new.relationships.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })

        for name in Set(oldAttributes.keys).union(newAttributes.keys).sorted() {
            switch (oldAttributes[name], newAttributes[name]) {
            case (nil, let added?):
                if let was = oldRelationships[name] {
                    changes.append(Change(entity: entity, name: name, kind: .attributeChanged,
                                          detail: "relationship (\(summary(of: was))) → attribute (\(summary(of: added)))"))
                } else {
                    changes.append(Change(entity: entity, name: name, kind: .attributeAdded, detail: summary(of: added)))
                }
            case (let removed?, nil):
                // A property that became a relationship is reported once, as the attribute's change.
                if let now = newRelationships[name] {
                    changes.append(Change(entity: entity, name: name, kind: .attributeChanged,
                                          detail: "attribute (\(summary(of: removed))) → relationship (\(summary(of: now)))"))
                } else {
                    changes.append(Change(entity: entity, name: name, kind: .attributeRemoved, detail: summary(of: removed)))
                }
            case (let before?, let after?):
                var aspects: [String] = []
                let (oldType, newType) = (typeName(before), typeName(after))
                if oldType != newType { aspects.append("type \(oldType) → \(newType)") }
                if before.optional != after.optional { aspects.append(after.optional ? "required → optional" : "optional → required") }
                if before.transient != after.transient { aspects.append(after.transient ? "stored → transient" : "transient → stored") }
                if !aspects.isEmpty {
                    changes.append(Change(entity: entity, name: name, kind: .attributeChanged, detail: aspects.joined(separator: ", ")))
                }
            case (nil, nil):
                break
            }
        }
        for name in Set(oldRelationships.keys).union(newRelationships.keys).sorted() {
            switch (oldRelationships[name], newRelationships[name]) {
            case (nil, let added?):
                if oldAttributes[name] == nil {
                    changes.append(Change(entity: entity, name: name, kind: .relationshipAdded, detail: summary(of: added)))
                }
            case (let removed?, nil):
                if newAttributes[name] == nil {
                    changes.append(Change(entity: entity, name: name, kind: .relationshipRemoved, detail: summary(of: removed)))
                }
            case (let before?, let after?):
                var aspects: [String] = []
                if before.destination != after.destination { aspects.append("destination \(before.destination) → \(after.destination)") }
                if before.inverse != after.inverse { aspects.append("inverse \(before.inverse) → \(after.inverse)") }
                if before.toMany != after.toMany { aspects.append(after.toMany ? "to-one → to-many" : "to-many → to-one") }
                if before.ordered != after.ordered { aspects.append(after.ordered ? "unordered → ordered" : "ordered → unordered") }
                if before.optional != after.optional { aspects.append(after.optional ? "required → optional" : "optional → required") }
                if (before.minimumCount, before.maximumCount) != (after.minimumCount, after.maximumCount) {
                    aspects.append("count \(countText(before)) → \(countText(after))")
                }
                if before.deleteRule != after.deleteRule { aspects.append("delete rule \(before.deleteRule) → \(after.deleteRule)") }
                if !aspects.isEmpty {
                    changes.append(Change(entity: entity, name: name, kind: .relationshipChanged, detail: aspects.joined(separator: ", ")))
                }
            case (nil, nil):
                break
            }
        }

        let (oldUnique, newUnique) = (Set(old.unique), Set(new.unique))
        for keys in new.unique where !oldUnique.contains(keys) {
            changes.append(Change(entity: entity, name: keys.joined(separator: ","), kind: .uniquenessAdded, detail: ""))
        }
        for keys in old.unique where !newUnique.contains(keys) {
            changes.append(Change(entity: entity, name: keys.joined(separator: ","), kind: .uniquenessRemoved, detail: ""))
        }
        let indexName = { (index: ModelSchema.IndexSchema) in index.keys.joined(separator: ",") }
        let indexDetail = { (index: ModelSchema.IndexSchema) in index.folded ? "case- and diacritic-insensitive" : "" }
        for index in new.indexes where !old.indexes.contains(index) {
            changes.append(Change(entity: entity, name: indexName(index), kind: .indexAdded, detail: indexDetail(index)))
        }
        for index in old.indexes where !new.indexes.contains(index) {
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
