import Foundation

/// Taking entries out of a B+tree: deletion, rebalancing, collapsing the root, and destroying a
/// whole tree (BTree.swift has lookups and the helpers).
extension BTree {
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

    /// Removes `keys` (absent ones are skipped, duplicates removed once); returns how many were
    /// there. The keys that follow one in the leaf its descent reached are looked up in that
    /// leaf first: those it holds are removed with it, in one write, and the leaf is rebalanced
    /// once — so keys in ascending order cost a descent per leaf rather than per key. Any order
    /// is correct (a key the leaf lacks is looked for from the root).
    func delete(batch keys: [[UInt8]]) throws -> Int {
        pager.appendHint = nil
        var path: [PathEntry] = []
        var indices: [Int] = []
        var removed = 0
        var next = 0
        while next < keys.count {
            let (leaf, index, found) = try keys[next].withUnsafeBytes { try descend($0, path: &path) }
            next += 1
            indices.removeAll(keepingCapacity: true)
            if found { indices.append(index) }
            // The following keys this leaf holds.
            try pager.withPage(leaf) { body in
                let node = NodeView(body: body)
                while next < keys.count {
                    let (index, hit) = keys[next].withUnsafeBytes { node.lowerBound($0) }
                    guard hit else { return }
                    indices.append(index)
                    next += 1
                }
            }
            guard !indices.isEmpty else { continue }
            // In order, each once (a key listed twice finds the same cell).
            indices.sort()
            indices = indices.enumerated().filter { $0.offset == 0 || indices[$0.offset - 1] != $0.element }.map(\.element)
            for index in indices {
                let old = try pager.withPage(leaf) { LeafCell(NodeView(body: $0), index) }
                try old.freeOverflow(tree: self)
            }
            try pager.withMutablePage(leaf) { body in
                let writer = NodeWriter(body: body)
                for index in indices.reversed() { writer.remove(at: index) }
            }
            removed += indices.count
            try rebalance(path: path)
        }
        return removed
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
            let left = try image(of: leftPage)
            let right = try image(of: rightPage)
            guard left.leaf == right.leaf else {
                throw StoreError.corrupt(page: parent.page, "the children of page \(parent.page) are at different depths", path: pager.path)
            }
            var merged = NodeImage(leaf: left.leaf, rightChild: right.rightChild, capacity: 3 * usable)
            merged.append(left)
            if !left.leaf {
                let separator = try key(page: parent.page, index: separatorIndex)
                merged.insert(key: separator, child: left.rightChild, at: merged.count)
            }
            merged.append(right)
            if merged.fits(usable: usable) {
                // Merge right into left; drop the separator; the pointer to right now leads left.
                try write(merged, to: leftPage)
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
            // Redistribute: split the combined entries evenly (or as evenly as their prefixes let
            // two pages hold them), if the new separator fits the parent.
            let even = Self.evenCut(merged, appended: false)
            guard let cut = merged.partsFit([even], usable: usable) ? even : merged.balancedCuts(maximumParts: 2, usable: usable)?.first,
                  try replaceSeparator(in: parent.page, at: separatorIndex, with: Self.separator(merged, at: cut), child: leftPage) else { return }
            try write(merged, cuts: [cut], to: [leftPage, rightPage])
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
            // The node read in place: only a leaf's overflow chains (first page, stored length)
            // are collected, not its values.
            let (leaf, count, chains) = try pager.withPage(page) { body -> (Bool, Int, [(PageNumber, Int)]) in
                let node = NodeView(body: body)
                guard node.type == NodeLayout.leafType || node.type == NodeLayout.interiorType else {
                    throw StoreError.corrupt(page: page, "expected a tree node, found page type \(node.type)", path: pager.path)
                }
                guard node.isLeaf else { return (false, node.count, []) }
                var chains: [(PageNumber, Int)] = []
                for index in 0..<node.count {
                    let (flags, stored, _, start) = node.value(index)
                    if flags & NodeLayout.flagOverflow != 0 { chains.append((node.body.loadLE(UInt32.self, at: start), stored)) }
                }
                return (true, node.count, chains)
            }
            if leaf {
                for (first, length) in chains { try freeOverflow(first: first, length: length) }
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
}
