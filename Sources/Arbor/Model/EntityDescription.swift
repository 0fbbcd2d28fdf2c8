import Foundation

// Safety: `attributeInSlot` is the entity's own buffer, (re)allocated only while the model is built
// and freed in `deinit`, of unretained references to the attributes its `attributes` array holds;
// `layoutReference` is unretained because property layouts are never freed.

/// An entity of a model: a kind of managed object, with its attributes, relationships,
/// uniqueness constraints and indexes — its own and those it inherits.
///
/// Made by ``ManagedObjectModel`` and immutable once the model exists (the references to other
/// entities are set while the model is made).
public final class EntityDescription: @unchecked Sendable, CustomStringConvertible, Hashable {
    /// The entity's name.
    public let name: String
    /// Whether only its sub-entities have instances.
    public let isAbstract: Bool
    /// The parent entity's name, for a sub-entity.
    public let superentityName: String?
    /// The class of the entity's objects: ``ManagedObject`` or a typed subclass.
    public let managedObjectClass: ManagedObject.Type
    /// The entity's name in the previous model version, when it was renamed (migration matches
    /// it to the store's entity of that name).
    public let renamingIdentifier: String?
    /// The space of this entity's temporary object IDs (made once: inserting an object then
    /// costs no lookup for it).
    let temporaryIDSpace: ObjectIDSpace

    /// The parent entity.
    public var superentity: EntityDescription? { superentityReference?.object }
    /// ``superentity``, weakly (without a side table: see ``LeanWeakReference``).
    private var superentityReference: LeanWeakReference<EntityDescription>?
    /// The direct sub-entities, by name.
    public private(set) var subentities: [EntityDescription] = []

    /// The attributes declared by this entity itself.
    public let ownAttributes: [AttributeDescription]
    /// The relationships declared by this entity itself.
    public let ownRelationships: [RelationshipDescription]
    let ownUniqueness: [[String]]
    let ownIndexes: [IndexDescription]

    /// Every attribute, inherited ones first.
    public private(set) var attributes: [AttributeDescription] = []
    /// Every relationship, inherited ones first.
    public private(set) var relationships: [RelationshipDescription] = []
    /// Attributes by name.
    public private(set) var attributesByName: [String: AttributeDescription] = [:]
    /// Relationships by name.
    public private(set) var relationshipsByName: [String: RelationshipDescription] = [:]
    /// Uniqueness constraints, inherited ones first: each a set of property names whose values
    /// together must be unique among the entity's objects (its sub-entities' included).
    public private(set) var uniquenessConstraints: [[String]] = []
    /// Indexes, inherited ones first.
    public private(set) var indexes: [IndexDescription] = []
    /// The entity's version hash (see docs/model.md, "Version hashes and compatibility").
    public private(set) var versionHash = Data()
    /// The slots of its objects' property storage.
    private(set) var propertyLayout = PropertyLayout.named([]) {
        didSet {
            layoutReference = Unmanaged.passUnretained(propertyLayout)
            observationKeyPaths = propertyLayout.names.indices.map { \ManagedObject[observedSlot: $0] }
        }
    }
    /// The key path naming each slot of ``propertyLayout`` to Observation
    /// (``ManagedObject/observationAccess(_:)``).
    private(set) var observationKeyPaths: [KeyPath<ManagedObject, Int>] = []
    /// ``propertyLayout``, unretained (layouts are never freed): decoding a row and making a
    /// fault read it without counting a reference to it.
    private(set) var layoutReference = Unmanaged.passUnretained(PropertyLayout.named([]))
    /// Whether any attribute (inherited ones included) is transient.
    private(set) var hasTransientAttributes = false
    /// The slot of each of ``attributes`` in ``propertyLayout``.
    private(set) var attributeSlots: [Int] = []
    /// The attributes with a validation rule (required, bounds, lengths, a pattern), and their
    /// slots: the only ones a save checks.
    private(set) var validatedAttributes: [(attribute: AttributeDescription, slot: Int)] = []
    /// The relationships with a validation rule (required, or a to-many count), and their slots.
    private(set) var validatedRelationships: [(relationship: RelationshipDescription, slot: Int)] = []
    /// The slot of each of ``relationships`` in ``propertyLayout``.
    private(set) var relationshipSlots: [Int] = []
    /// A new object's values: attribute defaults (or none), no to-one destination, empty to-many
    /// relationships. New objects share it until they are edited.
    private(set) var initialValues = PropertyStorage(layout: PropertyLayout.named([]))
    /// The attribute in each slot of ``propertyLayout`` (nil for relationships), unretained
    /// (``attributes`` holds them), in a buffer the entity frees: every `value(forKey:)` and
    /// `setValue(_:forKey:)` reads it, and an array of references was retained and released
    /// around each read. Use an attribute through `_withUnsafeGuaranteedRef`.
    private(set) var attributeInSlot = UnsafeMutableBufferPointer<Unmanaged<AttributeDescription>?>(start: nil, count: 0)
    /// Whether any relationship (inherited ones included) is to-many.
    private(set) var hasToManyRelationships = false
    /// The names of the to-many relationships (inherited ones included): a filled fault's
    /// unloaded relationships, shared by every such fault (one set, no allocation or hashing per
    /// object fetched).
    private(set) var toManyRelationshipNames: Set<String> = []

    init(_ spec: Entity, problems: inout [String]) {
        name = spec.name
        temporaryIDSpace = ObjectIDSpace.interned(spec.name, ManagedObjectID.temporaryNamespace)
        isAbstract = spec.isAbstract
        superentityName = spec.parent
        managedObjectClass = spec.objectClass
        renamingIdentifier = spec.renamingIdentifier
        var attributes: [AttributeDescription] = []
        var relationships: [RelationshipDescription] = []
        var uniqueness: [[String]] = []
        var indexes: [IndexDescription] = []
        for member in spec.members {
            switch member {
            case let attribute as Attribute:
                attributes.append(AttributeDescription(attribute, entity: spec.name, problems: &problems))
                if attribute.isIndexed { indexes.append(IndexDescription(keys: [attribute.name], caseAndDiacriticInsensitive: false)) }
            case let relationship as Relationship:
                relationships.append(RelationshipDescription(relationship))
            case let unique as Unique:
                uniqueness.append(unique.keys)
            case let index as Indexed:
                indexes.append(IndexDescription(keys: index.keys, caseAndDiacriticInsensitive: index.caseInsensitive))
            default:
                problems.append("\(spec.name): \(type(of: member)) is not an entity member Arbor knows")
            }
        }
        ownAttributes = attributes
        ownRelationships = relationships
        ownUniqueness = uniqueness
        ownIndexes = indexes
    }

    deinit {
        attributeInSlot.deallocate()
    }

    /// The root of the entity's hierarchy (itself when it has no parent): its objects are stored
    /// in the root's tree.
    public var rootEntity: EntityDescription {
        var entity = self
        while let parent = entity.superentity { entity = parent }
        return entity
    }

    /// Whether this entity is `other` or one of its descendants.
    public func isKind(of other: EntityDescription) -> Bool {
        var entity: EntityDescription? = self
        while let current = entity {
            if current === other { return true }
            entity = current.superentity
        }
        return false
    }

    /// This entity and all its descendants, parents before children.
    public var selfAndDescendants: [EntityDescription] {
        [self] + subentities.flatMap(\.selfAndDescendants)
    }

    /// The version hash as 32 hexadecimal digits.
    public var versionHashString: String { VersionHash.hex(versionHash) }

    public var description: String { name }

    public static func == (a: EntityDescription, b: EntityDescription) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    // MARK: Made by the model

    func sortSubentities() { subentities.sort { $0.name < $1.name } }

    func link(parent: EntityDescription) {
        superentityReference = LeanWeakReference(parent)
        parent.subentities.append(self)
    }

    /// Collects the inherited and own members (parents first) and checks names; called parents
    /// before children.
    func flatten(problems: inout [String]) {
        attributes = (superentity?.attributes ?? []) + ownAttributes
        relationships = (superentity?.relationships ?? []) + ownRelationships
        uniquenessConstraints = (superentity?.uniquenessConstraints ?? []) + ownUniqueness
        indexes = (superentity?.indexes ?? []) + ownIndexes
        var seen = Set<String>()
        for name in attributes.map(\.name) + relationships.map(\.name) where !seen.insert(name).inserted {
            problems.append("\(self.name): the property name \"\(name)\" is used twice (inherited properties included)")
        }
        propertyLayout = PropertyLayout.named(Array(Set(attributes.map(\.name) + relationships.map(\.name))).sorted())
        attributesByName = Dictionary(attributes.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        hasTransientAttributes = attributes.contains(where: \.isTransient)
        attributeSlots = attributes.map { propertyLayout.index[$0.name]! }
        relationshipSlots = relationships.map { propertyLayout.index[$0.name]! }
        validatedAttributes = zip(attributes, attributeSlots).filter { Validation.hasRules($0.0) }.map { (attribute: $0.0, slot: $0.1) }
        validatedRelationships = zip(relationships, relationshipSlots).filter { Validation.hasRules($0.0) }.map { (relationship: $0.0, slot: $0.1) }
        hasToManyRelationships = relationships.contains(where: \.isToMany)
        toManyRelationshipNames = Set(relationships.filter(\.isToMany).map(\.name))
        attributeInSlot.deallocate()
        attributeInSlot = .allocate(capacity: propertyLayout.names.count)
        attributeInSlot.initialize(repeating: nil)
        for (attribute, slot) in zip(attributes, attributeSlots) { attributeInSlot[slot] = Unmanaged.passUnretained(attribute) }
        initialValues = PropertyStorage(layout: propertyLayout)
        for (attribute, slot) in zip(attributes, attributeSlots) {
            initialValues[slot: slot] = attribute.defaultValue.map(PropertyValue.attribute) ?? PropertyValue.none
        }
        for (relationship, slot) in zip(relationships, relationshipSlots) {
            initialValues[slot: slot] = relationship.isToMany ? .objects([]) : PropertyValue.none
        }
        relationshipsByName = Dictionary(relationships.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        // Uniqueness constraints and indexes name stored attributes or to-one relationships.
        let keyLists = ownUniqueness.map { ("uniqueness constraint", $0) } + ownIndexes.map { ("index", $0.keys) }
        for (what, keys) in keyLists {
            if keys.isEmpty { problems.append("\(self.name): a \(what) names no property") }
            for key in keys where attributesByName[key] == nil && relationshipsByName[key].map({ !$0.isToMany }) != true {
                problems.append("\(self.name): the \(what) on \(keys.joined(separator: ", ")) names \"\(key)\", which is not an attribute or to-one relationship")
            }
            for key in keys where attributesByName[key]?.isTransient == true {
                problems.append("\(self.name): the \(what) names the transient attribute \"\(key)\"")
            }
        }
    }

    /// The canonical text the version hash is computed from.
    var canonicalDescription: String {
        var lines = ["entity \(name)", "abstract \(isAbstract)", "parent \(superentityName ?? "-")"]
        for attribute in attributes.sorted(by: { $0.name < $1.name }) {
            lines.append("attribute \(attribute.name) \(attribute.type) optional \(attribute.isOptional) transient \(attribute.isTransient)")
        }
        for relationship in relationships.sorted(by: { $0.name < $1.name }) {
            lines.append("relationship \(relationship.name) to \(relationship.destinationEntityName) inverse \(relationship.inverseName) many \(relationship.isToMany) ordered \(relationship.isOrdered) optional \(relationship.isOptional)")
        }
        for constraint in uniquenessConstraints { lines.append("unique \(constraint.joined(separator: ","))") }
        for index in indexes { lines.append("index \(index.keys.joined(separator: ",")) folded \(index.caseAndDiacriticInsensitive)") }
        return lines.joined(separator: "\n")
    }

    func computeVersionHash() {
        versionHash = VersionHash.of(canonicalDescription)
    }
}

/// The 16-byte version hashes of entities and models: XXH64 of a canonical text with two seeds.
/// Not cryptographic: it detects changes, it does not resist forgery.
enum VersionHash {
    static func of(_ text: String) -> Data {
        let bytes = Array(text.utf8)
        var data = Data()
        for seed: UInt64 in [0x4172_626F_7231, 0x4D6F_6465_6C32] {
            withUnsafeBytes(of: XXH64.hash(bytes, seed: seed).bigEndian) { data.append(contentsOf: $0) }
        }
        return data
    }

    /// A hash as hexadecimal digits.
    static func hex(_ hash: Data) -> String { hash.map { String(format: "%02x", $0) }.joined() }
}
