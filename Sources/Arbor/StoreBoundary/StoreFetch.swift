import Foundation

/// What a context asks a store for when it fetches: the rows of an entity that match a predicate,
/// in an order, within a window. The context has already checked it against the model.
///
/// The predicate only names what rows hold — persistent attributes and to-one relationships of
/// the entity, `SELF`, constants — and the sort descriptors only persistent attributes; the
/// context evaluates everything else in memory.
public struct StoreFetch: Sendable, Hashable {
    /// The entity whose rows are wanted.
    public var entityName: String
    /// Whether rows of its sub-entities count.
    public var includesSubentities = true
    /// The condition on rows (nil: every row).
    public var predicate: ObjectPredicate? {
        didSet { carried = CarriedSplit() }
    }
    /// The order of the rows (empty: any order).
    public var sortDescriptors: [ObjectSortDescriptor] = []
    /// Matching rows to skip, after sorting.
    public var offset = 0
    /// The most rows returned (0: no limit).
    public var limit = 0
    /// The properties the caller reads of each row (nil: all of them). A store may leave the
    /// others out of the rows it returns (nil), decoding less; it still evaluates the predicate
    /// on whole rows. Never set for rows that become objects: a store grouping rows sets it.
    public var decodedProperties: Set<String>?
    /// The predicate's terms as the context's logical plan split them (nil for a fetch made by hand,
    /// or once the predicate is set again): a store plans from ``split(for:)``.
    private var carried = CarriedSplit()

    /// A fetch of every row of `entityName`.
    public init(entityName: String) {
        self.entityName = entityName
    }

    /// The stores' part of `plan`: its row-evaluable predicate and joins, its order when a store
    /// can sort, and — with `window` — its offset and limit.
    init(_ plan: LogicalPlan, window: Bool) {
        self.init(entityName: plan.entity.name)
        includesSubentities = plan.includesSubentities
        predicate = plan.split.storePredicate
        carried = CarriedSplit(split: plan.split.storePart)
        if plan.storeSorts { sortDescriptors = plan.sortDescriptors }
        if window { (offset, limit) = (plan.offset, plan.limit) }
    }
}

extension StoreFetch {
    /// The predicate's terms as a store plans them: as the context's logical plan split them, or —
    /// for a fetch made by hand — split now.
    func split(for entity: EntityDescription) -> PredicateSplit {
        carried.split ?? PredicateSplit(predicate, entity: entity).forStore
    }

    /// The split a fetch carries, if any. It is derived from the predicate and the entity, which
    /// a fetch's equality and hash already compare: it takes no part in them, carried or not.
    private struct CarriedSplit: Sendable, Hashable {
        var split: PredicateSplit?
        static func == (_: CarriedSplit, _: CarriedSplit) -> Bool { true }
        func hash(into hasher: inout Hasher) {}
    }
}

/// How a store runs a ``StoreFetch``: what it reads, what it checks, how it orders. Printed by
/// ``FetchRequest/explain(in:)`` and `arbor query --explain`.
public struct QueryPlan: Sendable, Hashable, CustomStringConvertible {
    /// How rows are found.
    public enum Access: Sendable, Hashable {
        /// Every row of the entity's tree is read.
        case scan(tree: String)
        /// The entries of an index in the given ranges are read, then their rows.
        case index(tree: String, key: String, ranges: [String])
    }

    /// The entity fetched.
    public var entityName: String
    /// How rows are found.
    public var access: Access
    /// The condition every row read is checked against (nil: none).
    public var filter: ObjectPredicate?
    /// Whether a scan checks rows on their encoded bytes, without decoding values (comparisons
    /// of integer and string attributes with constants; docs/predicates.md).
    public var filterOnEncodedValues = false
    /// Whether the index read gives the requested order (no sort needed).
    public var orderedByIndex: Bool
    /// The sort done after reading (empty: none).
    public var sort: [ObjectSortDescriptor]
    /// Whether reading stops once `offset + limit` rows matched.
    public var stopsEarly: Bool
    /// What the context does in memory after the store's part (filled in by the context).
    public var inMemory: [String] = []
    /// The joins run before the rows are read (docs/relational-planning.md): each term, how its
    /// destination's rows are found, and each step back to the fetched rows.
    public var joins: [String] = []

    public var description: String {
        var lines: [String] = []
        switch access {
        case .scan(let tree): lines.append("\(entityName): scan \(tree)")
        case .index(let tree, let key, let ranges):
            lines.append("\(entityName): index \(tree) on \(key), \(ranges.count == 1 ? "range" : "ranges") \(ranges.joined(separator: ", "))")
        }
        lines += joins.map { "  \($0)" }
        lines.append(filter.map { "  check each row: \($0.predicateFormat)\(filterOnEncodedValues ? " (on its encoded values)" : "")" }
            ?? "  check each row: nothing")
        if orderedByIndex { lines.append("  order: by the index (no sort)") }
        if !sort.isEmpty { lines.append("  sort: \(sort.map(\.description).joined(separator: ", "))") }
        if stopsEarly { lines.append("  stops early at the limit") }
        lines += inMemory.map { "  then in memory: \($0)" }
        return lines.joined(separator: "\n")
    }
}

extension StoreFetch {
    /// Checks the window: a negative offset or limit is `invalidFetchRequest`.
    func checkWindow() throws {
        guard offset >= 0, limit >= 0 else {
            throw ArborError(.invalidFetchRequest, "the fetch of \(entityName) has offset \(offset) and limit \(limit): neither can be negative (a limit of 0 means none)",
                             entity: entityName)
        }
    }
}

extension StoreFetch {
    /// The store's fetch for the whole of `request`, when rows alone answer it: every top-level
    /// term of its predicate reads only what a row holds and every sort key is a persistent
    /// attribute (the split every context fetch makes, docs/predicates.md, "Execution in the
    /// store"). Nil when part of the request needs objects — a term through a relationship, a
    /// to-many key, a transient attribute, a sort by a key path — which a context does in memory.
    ///
    /// For readers that print stored rows without a context (`arbor query`): a context's fetch of
    /// the same request also merges its unsaved changes, which this does not see.
    ///
    /// - Throws: ``ArborError/Code/invalidFetchRequest`` as a context's fetch does: an entity or
    ///   key the model lacks, a constant of the wrong type, a sort key that cannot be sorted by.
    package init?<Result>(whole request: FetchRequest<Result>, model: ManagedObjectModel) throws {
        let plan = try LogicalPlan(request, model: model)
        guard plan.rowsAnswerWholeRequest else { return nil }
        self.init(plan, window: true)
    }
}
