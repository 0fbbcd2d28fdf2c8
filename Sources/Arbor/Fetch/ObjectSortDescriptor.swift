import Foundation

/// How to order objects by one key: Core Data's `NSSortDescriptor`, with a name that does not
/// clash with Foundation's `SortDescriptor`.
///
/// The key may be a key path through to-one relationships (`department.name`). Strings compare
/// by their Unicode scalars (the store's order), or folded with ``options`` (`[c]`, `[d]`).
///
/// **Nil ordering.** Ascending, nil sorts before every value; descending, after every value —
/// the order of the store's indexes read forwards and backwards. Values of different kinds sort
/// by kind (booleans, numbers, dates, strings, data, UUIDs, objects); NaN sorts after every number.
///
/// ```swift
/// request.sortDescriptors = [ObjectSortDescriptor(key: "lastName", options: .caseInsensitive),
///                            ObjectSortDescriptor(key: "salary", ascending: false)]
/// ```
public struct ObjectSortDescriptor: Sendable, Hashable, CustomStringConvertible {
    /// The key path sorted by.
    public var key: String
    /// Whether smaller values come first.
    public var ascending: Bool
    /// String folding: `.caseInsensitive`, `.diacriticInsensitive`, or both.
    public var options: ComparisonPredicate.Options

    /// A sort by `key` (a key path through to-one relationships).
    public init(key: String, ascending: Bool = true, options: ComparisonPredicate.Options = []) {
        self.key = key
        self.ascending = ascending
        self.options = options
    }

    /// The keys of ``key``.
    var keys: [String] { KeyPathEvaluator.components(of: key) }

    public var description: String {
        var text = key + (ascending ? " ascending" : " descending")
        if options.contains(.caseInsensitive) { text += " [c]" }
        if options.contains(.diacriticInsensitive) { text += " [d]" }
        return text
    }

    /// The order of two objects (managed objects, dictionaries, plain values) by this descriptor:
    /// negative when `a` comes first.
    ///
    /// - Throws: ``ArborError/Code/unknownKey`` for a key the objects do not have.
    public func compare(_ a: Any?, _ b: Any?) throws -> Int {
        let evaluator = PredicateEvaluator()
        let keys = self.keys[...]
        return order(try evaluator.value(of: keys, on: Operand.from(a)), try evaluator.value(of: keys, on: Operand.from(b)))
    }

    /// The order of two values by this descriptor.
    func order(_ a: Operand, _ b: Operand) -> Int {
        let result = Self.totalOrder(a, b, options)
        return ascending ? result : -result
    }

    /// A total order on values: nil first, then by kind, then by value (NaN after numbers).
    static func totalOrder(_ a: Operand, _ b: Operand, _ options: ComparisonPredicate.Options) -> Int {
        let (rankA, rankB) = (rank(a), rank(b))
        if rankA != rankB { return rankA < rankB ? -1 : 1 }
        switch (a, b) {
        case (.null, .null): return 0
        case (.double(let x), _) where x.isNaN: return PredicateEvaluator.double(b)?.isNaN == true ? 0 : 1
        case (_, .double(let y)) where y.isNaN: return -1
        case (.collection(let x), .collection(let y)): return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        default:
            if let order = PredicateEvaluator.order(a, b, options) { return order }
            if let x = PredicateEvaluator.objectID(a), let y = PredicateEvaluator.objectID(b) {
                // By entity, then key (temporary IDs, whose keys are negative, first).
                if x.entityName != y.entityName { return x.entityName < y.entityName ? -1 : 1 }
                return x.key < y.key ? -1 : (x.key == y.key ? 0 : 1)
            }
            return 0
        }
    }

    /// The sort rank of a value's kind (the store's key order: null, booleans, numbers, dates,
    /// strings, data, UUIDs).
    static func rank(_ value: Operand) -> Int {
        switch value {
        case .null: 0
        case .bool: 1
        case .int, .double, .decimal: 2
        case .date: 3
        case .string, .url: 4
        case .data: 5
        case .uuid: 6
        case .objectID, .object, .row: 7
        case .dictionary, .collection, .opaque: 8
        }
    }
}

extension Array {
    /// The elements in the order `descriptors` give (a stable sort: ties keep their order).
    ///
    /// - Throws: ``ArborError/Code/unknownKey`` for a key the elements do not have.
    public func sorted(by descriptors: [ObjectSortDescriptor]) throws -> [Element] {
        try ObjectSortDescriptor.sort(self, by: descriptors, evaluator: PredicateEvaluator()) { Operand.from($0) }
    }

    /// How many results a window of `limit` results after `offset` ends at, counting from the
    /// first (`Int.max` for no limit, and where the sum would overflow: "all the rest").
    static func windowEnd(offset: Int, limit: Int) -> Int {
        guard limit > 0 else { return Int.max }
        let (end, overflow) = offset.addingReportingOverflow(limit)
        return overflow ? Int.max : end
    }

    /// The elements after the first `offset`, at most `limit` of them (0: no limit): a fetch's
    /// window.
    func window(offset: Int, limit: Int) -> [Element] {
        var result = offset > 0 ? Array(dropFirst(offset)) : self
        if limit > 0, result.count > limit { result = Array(result.prefix(limit)) }
        return result
    }

    /// Whether `predicate` holds for each element, in order.
    ///
    /// - Throws: as ``ObjectPredicate/evaluate(with:substitutionVariables:)``.
    public func filtered(by predicate: ObjectPredicate) throws -> [Element] {
        let evaluator = PredicateEvaluator()
        return try filter { try evaluator.evaluate(predicate, on: Operand.from($0)) }
    }
}

extension ObjectSortDescriptor {
    /// `elements` in the order `descriptors` give, each element's sort values read once through
    /// the operand `subject` makes of it (a stable sort: ties keep their order). The key paths
    /// are split once, not per element.
    static func sort<T>(_ elements: [T], by descriptors: [ObjectSortDescriptor], evaluator: PredicateEvaluator,
                        subject: (T) -> Operand) throws -> [T] {
        guard !descriptors.isEmpty else { return elements }
        let paths = descriptors.map { $0.keys[...] }
        let keyed = try elements.map { element in
            let operand = subject(element)
            return (element, try paths.map { try evaluator.value(of: $0, on: operand) })
        }
        return stableSort(keyed, descriptors).map(\.0)
    }

    /// Sorts elements with precomputed sort values, stably.
    static func stableSort<T>(_ keyed: [(T, [Operand])], _ descriptors: [ObjectSortDescriptor]) -> [(T, [Operand])] {
        let indexed = keyed.enumerated().map { ($0.offset, $0.element) }
        return indexed.sorted { lhs, rhs in
            for (index, descriptor) in descriptors.enumerated() {
                let order = descriptor.order(lhs.1.1[index], rhs.1.1[index])
                if order != 0 { return order < 0 }
            }
            return lhs.0 < rhs.0
        }.map(\.1)
    }
}
