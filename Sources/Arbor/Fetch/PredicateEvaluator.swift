import Foundation

/// Evaluates predicates and expressions: in memory against managed objects, dictionaries and
/// plain values, and inside stores against rows — one set of rules for all of them
/// (docs/predicates.md, "Semantics").
///
/// One evaluator serves many evaluations (a fetch, a filter): it keeps the regular expressions
/// it compiles.
final class PredicateEvaluator {
    /// Values of `$variables`.
    var variables: [String: Operand]
    /// Resolves object IDs met along key paths (to-one destinations, to-many elements) to
    /// objects; nil outside a context.
    var context: ManagedObjectContext?
    private var regularExpressions: [String: NSRegularExpression] = [:]

    init(variables: [String: Operand] = [:], context: ManagedObjectContext? = nil) {
        self.variables = variables
        self.context = context
    }

    // MARK: Predicates

    func evaluate(_ predicate: ObjectPredicate, on subject: Operand) throws -> Bool {
        switch predicate {
        case .constant(let value): return value
        case .not(let inner): return try !evaluate(inner, on: subject)
        case .and(let terms):
            for term in terms where try !evaluate(term, on: subject) { return false }
            return true
        case .or(let terms):
            for term in terms where try evaluate(term, on: subject) { return true }
            return false
        case .comparison(let comparison):
            return try evaluate(comparison, on: subject)
        }
    }

    func evaluate(_ comparison: ComparisonPredicate, on subject: Operand) throws -> Bool {
        let left = try value(of: comparison.left, on: subject)
        let right = try value(of: comparison.right, on: subject)
        switch comparison.modifier {
        case .direct:
            // A collection on the left of anything but CONTAINS is taken element by element
            // (ANY), unless both sides are collections compared for equality.
            if case .collection(let elements) = left, comparison.operator != .contains {
                if case .collection = right, comparison.operator == .equalTo || comparison.operator == .notEqualTo {
                    return try compare(left, comparison.operator, right, comparison.options)
                }
                for element in elements where try compare(element, comparison.operator, right, comparison.options) { return true }
                return false
            }
            return try compare(left, comparison.operator, right, comparison.options)
        case .any, .all, .none:
            let elements: [Operand]
            switch left {
            case .collection(let items): elements = items
            case .null: elements = []
            default: elements = [left]
            }
            for element in elements {
                let matches = try compare(element, comparison.operator, right, comparison.options)
                switch comparison.modifier {
                case .any where matches: return true
                case .all where !matches: return false
                case .none where matches: return false
                default: continue
                }
            }
            return comparison.modifier != .any
        }
    }

    // MARK: Comparisons

    func typeError(_ op: ComparisonPredicate.Operator, _ a: Operand, _ b: Operand) -> ArborError {
        ArborError(.wrongValueType, "\(op.rawValue) cannot compare \(a.kindName) with \(b.kindName)")
    }

    func compare(_ a: Operand, _ op: ComparisonPredicate.Operator, _ b: Operand, _ options: ComparisonPredicate.Options) throws -> Bool {
        // Long: one case per operator, each a few lines: the switch is the table of what each
        // operator does with nil, NaN and values of mismatched kinds.
        switch op {
        case .equalTo: return Self.equal(a, b, options)
        case .notEqualTo: return !Self.equal(a, b, options)
        case .lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo:
            if a.isNull || b.isNull { return false }
            guard let order = Self.order(a, b, options) else {
                // NaN is in no order with any number: the comparison is false.
                if Self.isNumberPair(a, b) { return false }
                throw typeError(op, a, b)
            }
            switch op {
            case .lessThan: return order < 0
            case .lessThanOrEqualTo: return order <= 0
            case .greaterThan: return order > 0
            default: return order >= 0
            }
        case .between:
            guard case .collection(let bounds) = b, bounds.count == 2 else {
                throw ArborError(.wrongValueType, "BETWEEN needs {low, high} on its right; \(b.kindName) found")
            }
            if a.isNull || bounds[0].isNull || bounds[1].isNull { return false }
            guard let low = Self.order(a, bounds[0], options), let high = Self.order(a, bounds[1], options) else {
                if Self.isNumberPair(a, bounds[0]) && Self.isNumberPair(a, bounds[1]) { return false }
                throw typeError(op, a, bounds[0])
            }
            return low >= 0 && high <= 0
        case .in:
            switch b {
            case .collection(let elements): return elements.contains { Self.equal(a, $0, options) }
            case .null: return false
            case .string(let haystack):
                guard case .string(let needle) = a else {
                    if a.isNull { return false }
                    throw typeError(op, a, b)
                }
                return Self.scalarContains(Self.fold(haystack, options), Self.fold(needle, options))
            default:
                throw ArborError(.wrongValueType, "IN needs a collection or a string on its right; \(b.kindName) found")
            }
        case .contains:
            switch a {
            case .collection(let elements): return elements.contains { Self.equal($0, b, options) }
            case .null: return false
            case .string(let haystack):
                guard case .string(let needle) = b else {
                    if b.isNull { return false }
                    throw typeError(op, a, b)
                }
                return Self.scalarContains(Self.fold(haystack, options), Self.fold(needle, options))
            default:
                throw ArborError(.wrongValueType, "CONTAINS needs a collection or a string on its left; \(a.kindName) found")
            }
        case .beginsWith, .endsWith, .like, .matches:
            guard case .string(let text) = a, case .string(let pattern) = b else {
                if a.isNull || b.isNull { return false }
                throw typeError(op, a, b)
            }
            switch op {
            case .beginsWith: return Self.fold(text, options).unicodeScalars.starts(with: Self.fold(pattern, options).unicodeScalars)
            case .endsWith:
                return Self.fold(text, options).unicodeScalars.reversed().starts(with: Self.fold(pattern, options).unicodeScalars.reversed())
            case .like: return Self.like(Array(Self.fold(text, options).unicodeScalars), Array(Self.fold(pattern, options).unicodeScalars))
            default: return try matches(text, pattern, options)
            }
        }
    }

    /// Strings folded for `[c]`, `[d]`, `[cd]` — the same fold as a case- and
    /// diacritic-insensitive index uses.
    static func fold(_ text: String, _ options: ComparisonPredicate.Options) -> String {
        if options.isEmpty { return text }
        if options == .caseInsensitive { return text.lowercased() }
        var folded = text.folding(options: .diacriticInsensitive, locale: nil)
        if options.contains(.caseInsensitive) { folded = folded.lowercased() }
        return folded
    }

    /// Whether `needle`'s Unicode scalars occur in a row in `haystack`'s (a byte search on UTF-8,
    /// which finds exactly the scalar-aligned matches; not `String.contains`, which matches by
    /// `Character` and would disagree with BEGINSWITH and the store's binary order).
    static func scalarContains(_ haystack: String, _ needle: String) -> Bool {
        let text = Array(haystack.utf8), pattern = Array(needle.utf8)
        guard !pattern.isEmpty else { return true }
        guard pattern.count <= text.count else { return false }
        let first = pattern[0]
        var start = 0
        while start + pattern.count <= text.count {
            if text[start] == first && text[start..<(start + pattern.count)].elementsEqual(pattern) { return true }
            start += 1
        }
        return false
    }

    /// Equality: nil equals only nil; numbers (and booleans, as 0 and 1) compare by value;
    /// strings by their Unicode scalars (after folding); objects by ID; collections element by
    /// element.
    static func equal(_ a: Operand, _ b: Operand, _ options: ComparisonPredicate.Options) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.null, _), (_, .null): return false
        case (.string(let x), .string(let y)):
            if options.isEmpty { return x.unicodeScalars.elementsEqual(y.unicodeScalars) }
            return fold(x, options).unicodeScalars.elementsEqual(fold(y, options).unicodeScalars)
        case (.bool(let x), .bool(let y)): return x == y
        case (.date(let x), .date(let y)): return x == y
        case (.data(let x), .data(let y)): return x == y
        case (.uuid(let x), .uuid(let y)): return x == y
        case (.url(let x), .url(let y)): return x == y
        case (.collection(let x), .collection(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { equal($0, $1, options) }
        case (.opaque(let x), .opaque(let y)): return x != nil && x == y
        default:
            if let x = objectID(a), let y = objectID(b) { return x == y }
            if case .object(let x) = a, case .object(let y) = b { return x === y }
            guard let order = numericOrder(a, b) else { return false }
            return order == 0
        }
    }

    static func objectID(_ value: Operand) -> ManagedObjectID? {
        switch value {
        case .objectID(let id): id
        case .object(let object): object.objectID
        case .row(let row): row.objectID
        default: nil
        }
    }

    /// The order of two numbers (booleans count as 0 and 1): exact for integers and decimals,
    /// by `Double` otherwise; nil for other values, or when a NaN is involved.
    static func numericOrder(_ a: Operand, _ b: Operand) -> Int? {
        func sign<T: Comparable>(_ x: T, _ y: T) -> Int { x < y ? -1 : (x == y ? 0 : 1) }
        switch (a, b) {
        case (.int(let x), .int(let y)): return sign(x, y)
        case (.decimal(let x), .decimal(let y)): return x.isNaN || y.isNaN ? nil : sign(x, y)
        case (.decimal(let x), .int(let y)): return x.isNaN ? nil : sign(x, Decimal(y))
        case (.int(let x), .decimal(let y)): return y.isNaN ? nil : sign(Decimal(x), y)
        default:
            guard let x = double(a), let y = double(b), !x.isNaN, !y.isNaN else { return nil }
            if case .int(let i) = a, case .double = b { return order(i, y) }
            if case .double = a, case .int(let j) = b { return order(j, x).map { -$0 } }
            return sign(x, y)
        }
    }

    /// The exact order of an integer and a double (no rounding of either; nil for NaN).
    static func order(_ i: Int64, _ d: Double) -> Int? {
        if d.isNaN { return nil }
        if d >= 9_223_372_036_854_775_808.0 { return -1 }
        if d < -9_223_372_036_854_775_808.0 { return 1 }
        let whole = d.rounded(.towardZero)
        let truncated = Int64(whole)
        if i != truncated { return i < truncated ? -1 : 1 }
        let fraction = d - whole
        return fraction > 0 ? -1 : (fraction < 0 ? 1 : 0)
    }

    static func double(_ value: Operand) -> Double? {
        switch value {
        case .int(let n): Double(n)
        case .double(let d): d
        case .decimal(let d): NSDecimalNumber(decimal: d).doubleValue
        case .bool(let b): b ? 1 : 0
        default: nil
        }
    }

    /// The order of two values of one ordered kind: numbers, strings (by Unicode scalars, after
    /// folding), dates, booleans; nil for values that have no order between them.
    static func order(_ a: Operand, _ b: Operand, _ options: ComparisonPredicate.Options) -> Int? {
        func sign<T: Comparable>(_ x: T, _ y: T) -> Int { x < y ? -1 : (x == y ? 0 : 1) }
        switch (a, b) {
        case (.string(let x), .string(let y)):
            return scalarOrder(fold(x, options), fold(y, options))
        case (.date(let x), .date(let y)): return sign(x, y)
        case (.uuid(let x), .uuid(let y)): return sign(x.uuidString, y.uuidString)
        case (.data(let x), .data(let y)):
            return x.lexicographicallyPrecedes(y) ? -1 : (x == y ? 0 : 1)
        default:
            return numericOrder(a, b)
        }
    }

    static func isNumberPair(_ a: Operand, _ b: Operand) -> Bool { double(a) != nil && double(b) != nil }

    /// The binary order of two strings' Unicode scalars (the order of their UTF-8 bytes: the
    /// order of the store's keys).
    static func scalarOrder(_ x: String, _ y: String) -> Int {
        var i = x.utf8.makeIterator(), j = y.utf8.makeIterator()
        while true {
            switch (i.next(), j.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case (let p?, let q?): if p != q { return p < q ? -1 : 1 }
            }
        }
    }

    /// `LIKE`: `*` matches any run of characters, `?` one character, `\` escapes the next.
    static func like(_ text: [Unicode.Scalar], _ pattern: [Unicode.Scalar]) -> Bool {
        // Classic wildcard matching with one backtrack point (linear for each star).
        var t = 0, p = 0, starP = -1, starT = 0
        func literal(at index: Int) -> (Unicode.Scalar, width: Int, wildcard: Bool) {
            if pattern[index] == "\\", index + 1 < pattern.count { return (pattern[index + 1], 2, false) }
            return (pattern[index], 1, pattern[index] == "*" || pattern[index] == "?")
        }
        while t < text.count {
            if p < pattern.count {
                let (scalar, width, wildcard) = literal(at: p)
                if wildcard && scalar == "*" {
                    starP = p
                    starT = t
                    p += 1
                    continue
                }
                if (wildcard && scalar == "?") || (!wildcard && scalar == text[t]) {
                    t += 1
                    p += width
                    continue
                }
            }
            guard starP >= 0 else { return false }
            p = starP + 1
            starT += 1
            t = starT
        }
        while p < pattern.count, pattern[p] == "*" { p += 1 }
        return p == pattern.count
    }

    /// `MATCHES`: the whole string matches the regular expression (ICU syntax).
    func matches(_ text: String, _ pattern: String, _ options: ComparisonPredicate.Options) throws -> Bool {
        let cacheKey = "\(options.rawValue):\(pattern)"
        let expression: NSRegularExpression
        if let cached = regularExpressions[cacheKey] {
            expression = cached
        } else {
            do {
                expression = try NSRegularExpression(pattern: "^(?:" + Self.fold(pattern, options.subtracting(.caseInsensitive)) + ")\\z",
                                                     options: options.contains(.caseInsensitive) ? [.caseInsensitive] : [])
            } catch {
                throw ArborError(.wrongValueType, "MATCHES: \"\(pattern)\" is not a valid regular expression")
            }
            regularExpressions[cacheKey] = expression
        }
        let subject = Self.fold(text, options.subtracting(.caseInsensitive))
        let range = NSRange(subject.startIndex..., in: subject)
        return expression.firstMatch(in: subject, options: [.anchored], range: range) != nil
    }
}
