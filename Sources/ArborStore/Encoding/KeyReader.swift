import Foundation

// Safety: A reader reads bytes its caller lends and must not outlive the lending closure (as its
// documentation says); a string body read in place is a slice of those bytes, decoded before the
// reader returns it.

/// Reads an encoded tuple (``KeyEncoding``) one component at a time, in place: no copy of the
/// bytes and no array of components. A row decoder walks a stored row with it straight out of
/// the page the B-tree hands over.
///
/// The bytes must stay valid while the reader is used (inside the closure that lent them).
public struct KeyReader {
    /// The bytes read.
    public let bytes: UnsafeRawBufferPointer
    /// The offset of the next component.
    public private(set) var position = 0

    /// A reader at the start of `bytes`.
    public init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// Whether every component has been read.
    public var isAtEnd: Bool { position >= bytes.count }

    private func fail(_ why: String) -> StoreError {
        StoreError(.corrupt, "malformed key encoding at byte \(position): \(why)")
    }

    /// The next component, or nil at the end.
    ///
    /// - Throws: `corrupt` when the bytes there are not a valid component.
    public mutating func next() throws -> KeyComponent? {
        guard position < bytes.count, let base = bytes.baseAddress else { return nil }
        let tag = base.load(fromByteOffset: position, as: UInt8.self)
        switch tag {
        case KeyEncoding.Tag.null:
            position += 1
            return .null
        case KeyEncoding.Tag.falseValue, KeyEncoding.Tag.trueValue:
            position += 1
            return .bool(tag == KeyEncoding.Tag.trueValue)
        case KeyEncoding.Tag.compactInteger...KeyEncoding.Tag.lastCompactInteger:
            let end = position + 1 + Int(tag - KeyEncoding.Tag.compactInteger)
            guard end <= bytes.count else { throw fail("truncated") }
            guard let value = KeyEncoding.compactInteger(UnsafeRawBufferPointer(rebasing: bytes[(position + 1)..<end])) else {
                throw fail("a compact integer past the largest 64-bit integer")
            }
            position = end
            return .int(value)
        case KeyEncoding.Tag.int, KeyEncoding.Tag.double, KeyEncoding.Tag.date:
            guard position + 9 <= bytes.count else { throw fail("truncated") }
            let raw = UInt64(bigEndian: base.loadUnaligned(fromByteOffset: position + 1, as: UInt64.self))
            position += 9
            switch tag {
            case KeyEncoding.Tag.int: return .int(Int64(bitPattern: raw ^ (1 << 63)))
            case KeyEncoding.Tag.double: return .double(KeyEncoding.double(fromOrderedBits: raw))
            default: return .date(Date(timeIntervalSinceReferenceDate: KeyEncoding.double(fromOrderedBits: raw)))
            }
        case KeyEncoding.Tag.string:
            let start = position
            let body = try escaped(from: position + 1)
            guard let text = body.withUnsafeBufferPointer(Self.string(validating:)) else {
                position = start
                throw fail("invalid UTF-8")
            }
            return .string(text)
        case KeyEncoding.Tag.data:
            return .data(try escaped(from: position + 1).array)
        case KeyEncoding.Tag.uuid:
            guard position + 17 <= bytes.count else { throw fail("truncated") }
            let uuid = base.loadUnaligned(fromByteOffset: position + 1, as: uuid_t.self)
            position += 17
            return .uuid(UUID(uuid: uuid))
        default:
            throw fail("unknown tag \(tag)")
        }
    }

    /// The text of `bytes` when they are valid UTF-8, else nil. `String(validating:as:)` reaches
    /// generic, unspecialized code (a metadata lookup per string); decoding — which repairs
    /// ill-formed bytes — and checking that nothing was repaired stays specialized. A repair
    /// always changes the bytes, so the text is valid exactly when its bytes equal the input.
    ///
    /// ASCII text (nearly all of it: names, keys) is valid as it is; eight bytes at a time tell,
    /// which is cheaper than comparing the decoded copy with the input.
    public static func string(validating bytes: UnsafeBufferPointer<UInt8>) -> String? {
        if isASCII(bytes) { return String(decoding: bytes, as: UTF8.self) }
        var text = String(decoding: bytes, as: UTF8.self)
        let same = text.withUTF8 { utf8 in
            utf8.count == bytes.count && (bytes.isEmpty || memcmp(utf8.baseAddress!, bytes.baseAddress!, bytes.count) == 0)
        }
        return same ? text : nil
    }

    /// Whether every byte of `bytes` is below 0x80.
    @inline(__always)
    static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let raw = UnsafeRawPointer(base)
        var index = 0
        while index + 8 <= bytes.count {
            if raw.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
            index += 8
        }
        while index < bytes.count {
            if base[index] & 0x80 != 0 { return false }
            index += 1
        }
        return true
    }

    /// Skips the next component without decoding it.
    ///
    /// - Throws: `corrupt` at the end, or when the bytes there are not a valid component.
    public mutating func skip() throws {
        guard position < bytes.count else { throw fail("truncated") }
        guard let end = KeyEncoding.componentEnd(bytes, from: position) else { throw fail("a malformed component") }
        position = end
    }

    /// The unescaped body of a string or data component whose body starts at `start`, with the
    /// reader moved past its terminator. Bodies without a zero byte (nearly all) come as a slice
    /// of the bytes themselves, found with `memchr`.
    private mutating func escaped(from start: Int) throws -> EscapedBody {
        let base = bytes.baseAddress!
        let count = bytes.count
        var scan = start
        var unescaped: [UInt8]?
        while true {
            guard scan < count, let zero = memchr(base + scan, 0, count - scan) else {
                throw fail("unterminated string or data")
            }
            let at = base.distance(to: UnsafeRawPointer(zero))
            guard at + 1 < count else { throw fail("unterminated string or data") }
            let next = base.load(fromByteOffset: at + 1, as: UInt8.self)
            if next == 0 {
                position = at + 2
                guard var copied = unescaped else {
                    return .inPlace(UnsafeRawBufferPointer(rebasing: bytes[start..<at]))
                }
                copied.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[scan..<at]))
                return .copied(copied)
            }
            guard next == 0xFF else {
                position = at
                throw fail("bad escape")
            }
            // An escaped zero byte: from here on the body is copied.
            if unescaped == nil { unescaped = [] }
            unescaped!.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[scan..<at]))
            unescaped!.append(0)
            scan = at + 2
        }
    }
}

/// A string or data body: in place when it holds no escaped zero byte, else unescaped into a copy.
private enum EscapedBody {
    case inPlace(UnsafeRawBufferPointer)
    case copied([UInt8])

    func withUnsafeBufferPointer<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        switch self {
        case .inPlace(let raw): body(raw.assumingMemoryBound(to: UInt8.self))
        case .copied(let array): array.withUnsafeBufferPointer(body)
        }
    }

    var array: [UInt8] {
        switch self {
        case .inPlace(let raw): Array(raw)
        case .copied(let array): array
        }
    }
}
