import Arbor
import ArborStore
import Foundation

/// The records `arbor export` writes and `arbor import` reads: one object per line (NDJSON),
///
///     {"entity":"Book","id":"Book/12","values":{"title":"Dune","pages":412,"price":"9.99",
///      "published":"1965-08-01T00:00:00Z","author":"Author/3","tags":["Tag/1","Tag/4"]}}
///
/// (one line in the file). `entity` is the object's entity (a concrete one); `id` names the
/// object in the file, as `ENTITY/KEY` (its primary key in the exported store); `values` holds
/// every stored property by name — attributes and relationships, whose names are distinct, under
/// a key of their own so that a property called `id` or `entity` cannot clash with the record's.
///
/// | attribute type | value |
/// |---|---|
/// | integer16, integer32, integer64 | a number (`412`), exact to 64 bits |
/// | double, float | a number in its shortest exact form (`0.1`); NaN and infinities as `"nan"`, `"inf"`, `"-inf"` |
/// | decimal | a string of its digits (`"9.99"`), exact; `"NaN"` |
/// | string | a string |
/// | boolean | `true`, `false` |
/// | date | a string, ISO-8601 in UTC with the fraction the date has, exact to the bit (`"2026-12-01T09:30:15.25Z"`); a date that form cannot write exactly (outside the years 0000…9999, or in the last second of 2000) as a number, seconds since 2001-01-01 |
/// | binaryData | a string, base64 |
/// | uuid | a string (`"E621E1F8-C36C-495A-93FC-0C247A3E6E5F"`) |
/// | uri | a string, the URL's text |
/// | transformable | a string, base64 of the value's stored encoding (a store opened without the application keeps it encoded) |
///
/// A nil attribute is `null`. A to-one relationship is the destination's `id` or `null`; a
/// to-many relationship an array of `id`s, in order when it is ordered, else sorted. Transient
/// attributes are not stored, so not written.
///
/// CSV (`--format csv`, RFC 4180, CRLF line ends) has a header line `id,entity,` and then the
/// properties of the entities written, each once, in the order met; a row leaves empty the
/// properties its entity lacks. Values are the text above without JSON's quotes (a nil is an
/// empty field, an empty string `""`), a to-many relationship its `id`s separated by spaces.
enum ObjectRecords {
    /// One field of a record: a JSON value (NDJSON) or a cell (CSV).
    enum Field: Equatable {
        case null
        /// A JSON number, as its text.
        case number(String)
        case text(String)
        case boolean(Bool)
        /// Object `id`s (a to-many relationship).
        case list([String])

        /// The field as JSON.
        func appendJSON(to out: inout [UInt8]) {
            switch self {
            case .null: out.append(contentsOf: "null".utf8)
            case .number(let text): out.append(contentsOf: text.utf8)
            case .text(let text): Cell.appendJSONString(text, to: &out)
            case .boolean(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
            case .list(let ids):
                out.append(UInt8(ascii: "["))
                for (index, id) in ids.enumerated() {
                    if index > 0 { out.append(UInt8(ascii: ",")) }
                    Cell.appendJSONString(id, to: &out)
                }
                out.append(UInt8(ascii: "]"))
            }
        }

        /// The field as CSV text: nil for an empty (null) field.
        var csvText: String? {
            switch self {
            case .null: nil
            case .number(let text), .text(let text): text
            case .boolean(let value): value ? "true" : "false"
            case .list(let ids): ids.isEmpty ? nil : ids.joined(separator: " ")
            }
        }
    }

    /// Why a record cannot be read.
    struct Unreadable: Error, CustomStringConvertible {
        var reason: String
        var description: String { reason }
    }

    /// An object's `id` in the records: `ENTITY/KEY`.
    static func id(_ objectID: ManagedObjectID) -> String { Cell.name(objectID) }

    // MARK: Writing

    /// The field of `value`, the Swift value `value(forKey:)` gives for an attribute of `kind`.
    static func field(_ value: Any?, kind: AttributeType.Kind) -> Field {
        guard let value else { return .null }
        switch (kind, value) {
        case (_, let number as any BinaryInteger): return .number("\(number)")
        case (.float, let number as Float): return number.isFinite ? .number("\(number)") : .text(nonFinite(Double(number)))
        case (_, let number as Double): return number.isFinite ? .number("\(number)") : .text(nonFinite(number))
        case (_, let number as Decimal): return .text(number.isNaN ? "NaN" : number.description)
        case (_, let text as String): return .text(text)
        case (_, let flag as Bool): return .boolean(flag)
        case (_, let date as Date):
            if let text = ISO8601Date.exactString(from: date) { return .text(text) }
            let interval = date.timeIntervalSinceReferenceDate
            return interval.isFinite ? .number("\(interval)") : .text(nonFinite(interval))
        case (_, let data as Data): return .text(data.base64EncodedString())
        case (_, let uuid as UUID): return .text(uuid.uuidString)
        case (_, let url as URL): return .text(url.absoluteString)
        default: return .text("\(value)")
        }
    }

    /// `nan`, `inf` or `-inf`.
    static func nonFinite(_ number: Double) -> String { number.isNaN ? "nan" : (number < 0 ? "-inf" : "inf") }

    // MARK: Reading

    /// The Swift value a record's `json` stands for, for an attribute of `kind` (nil for null),
    /// to give `setValue(_:forKey:)`.
    ///
    /// - Throws: ``Unreadable`` when `json` is not a value of that type.
    static func value(_ json: JSONValue, kind: AttributeType.Kind) throws(Unreadable) -> Any? {
        func wrong(_ expected: String) -> Unreadable {
            Unreadable(reason: "expected \(expected), found \(describe(json))")
        }
        switch (kind, json) {
        case (_, .null): return nil
        case (.integer16, .number(let text)), (.integer32, .number(let text)), (.integer64, .number(let text)):
            guard let value = Int64(text) else { throw wrong("a whole number that fits 64 bits") }
            return value
        case (.double, .number(let text)):
            guard let value = Double(text) else { throw wrong("a number") }
            return value
        case (.float, .number(let text)):
            guard let value = Float(text) else { throw wrong("a number") }
            return value
        case (.double, .string(let text)), (.float, .string(let text)):
            guard let value = nonFiniteValue(text) else { throw wrong("a number, or \"nan\", \"inf\" or \"-inf\"") }
            return kind == .float ? Float(value) as Any : value
        case (.decimal, .string(let text)), (.decimal, .number(let text)):
            guard let value = decimal(text) else { throw wrong("a decimal number (\"9.99\")") }
            return value
        case (.string, .string(let text)): return text
        case (.boolean, .bool(let value)): return value
        case (.date, .string(let text)):
            if let interval = nonFiniteValue(text) { return Date(timeIntervalSinceReferenceDate: interval) }
            do {
                return try ISO8601Date.date(from: text)
            } catch {
                throw wrong("an ISO-8601 date (\(ISO8601Date.examples)): \(error.reason)")
            }
        case (.date, .number(let text)):
            guard let interval = Double(text) else { throw wrong("seconds since 2001-01-01") }
            return Date(timeIntervalSinceReferenceDate: interval)
        case (.binaryData, .string(let text)), (.transformable, .string(let text)):
            guard let data = Data(base64Encoded: text) else { throw wrong("base64") }
            return data
        case (.uuid, .string(let text)):
            guard let uuid = UUID(uuidString: text) else { throw wrong("a UUID") }
            return uuid
        case (.uri, .string(let text)):
            guard let url = URL(string: text) else { throw wrong("a URL") }
            return url
        case (.string, _): throw wrong("a string")
        case (.boolean, _): throw wrong("true or false")
        case (.integer16, _), (.integer32, _), (.integer64, _): throw wrong("a whole number")
        case (.double, _), (.float, _): throw wrong("a number")
        case (.decimal, _): throw wrong("a decimal number as a string (\"9.99\")")
        case (.date, _): throw wrong("an ISO-8601 date")
        case (.binaryData, _), (.transformable, _): throw wrong("base64 text")
        case (.uuid, _): throw wrong("a UUID")
        case (.uri, _): throw wrong("a URL")
        }
    }

    /// The `id`s of a relationship's value: one or none for a to-one (`"Author/3"` or null),
    /// any number for a to-many (an array).
    static func ids(_ json: JSONValue, toMany: Bool) throws(Unreadable) -> [String] {
        switch (json, toMany) {
        case (.null, _): return []
        case (.string(let id), false): return [id]
        case (.array(let elements), true):
            var ids: [String] = []
            for element in elements {
                guard case .string(let id) = element else { throw Unreadable(reason: "expected object ids (strings), found \(describe(element))") }
                ids.append(id)
            }
            return ids
        default:
            throw Unreadable(reason: "expected \(toMany ? "an array of object ids" : "an object id or null"), found \(describe(json))")
        }
    }

    /// `nan`, `inf`, `-inf` as numbers.
    static func nonFiniteValue(_ text: String) -> Double? {
        switch text {
        case "nan": .nan
        case "inf": .infinity
        case "-inf": -.infinity
        default: nil
        }
    }

    /// A decimal's text, read whole (`Decimal(string:)` alone stops at the first character it
    /// cannot read, and takes `12abc` for 12).
    static func decimal(_ text: String) -> Decimal? {
        if text == "NaN" { return .nan }
        let pattern = /-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/
        guard text.wholeMatch(of: pattern) != nil else { return nil }
        return Decimal(string: text, locale: Locale(identifier: "en_US_POSIX"))
    }

    /// A JSON value for a message: its kind, and a short form of it.
    static func describe(_ json: JSONValue) -> String {
        switch json {
        case .null: "null"
        case .bool(let value): "\(value)"
        case .number(let text): "the number \(text)"
        case .string(let text): "the string \(Cell.jsonString(text.count > 40 ? String(text.prefix(40)) + "…" : text))"
        case .array, .object: json.kindName
        }
    }
}
