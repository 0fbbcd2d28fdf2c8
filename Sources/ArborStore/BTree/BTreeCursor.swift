import CLZ4

// Safety: `forEachInLeaf` lends keys (assembled in the caller's key buffer, overwritten cell by
// cell) and values (slices of the pinned page, or an overflow value assembled in memory) to `body`
// for its call only, inside `withPage`; each offset is checked against the page before a slice is
// made.

/// A position in a B+tree: the path from the root to a leaf cell.
///
/// Moves first, last, to the first key ≥ k, next and previous. The path is only valid while the
/// tree is unchanged; ``Cursor`` (the public type) re-seeks to its current key after a change.
struct BTreeCursor {
    let tree: BTree
    private(set) var path: [BTree.PathEntry] = []
    private(set) var isValid = false
    /// The cell count of the current leaf, known while `isValid` (the tree does not change under a
    /// `BTreeCursor`; `Cursor` makes a new one after a change): steps within a leaf touch no page.
    private var leafCount = 0

    init(tree: BTree) {
        self.tree = tree
    }

    var pager: Pager { tree.pager }

    /// The node type byte and cell count of `page`, checking it is a node.
    private func shape(_ page: PageNumber) throws -> (leaf: Bool, count: Int) {
        try pager.withPage(page) { body in
            let node = NodeView(body: body)
            guard node.type == NodeLayout.leafType || node.type == NodeLayout.interiorType else {
                throw StoreError.corrupt(page: page, "expected a tree node, found page type \(node.type)", path: pager.path)
            }
            return (node.isLeaf, node.count)
        }
    }

    private func child(_ page: PageNumber, _ index: Int) throws -> PageNumber {
        let child = try pager.withPage(page) { NodeView(body: $0).child(index) }
        try tree.checkChild(child, of: page)
        return child
    }

    /// Descends from `page` along its left-most (or right-most) edge to a leaf.
    private mutating func descendEdge(from page: PageNumber, leftmost: Bool) throws {
        var page = page
        while true {
            guard path.count < BTree.maximumDepth else {
                throw StoreError.corrupt(page: page, "the tree is deeper than \(BTree.maximumDepth) levels (a cycle?)", path: pager.path)
            }
            let (leaf, count) = try shape(page)
            if leaf {
                path.append(.init(page: page, index: leftmost ? 0 : count - 1))
                return
            }
            let index = leftmost ? 0 : count
            path.append(.init(page: page, index: index))
            page = try child(page, index)
        }
    }

    /// Skips forward over empty leaves (and past the end of a leaf) to a valid cell.
    private mutating func settleForward() throws -> Bool {
        while let leaf = path.last {
            let (_, count) = try shape(leaf.page)
            if leaf.index < count {
                isValid = true
                leafCount = count
                return true
            }
            // Climb to the first ancestor with a child to the right.
            path.removeLast()
            while let top = path.last {
                let (_, parentCount) = try shape(top.page)
                if top.index < parentCount {
                    path[path.count - 1].index += 1
                    try descendEdge(from: try child(top.page, top.index + 1), leftmost: true)
                    break
                }
                path.removeLast()
            }
            if path.isEmpty { break }
        }
        isValid = false
        return false
    }

    /// Skips backward over empty leaves (and before the start of a leaf) to a valid cell.
    private mutating func settleBackward() throws -> Bool {
        while let leaf = path.last {
            if leaf.index >= 0 {
                let (_, count) = try shape(leaf.page)
                if leaf.index < count {
                    isValid = true
                    leafCount = count
                    return true
                }
            }
            path.removeLast()
            while let top = path.last {
                if top.index > 0 {
                    path[path.count - 1].index -= 1
                    try descendEdge(from: try child(top.page, top.index - 1), leftmost: false)
                    break
                }
                path.removeLast()
            }
            if path.isEmpty { break }
        }
        isValid = false
        return false
    }

    /// Moves to the smallest key; false when the tree is empty.
    mutating func first() throws -> Bool {
        path.removeAll(keepingCapacity: true)
        try descendEdge(from: tree.root, leftmost: true)
        return try settleForward()
    }

    /// Moves to the largest key; false when the tree is empty.
    mutating func last() throws -> Bool {
        path.removeAll(keepingCapacity: true)
        try descendEdge(from: tree.root, leftmost: false)
        return try settleBackward()
    }

    /// Moves to the first key ≥ `key`; false when there is none.
    mutating func seek(_ key: [UInt8]) throws -> Bool {
        _ = try key.withUnsafeBytes { try tree.descend($0, path: &path) }
        return try settleForward()
    }

    /// Moves to the next key; false at the end.
    mutating func next() throws -> Bool {
        guard isValid, !path.isEmpty else { return false }
        path[path.count - 1].index += 1
        if path[path.count - 1].index < leafCount { return true }
        return try settleForward()
    }

    /// Moves to the previous key; false at the start.
    mutating func previous() throws -> Bool {
        guard isValid, !path.isEmpty else { return false }
        path[path.count - 1].index -= 1
        if path[path.count - 1].index >= 0 { return true }
        return try settleBackward()
    }

    /// The key at the position.
    func key() throws -> [UInt8] {
        precondition(isValid, "cursor is not on a key")
        let leaf = path.last!
        return try tree.key(page: leaf.page, index: leaf.index)
    }

    /// The value at the position.
    func value() throws -> [UInt8] {
        precondition(isValid, "cursor is not on a key")
        let leaf = path.last!
        return try tree.value(page: leaf.page, index: leaf.index)
    }

    /// Prefetches the leaf after the current one when its parent names it and it is cached, and
    /// the cache's table slot of the leaf after that (see ``PageCache/prefetch(_:)`` and
    /// ``PageCache/prefetchSlot(_:)``).
    func prefetchNextLeaf() {
        guard path.count >= 2 else { return }
        let parent = path[path.count - 2]
        let (next, afterNext) = (try? pager.withPage(parent.page) { body -> (PageNumber, PageNumber) in
            let node = NodeView(body: body)
            guard node.type == NodeLayout.interiorType, parent.index < node.count else { return (0, 0) }
            return (node.child(parent.index + 1), parent.index + 1 < node.count ? node.child(parent.index + 2) : 0)
        }) ?? (0, 0)
        if afterNext != 0 { pager.cache.prefetchSlot(afterNext) }
        if next != 0 { pager.cache.prefetch(next) }
    }

    /// Moves past the current leaf to the first cell of the next non-empty one.
    mutating func nextLeaf() throws -> Bool {
        guard isValid, !path.isEmpty else { return false }
        path[path.count - 1].index = leafCount
        return try settleForward()
    }

    /// Calls `body` with the key and value of each cell of the current leaf from the current
    /// position on, reading values in place (values in overflow chains or compressed are
    /// assembled in a scratch buffer; keys, split between the node's prefix, the slot and the
    /// cell, are assembled in `keyBuffer`, which holds ``NodeLayout/maxKeySize(usable:)`` bytes).
    /// A cell whose value `prefilter` skips or `select` turns down is passed over before its key
    /// is assembled. Stops early when `body` returns false; returns whether it did.
    func forEachInLeaf(keyBuffer: UnsafeMutableRawBufferPointer,
                       prefilter: CompiledPrefilter? = nil,
                       select: (UnsafeRawBufferPointer) throws -> Bool,
                       _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool) throws -> Bool {
        // Long: the scan loop over one leaf, inside the page's lending closure: the page, the key
        // buffer and its prefix are valid only there, and the per-cell checks run with no call
        // between them.
        guard isValid, let leaf = path.last else { return false }
        return try pager.withPage(leaf.page) { page -> Bool in
            let node = NodeView(body: page)
            // The cells are read in slot order, mostly one cache line after another: asking for
            // the whole content area at once lets their cache misses overlap, not wait in turn.
            let contentStart = node.contentStart
            if contentStart < page.count { arbor_prefetch_range(page.baseAddress! + contentStart, page.count - contentStart) }
            let prefixLength = node.prefixLength
            guard prefixLength <= keyBuffer.count else {
                throw StoreError.corrupt(page: leaf.page, "a leaf claims a \(prefixLength)-byte key prefix", path: pager.path)
            }
            if prefixLength > 0 { keyBuffer.baseAddress!.copyMemory(from: node.prefix.baseAddress!, byteCount: prefixLength) }
            for index in leaf.index..<node.count {
                let offset = node.cellOffset(index)
                let (suffix, tail, end) = node.keyPart(at: offset)
                guard prefixLength + suffix <= keyBuffer.count, end <= page.count else {
                    throw StoreError.corrupt(page: leaf.page, "cell \(index) claims a \(prefixLength + suffix)-byte key", path: pager.path)
                }
                /// The key, assembled only for a selected cell.
                func key() -> UnsafeRawBufferPointer {
                    let head = node.head(index)
                    if suffix > 0 { keyBuffer[prefixLength] = UInt8(head >> 8) }
                    if suffix > 1 { keyBuffer[prefixLength + 1] = UInt8(head & 0xFF) }
                    if end > tail { (keyBuffer.baseAddress! + prefixLength + 2).copyMemory(from: page.baseAddress! + tail, byteCount: end - tail) }
                    return UnsafeRawBufferPointer(rebasing: keyBuffer[0..<(prefixLength + suffix)])
                }
                let flags = page[offset] & NodeLayout.flagMask
                let keepGoing: Bool
                if flags == 0 {
                    // Pages read from the file passed the node check; these guard the rest.
                    guard end + 10 <= page.count || end < page.count && page[end] < 0x80 else {
                        throw StoreError.corrupt(page: leaf.page, "cell \(index) has no room for its value's length", path: pager.path)
                    }
                    var position = end
                    let storedLength = Varint.read(page, &position)
                    guard storedLength >= 0, storedLength <= page.count - position else {
                        throw StoreError.corrupt(page: leaf.page, "cell \(index) claims a \(storedLength)-byte value", path: pager.path)
                    }
                    let value = UnsafeRawBufferPointer(rebasing: page[position..<(position + storedLength)])
                    if let prefilter, prefilter.skips(value) { continue }
                    guard try select(value) else { continue }
                    keepGoing = try body(key(), value)
                } else {
                    // A value's overflow chain is read once: through the scan ring, whatever the
                    // tree's size (a small tree's leaves may hold the keys of many large values).
                    let value = try pager.cache.scanning(true) { try LeafCell(node, index).value(tree: tree) }
                    keepGoing = try value.withUnsafeBytes { value in
                        if let prefilter, prefilter.skips(value) { return true }
                        guard try select(value) else { return true }
                        return try body(key(), value)
                    }
                }
                if !keepGoing { return true }
            }
            return false
        }
    }
}
