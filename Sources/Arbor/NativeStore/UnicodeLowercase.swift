// Safety: `lower` reads the lent text within bounds it checks first, and writes into an output its
// caller sizes with `capacity(for:)` (at most three bytes out per byte in).

/// The `[c]` fold of non-ASCII text, scalar by scalar, on UTF-8 bytes (``ScanFilter`` uses it in
/// a scan): Swift's `String.lowercased()` maps each scalar to its `lowercaseMapping`, whatever
/// is around it, so a table of the scalars whose mapping differs folds a row's bytes exactly as
/// the evaluator folds its string — with no `String`, no allocation and no cache per row.
/// (`UnicodeLowercaseTests` compares the two over every scalar.)
///
/// The table is built once per process, at the first non-ASCII `[c]` test: the scalars from
/// U+0080 to U+FFFF in an array of entries into a byte pool, the others (a few hundred letters of
/// historic scripts) in a dictionary.
enum UnicodeLowercase {
    /// Where a scalar's mapping is in ``Table/pool``: its offset and length (length 0: the
    /// scalar maps to itself).
    struct Entry {
        var offset: UInt32 = 0
        var length: UInt8 = 0
    }

    struct Table: Sendable {
        /// Entries of U+0080 … U+FFFF, by scalar − 0x80.
        let basic: [Entry]
        /// Entries of the scalars above U+FFFF that change.
        let supplementary: [UInt32: Entry]
        /// The mappings, as UTF-8.
        let pool: [UInt8]

        nonisolated(unsafe) static let shared = Table()

        init() {
            var basic = [Entry](repeating: Entry(), count: 0x10000 - 0x80)
            var supplementary: [UInt32: Entry] = [:]
            var pool: [UInt8] = []
            for value in UInt32(0x80)...0x10FFFF {
                guard let scalar = Unicode.Scalar(value), scalar.properties.changesWhenLowercased else { continue }
                let mapping = scalar.properties.lowercaseMapping
                guard mapping.unicodeScalars.count != 1 || mapping.unicodeScalars.first != scalar else { continue }
                let entry = Entry(offset: UInt32(pool.count), length: UInt8(mapping.utf8.count))
                pool.append(contentsOf: mapping.utf8)
                if value < 0x10000 { basic[Int(value) - 0x80] = entry } else { supplementary[value] = entry }
            }
            self.basic = basic
            self.supplementary = supplementary
            self.pool = pool
        }
    }

    /// The longest a lowercased UTF-8 string can be, for `count` bytes (a mapping is at most
    /// three times its scalar's bytes).
    static func capacity(for count: Int) -> Int { 3 * count }

    /// Lowers the UTF-8 scalar starting at `text[index]` (its first byte at or above 0x80) into
    /// `output` at `written`, and returns the bytes read and written; nil when the bytes are not
    /// a well-formed scalar (the caller leaves the string to the evaluator).
    @inline(__always)
    static func lower(_ text: UnsafeRawBufferPointer, at index: Int, into output: UnsafeMutableRawBufferPointer, at written: Int,
                      table: Table) -> (read: Int, written: Int)? {
        let lead = text[index]
        let length: Int
        var value: UInt32
        switch lead {
        case 0xC2...0xDF: (length, value) = (2, UInt32(lead & 0x1F))
        case 0xE0...0xEF: (length, value) = (3, UInt32(lead & 0x0F))
        case 0xF0...0xF4: (length, value) = (4, UInt32(lead & 0x07))
        default: return nil
        }
        guard index + length <= text.count else { return nil }
        for offset in 1..<length {
            let byte = text[index + offset]
            guard byte & 0xC0 == 0x80 else { return nil }
            value = value << 6 | UInt32(byte & 0x3F)
        }
        // Overlong and out-of-range forms are not scalars.
        guard value >= [0, 0, 0x80, 0x800, 0x10000][length], value <= 0x10FFFF, !(0xD800...0xDFFF).contains(value) else { return nil }
        let entry = value < 0x10000 ? table.basic[Int(value) - 0x80] : (table.supplementary[value] ?? Entry())
        if entry.length == 0 {
            for offset in 0..<length { output[written + offset] = text[index + offset] }
            return (length, length)
        }
        table.pool.withUnsafeBytes { pool in
            for offset in 0..<Int(entry.length) { output[written + offset] = pool[Int(entry.offset) + offset] }
        }
        return (length, Int(entry.length))
    }
}
