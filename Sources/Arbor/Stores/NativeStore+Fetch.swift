import Foundation

/// An index tree of a hierarchy, as the planner and the row writer see it.
struct StoreIndex {
    enum Kind {
        /// `index.<Root>.<keys>`: (values…, primary key) → nothing; every row has an entry.
        case index
        /// `unique.<Root>.<keys>`: values → primary key; rows with a nil value have none.
        case unique
        /// `fk.<Entity>.<relationship>`: (destination key, primary key) → nothing; rows with no
        /// destination have none.
        case foreignKey
    }

    let tree: String
    let keys: [String]
    /// Strings are stored folded (case and diacritics): the index serves `[cd]` comparisons.
    let folded: Bool
    let kind: Kind

    /// Whether a row with a nil value in the first key has an entry (the index can serve an
    /// unfiltered scan and `== nil`).
    var coversEveryRow: Bool { kind == .index }
}

extension NativeStore {
    static func indexTree(_ entity: EntityDescription, _ index: IndexDescription) -> String {
        "index.\(entity.rootEntity.name).\(index.keys.joined(separator: "+"))\(index.caseAndDiacriticInsensitive ? ".cd" : "")"
    }

    /// The indexes kept for rows of `entity` (its own and inherited ones, each tree once).
    static func indexes(of entity: EntityDescription) -> [StoreIndex] {
        var seen = Set<String>()
        var result: [StoreIndex] = []
        for index in entity.indexes {
            let tree = indexTree(entity, index)
            if seen.insert(tree).inserted {
                result.append(StoreIndex(tree: tree, keys: index.keys, folded: index.caseAndDiacriticInsensitive, kind: .index))
            }
        }
        return result
    }

    /// Every index, uniqueness and foreign-key tree that can find rows of `entity`.
    static func accessPaths(of entity: EntityDescription) -> [StoreIndex] {
        var paths = indexes(of: entity)
        // A uniqueness tree has no entry for a row with a nil value: a compound one cannot find a
        // row by its first key alone.
        for constraint in entity.uniquenessConstraints where constraint.count == 1 {
            paths.append(StoreIndex(tree: uniqueTree(entity, constraint), keys: constraint, folded: false, kind: .unique))
        }
        for relationship in entity.relationships where isIndexedForeignKey(relationship) {
            paths.append(StoreIndex(tree: foreignKeyTree(relationship), keys: [relationship.name], folded: false, kind: .foreignKey))
        }
        return paths
    }

    /// The component an index stores for a value of a row.
    func indexComponent(_ value: PropertyValue?, folded: Bool, permanent: (ManagedObjectID) -> ManagedObjectID) throws -> KeyComponent {
        switch value {
        case .attribute(.string(let text))? where folded:
            return .string(PredicateEvaluator.fold(text, [.caseInsensitive, .diacriticInsensitive]))
        case .attribute(let stored)?: return Self.component(stored)
        case .object(let id)?: return .int(try primaryKey(of: permanent(id)))
        default: return .null
        }
    }

    /// The entry of `row` (primary key `key`) in an index.
    func indexEntry(_ row: StoreRow, _ index: StoreIndex, key: Int64,
                    permanent: (ManagedObjectID) -> ManagedObjectID = { $0 }) throws -> [UInt8] {
        var bytes: [UInt8] = []
        for name in index.keys {
            KeyEncoding.append(try indexComponent(row.values[name], folded: index.folded, permanent: permanent), to: &bytes)
        }
        KeyEncoding.append(.int(key), to: &bytes)
        return bytes
    }

    // MARK: Fetching

    /// The rows of a ``StoreFetch``, in its order and window.
    ///
    /// - Complexity: memory proportional to the rows returned (and, when the store sorts, to every
    ///   matching row). ``forEachRow(_:_:)`` reads them one at a time.
    public func fetch(_ request: StoreFetch) throws -> [(ManagedObjectID, StoreRow)] {
        try request.checkWindow()
        let entity = try entity(request.entityName)
        let plan = plan(request, entity: entity)
        return try Self.storeError("fetch \(request.entityName)") {
            try database.read { transaction in
                guard let access = try open(plan, request: request, entity: entity, transaction: transaction) else { return [] }
                return try collect(access, request: request, entity: entity, transaction: transaction)
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
        try request.checkWindow()
        let entity = try entity(request.entityName)
        let plan = plan(request, entity: entity)
        try Self.storeError("fetch \(request.entityName)") {
            try database.read { transaction in
                guard let access = try open(plan, request: request, entity: entity, transaction: transaction) else { return }
                guard access.plan.sort.isEmpty else {
                    // The order is made in memory: every match first.
                    for (id, row) in try collect(access, request: request, entity: entity, transaction: transaction) where try !body(id, row) { break }
                    return
                }
                // Rows arrive in their final order: skip the offset, stop at the limit.
                var skipped = 0, handed = 0
                try run(access, request: request, entity: entity) { id, row in
                    if skipped < request.offset {
                        skipped += 1
                        return true
                    }
                    guard try body(id, row) else { return false }
                    handed += 1
                    return request.limit == 0 || handed < request.limit
                }
            }
        }
    }

    /// The value of the attribute `name` in the rows of several objects, in one read transaction:
    /// each row read in place and only that component decoded (collection operators over an
    /// unloaded relationship read a few values of many rows).
    public func attributeValues(_ name: String, of objectIDs: [ManagedObjectID]) throws -> [AttributeValue?] {
        try Self.storeError("read \(name) of \(objectIDs.count) rows") {
            try database.read { transaction in
                var result: [AttributeValue?] = []
                result.reserveCapacity(objectIDs.count)
                let raw = RawRow(store: self, placeholder: objectID("", 0))
                var layouts: [String: RawRowLayout] = [:]
                var trees: [String: Tree] = [:]
                for id in objectIDs {
                    let entity = try entity(id.entityName)
                    let treeName = Self.rowsTree(entity)
                    guard let tree = try trees[treeName] ?? transaction.tree(named: treeName) else {
                        result.append(nil)
                        continue
                    }
                    trees[treeName] = tree
                    let value = try KeyEncoding.withEncodedInteger(try primaryKey(of: id)) { key in
                        try tree.withValue(forKey: key) { bytes -> AttributeValue? in
                            guard let rowEntity = Self.entityName(ofRow: bytes), raw.load(bytes) else {
                                throw ArborError(.store, "the row of \(id) is malformed", objectID: id)
                            }
                            if layouts[rowEntity] == nil { layouts[rowEntity] = rawRowLayout(try self.entity(rowEntity)) }
                            raw.layout = layouts[rowEntity]
                            raw.id = id
                            return try raw.attributeValue(forKey: name)
                        }
                    }
                    result.append(value ?? nil)
                }
                return result
            }
        }
    }

    /// The rows of several objects in one read transaction (nil for those that have none).
    public func rows(for objectIDs: [ManagedObjectID]) throws -> [StoreRow?] {
        try Self.storeError("read \(objectIDs.count) rows") {
            try database.read { transaction in
                var trees: [ObjectIdentifier: Tree] = [:]
                return try objectIDs.map { id -> StoreRow? in
                    let entity = try entity(id.entityName)
                    let root = entity.rootEntity
                    let tree: Tree
                    if let known = trees[ObjectIdentifier(root)] {
                        tree = known
                    } else {
                        guard let opened = try transaction.tree(named: Self.rowsTree(entity)) else { return nil }
                        trees[ObjectIdentifier(root)] = opened
                        tree = opened
                    }
                    guard let row = try readRow(id, in: tree) else { return nil }
                    return row.entityName == entity.name ? row : nil
                }
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
                    let entityColumns = columns(of: entity)
                    var count = 0
                    try tree.forEach { _, value in
                        if wholeHierarchy || accepts(entityOf: value, entity: entity, columns: entityColumns, subentities: request.includesSubentities) { count += 1 }
                        return true
                    }
                    return count
                }
            }
        }
        // An exact index condition and a whole hierarchy (or an entity alone in its tree): count
        // the index entries, reading no row.
        let plan = plan(request, entity: entity)
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
        // Counted as read, none kept; the order does not change how many rows the window holds.
        var counting = request
        counting.sortDescriptors = []
        var count = 0
        try forEachRow(counting) { _, _ in
            count += 1
            return true
        }
        return count
    }

    /// The plan for a ``StoreFetch`` (which tree, which ranges, what is checked, how it is
    /// ordered).
    public func explain(_ request: StoreFetch) throws -> QueryPlan {
        let entity = try entity(request.entityName)
        return plan(request, entity: entity).queryPlan(entity: entity, request: request)
    }

    /// Whether the row whose bytes are `value` is of `entity` (whose stored columns are
    /// `columns`), or, with `subentities`, of one of its descendants: compares the row's first
    /// component with the entity's name, and decodes the name only when they differ.
    func accepts(entityOf value: UnsafeRawBufferPointer, entity: EntityDescription, columns: RowColumns, subentities: Bool) -> Bool {
        if columns.names(value) { return true }
        guard let name = Self.entityName(ofRow: value) else { return false }
        if name == entity.name { return true }
        guard subentities, let other = model.entity(named: name) else { return false }
        return other.isKind(of: entity)
    }

    /// The entity name at the start of a row's bytes (nil when malformed).
    static func entityName(ofRow bytes: UnsafeRawBufferPointer) -> String? {
        var reader = KeyReader(bytes)
        guard case .string(let name)? = try? reader.next() else { return nil }
        return name
    }
}

/// A fetch plan: the access path (a scan, or ranges of one index) and what follows.
struct FetchPlan {
    /// Half-open byte ranges `[start, end)` of index keys.
    struct KeyRange: CustomStringConvertible {
        var start: [UInt8]
        var end: [UInt8]
        /// What the range holds, for `explain`: rendered only when asked for (every fetch plans,
        /// and formatting its constants cost more than the planning itself).
        var label: Label
        var description: String { label.description }
    }

    /// The text of a ``KeyRange``, kept as its parts until it is printed.
    enum Label: CustomStringConvertible {
        case text(String)
        /// `<relation> value`: `= 3`, `< "b"`.
        case relation(String, KeyComponent)
        /// `low … high`.
        case between(KeyComponent, KeyComponent)
        case beginsWith(String)
        /// `= value`, the value being an encoded key component.
        case encoded([UInt8])
        /// Two ranges' labels, of a range narrowed by both.
        indirect case both(Label, Label)

        var description: String {
            switch self {
            case .text(let text): text
            case .relation(let relation, let value): "\(relation) \(value)"
            case .between(let low, let high): "\(low) … \(high)"
            case .beginsWith(let prefix): "begins with \"\(prefix)\""
            case .encoded(let bytes): "= \((try? KeyEncoding.decode(bytes))?.first?.description ?? "?")"
            case .both(let a, let b): "\(a) and \(b)"
            }
        }
    }

    var index: StoreIndex?
    var ranges: [KeyRange] = []
    /// The ranges hold exactly the matching rows (of the hierarchy): counting needs no row.
    var exact = false
    /// The ranges are read backwards (a descending sort served by the index).
    var descending = false
    var orderedByIndex = false
    /// The cost of the index condition chosen (``NativeStore/Condition/cost``; nil: no condition
    /// narrows the index read).
    var indexCost: Int?
    /// The terms checked on each row read (the joins excepted).
    var filter: ObjectPredicate?
    /// The join terms (docs/relational-planning.md).
    var joins: [JoinPlan] = []
    var sort: [ObjectSortDescriptor] = []

    func queryPlan(entity: EntityDescription, request: StoreFetch) -> QueryPlan {
        let access: QueryPlan.Access
        if let index {
            access = .index(tree: index.tree, key: index.keys.joined(separator: ", ") + (descending ? " (backwards)" : ""),
                            ranges: ranges.map(\.description))
        } else {
            access = .scan(tree: NativeStore.rowsTree(entity))
        }
        var plan = QueryPlan(entityName: entity.name, access: access, filter: filter, orderedByIndex: orderedByIndex && !request.sortDescriptors.isEmpty,
                             sort: sort, stopsEarly: request.limit > 0 && sort.isEmpty)
        plan.joins = joins.map { $0.description(source: entity) }
        // Whether a filter compiles depends on the attributes' kinds, not on their order in rows.
        if index == nil, let filter { plan.filterOnEncodedValues = ScanFilter.compiles(filter, layout: RawRowLayout(entity, columns: RowColumns(entity, layout: .fixedFirst))) }
        return plan
    }
}

extension NativeStore {
    /// One condition an index can narrow: a key compared with constants.
    struct Condition {
        var key: String
        var ranges: [FetchPlan.KeyRange]
        /// Lower is better: 0 equality, 1 a few points, 2 a bounded range, 3 a half-open range or
        /// a prefix.
        var cost: Int
        var folded: Bool
        /// Whether rows with a nil key can match (only an index with every row can serve).
        var needsNil = false
        /// Whether the ranges hold exactly the keys that match (no row needs checking): false for
        /// floating point, where NaN sorts above every number but matches no range.
        var exact = true
    }

    /// Chooses how to run `request`: the cheapest index condition among the predicate's
    /// top-level conjuncts, or an index giving the requested order, or a scan.
    func plan(_ request: StoreFetch, entity: EntityDescription) -> FetchPlan {
        var plan = FetchPlan(filter: request.predicate, sort: request.sortDescriptors)
        let paths = accessPaths[ObjectIdentifier(entity)] ?? Self.accessPaths(of: entity)
        let conjuncts: [ObjectPredicate]
        switch request.predicate {
        case .and(let terms)?: conjuncts = terms
        case let single?: conjuncts = [single]
        case nil: conjuncts = []
        }
        // Join terms run as joins; the rest are the row filter and the index candidates.
        let (joins, rowConjuncts) = planJoins(conjuncts, entity: entity)
        if !joins.isEmpty {
            plan.joins = joins
            plan.filter = rowConjuncts.isEmpty ? nil : (rowConjuncts.count == 1 ? rowConjuncts[0] : .and(rowConjuncts))
        }
        var candidates: [(Condition, StoreIndex)] = []
        for conjunct in rowConjuncts {
            // The conjunct's condition, else (for `[c]`) its case variants on a plain index.
            for condition in [condition(conjunct, entity: entity), caseVariants(conjunct, entity: entity)].compactMap({ $0 }) {
                guard let path = paths.first(where: {
                    $0.keys.first == condition.key && $0.folded == condition.folded && (!condition.needsNil || $0.coversEveryRow)
                }) else { continue }
                if !condition.ranges.isEmpty { candidates.append((condition, path)) }
                break
            }
        }
        var best: (Condition, StoreIndex)?
        if let bestIndex = candidates.indices.min(by: { candidates[$0].0.cost < candidates[$1].0.cost }) {
            var (chosen, path) = candidates[bestIndex]
            // Other single-range conditions on the same index narrow the range further
            // (`salary >= a AND salary < b`).
            var merged = 1
            for (index, (other, otherPath)) in candidates.enumerated()
            where index != bestIndex && otherPath.tree == path.tree && other.ranges.count == 1 && chosen.ranges.count == 1 {
                let (a, b) = (chosen.ranges[0], other.ranges[0])
                let start = a.start.lexicographicallyPrecedes(b.start) ? b.start : a.start
                let end = a.end.lexicographicallyPrecedes(b.end) ? a.end : b.end
                chosen.ranges = [FetchPlan.KeyRange(start: start, end: end, label: .both(a.label, b.label))]
                chosen.exact = chosen.exact && other.exact
                chosen.cost = min(chosen.cost, 2)
                merged += 1
            }
            plan.exact = chosen.exact && merged == conjuncts.count
            plan.indexCost = chosen.cost
            best = (chosen, path)
        }
        // The order an index gives: one ascending or descending key with an index on it.
        var sortIndex: StoreIndex?
        if request.sortDescriptors.count == 1, let sort = request.sortDescriptors.first, !sort.key.utf8.contains(UInt8(ascii: ".")),
           let attribute = entity.attributesByName[sort.key], attribute.type.kind != .decimal, attribute.type.kind != .uri,
           sort.options.isEmpty || sort.options == [.caseInsensitive, .diacriticInsensitive] {
            let folded = !sort.options.isEmpty
            sortIndex = paths.first { $0.kind == .index && $0.keys.first == sort.key && $0.folded == folded }
        }
        if let (condition, path) = best {
            plan.index = path
            plan.ranges = condition.ranges
            if let sortIndex, sortIndex.tree == path.tree {
                plan.orderedByIndex = true
                plan.descending = !request.sortDescriptors[0].ascending
                plan.sort = []
            }
        } else if let sortIndex, request.limit > 0 || request.predicate == nil {
            // No condition narrows the rows, but the index gives the order: read it whole.
            plan.index = sortIndex
            plan.ranges = [FetchPlan.KeyRange(start: [], end: [0xFF], label: .text("all"))]
            plan.orderedByIndex = true
            plan.descending = !request.sortDescriptors[0].ascending
            plan.sort = []
        }
        return plan
    }

    /// The index condition of one conjunct, if it has one: `key <op> constant` (either way
    /// round) with a constant of the key's kind.
    func condition(_ predicate: ObjectPredicate, entity: EntityDescription) -> Condition? {
        guard case .comparison(let comparison) = predicate, comparison.modifier == .direct else { return nil }
        var op = comparison.operator
        let key: String, constant: PredicateValue
        switch (comparison.left, comparison.right) {
        case (.keyPath(let keys), .constant(let value)) where keys.count == 1:
            key = keys[0]
            constant = value
        case (.constant(let value), .keyPath(let keys)) where keys.count == 1:
            key = keys[0]
            constant = value
            switch op {
            case .lessThan: op = .greaterThan
            case .lessThanOrEqualTo: op = .greaterThanOrEqualTo
            case .greaterThan: op = .lessThan
            case .greaterThanOrEqualTo: op = .lessThanOrEqualTo
            case .equalTo: break
            default: return nil
            }
        default:
            return nil
        }
        let folded: Bool
        // Whether the index's keys are the comparison's own fold (else they hold a superset).
        var foldedExactly = true
        switch comparison.options {
        case []: folded = false
        case [.caseInsensitive, .diacriticInsensitive]: folded = true
        default:
            // `[c]` or `[d]` alone with an ASCII constant: a string that matches it has a
            // `[cd]` fold that matches the constant's, so a folded index holds a superset of the
            // matches (each row read is checked); `==`, `BEGINSWITH` and a `LIKE`'s prefix.
            guard case .string(let text) = constant, text.utf8.allSatisfy({ $0 < 0x80 }),
                  [.equalTo, .beginsWith, .like].contains(op) else { return nil }
            folded = true
            foldedExactly = false
        }
        // The component each constant is stored as, for the key's kind.
        let component: (PredicateValue) -> KeyComponent?
        var exact = true
        if let attribute = entity.attributesByName[key], !attribute.isTransient {
            let kind = attribute.type.kind
            // Floating point and dates (a Double inside) can hold NaN, which sorts inside ranges
            // and matches none.
            exact = kind != .double && kind != .float && kind != .date && foldedExactly
            if folded && kind != .string { return nil }
            component = { value in
                switch (kind, value) {
                case (.integer16, .int(let n)), (.integer32, .int(let n)), (.integer64, .int(let n)): return .int(n)
                case (.double, .int(let n)), (.float, .int(let n)):
                    // Only integers a double holds exactly: a rounded bound could lose rows.
                    return n.magnitude <= 1 << 53 ? .double(Double(n)) : nil
                case (.double, .double(let d)): return d.isNaN ? nil : .double(d)
                case (.float, .double(let d)):
                    // Floats are stored widened: only a constant a float holds exactly can match.
                    return Double(Float(d)) == d ? .double(d) : nil
                case (.string, .string(let s)):
                    return .string(folded ? PredicateEvaluator.fold(s, [.caseInsensitive, .diacriticInsensitive]) : s)
                case (.boolean, .bool(let b)): return .bool(b)
                case (.date, .date(let d)): return .date(d)
                case (.uuid, .uuid(let u)): return .uuid(u)
                default: return nil
                }
            }
        } else if let relationship = entity.relationshipsByName[key], !relationship.isToMany {
            guard !folded else { return nil }
            component = { [identifier] value in
                guard case .objectID(let id) = value, let key = id.primaryKey, id.storeIdentifier == identifier else { return nil }
                return .int(key)
            }
        } else {
            return nil
        }

        func point(_ value: KeyComponent) -> FetchPlan.KeyRange {
            let bytes = KeyEncoding.encode([value])
            return FetchPlan.KeyRange(start: bytes, end: bytes + [0xFF], label: .relation("=", value))
        }
        switch op {
        case .equalTo:
            guard let value = component(constant) else {
                // `== nil` (an index with every row), or a constant of another kind: nothing to narrow.
                if case .null = constant { return Condition(key: key, ranges: [point(.null)], cost: 1, folded: folded, needsNil: true, exact: exact) }
                return nil
            }
            return Condition(key: key, ranges: [point(value)], cost: 0, folded: folded, exact: exact)
        case .in:
            guard case .list(let values) = constant else { return nil }
            var components: [KeyComponent] = []
            for value in values {
                // Nil matches a nil key; an element the index cannot hold (3.0 for an integer
                // key, 1 for a boolean) might still match: then the index cannot serve.
                if case .null = value { components.append(.null); continue }
                guard let component = component(value) else { return nil }
                components.append(component)
            }
            let sorted = Set(components.map { KeyEncoding.encode([$0]) }).sorted { $0.lexicographicallyPrecedes($1) }
            let ranges = sorted.map { bytes in
                FetchPlan.KeyRange(start: bytes, end: bytes + [0xFF], label: .encoded(bytes))
            }
            if ranges.isEmpty { return Condition(key: key, ranges: [FetchPlan.KeyRange(start: [0xFF], end: [0xFF], label: .text("none"))], cost: 0, folded: folded, exact: exact) }
            return Condition(key: key, ranges: ranges, cost: 1, folded: folded, needsNil: components.contains(.null), exact: exact)
        case .lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo:
            guard let value = component(constant) else { return nil }
            let bytes = KeyEncoding.encode([value])
            let (kindStart, kindEnd) = Self.kindBounds(value)
            switch op {
            case .lessThan: return Condition(key: key, ranges: [.init(start: kindStart, end: bytes, label: .relation("<", value))], cost: 3, folded: folded, exact: exact)
            case .lessThanOrEqualTo: return Condition(key: key, ranges: [.init(start: kindStart, end: bytes + [0xFF], label: .relation("<=", value))], cost: 3, folded: folded, exact: exact)
            case .greaterThan: return Condition(key: key, ranges: [.init(start: bytes + [0xFF], end: kindEnd, label: .relation(">", value))], cost: 3, folded: folded, exact: exact)
            default: return Condition(key: key, ranges: [.init(start: bytes, end: kindEnd, label: .relation(">=", value))], cost: 3, folded: folded, exact: exact)
            }
        case .between:
            guard case .list(let bounds) = constant, bounds.count == 2, let low = component(bounds[0]), let high = component(bounds[1]) else { return nil }
            let start = KeyEncoding.encode([low]), end = KeyEncoding.encode([high]) + [0xFF]
            guard start.lexicographicallyPrecedes(end) else {
                return Condition(key: key, ranges: [FetchPlan.KeyRange(start: [0xFF], end: [0xFF], label: .text("none"))], cost: 0, folded: folded, exact: exact)
            }
            return Condition(key: key, ranges: [.init(start: start, end: end, label: .between(low, high))], cost: 2, folded: folded, exact: exact)
        case .beginsWith:
            guard case .string = constant, case .string(let prefix)? = component(constant) else { return nil }
            // The encoded prefix without its terminator: every string starting with it lies in
            // [prefix, prefix + FF) (no UTF-8 byte is FF).
            let bytes = Array(KeyEncoding.encode([.string(prefix)]).dropLast(2))
            return Condition(key: key, ranges: [.init(start: bytes, end: bytes + [0xFF], label: .beginsWith(prefix))], cost: 2, folded: folded, exact: exact)
        case .like:
            // A pattern with a leading literal reads the literal's prefix range; every row read
            // is checked (the rest of the pattern). The literal is taken from the pattern folded
            // as the comparison folds; for `[c]` or `[d]` alone (ASCII) it is lowered to the
            // index's `[cd]` fold.
            guard case .string(let pattern) = constant, entity.attributesByName[key]?.type.kind == .string else { return nil }
            var prefix = Self.likeLiteralPrefix(PredicateEvaluator.fold(pattern, comparison.options))
            if !foldedExactly { prefix = prefix.lowercased() }
            guard !prefix.isEmpty, !prefix.utf8.contains(0) else { return nil }
            let bytes = Array(KeyEncoding.encode([.string(prefix)]).dropLast(2))
            return Condition(key: key, ranges: [.init(start: bytes, end: bytes + [0xFF], label: .beginsWith(prefix))], cost: 2, folded: folded, exact: false)
        default:
            return nil
        }
    }

    /// The most strings ``caseVariants(_:entity:)`` reads (beyond, the comparison scans).
    static let caseVariantLimit = 64

    /// A `[c]` comparison (`==`, `BEGINSWITH`, or `LIKE` with a leading literal) with an ASCII
    /// constant, on a plain (unfolded) index: the ranges of every string whose `[c]` fold can
    /// match — each letter of the constant in either case, and the two other scalars whose
    /// lower case starts with an ASCII letter (`İ`, lowered to `i` and a combining dot, and the
    /// Kelvin sign, lowered to `k`) — at most ``caseVariantLimit`` of them. A superset: each row
    /// read is checked.
    func caseVariants(_ predicate: ObjectPredicate, entity: EntityDescription) -> Condition? {
        guard case .comparison(let comparison) = predicate, comparison.modifier == .direct, comparison.options == .caseInsensitive,
              case .keyPath(let keys) = comparison.left, keys.count == 1, case .constant(.string(let constant)) = comparison.right,
              let attribute = entity.attributesByName[keys[0]], !attribute.isTransient, attribute.type.kind == .string,
              constant.utf8.allSatisfy({ $0 < 0x80 && $0 != 0 }) else { return nil }
        let literal: String
        let prefix: Bool
        switch comparison.operator {
        case .equalTo: (literal, prefix) = (constant, false)
        case .beginsWith: (literal, prefix) = (constant, true)
        case .like: (literal, prefix) = (Self.likeLiteralPrefix(constant), true)
        default: return nil
        }
        guard !literal.isEmpty || !prefix else { return nil }
        var variants: [String] = [""]
        for character in literal.lowercased().unicodeScalars {
            var forms = [String(character)]
            if character.properties.isLowercase, character.isASCII { forms.append(String(character).uppercased()) }
            if character == "i" { forms.append("\u{130}") }
            if character == "k" { forms.append("\u{212A}") }
            variants = variants.flatMap { start in forms.map { start + $0 } }
            guard variants.count <= Self.caseVariantLimit else { return nil }
        }
        let ranges = variants.map { variant -> FetchPlan.KeyRange in
            if prefix {
                let bytes = Array(KeyEncoding.encode([.string(variant)]).dropLast(2))
                return FetchPlan.KeyRange(start: bytes, end: bytes + [0xFF], label: .beginsWith(variant))
            }
            let bytes = KeyEncoding.encode([.string(variant)])
            return FetchPlan.KeyRange(start: bytes, end: bytes + [0xFF], label: .relation("=", .string(variant)))
        }.sorted { $0.start.lexicographicallyPrecedes($1.start) }
        return Condition(key: keys[0], ranges: ranges, cost: prefix ? 2 : 1, folded: false, exact: false)
    }

    /// The literal a `LIKE` pattern begins with: its scalars up to the first unescaped `*` or
    /// `?`, escapes resolved (the evaluator's reading of a backslash).
    static func likeLiteralPrefix(_ pattern: String) -> String {
        var scalars = pattern.unicodeScalars.makeIterator()
        var literal = String.UnicodeScalarView()
        while let scalar = scalars.next() {
            switch scalar {
            case "*", "?": return String(literal)
            case "\\":
                guard let next = scalars.next() else {
                    literal.append(scalar)
                    return String(literal)
                }
                literal.append(next)
            default: literal.append(scalar)
            }
        }
        return String(literal)
    }

    /// The byte bounds of all keys of `value`'s kind (nil keys and other kinds excluded).
    static func kindBounds(_ value: KeyComponent) -> ([UInt8], [UInt8]) {
        let tag = KeyEncoding.encode([value])[0]
        switch value {
        case .bool: return ([0x10], [0x12])
        default: return ([tag], [tag + 1])
        }
    }

    // MARK: Running a plan

    /// A plan with the trees it reads, opened in one read transaction.
    struct OpenPlan {
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
    func open(_ plan: FetchPlan, request: StoreFetch, entity: EntityDescription, transaction: ReadTransaction) throws -> OpenPlan? {
        guard let rows = try transaction.tree(named: Self.rowsTree(entity)) else { return nil }
        var access: OpenPlan
        if let index = plan.index {
            if let tree = try transaction.tree(named: index.tree) {
                access = OpenPlan(plan: plan, rows: rows, index: tree)
            } else {
                var scan = FetchPlan(filter: plan.filter, sort: request.sortDescriptors)
                scan.joins = plan.joins
                access = OpenPlan(plan: scan, rows: rows)
            }
        } else {
            access = OpenPlan(plan: plan, rows: rows)
        }
        for join in access.plan.joins {
            let check = try check(for: join, transaction: transaction)
            let indexIsEquality = access.plan.indexCost == 0
            if access.through == nil, !indexIsEquality {
                // Few keys: the rows they name are read instead, and need no check of their own.
                switch check {
                case .foreignKey(let relationship, let keys, false, false):
                    if let first = join.join.hops.first, first.name == relationship,
                       let tree = try foreignKeyTree(for: first, keyCount: keys.count, transaction: transaction) {
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

    /// The rows of an open plan in the request's order and window: read (stopping at the
    /// window's end when nothing is left to sort), then sorted if the plan sorts, then windowed.
    /// What ``fetch(_:)`` returns, and ``forEachRow(_:_:)`` hands over when the plan sorts.
    func collect(_ access: OpenPlan, request: StoreFetch, entity: EntityDescription, transaction: ReadTransaction) throws -> [(ManagedObjectID, StoreRow)] {
        let window = Array<Int>.windowEnd(offset: request.offset, limit: request.limit)
        // Without a sort to do, the rows arrive in their final order: stop at the window's end.
        let ordered = access.plan.sort.isEmpty
        var result: [(ManagedObjectID, StoreRow)] = []
        try run(access, request: request, entity: entity) { id, row in
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
    /// reading loop of ``fetch(_:)``, ``forEachRow(_:_:)`` and ``count(_:)``: the window and the
    /// sort are their callers'.
    func run(_ access: OpenPlan, request: StoreFetch, entity: EntityDescription,
             _ deliver: (ManagedObjectID, consuming StoreRow) throws -> Bool) throws {
        let plan = access.plan, rows = access.rows
        let evaluator = PredicateEvaluator()

        let entityColumns = columns(of: entity)
        // The fetched entity's columns a scan decodes when the caller reads only some
        // (`decodedProperties`): those, and the relationships the joins' checks read.
        var projection: [Bool]?
        if let wanted = request.decodedProperties {
            let read = wanted.union(access.checks.compactMap { check -> String? in
                if case .foreignKey(let relationship, _, _, _) = check { return relationship }
                return nil
            })
            projection = entity.propertyLayout.names.map(read.contains)
        }
        defer { withExtendedLifetime(projection) {} }
        /// The entity a row names (its first component), or a typed error for a malformed row or
        /// an entity the model lacks.
        func rowEntity(_ bytes: UnsafeRawBufferPointer, key: () throws -> Int64) throws -> EntityDescription {
            // Most rows are of the fetched entity: told by their bytes, no name decoded.
            if entityColumns.names(bytes) { return entity }
            guard let name = Self.entityName(ofRow: bytes) else {
                throw ArborError(.store, "the row \((try? key()).map(String.init) ?? "?") of \(rows.name) is malformed")
            }
            if name == entity.name { return entity }
            guard let other = model.entity(named: name) else {
                throw ArborError(.store, "the row \(try key()) of \(rows.name) names \(name), which is not an entity of the model")
            }
            return other
        }

        /// Takes one row read through an index (its key, and its bytes lent from the page):
        /// false to stop. Such rows mostly match, so each is decoded whole at once; a scan
        /// (below) mostly rejects rows and tests them on their bytes, through a `RawRow`, before
        /// decoding any (measured: testing index rows that way first cost index fetches a third
        /// of their speed).
        func take(_ key: Int64, _ bytes: UnsafeRawBufferPointer) throws -> Bool {
            let rowEntity = try rowEntity(bytes) { key }
            if rowEntity !== entity {
                guard request.includesSubentities, rowEntity.isKind(of: entity) else { return true }
            }
            let id = objectID(rowEntity, key)
            let row = try decode(bytes, objectID: id, entity: rowEntity, columns: rowEntity === entity ? entityColumns : nil)
            // An exact plan's ranges hold only matching rows (as counting trusts too).
            if !plan.exact, let filter = plan.filter, try !evaluator.evaluate(filter, on: .row(row, id)) { return true }
            for check in access.checks where !check.admits(row, id: id) { return true }
            return try deliver(id, row)
        }

        /// Takes the row `key` names (as an entry of the tree `source` names), read in place.
        func takeRow(_ key: Int64, from source: String) throws -> Bool {
            let taken = try KeyEncoding.withEncodedInteger(key) { try rows.withValue(forKey: $0) { try take(key, $0) } }
            guard let taken else {
                throw ArborError(.store, "the index \(source) names row \(key), which \(rows.name) does not have")
            }
            return taken
        }

        if let through = access.through {
            switch through {
            case .foreignKeyTree(let tree, let keys): try forEachSource(in: tree, of: keys) { try takeRow($0, from: tree.name) }
            case .keys(let keys):
                for key in keys.sorted() {
                    // A key the join found names a row that was there when it looked.
                    guard try KeyEncoding.withEncodedInteger(key, { try rows.withValue(forKey: $0) { try take(key, $0) } }) ?? true else { break }
                }
            }
        } else if let index = plan.index, let tree = access.index {
            let ranges = plan.descending ? plan.ranges.reversed() : plan.ranges
            // The ranges are disjoint (sorted distinct points, or one range): no row comes twice.
            outer: for range in ranges {
                if plan.descending {
                    for key in try descendingKeys(tree, range, index: index) where try !takeRow(key, from: index.tree) { break outer }
                } else {
                    var more = true
                    try tree.forEach(from: range.start) { entry, value in
                        guard entry.precedes(range.end) else { return false }
                        let key = try primaryKey(ofEntry: entry, value: value, index: index, tree: tree.name)
                        more = try takeRow(key, from: index.tree)
                        return more
                    }
                    if !more { break outer }
                }
            }
        } else {
            // A scan reads each row in place. Where it can, the filter is decided on the row's
            // bytes (ScanFilter); otherwise (or when the bytes leave it undecided) the evaluator
            // runs on a RawRow, which decodes only the values it reads. Only matching rows are
            // decoded whole.
            let raw = RawRow(store: self, placeholder: objectID(entity.name, 0))
            let entitySpace = objectID(entity, 0).space
            // One filter per entity met; the current one is used unretained (it lives in
            // `filters`), so a row that stays with the same entity costs no reference counting.
            var filters: [ScanFilter] = []
            // Read for every row by two closures: kept behind a pointer, which (unlike a
            // captured variable) takes no exclusivity check per access.
            let currentFilter = UnsafeMutablePointer<Unmanaged<ScanFilter>?>.allocate(capacity: 1)
            currentFilter.initialize(to: nil)
            defer { currentFilter.deallocate() }
            func malformed(_ entry: UnsafeRawBufferPointer) -> ArborError {
                let key = (try? Self.lastKey(of: entry, in: rows.name)).map { "\($0)" } ?? "?"
                return ArborError(.store, "the row \(key) of \(rows.name) is malformed")
            }
            func filter(for entry: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Unmanaged<ScanFilter> {
                if let known = filters.first(where: { $0.owns(value) }) { return Unmanaged.passUnretained(known) }
                let rowEntity = try rowEntity(value) { try Self.lastKey(of: entry, in: rows.name) }
                let accepted = rowEntity === entity || (request.includesSubentities && rowEntity.isKind(of: entity))
                let made = ScanFilter(plan.filter, layout: rawRowLayout(rowEntity), accepted: accepted)
                filters.append(made)
                return Unmanaged.passUnretained(made)
            }
            // Rows the engine's prefilter passes are screened on their values alone, in the
            // engine's leaf loop: a row the current filter rejects costs no key and no call of
            // the body below.
            func mayTake(_ value: UnsafeRawBufferPointer) -> Bool {
                guard let scan = currentFilter.pointee else { return true }
                return scan._withUnsafeGuaranteedRef { filter in
                    guard filter.owns(value) else { return true }
                    return filter.accepted && filter.decide(value) != false
                }
            }
            // The fetched entity's filter is made first: its leading tests on the rows' fixed
            // head run inside the engine's leaf loop (ScanFilter.prefilter).
            let fetched = ScanFilter(plan.filter, layout: rawRowLayout(entity), accepted: true)
            filters.append(fetched)
            currentFilter.pointee = Unmanaged.passUnretained(fetched)
            try rows.forEach(prefilter: fetched.prefilter, selecting: mayTake) { entry, value in
                var scan = currentFilter.pointee
                if scan?._withUnsafeGuaranteedRef({ $0.owns(value) }) != true {
                    scan = try filter(for: entry, value)
                    currentFilter.pointee = scan
                }
                guard let scan else { return true }
                let (accepted, decided) = scan._withUnsafeGuaranteedRef { filter -> (Bool, Bool?) in
                    filter.accepted ? (true, filter.decide(value)) : (false, nil)
                }
                guard accepted else { return true }
                if decided == false { return true }
                // A row of the fetched entity (the common case) is decoded with the entity and
                // columns at hand: no reference counting of either, no lookup of the ID space.
                if decided == true || plan.filter == nil, scan._withUnsafeGuaranteedRef({ $0.layout.entity === entity }) {
                    let id = ManagedObjectID(space: entitySpace, key: try Self.lastKey(of: entry, in: rows.name))
                    let row = try projection.withUnsafeBufferPointerIfPresent { mask in
                        try decode(value, objectID: id, entity: entity, columns: entityColumns, reading: mask)
                    }
                    for check in access.checks where !check.admits(row, id: id) { return true }
                    return try deliver(id, row)
                }
                let layout = scan._withUnsafeGuaranteedRef { $0.layout }
                let id = objectID(layout.entity, try Self.lastKey(of: entry, in: rows.name))
                if decided == nil, let filter = plan.filter {
                    guard raw.load(value) else { throw malformed(entry) }
                    raw.id = id
                    raw.layout = layout
                    if try !evaluator.evaluate(filter, on: .raw(raw)) { return true }
                }
                let row = try decode(value, objectID: id, entity: layout.entity, columns: layout.entity === entity ? entityColumns : nil)
                for check in access.checks where !check.admits(row, id: id) { return true }
                return try deliver(id, row)
            }
            withExtendedLifetime(filters) {}
        }
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
            let valuePart = index.kind == .unique ? entry[...] : entry.dropLast(9)
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

extension Optional where Wrapped == [Bool] {
    /// `body` with the array's buffer, or with nil.
    @inline(__always)
    func withUnsafeBufferPointerIfPresent<R>(_ body: (UnsafeBufferPointer<Bool>?) throws -> R) rethrows -> R {
        guard let array = self else { return try body(nil) }
        return try array.withUnsafeBufferPointer { try body($0) }
    }
}
