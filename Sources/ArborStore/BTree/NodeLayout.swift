/// The layout of B+tree pages (leaves and interior nodes) and overflow pages.
///
/// Body of a node page (the page less its checksum trailer), little-endian:
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 1 | page type: ``leafType`` or ``interiorType`` |
/// | 1 | 1 | reserved, 0 |
/// | 2 | 2 | cell count |
/// | 4 | 2 | start of the cell content area |
/// | 6 | 2 | fragmented free bytes inside the content area |
/// | 8 | 4 | interior: the right-most child; leaf: 0 |
/// | 12 | 2·count | cell offsets, in key order |
///
/// Cells grow down from the end of the body. Leaf cell: flags (1 byte: bit 0 value in an overflow
/// chain, bit 1 value LZ4-compressed), key length (varint), stored value length (varint), original
/// length (varint, compressed values only), the key, then the stored value — or, for overflow, the
/// first overflow page (4 bytes). Interior cell: left child (4 bytes), key length (varint), key.
/// A child left of key K holds keys < K; keys ≥ the last key go to the right-most child.
enum NodeLayout {
    static let leafType: UInt8 = 0x0A
    static let interiorType: UInt8 = 0x05
    static let overflowType: UInt8 = 0x0F
    static let headerSize = 12
    /// Overflow page body: type (1), reserved (3), next page (4), payload.
    static let overflowHeaderSize = 8

    static let flagOverflow: UInt8 = 1
    static let flagCompressed: UInt8 = 2

    /// The largest cell kept in a node: at least four fit in a page, so a split always leaves two
    /// or more cells on each side.
    static func maxLocalCell(usable: Int) -> Int { (usable - headerSize) / 4 - 2 }

    /// The longest key accepted at this page size (room for the cell's other fields).
    static func maxKeySize(usable: Int) -> Int { maxLocalCell(usable: usable) - 20 }
}

/// A read view of a node page's body.
struct NodeView {
    let body: UnsafeRawBufferPointer

    @inline(__always) var type: UInt8 { body[0] }
    @inline(__always) var isLeaf: Bool { body[0] == NodeLayout.leafType }
    @inline(__always) var count: Int { Int(body.loadLE(UInt16.self, at: 2)) }
    @inline(__always) var contentStart: Int { Int(body.loadLE(UInt16.self, at: 4)) }
    @inline(__always) var fragmented: Int { Int(body.loadLE(UInt16.self, at: 6)) }
    @inline(__always) var rightChild: PageNumber { body.loadLE(UInt32.self, at: 8) }

    @inline(__always)
    func cellOffset(_ index: Int) -> Int {
        Int(body.loadLE(UInt16.self, at: NodeLayout.headerSize + 2 * index))
    }

    /// Free bytes in the gap between the offset array and the content area.
    var gap: Int { contentStart - (NodeLayout.headerSize + 2 * count) }

    /// Bytes in use: header, offsets and live cells.
    var usedBytes: Int { body.count - gap - fragmented }

    /// The key of cell `index` (as a buffer into the page).
    @inline(__always)
    func key(_ index: Int) -> UnsafeRawBufferPointer {
        let offset = cellOffset(index)
        if isLeaf {
            let compressed = body[offset] & NodeLayout.flagCompressed != 0
            var position = offset + 1
            let keyLength = Varint.read(body, &position)
            _ = Varint.read(body, &position)
            if compressed { _ = Varint.read(body, &position) }
            return UnsafeRawBufferPointer(rebasing: body[position..<(position + keyLength)])
        } else {
            var position = offset + 4
            let keyLength = Varint.read(body, &position)
            return UnsafeRawBufferPointer(rebasing: body[position..<(position + keyLength)])
        }
    }

    /// The left child of interior cell `index`.
    @inline(__always)
    func child(_ index: Int) -> PageNumber {
        index == count ? rightChild : body.loadLE(UInt32.self, at: cellOffset(index))
    }

    /// The size in bytes of the cell at `offset`.
    func cellSize(at offset: Int) -> Int {
        var position = offset
        if isLeaf {
            let flags = body[position]
            position += 1
            let keyLength = Varint.read(body, &position)
            let stored = Varint.read(body, &position)
            if flags & NodeLayout.flagCompressed != 0 { _ = Varint.read(body, &position) }
            position += keyLength
            position += flags & NodeLayout.flagOverflow != 0 ? 4 : stored
        } else {
            position += 4
            let keyLength = Varint.read(body, &position)
            position += keyLength
        }
        return position - offset
    }

    /// The raw bytes of cell `index`.
    func cell(_ index: Int) -> [UInt8] {
        let offset = cellOffset(index)
        return Array(body[offset..<(offset + cellSize(at: offset))])
    }

    /// Index of the first key ≥ `key` (leaves), and whether it is equal.
    @inline(__always)
    func lowerBound(_ key: UnsafeRawBufferPointer) -> (index: Int, found: Bool) {
        var low = 0, high = count
        while low < high {
            let mid = (low + high) >> 1
            let order = compareBytes(self.key(mid), key)
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

    /// Index of the child to follow for `key` in an interior node: the first cell whose key is
    /// greater than `key`, or `count` for the right-most child.
    @inline(__always)
    func childIndex(for key: UnsafeRawBufferPointer) -> Int {
        var low = 0, high = count
        while low < high {
            let mid = (low + high) >> 1
            if compareBytes(self.key(mid), key) <= 0 {
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

    /// Formats an empty node.
    func initialize(leaf: Bool) {
        body.initializeMemory(as: UInt8.self, repeating: 0)
        body[0] = leaf ? NodeLayout.leafType : NodeLayout.interiorType
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

    /// Inserts `cell` at `index` if it fits (defragmenting when the free space is scattered).
    /// Returns false when the node is too full.
    func insert(_ cell: UnsafeRawBufferPointer, at index: Int) -> Bool {
        var node = view
        let needed = cell.count + 2
        if node.gap < needed {
            guard node.gap + node.fragmented >= needed else { return false }
            defragment()
            node = view
        }
        let count = node.count
        let start = node.contentStart - cell.count
        UnsafeMutableRawBufferPointer(rebasing: body[start..<(start + cell.count)]).copyMemory(from: cell)
        let pointerBase = NodeLayout.headerSize
        if index < count {
            let from = pointerBase + 2 * index
            (body.baseAddress! + from + 2).copyMemory(from: body.baseAddress! + from, byteCount: 2 * (count - index))
        }
        body.storeLE(UInt16(start), at: pointerBase + 2 * index)
        body.storeLE(UInt16(count + 1), at: 2)
        body.storeLE(UInt16(start), at: 4)
        return true
    }

    /// Removes cell `index`.
    func remove(at index: Int) {
        let node = view
        let count = node.count
        let offset = node.cellOffset(index)
        let size = node.cellSize(at: offset)
        let pointerBase = NodeLayout.headerSize
        let from = pointerBase + 2 * (index + 1)
        if index + 1 < count {
            (body.baseAddress! + from - 2).copyMemory(from: body.baseAddress! + from, byteCount: 2 * (count - index - 1))
        }
        body.storeLE(UInt16(count - 1), at: 2)
        if offset == node.contentStart {
            body.storeLE(UInt16(offset + size), at: 4)
        } else {
            body.storeLE(UInt16(node.fragmented + size), at: 6)
        }
    }

    /// Rewrites the node with the given cells, packed, in order.
    func rebuild(leaf: Bool, cells: [[UInt8]], rightChild: PageNumber) {
        initialize(leaf: leaf)
        setRightChild(rightChild)
        for (index, cell) in cells.enumerated() {
            let fitted = cell.withUnsafeBytes { insert($0, at: index) }
            precondition(fitted, "rebuilt node overflows its page")
        }
    }

    /// Packs the cells, turning fragmented space into gap.
    func defragment() {
        let node = view
        let cells = (0..<node.count).map { node.cell($0) }
        rebuild(leaf: node.isLeaf, cells: cells, rightChild: node.rightChild)
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
@inline(__always)
func compareBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
    let n = min(a.count, b.count)
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
