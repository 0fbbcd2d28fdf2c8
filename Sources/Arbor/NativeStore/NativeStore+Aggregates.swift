import ArborStore
import Foundation

// Safety: A `GroupingPass` is made by one `groups(_:)` call and used only inside its read
// transaction, on the calling thread, so its unchecked fields are never accessed from two places at
// once.

/// Reads key paths through to-one relationships on a store's rows, inside one read transaction:
/// each destination's row is read once (docs/relational-planning.md). The one place that follows a
/// key path from row to row: sorts and aggregates in the store use it.
struct RowPathReader {
    let store: NativeStore
    let transaction: ReadTransaction
    let evaluator = PredicateEvaluator()
    /// The row being read, as the evaluator reads it.
    let decoded = DecodedRow()
    private var rows: [ManagedObjectID: StoreRow?] = [:]
    private var trees: [String: Tree] = [:]

    init(store: NativeStore, transaction: ReadTransaction) {
        self.store = store
        self.transaction = transaction
    }

    /// The row of `id` (nil when it is gone), read once.
    mutating func row(of id: ManagedObjectID) throws -> StoreRow? {
        if let known = rows[id] { return known }
        let entity = try store.entity(id.entityName)
        let name = NativeStore.rowsTree(entity)
        var found: StoreRow?
        if let tree = try trees[name] ?? transaction.tree(named: name) {
            trees[name] = tree
            found = try store.readRow(id, in: tree)
        }
        rows[id] = found
        return found
    }

    /// The value of `keys` (a key path through to-one relationships) on `row`: nil where the path
    /// meets nil, as on objects.
    mutating func value(of keys: ArraySlice<String>, on row: StoreRow, id: ManagedObjectID?) throws -> Operand {
        guard keys.count > 1 else { return try evaluator.value(of: keys, on: .row(decoded.set(row, id: id))) }
        var current = row
        for key in keys.dropLast() {
            guard case .object(let destination)? = current.values[key], let next = try self.row(of: destination) else { return .null }
            current = next
        }
        return try evaluator.value(of: keys.suffix(1), on: .row(decoded.set(current, id: nil)))
    }

    /// Whether every key path of `paths` can be read on rows of `entity`: attributes, or key paths
    /// through to-one relationships to a stored attribute or a to-one relationship.
    static func reads(_ paths: [[String]], from entity: EntityDescription) -> Bool {
        paths.allSatisfy { ModelKeyPath($0, from: entity).readsRows }
    }
}

/// One aggregate of a group, computed a row at a time with the evaluator's own steps (so that it
/// equals the collection operator over the group's values).
struct Accumulator {
    let function: PropertyToFetch.Function
    private(set) var count = 0
    private var total: Operand = .int(0)
    private var best: Operand?

    init(_ function: PropertyToFetch.Function) { self.function = function }

    /// Adds one row's value (nil values count for nothing).
    mutating func add(_ value: Operand, evaluator: PredicateEvaluator) throws {
        guard !value.isNull else { return }
        count += 1
        switch function {
        case .count: break
        case .sum, .average: total = try CollectionOperator.adding(value, to: total, function.collectionOperator)
        case .min, .max:
            if let best, try !CollectionOperator.replaces(value, best, function.collectionOperator) { return }
            best = value
        }
    }

    /// The aggregate of the values added.
    func result(evaluator: PredicateEvaluator) throws -> Operand {
        switch function {
        case .count: .int(Int64(count))
        case .sum, .average: try CollectionOperator.finish(function.collectionOperator, total, count: count)
        case .min, .max: best ?? .null
        }
    }
}

extension NativeStore {
    /// Whether this store can run `properties` grouped by `groupBy` for rows of `entity` on its
    /// rows: every key path readable on rows, every expression evaluable on a row.
    static func canGroup(_ properties: [PropertyToFetch], by groupBy: [String], of entity: EntityDescription) -> Bool {
        var paths = groupBy.map { KeyPathEvaluator.components(of: $0) }
        for property in properties {
            switch property.kind {
            case .key(let path), .aggregate(_, let path):
                paths.append(KeyPathEvaluator.components(of: path))
            case .expression(let expression):
                guard LogicalPlan.isRowEvaluable(expression, entity) else { return false }
            }
        }
        return RowPathReader.reads(paths, from: entity)
    }

    /// The groups of a ``StoreGrouping``, in the order their first rows were read (primary-key
    /// order for a scan): each group's `.key` and `.expression` properties from its first row,
    /// its aggregates over all its rows. Without group-by keys, one group of every row (even of
    /// none).
    func groups(_ grouping: StoreGrouping) throws -> [StoreGroup] {
        // Long: one pass over the rows in one read transaction: the per-row closure and the helpers
        // it calls share the pass's state and the slots and group-by paths worked out before it.
        var rows = grouping.rows
        rows.sortDescriptors = []
        (rows.offset, rows.limit) = (0, 0)
        var prepared = try prepare(rows)
        let (request, entity) = (rows, prepared.entity)
        let groupPaths = grouping.groupBy.map { KeyPathEvaluator.components(of: $0)[...] }
        let properties = grouping.properties
        // Each property's key path (empty for an expression).
        let paths = properties.map { property -> ArraySlice<String> in
            switch property.kind {
            case .key(let path), .aggregate(_, let path): KeyPathEvaluator.components(of: path)[...]
            case .expression: []
            }
        }
        // The rows' properties the pass reads (the first key of each path), unless an
        // expression may read any: the scan decodes no other column.
        if !properties.contains(where: { if case .expression = $0.kind { true } else { false } }) {
            prepared = prepared.decoding(Set((groupPaths + paths).compactMap(\.first)))
        }
        return try Self.storeError("group \(request.entityName)") {
            try database.read { transaction in
                // The pass's state, in an object the per-row closures share (captured local
                // variables paid a dynamic exclusivity check at every access).
                let pass = GroupingPass(reader: RowPathReader(store: self, transaction: transaction))
                let evaluator = pass.reader.evaluator
                func newGroup() {
                    pass.firsts.append([:])
                    pass.started.append(false)
                    pass.accumulators.append(properties.map { if case .aggregate(let function, _) = $0.kind { Accumulator(function) } else { nil } })
                }
                if groupPaths.isEmpty {
                    _ = pass.table.group(of: [])
                    newGroup()
                }
                // When every group-by key is a key path through a to-one relationship, rows with
                // the same first destinations are in the same group: their group is remembered by
                // those destinations' keys, so the path is followed and the group's values
                // hashed once per destination, not once per row (unless a value is NaN:
                // `rememberable`; the maps are the pass's `groupOfDestinations`, and with one such
                // key, the common case, `groupOfDestination`).
                let throughDestinations = !groupPaths.isEmpty && groupPaths.allSatisfy { $0.count > 1 }
                // The slots the pass reads on rows of the fetched entity (a sub-entity's rows are
                // laid out otherwise, and read by name): the group-by keys' first keys, and the
                // aggregated attributes of the entity itself — read straight from the row.
                let layout = entity.propertyLayout
                let groupSlots = groupPaths.map { layout.index[$0[$0.startIndex]] }
                let aggregateSlots = zip(properties, paths).map { property, path -> Int? in
                    guard case .aggregate = property.kind, path.count == 1, entity.attributesByName[path[path.startIndex]] != nil else { return nil }
                    return layout.index[path[path.startIndex]]
                }
                let aggregated = properties.indices.filter { if case .aggregate = properties[$0].kind { true } else { false } }
                /// The key of the destination of group-by key `index` on `row`.
                @inline(__always) func destination(_ index: Int, on row: borrowing StoreRow, own: Bool) -> Int64? {
                    let value = if own, let slot = groupSlots[index] { row.values[slot: slot] } else { row.values[groupPaths[index][groupPaths[index].startIndex]] }
                    if case .object(let destination)? = value { return destination.key }
                    return nil
                }
                /// The group of `row`'s group-by values (made when new), and those values.
                func groupOfValues(_ row: borrowing StoreRow, id: ManagedObjectID) throws -> (group: Int, key: [Operand]) {
                    let key = try groupPaths.map { try pass.reader.value(of: $0, on: row, id: id) }
                    let (found, isNew) = pass.table.group(of: key)
                    if isNew { newGroup() }
                    return (found, key)
                }
                /// Whether a group's destinations may stand for its `key`: a key holding NaN equals
                /// no other, itself included, so each of its rows is a group of its own, as
                /// objects group.
                func rememberable(_ key: [Operand]) -> Bool { key.allSatisfy { PredicateEvaluator.equal($0, $0, []) } }
                if let access = try open(prepared, transaction: transaction) {
                    try run(access) { id, row in
                        let own = row.values.layout === layout
                        let group: Int
                        if throughDestinations && groupPaths.count == 1 {
                            let key = destination(0, on: row, own: own)
                            if let known = key.map({ pass.groupOfDestination[$0] }) ?? pass.groupOfNoDestination {
                                group = known
                            } else {
                                let (found, values) = try groupOfValues(row, id: id)
                                if rememberable(values) {
                                    if let key { pass.groupOfDestination[key] = found } else { pass.groupOfNoDestination = found }
                                }
                                group = found
                            }
                        } else if throughDestinations {
                            let destinations = groupPaths.indices.map { destination($0, on: row, own: own) }
                            if let known = pass.groupOfDestinations[destinations] {
                                group = known
                            } else {
                                let (found, values) = try groupOfValues(row, id: id)
                                if rememberable(values) { pass.groupOfDestinations[destinations] = found }
                                group = found
                            }
                        } else {
                            group = try groupOfValues(row, id: id).group
                        }
                        if !pass.started[group] {
                            // The group's first row gives its keys and expressions.
                            pass.started[group] = true
                            for (property, path) in zip(properties, paths) {
                                let value: Operand
                                switch property.kind {
                                case .key: value = try pass.reader.value(of: path, on: row, id: id)
                                case .expression(let expression): value = try evaluator.value(of: expression, on: .row(pass.reader.decoded.set(row, id: id)))
                                case .aggregate: continue
                                }
                                if let sendable = value.sendableValue { pass.firsts[group][property.name] = sendable }
                            }
                        }
                        for position in aggregated {
                            let value = if own, let slot = aggregateSlots[position] {
                                DecodedRow.operand(row.values[slot: slot])
                            } else {
                                try pass.reader.value(of: paths[position], on: row, id: id)
                            }
                            try pass.accumulators[group][position]?.add(value, evaluator: evaluator)
                        }
                        return true
                    }
                }
                return try pass.table.keys.indices.map { index in
                    var values = pass.firsts[index]
                    for (property, accumulator) in zip(properties, pass.accumulators[index]) {
                        guard let accumulator, let sendable = try accumulator.result(evaluator: evaluator).sendableValue else { continue }
                        values[property.name] = sendable
                    }
                    return StoreGroup(values: values, groupValues: Dictionary(zip(grouping.groupBy, pass.table.keys[index])) { first, _ in first })
                }
            }
        }
    }
}

/// The state of one grouping pass (``NativeStore/groups(_:)``): the groups met, each one's first
/// row's values, whether it has started and its accumulators, and the groups found by their
/// destinations. One pass on one thread inside one read transaction: no dynamic exclusivity
/// checks (as the engine's transaction state).
private final class GroupingPass {
    @exclusivity(unchecked) var reader: RowPathReader
    @exclusivity(unchecked) var table = GroupTable()
    @exclusivity(unchecked) var firsts: [[String: any Sendable]] = []
    @exclusivity(unchecked) var started: [Bool] = []
    @exclusivity(unchecked) var accumulators: [[Accumulator?]] = []
    /// The group of rows whose group-by key paths all start at these destinations (every key a
    /// to-one key path).
    @exclusivity(unchecked) var groupOfDestinations: [[Int64?]: Int] = [:]
    /// The same with one group-by key: its destination's key, or none.
    @exclusivity(unchecked) var groupOfDestination: [Int64: Int] = [:]
    @exclusivity(unchecked) var groupOfNoDestination: Int?

    init(reader: RowPathReader) { self.reader = reader }
}
