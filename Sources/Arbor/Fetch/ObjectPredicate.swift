import Foundation

/// A logical condition on objects: what a fetch request asks for, and what filters arrays in
/// memory. Core Data's `NSPredicate`, with a name that does not clash with Foundation's
/// `Predicate`.
///
/// Make one from a format string, with Core Data's grammar (docs/predicates.md), or with the Swift
/// builder; both give the same tree:
///
/// ```swift
/// let parsed = try ObjectPredicate(format: "age >= %d AND name BEGINSWITH[c] %@", 18, "a")
/// let built: ObjectPredicate = .key("age") >= 18
///     && ObjectExpression.key("name").beginsWith("a", options: .caseInsensitive)
/// // parsed == built
/// ```
///
/// A predicate is a value (`Sendable`, `Hashable`): managed objects given as format arguments are
/// kept as their object IDs. ``evaluate(with:substitutionVariables:)`` tests it in memory against
/// a managed object, a dictionary or a plain value, with the same semantics as the store.
public indirect enum ObjectPredicate: Sendable, Hashable, CustomStringConvertible {
    /// `TRUEPREDICATE` (true) or `FALSEPREDICATE` (false).
    case constant(Bool)
    /// `NOT p`.
    case not(ObjectPredicate)
    /// `p AND q AND …` (true when empty).
    case and([ObjectPredicate])
    /// `p OR q OR …` (false when empty).
    case or([ObjectPredicate])
    /// A comparison of two expressions.
    case comparison(ComparisonPredicate)

    /// The predicate that is always true (`TRUEPREDICATE`).
    public static let truePredicate = ObjectPredicate.constant(true)
    /// The predicate that is never true (`FALSEPREDICATE`).
    public static let falsePredicate = ObjectPredicate.constant(false)

    /// The predicate as a format string that parses back to it.
    public var predicateFormat: String { PredicateFormatter.format(self) }

    public var description: String { predicateFormat }
}

/// A comparison: `left operator right`, optionally over each element of a collection on the left
/// (`ANY`, `ALL`, `NONE`), with string options (`[c]`, `[d]`, `[cd]`).
public struct ComparisonPredicate: Sendable, Hashable {
    /// The comparison operators of the format grammar.
    public enum Operator: String, Sendable, Hashable, CaseIterable {
        /// `<`
        case lessThan = "<"
        /// `<=`, `=<`
        case lessThanOrEqualTo = "<="
        /// `>`
        case greaterThan = ">"
        /// `>=`, `=>`
        case greaterThanOrEqualTo = ">="
        /// `=`, `==`
        case equalTo = "=="
        /// `!=`, `<>`
        case notEqualTo = "!="
        /// `MATCHES`: the whole string matches a regular expression.
        case matches = "MATCHES"
        /// `LIKE`: the whole string matches a pattern with `*` (any run) and `?` (one character).
        case like = "LIKE"
        /// `BEGINSWITH`
        case beginsWith = "BEGINSWITH"
        /// `ENDSWITH`
        case endsWith = "ENDSWITH"
        /// `IN`: the left value is an element of the right collection, or a substring of the
        /// right string.
        case `in` = "IN"
        /// `CONTAINS`: the left collection holds the right value, or the left string contains the
        /// right string.
        case contains = "CONTAINS"
        /// `BETWEEN`: the right side is `{low, high}`, both included.
        case between = "BETWEEN"
    }

    /// How the left side is taken.
    public enum Modifier: String, Sendable, Hashable {
        /// The left value itself. (A collection on the left of an ordering or string comparison
        /// is taken as `ANY`, as Core Data's SQL store does.)
        case direct = ""
        /// `ANY` (or `SOME`): true when some element of the left collection matches.
        case any = "ANY"
        /// `ALL`: true when every element matches (true for an empty collection).
        case all = "ALL"
        /// `NONE`: true when no element matches (true for an empty collection).
        case none = "NONE"
    }

    /// String comparison options: `[c]`, `[d]`, `[cd]`.
    public struct Options: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        /// Creates options from their raw bits.
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// `[c]`: upper and lower case compare equal.
        public static let caseInsensitive = Options(rawValue: 1)
        /// `[d]`: letters compare equal whatever their accents.
        public static let diacriticInsensitive = Options(rawValue: 2)
    }

    /// The left expression.
    public var left: ObjectExpression
    /// The operator.
    public var `operator`: Operator
    /// The right expression.
    public var right: ObjectExpression
    /// How the left side is taken.
    public var modifier: Modifier
    /// String options.
    public var options: Options

    /// Creates a comparison.
    public init(_ left: ObjectExpression, _ operator: Operator, _ right: ObjectExpression,
                modifier: Modifier = .direct, options: Options = []) {
        self.left = left
        self.operator = `operator`
        self.right = right
        self.modifier = modifier
        self.options = options
    }
}

/// A value in a predicate: a constant, the object evaluated, a key path, a variable, an aggregate,
/// arithmetic, or a subquery. Core Data's `NSExpression`, with a name that does not clash with
/// Foundation's `Expression`.
public indirect enum ObjectExpression: Sendable, Hashable {
    /// A constant value.
    case constant(PredicateValue)
    /// `SELF`: the object (or value) the predicate is evaluated against.
    case evaluatedObject
    /// A key path on the evaluated object: its keys, which may include the collection operators
    /// `@count`, `@sum`, `@avg`, `@min`, `@max` and `@distinctUnionOfObjects`.
    case keyPath([String])
    /// A key path on the value of another expression (`$x.name`, `SUBQUERY(…).@count`).
    case keyPathOn(ObjectExpression, [String])
    /// `$name`: replaced by its value at evaluation (or by ``ObjectPredicate/substituting(_:)``).
    case variable(String)
    /// `{a, b, …}`: a collection of expressions.
    case aggregate([ObjectExpression])
    /// `a + b`, `a - b`, `a * b`, `a / b`.
    case arithmetic(ArithmeticOperator, ObjectExpression, ObjectExpression)
    /// `SUBQUERY(collection, $variable, predicate)`: the elements of the collection for which the
    /// predicate holds (with the variable naming the element). Usually followed by `.@count`.
    case subquery(ObjectExpression, variable: String, ObjectPredicate)

    /// The arithmetic operators.
    public enum ArithmeticOperator: String, Sendable, Hashable {
        /// `+`
        case add = "+"
        /// `-`
        case subtract = "-"
        /// `*`
        case multiply = "*"
        /// `/`
        case divide = "/"
    }

    /// The key path `path` (keys separated by dots), on the evaluated object.
    public static func key(_ path: String) -> ObjectExpression {
        .keyPath(KeyPathEvaluator.components(of: path))
    }

    /// A constant.
    public static func value(_ value: some PredicateValueConvertible) -> ObjectExpression {
        .constant(value.predicateValue)
    }

    /// This expression followed by the key path `path` (`$x.name`, `SUBQUERY(…).@count`).
    public func key(_ path: String) -> ObjectExpression {
        let keys = KeyPathEvaluator.components(of: path)
        switch self {
        case .keyPath(let head): return .keyPath(head + keys)
        case .keyPathOn(let base, let head): return .keyPathOn(base, head + keys)
        case .evaluatedObject: return .keyPath(keys)
        default: return .keyPathOn(self, keys)
        }
    }

    /// `@count` of this expression (a collection).
    public var count: ObjectExpression { key("@count") }
}

/// A constant in a predicate. Managed objects are kept as their IDs (predicates are values that
/// cross threads); an object compares equal to its ID.
public enum PredicateValue: Sendable, Hashable, CustomStringConvertible {
    /// `NULL`, `NIL`.
    case null
    /// `TRUE`, `YES`, `FALSE`, `NO`.
    case bool(Bool)
    /// An integer.
    case int(Int64)
    /// A floating-point number.
    case double(Double)
    /// A decimal number.
    case decimal(Decimal)
    /// A string.
    case string(String)
    /// A date (given as an argument: the format grammar has no date literals).
    case date(Date)
    /// Bytes.
    case data(Data)
    /// A UUID.
    case uuid(UUID)
    /// A URL.
    case url(URL)
    /// An object, by its ID.
    case objectID(ManagedObjectID)
    /// A collection of values (an array or set given as an argument).
    case list([PredicateValue])

    public var description: String { PredicateFormatter.literal(self) }
}

// MARK: - Values from Swift

/// A Swift value that can be a predicate constant (builder arguments and format arguments).
public protocol PredicateValueConvertible {
    /// The value as a predicate constant.
    var predicateValue: PredicateValue { get }
}

extension Int: PredicateValueConvertible { public var predicateValue: PredicateValue { .int(Int64(self)) } }
extension Int8: PredicateValueConvertible { public var predicateValue: PredicateValue { .int(Int64(self)) } }
extension Int16: PredicateValueConvertible { public var predicateValue: PredicateValue { .int(Int64(self)) } }
extension Int32: PredicateValueConvertible { public var predicateValue: PredicateValue { .int(Int64(self)) } }
extension Int64: PredicateValueConvertible { public var predicateValue: PredicateValue { .int(self) } }
extension UInt8: PredicateValueConvertible { public var predicateValue: PredicateValue { .int(Int64(self)) } }
extension UInt16: PredicateValueConvertible { public var predicateValue: PredicateValue { .int(Int64(self)) } }
extension UInt32: PredicateValueConvertible { public var predicateValue: PredicateValue { .int(Int64(self)) } }
extension Double: PredicateValueConvertible { public var predicateValue: PredicateValue { .double(self) } }
extension Float: PredicateValueConvertible { public var predicateValue: PredicateValue { .double(Double(self)) } }
extension Decimal: PredicateValueConvertible { public var predicateValue: PredicateValue { .decimal(self) } }
extension String: PredicateValueConvertible { public var predicateValue: PredicateValue { .string(self) } }
extension Substring: PredicateValueConvertible { public var predicateValue: PredicateValue { .string(String(self)) } }
extension Bool: PredicateValueConvertible { public var predicateValue: PredicateValue { .bool(self) } }
extension Date: PredicateValueConvertible { public var predicateValue: PredicateValue { .date(self) } }
extension Data: PredicateValueConvertible { public var predicateValue: PredicateValue { .data(self) } }
extension UUID: PredicateValueConvertible { public var predicateValue: PredicateValue { .uuid(self) } }
extension URL: PredicateValueConvertible { public var predicateValue: PredicateValue { .url(self) } }
extension ManagedObjectID: PredicateValueConvertible { public var predicateValue: PredicateValue { .objectID(self) } }
extension ManagedObject: PredicateValueConvertible { public var predicateValue: PredicateValue { .objectID(objectID) } }
extension PredicateValue: PredicateValueConvertible { public var predicateValue: PredicateValue { self } }
extension Optional: PredicateValueConvertible where Wrapped: PredicateValueConvertible {
    public var predicateValue: PredicateValue { self?.predicateValue ?? .null }
}
extension Array: PredicateValueConvertible where Element: PredicateValueConvertible {
    public var predicateValue: PredicateValue { .list(map(\.predicateValue)) }
}
extension Set: PredicateValueConvertible where Element: PredicateValueConvertible {
    public var predicateValue: PredicateValue { .list(map(\.predicateValue)) }
}

extension PredicateValue {
    /// The constant for any Swift value: nil, a ``PredicateValueConvertible`` value, or a
    /// collection of them.
    ///
    /// - Throws: ``ArborError/Code/wrongValueType`` for a value no predicate can hold.
    static func from(_ value: Any?) throws -> PredicateValue {
        guard let value else { return .null }
        // The common argument types first, by exact type: a cast to a protocol existential
        // searches the runtime's conformance tables, for every argument.
        switch ObjectIdentifier(type(of: value)) {
        case ObjectIdentifier(Int.self): return .int(Int64(value as! Int))
        case ObjectIdentifier(Int64.self): return .int(value as! Int64)
        case ObjectIdentifier(String.self): return .string(value as! String)
        case ObjectIdentifier(Double.self): return .double(value as! Double)
        default: break
        }
        if let optional = value as? any OptionalProtocol { return try from(optional.wrappedAny) }
        if let convertible = value as? any PredicateValueConvertible { return convertible.predicateValue }
        if ObjectIdentifier(type(of: value)) == ObjectIdentifier(NSNull.self) { return .null }
        if let integer = value as? any BinaryInteger, let exact = Int64(exactly: integer) { return .int(exact) }
        if let number = value as? any BinaryFloatingPoint { return .double(Double(number)) }
        // A dictionary is a sequence of pairs, not a list (an empty one would become `{}`).
        if value is any DictionaryProtocol || value is NSDictionary {
            throw ArborError(.wrongValueType, "a predicate cannot hold a dictionary (\(value))", value: "\(value)")
        }
        if let sequence = value as? any Sequence, !(value is String) {
            return .list(try ManagedObject.elements(of: sequence).map { try from($0) })
        }
        throw ArborError(.wrongValueType, "a predicate cannot hold a \(type(of: value)) value (\(value))", value: "\(value)")
    }
}

/// Lets `PredicateValue.from` recognise dictionaries inside `Any`.
protocol DictionaryProtocol {}

extension Dictionary: DictionaryProtocol {}

/// Lets `PredicateValue.from` see through optionals inside `Any`.
protocol OptionalProtocol {
    var wrappedAny: Any? { get }
}

extension Optional: OptionalProtocol {
    var wrappedAny: Any? {
        switch self {
        case .some(let value): value
        case .none: nil
        }
    }
}

// MARK: - The Swift builder

extension ObjectPredicate {
    /// `p AND q`.
    public static func && (p: ObjectPredicate, q: ObjectPredicate) -> ObjectPredicate {
        switch (p, q) {
        case (.and(let a), .and(let b)): .and(a + b)
        case (.and(let a), _): .and(a + [q])
        default: .and([p, q])
        }
    }

    /// `p OR q`.
    public static func || (p: ObjectPredicate, q: ObjectPredicate) -> ObjectPredicate {
        switch (p, q) {
        case (.or(let a), .or(let b)): .or(a + b)
        case (.or(let a), _): .or(a + [q])
        default: .or([p, q])
        }
    }

    /// `NOT p`.
    public static prefix func ! (p: ObjectPredicate) -> ObjectPredicate { .not(p) }
}

extension ObjectExpression {
    func compared(_ op: ComparisonPredicate.Operator, _ other: ObjectExpression, options: ComparisonPredicate.Options = [],
                  modifier: ComparisonPredicate.Modifier = .direct) -> ObjectPredicate {
        .comparison(ComparisonPredicate(self, op, other, modifier: modifier, options: options))
    }

    /// `self == value`.
    public static func == (a: ObjectExpression, b: some PredicateValueConvertible) -> ObjectPredicate { a.compared(.equalTo, .value(b)) }
    /// `self != value`.
    public static func != (a: ObjectExpression, b: some PredicateValueConvertible) -> ObjectPredicate { a.compared(.notEqualTo, .value(b)) }
    /// `self < value`.
    public static func < (a: ObjectExpression, b: some PredicateValueConvertible) -> ObjectPredicate { a.compared(.lessThan, .value(b)) }
    /// `self <= value`.
    public static func <= (a: ObjectExpression, b: some PredicateValueConvertible) -> ObjectPredicate { a.compared(.lessThanOrEqualTo, .value(b)) }
    /// `self > value`.
    public static func > (a: ObjectExpression, b: some PredicateValueConvertible) -> ObjectPredicate { a.compared(.greaterThan, .value(b)) }
    /// `self >= value`.
    public static func >= (a: ObjectExpression, b: some PredicateValueConvertible) -> ObjectPredicate { a.compared(.greaterThanOrEqualTo, .value(b)) }

    /// `self + other`.
    public static func + (a: ObjectExpression, b: ObjectExpression) -> ObjectExpression { .arithmetic(.add, a, b) }
    /// `self - other`.
    public static func - (a: ObjectExpression, b: ObjectExpression) -> ObjectExpression { .arithmetic(.subtract, a, b) }
    /// `self * other`.
    public static func * (a: ObjectExpression, b: ObjectExpression) -> ObjectExpression { .arithmetic(.multiply, a, b) }
    /// `self / other`.
    public static func / (a: ObjectExpression, b: ObjectExpression) -> ObjectExpression { .arithmetic(.divide, a, b) }

    /// A comparison of this expression with another expression.
    public func compare(_ op: ComparisonPredicate.Operator, _ other: ObjectExpression,
                        options: ComparisonPredicate.Options = []) -> ObjectPredicate {
        compared(op, other, options: options)
    }

    /// `BEGINSWITH`.
    public func beginsWith(_ prefix: String, options: ComparisonPredicate.Options = []) -> ObjectPredicate {
        compared(.beginsWith, .value(prefix), options: options)
    }
    /// `ENDSWITH`.
    public func endsWith(_ suffix: String, options: ComparisonPredicate.Options = []) -> ObjectPredicate {
        compared(.endsWith, .value(suffix), options: options)
    }
    /// `CONTAINS`: a substring of a string, or an element of a collection.
    public func contains(_ value: some PredicateValueConvertible, options: ComparisonPredicate.Options = []) -> ObjectPredicate {
        compared(.contains, .value(value), options: options)
    }
    /// `LIKE` with `*` and `?` wildcards.
    public func like(_ pattern: String, options: ComparisonPredicate.Options = []) -> ObjectPredicate {
        compared(.like, .value(pattern), options: options)
    }
    /// `MATCHES` a regular expression (the whole string).
    public func matches(_ pattern: String, options: ComparisonPredicate.Options = []) -> ObjectPredicate {
        compared(.matches, .value(pattern), options: options)
    }
    /// `IN` a collection of values.
    public func isIn<C: Collection>(_ values: C, options: ComparisonPredicate.Options = []) -> ObjectPredicate
    where C.Element: PredicateValueConvertible {
        compared(.in, .constant(.list(values.map(\.predicateValue))), options: options)
    }
    /// `BETWEEN {low, high}`, both included.
    public func between(_ low: some PredicateValueConvertible, _ high: some PredicateValueConvertible) -> ObjectPredicate {
        compared(.between, PredicateParser.aggregate([.value(low), .value(high)]))
    }

    /// `ANY self <op> value`: some element of this collection matches.
    public func any(_ op: ComparisonPredicate.Operator, _ value: some PredicateValueConvertible,
                    options: ComparisonPredicate.Options = []) -> ObjectPredicate {
        compared(op, .value(value), options: options, modifier: .any)
    }
    /// `ALL self <op> value`: every element of this collection matches.
    public func all(_ op: ComparisonPredicate.Operator, _ value: some PredicateValueConvertible,
                    options: ComparisonPredicate.Options = []) -> ObjectPredicate {
        compared(op, .value(value), options: options, modifier: .all)
    }
    /// `NONE self <op> value`: no element of this collection matches.
    public func none(_ op: ComparisonPredicate.Operator, _ value: some PredicateValueConvertible,
                     options: ComparisonPredicate.Options = []) -> ObjectPredicate {
        compared(op, .value(value), options: options, modifier: .none)
    }

    /// `SUBQUERY(self, $variable, predicate)`.
    public func subquery(_ variable: String, _ predicate: ObjectPredicate) -> ObjectExpression {
        .subquery(self, variable: variable, predicate)
    }
}
