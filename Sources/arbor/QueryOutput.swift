import Arbor
import ArgumentParser
import Foundation

/// The formats `arbor query --format` writes.
enum QueryFormat: String, ExpressibleByArgument, CaseIterable {
    case table, json, ndjson, csv
}

/// One value of a result row, typed enough for JSON.
enum Cell {
    case null
    case integer(Int64)
    /// A number written as its exact decimal text (a `Decimal`).
    case decimal(String)
    case double(Double)
    case boolean(Bool)
    case text(String)
    /// Bytes: base64 in JSON and CSV, their count in a table.
    case data(Data)

    /// The cell of a stored value.
    init(_ value: AttributeValue?) {
        switch value {
        case nil: self = .null
        case .integer(let n)?: self = .integer(n)
        case .decimal(let d)?: self = .decimal(d.description)
        case .double(let d)?: self = .double(d)
        case .float(let f)?: self = .double(Double(f))
        case .string(let s)?: self = .text(s)
        case .boolean(let b)?: self = .boolean(b)
        case .date(let date)?: self = .text(Cell.iso8601(date))
        case .data(let data)?, .transformable(let data)?: self = .data(data)
        case .uuid(let uuid)?: self = .text(uuid.uuidString)
        case .uri(let url)?: self = .text(url.absoluteString)
        }
    }

    /// A to-one destination, as `Entity/KEY`.
    init(_ id: ManagedObjectID?) {
        guard let id else { self = .null; return }
        self = .text(Cell.name(id))
    }

    static func name(_ id: ManagedObjectID) -> String { "\(id.entityName)/\(id.primaryKey.map(String.init) ?? "?")" }

    /// A date in UTC, with its fraction of a second when it has one (to the microsecond), as
    /// `--arg` and `CAST` read it back.
    static func iso8601(_ date: Date) -> String {
        let seconds = date.timeIntervalSince1970
        let whole = seconds.rounded(.down)
        var text = Date(timeIntervalSince1970: whole).formatted(.iso8601)
        let micros = Int(((seconds - whole) * 1_000_000).rounded())
        if micros > 0 && micros < 1_000_000 {
            var fraction = String(micros)
            fraction = String(repeating: "0", count: 6 - fraction.count) + fraction
            while fraction.hasSuffix("0") { fraction.removeLast() }
            text.insert(contentsOf: "." + fraction, at: text.index(before: text.endIndex))
        }
        return text
    }

    /// The cell as plain text (a table, CSV): nil for null.
    var text: String? {
        switch self {
        case .null: nil
        case .integer(let n): String(n)
        case .decimal(let d): d
        case .double(let d): d.isFinite ? "\(d)" : (d.isNaN ? "nan" : (d < 0 ? "-inf" : "inf"))
        case .boolean(let b): b ? "true" : "false"
        case .text(let s): s
        case .data(let data): data.base64EncodedString()
        }
    }

    /// The cell as a JSON value.
    var json: String {
        switch self {
        case .null: "null"
        case .integer(let n): String(n)
        case .decimal(let d): d
        // JSON has no infinities or NaN: those are strings, as the table writes them.
        case .double(let d): d.isFinite ? "\(d)" : Cell.jsonString(text!)
        case .boolean(let b): b ? "true" : "false"
        case .text(let s): Cell.jsonString(s)
        case .data: Cell.jsonString(text!)
        }
    }

    /// `text` as a JSON string (RFC 8259): quotes, backslashes and control characters escaped.
    static func jsonString(_ text: String) -> String {
        var out = [UInt8]()
        appendJSONString(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `text` as a JSON string to `out`.
    static func appendJSONString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            // Most strings need no escape: copied whole.
            guard bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
                out.append(contentsOf: bytes)
                return
            }
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
                case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                case 0x08: out.append(contentsOf: [0x5C, UInt8(ascii: "b")])
                case 0x0C: out.append(contentsOf: [0x5C, UInt8(ascii: "f")])
                case ..<0x20: out.append(contentsOf: Array("\\u00".utf8) + [hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 15)]])
                default: out.append(byte)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// Writes result rows as they come, in one format: nothing but a table's first rows is kept.
struct QueryOutput {
    /// The rows a table reads for its column widths before it prints any.
    static let tableWidthRows = 1000

    let format: QueryFormat
    /// The columns: `id`, then attributes and to-one relationships.
    let columns: [String]
    /// Each column's name as a JSON key with its colon, after a comma (`,"salary":`).
    private let jsonKeys: [[UInt8]]
    private var output = StandardOutput()
    private var written = 0
    /// A table's first rows, until their widths are known.
    private var pending: [[String]] = []
    private var widths: [Int] = []

    init(format: QueryFormat, columns: [String]) {
        self.format = format
        self.columns = columns
        jsonKeys = columns.map { column in
            var key: [UInt8] = [UInt8(ascii: ",")]
            Cell.appendJSONString(column, to: &key)
            return key + [UInt8(ascii: ":")]
        }
        switch format {
        case .csv:
            for (index, column) in columns.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                Self.appendCSVField(column, to: &output.buffer)
            }
            output.write("\r\n")
        case .json: output.write("[")
        case .table, .ndjson: break
        }
    }

    /// Writes one row: its entity, and a cell per column.
    mutating func write(entity: String, _ cells: [Cell]) {
        switch format {
        case .table:
            let texts = cells.map { Self.tableText($0) }
            if widths.isEmpty {
                pending.append(texts)
                if pending.count == Self.tableWidthRows { flushTable() }
            } else {
                output.write(line(texts))
            }
        case .csv:
            for (index, cell) in cells.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                if let text = cell.text { Self.appendCSVField(text, to: &output.buffer) }
            }
            output.write("\r\n")
        case .json, .ndjson:
            if format == .json { output.write(written == 0 ? "\n" : ",\n") }
            output.write("{\"id\":" + cells[0].json + ",\"entity\":")
            Cell.appendJSONString(entity, to: &output.buffer)
            for (key, cell) in zip(jsonKeys.dropFirst(), cells.dropFirst()) {
                output.buffer.append(contentsOf: key)
                if case .text(let text) = cell {
                    Cell.appendJSONString(text, to: &output.buffer)
                } else {
                    output.write(cell.json)
                }
            }
            output.write(format == .json ? "}" : "}\n")
        }
        output.flushIfFull()
        written += 1
    }

    /// Ends the output (a table's buffered rows, JSON's closing bracket) and flushes it.
    mutating func finish() {
        switch format {
        case .table: if widths.isEmpty { flushTable() }
        case .json: output.write(written == 0 ? "]\n" : "\n]\n")
        case .csv, .ndjson: break
        }
        output.flush()
    }

    /// Prints the header and the buffered rows of a table, and fixes its widths.
    private mutating func flushTable() {
        widths = columns.map(\.count)
        for row in pending { for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) } }
        output.write(line(columns))
        output.write(line(widths.map { String(repeating: "-", count: $0) }))
        for row in pending { output.write(line(row)) }
        pending = []
    }

    /// A table line: cells padded to their column's width (a wider one pushes the rest along),
    /// two spaces apart, no trailing spaces.
    private func line(_ cells: [String]) -> String {
        var text = ""
        for (index, cell) in cells.enumerated() {
            if index > 0 { text += "  " }
            text += cell
            if index < cells.count - 1 { text += String(repeating: " ", count: max(0, widths[index] - cell.count)) }
        }
        while text.hasSuffix(" ") { text.removeLast() }
        return text + "\n"
    }

    /// A cell as a table shows it: NULL for null, the size of data, control characters escaped
    /// so that a row stays one line.
    static func tableText(_ cell: Cell) -> String {
        switch cell {
        case .null: return "NULL"
        case .data(let data): return "<\(data.count) bytes>"
        case .text(let s) where s.utf8.contains(where: { $0 < 0x20 }):
            var escaped = ""
            for scalar in s.unicodeScalars {
                switch scalar {
                case "\n": escaped += "\\n"
                case "\r": escaped += "\\r"
                case "\t": escaped += "\\t"
                case _ where scalar.value < 0x20: escaped += "\\u" + String(format: "%04x", scalar.value)
                default: escaped.unicodeScalars.append(scalar)
                }
            }
            return escaped
        default: return cell.text!
        }
    }

    /// Appends a CSV field (RFC 4180): quoted when it holds a comma, a quote, a line break or
    /// nothing, quotes doubled. (A null is written as no field at all: an empty unquoted field;
    /// an empty string is `""`.)
    static func appendCSVField(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { bytes in
            let quoted = bytes.isEmpty || bytes.contains { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == 0x0A || $0 == 0x0D }
            guard quoted else {
                out.append(contentsOf: bytes)
                return
            }
            out.append(UInt8(ascii: "\""))
            for byte in bytes {
                out.append(byte)
                if byte == UInt8(ascii: "\"") { out.append(byte) }
            }
            out.append(UInt8(ascii: "\""))
        }
    }
}

extension StandardOutput {
    mutating func append(_ byte: UInt8) { buffer.append(byte) }

    /// Writes the buffer out once it holds 64 KiB.
    mutating func flushIfFull() {
        if buffer.count >= 1 << 16 { flush() }
    }
}
