import Foundation

/// A top-level term of a fetch's predicate that compares a key path through relationships with
/// constants — `department.name == "Sales"`, `manager.department.name BEGINSWITH "S"`,
/// `ANY timesheets.hours > 8`, `NONE projects.client.country == "FR"` — and that a store can run
/// as a join (docs/relational-planning.md). The one place that says which terms are joins: the
/// logical plan splits predicates with it, and the store plans with it.
struct JoinTerm {
    /// How the term's elements decide it.
    enum Quantifier {
        /// A key path through to-one relationships: its one value decides.
        case direct
        /// `ANY`: some element matches.
        case any
        /// `NONE` (and `ALL`, as none of the negated comparison): no element matches.
        case none
        /// `relationship.@count` or `SUBQUERY(relationship, $x, …).@count` compared with a
        /// constant: the number of destinations (matching the subquery's predicate, the tail)
        /// decides, by ``JoinTerm/countComparison``.
        case count
    }

    /// The term as written.
    let term: ObjectPredicate
    let quantifier: Quantifier
    /// The relationships of the key path, from the fetched entity on (`department`, or
    /// `manager`, `department`): to-one for a direct term; any for a quantified one (a
    /// many-to-many only when neither side is ordered).
    let hops: [RelationshipDescription]
    /// The entity the last relationship leads to.
    let destination: EntityDescription
    /// The comparison with its key path cut to the last key, for the destination's rows
    /// (`name == "Sales"`); for `ALL`, its negation. For `ANY`, `NONE` and `ALL` through to-one
    /// relationships only, also `last != nil`: the path's one value is the term's element, and
    /// nil is none (the evaluator's "on nil, `ANY` is false, `ALL` and `NONE` are true").
    let tail: ObjectPredicate
    /// Whether the tail is true of a nil value: then a path meeting nil matches — for a direct
    /// term, at any hop; for a quantified one, after its first to-many hop (a nil before it
    /// leaves no elements at all).
    let matchesNil: Bool
    /// For a count: the comparison, its counted side `SELF`: evaluated on the count (or the
    /// aggregate).
    private(set) var countComparison: ComparisonPredicate?
    /// For a count: the to-many hop counted (the prefix before it is to-one relationships:
    /// `project.issues.@count` counts `issues`, hop 1), and what is made of its destinations.
    private(set) var countedHop = 0
    private(set) var aggregation = Aggregation.count
    /// For a count with a to-one prefix: whether an object whose prefix meets nil matches (the
    /// comparison with nil for a key path, whose value is then nil; with the aggregate of no
    /// destinations for a SUBQUERY, whose collection is then empty).
    private(set) var prefixNilMatches = false
    /// The entities the joins of a SUBQUERY's body reach (its to-one key paths).
    private(set) var nestedReached: [EntityDescription] = []

    /// What a count term makes of an owner's destinations (those matching the subquery's
    /// predicate).
    enum Aggregation: Equatable {
        /// How many there are.
        case count
        /// The collection operator (`@sum`, `@avg`, `@min`, `@max`) of their `attribute`, under
        /// a predicate's rules (``CollectionOperator``).
        case apply(CollectionOperator, attribute: String)
    }

    /// Whether `count` destinations make a count term true.
    func countMatches(_ count: Int) throws -> Bool {
        try matches(.int(Int64(count)))
    }

    /// Whether an owner whose destinations give `value` (their count or aggregate) makes a count
    /// term true.
    func matches(_ value: Operand) throws -> Bool {
        guard let comparison = countComparison else { return false }
        return try PredicateEvaluator().evaluate(.comparison(comparison), on: value)
    }

    /// What an owner with no destinations gives: 0 for a count, the aggregate of nothing else.
    func emptyValue() throws -> Operand {
        switch aggregation {
        case .count: .int(0)
        case .apply(let operation, _): try PredicateEvaluator().apply(operation, to: [])
        }
    }

    /// The aggregate of the values `values` (nils left out) of one owner's destinations.
    func aggregate(_ values: [Operand]) throws -> Operand {
        switch aggregation {
        case .count: .int(Int64(values.count))
        case .apply(let operation, _): try PredicateEvaluator().apply(operation, to: values.filter { !$0.isNull })
        }
    }

    /// A count term (see ``Quantifier/count``): `path.@count <op> constant`, `path.@sum.key <op>
    /// constant` (and `@avg`, `@min`, `@max`), or `SUBQUERY(path, $x, predicate).@count <op>
    /// constant` — `path` to-one relationships of `entity` (none or more) then a to-many one,
    /// and the subquery's predicate one the destination's fetch answers in the store (its
    /// `$x.key` read as `key`): row terms and joins of the destination, in a conjunction.
    init?(counting term: ObjectPredicate, entity: EntityDescription) {
        guard case .comparison(var comparison) = term, comparison.modifier == .direct, Self.isConstant(comparison.right) else { return nil }
        var path: [String]
        var filter: ObjectPredicate = .truePredicate
        var aggregation = Aggregation.count
        var subquery = false
        switch comparison.left {
        case .keyPath(let keys) where keys.count >= 2 && keys.last == "@count":
            path = Array(keys.dropLast())
        case .keyPath(let keys) where keys.count >= 3 && ["@sum", "@avg", "@min", "@max"].contains(keys[keys.count - 2]):
            guard let operation = CollectionOperator(rawValue: keys[keys.count - 2]) else { return nil }
            path = Array(keys.dropLast(2))
            aggregation = .apply(operation, attribute: keys[keys.count - 1])
        case .keyPathOn(.subquery(.keyPath(let keys), let variable, let predicate), let after) where !keys.isEmpty && after == ["@count"]:
            path = keys
            subquery = true
            guard let bound = Self.binding(variable, in: predicate) else { return nil }
            filter = bound
        default:
            return nil
        }
        guard !path.contains(where: { $0.hasPrefix("@") }), let (hops, destination) = Self.countedPath(path, from: entity),
              let nested = Self.storeAnswers(filter, on: destination) else { return nil }
        if case .apply(let operation, let key) = aggregation {
            guard let attribute = destination.attributesByName[key], Self.aggregates(operation, attribute) else { return nil }
        }
        comparison.left = .evaluatedObject
        self.term = term
        quantifier = .count
        self.hops = hops
        self.destination = destination
        tail = filter
        matchesNil = false
        countComparison = comparison
        countedHop = hops.count - 1
        self.aggregation = aggregation
        nestedReached = nested.flatMap(\.reachedEntities)
        // A nil on the prefix: a key path's value is nil; a SUBQUERY's collection empty.
        guard let nilMatches = try? (subquery ? matches(emptyValue()) : matches(.null)) else { return nil }
        prefixNilMatches = nilMatches
    }

    /// The relationships of a counted path — to-one ones, then a to-many one that is not an
    /// ordered many-to-many — and the destination (nil for any other path).
    static func countedPath(_ path: [String], from entity: EntityDescription) -> ([RelationshipDescription], EntityDescription)? {
        let walk = ModelKeyPath(path, from: entity)
        guard walk.throughToOne, let counted = walk.relationship, counted.isToMany, let destination = counted.destinationEntity else { return nil }
        if counted.isManyToMany, counted.isOrdered || counted.inverseRelationship?.isOrdered == true { return nil }
        return (walk.hops + [counted], destination)
    }

    /// The joins of `predicate` — a conjunction of row terms and join terms of `entity` — when
    /// a fetch of `entity` answers it in the store; nil when it does not (an OR or NOT around a
    /// key path, a to-many path, a nested SUBQUERY…).
    static func storeAnswers(_ predicate: ObjectPredicate, on entity: EntityDescription) -> [JoinTerm]? {
        let conjuncts: [ObjectPredicate] = if case .and(let terms) = predicate { terms } else { [predicate] }
        var joins: [JoinTerm] = []
        for conjunct in conjuncts where !LogicalPlan.isRowEvaluable(conjunct, entity) {
            guard let join = JoinTerm(conjunct, entity: entity) else { return nil }
            joins.append(join)
        }
        return joins
    }

    /// Whether the store aggregates `attribute` with `operation` as a predicate does: sums and
    /// averages of numbers; minimums and maximums of integers, decimals, strings and dates
    /// (floating-point values stay with objects: NaN orders apart).
    static func aggregates(_ operation: CollectionOperator, _ attribute: AttributeDescription) -> Bool {
        guard !attribute.isTransient else { return false }
        switch (operation, attribute.type.kind) {
        case (.sum, .integer16), (.sum, .integer32), (.sum, .integer64), (.sum, .decimal), (.sum, .double), (.sum, .float),
             (.avg, .integer16), (.avg, .integer32), (.avg, .integer64), (.avg, .decimal), (.avg, .double), (.avg, .float):
            return true
        case (.min, .integer16), (.min, .integer32), (.min, .integer64), (.min, .decimal), (.min, .string), (.min, .date),
             (.max, .integer16), (.max, .integer32), (.max, .integer64), (.max, .decimal), (.max, .string), (.max, .date):
            return true
        default:
            return false
        }
    }

    /// `predicate` with the subquery's variable read as the element (`$x.name` as `name`, `$x` as
    /// `SELF`); nil when it uses another variable.
    static func binding(_ variable: String, in predicate: ObjectPredicate) -> ObjectPredicate? {
        func bind(_ expression: ObjectExpression) -> ObjectExpression? {
            switch expression {
            case .variable(let name): return name == variable ? .evaluatedObject : nil
            case .keyPathOn(.variable(let name), let keys): return name == variable ? .keyPath(keys) : nil
            case .keyPathOn(let base, let keys): return bind(base).map { .keyPathOn($0, keys) }
            case .aggregate(let elements):
                let bound = elements.compactMap(bind)
                return bound.count == elements.count ? .aggregate(bound) : nil
            case .arithmetic(let op, let a, let b):
                guard let a = bind(a), let b = bind(b) else { return nil }
                return .arithmetic(op, a, b)
            case .subquery: return nil
            case .constant, .evaluatedObject, .keyPath: return expression
            }
        }
        func walk(_ predicate: ObjectPredicate) -> ObjectPredicate? {
            switch predicate {
            case .constant: return predicate
            case .not(let inner): return walk(inner).map { .not($0) }
            case .and(let terms):
                let bound = terms.compactMap(walk)
                return bound.count == terms.count ? .and(bound) : nil
            case .or(let terms):
                let bound = terms.compactMap(walk)
                return bound.count == terms.count ? .or(bound) : nil
            case .comparison(var comparison):
                guard let left = bind(comparison.left), let right = bind(comparison.right) else { return nil }
                comparison.left = left
                comparison.right = right
                return .comparison(comparison)
            }
        }
        return walk(predicate)
    }

    /// The join `term` is, for objects of `entity`; nil when it is not one: not a comparison of a
    /// key path (on the left, for a quantified one) with constants, a key path of fewer than two
    /// keys or with a collection operator, a direct term through a to-many relationship, an
    /// ordered many-to-many hop, a last key that is not a stored attribute or to-one
    /// relationship, or a comparison that cannot be evaluated with nil in the key path's place.
    init?(_ term: ObjectPredicate, entity: EntityDescription) {
        // Long: one decision read top to bottom: each guard is one of the reasons above for a term
        // not to be a join, and the fields are set only once every one has passed.
        if let counting = JoinTerm(counting: term, entity: entity) {
            self = counting
            return
        }
        guard case .comparison(let comparison) = term else { return nil }
        let keys: [String], onLeft: Bool
        switch (comparison.left, comparison.right) {
        case (.keyPath(let path), let other) where Self.isConstant(other):
            keys = path
            onLeft = true
        case (let other, .keyPath(let path)) where Self.isConstant(other) && comparison.modifier == .direct:
            keys = path
            onLeft = false
        default:
            return nil
        }
        guard keys.count >= 2, !keys.contains(where: { $0.hasPrefix("@") }) else { return nil }
        let walk = ModelKeyPath(keys, from: entity)
        for relationship in walk.hops where relationship.isToMany {
            guard comparison.modifier != .direct else { return nil }
            if relationship.isManyToMany, relationship.isOrdered || relationship.inverseRelationship?.isOrdered == true { return nil }
        }
        guard walk.endsAtStoredValue else { return nil }
        let hops = walk.hops, current = walk.lastEntity
        let last = keys[keys.count - 1]
        var cut = comparison, nilled = comparison
        cut.modifier = .direct
        nilled.modifier = .direct
        if onLeft {
            cut.left = .keyPath([last])
            nilled.left = .constant(.null)
        } else {
            cut.right = .keyPath([last])
            nilled.right = .constant(.null)
        }
        let quantifier: Quantifier
        var tail: ObjectPredicate = .comparison(cut), nilTail: ObjectPredicate = .comparison(nilled)
        switch comparison.modifier {
        case .direct: quantifier = .direct
        case .any: quantifier = .any
        case .none: quantifier = .none
        case .all:
            quantifier = .none
            tail = .not(tail)
            nilTail = .not(nilTail)
        }
        if quantifier != .direct, !hops.contains(where: \.isToMany) {
            // No to-many hop: the value at the path's end is the only element, and a nil value
            // none at all (`ANY department.name == nil` is false, `NONE department.name == nil`
            // true, of a department without a name).
            tail = .and([tail, .comparison(ComparisonPredicate(.keyPath([last]), .notEqualTo, .constant(.null)))])
        }
        guard let matchesNil = try? PredicateEvaluator().evaluate(nilTail, on: .null) else { return nil }
        self.term = term
        self.quantifier = quantifier
        self.hops = hops
        self.destination = current
        self.tail = tail
        self.matchesNil = matchesNil
    }

    /// Whether a nil met at hop `position` (0: the first relationship's) is an element the tail
    /// decides (true), or leaves the term without elements (a quantified term's hop before its
    /// first to-many).
    func nilIsElement(at position: Int) -> Bool {
        quantifier == .direct || hops[..<position].contains(where: \.isToMany)
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
    /// destination, with its sub-entities, and those a SUBQUERY's body reaches.
    var reachedEntities: [EntityDescription] {
        hops.compactMap(\.destinationEntity).flatMap(\.selfAndDescendants) + nestedReached
    }
}
