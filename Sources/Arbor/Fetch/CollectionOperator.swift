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
            switch rules {
            case .predicate:
                // Equality across kinds (`1 == 1.0`) has no hash: each element against those kept.
                for position in elements.indices where !kept.contains(where: { PredicateEvaluator.equal(elements[$0], elements[position], []) }) {
                    kept.append(position)
                }
            case .keyValueCoding:
                // A key through a to-many relationship takes its distinct values this way, over
                // every destination: hashed, in one pass.
                var seen = Set<AnyHashable>()
                for position in elements.indices where Self.identity(elements[position]).map({ seen.insert($0).inserted }) ?? true {
                    kept.append(position)
                }
            }
            return .elements(kept)
        }
    }

    /// What tells an element apart under key-value coding's rules: an object's identity, else
    /// its kind and value (nil: a value with no hash — a dictionary, a collection — which is
    /// always kept).
    private static func identity(_ value: Operand) -> AnyHashable? {
        switch value {
        case .null: nil
        case .bool(let b): AnyHashable(KindedValue(kind: 1, value: b))
        case .int(let n): AnyHashable(KindedValue(kind: 2, value: n))
        case .double(let d): AnyHashable(KindedValue(kind: 3, value: d))
        case .decimal(let d): AnyHashable(KindedValue(kind: 4, value: d))
        case .string(let s): AnyHashable(KindedValue(kind: 5, value: s))
        case .date(let d): AnyHashable(KindedValue(kind: 6, value: d))
        case .data(let d): AnyHashable(KindedValue(kind: 7, value: d))
        case .uuid(let u): AnyHashable(KindedValue(kind: 8, value: u))
        case .url(let u): AnyHashable(KindedValue(kind: 9, value: u))
        case .objectID(let id): AnyHashable(KindedValue(kind: 10, value: id))
        case .object(let object): AnyHashable(ObjectIdentifier(object))
        case .row(let row): row.objectID.map { AnyHashable(KindedValue(kind: 10, value: $0)) }
        case .opaque(let value): value
        case .dictionary, .collection: nil
        }
    }

    /// A value with its kind, so that values of two kinds that compare equal stay two.
    private struct KindedValue<Value: Hashable>: Hashable {
        let kind: Int
        let value: Value
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
        // Integers first (the common case, a store's grouped sums row by row): an `.int` is a
        // number and never a truth value, so it needs none of the checks below.
        if case .int(let x) = total, case .int(let y) = value {
            let (result, overflow) = x.addingReportingOverflow(y)
            return overflow ? .decimal(Decimal(x) + Decimal(y)) : .int(result)
        }
        guard PredicateEvaluator.double(value) != nil, !PredicateEvaluator.isBool(value) else {
            throw ArborError(.wrongValueType, "\(operation.rawValue) needs numbers; \(value.kindName) found")
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
