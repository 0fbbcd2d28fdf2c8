import Foundation

// Safety: Encoded bytes are lent for the call, and `withEncodedInteger` lends a buffer on the stack
// to `body` only.

/// One component of a typed key tuple.
///
/// Tuples of components encode (``KeyEncoding/encode(_:compactIntegers:)``) to bytes whose `memcmp` order is the
/// natural order of the tuples, so composite index keys compare correctly inside the B+tree:
/// component by component; within a component, by kind first (null < booleans < integers <
/// doubles < dates < strings < data < UUIDs), then by value.
public enum KeyComponent: Hashable, Sendable, CustomStringConvertible {
    /// The absent value; sorts before everything else.
    case null
    /// false < true.
    case bool(Bool)
    /// Signed 64-bit integers, in numeric order.
    case int(Int64)
    /// Doubles in numeric order: −∞ < … < −0 = +0 < … < +∞ < NaN (every NaN is one value).
    case double(Double)
    /// Dates, in time order (at the resolution of a `Double` of seconds).
    case date(Date)
    /// Strings, in the binary order of their UTF-8 bytes (that is, Unicode scalar order).
    case string(String)
    /// Bytes, in `memcmp` order (a prefix sorts first).
    case data([UInt8])
    /// UUIDs, in the order of their 16 bytes.
    case uuid(UUID)

    public var description: String {
        switch self {
        case .null: "null"
        case .bool(let value): "\(value)"
        case .int(let value): "\(value)"
        case .double(let value): "\(value)"
        case .date(let value): "\(value)"
        case .string(let value): "\"\(value)\""
        case .data(let value): "<\(value.count) bytes>"
        case .uuid(let value): value.uuidString
        }
    }

    public static func == (a: KeyComponent, b: KeyComponent) -> Bool {
        KeyEncoding.encode([a]) == KeyEncoding.encode([b])
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(KeyEncoding.encode([self]))
    }
}

/// The order-preserving encoding of key tuples. See `docs/file-format.md`, "Key encoding".
public enum KeyEncoding {
    /// The first byte of each kind of component (docs/file-format.md, "Key encoding"): readers
    /// that test encoded values in place (a store's scan filter) compare against these.
    public enum Tag {
        /// `null`.
        public static let null: UInt8 = 0x05
        /// `false`.
        public static let falseValue: UInt8 = 0x10
        /// `true`.
        public static let trueValue: UInt8 = 0x11
        /// An integer: eight big-endian bytes with the sign bit flipped.
        public static let int: UInt8 = 0x20
        /// The first of the nine tags of a *compact* integer, one that is not negative: tag
        /// `compactInteger + n` is followed by the value in `n` big-endian bytes, as few as it
        /// needs (0 has none; n is 0…8). Negative integers keep the form of ``int``, whose tag
        /// sorts below, so a store that writes its integers this way keeps their order
        /// (``append(_:to:compactIntegers:)``). Readers read both forms.
        public static let compactInteger: UInt8 = 0x21
        /// The last compact-integer tag (eight bytes).
        public static let lastCompactInteger: UInt8 = 0x29
        /// A double: eight bytes of its ordered bits.
        public static let double: UInt8 = 0x30
        /// A date: a double of seconds since the reference date.
        public static let date: UInt8 = 0x38
        /// A string: its UTF-8 with zero bytes escaped as `00 FF`, then `00 00`.
        public static let string: UInt8 = 0x40
        /// Bytes, escaped as strings are.
        public static let data: UInt8 = 0x50
        /// A UUID: its sixteen bytes.
        public static let uuid: UInt8 = 0x60
    }

    /// Encodes a tuple; with `compactIntegers`, integers that are not negative in their compact
    /// form (``Tag/compactInteger``).
    public static func encode(_ components: [KeyComponent], compactIntegers: Bool = false) -> [UInt8] {
        var bytes: [UInt8] = []
        for component in components { append(component, to: &bytes, compactIntegers: compactIntegers) }
        return bytes
    }

    /// Appends one component's encoding; with `compactIntegers`, an integer that is not
    /// negative in its compact form (``Tag/compactInteger``): one to nine bytes instead of nine.
    /// A tree's keys must all be written one way or all the other: the two forms of one value
    /// differ, and only each form on its own keeps the integers' order.
    public static func append(_ component: KeyComponent, to bytes: inout [UInt8], compactIntegers: Bool = false) {
        switch component {
        case .null:
            bytes.append(Tag.null)
        case .bool(let value):
            bytes.append(value ? Tag.trueValue : Tag.falseValue)
        case .int(let value) where compactIntegers && value >= 0:
            appendCompactInteger(UInt64(value), to: &bytes)
        case .int(let value):
            bytes.append(Tag.int)
            appendBigEndian(UInt64(bitPattern: value) ^ (1 << 63), to: &bytes)
        case .double(let value):
            bytes.append(Tag.double)
            appendBigEndian(orderedBits(value), to: &bytes)
        case .date(let value):
            bytes.append(Tag.date)
            appendBigEndian(orderedBits(value.timeIntervalSinceReferenceDate), to: &bytes)
        case .string(let value):
            bytes.append(Tag.string)
            appendEscaped(value.utf8, to: &bytes)
        case .data(let value):
            bytes.append(Tag.data)
            appendEscaped(value, to: &bytes)
        case .uuid(let value):
            bytes.append(Tag.uuid)
            withUnsafeBytes(of: value.uuid) { bytes.append(contentsOf: $0) }
        }
    }

    /// Decodes a tuple (``KeyReader`` reads one in place, a component at a time).
    ///
    /// - Throws: `corrupt` when the bytes are not a valid encoding.
    public static func decode(_ bytes: [UInt8]) throws -> [KeyComponent] {
        try bytes.withUnsafeBytes { raw in
            var reader = KeyReader(raw)
            var components: [KeyComponent] = []
            while let component = try reader.next() { components.append(component) }
            return components
        }
    }

    /// The offset just past the component starting at `start` (nil when the bytes there are not
    /// a valid component): skips a component without decoding it.
    public static func componentEnd<C: RandomAccessCollection<UInt8>>(_ bytes: C, from start: C.Index) -> C.Index? {
        guard start < bytes.endIndex else { return nil }
        let tag = bytes[start]
        var position = bytes.index(after: start)
        func fixed(_ count: Int) -> C.Index? {
            bytes.distance(from: position, to: bytes.endIndex) >= count ? bytes.index(position, offsetBy: count) : nil
        }
        switch tag {
        case Tag.null, Tag.falseValue, Tag.trueValue: return position
        case Tag.compactInteger...Tag.lastCompactInteger: return fixed(Int(tag - Tag.compactInteger))
        case Tag.int, Tag.double, Tag.date: return fixed(8)
        case Tag.uuid: return fixed(16)
        case Tag.string, Tag.data:
            while position < bytes.endIndex {
                let byte = bytes[position]
                position = bytes.index(after: position)
                guard byte == 0 else { continue }
                guard position < bytes.endIndex else { return nil }
                let next = bytes[position]
                position = bytes.index(after: position)
                if next == 0 { return position }
                guard next == 0xFF else { return nil }
            }
            return nil
        default:
            return nil
        }
    }

    /// The byte order of two encodings (negative, zero or positive; a prefix sorts first), as
    /// the B-tree compares keys: eight bytes at a time (keys and components are short, and a
    /// call to `memcmp` costs more than the comparison).
    @inlinable
    public static func order(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        compareBytes(a, b)  // the B-tree's own key comparison
    }

    /// ``componentEnd(_:from:)`` on bytes in place, without generic dispatch: the skip a scan
    /// makes for every component of every row it reads (strings are skipped with `memchr`).
    /// Inlinable: a scan calls it from another module for every component it locates.
    @inlinable
    public static func componentEnd(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard start < bytes.count, let base = bytes.baseAddress else { return nil }
        let count = bytes.count
        let tag = base.load(fromByteOffset: start, as: UInt8.self)
        switch tag {
        case Tag.null, Tag.falseValue, Tag.trueValue: return start + 1
        case Tag.compactInteger...Tag.lastCompactInteger:
            let end = start + 1 + Int(tag - Tag.compactInteger)
            return end <= count ? end : nil
        case Tag.int, Tag.double, Tag.date: return start + 9 <= count ? start + 9 : nil
        case Tag.uuid: return start + 17 <= count ? start + 17 : nil
        case Tag.string, Tag.data:
            var position = start + 1
            while position < count {
                guard let zero = memchr(base + position, 0, count - position) else { return nil }
                let at = base.distance(to: UnsafeRawPointer(zero))
                guard at + 1 < count else { return nil }
                let next = base.load(fromByteOffset: at + 1, as: UInt8.self)
                if next == 0 { return at + 2 }
                guard next == 0xFF else { return nil }
                position = at + 2
            }
            return nil
        default:
            return nil
        }
    }

    /// The integer `bytes` encode when they are exactly one integer component (a table's key),
    /// read in place; nil for anything else.
    public static func integer(exactly bytes: UnsafeRawBufferPointer) -> Int64? {
        guard let tag = bytes.first else { return nil }
        if tag == Tag.int {
            guard bytes.count == 9 else { return nil }
            let raw = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 1, as: UInt64.self))
            return Int64(bitPattern: raw ^ (1 << 63))
        }
        guard tag >= Tag.compactInteger, tag <= Tag.lastCompactInteger, bytes.count == 1 + Int(tag - Tag.compactInteger) else { return nil }
        return compactInteger(UnsafeRawBufferPointer(rebasing: bytes[1..<bytes.count]))
    }

    /// The value of a compact integer's payload (`bytes`, 0…8 big-endian bytes); nil when it
    /// does not fit an `Int64` (a damaged key: eight bytes with the top bit set).
    static func compactInteger(_ bytes: UnsafeRawBufferPointer) -> Int64? {
        var value: UInt64 = 0
        for byte in bytes { value = value << 8 | UInt64(byte) }
        return value <= UInt64(Int64.max) ? Int64(value) : nil
    }

    /// Appends `value` as a compact integer (``Tag/compactInteger``).
    @inlinable
    public static func appendCompactInteger(_ value: UInt64, to bytes: inout [UInt8]) {
        withUnsafeTemporaryAllocation(byteCount: 9, alignment: 1) { buffer in
            let count = storeCompactInteger(value, into: buffer)
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        }
    }

    /// Writes `value` as a compact integer at the start of `buffer` (at least nine bytes): the
    /// tag, then as few big-endian bytes as the value needs. Returns the bytes written. The one
    /// writer of the compact form.
    @inlinable
    static func storeCompactInteger(_ value: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let length = (64 - value.leadingZeroBitCount + 7) / 8
        buffer[0] = Tag.compactInteger + UInt8(length)
        for index in 0..<length { buffer[1 + index] = UInt8(truncatingIfNeeded: value >> UInt64(8 * (length - 1 - index))) }
        return 1 + length
    }

    /// The integer a tuple's last component encodes (an index entry's primary key), read in
    /// place: the components before it are skipped, not decoded (so only their structure is
    /// checked — a string's UTF-8 is not). Nil when the bytes are not a well-formed tuple ending
    /// with an integer.
    public static func lastInteger(_ bytes: UnsafeRawBufferPointer) -> Int64? {
        var start = 0
        while true {
            guard let end = componentEnd(bytes, from: start) else { return nil }
            if end == bytes.count { return integer(exactly: UnsafeRawBufferPointer(rebasing: bytes[start..<end])) }
            start = end
        }
    }

    /// Where the last component of the tuple `bytes` starts (an index entry's primary key): what
    /// comes before is the entry's value part. For malformed bytes, the start of the last
    /// well-formed component's successor (or 0).
    public static func lastComponentStart(_ bytes: UnsafeRawBufferPointer) -> Int {
        var start = 0
        while let end = componentEnd(bytes, from: start), end < bytes.count { start = end }
        return start
    }

    /// The integer the first component of the tuple `bytes` encodes (a foreign-key or join
    /// tree's owner), read in place; nil when the tuple does not begin with an integer.
    public static func firstInteger(_ bytes: UnsafeRawBufferPointer) -> Int64? {
        guard let end = componentEnd(bytes, from: 0) else { return nil }
        return integer(exactly: UnsafeRawBufferPointer(rebasing: bytes[0..<end]))
    }

    /// Calls `body` with the one-component tuple of `value` (a table's key) encoded in a buffer
    /// on the stack: the same bytes as `encode([.int(value)], compactIntegers:)`, without an
    /// array.
    @inlinable
    public static func withEncodedInteger<R>(_ value: Int64, compact: Bool = false, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeTemporaryAllocation(byteCount: 9, alignment: 1) { key in
            guard compact && value >= 0 else {
                key[0] = Tag.int
                key.storeBytes(of: (UInt64(bitPattern: value) ^ (1 << 63)).bigEndian, toByteOffset: 1, as: UInt64.self)
                return try body(UnsafeRawBufferPointer(key))
            }
            let count = storeCompactInteger(UInt64(value), into: key)
            return try body(UnsafeRawBufferPointer(rebasing: key[0..<count]))
        }
    }

    /// Decodes the one component in `bytes` (a range `componentEnd` delimited).
    ///
    /// - Throws: `corrupt` when the bytes are not exactly one valid component.
    public static func decodeComponent(_ bytes: ArraySlice<UInt8>) throws -> KeyComponent {
        try bytes.withUnsafeBytes { raw in
            var reader = KeyReader(raw)
            guard let component = try reader.next() else { throw StoreError(.corrupt, "malformed key encoding: an empty component") }
            guard reader.isAtEnd else {
                throw StoreError(.corrupt, "malformed key encoding: \(raw.count - reader.position) bytes after one component")
            }
            return component
        }
    }

    /// Doubles mapped to unsigned integers in the same order: −0 folds into +0, every NaN into one
    /// NaN above +∞; negative numbers have all bits flipped, positive ones the sign bit.
    static func orderedBits(_ value: Double) -> UInt64 {
        if value.isNaN { return 0xFFF8_0000_0000_0000 }
        let bits = (value == 0 ? 0.0 : value).bitPattern
        return bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63)
    }

    static func double(fromOrderedBits bits: UInt64) -> Double {
        if bits == 0xFFF8_0000_0000_0000 { return .nan }
        return Double(bitPattern: bits & (1 << 63) != 0 ? bits & ~(1 << 63) : ~bits)
    }

    static func appendBigEndian(_ value: UInt64, to bytes: inout [UInt8]) {
        // One append of eight bytes (eight appends checked capacity and uniqueness eight times).
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// Bytes with 0x00 escaped as 0x00 0xFF, terminated by 0x00 0x00: a prefix sorts first, and
    /// the terminator sorts below any continuation.
    static func appendEscaped<S: Sequence<UInt8>>(_ source: S, to bytes: inout [UInt8]) {
        // Contiguous bytes without a zero byte (nearly every string) are copied whole.
        let copied = source.withContiguousStorageIfAvailable { buffer -> Bool in
            guard let base = buffer.baseAddress, memchr(base, 0, buffer.count) != nil else {
                bytes.append(contentsOf: buffer)
                return true
            }
            return false
        }
        if copied == true {
            bytes.append(0)
            bytes.append(0)
            return
        }
        for byte in source {
            bytes.append(byte)
            if byte == 0 { bytes.append(0xFF) }
        }
        bytes.append(0)
        bytes.append(0)
    }
}
