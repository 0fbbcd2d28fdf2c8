import ArborStore
import Foundation

// Safety: A component written into `componentScratch`, and a slice of the lent row bytes, are used
// within the test of that row; a filter serves one scan, on one thread.

/// A scan's filter on rows of layout 3, records (docs/row-format.md, "What the scan filter does
/// with it"): each tested column is handed to the byte tests as the component layout 2 stores,
/// and a conjunction's leading integer comparisons go to the engine's record prefilter.
extension ScanFilter {
    /// The engine-side form of a conjunction's leading integer comparisons on records: each an
    /// integer column compared with one constant (the engine reads the column's serial type and
    /// payload in its leaf loop). Nil when the predicate does not start with one.
    static func makeRecordPrefilter(accepted: Bool, prefix: [UInt8], tests: [Node], pool: [UInt8], spans: [Span]) -> ValuePrefilter? {
        guard accepted else { return nil }
        var comparisons: [ValuePrefilter.RecordComparison] = []
        for node in tests {
            guard node.kind == .compare, node.tag == KeyEncoding.Tag.int, node.count == 1,
                  node.component >= RowFormat.firstColumnComponent, spans[node.first].count == 9 else { break }
            let span = spans[node.first]
            let bits = pool[(span.start + 1)..<(span.start + 9)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            guard let relation = relation(of: node.op),
                  let comparison = ValuePrefilter.RecordComparison(column: node.component - RowFormat.firstColumnComponent, relation: relation,
                                                                   constant: Int64(bitPattern: bits ^ (1 << 63))) else { break }
            comparisons.append(comparison)
        }
        return comparisons.isEmpty ? nil : ValuePrefilter(prefix: prefix, recordComparisons: comparisons)
    }

    /// Column `column` of the current record as the key-encoding component layouts 1 and 2 store
    /// for it (nil, an int or a string; `FF`, which no test's tag matches, for a column of another
    /// type), transcoded into ``componentScratch``; nil when the record is malformed up to there.
    func recordComponent(_ column: Int, _ row: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        switch locateRecordColumn(column, row) {
        case .malformed: return nil
        case .pastEnd:
            // Past the record's last column: its fill (a column a migration appended), or nil.
            if let fill = format.fills[column] {
                return writeComponent(count: fill.component.count) { $0.copyBytes(from: fill.component) }
            }
            return writeComponent(count: 1) { $0[0] = KeyEncoding.Tag.null }
        case .located:
            break
        }
        let type = recordTypes[column], start = components[column], end = components[column + 1]
        if type == 0 { return writeComponent(count: 1) { $0[0] = KeyEncoding.Tag.null } }
        if let integer = RecordEncoding.integer(type, row, at: start) {
            return writeComponent(count: 9) { bytes in
                bytes[0] = KeyEncoding.Tag.int
                bytes.storeBytes(of: (UInt64(bitPattern: integer) ^ (1 << 63)).bigEndian, toByteOffset: 1, as: UInt64.self)
            }
        }
        guard type >= 13, type % 2 == 1 else { return writeComponent(count: 1) { $0[0] = 0xFF } }
        // Text: the tag, the UTF-8 with each zero byte escaped as 00 FF, the terminator 00 00.
        let text = UnsafeRawBufferPointer(rebasing: row[start..<end])
        // Text rarely holds a zero byte: looked for with `memchr`, counted only when there.
        var zeros = 0
        if !text.isEmpty, memchr(text.baseAddress!, 0, text.count) != nil {
            for byte in text where byte == 0 { zeros += 1 }
        }
        return writeComponent(count: text.count + zeros + 3) { bytes in
            bytes[0] = KeyEncoding.Tag.string
            var position = 1
            if zeros == 0 {
                UnsafeMutableRawBufferPointer(rebasing: bytes[1..<(1 + text.count)]).copyMemory(from: text)
                position += text.count
            } else {
                for byte in text {
                    bytes[position] = byte
                    position += 1
                    if byte == 0 {
                        bytes[position] = 0xFF
                        position += 1
                    }
                }
            }
            bytes[position] = 0
            bytes[position + 1] = 0
        }
    }

    /// Where ``locateRecordColumn(_:_:)`` left a column.
    enum RecordColumn {
        /// Its serial type and bounds are in `recordTypes` and `components`.
        case located
        /// The record ends before it (its fill, or nil).
        case pastEnd
        /// The record is malformed up to there.
        case malformed
    }

    /// Locates the current record's columns up to `column` (each once per row: the serial types
    /// and payload bounds are kept for the tests after).
    @inline(__always)
    func locateRecordColumn(_ column: Int, _ row: UnsafeRawBufferPointer) -> RecordColumn {
        if recordLocated < 0 {
            guard let record = RecordEncoding.head(of: row, from: format.entityPrefix.count) else { return .malformed }
            recordTypePosition = record.typesStart
            recordHeaderEnd = record.headerEnd
            components[0] = record.headerEnd
            recordLocated = 0
        }
        while recordLocated <= column {
            guard recordTypePosition < recordHeaderEnd else { return .pastEnd }
            guard let type = RecordEncoding.readVarint(row, &recordTypePosition), recordTypePosition <= recordHeaderEnd,
                  let size = RecordEncoding.payloadSize(type), size <= row.count - components[recordLocated] else { return .malformed }
            recordTypes[recordLocated] = type
            components[recordLocated + 1] = components[recordLocated] + size
            recordLocated += 1
        }
        return .located
    }

    /// Column `column`'s text, in place in the row, when it is text without a zero byte: then
    /// its key-encoding component would be these bytes between a tag and a terminator, and the
    /// string tests that read only the text (``Node/readsTextOnly``) read it here, copied nowhere.
    /// Nil otherwise (the component is made).
    @inline(__always)
    func recordText(_ column: Int, _ row: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard case .located = locateRecordColumn(column, row) else { return nil }
        let type = recordTypes[column]
        guard type >= 13, type % 2 == 1 else { return nil }
        let text = UnsafeRawBufferPointer(rebasing: row[components[column]..<components[column + 1]])
        if !text.isEmpty, memchr(text.baseAddress!, 0, text.count) != nil { return nil }
        return text
    }

    /// `count` bytes written by `write` into ``componentScratch`` (grown when short).
    @inline(__always)
    private func writeComponent(count: Int, _ write: (UnsafeMutableRawBufferPointer) -> Void) -> UnsafeRawBufferPointer {
        if componentScratch.count < count {
            componentScratch.deallocate()
            componentScratch = .allocate(byteCount: max(count, componentScratch.count * 2), alignment: 8)
        }
        let bytes = UnsafeMutableRawBufferPointer(rebasing: componentScratch[0..<count])
        write(bytes)
        return UnsafeRawBufferPointer(bytes)
    }
}
