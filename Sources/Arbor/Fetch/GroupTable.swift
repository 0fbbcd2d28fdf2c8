import Foundation

/// The groups met so far, found by their key values: hashed, then compared with the evaluator's
/// equality (so that rows fall into the groups an in-memory grouping makes).
struct GroupTable {
    private(set) var keys: [[Operand]] = []
    private var buckets: [Int: [Int]] = [:]

    /// The index of the group of `key`, made when new (`isNew`).
    mutating func group(of key: [Operand]) -> (index: Int, isNew: Bool) {
        var hasher = Hasher()
        for operand in key { Self.hash(operand, into: &hasher) }
        let hash = hasher.finalize()
        if let candidates = buckets[hash] {
            for index in candidates where zip(keys[index], key).allSatisfy({ PredicateEvaluator.equal($0, $1, []) }) {
                return (index, false)
            }
        }
        keys.append(key)
        buckets[hash, default: []].append(keys.count - 1)
        return (keys.count - 1, true)
    }

    /// A hash of `value` that equal values (by ``PredicateEvaluator/equal(_:_:_:)``) share:
    /// numbers of every kind by their value as a double.
    static func hash(_ value: Operand, into hasher: inout Hasher) {
        switch value {
        case .null: hasher.combine(0)
        case .bool(let b): hasher.combine(b)
        case .int, .double, .decimal:
            let number = PredicateEvaluator.double(value) ?? 0
            hasher.combine(number == 0 ? 0 : number)
        case .string(let s): for scalar in s.unicodeScalars { hasher.combine(scalar.value) }
        case .date(let d): hasher.combine(d)
        case .data(let d): hasher.combine(d)
        case .uuid(let u): hasher.combine(u)
        case .url(let u): hasher.combine(u)
        default: hasher.combine(PredicateEvaluator.objectID(value))
        }
    }
}
