import Foundation

/// A top-level term of a fetch's predicate that compares a key path through to-one relationships
/// with constants — `department.name == "Sales"`, `manager.department.name BEGINSWITH "S"` — and
/// that a store can run as a join (docs/relational-planning.md, "To-one joins"). The one place
/// that says which terms are joins: the fetch analysis splits predicates with it, and the store
/// plans with it.
struct JoinTerm {
    /// The term as written.
    let term: ObjectPredicate
    /// The relationships of the key path, from the fetched entity on (`department`, or
    /// `manager`, `department`): each to-one.
    let hops: [RelationshipDescription]
    /// The entity the last relationship leads to.
    let destination: EntityDescription
    /// The comparison with its key path cut to the last key, for the destination's rows
    /// (`name == "Sales"`).
    let tail: ObjectPredicate
    /// Whether the term is true of an object whose key path meets nil (the comparison's answer
    /// for a nil value): then rows with no destination, at any hop, match too.
    let matchesNil: Bool

    /// The join `term` is, for objects of `entity`; nil when it is not one: not a comparison
    /// without modifier of a key path with constants, a key path of fewer than two keys, a hop
    /// that is not a to-one relationship, a last key that is not a stored attribute or to-one
    /// relationship, or a comparison that cannot be evaluated with nil in the key path's place.
    init?(_ term: ObjectPredicate, entity: EntityDescription) {
        guard case .comparison(let comparison) = term, comparison.modifier == .direct else { return nil }
        let keys: [String], onLeft: Bool
        switch (comparison.left, comparison.right) {
        case (.keyPath(let path), let other) where Self.isConstant(other):
            keys = path
            onLeft = true
        case (let other, .keyPath(let path)) where Self.isConstant(other):
            keys = path
            onLeft = false
        default:
            return nil
        }
        guard keys.count >= 2, !keys.contains(where: { $0.hasPrefix("@") }) else { return nil }
        var hops: [RelationshipDescription] = []
        var current = entity
        for key in keys.dropLast() {
            guard let relationship = current.relationshipsByName[key], !relationship.isToMany,
                  let next = relationship.destinationEntity else { return nil }
            hops.append(relationship)
            current = next
        }
        let last = keys[keys.count - 1]
        if let attribute = current.attributesByName[last] {
            guard !attribute.isTransient else { return nil }
        } else {
            guard let relationship = current.relationshipsByName[last], !relationship.isToMany else { return nil }
        }
        var cut = comparison, nilled = comparison
        if onLeft {
            cut.left = .keyPath([last])
            nilled.left = .constant(.null)
        } else {
            cut.right = .keyPath([last])
            nilled.right = .constant(.null)
        }
        guard let matchesNil = try? PredicateEvaluator().evaluate(.comparison(nilled), on: .null) else { return nil }
        self.term = term
        self.hops = hops
        self.destination = current
        self.tail = .comparison(cut)
        self.matchesNil = matchesNil
    }

    /// Whether an expression is a constant, or a collection of constants (`IN {…}`, `BETWEEN`).
    static func isConstant(_ expression: ObjectExpression) -> Bool {
        switch expression {
        case .constant: true
        case .aggregate(let elements): elements.allSatisfy(isConstant)
        default: false
        }
    }

    /// The entities whose rows the join reads beyond the fetched entity's: each hop's
    /// destination, with its sub-entities.
    var reachedEntities: [EntityDescription] {
        hops.compactMap(\.destinationEntity).flatMap(\.selfAndDescendants)
    }
}
