import Foundation

// The decoder of `Decodable` values (FetchResultType.values): Swift's Decoder protocols over the
// properties a ValueReader reads, by coding key.

/// A coding key made from a string (a key path of a container that lists no type of its own).
struct ValueCodingKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }

    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { stringValue = "\(intValue)" }
}

/// The decoder of one object's value: keyed by its properties (coding keys are attribute and
/// relationship names, or to-one key paths such as `department.name`), or a single value when
/// the request fetches one property.
///
/// A class: a decoder passes through `Decodable.init(from:)` as `any Decoder`, which boxes a
/// struct of this size; one reference is copied and counted instead of each of its fields.
final class RowValueDecoder: Decoder {
    let reader: ValueReader
    let source: ValueReader.Source
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(reader: ValueReader, source: ValueReader.Source, codingPath: [any CodingKey]) {
        self.reader = reader
        self.source = source
        self.codingPath = codingPath
    }

    func container<Key: CodingKey>(keyedBy _: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(RowValueContainer<Key>(self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, .init(codingPath: codingPath,
            debugDescription: "a \(source.entity.name) object is not a list: decode it with a keyed container"))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        guard let properties = reader.properties, properties.count == 1 else {
            throw DecodingError.typeMismatch(Any.self, .init(codingPath: codingPath,
                debugDescription: "a single value is decoded from a request with exactly one property in propertiesToFetch"))
        }
        let key = ValueCodingKey(properties[0])
        return AttributeValueDecoder(reached: try reader.reach(properties[0], from: source, codingPath: codingPath),
                                     reader: reader, codingPath: codingPath + [key])
    }
}

/// A keyed container over one object's properties (its decoder's: one reference to copy into
/// the container's box).
struct RowValueContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: RowValueDecoder

    init(_ decoder: RowValueDecoder) { self.decoder = decoder }

    init(reader: ValueReader, source: ValueReader.Source, codingPath: [any CodingKey]) {
        decoder = RowValueDecoder(reader: reader, source: source, codingPath: codingPath)
    }

    var reader: ValueReader { decoder.reader }
    var source: ValueReader.Source { decoder.source }
    var codingPath: [any CodingKey] { decoder.codingPath }

    var allKeys: [Key] { reader.keys(of: source.entity).compactMap(Key.init(stringValue:)) }

    func contains(_ key: Key) -> Bool { reader.names(key.stringValue, in: source.entityReference) }

    private func reached(_ key: Key) throws -> ValueReader.Reached {
        try reader.reach(key.stringValue, from: source, codingPath: codingPath)
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        if case .missing = try reached(key) { return true }
        return false
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try decodeValue(type, forKey: key) }

    func decodeValue<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try AttributeValueDecoder(reached: try reached(key), reader: reader, codingPath: codingPath + [key]).decodeValue(type)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy _: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        guard case .toOne(let destination) = try reached(key) else {
            throw DecodingError.typeMismatch([String: Any].self, .init(codingPath: codingPath + [key],
                debugDescription: "\(key.stringValue) is not a to-one relationship with a destination"))
        }
        return KeyedDecodingContainer(RowValueContainer<NestedKey>(reader: reader, source: destination, codingPath: codingPath + [key]))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        guard case .toMany(let destinations) = try reached(key) else {
            throw DecodingError.typeMismatch([Any].self, .init(codingPath: codingPath + [key],
                debugDescription: "\(key.stringValue) is not a to-many relationship"))
        }
        return DestinationList(reader: reader, destinations: destinations, codingPath: codingPath + [key])
    }

    func superDecoder() throws -> any Decoder { decoder }

    func superDecoder(forKey key: Key) throws -> any Decoder { RowValueDecoder(reader: reader, source: source, codingPath: codingPath + [key]) }
}

/// The value one key reached, decoded as a single value: an attribute converted by the typed
/// accessors' own rules (``TypedAccess``: integers only when they fit, no silent narrowing or
/// change of kind), a to-one destination as a nested value, a to-many relationship's
/// destinations as a list.
struct AttributeValueDecoder: Decoder, SingleValueDecodingContainer {
    let reached: ValueReader.Reached
    let reader: ValueReader
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func decodeNil() -> Bool {
        if case .missing = reached { return true }
        return false
    }

    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decodeValue(type) }

    func decodeValue<T: Decodable>(_: T.Type) throws -> T {
        switch reached {
        case .missing:
            throw DecodingError.valueNotFound(T.self, .init(codingPath: codingPath, debugDescription: "the value is nil: declare the property optional"))
        case .attribute(let value, let attributeType):
            if let converted = TypedAccess.convert(value, attributeType, to: T.self) { return converted }
            // A type of its own over the stored value (an enum with raw values, a wrapper):
            // it asks this decoder for a single value of a type the attribute holds.
            if T.self is any (FixedWidthInteger & Decodable).Type || [String.self, Double.self, Float.self, Bool.self, Date.self, Data.self,
                                                                        UUID.self, URL.self, Decimal.self].contains(where: { $0 == T.self }) {
                throw DecodingError.typeMismatch(T.self, .init(codingPath: codingPath,
                    debugDescription: "a \(attributeType) attribute holding \(value) is not a \(T.self)"))
            }
            return try T(from: self)
        case .toOne(let destination):
            return try T(from: RowValueDecoder(reader: reader, source: destination, codingPath: codingPath))
        case .toMany:
            return try T(from: self)
        }
    }

    func container<Key: CodingKey>(keyedBy _: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .toOne(let destination) = reached else {
            throw DecodingError.typeMismatch([String: Any].self, .init(codingPath: codingPath, debugDescription: "the value is not an object"))
        }
        return KeyedDecodingContainer(RowValueContainer<Key>(reader: reader, source: destination, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .toMany(let destinations) = reached else {
            throw DecodingError.typeMismatch([Any].self, .init(codingPath: codingPath, debugDescription: "the value is not a to-many relationship"))
        }
        return DestinationList(reader: reader, destinations: destinations, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }
}

/// A to-many relationship's destinations, decoded one by one (in the relationship's order when
/// it is ordered).
struct DestinationList: UnkeyedDecodingContainer {
    let reader: ValueReader
    let destinations: [ValueReader.Source]
    let codingPath: [any CodingKey]
    var currentIndex = 0

    init(reader: ValueReader, destinations: [ValueReader.Source], codingPath: [any CodingKey]) {
        self.reader = reader
        self.destinations = destinations
        self.codingPath = codingPath
    }

    var count: Int? { destinations.count }
    var isAtEnd: Bool { currentIndex >= destinations.count }

    private mutating func next() throws -> ValueReader.Source {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(Any.self, .init(codingPath: codingPath, debugDescription: "no destination is left"))
        }
        defer { currentIndex += 1 }
        return destinations[currentIndex]
    }

    mutating func decodeNil() throws -> Bool { false }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try decodeValue(type) }

    mutating func decodeValue<T: Decodable>(_: T.Type) throws -> T {
        let destination = try next()
        return try T(from: RowValueDecoder(reader: reader, source: destination, codingPath: codingPath + [ValueCodingKey("\(currentIndex - 1)")]))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy _: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        KeyedDecodingContainer(RowValueContainer<NestedKey>(reader: reader, source: try next(), codingPath: codingPath))
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, .init(codingPath: codingPath, debugDescription: "a destination is an object, not a list"))
    }

    mutating func superDecoder() throws -> any Decoder {
        RowValueDecoder(reader: reader, source: try next(), codingPath: codingPath)
    }
}

// The containers' requirements for each primitive type. The keyed container's read the value
// once and return it when it is of the requested kind (the common case, no generic conversion);
// anything else goes the generic way, which converts or throws.
extension RowValueContainer {
    /// The attribute `key` reaches, when it holds a value.
    @inline(__always)
    private func stored(_ key: Key) throws -> AttributeValue? {
        if case .value(let value) = try reader.stored(key.stringValue, from: source) { return value }
        return nil
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        if case .boolean(let value)? = try stored(key) { return value }
        return try decodeValue(type, forKey: key)
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        if case .string(let value)? = try stored(key) { return value }
        return try decodeValue(type, forKey: key)
    }

    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        if case .double(let value)? = try stored(key) { return value }
        return try decodeValue(type, forKey: key)
    }

    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
        if case .float(let value)? = try stored(key) { return value }
        return try decodeValue(type, forKey: key)
    }

    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(type, forKey: key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(type, forKey: key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(type, forKey: key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(type, forKey: key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try integer(type, forKey: key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(type, forKey: key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(type, forKey: key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(type, forKey: key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(type, forKey: key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(type, forKey: key) }

    /// An integer attribute's value when `I` holds it exactly (else the generic way throws).
    @inline(__always)
    private func integer<I: FixedWidthInteger & Decodable>(_ type: I.Type, forKey key: Key) throws -> I {
        if case .integer(let value)? = try stored(key), let exact = I(exactly: value) { return exact }
        return try decodeValue(type, forKey: key)
    }

    // decodeIfPresent reads the value once (the default asks contains, decodeNil and decode).

    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        switch try reader.stored(key.stringValue, from: source) {
        case .missing: return nil
        case .value(.string(let value)): return value
        default: return try decodeIfPresentValue(type, forKey: key)
        }
    }

    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? {
        switch try reader.stored(key.stringValue, from: source) {
        case .missing: return nil
        case .value(.integer(let value)): return value
        default: return try decodeIfPresentValue(type, forKey: key)
        }
    }

    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
        switch try reader.stored(key.stringValue, from: source) {
        case .missing: return nil
        case .value(.integer(let value)) where Int(exactly: value) != nil: return Int(value)
        default: return try decodeIfPresentValue(type, forKey: key)
        }
    }

    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        switch try reader.stored(key.stringValue, from: source) {
        case .missing: return nil
        case .value(.double(let value)): return value
        default: return try decodeIfPresentValue(type, forKey: key)
        }
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        switch try reader.stored(key.stringValue, from: source) {
        case .missing: return nil
        case .value(.boolean(let value)): return value
        default: return try decodeIfPresentValue(type, forKey: key)
        }
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { try decodeIfPresentValue(type, forKey: key) }

    /// The generic way of `decodeIfPresent`: nil when the key reaches nothing, else converted.
    private func decodeIfPresentValue<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        let reached = try reached(key)
        if case .missing = reached { return nil }
        return try AttributeValueDecoder(reached: reached, reader: reader, codingPath: codingPath + [key]).decodeValue(type)
    }
}

extension AttributeValueDecoder {
    func decode(_ type: Bool.Type) throws -> Bool { try decodeValue(type) }
    func decode(_ type: String.Type) throws -> String { try decodeValue(type) }
    func decode(_ type: Double.Type) throws -> Double { try decodeValue(type) }
    func decode(_ type: Float.Type) throws -> Float { try decodeValue(type) }
    func decode(_ type: Int.Type) throws -> Int { try decodeValue(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decodeValue(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decodeValue(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decodeValue(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decodeValue(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try decodeValue(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decodeValue(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decodeValue(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decodeValue(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decodeValue(type) }
}

extension DestinationList {
    mutating func decode(_ type: Bool.Type) throws -> Bool { try decodeValue(type) }
    mutating func decode(_ type: String.Type) throws -> String { try decodeValue(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try decodeValue(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try decodeValue(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try decodeValue(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try decodeValue(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try decodeValue(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try decodeValue(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try decodeValue(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try decodeValue(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try decodeValue(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try decodeValue(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try decodeValue(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try decodeValue(type) }
}
