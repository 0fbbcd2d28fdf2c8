#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// Safety: A `CompiledPrefilter` owns its buffers (allocated in `init`, freed in `deinit`), and each
// test reads a value lent for the call within its count.

/// Byte tests on a tree's values that a scan (``Tree/forEach(from:prefilter:selecting:_:)``)
/// runs inside its leaf loop, before it assembles a key or calls anything: the cheapest way to
/// pass over the many values of a table that a filter turns down on a few fixed bytes.
///
/// A value is **skipped** only when all of these hold:
/// - it is at least ``reach`` bytes long;
/// - it begins with ``prefix``;
/// - each guard's byte is one of the guard's allowed bytes;
/// - at least one comparison fails.
///
/// Every other value goes on to the scan's `select` and `body` as usual, so a prefilter is
/// conservative: it can only skip values its caller's own test would turn down. A comparison reads
/// the eight bytes at its offset as a big-endian number (the order of ``KeyEncoding``'s integers,
/// whose payload follows a tag byte).
public struct ValuePrefilter: Sendable, Equatable {
    /// How a comparison's number relates to its constant for the value to pass.
    public enum Relation: UInt8, Sendable {
        /// The number equals the constant.
        case equal
        /// The number differs from the constant.
        case notEqual
        /// The number is below the constant.
        case less
        /// The number is at most the constant.
        case lessOrEqual
        /// The number is above the constant.
        case greater
        /// The number is at least the constant.
        case greaterOrEqual

        /// Whether `number` relates to `constant` so.
        @inlinable @inline(__always)
        public func admits<T: Comparable>(_ number: T, _ constant: T) -> Bool {
            switch self {
            case .equal: number == constant
            case .notEqual: number != constant
            case .less: number < constant
            case .lessOrEqual: number <= constant
            case .greater: number > constant
            case .greaterOrEqual: number >= constant
            }
        }
    }

    /// A byte that must be one of (up to) three values for the comparisons to apply.
    public struct Guard: Sendable, Equatable {
        /// Where the byte is.
        public let offset: Int
        /// The byte values allowed (one repeated when fewer than three are).
        public let allowed: (UInt8, UInt8, UInt8)

        /// A guard at `offset` allowing `allowed` (one to three bytes).
        public init(offset: Int, allowed: [UInt8]) {
            precondition((1...3).contains(allowed.count) && offset >= 0, "a guard allows one to three bytes at a non-negative offset")
            self.offset = offset
            self.allowed = (allowed[0], allowed[min(1, allowed.count - 1)], allowed[allowed.count - 1])
        }

        /// Whether two guards test the same byte for the same values.
        public static func == (a: Guard, b: Guard) -> Bool {
            a.offset == b.offset && a.allowed == b.allowed
        }

        /// Whether `byte` is one of the allowed values.
        @inlinable @inline(__always)
        public func holds(_ byte: UInt8) -> Bool {
            byte == allowed.0 || byte == allowed.1 || byte == allowed.2
        }
    }

    /// A test of the big-endian number at an offset against a constant.
    public struct Comparison: Sendable, Equatable {
        /// Where the eight bytes are.
        public let offset: Int
        /// How the number must relate to ``constant``.
        public let relation: Relation
        /// The constant, as the number its eight big-endian bytes read as: for a ``KeyEncoding``
        /// integer, its encoded payload (sign bit flipped), so that numbers order as the
        /// integers do.
        public let constant: UInt64

        /// A comparison of the eight bytes at `offset` (big-endian) with `constant`.
        public init(offset: Int, relation: Relation, constant: UInt64) {
            precondition(offset >= 0, "a comparison reads at a non-negative offset")
            self.offset = offset
            self.relation = relation
            self.constant = constant
        }

        /// Whether `value`'s eight bytes at ``offset`` pass (the value must reach that far).
        @inlinable @inline(__always)
        public func passes(_ value: UnsafeRawBufferPointer) -> Bool {
            relation.admits(UInt64(bigEndian: value.loadUnaligned(fromByteOffset: offset, as: UInt64.self)), constant)
        }
    }

    /// A test of an integer column of a record (``RecordEncoding``, after the value's
    /// ``ValuePrefilter/prefix``) against a constant. A column of another type, or a record too
    /// short for it, leaves the value to the scan's own test.
    public struct RecordComparison: Sendable, Equatable {
        /// The column's place among the record's columns (0: the first).
        public let column: Int
        /// How the column's integer must relate to ``constant``.
        public let relation: Relation
        /// The constant the column's integer is compared with.
        public let constant: Int64

        /// A comparison of record column `column`'s integer with `constant`; nil for a negative
        /// column (no record has one).
        public init?(column: Int, relation: Relation, constant: Int64) {
            guard column >= 0 else { return nil }
            self.column = column
            self.relation = relation
            self.constant = constant
        }

        @inlinable @inline(__always)
        func passes(_ number: Int64) -> Bool { relation.admits(number, constant) }
    }

    /// The bytes a value begins with.
    public let prefix: [UInt8]
    /// The bytes that must hold for the comparisons to apply.
    public let guards: [Guard]
    /// The comparisons, at least one of which a skipped value fails.
    public let comparisons: [Comparison]
    /// Comparisons of a record's integer columns (after ``prefix``), in order: a value is
    /// skipped when one fails and each before it applied (its column held an integer) and
    /// passed.
    public let recordComparisons: [RecordComparison]

    /// A prefilter that skips a value beginning with `prefix` whose `guards` hold and which fails
    /// one of `comparisons`.
    public init(prefix: [UInt8], guards: [Guard], comparisons: [Comparison]) {
        self.prefix = prefix
        self.guards = guards
        self.comparisons = comparisons
        recordComparisons = []
    }

    /// A prefilter that skips a value beginning with `prefix`, followed by a record, which fails
    /// one of `recordComparisons` (each before it holding an integer and passing).
    public init(prefix: [UInt8], recordComparisons: [RecordComparison]) {
        self.prefix = prefix
        guards = []
        comparisons = []
        self.recordComparisons = recordComparisons
    }

    /// The fewest bytes a value needs for every test to read inside it (a record's tests check
    /// their own bounds).
    public var reach: Int {
        max(prefix.count, guards.map { $0.offset + 1 }.max() ?? 0, comparisons.map { $0.offset + 8 }.max() ?? 0)
    }

    /// Whether a value's record (from `start`) fails one of `comparisons` (see
    /// ``recordComparisons``); false for a malformed record.
    @inline(__always)
    static func recordFails(_ value: UnsafeRawBufferPointer, from start: Int, _ comparisons: UnsafeMutableBufferPointer<RecordComparison>) -> Bool {
        guard let head = RecordEncoding.head(of: value, from: start) else { return false }
        let headerEnd = head.headerEnd
        // The next serial type's offset in the header; the payload offset of column `column`.
        // (No nested function reads the types: one that captured `position` was not inlined,
        // and paid an exclusivity check per column.)
        var position = head.typesStart
        var payload = headerEnd
        var column = 0
        // The type of `column`, once read.
        var current: UInt64?
        for comparison in comparisons {
            while true {
                let type: UInt64
                if let known = current {
                    type = known
                } else {
                    guard position < headerEnd, let read = RecordEncoding.readVarint(value, &position), position <= headerEnd else { return false }
                    type = read
                }
                guard column < comparison.column else {
                    current = type
                    break
                }
                // A size past the value's end is a malformed record (and would overflow the sum).
                guard let size = RecordEncoding.payloadSize(type), size <= value.count - payload else { return false }
                payload += size
                column += 1
                current = nil
            }
            // Not an integer, or cut short: the scan's own test decides.
            guard let type = current, let size = RecordEncoding.payloadSize(type), size <= value.count - payload,
                  let number = RecordEncoding.integer(type, value, at: payload) else { return false }
            if !comparison.passes(number) { return true }
        }
        return false
    }
}

/// A ``ValuePrefilter`` laid out for the leaf loop: its tests in buffers it owns, the prefix as
/// words when it is 8…16 bytes long.
final class CompiledPrefilter {
    let reach: Int
    private let prefixCount: Int
    private let guardCount: Int
    private let comparisonCount: Int
    private let prefix: UnsafeMutableRawBufferPointer
    private let prefixWords: (first: UInt64, last: UInt64)?
    private let guards: UnsafeMutableBufferPointer<ValuePrefilter.Guard>
    private let comparisons: UnsafeMutableBufferPointer<ValuePrefilter.Comparison>
    private let recordComparisons: UnsafeMutableBufferPointer<ValuePrefilter.RecordComparison>
    private let recordComparisonCount: Int

    init(_ filter: ValuePrefilter) {
        reach = filter.reach
        prefix = .allocate(byteCount: max(1, filter.prefix.count), alignment: 8)
        prefix.copyBytes(from: filter.prefix)
        if (8...16).contains(filter.prefix.count) {
            let bytes = UnsafeRawBufferPointer(rebasing: prefix[0..<filter.prefix.count])
            prefixWords = (bytes.loadUnaligned(as: UInt64.self), bytes.loadUnaligned(fromByteOffset: bytes.count - 8, as: UInt64.self))
        } else {
            prefixWords = nil
        }
        guards = .allocate(capacity: max(1, filter.guards.count))
        _ = guards.initialize(from: filter.guards)
        comparisons = .allocate(capacity: max(1, filter.comparisons.count))
        _ = comparisons.initialize(from: filter.comparisons)
        // In column order (the record is read once, front to back).
        let ordered = filter.recordComparisons.enumerated().sorted { ($0.element.column, $0.offset) < ($1.element.column, $1.offset) }.map(\.element)
        recordComparisons = .allocate(capacity: max(1, ordered.count))
        _ = recordComparisons.initialize(from: ordered)
        recordComparisonCount = ordered.count
        prefixCount = filter.prefix.count
        guardCount = filter.guards.count
        comparisonCount = filter.comparisons.count
    }

    deinit {
        prefix.deallocate()
        guards.deallocate()
        comparisons.deallocate()
        recordComparisons.deallocate()
    }

    /// Whether the scan skips `value` (see ``ValuePrefilter``).
    @inline(__always)
    func skips(_ value: UnsafeRawBufferPointer) -> Bool {
        guard comparisonCount > 0 || recordComparisonCount > 0, value.count >= reach else { return false }
        if let prefixWords {
            guard value.loadUnaligned(as: UInt64.self) == prefixWords.first,
                  value.loadUnaligned(fromByteOffset: prefixCount - 8, as: UInt64.self) == prefixWords.last else { return false }
        } else if prefixCount > 0 {
            guard memcmp(value.baseAddress!, prefix.baseAddress!, prefixCount) == 0 else { return false }
        }
        for index in 0..<guardCount where !guards[index].holds(value.load(fromByteOffset: guards[index].offset, as: UInt8.self)) {
            return false
        }
        for index in 0..<comparisonCount where !comparisons[index].passes(value) {
            return true
        }
        return recordComparisonCount > 0
            && ValuePrefilter.recordFails(value, from: prefixCount, UnsafeMutableBufferPointer(rebasing: recordComparisons[0..<recordComparisonCount]))
    }
}
