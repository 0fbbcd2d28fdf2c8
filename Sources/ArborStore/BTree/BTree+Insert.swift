import Foundation

// Safety: Keys and values are lent by callers for the call, and a new leaf's prefix is a slice of
// the key lent with it.

/// Putting entries into a B+tree: appends, inserts, sharing with a sibling, splits up to the
/// root (docs/file-format.md, "Splitting a node"). Lookups and the helpers are in BTree.swift,
/// deletion in BTree+Delete.swift.
extension BTree {
    // MARK: Insert and update

    /// Stores `value` under `key`, replacing any value there.
    ///
    /// - Throws: `invalidArgument` when the key is longer than ``maxKeySize``.
    func put(_ key: [UInt8], _ value: [UInt8]) throws {
        let limit = NodeLayout.maxKeySize(usable: usable)
        guard key.count <= limit else {
            throw StoreError(.invalidArgument, "a key of \(key.count) bytes is longer than the \(limit) bytes allowed at page size \(pager.pageSize)", path: pager.path)
        }
        if try key.withUnsafeBytes({ key in try value.withUnsafeBytes { try appendUsingHint(key, $0) } }) { return }
        try descendAndPut(key, value)
    }

    /// Stores `value` under `key` as the put of arrays does, from bytes in place:
    /// a key past the last of the tree (``appendUsingHint(_:_:)``) is stored with no copy.
    func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws {
        let limit = NodeLayout.maxKeySize(usable: usable)
        guard key.count <= limit else {
            throw StoreError(.invalidArgument, "a key of \(key.count) bytes is longer than the \(limit) bytes allowed at page size \(pager.pageSize)", path: pager.path)
        }
        if try appendUsingHint(key, value) { return }
        try descendAndPut(Array(key), Array(value))
    }

    /// The put that descends from the root.
    private func descendAndPut(_ key: [UInt8], _ value: [UInt8]) throws {
        var path: [PathEntry] = []
        let (leaf, index, found) = try key.withUnsafeBytes { try descend($0, path: &path) }
        var append = false
        if !found, try isRightmostEnd(path) {
            // An append at the right-most edge: the next increasing key can skip the descent.
            pager.appendHint = Pager.AppendHint(root: root, path: path)
            append = true
        }
        if found, try overwrite(leaf, index, with: value) { return }
        if found {
            let old = try pager.withPage(leaf) { LeafCell(NodeView(body: $0), index) }
            try old.freeOverflow(tree: self)
            try pager.withMutablePage(leaf) { NodeWriter(body: $0).remove(at: index) }
        }
        let payload = try makeLeafPayload(key: key, value: value)
        try insert(key: key, payload: payload, path: path, at: index, append: append)
    }

    /// An update that keeps the value's size (an attribute of a row changed to one of the same
    /// encoded length: most updates): when the old value is inline and uncompressed and the new
    /// one would be stored the same way with the same length, its bytes are written over the old
    /// ones in the cell — no cell removed and inserted again, no fragment left to defragment. A
    /// value equal to the old one leaves the page untouched (not even journaled). Returns false
    /// when the value has to go through the remove and insert.
    private func overwrite(_ leaf: PageNumber, _ index: Int, with value: [UInt8]) throws -> Bool {
        // At or past the threshold a value may be stored compressed: the general path decides.
        guard value.count < compressionThreshold else { return false }
        // Where the old value's bytes start, when they can be written over and differ.
        let found = try pager.withPage(leaf) { body -> (start: Int, unchanged: Bool)? in
            let (flags, stored, _, start) = NodeView(body: body).value(index)
            guard flags == 0, stored == value.count, start + stored <= body.count else { return nil }
            guard stored > 0 else { return (start, true) }
            return (start, value.withUnsafeBytes { memcmp(body.baseAddress! + start, $0.baseAddress!, stored) == 0 })
        }
        guard let found else { return false }
        if found.unchanged { return true }
        try pager.withMutablePage(leaf) { body in
            value.withUnsafeBytes { (body.baseAddress! + found.start).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
        return true
    }

    /// Whether every step of `path` took the last position of its node (the leaf's checked first:
    /// for random inserts it is almost never at the end).
    private func isRightmostEnd(_ path: [PathEntry]) throws -> Bool {
        for position in 0..<path.count {
            let entry = path[path.count - 1 - position]
            let count = try pager.withPage(entry.page) { NodeView(body: $0).count }
            if entry.index != count { return false }
        }
        return true
    }

    /// Sequential inserts (keys increasing, as SQLite's rowid appends): when the last insert into
    /// this tree went to the end of its right-most leaf and nothing has reshaped the tree since,
    /// a key greater than that leaf's last key goes straight there. Returns whether it did.
    ///
    /// The common case — a small value that stays inline and uncompressed, a key that starts
    /// with the leaf's prefix, room in the leaf — writes the cell straight from `key` and `value`
    /// without allocating anything.
    private func appendUsingHint(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool {
        guard pager.appendHintRoot == root, pager.appendHintRoot != 0 else { return false }
        let leaf = pager.appendHintLeaf
        let inline = value.count < compressionThreshold
            && NodeLayout.suffixFieldSize(key.count) + max(0, key.count - 2) + Varint.size(value.count) + value.count <= maxLocalCell
        enum Outcome { case inserted, notAfterLast, slow(count: Int) }
        let outcome = try pager.withMutablePage(leaf) { body -> Outcome in
            let writer = NodeWriter(body: body)
            let node = writer.view
            guard node.isLeaf, node.count > 0 else { return .notAfterLast }
            let count = node.count
            guard node.compare(count - 1, key) < 0 else { return .notAfterLast }
            guard inline, node.relation(of: key) == .shares else { return .slow(count: count) }
            let fitted = writer.insertLeaf(key: key, flags: 0, storedLength: value.count, originalLength: nil, stored: value, at: count)
            return fitted ? .inserted : .slow(count: count)
        }
        switch outcome {
        case .inserted:
            return true
        case .notAfterLast:
            return false
        case .slow(let count):
            guard var path = pager.appendHint?.path else { return false }
            path[path.count - 1].index = count
            let key = Array(key)
            let payload = try makeLeafPayload(key: key, value: Array(value))
            try insert(key: key, payload: payload, path: path, at: count, append: true)
            return true
        }
    }

    /// What happened to an insert tried in place.
    private enum InPlace {
        case inserted
        /// The key does not start with the node's prefix.
        case prefixMismatch
        /// The node has no room.
        case full
    }

    /// Inserts a leaf entry at `index` of the leaf at the end of `path`: in place when its key
    /// starts with the leaf's prefix and it fits; else by rewriting the leaf with a shorter
    /// prefix; else by an append split (`append`: the end of the right-most leaf), by sharing
    /// with a sibling, or by a split.
    private func insert(key: [UInt8], payload: [UInt8], path: [PathEntry], at index: Int, append: Bool) throws {
        let leaf = path[path.count - 1].page
        let outcome = try pager.withMutablePage(leaf) { body -> InPlace in
            let writer = NodeWriter(body: body)
            return key.withUnsafeBytes { key in
                guard writer.view.relation(of: key) == .shares else { return .prefixMismatch }
                return payload.withUnsafeBytes { writer.insertLeaf(key: key, payload: $0, at: index) } ? .inserted : .full
            }
        }
        if outcome == .inserted { return }
        if outcome == .full && append && leaf != root {
            try appendSplit(path: path, key: key, payload: payload)
            return
        }
        var node = try image(of: leaf)
        node.insert(key: key, payload: payload, at: index)
        if node.fits(usable: usable) {
            try write(node, to: leaf)
            return
        }
        pager.appendHint = nil
        if leaf == root {
            try splitUp(path: path, node: node, appended: append)
        } else if append {
            try appendSplit(path: path, key: key, payload: payload)
        } else if try !shareWithSibling(path: path, node: node) {
            try splitUp(path: path, node: node, appended: false)
        }
    }

    /// An append to the full right-most leaf: the leaf stays as it is (full, as sequential inserts
    /// should leave it) and the new entry starts the next leaf.
    private func appendSplit(path: [PathEntry], key: [UInt8], payload: [UInt8]) throws {
        pager.appendHint = nil
        let leaf = path[path.count - 1].page
        let lastKey = try pager.withPage(leaf) { body -> [UInt8] in
            let node = NodeView(body: body)
            return node.key(node.count - 1)
        }
        let rightPage = try pager.allocatePage()
        try pager.withMutablePage(rightPage) { body in
            let writer = NodeWriter(body: body)
            key.withUnsafeBytes { key in
                writer.initialize(leaf: true, prefix: UnsafeRawBufferPointer(rebasing: key[0..<NodeLayout.prefixForFirstKey(key.count)]))
                _ = payload.withUnsafeBytes { writer.insertLeaf(key: key, payload: $0, at: 0) }
            }
        }
        var parentPath = path
        parentPath.removeLast()
        guard let (parent, appended) = try insertSeparators(into: parentPath.last!, pages: [leaf, rightPage],
                                                            separators: [Self.shortestSeparator(lastKey, key)]) else { return }
        try splitUp(path: parentPath, node: parent, appended: appended)
    }

    /// Builds a leaf entry's payload, moving the value to an overflow chain when the cell would be
    /// too big (measured with no prefix, the node's worst case).
    func makeLeafPayload(key: [UInt8], value: [UInt8]) throws -> [UInt8] {
        var flags: UInt8 = 0
        var stored = value
        var original = 0
        if value.count >= compressionThreshold {
            let dictionary = try dictionary()
            if let compressed = dictionary.map({ $0.compress(value) }) ?? LZ4.compress(value),
               compressed.count + compressed.count / 16 < value.count {
                flags |= NodeLayout.flagCompressed | (dictionary == nil ? 0 : NodeLayout.flagDictionary)
                stored = compressed
                original = value.count
            }
        }
        var payload: [UInt8] = []
        payload.reserveCapacity(11 + min(stored.count, maxLocalCell))
        payload.append(flags)
        Varint.append(stored.count, to: &payload)
        if original > 0 { Varint.append(original, to: &payload) }
        let keyPart = NodeLayout.suffixFieldSize(key.count) + max(0, key.count - 2)
        if keyPart + payload.count - 1 + stored.count <= maxLocalCell {
            payload.append(contentsOf: stored)
        } else {
            payload[0] |= NodeLayout.flagOverflow
            let first = try writeOverflow(stored)
            payload.append(contentsOf: [UInt8(first & 0xFF), UInt8(first >> 8 & 0xFF), UInt8(first >> 16 & 0xFF), UInt8(first >> 24)])
        }
        return payload
    }

    /// A leaf that cannot take a new entry shares with a sibling (the left one, else the right
    /// one): when the two leaves' entries fit in two pages with an eighth of each left free
    /// (``sharingSlack``) they are spread evenly over them; otherwise they become three pages,
    /// each about two-thirds full. (Shared to the brim, two full leaves share again at the next
    /// entry: a run of entries inserted here and there in a packed tree — a batch insert's
    /// foreign keys — then rebuilt two pages per entry.) `node` is the leaf's image
    /// with the new entry. Returns false when it could not (the caller splits the leaf alone).
    private func shareWithSibling(path: [PathEntry], node: NodeImage) throws -> Bool {
        let leaf = path[path.count - 1].page
        let parentEntry = path[path.count - 2]
        let (parentCount, ours) = (try pager.withPage(parentEntry.page) { NodeView(body: $0).count }, parentEntry.index)
        guard parentCount > 0 else { return false }
        let leftIndex = ours > 0 ? ours - 1 : 0
        let (leftPage, rightPage) = try pager.withPage(parentEntry.page) { body in
            let parent = NodeView(body: body)
            return (parent.child(leftIndex), parent.child(leftIndex + 1))
        }
        guard (leftIndex == ours ? leftPage : rightPage) == leaf else {
            throw StoreError.corrupt(page: parentEntry.page, "the path to page \(leaf) does not match its parent", path: pager.path)
        }
        let siblingPage = leftIndex == ours ? rightPage : leftPage
        try checkChild(siblingPage, of: parentEntry.page)
        let sibling = try image(of: siblingPage)
        guard sibling.leaf else {
            throw StoreError.corrupt(page: siblingPage, "leaves are at different depths", path: pager.path)
        }
        var combined = NodeImage(leaf: true, capacity: 4 * usable)
        if leftIndex == ours {
            combined.append(node)
            combined.append(sibling)
        } else {
            combined.append(sibling)
            combined.append(node)
        }
        func separator(_ cut: Int) -> [UInt8] { Self.separator(combined, at: cut) }
        if let cuts = sharingCuts(combined, parts: 2, usable: usable - usable / Self.sharingSlack) {
            let cut = cuts[0]
            guard try replaceSeparator(in: parentEntry.page, at: leftIndex, with: separator(cut), child: leftPage) else { return false }
            try write(combined, 0..<cut, to: leftPage)
            try write(combined, cut..<combined.count, to: rightPage)
            return true
        }
        guard let cuts = sharingCuts(combined, parts: 3, usable: usable) else { return false }
        let (first, second) = (cuts[0], cuts[1])
        let middlePage = try pager.allocatePage()
        try write(combined, 0..<first, to: leftPage)
        try write(combined, first..<second, to: middlePage)
        try write(combined, second..<combined.count, to: rightPage)
        var parent = try image(of: parentEntry.page)
        parent.replace(leftIndex, key: separator(first), child: leftPage)
        parent.insert(key: separator(second), child: middlePage, at: leftIndex + 1)
        if parent.fits(usable: usable) {
            try write(parent, to: parentEntry.page)
        } else {
            try splitUp(path: Array(path.dropLast()), node: parent, appended: false)
        }
        return true
    }

    /// Cuts of the entries of two leaves (one with a new entry) into `parts` evenly filled
    /// leaves: by bytes measured at the entries' common prefix, when every part then fits at its
    /// own prefix; otherwise (keys sharing long prefixes) as evenly as the parts' own sizes let
    /// them. Nil when `parts` leaves of `usable` bytes cannot hold them.
    private func sharingCuts(_ combined: NodeImage, parts: Int, usable: Int) -> [Int]? {
        let prefix = combined.chosenPrefix(0..<combined.count)
        let sizes = (0..<combined.count).map { combined.size($0, prefix: prefix) }
        if let cuts = Self.cuts(sizes, parts: parts, base: 0, usable: .max), combined.partsFit(cuts, usable: usable) {
            return cuts
        }
        guard let cuts = combined.balancedCuts(maximumParts: parts, usable: usable), cuts.count == parts - 1 else { return nil }
        return cuts
    }

    /// Two leaves share into two only when each is then at most this fraction short of full
    /// (1/8: ``shareWithSibling(path:node:)``).
    static let sharingSlack = 8

    /// Replaces the key of interior entry `index` of `page` (keeping its child), in place when
    /// it can, else by rewriting the node. Returns false, changing nothing, when it does not fit.
    func replaceSeparator(in page: PageNumber, at index: Int, with key: [UInt8], child: PageNumber) throws -> Bool {
        let done = try pager.withMutablePage(page) { body -> Bool in
            let writer = NodeWriter(body: body)
            return try key.withUnsafeBytes { key in
                guard writer.view.relation(of: key) == .shares else { return false }
                let old = writer.view.cellSize(at: writer.view.cellOffset(index))
                let new = 4 + NodeLayout.suffixFieldSize(key.count - writer.view.prefixLength) + max(0, key.count - writer.view.prefixLength - 2)
                guard new <= old || writer.view.gap + writer.view.fragmented >= new - old else { return false }
                writer.remove(at: index)
                // Measured to fit: only a node whose header misstates its free space refuses it.
                // The transaction fails and rolls back; the node is not used further.
                guard writer.insertInterior(key: key, child: child, at: index) else {
                    throw StoreError(.corrupt, "an interior node's free space is not what its header says", page: page, path: pager.path)
                }
                return true
            }
        }
        if done { return true }
        var parent = try image(of: page)
        parent.replace(index, key: key, child: child)
        guard parent.fits(usable: usable) else { return false }
        try write(parent, to: page)
        return true
    }

    /// Where to cut entries of the given sizes (slot included) into `parts` runs of about equal
    /// bytes, each fitting a page with `base` bytes of header and prefix; nil when they do not.
    static func cuts(_ sizes: [Int], parts: Int, base: Int, usable: Int) -> [Int]? {
        guard sizes.count >= parts else { return nil }
        // Sums by index, not `reduce`: a debug build calls its generic closure, unspecialised,
        // for every size.
        func sum(_ range: Range<Int>) -> Int {
            var total = 0
            for index in range { total += sizes[index] }
            return total
        }
        let total = sum(0..<sizes.count)
        var cuts: [Int] = []
        var running = 0, index = 0, start = 0
        for part in 1..<parts {
            let target = total * part / parts
            // Take entries while the run stays at or below its share (at least one each).
            while index < sizes.count - (parts - part) && (index == start || running + sizes[index] <= target) {
                running += sizes[index]
                index += 1
            }
            cuts.append(index)
            start = index
        }
        var from = 0
        for cut in cuts + [sizes.count] {
            guard cut > from, base + sum(from..<cut) <= usable else { return nil }
            from = cut
        }
        return cuts
    }

    /// Splits the overfull node `node` at the end of `path` (into two pages, or more when its
    /// parts' prefixes make two too small) and carries the split up the tree.
    private func splitUp(path: [PathEntry], node: NodeImage, appended: Bool) throws {
        pager.appendHint = nil
        var path = path
        var node = node
        var appended = appended
        while true {
            let entry = path.removeLast()
            var page = entry.page
            if page == root {
                // Keep the root where it is: move its content to a new child and grow a level.
                let child = try pager.allocatePage()
                path.append(PathEntry(page: root, index: 0))
                try pager.withMutablePage(root) { body in
                    let writer = NodeWriter(body: body)
                    writer.initialize(leaf: false)
                    writer.setRightChild(child)
                }
                page = child
            }
            let cuts = try splitCuts(node, appended: appended, page: page)
            var pages = [page]
            for _ in cuts { pages.append(try pager.allocatePage()) }
            try write(node, cuts: cuts, to: pages)
            let separators = cuts.map { Self.separator(node, at: $0) }
            guard let pending = try insertSeparators(into: path.last!, pages: pages, separators: separators) else { return }
            (node, appended) = pending
        }
    }

    /// Inserts the separators of a node split into `pages` into the parent reached through
    /// `parent`: (`pages[i]`, `separators[i]`) for each cut, and the pointer that led to
    /// `pages[0]` now leads to the last page. Returns nil when they fitted, else the parent's image
    /// with the new entries inserted (to be split in turn) and whether they went at the end.
    private func insertSeparators(into parent: PathEntry, pages: [PageNumber], separators: [[UInt8]]) throws -> (NodeImage, Bool)? {
        let inPlace = try pager.withMutablePage(parent.page) { body -> Int in
            let writer = NodeWriter(body: body)
            writer.setChild(parent.index, pages[pages.count - 1])
            for (i, separator) in separators.enumerated() {
                let fitted = separator.withUnsafeBytes { key in
                    writer.view.relation(of: key) == .shares && writer.insertInterior(key: key, child: pages[i], at: parent.index + i)
                }
                if !fitted { return i }
            }
            return separators.count
        }
        if inPlace == separators.count { return nil }
        var node = try image(of: parent.page)
        for i in inPlace..<separators.count { node.insert(key: separators[i], child: pages[i], at: parent.index + i) }
        if node.fits(usable: usable) {
            try write(node, to: parent.page)
            return nil
        }
        return (node, parent.index + separators.count == node.count)
    }

    /// Chooses where to split an overfull node `node` (read from `page`). By bytes, evenly —
    /// except when the new entry went to the end (sequential inserts), where the left node is kept
    /// full — when both halves fit their pages at their own prefixes; otherwise into the fewest
    /// parts that fit, as evenly as they can be (``NodeImage/balancedCuts(maximumParts:usable:)``).
    ///
    /// - Throws: `corrupt` when no cuts fit (an entry larger than a page: not from a sound file).
    private func splitCuts(_ node: NodeImage, appended: Bool, page: PageNumber) throws -> [Int] {
        let cut = Self.evenCut(node, appended: appended)
        if node.partsFit([cut], usable: usable) { return [cut] }
        guard let cuts = node.balancedCuts(usable: usable), !cuts.isEmpty else {
            throw StoreError.corrupt(page: page, "a node of \(node.count) entries does not split into pages", path: pager.path)
        }
        return cuts
    }

    /// The cut of a plain split: by bytes measured at the node's prefix, evenly, or (`appended`)
    /// just before the last entry.
    static func evenCut(_ node: NodeImage, appended: Bool) -> Int {
        let count = node.count
        let last = count - (node.leaf ? 1 : 2)
        var cut = last
        if !appended {
            let prefix = node.chosenPrefix(0..<count)
            let sizes = (0..<count).map { node.size($0, prefix: prefix) }
            cut = Self.cuts(sizes, parts: 2, base: 0, usable: .max)?.first ?? 1
        }
        return max(1, min(cut, last))
    }

    /// The separator for the parent of a node cut at `cut`: for a leaf the shortest key between
    /// the entries either side, for an interior node the entry that moves up.
    static func separator(_ node: NodeImage, at cut: Int) -> [UInt8] {
        node.leaf ? shortestSeparator(node.key(cut - 1), node.key(cut)) : node.key(cut)
    }

    /// The shortest key s with left < s ≤ right: a prefix of `right` one byte longer than its
    /// common prefix with `left`. Shorter separators make fuller interior nodes.
    static func shortestSeparator(_ left: [UInt8], _ right: [UInt8]) -> [UInt8] {
        var common = 0
        while common < left.count && common < right.count && left[common] == right[common] { common += 1 }
        return Array(right.prefix(common + 1))
    }
}

extension BTree {
    // MARK: Batch put

    /// Stores each `(key, value)` of `entries`, keys strictly ascending: the entries a leaf
    /// takes are found with one descent and written with one rebuild of the leaf (split into as
    /// many leaves as they need), instead of a descent, and perhaps a share or a split, each.
    /// Entries whose key the tree holds already, and a leaf that is the root, go one at a time
    /// (``put(_:_:)-(Array<UInt8>,_)``).
    ///
    /// - Throws: `invalidArgument` when the keys are not strictly ascending (nothing is written)
    ///   or a key is longer than ``maxKeySize``.
    func put(sortedBatch entries: [(key: [UInt8], value: [UInt8])]) throws {
        // Long: one loop over the batch, a leaf's group at a time: the descent's path, the leaf's
        // image and the position in it carry from entry to entry, and each way out continues the
        // same loop.
        // Every key is checked before anything is written.
        let limit = NodeLayout.maxKeySize(usable: usable)
        for (index, entry) in entries.enumerated() {
            guard entry.key.count <= limit else {
                throw StoreError(.invalidArgument, "a key of \(entry.key.count) bytes is longer than the \(limit) bytes allowed at page size \(pager.pageSize)", path: pager.path)
            }
            guard index == 0 || entries[index - 1].key.lexicographicallyPrecedes(entry.key) else {
                throw StoreError(.invalidArgument, "the keys of a batch put must be strictly ascending (entry \(index) is not after the one before)", path: pager.path)
            }
        }
        pager.appendHint = nil
        var path: [PathEntry] = []
        var next = 0
        while next < entries.count {
            let first = entries[next]
            let (leaf, _, found) = try first.key.withUnsafeBytes { try descend($0, path: &path) }
            // The keys this leaf holds are below the separator that bounds it (nil: no bound).
            let fence = try upperFence(path)
            var end = next + 1
            while end < entries.count, end - next < Self.batchGroupLimit, fence.map({ entries[end].key.lexicographicallyPrecedes($0) }) ?? true {
                end += 1
            }
            // Small values only (inline, uncompressed: making their payloads allocates nothing);
            // a group with another goes one entry at a time.
            let inline = entries[next..<end].allSatisfy { entry in
                entry.value.count < compressionThreshold
                    && NodeLayout.suffixFieldSize(entry.key.count) + max(0, entry.key.count - 2) + Varint.size(entry.value.count) + entry.value.count <= maxLocalCell
            }
            if found || leaf == root || !inline || end - next == 1 {
                try put(first.key, first.value)
                next += 1
                continue
            }
            var node = try image(of: leaf)
            var index = 0
            var replaced = false
            for position in next..<end {
                let (key, value) = entries[position]
                // The entries go in ascending order: each one's place is at or after the last's
                // (the leaf's keys compared in place).
                func order(at index: Int) -> Bool? {
                    node.withEntry(index) { held, _ in held.elementsEqual(key) ? nil : held.lexicographicallyPrecedes(key) }
                }
                while index < node.count, order(at: index) == true { index += 1 }
                if index < node.count, order(at: index) == nil {
                    replaced = true
                    break
                }
                node.insert(key: key, payload: try makeLeafPayload(key: key, value: value), at: index)
                index += 1
            }
            if replaced {
                // A key the leaf holds: the group goes one entry at a time (its payloads, all
                // inline, allocated nothing).
                for position in next..<end { try put(entries[position].key, entries[position].value) }
                next = end
                continue
            }
            if node.fits(usable: usable) {
                try write(node, to: leaf)
            } else {
                let cuts = try splitCuts(forBatch: node, page: leaf)
                var pages = [leaf]
                for _ in cuts { pages.append(try pager.allocatePage()) }
                try write(node, cuts: cuts, to: pages)
                let separators = cuts.map { Self.separator(node, at: $0) }
                if let (parent, appended) = try insertSeparators(into: path[path.count - 2], pages: pages, separators: separators) {
                    try splitUp(path: Array(path.dropLast()), node: parent, appended: appended)
                }
            }
            next = end
        }
    }

    /// The most entries one leaf's group of a batch put takes at once (its image stays a few
    /// pages).
    static let batchGroupLimit = 512

    /// The separator above the leaf at the end of `path` that bounds its keys from above: the
    /// key after the child followed in the nearest ancestor that has one (nil: the leaf is the
    /// right-most).
    private func upperFence(_ path: [PathEntry]) throws -> [UInt8]? {
        var level = path.count - 2
        while level >= 0 {
            let entry = path[level]
            let fence = try pager.withPage(entry.page) { body -> [UInt8]? in
                let node = NodeView(body: body)
                return entry.index < node.count ? node.key(entry.index) : nil
            }
            if let fence { return fence }
            level -= 1
        }
        return nil
    }

    /// Where a leaf overfull with a batch's entries is cut: into parts left a little short of
    /// full (``sharingSlack``), so that the next entries the leaves take do not split them at
    /// once; into the fewest that fit when that cannot be done.
    private func splitCuts(forBatch node: NodeImage, page: PageNumber) throws -> [Int] {
        if let cuts = node.balancedCuts(usable: usable - usable / Self.sharingSlack), !cuts.isEmpty, node.partsFit(cuts, usable: usable) {
            return cuts
        }
        guard let cuts = node.balancedCuts(usable: usable), !cuts.isEmpty else {
            throw StoreError.corrupt(page: page, "a leaf of \(node.count) entries does not split into pages", path: pager.path)
        }
        return cuts
    }
}
