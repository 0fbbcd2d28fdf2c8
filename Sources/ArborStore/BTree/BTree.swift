// Safety: Descents read keys lent for the call, and `visitValue` lends a slice of a page to `body`
// only inside the pager's `withPage`, which pins the page meanwhile.

/// A B+tree of byte keys and byte values over the pager: lookups, inserts, updates and deletes,
/// with splits on insert and merge or redistribution on delete. Its root page never moves (the
/// catalog records it), so a root split copies the root into a new child.
///
/// Values whose cell would not fit in a quarter page go to overflow chains; values at or above
/// the compression threshold are stored LZ4-compressed when that saves space.
///
/// Used inside the pager's transactions; all page access goes through the pager.
struct BTree {
    let pager: Pager
    let root: PageNumber
    /// Values this long or longer are tried with LZ4.
    let compressionThreshold: Int
    /// The tree's compression dictionary as its catalog entry named it (0: none yet).
    var dictionaryPage: PageNumber = 0
    var dictionaryLength = 0

    init(pager: Pager, root: PageNumber, compressionThreshold: Int, dictionaryPage: PageNumber = 0, dictionaryLength: Int = 0) {
        self.pager = pager
        self.root = root
        self.compressionThreshold = compressionThreshold
        self.dictionaryPage = dictionaryPage
        self.dictionaryLength = dictionaryLength
    }

    /// The tree described by `descriptor`.
    init(pager: Pager, descriptor: TreeDescriptor, compressionThreshold: Int) {
        self.init(pager: pager, root: descriptor.root, compressionThreshold: compressionThreshold,
                  dictionaryPage: descriptor.dictionaryPage, dictionaryLength: descriptor.dictionaryLength)
    }

    /// The tree's compression dictionary, loaded (and kept by the connection), or nil when it has
    /// none — also one made earlier in this write transaction, after this handle was made.
    func dictionary() throws -> LZ4Dictionary? {
        var (page, length) = (dictionaryPage, dictionaryLength)
        if page == 0, let made = pager.newDictionaries[root] { (page, length) = made }
        guard page != 0 else { return nil }
        if let loaded = pager.dictionaries[page] { return loaded }
        let dictionary = LZ4Dictionary(bytes: try readOverflow(first: page, length: length))
        if pager.dictionaries.count >= 16 { pager.dictionaries.removeAll() }
        pager.dictionaries[page] = dictionary
        return dictionary
    }

    /// The deepest tree accepted: deeper means a cycle in a corrupt file.
    static let maximumDepth = 40

    struct PathEntry {
        var page: PageNumber
        /// Interior: the child index followed (count = right-most child). Leaf: the cell index.
        var index: Int
    }

    var usable: Int { pager.usableSize }
    var maxLocalCell: Int { NodeLayout.maxLocalCell(usable: usable) }

    /// Creates an empty tree (one empty leaf) and returns its root page.
    static func create(in pager: Pager) throws -> PageNumber {
        let root = try pager.allocatePage()
        try pager.withMutablePage(root) { NodeWriter(body: $0).initialize(leaf: true) }
        return root
    }

    // MARK: Lookup

    /// One step of a descent: the position of `key` in `page`, and the child to follow.
    @inline(__always)
    private func step(_ page: PageNumber, _ key: UnsafeRawBufferPointer) throws -> (isLeaf: Bool, index: Int, found: Bool, child: PageNumber) {
        try pager.withPage(page) { body in
            let node = NodeView(body: body)
            if node.isLeaf {
                let (index, found) = node.lowerBound(key)
                return (true, index, found, 0)
            }
            guard node.type == NodeLayout.interiorType else {
                throw StoreError.corrupt(page: page, "expected a tree node, found page type \(node.type)", path: pager.path)
            }
            let index = node.childIndex(for: key)
            return (false, index, false, node.child(index))
        }
    }

    /// The tree's page count when it is at most `limit`, else some count above `limit`: counted
    /// level by level from the root, reading interior nodes only (the leaves' parents give their
    /// child counts: about one node read per few hundred leaves), and stopping as soon as the
    /// count passes `limit`. Overflow pages are not counted (a scan reads them through the scan
    /// ring whatever the tree's size).
    func pageCount(limit: Int) throws -> Int {
        func interior(_ page: PageNumber) throws -> (isLeaf: Bool, children: Int, first: PageNumber) {
            try pager.withPage(page) { body in
                let node = NodeView(body: body)
                guard node.type == NodeLayout.leafType || node.type == NodeLayout.interiorType else {
                    throw StoreError.corrupt(page: page, "expected a tree node, found page type \(node.type)", path: pager.path)
                }
                return node.isLeaf ? (true, 0, 0) : (false, node.count + 1, node.child(0))
            }
        }
        var level: [PageNumber] = [root]
        var total = 1
        for _ in 0..<Self.maximumDepth {
            let top = try interior(level[0])
            if top.isLeaf { return total }
            try checkChild(top.first, of: level[0])
            let parentsOfLeaves = try interior(top.first).isLeaf
            var next: [PageNumber] = []
            for page in level {
                let before = next.count
                try pager.withPage(page) { body in
                    let node = NodeView(body: body)
                    guard node.type == NodeLayout.interiorType else {
                        throw StoreError.corrupt(page: page, "expected an interior node, found page type \(node.type)", path: pager.path)
                    }
                    total += node.count + 1
                    if !parentsOfLeaves { for index in 0...node.count { next.append(node.child(index)) } }
                }
                // Children are checked against the page that names them.
                for child in next[before...] { try checkChild(child, of: page) }
                if total > limit { return total }
            }
            if parentsOfLeaves { return total }
            level = next
        }
        throw StoreError.corrupt(page: root, "the tree is deeper than \(Self.maximumDepth) levels (a cycle?)", path: pager.path)
    }

    /// Descends to the leaf that holds or would hold `key`, recording the path.
    func descend(_ key: UnsafeRawBufferPointer, path: inout [PathEntry]) throws -> (leaf: PageNumber, index: Int, found: Bool) {
        var page = root
        path.removeAll(keepingCapacity: true)
        while true {
            guard path.count < Self.maximumDepth else {
                throw StoreError.corrupt(page: page, "the tree is deeper than \(Self.maximumDepth) levels (a cycle?)", path: pager.path)
            }
            let step = try step(page, key)
            path.append(PathEntry(page: page, index: step.index))
            if step.isLeaf { return (page, step.index, step.found) }
            try checkChild(step.child, of: page)
            page = step.child
        }
    }

    /// Descends to the leaf that holds or would hold `key`, without recording the path (lookups).
    func locate(_ key: UnsafeRawBufferPointer) throws -> (leaf: PageNumber, index: Int, found: Bool) {
        var page = root
        for _ in 0..<Self.maximumDepth {
            let step = try step(page, key)
            if step.isLeaf { return (page, step.index, step.found) }
            try checkChild(step.child, of: page)
            page = step.child
        }
        throw StoreError.corrupt(page: page, "the tree is deeper than \(Self.maximumDepth) levels (a cycle?)", path: pager.path)
    }

    func checkChild(_ child: PageNumber, of page: PageNumber) throws {
        guard child >= 2, child <= pager.pageCount, child != page else {
            throw StoreError.corrupt(page: page, "child pointer \(child) is outside the file", path: pager.path)
        }
    }

    /// The value stored under `key`, or nil.
    func get(_ key: [UInt8]) throws -> [UInt8]? {
        let (leaf, index, found) = try key.withUnsafeBytes { try locate($0) }
        guard found else { return nil }
        return try value(page: leaf, index: index)
    }

    /// Calls `body` with the value stored under `key` — the bytes in the page itself when the
    /// value is inline and uncompressed, else the value read from its overflow chain and
    /// decompressed; returns whether the key was there.
    func visitValue(_ key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool {
        let (leaf, index, found) = try locate(key)
        guard found else { return false }
        return try visitValue(leaf: leaf, { _ in index }, body)
    }

    /// Calls `body` with the value of the cell of leaf `leaf` that `position` picks from the node
    /// (see ``visitValue(_:_:)``); returns false when it picks none.
    @inline(__always)
    func visitValue(leaf: PageNumber, _ position: (NodeView) -> Int?, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool {
        // The cell to read the value from, when it could not be read in place.
        let (picked, cell) = try pager.withPage(leaf) { page -> (Bool, LeafCell?) in
            let node = NodeView(body: page)
            guard let index = position(node) else { return (false, nil) }
            let (flags, stored, _, start) = node.value(index)
            guard flags == 0 else { return (true, LeafCell(node, index)) }
            guard start + stored <= page.count else {
                throw StoreError.corrupt(page: leaf, "cell \(index) claims a \(stored)-byte value", path: pager.path)
            }
            try body(UnsafeRawBufferPointer(rebasing: page[start..<(start + stored)]))
            return (true, nil)
        }
        if let cell { try cell.value(tree: self).withUnsafeBytes(body) }
        return picked
    }

    /// The value of leaf cell `index` on `page` (read from its overflow chain and decompressed as
    /// needed).
    func value(page: PageNumber, index: Int) throws -> [UInt8] {
        let cell = try pager.withPage(page) { body -> LeafCell in LeafCell(NodeView(body: body), index) }
        return try cell.value(tree: self)
    }

    /// The key of leaf or interior cell `index` on `page`.
    func key(page: PageNumber, index: Int) throws -> [UInt8] {
        try pager.withPage(page) { NodeView(body: $0).key(index) }
    }

    // MARK: Helpers

    func image(of page: PageNumber) throws -> NodeImage {
        try pager.withPage(page) { body in
            let node = NodeView(body: body)
            guard node.type == NodeLayout.leafType || node.type == NodeLayout.interiorType else {
                throw StoreError.corrupt(page: page, "expected a tree node, found page type \(node.type)", path: pager.path)
            }
            return node.image()
        }
    }

    /// Writes the parts of `node` cut at `cuts` to `pages`, one each, left to right. An interior
    /// node's entry at a cut moves up to the parent (the caller's separator), and its left child
    /// becomes the left part's right-most child.
    func write(_ node: NodeImage, cuts: [Int], to pages: [PageNumber]) throws {
        for (i, part) in node.parts(cuts).enumerated() {
            try write(node, part, rightChild: node.leaf ? nil : (i < cuts.count ? node.child(cuts[i]) : node.rightChild), to: pages[i])
        }
    }

    /// Writes entries `range` of `node` (all by default) to `page` as a whole node; interior
    /// nodes take `rightChild` (the image's own by default).
    ///
    /// - Throws: `corrupt` when the keys do not ascend (they came from a damaged page: written
    ///   with the prefix of the first and last, a key in between may not share it) or do not fit
    ///   the page; the page is not touched then.
    func write(_ node: NodeImage, _ range: Range<Int>? = nil, rightChild: PageNumber? = nil, to page: PageNumber) throws {
        var node = node
        if let rightChild { node.rightChild = rightChild }
        let range = range ?? 0..<node.count
        guard node.ascends(range) else {
            throw StoreError.corrupt(page: page, "keys out of order (found rewriting the node)", path: pager.path)
        }
        let size = node.partSize(range)
        guard size <= usable else {
            throw StoreError.corrupt(page: page, "a rewritten node of \(range.count) entries needs \(size) bytes, more than the page's \(usable)", path: pager.path)
        }
        let written = try pager.withMutablePage(page) { NodeWriter(body: $0).rebuild(node, range) }
        guard written else {
            throw StoreError.corrupt(page: page, "a rewritten node does not fit its page", path: pager.path)
        }
        try checkInvariants(of: page, writtenFrom: node, range)
    }
}
