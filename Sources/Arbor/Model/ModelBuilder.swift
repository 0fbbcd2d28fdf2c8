import Foundation

/// Something declared inside an ``Entity``: an ``Attribute``, a ``Relationship``, a ``Unique``
/// constraint or an ``Indexed`` index.
public protocol EntityMember: Sendable {}

/// Declares an attribute inside an ``Entity``. Modifiers return modified copies.
///
/// ```swift
/// Attribute("salary", .decimal).required().defaultValue(0).minimum(0)
/// ```
public struct Attribute: EntityMember {
    /// The attribute's name.
    public var name: String
    /// Its type.
    public var type: AttributeType
    var isOptional = true
    var isTransient = false
    var defaultValue: (any Sendable)?
    var minimum: (any Sendable)?
    var maximum: (any Sendable)?
    var minimumLength: Int?
    var maximumLength: Int?
    var pattern: String?
    var isIndexed = false
    var renamingIdentifier: String?

    /// An optional, stored attribute of `type`.
    public init(_ name: String, _ type: AttributeType) {
        self.name = name
        self.type = type
    }

    private func with(_ change: (inout Attribute) -> Void) -> Attribute {
        var copy = self
        change(&copy)
        return copy
    }

    /// Makes the attribute required (a save fails while it is nil).
    public func required() -> Attribute { with { $0.isOptional = false } }
    /// Makes the attribute optional (`true`, the default) or required.
    public func optional(_ optional: Bool) -> Attribute { with { $0.isOptional = optional } }
    /// Keeps the attribute in memory only: the store never sees it.
    public func transient() -> Attribute { with { $0.isTransient = true } }
    /// The value new objects start with (checked against the type when the model is made).
    public func defaultValue(_ value: any Sendable) -> Attribute { with { $0.defaultValue = value } }
    /// The smallest value accepted (numbers and dates).
    public func minimum(_ value: any Sendable) -> Attribute { with { $0.minimum = value } }
    /// The largest value accepted (numbers and dates).
    public func maximum(_ value: any Sendable) -> Attribute { with { $0.maximum = value } }
    /// The accepted length: characters of a string, bytes of binary data.
    public func length(_ range: ClosedRange<Int>) -> Attribute {
        with {
            $0.minimumLength = range.lowerBound
            $0.maximumLength = range.upperBound
        }
    }
    /// The shortest accepted length.
    public func length(_ range: PartialRangeFrom<Int>) -> Attribute { with { $0.minimumLength = range.lowerBound } }
    /// The longest accepted length.
    public func length(_ range: PartialRangeThrough<Int>) -> Attribute { with { $0.maximumLength = range.upperBound } }
    /// A regular expression every value must match whole (strings).
    public func pattern(_ regularExpression: String) -> Attribute { with { $0.pattern = regularExpression } }
    /// Asks the store to index the attribute (the same as `Indexed(name)`).
    public func indexed() -> Attribute { with { $0.isIndexed = true } }
    /// The attribute's name in the previous model version, when it was renamed: a store at that
    /// version keeps its values under the new name when it migrates (docs/migration.md).
    public func renamingIdentifier(_ previousName: String) -> Attribute { with { $0.renamingIdentifier = previousName } }
}

/// Declares a relationship inside an ``Entity``: to-one unless made ``toMany(ordered:)``.
///
/// ```swift
/// Relationship("employees", to: "Employee", inverse: "department").toMany().deleteRule(.cascade)
/// ```
public struct Relationship: EntityMember {
    /// The relationship's name.
    public var name: String
    /// The destination entity's name.
    public var destination: String
    /// The inverse relationship's name (on the destination).
    public var inverse: String
    var isToMany = false
    var isOrdered = false
    var isOptional = true
    var minimumCount = 0
    var maximumCount = 0
    var deleteRule = DeleteRule.nullify
    var renamingIdentifier: String?

    /// An optional to-one relationship to `destination`, whose inverse is `inverse`.
    public init(_ name: String, to destination: String, inverse: String) {
        self.name = name
        self.destination = destination
        self.inverse = inverse
    }

    private func with(_ change: (inout Relationship) -> Void) -> Relationship {
        var copy = self
        change(&copy)
        return copy
    }

    /// Makes it to-many: a set, or with `ordered`, an ordered set.
    public func toMany(ordered: Bool = false) -> Relationship {
        with {
            $0.isToMany = true
            $0.isOrdered = ordered
        }
    }
    /// Makes a to-one relationship required (or a to-many one non-empty).
    public func required() -> Relationship { with { $0.isOptional = false } }
    /// Bounds how many objects a to-many relationship holds.
    public func count(_ range: ClosedRange<Int>) -> Relationship {
        with {
            $0.minimumCount = range.lowerBound
            $0.maximumCount = range.upperBound
        }
    }
    /// The least number of objects a to-many relationship holds.
    public func count(_ range: PartialRangeFrom<Int>) -> Relationship { with { $0.minimumCount = range.lowerBound } }
    /// What deleting the source object does to the destinations (`.nullify` by default).
    public func deleteRule(_ rule: DeleteRule) -> Relationship { with { $0.deleteRule = rule } }
    /// The relationship's name in the previous model version, when it was renamed: a store at
    /// that version keeps its links under the new name when it migrates (docs/migration.md).
    public func renamingIdentifier(_ previousName: String) -> Relationship { with { $0.renamingIdentifier = previousName } }
}

/// Declares a uniqueness constraint inside an ``Entity``: no two objects of the entity (and its
/// sub-entities) may have the same values for all of `keys` together.
public struct Unique: EntityMember {
    /// The constrained properties.
    public var keys: [String]

    /// A constraint on `keys` together.
    public init(_ keys: String...) { self.keys = keys }

    /// A constraint on `keys` together.
    public init(keys: [String]) { self.keys = keys }
}

/// Declares an index inside an ``Entity``, on attributes (or to-one relationships) in order.
public struct Indexed: EntityMember {
    /// The indexed properties, in order.
    public var keys: [String]
    /// Whether strings are indexed case- and diacritic-insensitively.
    public var caseInsensitive: Bool

    /// An index on `keys`; with `caseInsensitive`, folded for `[cd]` comparisons.
    public init(_ keys: String..., caseInsensitive: Bool = false) {
        self.init(keys: keys, caseInsensitive: caseInsensitive)
    }

    /// An index on `keys`; with `caseInsensitive`, folded for `[cd]` comparisons.
    public init(keys: [String], caseInsensitive: Bool = false) {
        self.keys = keys
        self.caseInsensitive = caseInsensitive
    }
}

/// Collects the members of an ``Entity``.
@resultBuilder
public enum EntityMemberBuilder {
    // The result-builder steps: each member, blocks, `if`, `if`/`else` and `for` of members.
    public static func buildExpression(_ member: any EntityMember) -> [any EntityMember] { [member] }
    public static func buildBlock(_ parts: [any EntityMember]...) -> [any EntityMember] { parts.flatMap { $0 } }
    public static func buildOptional(_ part: [any EntityMember]?) -> [any EntityMember] { part ?? [] }
    public static func buildEither(first part: [any EntityMember]) -> [any EntityMember] { part }
    public static func buildEither(second part: [any EntityMember]) -> [any EntityMember] { part }
    public static func buildArray(_ parts: [[any EntityMember]]) -> [any EntityMember] { parts.flatMap { $0 } }
}

/// Declares an entity of a ``ManagedObjectModel``.
///
/// ```swift
/// Entity("Employee", parent: "Person") {
///     Attribute("salary", .decimal).minimum(0)
///     Relationship("department", to: "Department", inverse: "employees")
/// }
/// ```
public struct Entity: Sendable {
    /// The entity's name.
    public var name: String
    /// Whether it is abstract (only its sub-entities have instances).
    public var isAbstract: Bool
    /// The parent entity's name, if it is a sub-entity.
    public var parent: String?
    /// Its members.
    public var members: [any EntityMember]
    /// The class of its objects (``ManagedObject`` or a typed subclass).
    public var objectClass: ManagedObject.Type
    /// The entity's name in the previous model version, when it was renamed (see
    /// ``renamingIdentifier(_:)``).
    public var renamingIdentifier: String?

    /// An entity with the given members, whose objects are instances of `objectClass`.
    public init(_ name: String, abstract: Bool = false, parent: String? = nil, class objectClass: ManagedObject.Type = ManagedObject.self,
                members: [any EntityMember]) {
        self.name = name
        self.isAbstract = abstract
        self.parent = parent
        self.members = members
        self.objectClass = objectClass
    }

    /// An entity with the members the closure declares, whose objects are instances of
    /// `objectClass`.
    public init(_ name: String, abstract: Bool = false, parent: String? = nil, class objectClass: ManagedObject.Type = ManagedObject.self,
                @EntityMemberBuilder _ members: () -> [any EntityMember]) {
        self.init(name, abstract: abstract, parent: parent, class: objectClass, members: members())
    }

    /// The entity's name in the previous model version, when it was renamed: a store at that
    /// version keeps its objects (and their object IDs' primary keys) under the new name when
    /// it migrates (docs/migration.md).
    public func renamingIdentifier(_ previousName: String) -> Entity {
        var copy = self
        copy.renamingIdentifier = previousName
        return copy
    }
}

/// Collects the entities of a ``ManagedObjectModel``.
@resultBuilder
public enum ModelBuilder {
    // The result-builder steps: each entity, blocks, `if`, `if`/`else` and `for` of entities.
    public static func buildExpression(_ entity: Entity) -> [Entity] { [entity] }
    public static func buildBlock(_ parts: [Entity]...) -> [Entity] { parts.flatMap { $0 } }
    public static func buildOptional(_ part: [Entity]?) -> [Entity] { part ?? [] }
    public static func buildEither(first part: [Entity]) -> [Entity] { part }
    public static func buildEither(second part: [Entity]) -> [Entity] { part }
    public static func buildArray(_ parts: [[Entity]]) -> [Entity] { parts.flatMap { $0 } }
}
