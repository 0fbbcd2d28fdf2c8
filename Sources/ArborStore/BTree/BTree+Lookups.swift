import CLZ4

// Safety: A batch's keys are lent from its own array inside `withKey`, and values are lent to
// `body` from pages the pager pins for the call; neither is kept.

/// Lookups of many keys at once. A lookup of one key waits on memory at each node it reads: the
/// page cache's slot, the node's header, the probes of its slot array, the cell it finds. On
/// random keys each of those is a miss, and one lookup's misses come one after the other. A batch
/// takes its keys a group at a time and runs each phase of the lookup over the whole group —
/// descend to the leaves and ask for their headers, then search the leaves and ask for the cells
/// found, then read the values — so the misses of a group's keys overlap instead of adding up.
extension BTree {
    /// The most keys one group of a batched lookup holds: enough for their misses to overlap, few
    /// enough for a group's leaves to stay in the processor's caches between the phases.
    static let lookupGroup = 8

    /// Bytes of a leaf asked for before it is searched: its header and the first slots.
    static let leafHeadBytes = 256

    /// Calls `body` with each key's position in `keys` and its value (read in place when inline
    /// and uncompressed, as ``visitValue(_:_:)``), or nil for a key the tree does not hold, in the
    /// order of `keys`. The tree must not change meanwhile (``Tree`` refuses changes during the
    /// call). Keys in ascending order share the most interior nodes, but any order is answered.
    func visitValues(_ keys: KeyBatch, _ body: (Int, UnsafeRawBufferPointer?) throws -> Void) throws {
        guard keys.count > 0 else { return }
        // Interior levels above the leaves: every leaf is at the same depth.
        let levels = try interiorLevels()
        try withUnsafeTemporaryAllocation(of: PageNumber.self, capacity: Self.lookupGroup) { leaves in
            var start = 0
            while start < keys.count {
                let end = min(keys.count, start + Self.lookupGroup)
                // Descend to each key's leaf and ask for its head.
                for position in start..<end {
                    let leaf = try keys.withKey(position) { try leafPage($0, below: levels) }
                    pager.cache.prefetch(leaf, byteCount: Self.leafHeadBytes)
                    leaves[position - start] = leaf
                }
                // Find where each key's cell would be in its leaf by the slots' heads alone, and
                // ask for that cell (the search below then reads it without waiting).
                for position in start..<end {
                    let leaf = leaves[position - start]
                    let isLeaf = try keys.withKey(position) { key in
                        try pager.withPage(leaf) { page -> Bool in
                            let node = NodeView(body: page)
                            guard node.isLeaf else { return false }
                            let index = node.headLowerBound(key)
                            if index < node.count { arbor_prefetch_range(page.baseAddress! + node.cellOffset(index), 64) }
                            return true
                        }
                    }
                    // Not a leaf where one should be: the single lookup finds it, or reports it.
                    if !isLeaf { leaves[position - start] = 0 }
                }
                // Search each leaf and read the value.
                for position in start..<end {
                    let leaf = leaves[position - start]
                    let hit = try keys.withKey(position) { key in
                        if leaf == 0 { return try visitValue(key) { try body(position, $0) } }
                        return try visitValue(leaf: leaf, { node in
                            let (index, found) = node.lowerBound(key)
                            return found ? index : nil
                        }, { try body(position, $0) })
                    }
                    if !hit { try body(position, nil) }
                }
                start = end
            }
        }
    }

    /// The number of interior levels above the leaves (0: the root is a leaf), read down the
    /// left-most path.
    func interiorLevels() throws -> Int {
        let (_, levels) = try descendToLeaf(within: Self.maximumDepth) { _ in 0 }
        guard levels < Self.maximumDepth else {
            throw StoreError.corrupt(page: root, "the tree is deeper than \(Self.maximumDepth) levels (a cycle?)", path: pager.path)
        }
        return levels
    }

    /// The leaf on `key`'s path, found by descending at most `levels` interior levels from the
    /// root: a leaf met sooner is the answer, as for ``locate(_:)`` (a damaged tree's leaves may
    /// lie at other depths; the caller checks that the page it gets is a leaf).
    private func leafPage(_ key: UnsafeRawBufferPointer, below levels: Int) throws -> PageNumber {
        try descendToLeaf(within: levels) { $0.childIndex(for: key) }.page
    }

    /// Follows the child `choose` picks from each interior node, from the root down, until a leaf
    /// or `limit` levels: the page reached and the levels descended. Reads no leaf's cells.
    private func descendToLeaf(within limit: Int, _ choose: (NodeView) -> Int) throws -> (page: PageNumber, levels: Int) {
        var page = root
        for level in 0..<limit {
            let child = try pager.withPage(page) { body -> PageNumber? in
                let node = NodeView(body: body)
                if node.isLeaf { return nil }
                guard node.type == NodeLayout.interiorType else {
                    throw StoreError.corrupt(page: page, "expected a tree node, found page type \(node.type)", path: pager.path)
                }
                return node.child(choose(node))
            }
            guard let child else { return (page, level) }
            try checkChild(child, of: page)
            page = child
        }
        return (page, limit)
    }
}

/// Keys for a batched lookup (``Tree/visitValues(forKeys:_:)``), stored end to end in one buffer.
public struct KeyBatch: Sendable {
    private var bytes: [UInt8] = []
    private var ends: [Int] = []

    /// An empty batch.
    public init() {}

    /// An empty batch with room for `count` keys of about `keyLength` bytes.
    public init(reservingCapacity count: Int, keyLength: Int = 8) {
        bytes.reserveCapacity(count * keyLength)
        ends.reserveCapacity(count)
    }

    /// The number of keys.
    public var count: Int { ends.count }

    /// Adds a key after the others.
    public mutating func append(_ key: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: key)
        ends.append(bytes.count)
    }

    /// Adds a key after the others.
    public mutating func append(_ key: [UInt8]) {
        key.withUnsafeBytes { append($0) }
    }

    /// Calls `body` with the bytes of key `position`.
    @inline(__always)
    func withKey<R>(_ position: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let start = position == 0 ? 0 : ends[position - 1]
        return try bytes.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[start..<ends[position]])) }
    }
}
