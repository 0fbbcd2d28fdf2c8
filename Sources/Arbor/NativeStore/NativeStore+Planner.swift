import Foundation

// The planner: which index and ranges, or a scan, serve a fetch (docs/predicates.md, "What uses
// an index"); split from NativeStore+Fetch.swift, which runs the plans.

/// A ``StoreFetch`` ready to run in the native store: its entity and its physical plan, made by
/// ``NativeStore/prepare(_:)``, the one place a fetch is planned.
struct PreparedFetch {
    private(set) var request: StoreFetch
    let entity: EntityDescription
    let plan: FetchPlan

    init(request: StoreFetch, entity: EntityDescription, plan: FetchPlan) {
        (self.request, self.entity, self.plan) = (request, entity, plan)
    }

    /// The same fetch decoding only `properties` of the rows (the plan does not depend on which
    /// columns are decoded).
    func decoding(_ properties: Set<String>?) -> PreparedFetch {
        var copy = self
        copy.request.decodedProperties = properties
        return copy
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

    func queryPlan(entity: EntityDescription, format: RowFormat, request: StoreFetch) -> QueryPlan {
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
        if index == nil, let filter { plan.filterOnEncodedValues = ScanFilter.compiles(filter, format: format) }
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

    /// `request` ready to run here: checked (its window, its entity) and planned, once, for
    /// whichever way it runs (its rows, one at a time, a count, the rows a grouping reads, a
    /// batch request's, `explain`).
    ///
    /// - Throws: ``ArborError/Code/invalidFetchRequest`` for a negative offset or limit or an
    ///   entity the model lacks.
    func prepare(_ request: StoreFetch) throws -> PreparedFetch {
        try request.checkWindow()
        let entity = try entity(request.entityName)
        return PreparedFetch(request: request, entity: entity, plan: plan(request, entity: entity))
    }

    /// Chooses how to run `request`: the cheapest index condition among the predicate's
    /// top-level conjuncts, or an index giving the requested order, or a scan.
    func plan(_ request: StoreFetch, entity: EntityDescription) -> FetchPlan {
        // Long: one choice of access path, step by step (joins out, index candidates, the cheapest
        // merged with its neighbours on the same index, then the sort index), each step refining
        // the same `plan`.
        var plan = FetchPlan(filter: request.predicate, sort: request.sortDescriptors)
        let paths = accessPaths[ObjectIdentifier(entity)] ?? Self.accessPaths(of: entity)
        // Join terms run as joins; the rest are the row filter and the index candidates.
        let split = request.split(for: entity)
        let rowConjuncts = split.rowTerms
        if !split.joins.isEmpty {
            plan.joins = planJoins(split.joins)
            plan.filter = PredicateSplit.conjunction(rowConjuncts)
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
            plan.exact = chosen.exact && merged == rowConjuncts.count + split.joins.count
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
        // Long: one conjunct to key ranges: the key's component encoder is chosen first (an
        // attribute's or a to-one's), then one case per operator builds its ranges with it.
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
        // A relationship's component is a primary key, written in the store's key form; an
        // attribute's value is always in the standard form.
        var primaryKeys = false
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
            // Objects are equal or not; they have no order.
            guard !folded, op == .equalTo || op == .in else { return nil }
            primaryKeys = true
            component = { [identifier] value in
                guard case .objectID(let id) = value, let key = id.primaryKey, id.storeIdentifier == identifier else { return nil }
                return .int(key)
            }
        } else {
            return nil
        }

        let compact = primaryKeys && compactKeys
        func point(_ value: KeyComponent) -> FetchPlan.KeyRange {
            let bytes = KeyEncoding.encode([value], compactIntegers: compact)
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
            let sorted = Set(components.map { KeyEncoding.encode([$0], compactIntegers: compact) }).sorted { $0.lexicographicallyPrecedes($1) }
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
}
