import Foundation

// Safety: Row and entry bytes are lent by the engine to the closure they are passed to and not
// kept; ID-space addresses are only compared. A run lives inside one read transaction, on the
// thread running it, so its unchecked fields are never accessed from two places at once. The
// projection's flags are allocated with the run and freed when it ends (`deinit`); the scan
// filter named unretained (`current`) is one of `filters`, which the run holds to its end.

/// One run of an open plan over a native store's rows: what ``NativeStore/run(_:_:)`` reads,
/// the one reading loop of every fetch, count and row-by-row read. Its four ways to rows — join
/// keys alone, join keys read, index ranges, a scan — share the joins' checks, the projection and
/// the evaluator set up here, and hand each matching row to the same `deliver`; the window and
/// the sort are the caller's.
///
/// A run's state lives in its stored fields: the scan's current filter and its last decision
/// are read for every row by two closures of the engine's leaf loop, and a field of the run
/// (unlike a captured variable) takes no exclusivity check per access.
final class RowRun {
    /// Takes a matching row; false stops the read.
    typealias Deliver = (ManagedObjectID, consuming StoreRow) throws -> Bool

    let store: NativeStore
    let access: NativeStore.OpenPlan
    let entity: EntityDescription
    let entityFormat: RowFormat
    /// The joins' checks that read a row's own key alone, made before the row is decoded (a row
    /// they reject is never decoded).
    let keyChecks: [(keys: Set<Int64>, negated: Bool)]
    /// The joins' checks that read the decoded row.
    let rowChecks: [JoinCheck]
    let evaluator = PredicateEvaluator()
    let decoded = DecodedRow()
    /// The fetched entity's columns a scan decodes when the caller reads only some
    /// (`decodedProperties`): those, and the relationships the joins' checks read. One flag per
    /// slot of the entity's layout, read per row without counting.
    let projection: UnsafeBufferPointer<Bool>?

    /// The scan's filters, one per entity met; the fetched entity's first.
    @exclusivity(unchecked) private var filters: [ScanFilter] = []
    /// The filter of the entity of the row read last, used unretained (it lives in `filters`),
    /// so a row that stays with the same entity costs no reference counting.
    @exclusivity(unchecked) private var current: Unmanaged<ScanFilter>?
    /// The decision the engine's leaf loop made on a row, kept for the body the engine calls
    /// next for the same row (the row's address tells): each row is decided once.
    @exclusivity(unchecked) private var lastDecision: (row: UnsafeRawPointer?, decided: Bool?) = (nil, nil)

    init(_ access: NativeStore.OpenPlan, in store: NativeStore) {
        self.store = store
        self.access = access
        entity = access.entity
        entityFormat = store.format(of: access.entity)
        keyChecks = access.checks.compactMap(\.ownKeys)
        rowChecks = access.checks.filter { $0.ownKeys == nil }
        projection = access.request.decodedProperties.map { [entity] wanted in
            let read = wanted.union(access.checks.compactMap { check -> String? in
                if case .foreignKey(let relationship, _, _, _) = check { return relationship }
                return nil
            })
            let flags = UnsafeMutableBufferPointer<Bool>.allocate(capacity: entity.propertyLayout.names.count)
            _ = flags.initialize(from: entity.propertyLayout.names.map(read.contains))
            return UnsafeBufferPointer(flags)
        }
    }

    deinit { projection?.deallocate() }

    /// Reads the rows, in the order the plan reads them, handing each matching row to `deliver`
    /// as soon as it is decoded.
    func run(_ deliver: Deliver) throws {
        // Rows found through a join's keys need not be read at all when nothing of them is asked
        // for and nothing else checked: their IDs are the keys (an ID fetch's, a count's).
        let keysAlone = rowChecks.isEmpty && NativeStore.readsKeysAlone(access.request, entity: entity, plan: access.plan)
        if let through = access.through, keysAlone {
            try readKeys(through, deliver)
        } else if let through = access.through {
            try readRows(through, deliver)
        } else if let index = access.plan.index, let tree = access.index {
            try readRanges(index, tree, deliver)
        } else {
            try scan(deliver)
        }
    }

    @inline(__always) private func keyAdmitted(_ id: ManagedObjectID) -> Bool {
        keyChecks.allSatisfy { $0.keys.contains(id.key) != $0.negated }
    }

    /// The entity a row names (its first component), or a typed error for a malformed row or
    /// an entity the model lacks.
    private func rowEntity(_ bytes: UnsafeRawBufferPointer, key: () throws -> Int64) throws -> EntityDescription {
        // Most rows are of the fetched entity: told by their bytes, no name decoded.
        if entityFormat.owns(bytes) { return entity }
        let rows = access.rows
        guard let name = store.entityName(ofRow: bytes, hierarchy: entity) else {
            throw ArborError(.store, "the row \((try? key()).map(String.init) ?? "?") of \(rows.name) is malformed")
        }
        if name == entity.name { return entity }
        guard let other = store.model.entity(named: name) else {
            throw ArborError(.store, "the row \(try key()) of \(rows.name) names \(name), which is not an entity of the model")
        }
        return other
    }

    // MARK: Join keys

    /// The rows a join's keys name, by ID alone (none is read).
    private func readKeys(_ through: NativeStore.OpenPlan.Through, _ deliver: Deliver) throws {
        switch through {
        case .foreignKeyTree(let tree, let keys):
            try store.forEachSource(in: tree, of: keys) { key in
                let id = store.objectID(entity, key)
                return try !keyAdmitted(id) || deliver(id, .placeholder)
            }
        case .keys(let keys):
            // Keys a join took from other rows' foreign keys may name a row deleted since (a
            // no-action delete rule): each is looked up, not read.
            let rows = access.rows
            for key in keys.sorted() where keyAdmitted(store.objectID(entity, key)) {
                guard try store.withKey(key, { try rows.withValue(forKey: $0) { _ in true } }) == true else { continue }
                guard try deliver(store.objectID(entity, key), .placeholder) else { break }
            }
        }
    }

    /// The rows a join's keys name, each read.
    private func readRows(_ through: NativeStore.OpenPlan.Through, _ deliver: Deliver) throws {
        switch through {
        case .foreignKeyTree(let tree, let keys):
            try store.forEachSource(in: tree, of: keys) { try takeRow($0, from: tree.name, deliver) }
        case .keys(let keys):
            let rows = access.rows
            for key in keys.sorted() {
                // A key the join found names a row that was there when it looked.
                guard try store.withKey(key, { try rows.withValue(forKey: $0) { try take(key, $0, deliver) } }) ?? true else { break }
            }
        }
    }

    // MARK: Index ranges

    /// The rows of the plan's index ranges, in the index's order (or its reverse).
    private func readRanges(_ index: StoreIndex, _ tree: Tree, _ deliver: Deliver) throws {
        let plan = access.plan
        let ranges = plan.descending ? plan.ranges.reversed() : plan.ranges
        // The ranges are disjoint (sorted distinct points, or one range): no row comes twice.
        for range in ranges {
            if plan.descending {
                for key in try store.descendingKeys(tree, range, index: index) where try !takeRow(key, from: index.tree, deliver) { return }
            } else {
                var more = true
                try tree.forEach(from: range.start) { entry, value in
                    guard entry.precedes(range.end) else { return false }
                    let key = try store.primaryKey(ofEntry: entry, value: value, index: index, tree: tree.name)
                    more = try takeRow(key, from: index.tree, deliver)
                    return more
                }
                if !more { return }
            }
        }
    }

    /// Takes the row `key` names (as an entry of the tree `source` names), read in place.
    private func takeRow(_ key: Int64, from source: String, _ deliver: Deliver) throws -> Bool {
        let rows = access.rows
        let taken = try store.withKey(key) { try rows.withValue(forKey: $0) { try take(key, $0, deliver) } }
        guard let taken else {
            throw ArborError(.store, "the index \(source) names row \(key), which \(rows.name) does not have")
        }
        return taken
    }

    /// Takes one row read through an index or a join (its key, and its bytes lent from the
    /// page): false to stop. Such rows mostly match, so each is decoded whole at once; a scan
    /// mostly rejects rows and tests them on their bytes, through a `RawRow`, before decoding
    /// any, which for rows that mostly match would be work done twice.
    private func take(_ key: Int64, _ bytes: UnsafeRawBufferPointer, _ deliver: Deliver) throws -> Bool {
        let rowEntity = try rowEntity(bytes) { key }
        if rowEntity !== entity {
            guard access.request.includesSubentities, rowEntity.isKind(of: entity) else { return true }
        }
        let id = store.objectID(rowEntity, key)
        guard keyAdmitted(id) else { return true }
        let row = try store.decode(bytes, objectID: id, entity: rowEntity, format: rowEntity === entity ? entityFormat : nil)
        // An exact plan's ranges hold only matching rows (as counting trusts too).
        let plan = access.plan
        if !plan.exact, let filter = plan.filter, try !evaluator.evaluate(filter, on: .row(decoded.set(row, id: id))) { return true }
        for check in rowChecks where !check.admits(row, id: id) { return true }
        return try deliver(id, row)
    }

    // MARK: The scan

    /// The filter of the entity a row names, made the first time the entity is met.
    private func filter(for entry: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Unmanaged<ScanFilter> {
        if let known = filters.first(where: { $0.owns(value) }) { return Unmanaged.passUnretained(known) }
        let rows = access.rows
        let rowEntity = try rowEntity(value) { try NativeStore.lastKey(of: entry, in: rows.name) }
        let accepted = rowEntity === entity || (access.request.includesSubentities && rowEntity.isKind(of: entity))
        let made = ScanFilter(access.plan.filter, format: store.format(of: rowEntity), accepted: accepted)
        filters.append(made)
        return Unmanaged.passUnretained(made)
    }

    /// Whether the engine's leaf loop passes a row on to the scan's body: rows the current filter
    /// rejects on their values alone cost no key and no call of the body. The decision is kept
    /// for the body.
    private func mayTake(_ value: UnsafeRawBufferPointer) -> Bool {
        lastDecision.row = nil
        guard let scan = current else { return true }
        return scan._withUnsafeGuaranteedRef { filter in
            guard filter.owns(value) else { return true }
            guard filter.accepted else { return false }
            let decided = filter.decide(value)
            lastDecision = (value.baseAddress, decided)
            return decided != false
        }
    }

    /// Reads every row in place, in primary-key order. Where it can, the filter is decided on
    /// the row's bytes (``ScanFilter``); otherwise (or when the bytes leave it undecided) the
    /// evaluator runs on a ``RawRow``, which decodes only the values it reads. Only matching rows
    /// are decoded whole.
    private func scan(_ deliver: Deliver) throws {
        let (store, entity, entityFormat, rows, plan) = (store, entity, entityFormat, access.rows, access.plan)
        let projection = projection
        let raw = RawRow(store: store, placeholder: store.objectID(entity.name, 0))
        let entitySpace = store.objectID(entity, 0).space
        func malformed(_ entry: UnsafeRawBufferPointer) -> ArborError {
            let key = (try? NativeStore.lastKey(of: entry, in: rows.name)).map { "\($0)" } ?? "?"
            return ArborError(.store, "the row \(key) of \(rows.name) is malformed")
        }
        // The fetched entity's filter is made first: its leading tests on the rows' fixed head
        // run inside the engine's leaf loop (ScanFilter.prefilter).
        let fetched = ScanFilter(plan.filter, format: entityFormat, accepted: true)
        fetched.enginePrefilters = fetched.prefilter != nil
        filters.append(fetched)
        current = Unmanaged.passUnretained(fetched)
        try rows.forEach(prefilter: fetched.prefilter, selecting: mayTake) { entry, value in
            var scan = current
            if scan?._withUnsafeGuaranteedRef({ $0.owns(value) }) != true {
                scan = try filter(for: entry, value)
                current = scan
            }
            guard let scan else { return true }
            let (accepted, decided) = scan._withUnsafeGuaranteedRef { filter -> (Bool, Bool?) in
                guard filter.accepted else { return (false, nil) }
                if lastDecision.row == value.baseAddress, value.baseAddress != nil { return (true, lastDecision.decided) }
                return (true, filter.decide(value))
            }
            lastDecision.row = nil
            guard accepted else { return true }
            if decided == false { return true }
            // A row of the fetched entity (the common case) is decoded with the entity and
            // columns at hand: no reference counting of either, no lookup of the ID space.
            if decided == true || plan.filter == nil, scan._withUnsafeGuaranteedRef({ $0.format.entity === entity }) {
                let id = ManagedObjectID(space: entitySpace, key: try NativeStore.lastKey(of: entry, in: rows.name))
                guard keyAdmitted(id) else { return true }
                let row = try entityFormat.decode(value, objectID: id, store: store, reading: projection)
                for check in rowChecks where !check.admits(row, id: id) { return true }
                return try deliver(id, row)
            }
            let format = scan._withUnsafeGuaranteedRef { $0.format }
            let id = store.objectID(format.entity, try NativeStore.lastKey(of: entry, in: rows.name))
            guard keyAdmitted(id) else { return true }
            if decided == nil, let filter = plan.filter {
                raw.format = format
                guard raw.load(value) else { throw malformed(entry) }
                raw.id = id
                if try !evaluator.evaluate(filter, on: .row(raw)) { return true }
            }
            let row = try format.decode(value, objectID: id, store: store)
            for check in rowChecks where !check.admits(row, id: id) { return true }
            return try deliver(id, row)
        }
    }
}
