import ArborStore
import Foundation

/// A join term as a store plans it: the term, and the plan of the fetch that finds its
/// destination's rows (docs/relational-planning.md).
struct JoinPlan {
    let join: JoinTerm
    /// The fetch of the last destination's rows that match the term's comparison, planned.
    let destinationRows: PreparedFetch
    var destinationPlan: FetchPlan { destinationRows.plan }

    /// The explain line: the destination's access, then each step back to the fetched rows.
    func description(source: EntityDescription) -> String {
        let destination = join.destination
        var text = "join \(join.term.predicateFormat): \(destination.name) "
        if join.quantifier == .count {
            let relationship = join.hops[join.countedHop]
            let owner = relationship.entity ?? source
            let inverse = relationship.inverseRelationship
            let counted = inverse?.isToMany == true ? "through \(inverse.map(NativeStore.joinTree) ?? "?")" : "by their \(inverse?.name ?? "?")"
            let read = destinationPlan.index.map { "by \($0.tree)" } ?? "by a scan of \(NativeStore.rowsTree(destination))"
            let what = if case .apply(let operation, let attribute) = join.aggregation { "\(operation.rawValue).\(attribute)" } else { "counted" }
            text += "\(read)\(destinationPlan.filter.map { " checking \($0.predicateFormat)" } ?? ""), \(what) per \(owner.name) \(counted)"
            // The to-one prefix, back to the fetched rows.
            for position in stride(from: join.countedHop - 1, through: 0, by: -1) {
                let hop = join.hops[position]
                let from = position == 0 ? source : join.hops[position - 1].destinationEntity ?? source
                text += NativeStore.isIndexedForeignKey(hop)
                    ? "; \(from.name) through \(NativeStore.foreignKeyTree(hop)) for each key while under an eighth of \(hop.destinationEntityName)'s rows, else rows checked for their \(hop.name)"
                    : "; \(from.name) rows checked for their \(hop.name)"
            }
            return text
        }
        switch destinationPlan.index {
        case let index?:
            text += "by \(index.tree), \(destinationPlan.ranges.count == 1 ? "range" : "ranges") \(destinationPlan.ranges.map(\.description).joined(separator: ", "))"
        case nil:
            text += "by a scan of \(NativeStore.rowsTree(destination))"
        }
        if !destinationPlan.exact, let filter = destinationPlan.filter { text += " checking \(filter.predicateFormat)" }
        // Back along the path: the entity each step reaches rows of, through which relationship.
        for (position, relationship) in join.hops.enumerated().reversed() {
            let from = position == 0 ? source : join.hops[position - 1].destinationEntity ?? source
            let to = relationship.destinationEntity?.name ?? relationship.destinationEntityName
            if relationship.isToMany {
                let inverse = relationship.inverseRelationship
                if inverse?.isToMany == true {
                    text += "; \(from.name) through \(inverse.map(NativeStore.joinTree) ?? "?") from each \(to)"
                } else {
                    text += "; \(from.name) as the \(inverse?.name ?? "?") of each \(to)"
                }
            } else if join.matchesNil && join.nilIsElement(at: position) || !NativeStore.isIndexedForeignKey(relationship) {
                text += "; \(from.name) rows checked for their \(relationship.name)"
            } else {
                text += "; \(from.name) through \(NativeStore.foreignKeyTree(relationship)) for each key while under an eighth of \(to)'s rows, else rows checked for their \(relationship.name)"
            }
        }
        switch join.quantifier {
        case .direct: if join.matchesNil { text += " (nil matches)" }
        case .any, .count: break
        case .none: text += " (rows not found match)"
        }
        return text
    }
}

/// What a join found, for the fetched rows.
enum JoinCheck {
    /// The keys the row's `relationship` must hold (none, when `matchesNil`), or — `negated` —
    /// must not.
    case foreignKey(relationship: String, keys: Set<Int64>, matchesNil: Bool, negated: Bool)
    /// The keys the row's own primary key must be among, or — `negated` — not.
    case ownKey(keys: Set<Int64>, negated: Bool)

    /// The keys of a check that reads the row's own key alone (decided before the row is
    /// decoded); nil for one that reads the row.
    var ownKeys: (keys: Set<Int64>, negated: Bool)? {
        if case .ownKey(let keys, let negated) = self { (keys, negated) } else { nil }
    }

    /// Whether the row `id` holding `row` passes.
    func admits(_ row: StoreRow, id: ManagedObjectID) -> Bool {
        switch self {
        case .foreignKey(let relationship, let keys, let matchesNil, let negated):
            let found = switch row.values[relationship] {
            case .object(let destination)?: keys.contains(destination.key)
            default: matchesNil
            }
            return found != negated
        case .ownKey(let keys, let negated):
            return keys.contains(id.key) != negated
        }
    }
}

extension NativeStore {
    /// Plans `joins`, terms of a fetch's predicate: each with the plan of its destination's fetch.
    func planJoins(_ joins: [JoinTerm]) -> [JoinPlan] {
        joins.map { join in
            var fetch = StoreFetch(entityName: join.destination.name)
            fetch.predicate = join.tail == .truePredicate ? nil : join.tail
            // Running the join reads no destination column but the foreign key naming a row's
            // owner (of the path's last hop, or of a count's first): a scan decodes only that.
            fetch.decodedProperties = Set([join.hops.last, join.hops.first].compactMap { hop in
                hop?.inverseRelationship.flatMap { $0.isToMany ? nil : $0.name }
            })
            if case .apply(_, let attribute) = join.aggregation { fetch.decodedProperties?.insert(attribute) }
            return JoinPlan(join: join, destinationRows: PreparedFetch(request: fetch, entity: join.destination, plan: plan(fetch, entity: join.destination)))
        }
    }

    /// Runs a join back to its first relationship's destination: the keys of the rows there for
    /// which the rest of the path holds a matching element (steps 1 and 2 of
    /// docs/relational-planning.md) — or, when `ownersOfFirstHop` comes back true, already the
    /// keys of the first relationship's *source* rows that reach one.
    ///
    /// When the path's last relationship is a one-to-many, each destination row the scan reads
    /// names its owner (the inverse's foreign key): the owners are taken from the scan, not by
    /// reading each matching row again by its key.
    func keys(of join: JoinPlan, transaction: ReadTransaction) throws -> (keys: Set<Int64>, ownersOfFirstHop: Bool) {
        let hops = join.join.hops
        let last = hops.count - 1
        let ownerKey: RelationshipDescription? = {
            guard last >= 0, hops[last].isToMany, let inverse = hops[last].inverseRelationship, !inverse.isToMany else { return nil }
            return inverse
        }()
        var keys = Set<Int64>()
        if let access = try open(join.destinationRows, transaction: transaction) {
            try run(access) { id, row in
                if let ownerKey {
                    if case .object(let owner)? = row.values[ownerKey.name] { keys.insert(owner.key) }
                } else {
                    keys.insert(id.key)
                }
                return true
            }
        }
        // hops[j] leads from the entity hops[j - 1] reaches to the next: the keys of that
        // entity's rows whose hops[j] reaches a row among the keys found so far.
        let first = ownerKey == nil ? last : last - 1
        if first >= 1 {
            for position in stride(from: first, through: 1, by: -1) {
                let relationship = hops[position]
                guard let rowsEntity = hops[position - 1].destinationEntity else { return ([], false) }
                keys = try keysReaching(keys, through: relationship, from: rowsEntity, nilMatches: join.join.matchesNil && join.join.nilIsElement(at: position),
                                        transaction: transaction)
            }
        }
        return (keys, ownerKey != nil && last == 0)
    }

    /// The keys of `entity`'s rows whose `relationship` reaches one of `keys` (for a to-one
    /// relationship with `nilMatches`, or holds nothing).
    func keysReaching(_ keys: Set<Int64>, through relationship: RelationshipDescription, from entity: EntityDescription, nilMatches: Bool,
                      transaction: ReadTransaction) throws -> Set<Int64> {
        guard relationship.isToMany else {
            return try sourceKeys(of: entity, through: relationship, in: keys, matchesNil: nilMatches, transaction: transaction)
        }
        guard let inverse = relationship.inverseRelationship, let destination = relationship.destinationEntity else { return [] }
        var owners = Set<Int64>()
        if inverse.isToMany {
            // Many-to-many: the inverse's join tree holds (destination key, owner key).
            guard let tree = try transaction.tree(named: Self.joinTree(inverse)) else { return owners }
            try forEachSource(in: tree, of: keys) { owner in
                owners.insert(owner)
                return true
            }
            return owners
        }
        // One-to-many: each destination row names its owner in the inverse's foreign key.
        guard let rows = try transaction.tree(named: Self.rowsTree(destination)) else { return owners }
        for key in keys.sorted() {
            let row = try withKey(key) { try rows.withValue(forKey: $0) { try decode($0, objectID: objectID(destination, key)) } }
            if case .object(let owner)? = row?.values[inverse.name] { owners.insert(owner.key) }
        }
        return owners
    }

    /// The check of the fetched rows a join makes (running it: its destination's rows, then back
    /// along its path).
    func check(for join: JoinPlan, transaction: ReadTransaction) throws -> JoinCheck {
        guard join.join.quantifier == .count else {
            let (keys, ownersOfFirstHop) = try keys(of: join, transaction: transaction)
            if ownersOfFirstHop { return .ownKey(keys: keys, negated: join.join.quantifier == .none) }
            return try check(for: join.join, keys: keys, transaction: transaction)
        }
        // A count: the destinations (matching the subquery's predicate) counted, or aggregated,
        // per owner; the owners whose value decides the term against an owner with none.
        let term = join.join
        let values = try ownerValues(join, transaction: transaction)
        let noneMatch = try term.matches(try term.emptyValue())
        var keys = Set<Int64>()
        // Owners share few distinct counts: each count is judged once.
        var judged: [Int64: Bool] = [:]
        for (owner, value) in values {
            let matches: Bool
            if case .int(let count) = value, term.aggregation == .count {
                if let known = judged[count] { matches = known } else {
                    matches = try term.matches(value)
                    judged[count] = matches
                }
            } else {
                matches = try term.matches(value)
            }
            if matches != noneMatch { keys.insert(owner) }
        }
        guard term.countedHop > 0 else { return .ownKey(keys: keys, negated: noneMatch) }
        // A to-one prefix (`project.issues.@count`): back along it to the fetched rows. A row
        // whose prefix meets nil matches as the term says of nil; `keys` holds the owners that
        // differ from an owner with none, so a nil is among them when that differs too.
        let nilAmong = term.prefixNilMatches != noneMatch
        for position in stride(from: term.countedHop - 1, through: 1, by: -1) {
            guard let rowsEntity = term.hops[position - 1].destinationEntity else { return .ownKey(keys: [], negated: false) }
            keys = try sourceKeys(of: rowsEntity, through: term.hops[position], in: keys, matchesNil: nilAmong, transaction: transaction)
        }
        return .foreignKey(relationship: term.hops[0].name, keys: keys, matchesNil: nilAmong, negated: noneMatch)
    }

    /// The value a count term's destinations give each owner that has some: their count, or the
    /// aggregate of their attribute (``JoinTerm/Aggregation``), by the owner's key. A plain count
    /// of a one-to-many is taken from the inverse's foreign-key tree, no row read; otherwise the
    /// destinations the term's predicate matches are read once (their owner's key and the
    /// aggregated attribute alone), and a many-to-many's owners found in its join tree.
    func ownerValues(_ join: JoinPlan, transaction: ReadTransaction) throws -> [Int64: Operand] {
        // Long: the keys-only count of a foreign-key tree and the read of the matching destinations
        // (with a many-to-many's join tree) are two ways to the same per-owner values, side by
        // side.
        let term = join.join
        let relationship = term.hops[term.countedHop]
        guard let inverse = relationship.inverseRelationship else { return [:] }
        if term.aggregation == .count, join.destinationRows.request.predicate == nil, Self.isIndexedForeignKey(inverse),
           let tree = try transaction.tree(named: Self.foreignKeyTree(inverse)) {
            // Every destination counts: its foreign-key tree holds one entry per destination
            // with an owner, which is the entry's first component — counted from the keys
            // alone, no row read.
            // The entries come in owner order: each owner's run is counted, then stored once.
            var counts: [Int64: Operand] = [:]
            var run: (owner: Int64, count: Int64)?
            try tree.forEach { entry, _ in
                guard let owner = KeyEncoding.firstInteger(entry) else {
                    throw ArborError(.store, "an entry of \(tree.name) does not begin with an owner's key")
                }
                if run?.owner == owner {
                    run!.count += 1
                } else {
                    if let (previous, count) = run { counts[previous] = .int(count) }
                    run = (owner, 1)
                }
                return true
            }
            if let (previous, count) = run { counts[previous] = .int(count) }
            return counts
        }
        // The matching destinations' values (none for a count), by owner, in the destinations'
        // key order (the order a loaded relationship gives the evaluator).
        var perOwner: [Int64: [Operand]] = [:]
        var perDestination: [Int64: Operand] = [:]
        let attribute: String? = if case .apply(_, let key) = term.aggregation { key } else { nil }
        if let access = try open(join.destinationRows, transaction: transaction) {
            try run(access) { id, row in
                let value: Operand = attribute.map { key in
                    if case .attribute(let stored)? = row.values[key] { Operand(stored) } else { .null }
                } ?? .null
                if inverse.isToMany {
                    perDestination[id.key] = value
                } else if case .object(let owner)? = row.values[inverse.name] {
                    perOwner[owner.key, default: []].append(value)
                }
                return true
            }
        }
        if inverse.isToMany, !perDestination.isEmpty, let tree = try transaction.tree(named: Self.joinTree(inverse)) {
            // Each destination's owners from the join tree, in destination order, each owner
            // given the destination's value.
            for destination in perDestination.keys.sorted() {
                let value = perDestination[destination] ?? .null
                try forEachSource(in: tree, of: [destination]) { owner in
                    perOwner[owner, default: []].append(value)
                    return true
                }
            }
        }
        var values: [Int64: Operand] = [:]
        values.reserveCapacity(perOwner.count)
        for (owner, elements) in perOwner { values[owner] = try term.aggregate(elements) }
        return values
    }

    /// The check of the fetched rows a join's keys make: their first relationship's foreign key
    /// (a to-one first hop) or their own key (a to-many one), among the keys — for `NONE` and
    /// `ALL`, not among them.
    func check(for join: JoinTerm, keys: Set<Int64>, transaction: ReadTransaction) throws -> JoinCheck {
        let first = join.hops[0]
        let negated = join.quantifier == .none
        guard first.isToMany else {
            return .foreignKey(relationship: first.name, keys: keys, matchesNil: join.matchesNil && join.nilIsElement(at: 0), negated: negated)
        }
        guard let source = first.entity else { return .ownKey(keys: [], negated: negated) }
        return .ownKey(keys: try keysReaching(keys, through: first, from: source, nilMatches: false, transaction: transaction), negated: negated)
    }

    /// The keys of `entity`'s rows (sub-entities included) whose `relationship` holds one of
    /// `keys` (or, with `matchesNil`, nothing): through the relationship's foreign-key tree, one
    /// range per key, while the keys are few; else by reading the rows.
    func sourceKeys(of entity: EntityDescription, through relationship: RelationshipDescription, in keys: Set<Int64>, matchesNil: Bool,
                    transaction: ReadTransaction) throws -> Set<Int64> {
        if !matchesNil, let tree = try foreignKeyTree(for: relationship, keyCount: keys.count, transaction: transaction) {
            var found = Set<Int64>()
            try forEachSource(in: tree, of: keys) { key in
                found.insert(key)
                return true
            }
            return found
        }
        var found = Set<Int64>()
        guard let rows = try transaction.tree(named: Self.rowsTree(entity)) else { return found }
        let raw = RawRow(store: self, placeholder: objectID(entity.name, 0))
        var formats: [RowFormat] = []
        try rows.forEach { entry, value in
            let known = formats.first { $0.owns(value) }
            guard let rowEntity = known?.entity ?? entityName(ofRow: value, hierarchy: entity).flatMap(model.entity(named:)) else {
                throw ArborError(.store, "a row of \(rows.name) is malformed")
            }
            guard rowEntity.isKind(of: entity) else { return true }
            let format = known ?? format(of: rowEntity)
            if known == nil { formats.append(format) }
            raw.format = format
            guard raw.load(value) else { throw ArborError(.store, "a row of \(rows.name) is malformed") }
            switch try raw.operand(forKey: relationship.name) {
            case .objectID(let id)?: if keys.contains(id.key) { found.insert(try Self.lastKey(of: entry, in: rows.name)) }
            default: if matchesNil { found.insert(try Self.lastKey(of: entry, in: rows.name)) }
            }
            return true
        }
        return found
    }

    /// The foreign-key tree of `relationship`, when reading it per key beats reading the rows:
    /// the relationship keeps one, and `keyCount` is under an eighth of its destination's rows
    /// (the rows tree's sequence — keys ever handed out — standing for their number, read from
    /// the catalog at no cost). Nil otherwise.
    func foreignKeyTree(for relationship: RelationshipDescription, keyCount: Int, transaction: ReadTransaction) throws -> Tree? {
        guard Self.isIndexedForeignKey(relationship), let destination = relationship.destinationEntity,
              let destinationRows = try transaction.tree(named: Self.rowsTree(destination)) else { return nil }
        guard UInt64(keyCount) < max(1, destinationRows.descriptor.sequence / 8) else { return nil }
        return try transaction.tree(named: Self.foreignKeyTree(relationship))
    }

    /// Whether `keyCount` of `entity`'s rows are few enough to read one by one (under an eighth
    /// of its rows, as for a foreign-key tree).
    func fewRows(_ keyCount: Int, of entity: EntityDescription, transaction: ReadTransaction) throws -> Bool {
        guard let rows = try transaction.tree(named: Self.rowsTree(entity)) else { return true }
        return UInt64(keyCount) < max(1, rows.descriptor.sequence / 8)
    }

    /// Hands `body` the primary key of every entry of a foreign-key (or join) tree whose first
    /// key is one of `keys`, key by key in ascending order; `body` returns false to stop.
    func forEachSource(in tree: Tree, of keys: Set<Int64>, _ body: (Int64) throws -> Bool) throws {
        for key in keys.sorted() {
            let prefix = self.key(key)
            var more = true
            try tree.forEach(from: prefix) { entry, _ in
                guard entry.starts(with: prefix) else { return false }
                more = try body(try Self.lastKey(of: entry, in: tree.name))
                return more
            }
            if !more { return }
        }
    }
}

extension NativeStore {
    /// `rows` in the order `descriptors` give (stable), each sort key read from the row — or,
    /// for a key path through to-one relationships (`department.name`), from the destination's
    /// row, read once per destination.
    func sorted(_ rows: [(ManagedObjectID, StoreRow)], by descriptors: [ObjectSortDescriptor],
                transaction: ReadTransaction) throws -> [(ManagedObjectID, StoreRow)] {
        let evaluator = PredicateEvaluator()
        guard descriptors.contains(where: { $0.key.utf8.contains(UInt8(ascii: ".")) }) else {
            // Each row's keys are read before the next row's: one row object serves them all.
            let decoded = DecodedRow()
            return try ObjectSortDescriptor.sort(rows, by: descriptors, evaluator: evaluator) { .row(decoded.set($0.1, id: $0.0)) }
        }
        var reader = RowPathReader(store: self, transaction: transaction)
        let paths = descriptors.map { $0.keys[...] }
        let keyed = try rows.map { element in
            (element, try paths.map { try reader.value(of: $0, on: element.1, id: element.0) })
        }
        return ObjectSortDescriptor.stableSort(keyed, descriptors).map(\.0)
    }
}
