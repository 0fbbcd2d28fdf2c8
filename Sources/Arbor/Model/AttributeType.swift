import Foundation

/// The type of an attribute: what values it holds and how they are stored.
///
/// The Swift value of each type is in docs/model.md ("Attribute types"). A transformable attribute
/// holds any `Codable & Sendable` type, stored as its JSON encoding.
public struct AttributeType: Sendable, Equatable, CustomStringConvertible {
    /// The kinds of attribute Core Data has.
    public enum Kind: String, Sendable, Codable, CaseIterable {
        // Integers of 16, 32 and 64 bits; a decimal number; 64- and 32-bit floating point; text;
        // a truth value; a point in time; bytes; a UUID; a URL; any Codable value.
        case integer16, integer32, integer64, decimal, double, float, string, boolean, date
        case binaryData, uuid, uri, transformable
    }

    /// The kind.
    public let kind: Kind
    /// For transformable attributes, how values are encoded and decoded.
    let transformer: Transformer?

    init(_ kind: Kind, transformer: Transformer? = nil) {
        self.kind = kind
        self.transformer = transformer
    }

    /// 16-bit integers (`Int16`).
    public static let integer16 = AttributeType(.integer16)
    /// 32-bit integers (`Int32`).
    public static let integer32 = AttributeType(.integer32)
    /// 64-bit integers (`Int64`).
    public static let integer64 = AttributeType(.integer64)
    /// Decimal numbers (`Decimal`).
    public static let decimal = AttributeType(.decimal)
    /// Double-precision floating point (`Double`).
    public static let double = AttributeType(.double)
    /// Single-precision floating point (`Float`).
    public static let float = AttributeType(.float)
    /// Text (`String`).
    public static let string = AttributeType(.string)
    /// `Bool`.
    public static let boolean = AttributeType(.boolean)
    /// Points in time (`Date`).
    public static let date = AttributeType(.date)
    /// Bytes (`Data`).
    public static let binaryData = AttributeType(.binaryData)
    /// `UUID`.
    public static let uuid = AttributeType(.uuid)
    /// `URL`.
    public static let uri = AttributeType(.uri)

    /// Values of a `Codable` type, stored as their JSON encoding (keys sorted, so equal values
    /// encode equally).
    public static func transformable<T: Codable & Sendable & Equatable>(_ type: T.Type) -> AttributeType {
        AttributeType(.transformable, transformer: Transformer(type))
    }

    /// The name of the Swift type values have.
    public var valueTypeName: String {
        switch kind {
        case .integer16: "Int16"
        case .integer32: "Int32"
        case .integer64: "Int64"
        case .decimal: "Decimal"
        case .double: "Double"
        case .float: "Float"
        case .string: "String"
        case .boolean: "Bool"
        case .date: "Date"
        case .binaryData: "Data"
        case .uuid: "UUID"
        case .uri: "URL"
        case .transformable: transformer?.typeName ?? "?"
        }
    }

    public var description: String {
        kind == .transformable ? "transformable(\(valueTypeName))" : kind.rawValue
    }

    /// Types are equal when their kinds are, and for transformables their value types too.
    public static func == (a: AttributeType, b: AttributeType) -> Bool {
        a.kind == b.kind && a.transformer?.typeName == b.transformer?.typeName
    }

    /// Whether values of this type have an order (for minimum and maximum).
    var isOrdered: Bool {
        switch kind {
        case .integer16, .integer32, .integer64, .decimal, .double, .float, .date: true
        default: false
        }
    }

    /// Whether values of this type have a length (for minimum and maximum length).
    var hasLength: Bool { kind == .string || kind == .binaryData }

    // MARK: Values

    /// Converts a Swift value to this type's stored value, or throws `wrongValueType` (and, for
    /// integers that do not fit, `validationNumberTooLarge`/`TooSmall`). An `NSNumber` is taken
    /// when its value fits (``FoundationNumber``), after the Swift types.
    func storedValue(from value: Any, entity: String, key: String) throws -> AttributeValue {
        // Long: one case per attribute kind, each the few Swift types it takes: the switch is the
        // conversion table (docs/model.md, "Attribute types").
        /// A value of none of the Swift types this type takes: an `NSNumber`, or the wrong type.
        func other() throws -> AttributeValue {
            if let number = FoundationNumber.number(value) { return try storedValue(from: number, entity: entity, key: key) }
            throw ArborError(.wrongValueType,
                             "\(entity).\(key) holds \(valueTypeName) values; \(type(of: value)) given (\(value))",
                             entity: entity, key: key, value: "\(value)")
        }
        func integer(_ bounds: ClosedRange<Int64>) throws -> AttributeValue {
            // The common types first: a cast to a concrete type is a type comparison, one to
            // `any BinaryInteger` a protocol-conformance lookup.
            // Exact types only: `as? Int` would also bridge an NSNumber (when its value fits),
            // which `other()` reads by its value.
            if type(of: value) == Int.self, let int = value as? Int, bounds.contains(Int64(int)) { return .integer(Int64(int)) }
            if type(of: value) == Int64.self, let int = value as? Int64, bounds.contains(int) { return .integer(int) }
            if type(of: value) == Int32.self, let int = value as? Int32, bounds.contains(Int64(int)) { return .integer(Int64(int)) }
            if type(of: value) == Int16.self, let int = value as? Int16, bounds.contains(Int64(int)) { return .integer(Int64(int)) }
            guard let number = value as? any BinaryInteger else { return try other() }
            guard let exact = Int64(exactly: number), bounds.contains(exact) else {
                let tooLarge = !isNegative(number)
                throw ArborError(tooLarge ? .validationNumberTooLarge : .validationNumberTooSmall,
                                 "\(entity).\(key) is a \(valueTypeName); \(number) does not fit", entity: entity, key: key, value: "\(number)")
            }
            return .integer(exact)
        }
        switch kind {
        case .integer16: return try integer(Int64(Int16.min)...Int64(Int16.max))
        case .integer32: return try integer(Int64(Int32.min)...Int64(Int32.max))
        case .integer64: return try integer(Int64.min...Int64.max)
        case .decimal:
            // Exactly a Decimal: `as? Decimal` may bridge an NSNumber, which `other()` reads.
            if type(of: value) == Decimal.self, let decimal = value as? Decimal { return .decimal(decimal) }
            if let number = value as? any BinaryInteger, let exact = Int64(exactly: number) { return .decimal(Decimal(exact)) }
            return try other()
        case .double:
            // One NaN (whatever its payload), so that equal values hash alike.
            if type(of: value) == Double.self, let number = value as? Double { return .double(number.isNaN ? .nan : number) }
            if let number = value as? any BinaryFloatingPoint { return .double(number.isNaN ? .nan : Double(number)) }
            if let number = value as? any BinaryInteger { return .double(Double(number)) }
            return try other()
        case .float:
            if let number = value as? any BinaryFloatingPoint { return .float(number.isNaN ? .nan : Float(number)) }
            if let number = value as? any BinaryInteger { return .float(Float(number)) }
            return try other()
        case .string:
            if let string = value as? String { return .string(string) }
            if let string = value as? Substring { return .string(String(string)) }
            return try other()
        case .boolean:
            // Exactly a Bool: `as? Bool` would bridge an NSNumber of 0 or 1 (and no other).
            guard type(of: value) == Bool.self, let bool = value as? Bool else { return try other() }
            return .boolean(bool)
        case .date:
            guard let date = value as? Date else { return try other() }
            return .date(date)
        case .binaryData:
            if let data = value as? Data { return .data(data) }
            if let bytes = value as? [UInt8] { return .data(Data(bytes)) }
            return try other()
        case .uuid:
            guard let uuid = value as? UUID else { return try other() }
            return .uuid(uuid)
        case .uri:
            guard let url = value as? URL else { return try other() }
            return .uri(url)
        case .transformable:
            guard let transformer, let encoded = try transformer.encode(value) else { return try other() }
            return .transformable(encoded)
        }
    }

    /// The Swift value of a stored value of this type.
    func swiftValue(of value: AttributeValue) -> Any {
        switch (kind, value) {
        case (.integer16, .integer(let n)): return Int16(truncatingIfNeeded: n)
        case (.integer32, .integer(let n)): return Int32(truncatingIfNeeded: n)
        case (.integer64, .integer(let n)): return n
        case (.transformable, .transformable(let data)): return (try? transformer?.decode(data)) ?? data
        default: return value.anyValue
        }
    }
}

/// Whether an integer of any type is below zero (opens the existential).
private func isNegative<T: BinaryInteger>(_ number: T) -> Bool { number < 0 }

/// A stored attribute value, typed.
public enum AttributeValue: Hashable, Sendable, CustomStringConvertible {
    /// Any integer type.
    case integer(Int64)
    /// A decimal number.
    case decimal(Decimal)
    /// A 64-bit floating-point number (one NaN: every NaN is stored as `.nan`).
    case double(Double)
    /// A 32-bit floating-point number.
    case float(Float)
    /// Text.
    case string(String)
    /// A truth value.
    case boolean(Bool)
    /// A point in time.
    case date(Date)
    /// Bytes.
    case data(Data)
    /// A UUID.
    case uuid(UUID)
    /// A URL.
    case uri(URL)
    /// A transformable value's encoding.
    case transformable(Data)

    /// The plain Swift value wrapped, as a `Sendable` value (what a model builder's default value
    /// takes); ``anyValue`` is the same value.
    var sendableValue: any Sendable {
        switch self {
        case .integer(let v): v
        case .decimal(let v): v
        case .double(let v): v
        case .float(let v): v
        case .string(let v): v
        case .boolean(let v): v
        case .date(let v): v
        case .data(let v): v
        case .uuid(let v): v
        case .uri(let v): v
        case .transformable(let v): v
        }
    }

    /// The value as the plain Swift value it wraps.
    public var anyValue: Any { sendableValue }

    /// Whether two values hold the same thing. Unlike `Double`'s `==`, NaN equals NaN (the store
    /// keeps one NaN), so setting NaN again is not a change.
    public static func == (a: AttributeValue, b: AttributeValue) -> Bool {
        switch (a, b) {
        case (.integer(let x), .integer(let y)): x == y
        case (.decimal(let x), .decimal(let y)): x == y
        case (.double(let x), .double(let y)): x == y || (x.isNaN && y.isNaN)
        case (.float(let x), .float(let y)): x == y || (x.isNaN && y.isNaN)
        case (.string(let x), .string(let y)): x == y
        case (.boolean(let x), .boolean(let y)): x == y
        case (.date(let x), .date(let y)): x == y
        case (.data(let x), .data(let y)), (.transformable(let x), .transformable(let y)): x == y
        case (.uuid(let x), .uuid(let y)): x == y
        case (.uri(let x), .uri(let y)): x == y
        default: false
        }
    }

    public var description: String {
        switch self {
        case .string(let v): "\"\(v)\""
        case .data(let v): "<\(v.count) bytes>"
        case .transformable(let v): "<encoded, \(v.count) bytes>"
        default: "\(anyValue)"
        }
    }

    /// The order of two values of the same ordered type (nil when they cannot be compared).
    func compare(_ other: AttributeValue) -> Int? {
        switch (self, other) {
        case (.integer(let a), .integer(let b)): a < b ? -1 : (a == b ? 0 : 1)
        case (.decimal(let a), .decimal(let b)): a < b ? -1 : (a == b ? 0 : 1)
        case (.double(let a), .double(let b)): a < b ? -1 : (a == b ? 0 : 1)
        case (.float(let a), .float(let b)): a < b ? -1 : (a == b ? 0 : 1)
        case (.date(let a), .date(let b)): a < b ? -1 : (a == b ? 0 : 1)
        default: nil
        }
    }

    /// The length of a string (characters) or binary data (bytes).
    var length: Int? {
        switch self {
        case .string(let s): s.count
        case .data(let d): d.count
        default: nil
        }
    }
}

/// Encodes and decodes the values of a transformable attribute.
final class Transformer: Sendable {
    let typeName: String
    private let encodeValue: @Sendable (Any) throws -> Data?
    private let decodeValue: @Sendable (Data) throws -> Any

    init<T: Codable & Sendable & Equatable>(_ type: T.Type) {
        typeName = String(reflecting: type)
        encodeValue = { value in
            guard let typed = value as? T else { return nil }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return try encoder.encode(typed)
        }
        decodeValue = { data in try JSONDecoder().decode(T.self, from: data) }
    }

    /// A transformer for a type this program does not have (a model read from a store's
    /// schema): values stay their encoded `Data`.
    init(opaqueTypeName: String) {
        typeName = opaqueTypeName
        encodeValue = { $0 as? Data }
        decodeValue = { $0 }
    }

    func encode(_ value: Any) throws -> Data? {
        do {
            return try encodeValue(value)
        } catch {
            throw ArborError(.wrongValueType, "a \(typeName) value could not be encoded: \(error)")
        }
    }

    func decode(_ data: Data) throws -> Any {
        do {
            return try decodeValue(data)
        } catch {
            throw ArborError(.wrongValueType, "a stored \(typeName) value could not be decoded: \(error)")
        }
    }
}
