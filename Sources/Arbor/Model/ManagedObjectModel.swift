import Foundation

/// A model: the entities of an object graph, checked whole and immutable once made.
///
/// ```swift
/// let model = try ManagedObjectModel {
///     Entity("Department") {
///         Attribute("name", .string).required()
///         Relationship("employees", to: "Employee", inverse: "department").toMany().deleteRule(.cascade)
///     }
///     Entity("Employee") {
///         Attribute("name", .string).required()
///         Relationship("department", to: "Department", inverse: "employees")
///     }
/// }
/// ```
///
/// See docs/model.md for the attribute types, inheritance, constraints and version hashes.
public final class ManagedObjectModel: Sendable, CustomStringConvertible {
    /// The entities, by name order.
    public let entities: [EntityDescription]
    /// The entities by name.
    public let entitiesByName: [String: EntityDescription]
    /// The model's version hash: of its entities' hashes, in name order.
    public let versionHash: Data
    /// Named sets of entities (Core Data's configurations): a store opened with a configuration
    /// holds the objects of those entities only.
    public let configurations: [String: Set<String>]
    /// The most levels of parents an entity may have (a model read from a store's file is held
    /// to it too, so a damaged or hostile schema cannot make the model's checks run away).
    public static let maximumInheritanceDepth = 64

    /// Makes a model of the entities the closure declares, with optional configurations (name →
    /// entity names).
    ///
    /// - Throws: ``ArborError/Code/invalidModel`` listing every problem found.
    public convenience init(configurations: [String: Set<String>] = [:], @ModelBuilder _ entities: () -> [Entity]) throws {
        try self.init(entities: entities(), configurations: configurations)
    }

    /// Makes a model of `entities`, with optional configurations (name → entity names).
    ///
    /// The typed accessors (``Managed``, ``ManagedSet``, ``ManagedList``) of each entity's class
    /// are checked against the entity's properties (an instance of each class is made outside
    /// any context to read them).
    ///
    /// - Throws: ``ArborError/Code/invalidModel`` listing every problem found; for typed
    ///   accessors that do not fit, its ``ArborError/detailedErrors`` hold one
    ///   ``ArborError/Code/wrongValueType`` per accessor, naming the class, the Swift property,
    ///   the declared type and the property's type.
    public init(entities specs: [Entity], configurations: [String: Set<String>] = [:]) throws {
        // Long: the checks run in passes that build on each other (names, inheritance, flattening,
        // relationships, configurations) and gather every problem into one list that only the end
        // throws.
        var problems: [String] = []
        var byName: [String: EntityDescription] = [:]
        var entities: [EntityDescription] = []
        for spec in specs {
            guard !spec.name.isEmpty else {
                problems.append("an entity has no name")
                continue
            }
            guard byName[spec.name] == nil else {
                problems.append("the entity name \"\(spec.name)\" is used twice")
                continue
            }
            let entity = EntityDescription(spec, problems: &problems)
            byName[spec.name] = entity
            entities.append(entity)
        }
        // Inheritance: link parents, refuse unknown parents and cycles, then flatten parents first.
        for entity in entities {
            guard let parentName = entity.superentityName else { continue }
            guard let parent = byName[parentName] else {
                problems.append("\(entity.name): the parent entity \"\(parentName)\" does not exist")
                continue
            }
            var ancestor: String? = parentName
            var steps = 0
            while let current = ancestor, steps <= Self.maximumInheritanceDepth {
                if current == entity.name { break }
                ancestor = byName[current]?.superentityName
                steps += 1
            }
            if ancestor == entity.name {
                problems.append("\(entity.name): its parents lead back to itself")
                continue
            }
            if steps > Self.maximumInheritanceDepth {
                problems.append("\(entity.name): it has more than \(Self.maximumInheritanceDepth) levels of parents")
                continue
            }
            entity.link(parent: parent)
        }
        var flattened = Set<ObjectIdentifier>()
        func flatten(_ entity: EntityDescription) {
            guard flattened.insert(ObjectIdentifier(entity)).inserted else { return }
            if let parent = entity.superentity { flatten(parent) }
            entity.flatten(problems: &problems)
        }
        entities.forEach(flatten)
        // Relationships: destinations and inverses must exist and name each other.
        for entity in entities {
            for relationship in entity.ownRelationships {
                let label = "\(entity.name).\(relationship.name)"
                if relationship.isOrdered && !relationship.isToMany {
                    problems.append("\(label): only to-many relationships can be ordered")
                }
                if !relationship.isToMany && (relationship.minimumCount != 0 || relationship.maximumCount != 0) {
                    problems.append("\(label): only to-many relationships have counts")
                }
                if relationship.minimumCount < 0 || relationship.maximumCount < 0 {
                    problems.append("\(label): a count cannot be negative")
                } else if relationship.maximumCount != 0 && relationship.maximumCount < relationship.minimumCount {
                    problems.append("\(label): the maximum count is below the minimum")
                }
                guard let destination = byName[relationship.destinationEntityName] else {
                    problems.append("\(label): the destination entity \"\(relationship.destinationEntityName)\" does not exist")
                    continue
                }
                guard let inverse = destination.relationshipsByName[relationship.inverseName] else {
                    problems.append("\(label): the inverse \"\(relationship.inverseName)\" is not a relationship of \(destination.name)")
                    continue
                }
                guard inverse.inverseName == relationship.name, entity.isKind(of: byName[inverse.destinationEntityName] ?? destination) else {
                    problems.append("\(label): its inverse \(destination.name).\(inverse.name) does not name it back (it names \(inverse.destinationEntityName).\(inverse.inverseName))")
                    continue
                }
                relationship.resolve(entity: entity, destination: destination, inverse: inverse)
            }
        }
        for (name, members) in configurations.sorted(by: { $0.key < $1.key }) {
            for member in members.sorted() where byName[member] == nil {
                problems.append("the configuration \(name) names \"\(member)\", which is not an entity")
            }
        }
        guard problems.isEmpty else {
            throw ArborError(.invalidModel, "the model is not valid: " + problems.joined(separator: "; "))
        }
        self.configurations = configurations
        entities.sort { $0.name < $1.name }
        for entity in entities {
            entity.sortSubentities()
            entity.computeVersionHash()
        }
        self.entities = entities
        entitiesByName = byName
        versionHash = VersionHash.of(entities.map { "\($0.name) \($0.versionHashString)" }.joined(separator: "\n"))
        // The typed accessors of the entities' classes, against the finished entities.
        let declarationErrors = entities.flatMap(TypedAccess.declarationErrors)
        if !declarationErrors.isEmpty {
            throw ArborError(.invalidModel,
                             "the model is not valid: " + declarationErrors.map(\.message).joined(separator: "; "),
                             detailedErrors: declarationErrors)
        }
    }

    /// The entity named `name`.
    public func entity(named name: String) -> EntityDescription? { entitiesByName[name] }

    /// Whether a store with configuration `configuration` (nil: all entities) holds `entity`'s
    /// objects.
    public func configuration(_ configuration: String?, includes entity: EntityDescription) -> Bool {
        guard let configuration else { return true }
        return configurations[configuration]?.contains(entity.name) ?? false
    }

    /// The entity whose objects are instances of `objectClass` (the first, by name, when several
    /// share a class).
    public func entity(for objectClass: ManagedObject.Type) -> EntityDescription? {
        entities.first { $0.managedObjectClass == objectClass }
    }

    /// Each entity's version hash, by name: what a store records to recognise its model.
    public var entityVersionHashes: [String: Data] {
        Dictionary(uniqueKeysWithValues: entities.map { ($0.name, $0.versionHash) })
    }

    /// The model's version hash as 32 hexadecimal digits.
    public var versionHashString: String { VersionHash.hex(versionHash) }

    /// How a store's recorded entity hashes differ from this model's: entities only the model
    /// has, only the store has, and those whose hashes differ. All empty when they match.
    public func differences(fromStoreHashes stored: [String: Data]) -> (added: [String], removed: [String], changed: [String]) {
        let mine = entityVersionHashes
        let added = mine.keys.filter { stored[$0] == nil }.sorted()
        let removed = stored.keys.filter { mine[$0] == nil }.sorted()
        let changed = mine.keys.filter { stored[$0] != nil && stored[$0] != mine[$0] }.sorted()
        return (added, removed, changed)
    }

    /// Checks that a store's recorded entity hashes are this model's.
    ///
    /// - Throws: ``ArborError/Code/incompatibleModel`` naming the entities added, removed and
    ///   changed.
    public func checkCompatible(withStoreHashes stored: [String: Data], storeName: String) throws {
        try checkCompatible(withStoreHashes: stored, storeSchema: nil, storeName: storeName)
    }

    /// Checks that a store's recorded entity hashes are this model's; when they are not, the
    /// error names every difference from the store's model (`storeSchema`, when the store keeps
    /// it), entity by entity and property by property, each also one of its `detailedErrors`.
    ///
    /// `unless` says why the store is not migrated instead (the message's end).
    func checkCompatible(withStoreHashes stored: [String: Data], storeSchema: ModelSchema?, storeName: String,
                         unless why: String = "automatic migration is off") throws {
        let (added, removed, changed) = differences(fromStoreHashes: stored)
        guard !(added.isEmpty && removed.isEmpty && changed.isEmpty) else { return }
        let difference = storeSchema.map { ModelDifference(from: $0, to: ModelSchema(self)) }
        if let difference, !difference.isEmpty {
            let details = difference.changes.map { change in
                ArborError(.incompatibleModel, change.description, entity: change.entity, key: change.name)
            }
            let count = difference.changes.count
            throw ArborError(.incompatibleModel,
                             "\(storeName) was made with another model (\(count) difference\(count == 1 ? "" : "s"): "
                                + "\(difference.changes.map(\.description).joined(separator: "; "))); \(why)",
                             detailedErrors: details)
        }
        // A store without its schema (made before stores kept one), or a difference the schema
        // does not show: the entities whose hashes differ.
        var parts: [String] = []
        if !added.isEmpty { parts.append("entities not in the store: \(added.joined(separator: ", "))") }
        if !removed.isEmpty { parts.append("entities only in the store: \(removed.joined(separator: ", "))") }
        if !changed.isEmpty { parts.append("entities changed since the store was made: \(changed.joined(separator: ", "))") }
        throw ArborError(.incompatibleModel,
                         "\(storeName) was made with another model (\(parts.joined(separator: "; "))); \(why)")
    }

    public var description: String {
        entities.map { entity in
            var lines = ["\(entity.name)\(entity.isAbstract ? " (abstract)" : "")\(entity.superentityName.map { " : \($0)" } ?? "")"]
            lines += entity.attributes.map { "  \($0)" }
            lines += entity.relationships.map { "  \($0)" }
            return lines.joined(separator: "\n")
        }.joined(separator: "\n")
    }
}
