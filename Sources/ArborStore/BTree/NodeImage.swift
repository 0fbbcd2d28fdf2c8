// Safety: Entries are lent from the image's own array, inside `withUnsafeBytes`, for `body`'s call
// only.

/// A node decoded for the slow paths (splits, merges, redistribution), independent of the prefix
/// of the page it came from: every entry's whole key and its payload, back to back in one buffer.
///
/// Payloads: for a leaf entry, the flags byte, the stored length (varint), the original length
/// (varint, compressed values only), then the stored value or the 4-byte first overflow page; for
/// an interior entry, the left child (4 bytes, little-endian).
///
/// One buffer and one array of positions per image, however many entries: splitting or sharing a
/// node costs a few allocations, not two per entry.
struct NodeImage {
    struct Entry {
        var start: Int
        var keyLength: Int
        var payloadLength: Int
    }

    var leaf: Bool
    var rightChild: PageNumber
    private(set) var storage: [UInt8] = []
    private(set) var entries: [Entry] = []

    init(leaf: Bool, rightChild: PageNumber = 0, capacity: Int = 0) {
        self.leaf = leaf
        self.rightChild = rightChild
        storage.reserveCapacity(capacity)
    }

    var count: Int { entries.count }

    /// Entry `index`'s key, copied.
    func key(_ index: Int) -> [UInt8] {
        let entry = entries[index]
        return Array(storage[entry.start..<(entry.start + entry.keyLength)])
    }

    /// Entry `index`'s payload, copied.
    func payload(_ index: Int) -> [UInt8] {
        let entry = entries[index]
        let start = entry.start + entry.keyLength
        return Array(storage[start..<(start + entry.payloadLength)])
    }

    /// The left child of interior entry `index`.
    func child(_ index: Int) -> PageNumber {
        let at = entries[index].start + entries[index].keyLength
        return PageNumber(storage[at]) | PageNumber(storage[at + 1]) << 8 | PageNumber(storage[at + 2]) << 16
            | PageNumber(storage[at + 3]) << 24
    }

    /// The children of an interior node, left to right (the right-most last).
    var children: [PageNumber] { (0..<count).map(child) + [rightChild] }

    /// Calls `body` with entry `index`'s key and payload.
    func withEntry<R>(_ index: Int, _ body: (_ key: UnsafeRawBufferPointer, _ payload: UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let entry = entries[index]
        return try storage.withUnsafeBytes { raw in
            try body(UnsafeRawBufferPointer(rebasing: raw[entry.start..<(entry.start + entry.keyLength)]),
                     UnsafeRawBufferPointer(rebasing: raw[(entry.start + entry.keyLength)..<(entry.start + entry.keyLength + entry.payloadLength)]))
        }
    }

    // MARK: Building

    /// Appends storage for an entry made of `parts` and returns its position.
    private mutating func store(keyLength: Int, payloadLength: Int, _ write: (inout [UInt8]) -> Void) -> Entry {
        let start = storage.count
        write(&storage)
        return Entry(start: start, keyLength: keyLength, payloadLength: payloadLength)
    }

    mutating func append(key: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer) {
        entries.append(store(keyLength: key.count, payloadLength: payload.count) {
            $0.append(contentsOf: key)
            $0.append(contentsOf: payload)
        })
    }

    mutating func insert(key: [UInt8], payload: [UInt8], at index: Int) {
        entries.insert(store(keyLength: key.count, payloadLength: payload.count) {
            $0.append(contentsOf: key)
            $0.append(contentsOf: payload)
        }, at: index)
    }

    mutating func insert(key: [UInt8], child: PageNumber, at index: Int) {
        insert(key: key, payload: Self.childBytes(child), at: index)
    }

    /// Replaces entry `index` of an interior node with (`key`, `child`).
    mutating func replace(_ index: Int, key: [UInt8], child: PageNumber) {
        entries[index] = store(keyLength: key.count, payloadLength: 4) {
            $0.append(contentsOf: key)
            $0.append(contentsOf: Self.childBytes(child))
        }
    }

    /// Appends entries `range` of `other`.
    mutating func append(_ other: NodeImage, _ range: Range<Int>) {
        other.storage.withUnsafeBytes { raw in
            for index in range {
                let entry = other.entries[index]
                append(key: UnsafeRawBufferPointer(rebasing: raw[entry.start..<(entry.start + entry.keyLength)]),
                       payload: UnsafeRawBufferPointer(rebasing: raw[(entry.start + entry.keyLength)..<(entry.start + entry.keyLength + entry.payloadLength)]))
            }
        }
    }

    /// Appends every entry of `other`.
    mutating func append(_ other: NodeImage) { append(other, 0..<other.count) }

    static func childBytes(_ child: PageNumber) -> [UInt8] {
        [UInt8(child & 0xFF), UInt8(child >> 8 & 0xFF), UInt8(child >> 16 & 0xFF), UInt8(child >> 24)]
    }

    // MARK: Layout

    /// The prefix a node holding entries `range` takes when written whole: the common prefix of
    /// its keys (of the first and last: they are sorted), but never so long that a byte of prefix
    /// saves no byte of tail (docs/file-format.md, "Choosing the prefix").
    func chosenPrefix(_ range: Range<Int>) -> Int {
        guard !range.isEmpty else { return 0 }
        let first = entries[range.lowerBound], last = entries[range.upperBound - 1]
        var common = 0
        let limit = min(first.keyLength, last.keyLength)
        while common < limit && storage[first.start + common] == storage[last.start + common] { common += 1 }
        var longest = 0
        for index in range where entries[index].keyLength > longest { longest = entries[index].keyLength }
        return max(0, min(common, longest - 2, NodeLayout.maxPrefix))
    }

    /// Whether the keys of entries `range` ascend strictly, as a node's must. Pages are
    /// validated for bounds, not order, and nodes combined in a merge come from two pages; a
    /// node written whole takes the prefix of its first and last keys, which only the keys
    /// between them in order are sure to share.
    func ascends(_ range: Range<Int>) -> Bool {
        storage.withUnsafeBytes { raw in
            var previous: UnsafeRawBufferPointer?
            for index in range {
                let entry = entries[index]
                let key = UnsafeRawBufferPointer(rebasing: raw[entry.start..<(entry.start + entry.keyLength)])
                if let previous, compareBytes(previous, key) >= 0 { return false }
                previous = key
            }
            return true
        }
    }

    /// The size of entry `index`'s slot and cell in a node with prefix length `prefix`.
    func size(_ index: Int, prefix: Int) -> Int {
        let entry = entries[index]
        let suffix = entry.keyLength - prefix
        let keyPart = NodeLayout.suffixFieldSize(suffix) + (suffix > 2 ? suffix - 2 : 0)
        return NodeLayout.slotSize + keyPart + (leaf ? entry.payloadLength - 1 : 4)
    }

    /// The bytes a node holding entries `range` uses with prefix `prefix`.
    func nodeSize(_ range: Range<Int>, prefix: Int) -> Int {
        range.reduce(NodeLayout.headerSize + prefix) { $0 + size($1, prefix: prefix) }
    }

    /// Whether entries `range` (all by default) fit one page of `usable` bytes.
    func fits(_ range: Range<Int>? = nil, usable: Int) -> Bool {
        let range = range ?? 0..<count
        return nodeSize(range, prefix: chosenPrefix(range)) <= usable
    }
}
