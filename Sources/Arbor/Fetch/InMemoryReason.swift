/// Why a term of a predicate is judged on objects rather than in the store, in words a user
/// acts on: what `explain` prints after each such term, what a request that requires store
/// evaluation (``FetchRequest/requiresStoreEvaluation``) and a batch request refuse with. The
/// shapes are docs/predicates.md's "What runs on objects"; the rules that decide them are
/// ``LogicalPlan/isRowEvaluable(_:_:)`` and ``JoinTerm``.
enum InMemoryReason {
    /// Why `term`, a top-level term of a fetch of `entity` that is neither a row term nor a join
    /// term, is judged on objects.
    static func of(_ term: ObjectPredicate, entity: EntityDescription) -> String {
        switch term {
        case .and:
            return "a conjunction inside it (split it into top-level terms)"
        case .or, .not:
            return "an OR or NOT around a key path through a relationship: the store splits top-level AND terms only"
        case .constant:
            return "a constant"
        case .comparison(let comparison):
            return of(comparison, entity: entity)
        }
    }

    private static func of(_ comparison: ComparisonPredicate, entity: EntityDescription) -> String {
        let constants = (JoinTerm.isConstant(comparison.left), JoinTerm.isConstant(comparison.right))
        if !constants.0 && !constants.1 {
            return "it compares a key path with another key path or expression, not with a constant"
        }
        let side = constants.0 ? comparison.right : comparison.left
        switch side {
        case .keyPath(let keys):
            return of(keys, comparison: comparison, entity: entity)
        case .keyPathOn(.subquery(let collection, _, _), let after):
            guard after == ["@count"] else { return "a SUBQUERY used other than by its @count" }
            if case .keyPath(let keys) = collection, JoinTerm.countedPath(keys, from: entity) == nil {
                return "the SUBQUERY's collection is not to-one relationships then one to-many relationship (or is an ordered many-to-many)"
            }
            return "the SUBQUERY's body is not a conjunction of its element's own attributes and key paths through to-one relationships compared with constants"
        case .variable, .keyPathOn(.variable, _):
            return "a variable outside a SUBQUERY (substitute it first)"
        case .arithmetic:
            return "arithmetic on a key path through a relationship"
        default:
            return "this kind of expression"
        }
    }

    private static func of(_ keys: [String], comparison: ComparisonPredicate, entity: EntityDescription) -> String {
        let path = ModelKeyPath(keys, from: entity)
        let relationships = path.hops + (path.relationship.map { [$0] } ?? [])
        if let ordered = relationships.first(where: { $0.isManyToMany && ($0.isOrdered || $0.inverseRelationship?.isOrdered == true) }) {
            return "an ordered many-to-many relationship (\(ordered.entity?.name ?? entity.name).\(ordered.name))"
        }
        switch path.end {
        case .collectionOperator(let key, let offset):
            guard let operation = CollectionOperator(rawValue: key) else { return "an unknown collection operator \(key)" }
            if operation == .distinctUnionOfObjects { return "@distinctUnionOfObjects" }
            if JoinTerm.countedPath(Array(keys[..<offset]), from: entity) == nil {
                return "\(key) of a collection that is not to-one relationships then one to-many relationship (two to-many hops, or an ordered many-to-many)"
            }
            if operation != .count, let attribute = keys.last.flatMap({ path.lastEntity.attributesByName[$0] }), !JoinTerm.aggregates(operation, attribute) {
                return "\(key) of a \(attribute.type.kind) attribute (the store sums and averages numbers, and takes minimums and maximums of integers, decimals, strings and dates)"
            }
            return "\(key) compared other than with a constant"
        case .relationship(let relationship) where relationship.isToMany:
            return "the key path ends at a to-many relationship (compare its members through ANY, or its @count)"
        case .attribute(let attribute) where attribute.isTransient:
            return "the transient attribute \(path.lastEntity.name).\(attribute.name) (it is not stored)"
        default:
            break
        }
        if !path.throughToOne && comparison.modifier == .direct {
            return "a key path through a to-many relationship without ANY, ALL or NONE"
        }
        return "this comparison"
    }
}
