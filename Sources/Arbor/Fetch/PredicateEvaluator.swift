import Foundation
import OrderedCollections

/// A value while a predicate is evaluated.
enum Operand {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case decimal(Decimal)
    case string(String)
    case date(Date)
    case data(Data)
    case uuid(UUID)
    case url(URL)
    case objectID(ManagedObjectID)
    /// A managed object (evaluation in a context).
    case object(ManagedObject)
    /// A store row of `entity` (evaluation inside a store; keys are its attributes and to-one
    /// relationships).
    case row(StoreRow, ManagedObjectID?)
    /// A row read in place by a store's scan.
    case raw(RawRow)
    /// A dictionary (filtering plain values).
    case dictionary([String: Any?])
    case collection([Operand])
    /// Any other Swift value: it equals only itself, has no keys and no order.
    case opaque(AnyHashable?)

    init(_ value: PredicateValue) {
        switch value {
        case .null: self = .null
        case .bool(let b): self = .bool(b)
        case .int(let n): self = .int(n)
        case .double(let d): self = .double(d)
        case .decimal(let d): self = .decimal(d)
        case .string(let s): self = .string(s)
        case .date(let d): self = .date(d)
        case .data(let d): self = .data(d)
        case .uuid(let u): self = .uuid(u)
        case .url(let u): self = .url(u)
        case .objectID(let id): self = .objectID(id)
        case .list(let values): self = .collection(values.map(Operand.init))
        }
    }

    init(_ value: AttributeValue) {
        switch value {
        case .integer(let n): self = .int(n)
        case .decimal(let d): self = .decimal(d)
        case .double(let d): self = .double(d)
        case .float(let f): self = .double(Double(f))
        case .string(let s): self = .string(s)
        case .boolean(let b): self = .bool(b)
        case .date(let d): self = .date(d)
        case .data(let d): self = .data(d)
        case .uuid(let u): self = .uuid(u)
        case .uri(let u): self = .url(u)
        case .transformable(let d): self = .data(d)
        }
    }

    /// Any Swift value (a dictionary's values, a plain value evaluated, a variable's value).
    static func from(_ value: Any?) -> Operand {
        guard let value else { return .null }
        switch value {
        case let object as ManagedObject: return .object(object)
        case let dictionary as [String: Any?]: return .dictionary(dictionary)
        case let dictionary as [String: Any]: return .dictionary(dictionary.mapValues { $0 as Any? })
        case let operand as Operand: return operand
        default: break
        }
        if let converted = try? PredicateValue.from(value) {
            // Collections may hold objects: keep them as objects, not IDs.
            if case .list = converted, let sequence = value as? any Sequence {
                return .collection(ManagedObject.elements(of: sequence).map(from))
            }
            return Operand(converted)
        }
        return .opaque(value as? AnyHashable)
    }

    var isNull: Bool { if case .null = self { true } else { false } }

    var kindName: String {
        switch self {
        case .null: "nil"
        case .bool: "a boolean"
        case .int, .double, .decimal: "a number"
        case .string: "a string"
        case .date: "a date"
        case .data: "data"
        case .uuid: "a UUID"
        case .url: "a URL"
        case .objectID, .object, .row, .raw: "an object"
        case .dictionary: "a dictionary"
        case .collection: "a collection"
        case .opaque(let value): value.map { "a \(type(of: $0.base))" } ?? "nil"
        }
    }
}

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
        case .row(_, let id): id
        case .raw(let raw): raw.id
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

    // MARK: Expressions

    func value(of expression: ObjectExpression, on subject: Operand) throws -> Operand {
        switch expression {
        case .constant(let value): return Operand(value)
        case .evaluatedObject: return subject
        case .keyPath(let keys): return try value(of: keys[...], on: subject)
        case .keyPathOn(let base, let keys): return try value(of: keys[...], on: try value(of: base, on: subject))
        case .variable(let name):
            guard let value = variables[name] else {
                throw ArborError(.invalidFetchRequest, "the predicate uses $\(name), and no value was given for it", key: name)
            }
            return value
        case .aggregate(let elements): return .collection(try elements.map { try value(of: $0, on: subject) })
        case .arithmetic(let op, let a, let b):
            return try arithmetic(op, try value(of: a, on: subject), try value(of: b, on: subject))
        case .subquery(let collection, let variable, let predicate):
            let elements: [Operand]
            switch try value(of: collection, on: subject) {
            case .collection(let items): elements = items
            case .null: elements = []
            case let single: elements = [single]
            }
            let saved = variables[variable]
            defer { variables[variable] = saved }
            var kept: [Operand] = []
            for element in elements {
                variables[variable] = element
                if try evaluate(predicate, on: element) { kept.append(element) }
            }
            return .collection(kept)
        }
    }

    func arithmetic(_ op: ObjectExpression.ArithmeticOperator, _ a: Operand, _ b: Operand) throws -> Operand {
        if a.isNull || b.isNull { return .null }
        if case .int(let x) = a, case .int(let y) = b, op != .divide {
            let (result, overflow): (Int64, Bool)
            switch op {
            case .add: (result, overflow) = x.addingReportingOverflow(y)
            case .subtract: (result, overflow) = x.subtractingReportingOverflow(y)
            default: (result, overflow) = x.multipliedReportingOverflow(by: y)
            }
            if !overflow { return .int(result) }
        }
        if Self.isDecimal(a) || Self.isDecimal(b), let x = Self.decimal(a), let y = Self.decimal(b) {
            return .decimal(Self.apply(op, x, y))
        }
        guard let x = Self.double(a), let y = Self.double(b), !Self.isBool(a), !Self.isBool(b) else {
            throw ArborError(.wrongValueType, "\(op.rawValue) needs numbers; \(a.kindName) and \(b.kindName) given")
        }
        return .double(Self.apply(op, x, y))
    }

    static func isBool(_ value: Operand) -> Bool { if case .bool = value { true } else { false } }
    static func isDecimal(_ value: Operand) -> Bool { if case .decimal = value { true } else { false } }

    static func decimal(_ value: Operand) -> Decimal? {
        switch value {
        case .int(let n): Decimal(n)
        case .decimal(let d): d
        case .double(let d): d.isFinite && d.magnitude < 1e38 && (d == 0 || d.magnitude > 1e-38) ? Decimal(d) : nil
        default: nil
        }
    }

    static func apply<T: FloatingPoint>(_ op: ObjectExpression.ArithmeticOperator, _ x: T, _ y: T) -> T {
        switch op {
        case .add: x + y
        case .subtract: x - y
        case .multiply: x * y
        case .divide: x / y
        }
    }

    static func apply(_ op: ObjectExpression.ArithmeticOperator, _ x: Decimal, _ y: Decimal) -> Decimal {
        switch op {
        case .add: x + y
        case .subtract: x - y
        case .multiply: x * y
        case .divide: x / y
        }
    }

    // MARK: Key paths

    /// The value of a key path on a value: through objects, rows, dictionaries and collections
    /// (a key on a collection gives the collection of its elements' values, flattened), with the
    /// collection operators.
    func value(of keys: ArraySlice<String>, on root: Operand) throws -> Operand {
        guard let key = keys.first else { return root }
        let rest = keys.dropFirst()
        if key.hasPrefix("@") { return try collectionOperator(key, rest, on: root) }
        switch root {
        case .null:
            return .null
        case .object(let object):
            return try value(of: rest, on: try value(of: key, on: object))
        case .objectID(let id):
            guard let object = context?.resolve(id) else {
                throw ArborError(.unknownKey, "\"\(key)\" cannot be read from \(id) outside its context", key: key, objectID: id)
            }
            return try value(of: rest, on: try value(of: key, on: object))
        case .row(let row, _):
            guard let slot = row.values.layout.index[key] else {
                throw ArborError(.unknownKey, "\(row.entityName) has no key \"\(key)\"", entity: row.entityName, key: key)
            }
            let result: Operand
            switch row.values[slot: slot] {
            case .attribute(let stored)?: result = Operand(stored)
            case .object(let id)?: result = .objectID(id)
            case .objects(let ids)?: result = .collection(ids.map(Operand.objectID))
            case .none?, nil: result = .null
            }
            return try value(of: rest, on: result)
        case .raw(let raw):
            guard let result = try raw.value(forKey: key) else {
                throw ArborError(.unknownKey, "\(raw.layout?.entity.name ?? "the row") has no key \"\(key)\"", key: key)
            }
            return try value(of: rest, on: result)
        case .dictionary(let dictionary):
            guard let entry = dictionary[key] else { return try value(of: rest, on: .null) }
            return try value(of: rest, on: Operand.from(entry))
        case .collection(let elements):
            var flat: [Operand] = []
            for element in elements {
                let result = try value(of: keys, on: element)
                // Nils stay (as in SQL, `ANY employees.name == nil` finds an unnamed one).
                if case .collection(let inner) = result { flat.append(contentsOf: inner) } else { flat.append(result) }
            }
            return .collection(flat)
        default:
            throw ArborError(.unknownKey, "\"\(key)\" cannot follow \(root.kindName): only objects, dictionaries and collections have keys", key: key)
        }
    }

    /// A property of a managed object, read without boxing attribute values.
    func value(of key: String, on object: ManagedObject) throws -> Operand {
        let entity = object.entity
        guard let slot = entity.propertyLayout.index[key] else { throw object.unknownKey(key) }
        if let attribute = entity.attributeInSlot[slot] {
            if !attribute.isTransient { try object.fireFault() }
            // A transformable value is its encoding (as in the store: equality and nil tests).
            guard case .attribute(let stored)? = object.values[slot: slot] else { return .null }
            return Operand(stored)
        }
        try object.fireFault()
        try object.loadRelationship(key)
        let objectContext = object.managedObjectContext
        if context == nil { context = objectContext }
        switch object.values[slot: slot] {
        case .object(let id)?: return objectContext?.resolve(id).map(Operand.object) ?? .objectID(id)
        case .objects(let ids)?: return .collection(ids.map { objectContext?.resolve($0).map(Operand.object) ?? .objectID($0) })
        default: return .null
        }
    }

    /// `@count`, `@sum`, `@avg`, `@min`, `@max`, `@distinctUnionOfObjects` on the collection
    /// `root`, with the rest of the key path applied to each element first.
    func collectionOperator(_ name: String, _ rest: ArraySlice<String>, on root: Operand) throws -> Operand {
        let elements: [Operand]
        switch root {
        case .collection(let items): elements = items
        case .null: elements = []
        default: elements = [root]
        }
        if name == "@count" { return try value(of: rest, on: .int(Int64(elements.count))) }
        let values = try elements.map { try value(of: rest, on: $0) }.filter { !$0.isNull }
        switch name {
        case "@distinctUnionOfObjects":
            var result: [Operand] = []
            for value in values where !result.contains(where: { Self.equal($0, value, []) }) { result.append(value) }
            return .collection(result)
        case "@min", "@max":
            var best: Operand?
            for value in values {
                guard let current = best else { best = value; continue }
                guard let order = Self.order(value, current, []) else {
                    throw ArborError(.wrongValueType, "\(name) cannot compare \(value.kindName) with \(current.kindName)")
                }
                if name == "@max" ? order > 0 : order < 0 { best = value }
            }
            return best ?? .null
        case "@sum", "@avg":
            var total: Operand = .int(0)
            for value in values {
                guard Self.double(value) != nil, !Self.isBool(value) else {
                    throw ArborError(.wrongValueType, "\(name) needs numbers; \(value.kindName) found")
                }
                total = try arithmetic(.add, total, value)
            }
            if name == "@sum" { return total }
            if values.isEmpty { return .null }
            return try arithmetic(.divide, total, .int(Int64(values.count)))
        default:
            throw ArborError(.unknownKey, "\"\(name)\" is not a collection operator", key: name)
        }
    }
}

extension ObjectPredicate {
    /// Whether `object` — a managed object, a dictionary of values by key, or a plain value
    /// (for `SELF`) — matches the predicate, with `$variables` taken from `substitutionVariables`.
    ///
    /// - Throws: ``ArborError/Code/unknownKey`` for a key the object does not have;
    ///   ``ArborError/Code/wrongValueType`` for values that cannot be compared (a string ordered
    ///   against a number); ``ArborError/Code/invalidFetchRequest`` for a variable with no value.
    public func evaluate(with object: Any?, substitutionVariables: [String: Any?] = [:]) throws -> Bool {
        let evaluator = PredicateEvaluator(variables: substitutionVariables.mapValues(Operand.from))
        return try evaluator.evaluate(self, on: Operand.from(object))
    }

    /// The predicate with its `$variables` replaced by constants.
    ///
    /// - Throws: ``ArborError/Code/wrongValueType`` for a value no predicate can hold. Variables
    ///   without a value stay as they are.
    public func substituting(_ variables: [String: Any?]) throws -> ObjectPredicate {
        let constants = try variables.mapValues { try PredicateValue.from($0) }
        return map { expression in
            if case .variable(let name) = expression, let value = constants[name] { return .constant(value) }
            return nil
        }
    }

    /// The predicate with expressions replaced where `transform` returns one (applied to every
    /// expression, outermost first; a SUBQUERY's own variable is left alone inside it).
    func map(_ transform: (ObjectExpression) -> ObjectExpression?) -> ObjectPredicate {
        switch self {
        case .constant: self
        case .not(let inner): .not(inner.map(transform))
        case .and(let terms): .and(terms.map { $0.map(transform) })
        case .or(let terms): .or(terms.map { $0.map(transform) })
        case .comparison(let comparison):
            .comparison(ComparisonPredicate(comparison.left.map(transform), comparison.operator, comparison.right.map(transform),
                                            modifier: comparison.modifier, options: comparison.options))
        }
    }
}

extension ObjectExpression {
    func map(_ transform: (ObjectExpression) -> ObjectExpression?) -> ObjectExpression {
        if let replaced = transform(self) { return replaced }
        switch self {
        case .constant, .evaluatedObject, .keyPath, .variable: return self
        case .keyPathOn(let base, let keys): return .keyPathOn(base.map(transform), keys)
        case .aggregate(let elements): return PredicateParser.aggregate(elements.map { $0.map(transform) })
        case .arithmetic(let op, let a, let b): return .arithmetic(op, a.map(transform), b.map(transform))
        case .subquery(let collection, let variable, let predicate):
            return .subquery(collection.map(transform), variable: variable, predicate.map { expression in
                if case .variable(variable) = expression { return expression }
                return transform(expression)
            })
        }
    }

    /// The value of the expression for `object` (a managed object, a dictionary, a plain value).
    ///
    /// - Throws: as ``ObjectPredicate/evaluate(with:substitutionVariables:)``.
    public func expressionValue(with object: Any?, substitutionVariables: [String: Any?] = [:]) throws -> Any? {
        let evaluator = PredicateEvaluator(variables: substitutionVariables.mapValues(Operand.from))
        return try evaluator.value(of: self, on: Operand.from(object)).swiftValue
    }
}

extension Operand {
    /// The value as Swift sees it (objects as objects, collections as arrays).
    var swiftValue: Any? {
        switch self {
        case .null: nil
        case .bool(let b): b
        case .int(let n): n
        case .double(let d): d
        case .decimal(let d): d
        case .string(let s): s
        case .date(let d): d
        case .data(let d): d
        case .uuid(let u): u
        case .url(let u): u
        case .objectID(let id): id
        case .object(let object): object
        case .row(_, let id): id
        case .raw(let raw): raw.id
        case .dictionary(let dictionary): dictionary
        case .collection(let elements): elements.map(\.swiftValue)
        case .opaque(let value): value?.base
        }
    }
}
