import Foundation

// Safety: Row and entry bytes are lent by the engine to the closure they are passed to and not
// kept.

extension NativeStore {
    // MARK: Fetching

    /// The rows of a ``StoreFetch``, in its order and window.
    ///
    /// - Complexity: memory proportional to the rows returned (and, when the store sorts, to every
    ///   matching row). ``forEachRow(_:_:)`` reads them one at a time.
    public func fetch(_ request: StoreFetch) throws -> [(ManagedObjectID, StoreRow)] {
        let prepared = try prepare(request)
        return try Self.storeError("fetch \(request.entityName)") {
            try database.read { transaction in
                guard let access = try open(prepared, transaction: transaction) else { return [] }
                return try collect(access, transaction: transaction)
            }
        }
    }

    /// Hands the rows of a ``StoreFetch`` to `body` one at a time, in the fetch's order and
    /// window, as they are read; `body` returns false to stop the read there. The rows are those
    /// ``fetch(_:)`` returns, in the same order: the same plan (``explain(_:)`` prints it) runs
    /// the same way, and only what is done with each row differs.
    ///
    /// ```swift
    /// var fetch = StoreFetch(entityName: "Employee")
    /// fetch.predicate = try ObjectPredicate(format: "salary > 50000")
    /// try store.forEachRow(fetch) { id, row in
    ///     print(id.primaryKey!, row.attributes["lastName"] ?? .string("?"))
    ///     return true
    /// }
    /// ```
    ///
    /// **Memory.** When the plan needs no sort — a scan (primary-key order), or an index giving
    /// the requested order, or no order requested — each row is handed over as it is decoded
    /// and nothing is kept: memory does not depend on the number of rows, and with a limit
    /// (or a `false` from `body`) the read stops there, no further row read. When the request's
    /// order must be made in memory (the plan has a ``QueryPlan/sort``), every matching row is
    /// read and decoded first, then sorted, then handed over: memory proportional to the
    /// matches, as ``fetch(_:)``.
    ///
    /// **One read transaction.** The whole read, `body`'s calls included, is one read
    /// transaction: `body` sees one consistent state of the file however long it runs, and the
    /// file stays read-locked until it returns (docs/locking.md). Writers can prepare meanwhile,
    /// but a commit to this file, from this process or another, waits for the read to end, and
    /// past its busy timeout fails with `StoreError.busy` (a save: ``ArborError/Code/storeSave``
    /// carrying it). So `body` must not save to this store, and a `body` that waits (on a pipe to
    /// a slow reader, say) keeps writers waiting as long.
    ///
    /// - Parameters:
    ///   - request: the rows wanted, their order and window.
    ///   - body: takes each row with its object's ID; returns false to stop. Its errors end the
    ///     read and are rethrown as they are.
    /// - Throws: ``ArborError/Code/invalidFetchRequest`` for a negative offset or limit or an
    ///   entity the model lacks; ``ArborError/Code/store`` for an engine failure or a damaged row
    ///   or index; what `body` throws.
    /// - Complexity: O(rows read) time; O(1) memory without an in-memory sort, O(matches) with one.
    public func forEachRow(_ request: StoreFetch, _ body: (ManagedObjectID, StoreRow) throws -> Bool) throws {
        let prepared = try prepare(request)
        try Self.storeError("fetch \(request.entityName)") {
            try database.read { transaction in try forEachRow(prepared, in: transaction, body) }
        }
    }

    /// ``forEachRow(_:_:)``'s work in a transaction of the caller's (a read, or a write that
    /// reads what it is about to change).
    func forEachRow(_ prepared: PreparedFetch, in transaction: ReadTransaction, _ body: (ManagedObjectID, StoreRow) throws -> Bool) throws {
        guard let access = try open(prepared, transaction: transaction) else { return }
        let request = prepared.request
        guard access.plan.sort.isEmpty else {
            // The order is made in memory: every match first.
            for (id, row) in try collect(access, transaction: transaction) where try !body(id, row) { break }
            return
        }
        // Rows arrive in their final order: skip the offset, stop at the limit.
        var skipped = 0, handed = 0
        try run(access) { id, row in
            if skipped < request.offset {
                skipped += 1
                return true
            }
            guard try body(id, row) else { return false }
            handed += 1
            return request.limit == 0 || handed < request.limit
        }
    }

    /// The value of the attribute `name` in the rows of several objects, in one read transaction:
    /// each row read in place and only that component decoded (collection operators over an
    /// unloaded relationship read a few values of many rows).
    public func attributeValues(_ name: String, of objectIDs: [ManagedObjectID]) throws -> [AttributeValue?] {
        try Self.storeError("read \(name) of \(objectIDs.count) rows") {
            try database.read { transaction in
                var result = [AttributeValue?](repeating: nil, count: objectIDs.count)
                // Where the attribute sits in the rows of each entity met, by the ID's space (found
                // once per entity: rows of a hierarchy are told apart by their first component's
                // bytes, no name decoded per row).
                var places: [(space: UnsafeMutableRawPointer, entities: [(format: RowFormat, place: RowFormat.Place?)])] = []
                try visitRows(of: objectIDs, in: transaction) { position, bytes in
                    let id = objectIDs[position]
                    let index = places.firstIndex { $0.space == id.spaceAddress } ?? {
                        places.append((id.spaceAddress, []))
                        return places.count - 1
                    }()
                    let known = places[index].entities.first { $0.format.owns(bytes) }
                    guard let (format, place) = try known ?? {
                        guard let rowEntity = entityName(ofRow: bytes, hierarchy: try self.entity(id.entityName)) else {
                            throw ArborError(.store, "the row of \(id) is malformed", objectID: id)
                        }
                        let format = format(of: try self.entity(rowEntity))
                        places[index].entities.append((format, format.places[name]))
                        return (format, format.places[name])
                    }(), case .attribute(let component, let type)? = place else { return }
                    do {
                        result[position] = try format.attributeValue(atComponent: component, kind: type.kind, in: bytes)
                    } catch let error as StoreError {
                        throw ArborError(.store, "the row of \(id) is malformed: \(error.message)", objectID: id)
                    }
                }
                return result
            }
        }
    }

    /// The rows of several objects in one read transaction (nil for those that have none).
    public func rows(for objectIDs: [ManagedObjectID]) throws -> [StoreRow?] {
        try Self.storeError("read \(objectIDs.count) rows") {
            try database.read { transaction in
                // A row of another entity of the hierarchy is not this ID's.
                try rows(of: objectIDs, in: transaction).enumerated().map { position, row in
                    row?.entityName == objectIDs[position].entityName ? row : nil
                }
            }
        }
    }

    /// The rows stored under the keys of `objectIDs` in `transaction`, decoded (nil where none),
    /// read through ``visitRows(of:in:_:)``. A row may be of another entity of the ID's
    /// hierarchy (a batch delete names it by the row's own entity).
    func rows(of objectIDs: [ManagedObjectID], in transaction: ReadTransaction) throws -> [StoreRow?] {
        var result = [StoreRow?](repeating: nil, count: objectIDs.count)
        try visitRows(of: objectIDs, in: transaction) { position, bytes in
            result[position] = try decode(bytes, objectID: objectIDs[position])
        }
        return result
    }

    /// Calls `body` with the position in `objectIDs` and the stored bytes of each ID whose
    /// hierarchy's rows tree holds its key (in place, valid during the call): the keys of each
    /// rows tree in one batched lookup (`Tree.visitValues(forKeys:_:)`; a relationship's
    /// destinations lie all over their tree). The row may be of another entity of the hierarchy.
    private func visitRows(of objectIDs: [ManagedObjectID], in transaction: ReadTransaction,
                           _ body: (Int, UnsafeRawBufferPointer) throws -> Void) throws {
        // Each hierarchy's tree and the positions of its IDs (usually one hierarchy), found by
        // the ID's space, then by its root entity.
        var groups: [(root: ObjectIdentifier, tree: Tree?, positions: [Int])] = []
        var spaces: [(space: UnsafeMutableRawPointer, group: Int)] = []
        for (position, id) in objectIDs.enumerated() {
            if let known = spaces.first(where: { $0.space == id.spaceAddress }) {
                groups[known.group].positions.append(position)
                continue
            }
            let entity = try entity(id.entityName)
            let root = ObjectIdentifier(entity.rootEntity)
            let group = try groups.firstIndex { $0.root == root } ?? {
                groups.append((root, try transaction.tree(named: Self.rowsTree(entity)), []))
                return groups.count - 1
            }()
            spaces.append((id.spaceAddress, group))
            groups[group].positions.append(position)
        }
        for (_, tree, positions) in groups {
            guard let tree else { continue }
            var keys = KeyBatch(reservingCapacity: positions.count)
            for position in positions { try withKey(try primaryKey(of: objectIDs[position])) { keys.append($0) } }
            try tree.visitValues(forKeys: keys) { member, bytes in
                if let bytes { try body(positions[member], bytes) }
            }
        }
    }

    /// The number of rows a ``StoreFetch`` matches (its window applied).
    public func count(_ request: StoreFetch) throws -> Int {
        try request.checkWindow()
        let entity = try entity(request.entityName)
        if request.predicate == nil && request.offset == 0 && request.limit == 0 {
            // Every row: count entries, decoding only the entity of each (none for a whole hierarchy).
            return try Self.storeError("count \(request.entityName)") {
                try database.read { transaction in
                    guard let tree = try transaction.tree(named: Self.rowsTree(entity)) else { return 0 }
                    let wholeHierarchy = entity.superentity == nil && request.includesSubentities
                    let entityFormat = format(of: entity)
                    var count = 0
                    try tree.forEach { _, value in
                        if wholeHierarchy || accepts(entityOf: value, entity: entity, format: entityFormat, subentities: request.includesSubentities) { count += 1 }
                        return true
                    }
                    return count
                }
            }
        }
        // Counted as read, none kept, planned once: the order does not change how many rows the
        // window holds.
        var counting = request
        counting.sortDescriptors = []
        counting.decodedProperties = []
        let prepared = try prepare(counting)
        let plan = prepared.plan
        // An exact index condition and a whole hierarchy (or an entity alone in its tree): count
        // the index entries, reading no row.
        let wholeTree = entity.superentity == nil && (request.includesSubentities || entity.subentities.isEmpty)
        if plan.exact, let index = plan.index, wholeTree, request.offset == 0, request.limit == 0 {
            let counted: Int? = try Self.storeError("count \(request.entityName)") {
                try database.read { transaction in
                    guard let tree = try transaction.tree(named: index.tree) else { return nil }
                    var count = 0
                    for range in plan.ranges {
                        try tree.forEach(from: range.start) { entry, _ in
                            guard entry.precedes(range.end) else { return false }
                            count += 1
                            return true
                        }
                    }
                    return count
                }
            }
            if let counted { return counted }
        }
        return try Self.storeError("count \(request.entityName)") {
            try database.read { transaction in
                var count = 0
                try forEachRow(prepared, in: transaction) { _, _ in
                    count += 1
                    return true
                }
                return count
            }
        }
    }

    /// The plan for a ``StoreFetch`` (which tree, which ranges, what is checked, how it is
    /// ordered).
    public func explain(_ request: StoreFetch) throws -> QueryPlan {
        let prepared = try prepare(request)
        return prepared.plan.queryPlan(entity: prepared.entity, format: format(of: prepared.entity), request: request)
    }

    /// Whether the row whose bytes are `value` is of `entity` (whose row format is `format`), or, with `subentities`, of one of its descendants: compares the row's first
    /// component with the entity's name, and decodes the name only when they differ.
    func accepts(entityOf value: UnsafeRawBufferPointer, entity: EntityDescription, format: RowFormat, subentities: Bool) -> Bool {
        if format.owns(value) { return true }
        guard let name = entityName(ofRow: value, hierarchy: entity) else { return false }
        if name == entity.name { return true }
        guard subentities, let other = model.entity(named: name) else { return false }
        return other.isKind(of: entity)
    }
}

extension NativeStore {
    // MARK: Running a plan

    /// A plan with the trees it reads, opened in one read transaction.
    struct OpenPlan {
        /// The fetch that runs.
        let request: StoreFetch
        let entity: EntityDescription
        /// The plan that runs: the one made, or a scan when its index tree is missing.
        var plan: FetchPlan
        /// The hierarchy's rows.
        var rows: Tree
        /// The index's tree, when the plan reads one.
        var index: Tree?
        /// The joins' checks of each row read (those not read through their foreign-key tree).
        var checks: [JoinCheck] = []
        /// How a join reads the rows instead of the plan's index or scan, when its keys are few.
        enum Through {
            /// Through its first relationship's foreign-key tree, one range per key.
            case foreignKeyTree(Tree, Set<Int64>)
            /// The rows of these primary keys, one by one (a join through a to-many
            /// relationship: the owners of the matching destinations).
            case keys(Set<Int64>)
        }
        var through: Through?

        /// Whether rows are read in primary-key order (a scan): other reads sort ties by key.
        var readsInKeyOrder: Bool { plan.index == nil && through == nil }
    }

    /// Opens the trees `plan` reads (nil: the hierarchy has no rows tree, so no rows). A read-only
    /// store made before Arbor kept an index lacks its tree: the plan becomes a scan, sorting in
    /// memory as the request asks (`explain` still names the index).
    ///
    /// The joins run here, before the rows are read (their destinations first, then back along
    /// their paths): each gives the keys the fetched rows' first relationship must hold. One whose
    /// keys are few reads the rows through that relationship's foreign-key tree, unless the plan's
    /// own index condition is an equality (docs/relational-planning.md, "With other terms").
    func open(_ prepared: PreparedFetch, transaction: ReadTransaction) throws -> OpenPlan? {
        let (request, entity, plan) = (prepared.request, prepared.entity, prepared.plan)
        guard let rows = try transaction.tree(named: Self.rowsTree(entity)) else { return nil }
        var access: OpenPlan
        if let index = plan.index {
            if let tree = try transaction.tree(named: index.tree) {
                access = OpenPlan(request: request, entity: entity, plan: plan, rows: rows, index: tree)
            } else {
                var scan = FetchPlan(filter: plan.filter, sort: request.sortDescriptors)
                scan.joins = plan.joins
                access = OpenPlan(request: request, entity: entity, plan: scan, rows: rows)
            }
        } else {
            access = OpenPlan(request: request, entity: entity, plan: plan, rows: rows)
        }
        let keysAlone = Self.readsKeysAlone(request, entity: entity, plan: access.plan)
        for join in access.plan.joins {
            let check = try check(for: join, transaction: transaction)
            let indexIsEquality = access.plan.indexCost == 0
            if access.through == nil, !indexIsEquality {
                // Few keys: the rows they name are read instead, and need no check of their own.
                // When no row need be read at all, the foreign-key tree gives the keys whatever
                // their number, in one pass over the ranges of the keys found.
                switch check {
                case .foreignKey(let relationship, let keys, false, false):
                    if let first = join.join.hops.first, first.name == relationship,
                       let tree = keysAlone && access.plan.joins.count == 1 && Self.isIndexedForeignKey(first)
                        ? try transaction.tree(named: Self.foreignKeyTree(first))
                        : try foreignKeyTree(for: first, keyCount: keys.count, transaction: transaction) {
                        access.through = .foreignKeyTree(tree, keys)
                        continue
                    }
                case .ownKey(let keys, false):
                    if try fewRows(keys.count, of: entity, transaction: transaction) {
                        access.through = .keys(keys)
                        continue
                    }
                default:
                    break
                }
            }
            access.checks.append(check)
        }
        if access.through != nil {
            // The tree's order is the destinations': the request's order is made after.
            access.plan.index = nil
            access.index = nil
            access.plan.orderedByIndex = false
            access.plan.descending = false
            access.plan.sort = request.sortDescriptors
        }
        return access
    }

    /// Whether a fetch of `entity` through a join's keys needs no row read: nothing of the rows
    /// is asked for (`decodedProperties` empty: an ID fetch's, a count's), the plan checks
    /// nothing on them and sorts nothing, and the entity is alone in its rows tree (a key there
    /// is one of its objects).
    static func readsKeysAlone(_ request: StoreFetch, entity: EntityDescription, plan: FetchPlan) -> Bool {
        request.decodedProperties?.isEmpty == true && plan.filter == nil && request.sortDescriptors.isEmpty
            && entity.superentity == nil && entity.subentities.isEmpty
    }

    /// The rows of an open plan in the request's order and window: read (stopping at the
    /// window's end when nothing is left to sort), then sorted if the plan sorts, then windowed.
    /// What ``fetch(_:)`` returns, and ``forEachRow(_:_:)`` hands over when the plan sorts.
    func collect(_ access: OpenPlan, transaction: ReadTransaction) throws -> [(ManagedObjectID, StoreRow)] {
        let request = access.request
        let window = Array<Int>.windowEnd(offset: request.offset, limit: request.limit)
        // Without a sort to do, the rows arrive in their final order: stop at the window's end.
        let ordered = access.plan.sort.isEmpty
        var result: [(ManagedObjectID, StoreRow)] = []
        try run(access) { id, row in
            result.append((id, row))
            return !(ordered && result.count >= window)
        }
        if !access.plan.sort.isEmpty {
            // Ties keep primary-key order, whichever way the rows were read.
            if !access.readsInKeyOrder { result.sort { $0.0.key < $1.0.key } }
            result = try sorted(result, by: access.plan.sort, transaction: transaction)
        }
        return result.window(offset: request.offset, limit: request.limit)
    }

    /// Reads the rows an open plan finds, in the order it reads them, handing each matching row
    /// to `deliver` as soon as it is decoded; `deliver` returns false to stop the read. The one
    /// reading loop of ``fetch(_:)``, ``forEachRow(_:_:)`` and ``count(_:)`` (``RowRun``): the
    /// window and the sort are their callers'.
    func run(_ access: OpenPlan, _ deliver: (ManagedObjectID, consuming StoreRow) throws -> Bool) throws {
        try RowRun(access, in: self).run(deliver)
    }

    /// The primary key an index entry names.
    func primaryKey(ofEntry entry: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, index: StoreIndex, tree: String) throws -> Int64 {
        switch index.kind {
        case .index, .foreignKey: return try Self.lastKey(of: entry, in: tree)
        case .unique: return try Self.lastKey(of: value, in: tree)
        }
    }

    /// The primary keys of one range read backwards; within equal values (ties), in ascending
    /// key order, as the forward read and an in-memory sort give them.
    func descendingKeys(_ tree: Tree, _ range: FetchPlan.KeyRange, index: StoreIndex) throws -> [Int64] {
        var entries: [([UInt8], Int64)] = []
        try tree.forEach(from: range.start) { entry, value in
            guard entry.precedes(range.end) else { return false }
            entries.append((Array(entry.prefix(entry.count)), try primaryKey(ofEntry: entry, value: value, index: index, tree: tree.name)))
            return true
        }
        // Group by the value part (the entry without its primary key), reverse the groups.
        var groups: [[Int64]] = []
        var lastValue: ArraySlice<UInt8>?
        for (entry, key) in entries {
            let valuePart = index.kind == .unique ? entry[...] : entry[..<entry.withUnsafeBytes(KeyEncoding.lastComponentStart)]
            if valuePart == lastValue { groups[groups.count - 1].append(key) } else { groups.append([key]) }
            lastValue = valuePart
        }
        return groups.reversed().flatMap { $0 }
    }
}

extension UnsafeRawBufferPointer {
    /// Whether these bytes sort before `bound` (byte order, a prefix first): the end test of
    /// every index entry read.
    func precedes(_ bound: [UInt8]) -> Bool {
        bound.withUnsafeBytes { KeyEncoding.order(self, $0) < 0 }
    }
}

