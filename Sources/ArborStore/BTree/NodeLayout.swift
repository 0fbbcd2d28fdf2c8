// Safety: `NodeView` and `NodeWriter` are views of a page body the pager lends (`withPage`,
// `withMutablePage`) and live only inside those closures; the offsets they slice at are bounded by
// the node's header, which every page read from the file passed `PageValidation` for.

/// The layout of B+tree pages (leaves and interior nodes) and overflow pages — format version 2.
///
/// Body of a node page (the page less its checksum trailer), little-endian:
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 1 | page type: ``leafType`` or ``interiorType`` |
/// | 1 | 1 | prefix length p: the first p bytes of every key in the node |
/// | 2 | 2 | cell count |
/// | 4 | 2 | start of the cell content area |
/// | 6 | 2 | fragmented free bytes inside the content area |
/// | 8 | 4 | interior: the right-most child; leaf: 0 |
/// | 12 | p | the prefix |
/// | 12 + p | 4·count | slots in key order: cell offset (2), key head (2: the key's two bytes after the prefix, zero-padded) |
///
/// A key is the prefix, its head and its tail (the bytes after the head, in the cell). Cells grow
/// down from the end of the body. Cell header byte: bits 3–7 the suffix length `s = key length −
/// p` (31: 31 plus a varint that follows), bits 0–2 leaf flags (bit 0 value in an overflow
/// chain, bit 1 value LZ4-compressed, bit 2 compressed against the tree's dictionary).
/// - Leaf cell: header, [varint], tail, stored value length (varint), original length (varint,
///   compressed values only), the stored value — or, for overflow, the first overflow page (4).
/// - Interior cell: left child (4), header, [varint], tail. A child left of key K holds keys < K;
///   keys ≥ the last key go to the right-most child.
///
/// See docs/file-format.md ("Node pages") for why the prefix and the heads are chosen as they are.
enum NodeLayout {
    static let leafType: UInt8 = 0x0A
    static let interiorType: UInt8 = 0x05
    static let overflowType: UInt8 = 0x0F
    static let headerSize = 12
    static let slotSize = 4
    /// Overflow page body: type (1), reserved (3), next page (4), payload.
    static let overflowHeaderSize = 8

    static let flagOverflow: UInt8 = 1
    static let flagCompressed: UInt8 = 2
    static let flagDictionary: UInt8 = 4
    static let flagMask: UInt8 = 7
    /// The header byte's suffix length sits above the flags.
    static let suffixShift: UInt8 = 3
    /// Suffix lengths from this value on are stored as this value plus a varint.
    static let suffixEscape = 31
    /// The longest prefix a node header can record.
    static let maxPrefix = 255

    /// The largest cell kept in a node (measured without a prefix): at least four fit in a page,
    /// so a split always leaves two or more cells on each side.
    static func maxLocalCell(usable: Int) -> Int { (usable - headerSize) / 4 - slotSize }

    /// The longest key accepted at this page size (room for the cell's other fields).
    static func maxKeySize(usable: Int) -> Int { maxLocalCell(usable: usable) - 20 }

    /// The prefix a new node holding only `key` takes (a leaf started by an append).
    static func prefixForFirstKey(_ count: Int) -> Int { max(0, min(count - 2, maxPrefix)) }

    /// Bytes of the header byte and its varint for suffix length `s`.
    @inline(__always)
    static func suffixFieldSize(_ s: Int) -> Int {
        s < suffixEscape ? 1 : 1 + Varint.size(s - suffixEscape)
    }

}

/// How a key relates to a node's prefix.
enum PrefixRelation {
    /// The key sorts before every key that starts with the prefix.
    case below
    /// The key starts with the prefix.
    case shares
    /// The key sorts after every key that starts with the prefix.
    case above
}

/// A read view of a node page's body.
struct NodeView {
    let body: UnsafeRawBufferPointer

    @inline(__always) var type: UInt8 { body[0] }
    @inline(__always) var isLeaf: Bool { body[0] == NodeLayout.leafType }
    @inline(__always) var prefixLength: Int { Int(body[1]) }
    @inline(__always) var count: Int { Int(body.loadLE(UInt16.self, at: 2)) }
    @inline(__always) var contentStart: Int { Int(body.loadLE(UInt16.self, at: 4)) }
    @inline(__always) var fragmented: Int { Int(body.loadLE(UInt16.self, at: 6)) }
    @inline(__always) var rightChild: PageNumber { body.loadLE(UInt32.self, at: 8) }
    @inline(__always) var slotBase: Int { NodeLayout.headerSize + prefixLength }

    var prefix: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: body[NodeLayout.headerSize..<(NodeLayout.headerSize + prefixLength)])
    }

    @inline(__always)
    func cellOffset(_ index: Int) -> Int {
        Int(body.loadLE(UInt16.self, at: slotBase + NodeLayout.slotSize * index))
    }

    /// The head of slot `index`, as a big-endian 16-bit number (so that it orders like the bytes).
    @inline(__always)
    func head(_ index: Int) -> UInt16 {
        let at = slotBase + NodeLayout.slotSize * index + 2
        return UInt16(body[at]) << 8 | UInt16(body[at + 1])
    }

    /// Free bytes in the gap between the slot array and the content area.
    var gap: Int { contentStart - (slotBase + NodeLayout.slotSize * count) }

    /// Bytes in use: header, prefix, slots and live cells.
    var usedBytes: Int { body.count - gap - fragmented }

    /// Where cell `index`'s key part is: its suffix length, where its tail starts, and the first
    /// byte after the tail.
    @inline(__always)
    func keyPart(_ index: Int) -> (suffix: Int, tail: Int, end: Int) {
        keyPart(at: cellOffset(index))
    }

    @inline(__always)
    func keyPart(at offset: Int) -> (suffix: Int, tail: Int, end: Int) {
        var position = isLeaf ? offset : offset + 4
        var suffix = Int(body[position] >> NodeLayout.suffixShift)
        position += 1
        if suffix == NodeLayout.suffixEscape { suffix += Varint.read(body, &position) }
        return (suffix, position, position + max(0, suffix - 2))
    }

    /// The length of key `index`.
    func keyLength(_ index: Int) -> Int { prefixLength + keyPart(index).suffix }

    /// Appends key `index` to `key`.
    func appendKey(_ index: Int, to key: inout [UInt8]) {
        key.append(contentsOf: prefix)
        let (suffix, tail, end) = keyPart(index)
        let at = slotBase + NodeLayout.slotSize * index + 2
        if suffix > 0 { key.append(body[at]) }
        if suffix > 1 { key.append(body[at + 1]) }
        if end > tail { key.append(contentsOf: UnsafeRawBufferPointer(rebasing: body[tail..<end])) }
    }

    /// Key `index`, whole.
    func key(_ index: Int) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(keyLength(index))
        appendKey(index, to: &key)
        return key
    }

    /// The left child of interior cell `index`.
    @inline(__always)
    func child(_ index: Int) -> PageNumber {
        index == count ? rightChild : body.loadLE(UInt32.self, at: cellOffset(index))
    }

    /// The value fields of leaf cell `index`: flags, stored and original lengths, and where the
    /// stored value (or the overflow page number) starts.
    @inline(__always)
    func value(_ index: Int) -> (flags: UInt8, stored: Int, original: Int, start: Int) {
        let offset = cellOffset(index)
        let flags = body[offset] & NodeLayout.flagMask
        var position = keyPart(at: offset).end
        let stored = Varint.read(body, &position)
        let original = flags & NodeLayout.flagCompressed != 0 ? Varint.read(body, &position) : stored
        return (flags, stored, original, position)
    }

    /// The size in bytes of the cell at `offset`.
    func cellSize(at offset: Int) -> Int {
        var position = keyPart(at: offset).end
        if isLeaf {
            let flags = body[offset] & NodeLayout.flagMask
            let stored = Varint.read(body, &position)
            if flags & NodeLayout.flagCompressed != 0 { _ = Varint.read(body, &position) }
            position += flags & NodeLayout.flagOverflow != 0 ? 4 : stored
        }
        return position - offset
    }

    /// The node decoded: every entry's whole key and payload (see ``NodeImage``).
    func image() -> NodeImage {
        var image = NodeImage(leaf: isLeaf, rightChild: isLeaf ? 0 : rightChild, capacity: 2 * body.count)
        var key: [UInt8] = []
        var payload: [UInt8] = []
        for index in 0..<count {
            key.removeAll(keepingCapacity: true)
            appendKey(index, to: &key)
            payload.removeAll(keepingCapacity: true)
            let offset = cellOffset(index)
            if isLeaf {
                payload.append(body[offset] & NodeLayout.flagMask)
                payload.append(contentsOf: UnsafeRawBufferPointer(rebasing: body[keyPart(at: offset).end..<(offset + cellSize(at: offset))]))
            } else {
                payload.append(contentsOf: UnsafeRawBufferPointer(rebasing: body[offset..<(offset + 4)]))
            }
            key.withUnsafeBytes { key in payload.withUnsafeBytes { image.append(key: key, payload: $0) } }
        }
        return image
    }

    // MARK: Search

    /// How `key` relates to the prefix.
    @inline(__always)
    func relation(of key: UnsafeRawBufferPointer) -> PrefixRelation {
        let p = prefixLength
        if p == 0 { return .shares }
        let n = min(p, key.count)
        let order = compareBytes(UnsafeRawBufferPointer(rebasing: body[NodeLayout.headerSize..<(NodeLayout.headerSize + n)]),
                                 UnsafeRawBufferPointer(rebasing: key[0..<n]))
        if order > 0 { return .below }
        if order < 0 { return .above }
        return key.count < p ? .below : .shares
    }

    /// The head of `key` in a node with prefix length `p` (which `key` shares).
    @inline(__always)
    static func head(of key: UnsafeRawBufferPointer, prefix p: Int) -> UInt16 {
        let high = p < key.count ? UInt16(key[p]) : 0
        let low = p + 1 < key.count ? UInt16(key[p + 1]) : 0
        return high << 8 | low
    }

    /// The order of entry `index` against `key`, which shares the prefix and has head `keyHead`:
    /// negative, zero or positive as the entry sorts before, equal to or after the key.
    @inline(__always)
    func compare(_ index: Int, _ key: UnsafeRawBufferPointer, keyHead: UInt16) -> Int {
        let entryHead = head(index)
        if entryHead != keyHead { return entryHead < keyHead ? -1 : 1 }
        let p = prefixLength
        let keySuffix = key.count - p
        let (suffix, tail, end) = keyPart(index)
        // Equal heads: when either suffix is two bytes or less, the shorter is a prefix of the other.
        if keySuffix <= 2 || suffix <= 2 { return suffix - keySuffix }
        return compareBytes(UnsafeRawBufferPointer(rebasing: body[tail..<end]),
                            UnsafeRawBufferPointer(rebasing: key[(p + 2)..<key.count]))
    }

    /// The order of entry `index` against any `key`.
    func compare(_ index: Int, _ key: UnsafeRawBufferPointer) -> Int {
        switch relation(of: key) {
        case .below: return 1
        case .above: return -1
        case .shares: return compare(index, key, keyHead: Self.head(of: key, prefix: prefixLength))
        }
    }

    /// Where a search for `key` starts: a position found without comparing any entry (0 or
    /// `count` when `key` sorts below or above every key with the node's prefix), or the head of
    /// `key` to compare the entries' heads against.
    enum SearchStart {
        case position(Int)
        case head(UInt16)
    }

    @inline(__always)
    func searchStart(_ key: UnsafeRawBufferPointer) -> SearchStart {
        switch relation(of: key) {
        case .below: return .position(0)
        case .above: return .position(count)
        case .shares: return .head(Self.head(of: key, prefix: prefixLength))
        }
    }

    /// Index of the first key ≥ `key` (leaves), and whether it is equal.
    @inline(__always)
    func lowerBound(_ key: UnsafeRawBufferPointer) -> (index: Int, found: Bool) {
        let keyHead: UInt16
        switch searchStart(key) {
        case .position(let position): return (position, false)
        case .head(let head): keyHead = head
        }
        var low = 0, high = count
        while low < high {
            let mid = (low + high) >> 1
            let order = compare(mid, key, keyHead: keyHead)
            if order < 0 {
                low = mid + 1
            } else if order == 0 {
                return (mid, true)
            } else {
                high = mid
            }
        }
        return (low, false)
    }

    /// Index of the first slot whose head is at least `key`'s (0 or `count` when `key` sorts
    /// outside the prefix): where ``lowerBound(_:)`` lands or starts comparing whole keys,
    /// found from the slot array alone, without reading a cell.
    @inline(__always)
    func headLowerBound(_ key: UnsafeRawBufferPointer) -> Int {
        switch searchStart(key) {
        case .position(let position): return position
        case .head(let keyHead): return partitionPoint { head($0) < keyHead }
        }
    }

    /// Index of the child to follow for `key` in an interior node: the first cell whose key is
    /// greater than `key`, or `count` for the right-most child.
    @inline(__always)
    func childIndex(for key: UnsafeRawBufferPointer) -> Int {
        switch searchStart(key) {
        case .position(let position): return position
        case .head(let keyHead): return partitionPoint { compare($0, key, keyHead: keyHead) <= 0 }
        }
    }

    /// The first index of `0..<count` where `before` is false (it holds on a prefix of them).
    @inline(__always)
    private func partitionPoint(_ before: (Int) -> Bool) -> Int {
        var low = 0, high = count
        while low < high {
            let mid = (low + high) >> 1
            if before(mid) {
                low = mid + 1
            } else {
                high = mid
            }
        }
        return low
    }
}

/// Writes to a node page's body.
struct NodeWriter {
    let body: UnsafeMutableRawBufferPointer

    var view: NodeView { NodeView(body: UnsafeRawBufferPointer(body)) }

    /// Formats an empty node with the given prefix.
    func initialize(leaf: Bool, prefix: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0)) {
        precondition(prefix.count <= NodeLayout.maxPrefix, "prefix too long")
        body.initializeMemory(as: UInt8.self, repeating: 0)
        body[0] = leaf ? NodeLayout.leafType : NodeLayout.interiorType
        body[1] = UInt8(prefix.count)
        if prefix.count > 0 {
            UnsafeMutableRawBufferPointer(rebasing: body[NodeLayout.headerSize..<(NodeLayout.headerSize + prefix.count)])
                .copyMemory(from: prefix)
        }
        body.storeLE(UInt16(truncatingIfNeeded: body.count), at: 4)
    }

    func setRightChild(_ page: PageNumber) { body.storeLE(page, at: 8) }

    func setChild(_ index: Int, _ page: PageNumber) {
        if index == view.count {
            setRightChild(page)
        } else {
            body.storeLE(page, at: view.cellOffset(index))
        }
    }

    /// Makes room for a cell of `size` bytes and a slot at `index`; returns the cell's offset, or
    /// nil when the node is too full. The slot's offset is set; its head and the cell are the
    /// caller's to write.
    private func reserve(_ size: Int, at index: Int) -> Int? {
        var node = view
        let needed = size + NodeLayout.slotSize
        if node.gap < needed {
            guard node.gap + node.fragmented >= needed else { return nil }
            defragment()
            node = view
        }
        let count = node.count
        let start = node.contentStart - size
        let base = node.slotBase
        if index < count {
            let from = base + NodeLayout.slotSize * index
            (body.baseAddress! + from + NodeLayout.slotSize)
                .copyMemory(from: body.baseAddress! + from, byteCount: NodeLayout.slotSize * (count - index))
        }
        body.storeLE(UInt16(start), at: base + NodeLayout.slotSize * index)
        body.storeLE(UInt16(count + 1), at: 2)
        body.storeLE(UInt16(start), at: 4)
        return start
    }

    /// Writes the header byte, its varint and the tail of `key` at `position`; returns the
    /// position after them. Also stores the key's head in slot `index`.
    private func writeKeyPart(_ key: UnsafeRawBufferPointer, flags: UInt8, at position: Int, slot index: Int) -> Int {
        let node = view
        let p = node.prefixLength
        let suffix = key.count - p
        var position = position
        body[position] = flags | UInt8(min(suffix, NodeLayout.suffixEscape)) << NodeLayout.suffixShift
        position += 1
        if suffix >= NodeLayout.suffixEscape { position = writeVarint(suffix - NodeLayout.suffixEscape, at: position) }
        if suffix > 2 {
            let tail = suffix - 2
            UnsafeMutableRawBufferPointer(rebasing: body[position..<(position + tail)])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: key[(p + 2)..<key.count]))
            position += tail
        }
        let head = NodeView.head(of: key, prefix: p)
        let at = node.slotBase + NodeLayout.slotSize * index + 2
        body[at] = UInt8(head >> 8)
        body[at + 1] = UInt8(head & 0xFF)
        return position
    }

    /// Inserts a leaf cell for `key` (which must share the node's prefix) at `index`. `payload` is
    /// a leaf entry's payload (flags byte first). Returns false when the node is too full.
    func insertLeaf(key: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer, at index: Int) -> Bool {
        let p = view.prefixLength
        let suffix = key.count - p
        let size = NodeLayout.suffixFieldSize(suffix) + max(0, suffix - 2) + payload.count - 1
        guard let start = reserve(size, at: index) else { return false }
        let position = writeKeyPart(key, flags: payload[0] & NodeLayout.flagMask, at: start, slot: index)
        UnsafeMutableRawBufferPointer(rebasing: body[position..<(position + payload.count - 1)])
            .copyMemory(from: UnsafeRawBufferPointer(rebasing: payload[1..<payload.count]))
        return true
    }

    /// Inserts a leaf cell for `key` (which must share the node's prefix) at `index` from its
    /// parts: flags, stored length, original length (compressed values), and the stored bytes (the
    /// value, or the 4-byte first overflow page). Returns false when the node is too full.
    @inline(__always)
    func insertLeaf(key: UnsafeRawBufferPointer, flags: UInt8, storedLength: Int, originalLength: Int?,
                    stored: UnsafeRawBufferPointer, at index: Int) -> Bool {
        let p = view.prefixLength
        let suffix = key.count - p
        let size = NodeLayout.suffixFieldSize(suffix) + max(0, suffix - 2) + Varint.size(storedLength)
            + (originalLength.map(Varint.size) ?? 0) + stored.count
        guard let start = reserve(size, at: index) else { return false }
        var position = writeKeyPart(key, flags: flags, at: start, slot: index)
        position = writeVarint(storedLength, at: position)
        if let originalLength { position = writeVarint(originalLength, at: position) }
        if stored.count > 0 {
            UnsafeMutableRawBufferPointer(rebasing: body[position..<(position + stored.count)]).copyMemory(from: stored)
        }
        return true
    }

    @inline(__always)
    private func writeVarint(_ value: Int, at position: Int) -> Int {
        var rest = UInt64(value)
        var position = position
        while rest >= 0x80 {
            body[position] = UInt8(rest & 0x7F) | 0x80
            position += 1
            rest >>= 7
        }
        body[position] = UInt8(rest)
        return position + 1
    }

    /// Inserts an interior cell (`key`, left `child`) at `index`; `key` must share the node's
    /// prefix. Returns false when the node is too full.
    func insertInterior(key: UnsafeRawBufferPointer, child: PageNumber, at index: Int) -> Bool {
        let p = view.prefixLength
        let suffix = key.count - p
        let size = 4 + NodeLayout.suffixFieldSize(suffix) + max(0, suffix - 2)
        guard let start = reserve(size, at: index) else { return false }
        body.storeLE(child, at: start)
        _ = writeKeyPart(key, flags: 0, at: start + 4, slot: index)
        return true
    }

    /// Removes cell `index`.
    func remove(at index: Int) {
        let node = view
        let count = node.count
        let offset = node.cellOffset(index)
        let size = node.cellSize(at: offset)
        let base = node.slotBase
        let from = base + NodeLayout.slotSize * (index + 1)
        if index + 1 < count {
            (body.baseAddress! + from - NodeLayout.slotSize)
                .copyMemory(from: body.baseAddress! + from, byteCount: NodeLayout.slotSize * (count - index - 1))
        }
        body.storeLE(UInt16(count - 1), at: 2)
        if offset == node.contentStart {
            body.storeLE(UInt16(offset + size), at: 4)
        } else {
            body.storeLE(UInt16(node.fragmented + size), at: 6)
        }
    }

    /// Rewrites the node with entries `range` of `image` (all by default), packed, with the
    /// prefix ``NodeImage/chosenPrefix(_:)`` picks. The caller has checked that the keys ascend
    /// (so all share that prefix) and that they fit (``NodeImage/partSize(_:)``); should either not
    /// hold, it stops at the first entry that does not share the prefix or fit, and returns false
    /// (the node is then garbage: the caller fails the transaction).
    func rebuild(_ image: NodeImage, _ range: Range<Int>? = nil) -> Bool {
        let range = range ?? 0..<image.count
        let p = image.chosenPrefix(range)
        if range.isEmpty {
            initialize(leaf: image.leaf)
        } else {
            image.withEntry(range.lowerBound) { key, _ in initialize(leaf: image.leaf, prefix: UnsafeRawBufferPointer(rebasing: key[0..<p])) }
        }
        setRightChild(image.rightChild)
        for position in 0..<range.count {
            let index = range.lowerBound + position
            let fitted = image.withEntry(index) { key, payload in
                guard view.relation(of: key) == .shares else { return false }
                return image.leaf ? insertLeaf(key: key, payload: payload, at: position)
                                  : insertInterior(key: key, child: payload.loadLE(UInt32.self, at: 0), at: position)
            }
            guard fitted else { return false }
        }
        return true
    }

    /// Packs the cells, turning fragmented space into gap (keeping the prefix).
    func defragment() {
        let node = view
        let count = node.count
        var cells: [(offset: Int, size: Int)] = []
        cells.reserveCapacity(count)
        for index in 0..<count {
            let offset = node.cellOffset(index)
            cells.append((offset, node.cellSize(at: offset)))
        }
        let copy = [UInt8](UnsafeRawBufferPointer(body))
        var top = body.count
        copy.withUnsafeBytes { old in
            for (index, cell) in cells.enumerated() {
                top -= cell.size
                UnsafeMutableRawBufferPointer(rebasing: body[top..<(top + cell.size)])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: old[cell.offset..<(cell.offset + cell.size)]))
                body.storeLE(UInt16(top), at: node.slotBase + NodeLayout.slotSize * index)
            }
        }
        body.storeLE(UInt16(top), at: 4)
        body.storeLE(UInt16(0), at: 6)
    }
}

/// Unsigned LEB128 varints.
enum Varint {
    @inline(__always)
    static func read(_ bytes: UnsafeRawBufferPointer, _ position: inout Int) -> Int {
        var result = 0
        var shift = 0
        while true {
            let byte = bytes[position]
            position += 1
            result |= Int(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
        }
    }

    static func append(_ value: Int, to bytes: inout [UInt8]) {
        var value = UInt64(value)
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    static func size(_ value: Int) -> Int {
        var value = UInt64(value)
        var size = 1
        while value >= 0x80 {
            value >>= 7
            size += 1
        }
        return size
    }
}

/// memcmp order of two byte strings: negative, zero or positive.
///
/// Compares eight bytes at a time as big-endian words, inline: keys are short, and a call to
/// `memcmp` per binary-search probe cost more than the comparison itself.
@inlinable @inline(__always)
func compareBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
    let n = a.count < b.count ? a.count : b.count
    var i = 0
    if n > 0 {
        let pa = a.baseAddress!, pb = b.baseAddress!
        while i + 8 <= n {
            let x = UInt64(bigEndian: pa.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            let y = UInt64(bigEndian: pb.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            if x != y { return x < y ? -1 : 1 }
            i += 8
        }
        while i < n {
            let x = pa.load(fromByteOffset: i, as: UInt8.self), y = pb.load(fromByteOffset: i, as: UInt8.self)
            if x != y { return x < y ? -1 : 1 }
            i += 1
        }
    }
    return a.count - b.count
}
