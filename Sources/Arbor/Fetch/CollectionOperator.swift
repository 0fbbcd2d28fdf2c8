import Foundation

/// A collection operator of a key path — `@count`, `@sum`, `@avg`, `@min`, `@max`,
/// `@distinctUnionOfObjects` — in one implementation, for predicates, sort keys, dictionary
/// expressions, the store's aggregates and `value(forKeyPath:)` alike (docs/predicates.md,
/// "Collection operators").
///
/// The two callers differ in one rule, which they name (``Rules``): which elements
/// `@distinctUnionOfObjects` takes to be the same. Everything else — nils left out before the
/// operator, integers summed exactly (as a decimal past `Int64`), `@avg` of nothing nil, `@min`
/// and `@max` skipping NaN and keeping the first of equal elements, strings ordered by Unicode
/// scalars, booleans refused by `@sum` — is one code path.
enum CollectionOperator: String, CaseIterable, Sendable {
    case count = "@count"
    case sum = "@sum"
    case avg = "@avg"
    case min = "@min"
    case max = "@max"
    case distinctUnionOfObjects = "@distinctUnionOfObjects"

    /// Which elements `@distinctUnionOfObjects` takes to be the same.
    enum Rules: Sendable {
        /// A predicate's equality: objects by ID, numbers of any kinds by value (`1 == 1.0`).
        case predicate
        /// Key-value coding's: objects by identity, other values when they are of one kind and
        /// equal (`1` and `1.0` are two values), as Foundation compares a collection's
        /// elements.
        case keyValueCoding
    }

    /// What an operator makes of its elements.
    enum Result {
        /// A new value: `@count`, `@sum`, `@avg` (nil of nothing: `.null`).
        case value(Operand)
        /// One of the elements, by position (nil: none): `@min`, `@max`.
        case element(Int?)
        /// Some of the elements, by position, in order: `@distinctUnionOfObjects`.
        case elements([Int])
    }

    /// Every operator's name, sorted (for messages).
    static let names = allCases.map(\.rawValue).sorted()

    /// The operator named `name`.
    ///
    /// - Throws: ``ArborError/Code/unknownKey`` for any other name, listing the operators.
    init(named name: String) throws {
        guard let known = CollectionOperator(rawValue: name) else {
            throw ArborError(.unknownKey, "\"\(name)\" is not a collection operator (\(Self.names.joined(separator: ", ")))", key: name)
        }
        self = known
    }

    /// Whether `name` is an operator's.
    static func isOperator(_ name: String) -> Bool { CollectionOperator(rawValue: name) != nil }

    /// The operator applied to `elements` (nils already left out; `@count` counts whatever it
    /// is given).
    func apply(to elements: [Operand], rules: Rules) throws -> Result {
        switch self {
        case .count:
            return .value(.int(Int64(elements.count)))
        case .sum, .avg:
            var total: Operand = .int(0)
            for element in elements { total = try Self.adding(element, to: total, self) }
            return .value(try Self.finish(self, total, count: elements.count))
        case .min, .max:
            var best: Int?
            for position in elements.indices {
                guard let current = best else { best = position; continue }
                if try Self.replaces(elements[position], elements[current], self) { best = position }
            }
            return .element(best)
        case .distinctUnionOfObjects:
            var kept: [Int] = []
            for position in elements.indices where !kept.contains(where: { Self.same(elements[$0], elements[position], rules) }) {
                kept.append(position)
            }
            return .elements(kept)
        }
    }

    /// Whether two elements are one for `@distinctUnionOfObjects` under `rules`.
    static func same(_ a: Operand, _ b: Operand, _ rules: Rules) -> Bool {
        switch rules {
        case .predicate:
            return PredicateEvaluator.equal(a, b, [])
        case .keyValueCoding:
            if case .object(let x) = a, case .object(let y) = b { return x === y }
            return a.kindName == b.kindName && kindOrder(a) == kindOrder(b) && PredicateEvaluator.equal(a, b, [])
        }
    }

    /// Tells numbers of different kinds apart (``Operand/kindName`` calls them all "a number").
    private static func kindOrder(_ value: Operand) -> Int {
        switch value {
        case .int: 1
        case .double: 2
        case .decimal: 3
        default: 0
        }
    }

    /// Whether `value` replaces `best` as the `@min` or `@max` so far: strictly smaller or
    /// larger, so that the first of equal values stays. A NaN is in no order with any number:
    /// it never replaces, and any number replaces it, so the extremum skips NaNs (it is NaN only
    /// when every value is), whatever their order. Also the step of the store's aggregates,
    /// computed a row at a time.
    static func replaces(_ value: Operand, _ best: Operand, _ operation: CollectionOperator) throws -> Bool {
        if case .double(let candidate) = value, candidate.isNaN { return false }
        if case .double(let held) = best, held.isNaN, PredicateEvaluator.double(value) != nil, !PredicateEvaluator.isBool(value) { return true }
        guard let order = PredicateEvaluator.order(value, best, []) else {
            throw ArborError(.wrongValueType, "\(operation.rawValue) cannot compare \(value.kindName) with \(best.kindName)")
        }
        return operation == .max ? order > 0 : order < 0
    }

    /// `total` with `value` added, as `@sum` adds (numbers only, not booleans): integers as
    /// integers (as a decimal once that would overflow: the exact sum), a decimal makes a
    /// decimal, anything else a double. Also the step of the store's aggregates.
    static func adding(_ value: Operand, to total: Operand, _ operation: CollectionOperator) throws -> Operand {
        guard PredicateEvaluator.double(value) != nil, !PredicateEvaluator.isBool(value) else {
            throw ArborError(.wrongValueType, "\(operation.rawValue) needs numbers; \(value.kindName) found")
        }
        if case .int(let x) = total, case .int(let y) = value {
            let (result, overflow) = x.addingReportingOverflow(y)
            return overflow ? .decimal(Decimal(x) + Decimal(y)) : .int(result)
        }
        return try PredicateEvaluator().arithmetic(.add, total, value)
    }

    /// The `@sum` (`total` itself) or `@avg` (divided exactly by `count`; of nothing, nil) of a
    /// sum.
    static func finish(_ operation: CollectionOperator, _ total: Operand, count: Int) throws -> Operand {
        if operation != .avg { return total }
        if count == 0 { return .null }
        return try PredicateEvaluator().arithmetic(.divide, total, .int(Int64(count)))
    }
}
