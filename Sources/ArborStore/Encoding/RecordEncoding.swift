// Safety: Reads bytes lent for the call, each read bounded by their count.

/// The parts of a *record*, after SQLite's record format: the one statement of them that the
/// engine's prefilter (``ValuePrefilter/RecordComparison``) and Arbor's row layout 3 both read.
///
/// A record is, after whatever prefix its owner puts first: a varint (Arbor: the row's version),
/// a varint header size (counting itself), one varint *serial type* per column, then the
/// columns' payloads in the same order. Varints are unsigned LEB128 (seven bits a byte, low
/// first). Serial types: 0 nil; 1–6 a big-endian two's-complement integer of 1, 2, 3, 4, 6 or 8
/// bytes; 7 eight bytes (a double); 8 and 9 the integers 0 and 1; 10 sixteen bytes (a UUID);
/// 11 unused; even N ≥ 12 (N − 12) / 2 bytes; odd N ≥ 13 (N − 13) / 2 bytes of UTF-8 text.
public enum RecordEncoding {
    /// Appends `value` as a varint.
    @inlinable @inline(__always)
    public static func appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    /// The bytes of `value` as a varint.
    @inlinable
    public static func varint(_ value: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        appendVarint(value, to: &bytes)
        return bytes
    }

    /// The varint at `position` of `bytes`, advancing `position` past it; nil when the bytes end
    /// first or it runs past ten bytes.
    @inlinable @inline(__always)
    public static func readVarint(_ bytes: UnsafeRawBufferPointer, _ position: inout Int) -> UInt64? {
        // Most varints of a record (serial types, small versions, header sizes) are one byte.
        if position >= 0, position < bytes.count, bytes[position] < 0x80 {
            position += 1
            return UInt64(bytes[position - 1])
        }
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while position < bytes.count, shift < 70 {
            let byte = bytes[position]
            position += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
        return nil
    }

    /// A record's head: the varint before the header, and where the serial types start and the
    /// header ends.
    public struct Head: Sendable, Equatable {
        /// The varint before the header (Arbor: the row's version).
        public var leading: UInt64
        /// The first serial type's offset.
        public var typesStart: Int
        /// The first payload's offset.
        public var headerEnd: Int

        /// A head of these parts.
        @inlinable
        public init(leading: UInt64, typesStart: Int, headerEnd: Int) {
            self.leading = leading
            self.typesStart = typesStart
            self.headerEnd = headerEnd
        }
    }

    /// The head of the record at `start` of `bytes`; nil when malformed (a varint cut short, a
    /// header size past the end or smaller than its own varint).
    @inlinable @inline(__always)
    public static func head(of bytes: UnsafeRawBufferPointer, from start: Int) -> Head? {
        var position = start
        guard position <= bytes.count, let leading = readVarint(bytes, &position) else { return nil }
        let headerStart = position
        guard let size = readVarint(bytes, &position), size <= UInt64(bytes.count - headerStart),
              Int(size) >= position - headerStart else { return nil }
        return Head(leading: leading, typesStart: position, headerEnd: headerStart + Int(size))
    }

    /// The payload size of serial type `type`; nil for type 11 and for sizes no value can have.
    @inlinable @inline(__always)
    public static func payloadSize(_ type: UInt64) -> Int? {
        guard type >= 12 else {
            // The sizes of types 0–11, five bits each (31: none), looked up without a branch
            // per type (a switch compiled to a jump table mispredicted in a scan's record tests).
            let size = Int(truncatingIfNeeded: (smallTypeSizes >> (type &* 5)) & 31)
            return size == 31 ? nil : size
        }
        return type < UInt64(Int32.max) ? Int((type - 12) / 2) : nil
    }

    /// The payload sizes of serial types 0–11, five bits each from the lowest: 0, 1, 2, 3, 4, 6,
    /// 8, 8, 0, 0, 16, and 31 for type 11 (no value has it).
    @usableFromInline
    static var smallTypeSizes: UInt64 { 0xfc000420c418820 }

    /// The integer a column of serial type `type` holds, its payload at `start` of `bytes` (which
    /// must hold ``payloadSize(_:)`` bytes there); nil when `type` is not an integer's.
    @inlinable @inline(__always)
    public static func integer(_ type: UInt64, _ bytes: UnsafeRawBufferPointer, at start: Int) -> Int64? {
        // Types 1–6 and 8–9 (7 is a double).
        guard type >= 1, type <= 9, type != 7 else { return nil }
        if type >= 8 { return Int64(type - 8) }
        let size = Int(truncatingIfNeeded: (smallTypeSizes >> (type &* 5)) & 31)
        if start >= 0, start + 8 <= bytes.count {
            // One load: the eight bytes from the payload on, big-endian, shifted down to the
            // payload's size (an arithmetic shift extends the sign).
            let word = Int64(bitPattern: UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: start, as: UInt64.self)))
            return word &>> (64 - 8 * size)
        }
        // Sign-extended from the first byte.
        var value = Int64(Int8(bitPattern: bytes[start]))
        for index in 1..<size { value = value << 8 | Int64(bytes[start + index]) }
        return value
    }

    /// Appends an integer column: its serial type (the smallest that holds `value`) to `header`,
    /// its payload to `payload`.
    @inlinable
    public static func appendInteger(_ value: Int64, header: inout [UInt8], payload: inout [UInt8]) {
        let size: Int
        switch value {
        case 0: header.append(8); return
        case 1: header.append(9); return
        case -128...127: header.append(1); size = 1
        case -32_768...32_767: header.append(2); size = 2
        case -8_388_608...8_388_607: header.append(3); size = 3
        case -2_147_483_648...2_147_483_647: header.append(4); size = 4
        case -140_737_488_355_328...140_737_488_355_327: header.append(5); size = 6
        default: header.append(6); size = 8
        }
        // A countdown, not `stride`: a debug build's generic stride iterator cost more than the
        // bytes it appended.
        var shift = Int64(size - 1) * 8
        while shift >= 0 {
            payload.append(UInt8(truncatingIfNeeded: value >> shift))
            shift -= 8
        }
    }
}
