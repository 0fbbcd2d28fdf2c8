import Foundation

/// A fetch predicate's top-level terms, each put where it runs: on a store's rows, as a join a
/// store runs through relationships (``JoinTerm``), or on the context's objects, with why
/// (``InMemoryReason``). The one classification of terms (docs/relational-planning.md, "Where the
/// work is split"): a context's logical plan makes it, the ``StoreFetch`` it sends carries it, and a
/// store plans from it rather than classifying the terms again.
struct PredicateSplit {
    /// The terms a store evaluates on rows.
    private(set) var rowTerms: [ObjectPredicate] = []
    /// The terms a store runs as joins.
    private(set) var joins: [JoinTerm] = []
    /// The terms the context evaluates on objects, each with why.
    private(set) var onObjects: [(term: ObjectPredicate, reason: String)] = []

    /// The split of `predicate`'s top-level terms, for a fetch of `entity`.
    init(_ predicate: ObjectPredicate?, entity: EntityDescription) {
        for term in Self.conjuncts(of: predicate) {
            if LogicalPlan.isRowEvaluable(term, entity) {
                rowTerms.append(term)
            } else if let join = JoinTerm(term, entity: entity) {
                joins.append(join)
            } else {
                onObjects.append((term, InMemoryReason.of(term, entity: entity)))
            }
        }
    }

    /// A store's split: the terms it runs as joins, and every other term for its row filter.
    private init(rowTerms: [ObjectPredicate], joins: [JoinTerm]) {
        self.rowTerms = rowTerms
        self.joins = joins
    }

    /// The part a store is sent: the row terms and the joins, nothing left for objects.
    var storePart: PredicateSplit { PredicateSplit(rowTerms: rowTerms, joins: joins) }

    /// The split as a store plans from it: a term for objects in a fetch made by hand is checked
    /// on rows with the row terms (a context never sends one).
    var forStore: PredicateSplit {
        onObjects.isEmpty ? self : PredicateSplit(rowTerms: rowTerms + onObjects.map(\.term), joins: joins)
    }

    /// The predicate of the store's part: its row terms and joins, as one conjunction (nil: none).
    var storePredicate: ObjectPredicate? { Self.conjunction(rowTerms + joins.map(\.term)) }

    /// The predicate of the terms for objects (nil: none).
    var residual: ObjectPredicate? { Self.conjunction(onObjects.map(\.term)) }

    /// Moves the joins to the terms for objects, each because of `reason`.
    mutating func keepJoinsOnObjects(because reason: String) {
        onObjects += joins.map { ($0.term, reason) }
        joins = []
    }

    /// The top-level terms of `predicate` (none for nil).
    static func conjuncts(of predicate: ObjectPredicate?) -> [ObjectPredicate] {
        switch predicate {
        case .and(let terms)?: terms
        case let single?: [single]
        case nil: []
        }
    }

    /// `terms` as one predicate: nil for none, the term itself for one.
    static func conjunction(_ terms: [ObjectPredicate]) -> ObjectPredicate? {
        terms.isEmpty ? nil : (terms.count == 1 ? terms[0] : .and(terms))
    }
}
