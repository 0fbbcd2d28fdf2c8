import Foundation

/// An `NSNumber`'s value, by what the number was made from: the one place Arbor reads
/// Foundation's numbers, for attribute values (``AttributeType``), predicate constants and
/// format arguments (``PredicateValue``), and so batch-update constants and fetch-request values.
///
/// An `NSNumber` is a number, whatever type it was made from: an attribute takes one whose value
/// fits it (`NSNumber(value: 3.0)` into an integer attribute is 3), and refuses one that does not
/// with the error a Swift value that does not fit gets (3.5 into an integer is
/// ``ArborError/Code/wrongValueType``, as the `Double` 3.5 is; 70,000 into an `Int16` is
/// ``ArborError/Code/validationNumberTooLarge``, as the `Int` is).
///
/// The kind is read from the number's class and `objCType`, not by casting: on Linux, `as? Int`
/// and `as? Bool` bridge an `NSNumber` only when its value happens to fit, and casts to
/// `BinaryInteger` or `BinaryFloatingPoint` never do.
enum FoundationNumber: Equatable {
    /// A number made from a `Bool` (`NSNumber(value: true)`): 1 or 0 as a number.
    case boolean(Bool)
    /// A number made from an integer that fits `Int64`.
    case integer(Int64)
    /// A number made from an unsigned integer past `Int64.max`.
    case unsigned(UInt64)
    /// A number made from a `Double` or a `Float` (a `Float`'s value exactly).
    case floatingPoint(Double)
    /// An `NSDecimalNumber`.
    case decimal(Decimal)

    /// The class of the numbers made from booleans (`__NSCFBoolean` on Linux and on Apple's
    /// platforms; an `Int8` has the same `objCType` there, so the class tells them apart).
    private static let booleanClass = ObjectIdentifier(type(of: NSNumber(value: true)))

    init(_ number: NSNumber) {
        if let decimal = number as? NSDecimalNumber {
            self = .decimal(decimal.decimalValue)
            return
        }
        if ObjectIdentifier(type(of: number)) == Self.booleanClass {
            self = .boolean(number.boolValue)
            return
        }
        switch UInt8(bitPattern: number.objCType.pointee) {
        case UInt8(ascii: "d"), UInt8(ascii: "f"):
            self = .floatingPoint(number.doubleValue)
        case UInt8(ascii: "Q"), UInt8(ascii: "L"), UInt8(ascii: "I"), UInt8(ascii: "S"), UInt8(ascii: "C"):
            let value = number.uint64Value
            self = Int64(exactly: value).map(Self.integer) ?? .unsigned(value)
        default:
            self = .integer(number.int64Value)
        }
    }

    /// `value` as an `NSNumber` (an instance of it or of a subclass), else nil. Not `as?`: on
    /// Linux, `3 as Any as? NSNumber` bridges the `Int`.
    static func number(_ value: Any) -> NSNumber? {
        type(of: value) is NSNumber.Type ? (value as! NSNumber) : nil
    }

    /// The value as a predicate constant: a boolean, an integer, a double or a decimal (an
    /// unsigned integer past `Int64.max` as a decimal, exactly).
    var predicateValue: PredicateValue {
        switch self {
        case .boolean(let value): .bool(value)
        case .integer(let value): .int(value)
        case .unsigned(let value): .decimal(Decimal(value))
        case .floatingPoint(let value): .double(value)
        case .decimal(let value): .decimal(value)
        }
    }

    /// The value as a `Double` (rounded where it has more digits).
    var double: Double {
        switch self {
        case .boolean(let value): value ? 1 : 0
        case .integer(let value): Double(value)
        case .unsigned(let value): Double(value)
        case .floatingPoint(let value): value
        case .decimal(let value): NSDecimalNumber(decimal: value).doubleValue
        }
    }

    /// The value as a `Decimal`, when it has one: a double as its shortest decimal text (2.5,
    /// not 2.5000000000000001), nil for a NaN, an infinity or one past `Decimal`'s range.
    var decimal: Decimal? {
        switch self {
        case .boolean(let value): value ? 1 : 0
        case .integer(let value): Decimal(value)
        case .unsigned(let value): Decimal(value)
        case .decimal(let value): value
        case .floatingPoint(let value):
            value.isFinite ? Decimal(string: "\(value)", locale: Locale(identifier: "en_US_POSIX")) : nil
        }
    }

    /// What the value is as a whole number.
    enum Whole {
        /// The value, an integer that fits `Int64`.
        case exactly(Int64)
        /// A whole number past `Int64`'s range (its sign: whether it is below zero).
        case outOfRange(negative: Bool)
        /// Not a whole number (a fraction, a NaN, an infinity).
        case fraction
    }

    /// The value as a whole number.
    var whole: Whole {
        switch self {
        case .boolean(let value): return .exactly(value ? 1 : 0)
        case .integer(let value): return .exactly(value)
        case .unsigned: return .outOfRange(negative: false)
        case .floatingPoint(let value):
            guard value.isFinite, value.rounded(.towardZero) == value else { return .fraction }
            return Int64(exactly: value).map(Whole.exactly) ?? .outOfRange(negative: value < 0)
        case .decimal(let value):
            guard !value.isNaN else { return .fraction }
            var rounded = Decimal(), source = value
            NSDecimalRound(&rounded, &source, 0, .plain)
            guard rounded == value else { return .fraction }
            return Int64(value.description).map(Whole.exactly) ?? .outOfRange(negative: value < 0)
        }
    }
}

extension NSNumber: PredicateValueConvertible {
    /// The number as a predicate constant, by what it was made from: a `Bool`'s number is a
    /// boolean, an integer's an integer, a `Double`'s or a `Float`'s a double, an
    /// `NSDecimalNumber` a decimal (an unsigned integer past `Int64.max` is a decimal too).
    ///
    /// ```swift
    /// let longer = try ObjectPredicate(format: "pages > %@", NSNumber(value: 300))
    /// // longer.predicateFormat == "pages > 300"
    /// ```
    public var predicateValue: PredicateValue { FoundationNumber(self).predicateValue }
}

extension AttributeType {
    /// `number` as this type's stored value, when its value fits (see ``FoundationNumber``).
    ///
    /// - Throws: ``ArborError/Code/wrongValueType`` when it does not (a fraction into an integer,
    ///   anything but 0 or 1 into a boolean, any number into a non-numeric type);
    ///   ``ArborError/Code/validationNumberTooLarge`` or ``ArborError/Code/validationNumberTooSmall``
    ///   for a whole number outside an integer type's range.
    func storedValue(from number: NSNumber, entity: String, key: String) throws -> AttributeValue {
        let value = FoundationNumber(number)
        func wrong() -> ArborError {
            ArborError(.wrongValueType, "\(entity).\(key) holds \(valueTypeName) values; NSNumber given (\(number))",
                       entity: entity, key: key, value: "\(number)")
        }
        switch kind {
        case .integer16, .integer32, .integer64:
            switch value.whole {
            case .exactly(let whole): return try storedValue(from: whole, entity: entity, key: key)
            case .fraction: throw wrong()
            case .outOfRange(let negative):
                throw ArborError(negative ? .validationNumberTooSmall : .validationNumberTooLarge,
                                 "\(entity).\(key) is a \(valueTypeName); \(number) does not fit", entity: entity, key: key, value: "\(number)")
            }
        case .double:
            let double = value.double
            return .double(double.isNaN ? .nan : double)
        case .float:
            let float = Float(value.double)
            return .float(float.isNaN ? .nan : float)
        case .decimal:
            guard let decimal = value.decimal else { throw wrong() }
            return .decimal(decimal)
        case .boolean:
            guard case .exactly(let whole) = value.whole, whole == 0 || whole == 1 else { throw wrong() }
            return .boolean(whole == 1)
        case .string, .date, .binaryData, .uuid, .uri, .transformable:
            throw wrong()
        }
    }
}
