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

    /// The deepest tree accepted: deeper means a cycle in a corrupt file.
    static let maximumDepth = 40

    struct PathEntry {
        var page: PageNumber
        /// Interior: the child index followed (count = right-most child). Leaf: the cell index.
        var index: Int
    }

    /// A node decoded for the slow paths (splits, merges).
    struct NodeImage {
        var leaf: Bool
        var cells: [[UInt8]]
        var rightChild: PageNumber
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

    /// The value of leaf cell `index` on `page` (read from its overflow chain and decompressed as
    /// needed).
    func value(page: PageNumber, index: Int) throws -> [UInt8] {
        let cell = try pager.withPage(page) { body -> LeafCell in LeafCell(NodeView(body: body), index) }
        return try cell.value(tree: self)
    }

    /// The key of leaf or interior cell `index` on `page`.
    func key(page: PageNumber, index: Int) throws -> [UInt8] {
        try pager.withPage(page) { Array(NodeView(body: $0).key(index)) }
    }

    // MARK: Insert and update

    /// Stores `value` under `key`, replacing any value there.
    ///
    /// - Throws: `invalidArgument` when the key is longer than ``maxKeySize``.
    func put(_ key: [UInt8], _ value: [UInt8]) throws {
        let limit = NodeLayout.maxKeySize(usable: usable)
        guard key.count <= limit else {
            throw StoreError(.invalidArgument, "a key of \(key.count) bytes is longer than the \(limit) bytes allowed at page size \(pager.pageSize)", path: pager.path)
        }
        if try appendUsingHint(key, value) { return }
        var path: [PathEntry] = []
        let (leaf, index, found) = try key.withUnsafeBytes { try descend($0, path: &path) }
        if !found, try isRightmostEnd(path) {
            // An append at the right-most edge: the next increasing key can skip the descent.
            pager.appendHint = Pager.AppendHint(root: root, path: path)
        }
        if found {
            let old = try pager.withPage(leaf) { LeafCell(NodeView(body: $0), index) }
            try old.freeOverflow(tree: self)
            try pager.withMutablePage(leaf) { NodeWriter(body: $0).remove(at: index) }
        }
        let cell = try makeLeafCell(key: key, value: value)
        let fitted = try pager.withMutablePage(leaf) { body in
            cell.withUnsafeBytes { NodeWriter(body: body).insert($0, at: index) }
        }
        if !fitted {
            try split(path: path, inserting: cell, at: index)
        }
    }

    /// Whether every step of `path` took the last position of its node (the leaf's checked first:
    /// for random inserts it is almost never at the end).
    private func isRightmostEnd(_ path: [PathEntry]) throws -> Bool {
        for entry in path.reversed() {
            let count = try pager.withPage(entry.page) { NodeView(body: $0).count }
            if entry.index != count { return false }
        }
        return true
    }

    /// Sequential inserts (keys increasing, as SQLite's rowid appends): when the last insert into
    /// this tree went to the end of its right-most leaf and nothing has reshaped the tree since,
    /// a key greater than that leaf's last key goes straight there. Returns whether it did.
    private func appendUsingHint(_ key: [UInt8], _ value: [UInt8]) throws -> Bool {
        guard let hint = pager.appendHint, hint.root == root, let leaf = hint.path.last?.page else { return false }
        let (count, greater) = try pager.withPage(leaf) { body -> (Int, Bool) in
            let node = NodeView(body: body)
            guard node.isLeaf, node.count > 0 else { return (0, false) }
            return (node.count, key.withUnsafeBytes { compareBytes(node.key(node.count - 1), $0) < 0 })
        }
        guard greater else { return false }
        let cell = try makeLeafCell(key: key, value: value)
        let fitted = try pager.withMutablePage(leaf) { body in
            cell.withUnsafeBytes { NodeWriter(body: body).insert($0, at: count) }
        }
        if !fitted {
            var path = hint.path
            path[path.count - 1].index = count
            try split(path: path, inserting: cell, at: count)
        }
        return true
    }

    /// Builds a leaf cell, moving the value to an overflow chain when the cell would be too big.
    func makeLeafCell(key: [UInt8], value: [UInt8]) throws -> [UInt8] {
        var flags: UInt8 = 0
        var stored = value
        var original = 0
        if value.count >= compressionThreshold, let compressed = LZ4.compress(value),
           compressed.count + compressed.count / 16 < value.count {
            flags |= NodeLayout.flagCompressed
            stored = compressed
            original = value.count
        }
        var cell: [UInt8] = []
        cell.reserveCapacity(16 + key.count + min(stored.count, maxLocalCell))
        cell.append(flags)
        Varint.append(key.count, to: &cell)
        Varint.append(stored.count, to: &cell)
        if original > 0 { Varint.append(original, to: &cell) }
        cell.append(contentsOf: key)
        if cell.count + stored.count <= maxLocalCell {
            cell.append(contentsOf: stored)
        } else {
            cell[0] |= NodeLayout.flagOverflow
            let first = try writeOverflow(stored)
            cell.append(contentsOf: [UInt8(first & 0xFF), UInt8(first >> 8 & 0xFF), UInt8(first >> 16 & 0xFF), UInt8(first >> 24)])
        }
        return cell
    }

    /// Splits the leaf at the end of `path`, which cannot take `cell` at `index`, and carries the
    /// split up the tree.
    private func split(path: [PathEntry], inserting cell: [UInt8], at index: Int) throws {
        pager.appendHint = nil
        var path = path
        var node: NodeImage
        var appended: Bool
        let leaf = path.last!.page
        if leaf != root, let (count, lastKey) = try appendTarget(leaf), index == count {
            // An append to a full leaf: the leaf stays as it is (full, as sequential inserts should
            // leave it) and the new cell starts the next leaf. No cell of the leaf is touched.
            let rightPage = try pager.allocatePage()
            try pager.withMutablePage(rightPage) { body in
                let writer = NodeWriter(body: body)
                writer.initialize(leaf: true)
                _ = cell.withUnsafeBytes { writer.insert($0, at: 0) }
            }
            path.removeLast()
            let separator = Self.shortestSeparator(lastKey, Self.leafKey(cell))
            guard let pending = try insertSeparator(into: path.last!, left: leaf, separator: separator, right: rightPage) else { return }
            (node, appended) = pending
        } else {
            node = try image(of: leaf)
            node.cells.insert(cell, at: index)
            appended = index == node.cells.count - 1
        }
        // Carry splits up the path: each level gets the separator and new right page from below.
        while true {
            let entry = path.removeLast()
            var page = entry.page
            if page == root {
                // Keep the root where it is: move its content to a new child and grow a level.
                let child = try pager.allocatePage()
                path.append(PathEntry(page: root, index: 0))
                try pager.withMutablePage(root) { NodeWriter(body: $0).rebuild(leaf: false, cells: [], rightChild: child) }
                page = child
            }
            let (left, separator, right) = splitPoint(node, appended: appended)
            let rightPage = try pager.allocatePage()
            try write(left, to: page)
            try write(right, to: rightPage)
            guard let pending = try insertSeparator(into: path.last!, left: page, separator: separator, right: rightPage) else { return }
            (node, appended) = pending
        }
    }

    /// The cell count and last key of `page` when it is a non-empty leaf.
    private func appendTarget(_ page: PageNumber) throws -> (Int, [UInt8])? {
        try pager.withPage(page) { body in
            let node = NodeView(body: body)
            guard node.isLeaf, node.count > 0 else { return nil }
            return (node.count, Array(node.key(node.count - 1)))
        }
    }

    /// Inserts (`left`, `separator`) into the parent reached through `parent`; the pointer that led
    /// to `left` now leads to `right`. Returns nil when it fitted, else the parent's image with the
    /// new cell inserted (to be split in turn) and whether it went at the end.
    private func insertSeparator(into parent: PathEntry, left: PageNumber, separator: [UInt8],
                                 right: PageNumber) throws -> (NodeImage, Bool)? {
        let parentCell = Self.interiorCell(child: left, key: separator)
        let fitted = try pager.withMutablePage(parent.page) { body -> Bool in
            let writer = NodeWriter(body: body)
            writer.setChild(parent.index, right)
            return parentCell.withUnsafeBytes { writer.insert($0, at: parent.index) }
        }
        if fitted { return nil }
        var node = try image(of: parent.page)
        node.cells.insert(parentCell, at: parent.index)
        return (node, parent.index == node.cells.count - 1)
    }

    /// Chooses where to split an overfull node: by bytes, evenly — except when the new cell went
    /// to the end (sequential inserts), where the left node is kept full.
    private func splitPoint(_ node: NodeImage, appended: Bool) -> (left: NodeImage, separator: [UInt8], right: NodeImage) {
        let cells = node.cells
        let sizes = cells.map { $0.count + 2 }
        let total = sizes.reduce(0, +)
        var cut: Int
        if appended {
            cut = node.leaf ? cells.count - 1 : cells.count - 2
        } else {
            var running = 0
            cut = 0
            while cut < cells.count - 1 && running + sizes[cut] <= total / 2 {
                running += sizes[cut]
                cut += 1
            }
        }
        cut = max(1, min(cut, cells.count - (node.leaf ? 1 : 2)))
        if node.leaf {
            let left = NodeImage(leaf: true, cells: Array(cells[..<cut]), rightChild: 0)
            let right = NodeImage(leaf: true, cells: Array(cells[cut...]), rightChild: 0)
            let separator = Self.shortestSeparator(Self.leafKey(cells[cut - 1]), Self.leafKey(cells[cut]))
            return (left, separator, right)
        }
        // Interior: the middle cell moves up; its left child becomes the left node's right-most.
        let middle = cells[cut]
        let left = NodeImage(leaf: false, cells: Array(cells[..<cut]), rightChild: Self.interiorChild(middle))
        let right = NodeImage(leaf: false, cells: Array(cells[(cut + 1)...]), rightChild: node.rightChild)
        return (left, Self.interiorKey(middle), right)
    }

    /// The shortest key s with left < s ≤ right: a prefix of `right` one byte longer than its
    /// common prefix with `left`. Shorter separators make fuller interior nodes.
    static func shortestSeparator(_ left: [UInt8], _ right: [UInt8]) -> [UInt8] {
        var common = 0
        while common < left.count && common < right.count && left[common] == right[common] { common += 1 }
        return Array(right.prefix(common + 1))
    }

    // MARK: Delete

    /// Removes `key`; returns whether it was there.
    @discardableResult
    func delete(_ key: [UInt8]) throws -> Bool {
        pager.appendHint = nil
        var path: [PathEntry] = []
        let (leaf, index, found) = try key.withUnsafeBytes { try descend($0, path: &path) }
        guard found else { return false }
        let old = try pager.withPage(leaf) { LeafCell(NodeView(body: $0), index) }
        try old.freeOverflow(tree: self)
        try pager.withMutablePage(leaf) { NodeWriter(body: $0).remove(at: index) }
        try rebalance(path: path)
        return true
    }

    /// After a delete: while the node at the end of `path` is less than a third full, merge it
    /// with a sibling (when both fit in one page) or even the two out; collapse a root left with a
    /// single child.
    func rebalance(path: [PathEntry]) throws {
        var path = path
        while path.count > 1 {
            let entry = path.removeLast()
            let used = try pager.withPage(entry.page) { NodeView(body: $0).usedBytes }
            guard used < usable / 3 else { return }
            let parent = path.last!
            let parentCount = try pager.withPage(parent.page) { NodeView(body: $0).count }
            // The separator between the node and its sibling, and which is left.
            let separatorIndex = parent.index > 0 ? parent.index - 1 : 0
            guard parentCount > 0 else { return }
            let leftPage = try pager.withPage(parent.page) { NodeView(body: $0).child(separatorIndex) }
            let rightPage = try pager.withPage(parent.page) { NodeView(body: $0).child(separatorIndex + 1) }
            try checkChild(leftPage, of: parent.page)
            try checkChild(rightPage, of: parent.page)
            var left = try image(of: leftPage)
            let right = try image(of: rightPage)
            let separator = try key(page: parent.page, index: separatorIndex)
            var combined = left.cells
            if !left.leaf {
                combined.append(Self.interiorCell(child: left.rightChild, key: separator))
            }
            combined.append(contentsOf: right.cells)
            let bytes = NodeLayout.headerSize + combined.reduce(0) { $0 + $1.count + 2 }
            if bytes <= usable {
                // Merge right into left; drop the separator; the pointer to right now leads left.
                left.cells = combined
                left.rightChild = right.rightChild
                try write(left, to: leftPage)
                try pager.freePage(rightPage)
                try pager.withMutablePage(parent.page) { body in
                    let writer = NodeWriter(body: body)
                    writer.setChild(separatorIndex + 1, leftPage)
                    writer.remove(at: separatorIndex)
                }
                if parent.page == root, try pager.withPage(root, { NodeView(body: $0).count }) == 0 {
                    try collapseRoot(onlyChild: leftPage)
                    return
                }
                continue
            }
            // Redistribute: split the combined cells evenly, if the new separator fits the parent.
            let (newLeft, newSeparator, newRight) = splitPoint(
                NodeImage(leaf: left.leaf, cells: combined, rightChild: right.rightChild), appended: false)
            var parentImage = try image(of: parent.page)
            parentImage.cells[separatorIndex] = Self.interiorCell(child: leftPage, key: newSeparator)
            let parentBytes = NodeLayout.headerSize + parentImage.cells.reduce(0) { $0 + $1.count + 2 }
            guard parentBytes <= usable else { return }
            try write(newLeft, to: leftPage)
            try write(newRight, to: rightPage)
            try write(parentImage, to: parent.page)
            return
        }
    }

    /// Makes the root's only child the root (copying it in), freeing the child.
    private func collapseRoot(onlyChild child: PageNumber) throws {
        let node = try image(of: child)
        try write(node, to: root)
        try pager.freePage(child)
    }

    // MARK: Whole tree

    /// Frees every page of the tree, its overflow chains and its root.
    func destroy() throws {
        pager.appendHint = nil
        var stack: [(PageNumber, Int)] = [(root, 0)]
        while let (page, depth) = stack.popLast() {
            guard depth < Self.maximumDepth else {
                throw StoreError.corrupt(page: page, "the tree is deeper than \(Self.maximumDepth) levels (a cycle?)", path: pager.path)
            }
            let node = try image(of: page)
            let (leaf, count) = (node.leaf, node.cells.count)
            if leaf {
                for index in 0..<count {
                    let cell = try pager.withPage(page) { LeafCell(NodeView(body: $0), index) }
                    try cell.freeOverflow(tree: self)
                }
            } else {
                for index in 0...count {
                    let child = try pager.withPage(page) { NodeView(body: $0).child(index) }
                    try checkChild(child, of: page)
                    stack.append((child, depth + 1))
                }
            }
            try pager.freePage(page)
        }
    }

    // MARK: Helpers

    func image(of page: PageNumber) throws -> NodeImage {
        try pager.withPage(page) { body in
            let node = NodeView(body: body)
            guard node.type == NodeLayout.leafType || node.type == NodeLayout.interiorType else {
                throw StoreError.corrupt(page: page, "expected a tree node, found page type \(node.type)", path: pager.path)
            }
            return NodeImage(leaf: node.isLeaf, cells: (0..<node.count).map { node.cell($0) }, rightChild: node.rightChild)
        }
    }

    func write(_ node: NodeImage, to page: PageNumber) throws {
        try pager.withMutablePage(page) { NodeWriter(body: $0).rebuild(leaf: node.leaf, cells: node.cells, rightChild: node.rightChild) }
    }

    static func interiorCell(child: PageNumber, key: [UInt8]) -> [UInt8] {
        var cell: [UInt8] = [UInt8(child & 0xFF), UInt8(child >> 8 & 0xFF), UInt8(child >> 16 & 0xFF), UInt8(child >> 24)]
        Varint.append(key.count, to: &cell)
        cell.append(contentsOf: key)
        return cell
    }

    static func interiorChild(_ cell: [UInt8]) -> PageNumber {
        PageNumber(cell[0]) | PageNumber(cell[1]) << 8 | PageNumber(cell[2]) << 16 | PageNumber(cell[3]) << 24
    }

    static func interiorKey(_ cell: [UInt8]) -> [UInt8] {
        cell.withUnsafeBytes { raw in
            var position = 4
            let length = Varint.read(raw, &position)
            return Array(raw[position..<(position + length)])
        }
    }

    static func leafKey(_ cell: [UInt8]) -> [UInt8] {
        cell.withUnsafeBytes { raw in
            var position = 1
            let length = Varint.read(raw, &position)
            _ = Varint.read(raw, &position)
            if raw[0] & NodeLayout.flagCompressed != 0 { _ = Varint.read(raw, &position) }
            return Array(raw[position..<(position + length)])
        }
    }
}
