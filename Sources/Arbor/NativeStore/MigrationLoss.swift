import ArborStore

// Safety: The row bytes are lent by the engine for the call and read only during it.

/// Data a migration may drop, named in the store's model: the objects of an entity the new model
/// removes, or the values or links of a property it removes (or makes transient).
///
/// A lightweight migration never drops data that exists unless a stage of a ``MigrationPlan``
/// names it (``MigrationPlan/lightweight(to:dropping:)``). A property the new model renamed is not
/// a drop: give it a `renamingIdentifier` naming its old name instead.
///
/// ```swift
/// let plan = MigrationPlan(startingAt: version1)
///     .lightweight(to: version2, dropping: [.entity("Draft"), .property("legacyCode", of: "Book")])
/// ```
public enum MigrationDrop: Hashable, Sendable, CustomStringConvertible {
    /// Every object of the entity (its sub-entities are entities of their own), with the links
    /// of its relationships.
    case entity(String)
    /// The values of an attribute, or the links of a relationship (either side of the pair),
    /// of the entity that declares it.
    case property(String, of: String)

    /// `Draft`, or `Book.legacyCode`.
    public var description: String {
        switch self {
        case .entity(let name): name
        case .property(let name, let entity): "\(entity).\(name)"
        }
    }

    /// How it is written in a plan: `.property("legacyCode", of: "Book")`.
    var spelled: String {
        switch self {
        case .entity(let name): ".entity(\"\(name)\")"
        case .property(let name, let entity): ".property(\"\(name)\", of: \"\(entity)\")"
        }
    }
}

/// Data a migration drops, or would drop (``MigrationReport/losses``,
/// ``MigrationVerification/losses``, ``ArborError/migrationLosses``): what it is, in the store's
/// names, and how much of it the store holds.
public struct MigrationLoss: Sendable, Equatable, CustomStringConvertible {
    /// What is dropped.
    public enum Kind: String, Sendable, Equatable {
        /// The objects of a removed entity.
        case objects
        /// The values of a removed (or newly transient) attribute: ``MigrationLoss/count`` is the
        /// number of objects that hold one.
        case values
        /// The links of a removed relationship: ``MigrationLoss/count`` is the number of links.
        case links
    }

    /// What is dropped.
    public let kind: Kind
    /// The entity, in the store's model.
    public let entity: String
    /// The attribute or relationship (nil for an entity's objects).
    public let property: String?
    /// How many objects, values or links the store holds.
    public let count: Int
    /// Whether the migration was allowed to drop it (a plan's stage names it).
    public let isAllowed: Bool

    /// The drop that allows it, as a plan's stage would name it.
    public var drop: MigrationDrop { property.map { .property($0, of: entity) } ?? .entity(entity) }

    /// `Book.legacyCode: the values of 1200 objects`.
    public var description: String {
        let what = switch kind {
        case .objects: "\(count) object\(count == 1 ? "" : "s")"
        case .values: "the values of \(count) object\(count == 1 ? "" : "s")"
        case .links: "\(count) link\(count == 1 ? "" : "s")"
        }
        return "\(drop): \(what)"
    }
}

/// One piece of data a migration removes, planned from the two models before anything is read:
/// what it is, which drops allow it, and how its amount is counted in the store's trees.
struct PlannedLoss {
    let kind: MigrationLoss.Kind
    /// The store's names.
    let entity: String
    let property: String?
    /// Any of these allows it.
    let allowedBy: Set<MigrationDrop>
    let counting: Counting

    /// Where the amount is read.
    enum Counting {
        /// The rows of `entity` (its own, not its sub-entities') in the rows tree `tree`.
        case rows(tree: String)
        /// The rows of `entities` in the rows tree `tree` whose column `column` holds a value.
        case values(tree: String, entities: Set<String>, column: String)
        /// The entries of a tree (a join tree: one per link).
        case entries(tree: String)

        var tree: String {
            switch self {
            case .rows(let tree), .values(let tree, _, _), .entries(let tree): tree
            }
        }
    }

    /// The loss with its amount.
    func counted(_ count: Int, allowed drops: Set<MigrationDrop>) -> MigrationLoss {
        MigrationLoss(kind: kind, entity: entity, property: property, count: count, isAllowed: !allowedBy.isDisjoint(with: drops))
    }

    /// What migrating from `old` to `new` removes, given which new entity continues each old one
    /// (`newEntityName`, old → new) and which old property each new entity's properties
    /// continue (`oldPropertyName`, new entity → new property → old property).
    ///
    /// A stored property of an old entity is lost for that entity's rows when its new entity has
    /// no stored property continuing it (removed, made transient, or the entity itself removed,
    /// which is a loss of objects). A to-many's links are lost with its inverse to-one (counted
    /// there, in the rows holding the foreign key) or, for a many-to-many, with its join tree
    /// (counted once per pair).
    static func plan(old: ManagedObjectModel, new: ManagedObjectModel, newEntityName: [String: String],
                     oldPropertyName: [String: [String: String]]) -> [PlannedLoss] {
        /// Whether the rows of old entity `entity` keep old property `name` in the new model.
        func keeps(_ entity: EntityDescription, _ name: String) -> Bool {
            guard let newName = newEntityName[entity.name], let newEntity = new.entity(named: newName),
                  let continuing = oldPropertyName[newName]?.first(where: { $0.value == name })?.key else { return false }
            if let attribute = newEntity.attributesByName[continuing] { return !attribute.isTransient }
            return newEntity.relationshipsByName[continuing] != nil
        }
        var losses: [PlannedLoss] = []
        var joinsCounted = Set<String>()
        for entity in old.entities {
            let tree = NativeStore.rowsTree(entity)
            guard newEntityName[entity.name] != nil else {
                losses.append(PlannedLoss(kind: .objects, entity: entity.name, property: nil, allowedBy: [.entity(entity.name)],
                                          counting: .rows(tree: tree)))
                continue
            }
            // Rows of the entity and its kept sub-entities that lose a property it declares.
            let losing = { (name: String) in Set(entity.hierarchy.filter { newEntityName[$0.name] != nil && !keeps($0, name) }.map(\.name)) }
            for attribute in entity.ownAttributes where !attribute.isTransient {
                let entities = losing(attribute.name)
                guard !entities.isEmpty else { continue }
                losses.append(PlannedLoss(kind: .values, entity: entity.name, property: attribute.name,
                                          allowedBy: [.property(attribute.name, of: entity.name)],
                                          counting: .values(tree: tree, entities: entities, column: attribute.name)))
            }
            for relationship in entity.ownRelationships {
                let entities = losing(relationship.name)
                guard !entities.isEmpty, let inverse = relationship.inverseRelationship, let destination = inverse.entity else { continue }
                let allowedBy: Set<MigrationDrop> = [.property(relationship.name, of: entity.name), .property(inverse.name, of: destination.name),
                                                     .entity(destination.name)]
                if !relationship.isToMany {
                    losses.append(PlannedLoss(kind: .links, entity: entity.name, property: relationship.name, allowedBy: allowedBy,
                                              counting: .values(tree: tree, entities: entities, column: relationship.name)))
                } else if inverse.isToMany {
                    // A many-to-many: each side's tree (a join tree, or an ordered side's order
                    // tree) holds every link once: counted once, under the side whose tree sorts
                    // first.
                    func linkTree(_ side: RelationshipDescription) -> String {
                        NativeStore.isJoined(side) ? NativeStore.joinTree(side) : NativeStore.orderTree(side)
                    }
                    let (side, tree) = linkTree(relationship) <= linkTree(inverse) ? (relationship, linkTree(relationship)) : (inverse, linkTree(inverse))
                    guard joinsCounted.insert(tree).inserted, let sideEntity = side.entity else { continue }
                    losses.append(PlannedLoss(kind: .links, entity: sideEntity.name, property: side.name, allowedBy: allowedBy,
                                              counting: .entries(tree: tree)))
                }
                // A to-many whose inverse is a to-one keeps its links in the inverse's rows: lost
                // (and counted) with the inverse, or with the inverse's entity.
            }
        }
        return losses
    }
}

extension StoreMigration {
    /// Counts what the migration removes, in `transaction` (before anything is written): each
    /// rows tree involved is read once, each join tree's entries counted.
    ///
    /// - Throws: ``ArborError/Code/store`` for a malformed row.
    func countLosses(in transaction: WriteTransaction, store: NativeStore) throws -> [MigrationLoss] {
        var counts = Array(repeating: 0, count: losses.count)
        let byTree = Dictionary(grouping: losses.indices, by: { losses[$0].counting.tree })
        for (name, indices) in byTree.sorted(by: { $0.key < $1.key }) {
            guard let tree = try transaction.tree(named: name) else { continue }
            if case .entries = losses[indices[0]].counting {
                try tree.forEach { _, _ in
                    for index in indices { counts[index] += 1 }
                    return true
                }
                continue
            }
            guard let oldRoot = old.entities.first(where: { $0.superentity == nil && NativeStore.rowsTree($0) == name }) else { continue }
            try tree.forEach { key, value in
                let primaryKey = try NativeStore.lastKey(of: key, in: name)
                let entity = try oldEntity(of: value, key: primaryKey, oldRoot: oldRoot)
                for index in indices {
                    switch losses[index].counting {
                    case .rows:
                        if losses[index].entity == entity.name { counts[index] += 1 }
                    case .values(_, let entities, let column):
                        if entities.contains(entity.name), try holdsValue(value, column: column, of: entity) { counts[index] += 1 }
                    case .entries:
                        break
                    }
                }
                return true
            }
        }
        return losses.indices.compactMap { index in
            counts[index] > 0 ? losses[index].counted(counts[index], allowed: allowedDrops) : nil
        }.sorted { $0.drop.description < $1.drop.description }
    }

    /// Whether the old row `bytes` of `entity` holds a value (a default included) in `column`.
    private func holdsValue(_ bytes: UnsafeRawBufferPointer, column: String, of entity: EntityDescription) throws -> Bool {
        guard let format = oldFormats[entity.name] else { return false }
        switch format.places[column] {
        case .attribute(let component, let type)?:
            return try format.attributeValue(atComponent: component, kind: type.kind, in: bytes) != nil
        case .toOne(let component, _, _)?:
            switch try format.component(component, of: bytes) {
            case nil, .null?: return false
            default: return true
            }
        case nil:
            return false
        }
    }
}
