import Foundation

/// Evaluates key paths on managed objects, with Core Data's collection operators.
enum KeyPathEvaluator {
    static let operators: Set<String> = ["@count", "@sum", "@avg", "@min", "@max", "@distinctUnionOfObjects"]

    /// The value of `path` on `root` (an object, a collection of values, or nil).
    static func evaluate(_ path: ArraySlice<String>, on root: Any?) throws -> Any? {
        guard let key = path.first else { return root }
        let rest = path.dropFirst()
        if key.hasPrefix("@") {
            guard operators.contains(key) else {
                throw ArborError(.unknownKey, "\"\(key)\" is not a collection operator (\(operators.sorted().joined(separator: ", ")))", key: key)
            }
            let elements = root.map { self.elements(of: $0) ?? [$0] } ?? []
            if key == "@count" { return elements.count }
            let values = try elements.map { try evaluate(rest, on: $0) }.compactMap { $0 }
            return try aggregate(key, values)
        }
        guard !key.isEmpty else {
            throw ArborError(.unknownKey, "a key path has an empty key", key: key)
        }
        if let object = root as? ManagedObject {
            return try evaluate(rest, on: try object.value(forKey: key))
        }
        guard let root else { return nil }
        // Through a collection: the path continues on every element; the results are flattened.
        // A key after a plain value (`name.count`) names nothing.
        guard let items = elements(of: root) else {
            throw ArborError(.unknownKey, "\"\(key)\" cannot follow a \(type(of: root)) value: only objects and collections have keys", key: key)
        }
        var flat: [Any] = []
        for item in items {
            guard let result = try evaluate(path, on: item) else { continue }
            flat.append(contentsOf: elements(of: result) ?? [result])
        }
        if root is [Any] { return flat }
        return distinct(flat)
    }

    /// `values` without repeats, in first-seen order: managed objects by identity, other values
    /// by hashable equality (values that are not hashable are all kept).
    static func distinct(_ values: [Any]) -> [Any] {
        var seen = Set<AnyHashable>()
        return values.filter { value in
            let key = (value as? ManagedObject).map { AnyHashable(ObjectIdentifier($0)) } ?? (value as? AnyHashable)
            guard let key else { return true }
            return seen.insert(key).inserted
        }
    }

    /// The elements of a collection value (a to-many relationship's objects, or values gathered
    /// through one); nil for a single value.
    static func elements(of value: Any) -> [Any]? {
        switch value {
        case let set as Set<ManagedObject>: Array(set)
        case let set as Set<AnyHashable>: Array(set)
        case let array as [Any]: array
        default: nil
        }
    }

    /// `@sum`, `@avg`, `@min`, `@max` or `@distinctUnionOfObjects` over `values`.
    static func aggregate(_ operation: String, _ values: [Any]) throws -> Any? {
        if operation == "@distinctUnionOfObjects" { return distinct(values) }
        if operation == "@min" || operation == "@max" {
            let wantMax = operation == "@max"
            var best: Any?
            for value in values {
                guard let current = best else {
                    best = value
                    continue
                }
                guard let order = compare(value, current) else {
                    throw ArborError(.wrongValueType, "\(operation) cannot compare \(type(of: value)) with \(type(of: current))")
                }
                if wantMax ? order > 0 : order < 0 { best = value }
            }
            return best
        }
        // @sum and @avg: integers sum as Int64 (as Decimal when that overflows), decimals as
        // Decimal, anything else as Double.
        if values.allSatisfy({ $0 is any BinaryInteger }) {
            var total: Int64? = 0
            for value in values {
                guard let sum = total else { break }
                let (next, overflow) = sum.addingReportingOverflow(int64(value))
                total = overflow ? nil : next
            }
            if let total {
                return operation == "@sum" ? total : (values.isEmpty ? nil : Double(total) / Double(values.count))
            }
        }
        if values.allSatisfy({ $0 is Decimal || $0 is any BinaryInteger }) {
            let total = values.reduce(Decimal(0)) { sum, value in
                sum + ((value as? Decimal) ?? Decimal(int64(value)))
            }
            return operation == "@sum" ? total : (values.isEmpty ? nil : total / Decimal(values.count))
        }
        var total = 0.0
        for value in values {
            guard let number = double(value) else {
                throw ArborError(.wrongValueType, "\(operation) needs numbers; \(type(of: value)) found")
            }
            total += number
        }
        return operation == "@sum" ? total : (values.isEmpty ? nil : total / Double(values.count))
    }

    /// The order of two values of comparable kinds, or nil.
    static func compare(_ a: Any, _ b: Any) -> Int? {
        func order<T: Comparable>(_ x: T, _ y: T) -> Int { x < y ? -1 : (x == y ? 0 : 1) }
        switch (a, b) {
        case (let x as String, let y as String): return order(x, y)
        case (let x as Date, let y as Date): return order(x, y)
        case (let x as Decimal, let y as Decimal): return order(x, y)
        case (let x as any BinaryInteger, let y as any BinaryInteger):
            return order(int64(x), int64(y))
        default:
            guard let x = double(a), let y = double(b) else { return nil }
            return order(x, y)
        }
    }

    /// An integer of any type as Int64 (0 for anything else).
    static func int64(_ value: Any) -> Int64 {
        func convert<T: BinaryInteger>(_ number: T) -> Int64 { Int64(truncatingIfNeeded: number) }
        guard let number = value as? any BinaryInteger else { return 0 }
        return convert(number)
    }

    static func double(_ value: Any) -> Double? {
        switch value {
        case let number as any BinaryFloatingPoint: Double(number)
        case let number as any BinaryInteger: Double(number)
        case let number as Decimal: NSDecimalNumber(decimal: number).doubleValue
        default: nil
        }
    }
}
