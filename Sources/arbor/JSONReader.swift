/// A JSON value as `arbor import` reads it: numbers kept as their text, so that each is
/// converted once, exactly, to the type of the attribute it is for (an `Int64` past 2^53, a
/// `Double` to the last bit, a `Float` from its own shortest digits).
enum JSONValue: Equatable {
    case null
    case bool(Bool)
    /// A number, as written (`-12`, `2.5e-07`).
    case number(String)
    case string(String)
    case array([JSONValue])
    /// An object's members, in the order written (a key appears once).
    case object([(key: String, value: JSONValue)])

    static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case (.bool(let x), .bool(let y)): x == y
        case (.number(let x), .number(let y)), (.string(let x), .string(let y)): x == y
        case (.array(let x), .array(let y)): x == y
        case (.object(let x), .object(let y)): x.map(\.key) == y.map(\.key) && x.map(\.value) == y.map(\.value)
        default: false
        }
    }

    /// What the value is, for messages (`a string`, `an array`).
    var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// Reads one JSON text (RFC 8259) into a ``JSONValue``.
struct JSONReader {
    /// Why a text is not JSON, and where.
    struct Malformed: Error, CustomStringConvertible {
        /// The byte offset, from 0.
        var offset: Int
        var reason: String
        var description: String { "\(reason) (at byte \(offset + 1))" }
    }

    /// How deeply arrays and objects may nest: the records nest two levels; a hostile line
    /// cannot exhaust the stack.
    static let maximumDepth = 32

    private let bytes: [UInt8]
    private var position = 0
    private var depth = 0

    /// The value `text` holds, with nothing but white space after it.
    static func value(of text: String) throws(Malformed) -> JSONValue {
        var reader = JSONReader(bytes: Array(text.utf8))
        let value = try reader.value()
        reader.skipSpace()
        guard reader.position == reader.bytes.count else { throw reader.malformed("unexpected text after the value") }
        return value
    }

    private init(bytes: [UInt8]) { self.bytes = bytes }

    private func malformed(_ reason: String) -> Malformed { Malformed(offset: position, reason: reason) }

    private var current: UInt8? { position < bytes.count ? bytes[position] : nil }

    private mutating func skipSpace() {
        while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { position += 1 }
    }

    private mutating func value() throws(Malformed) -> JSONValue {
        skipSpace()
        guard let byte = current else { throw malformed("the text ends where a value was expected") }
        switch byte {
        case UInt8(ascii: "{"): return try nested { (reader: inout JSONReader) throws(Malformed) in try reader.object() }
        case UInt8(ascii: "["): return try nested { (reader: inout JSONReader) throws(Malformed) in try reader.array() }
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try word("true"); return .bool(true)
        case UInt8(ascii: "f"): try word("false"); return .bool(false)
        case UInt8(ascii: "n"): try word("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw malformed("expected a value")
        }
    }

    /// Reads an array or object one level deeper.
    private mutating func nested(_ body: (inout JSONReader) throws(Malformed) -> JSONValue) throws(Malformed) -> JSONValue {
        depth += 1
        defer { depth -= 1 }
        guard depth <= Self.maximumDepth else { throw malformed("arrays and objects nest more than \(Self.maximumDepth) levels") }
        return try body(&self)
    }

    private mutating func object() throws(Malformed) -> JSONValue {
        position += 1
        var members: [(key: String, value: JSONValue)] = []
        var keys = Set<String>()
        skipSpace()
        if current == UInt8(ascii: "}") { position += 1; return .object(members) }
        while true {
            skipSpace()
            guard current == UInt8(ascii: "\"") else { throw malformed("expected a key (a string)") }
            let key = try string()
            guard keys.insert(key).inserted else { throw malformed("the key \"\(key)\" appears twice") }
            skipSpace()
            guard current == UInt8(ascii: ":") else { throw malformed("expected ':' after the key") }
            position += 1
            members.append((key, try value()))
            skipSpace()
            switch current {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "}"): position += 1; return .object(members)
            default: throw malformed("expected ',' or '}' in the object")
            }
        }
    }

    private mutating func array() throws(Malformed) -> JSONValue {
        position += 1
        var elements: [JSONValue] = []
        skipSpace()
        if current == UInt8(ascii: "]") { position += 1; return .array(elements) }
        while true {
            elements.append(try value())
            skipSpace()
            switch current {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "]"): position += 1; return .array(elements)
            default: throw malformed("expected ',' or ']' in the array")
            }
        }
    }

    private mutating func word(_ text: String) throws(Malformed) {
        let expected = Array(text.utf8)
        guard bytes.count - position >= expected.count, Array(bytes[position..<position + expected.count]) == expected else {
            throw malformed("expected a value")
        }
        position += expected.count
    }

    /// A number's text: `-`, digits without a leading zero, a fraction, an exponent.
    private mutating func number() throws(Malformed) -> String {
        let start = position
        func digits(_ reader: inout JSONReader) -> Int {
            let first = reader.position
            while let byte = reader.current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { reader.position += 1 }
            return reader.position - first
        }
        if current == UInt8(ascii: "-") { position += 1 }
        let leading = current
        let whole = digits(&self)
        guard whole > 0 else { throw malformed("expected digits in the number") }
        guard whole == 1 || leading != UInt8(ascii: "0") else { throw malformed("a number has no leading zeros") }
        if current == UInt8(ascii: ".") {
            position += 1
            guard digits(&self) > 0 else { throw malformed("expected digits after the decimal point") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            position += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
            guard digits(&self) > 0 else { throw malformed("expected digits in the exponent") }
        }
        return String(decoding: bytes[start..<position], as: UTF8.self)
    }

    /// A string, its escapes decoded (`\u` pairs of surrogates joined).
    private mutating func string() throws(Malformed) -> String {
        position += 1
        var scalars = String.UnicodeScalarView()
        var run = position
        func flush(_ reader: JSONReader, upTo end: Int) throws(Malformed) {
            guard run < end else { return }
            guard let text = String(validating: reader.bytes[run..<end], as: UTF8.self) else { throw reader.malformed("the string is not UTF-8") }
            scalars.append(contentsOf: text.unicodeScalars)
        }
        while true {
            guard let byte = current else { throw malformed("the string is not closed") }
            switch byte {
            case UInt8(ascii: "\""):
                try flush(self, upTo: position)
                position += 1
                return String(scalars)
            case UInt8(ascii: "\\"):
                try flush(self, upTo: position)
                position += 1
                scalars.append(try escape())
                run = position
            case ..<0x20:
                throw malformed("a control character in a string must be escaped")
            default:
                position += 1
            }
        }
    }

    /// The character of the escape after a backslash.
    private mutating func escape() throws(Malformed) -> Unicode.Scalar {
        guard let byte = current else { throw malformed("the string is not closed") }
        position += 1
        switch byte {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let unit = try hexUnit()
            if (0xD800..<0xDC00).contains(unit) {
                guard current == UInt8(ascii: "\\"), position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: "u") else {
                    throw malformed("a high surrogate (\\u\(String(unit, radix: 16))) needs a low one after it")
                }
                position += 2
                let low = try hexUnit()
                guard (0xDC00..<0xE000).contains(low) else { throw malformed("expected a low surrogate") }
                return Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))!
            }
            guard let scalar = Unicode.Scalar(unit) else { throw malformed("a lone low surrogate") }
            return scalar
        default:
            throw malformed("unknown escape \\\(Character(Unicode.Scalar(byte)))")
        }
    }

    /// Four hexadecimal digits.
    private mutating func hexUnit() throws(Malformed) -> UInt32 {
        guard bytes.count - position >= 4 else { throw malformed("expected four hexadecimal digits after \\u") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = hexValue(bytes[position]) else { throw malformed("expected four hexadecimal digits after \\u") }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }
}
