import Foundation

/// What deleting an object does to the objects a relationship points at (Core Data's delete
/// rules).
public enum DeleteRule: String, Sendable, Codable, CaseIterable {
    /// The destinations stay; their inverse relationship stops pointing at the deleted object.
    case nullify
    /// The destinations are deleted too.
    case cascade
    /// The delete fails validation while the relationship points at anything.
    case deny
    /// Nothing is done: the destinations keep pointing at the deleted object (the application
    /// must fix them up).
    case noAction
}

/// An attribute of an entity: a typed value stored with each object (or, when transient, kept in
/// memory only).
public final class AttributeDescription: Sendable, CustomStringConvertible {
    /// The attribute's name (its key).
    public let name: String
    /// The type of its values.
    public let type: AttributeType
    /// Whether it may be nil (the default for attributes, as in Core Data).
    public let isOptional: Bool
    /// Whether it lives in memory only (never stored).
    public let isTransient: Bool
    /// The value new objects start with, if any.
    public let defaultValue: AttributeValue?
    /// The attribute's name in the previous model version, when it was renamed (migration
    /// matches it to the store's attribute of that name).
    public let renamingIdentifier: String?
    /// The smallest value accepted (numbers and dates).
    public let minimum: AttributeValue?
    /// The largest value accepted (numbers and dates).
    public let maximum: AttributeValue?
    /// The shortest string (characters) or data (bytes) accepted.
    public let minimumLength: Int?
    /// The longest string (characters) or data (bytes) accepted.
    public let maximumLength: Int?
    /// A regular expression every string value must match whole.
    public let pattern: String?
    /// `pattern`, compiled once with the model. (`Regex` is not declared `Sendable` because of
    /// its output type; it is an immutable value whose lazily built program is published
    /// atomically, so sharing it between threads is safe.)
    nonisolated(unsafe) let regex: Regex<AnyRegexOutput>?

    init(_ spec: Attribute, entity: String, problems: inout [String]) {
        name = spec.name
        type = spec.type
        isOptional = spec.isOptional
        isTransient = spec.isTransient
        renamingIdentifier = spec.renamingIdentifier
        func convert(_ value: (any Sendable)?, _ what: String) -> AttributeValue? {
            guard let value else { return nil }
            do {
                return try spec.type.storedValue(from: value, entity: entity, key: spec.name)
            } catch let error as ArborError {
                problems.append("\(entity).\(spec.name): the \(what) is not valid: \(error.message)")
            } catch {
                problems.append("\(entity).\(spec.name): the \(what) is not valid: \(error)")
            }
            return nil
        }
        defaultValue = convert(spec.defaultValue, "default value")
        // A transformable default must read back as its type (a Codable that does not round-trip
        // would give new objects a value no typed property can read).
        if case .transformable(let encoded)? = defaultValue, let transformer = spec.type.transformer {
            do {
                _ = try transformer.decode(encoded)
            } catch {
                problems.append("\(entity).\(spec.name): the default value does not decode back as \(transformer.typeName): \(error)")
            }
        }
        minimum = convert(spec.minimum, "minimum")
        maximum = convert(spec.maximum, "maximum")
        minimumLength = spec.minimumLength
        maximumLength = spec.maximumLength
        pattern = spec.pattern
        regex = spec.pattern.flatMap { try? Regex($0) }
        let label = "\(entity).\(spec.name)"
        if (spec.minimum != nil || spec.maximum != nil) && !spec.type.isOrdered {
            problems.append("\(label): a \(spec.type) attribute has no minimum or maximum")
        }
        if let minimum, let maximum, let order = minimum.compare(maximum), order > 0 {
            problems.append("\(label): the minimum \(minimum) is above the maximum \(maximum)")
        }
        if (spec.minimumLength != nil || spec.maximumLength != nil) && !spec.type.hasLength {
            problems.append("\(label): a \(spec.type) attribute has no length")
        }
        let shortest = spec.minimumLength ?? 0, longest = spec.maximumLength ?? .max
        if shortest < 0 || longest < shortest {
            problems.append("\(label): the length range \(shortest)...\(spec.maximumLength.map(String.init) ?? "") is empty or negative")
        }
        if let pattern = spec.pattern {
            if spec.type.kind != .string {
                problems.append("\(label): only string attributes have a pattern")
            } else if regex == nil {
                problems.append("\(label): the pattern \"\(pattern)\" is not a regular expression")
            }
        }
    }

    public var description: String {
        "\(name): \(type)\(isOptional ? "?" : "")\(isTransient ? " (transient)" : "")"
    }
}

/// A relationship of an entity: a reference to one object (to-one) or to several (to-many, as a
/// set or an ordered set) of the destination entity, kept consistent with its inverse.
///
/// The references to other descriptions (``entity``, ``destinationEntity``,
/// ``inverseRelationship``) are set when the model is made and never change after.
public final class RelationshipDescription: @unchecked Sendable, CustomStringConvertible {
    /// The relationship's name (its key).
    public let name: String
    /// The name of the entity it points at.
    public let destinationEntityName: String
    /// The name of the inverse relationship (on the destination entity).
    public let inverseName: String
    /// Whether it holds several objects.
    public let isToMany: Bool
    /// Whether a to-many relationship keeps its objects in order.
    public let isOrdered: Bool
    /// Whether a to-one relationship may be nil (the default), or a to-many one empty.
    public let isOptional: Bool
    /// The fewest objects a to-many relationship may hold (0: no minimum).
    public let minimumCount: Int
    /// The most objects a to-many relationship may hold (0: no maximum).
    public let maximumCount: Int
    /// What deleting the source object does to the destinations.
    public let deleteRule: DeleteRule
    /// The relationship's name in the previous model version, when it was renamed (migration
    /// matches it to the store's relationship of that name).
    public let renamingIdentifier: String?

    /// Whether it and its inverse are both to-many.
    public var isManyToMany: Bool { isToMany && inverseRelationship?.isToMany == true }

    /// Whether this is an unordered many-to-many relationship: its links belong to neither
    /// end's row, so stores keep them apart (a native store in a join tree) and history records
    /// them as links made and broken.
    var isUnorderedManyToMany: Bool { isManyToMany && !isOrdered }

    /// The entity that declares it.
    public var entity: EntityDescription? { references?.entity.object }
    /// The entity it points at.
    public var destinationEntity: EntityDescription? { references?.destination.object }
    /// The inverse relationship.
    public var inverseRelationship: RelationshipDescription? { references?.inverse.object }
    /// The three above, weakly (without side tables: see ``LeanWeakReference``), set once while
    /// the model is made.
    private var references: (entity: LeanWeakReference<EntityDescription>, destination: LeanWeakReference<EntityDescription>,
                             inverse: LeanWeakReference<RelationshipDescription>)?

    init(_ spec: Relationship) {
        name = spec.name
        destinationEntityName = spec.destination
        inverseName = spec.inverse
        isToMany = spec.isToMany
        isOrdered = spec.isOrdered
        isOptional = spec.isOptional
        minimumCount = spec.minimumCount
        maximumCount = spec.maximumCount
        deleteRule = spec.deleteRule
        renamingIdentifier = spec.renamingIdentifier
    }

    /// Sets the references, while the model is being made.
    func resolve(entity: EntityDescription, destination: EntityDescription, inverse: RelationshipDescription) {
        references = (LeanWeakReference(entity), LeanWeakReference(destination), LeanWeakReference(inverse))
    }

    public var description: String {
        "\(name) → \(isToMany ? (isOrdered ? "ordered " : "") + "to-many " : "")\(destinationEntityName) (inverse \(inverseName), \(deleteRule))"
    }
}

/// An index a store keeps on an entity's attributes, for fetches.
public struct IndexDescription: Sendable, Hashable, CustomStringConvertible {
    /// The indexed properties, in order (attributes, or to-one relationships).
    public let keys: [String]
    /// Whether string keys are indexed case- and diacritic-insensitively (for `[cd]` comparisons).
    public let caseAndDiacriticInsensitive: Bool

    public var description: String {
        "index(\(keys.joined(separator: ", "))\(caseAndDiacriticInsensitive ? ", [cd]" : ""))"
    }
}
