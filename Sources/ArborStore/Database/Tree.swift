// Safety: A tree and its cursors belong to one transaction, used on its thread, so their unchecked
// fields are never accessed from two places at once; lent keys and values are valid only in the
// closure they are passed to, and the scan's key buffer is allocated and freed (`defer`) around the
// scan.

/// A named, ordered map from byte keys to byte values, inside a transaction.
///
/// Keys compare as bytes (`memcmp`); build typed, composite keys with ``KeyEncoding``. Keys may be
/// up to ``maximumKeySize`` bytes; values up to 4 GiB − 1 (large ones go to overflow pages,
/// compressible ones are stored LZ4-compressed).
public final class Tree {
    let transaction: ReadTransaction
    /// The tree's catalog entry as of when it was opened.
    @exclusivity(unchecked) public private(set) var descriptor: TreeDescriptor

    /// The B+tree (its root never moves, so it is made once — again only when the tree gets
    /// its compression dictionary).
    @exclusivity(unchecked) private(set) var btree: BTree

    init(transaction: ReadTransaction, descriptor: TreeDescriptor) {
        self.transaction = transaction
        self.descriptor = descriptor
        btree = BTree(pager: transaction.pager, descriptor: descriptor, compressionThreshold: transaction.compressionThreshold)
    }

    /// The tree's name.
    public var name: String { descriptor.name }

    /// The longest key accepted at this file's page size.
    public var maximumKeySize: Int { NodeLayout.maxKeySize(usable: transaction.pager.usableSize) }

    func checkWritable() throws {
        try transaction.checkOpen()
        try transaction.checkNoScan()
        guard transaction.isWritable else {
            throw StoreError(.misuse, "tree \"\(name)\" was opened in a read transaction; change it inside `write`")
        }
    }

    /// The value stored under `key`, or nil.
    ///
    /// - Complexity: O(log n) page visits.
    public func get(_ key: [UInt8]) throws -> [UInt8]? {
        try transaction.checkOpen()
        return try btree.get(key)
    }

    /// Calls `body` with the value stored under `key`, read in place when it is stored inline
    /// (no copy), and returns what `body` returns; nil when the key is absent.
    ///
    /// The buffer is valid only during the call. Trees cannot change while `body` runs: puts,
    /// deletes, sequences, creating and dropping trees fail with `misuse` until it returns.
    ///
    /// - Complexity: O(log n) page visits.
    @inlinable
    public func withValue<R>(forKey key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        // Generic only here, inlined into the caller: the reading itself is not generic code.
        var result: R?
        guard try visitValue(forKey: key, { result = try body($0) }) else { return nil }
        return result
    }

    /// Calls `body` with the value stored under `key` (see ``withValue(forKey:_:)``); returns
    /// whether the key was there.
    @usableFromInline
    func visitValue(forKey key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool {
        try transaction.checkOpen()
        transaction.activeScans += 1
        defer { transaction.activeScans -= 1 }
        return try btree.visitValue(key, body)
    }

    /// Calls `body` with each key's position in `keys` and its value (read in place, as
    /// ``withValue(forKey:_:)``), or nil for a key the tree does not hold, in the order of
    /// `keys`.
    ///
    /// Answers what `keys.count` calls of ``withValue(forKey:_:)`` would, faster on random keys:
    /// the keys are looked up a few at a time, each phase of the lookup run over the group, so
    /// that their waits on memory overlap (docs/architecture.md, "Batched lookups"). Buffers are
    /// valid only during their call; trees cannot change until the whole batch returns.
    ///
    /// - Complexity: O(k log n) page visits for k keys.
    public func visitValues(forKeys keys: KeyBatch, _ body: (Int, UnsafeRawBufferPointer?) throws -> Void) throws {
        try transaction.checkOpen()
        transaction.activeScans += 1
        defer { transaction.activeScans -= 1 }
        try btree.visitValues(keys, body)
    }

    /// Stores `value` under `key`, replacing any value there.
    ///
    /// - Throws: `invalidArgument` for a key longer than ``maximumKeySize``; `misuse` in a read
    ///   transaction.
    public func put(_ key: [UInt8], _ value: [UInt8]) throws {
        try checkWritable()
        try transaction.changing {
            if value.count >= transaction.compressionThreshold && btree.dictionaryPage == 0 && transaction.dictionarySize > 0 {
                try sampleForDictionary(value)
            }
            try btree.put(key, value)
        }
        transaction.generation &+= 1
    }

    /// Collects `value` towards the tree's compression dictionary, and makes the dictionary once
    /// the transaction has collected enough (docs/file-format.md, "Compression dictionaries").
    private func sampleForDictionary(_ value: [UInt8]) throws {
        let pager = transaction.pager
        let root = descriptor.root
        if let made = pager.newDictionaries[root] {
            // Another handle of this transaction made it.
            btree = BTree(pager: pager, root: root, compressionThreshold: transaction.compressionThreshold,
                          dictionaryPage: made.page, dictionaryLength: made.length)
            return
        }
        let size = transaction.dictionarySize
        pager.dictionarySamples[root, default: []].append(contentsOf: value.prefix(size - (pager.dictionarySamples[root]?.count ?? 0)))
        guard let samples = pager.dictionarySamples[root], samples.count >= size else { return }
        pager.dictionarySamples[root] = nil
        let page = try btree.writeOverflow(samples)
        guard var current = try transaction.catalog.lookup(name) else {
            throw StoreError(.misuse, "tree \"\(name)\" was dropped")
        }
        current.dictionaryPage = page
        current.dictionaryLength = samples.count
        try transaction.catalog.update(current)
        descriptor = current
        pager.newDictionaries[root] = (page, samples.count)
        btree = BTree(pager: pager, descriptor: current, compressionThreshold: transaction.compressionThreshold)
    }

    /// Removes `key`; returns whether it was there.
    @discardableResult
    public func delete(_ key: [UInt8]) throws -> Bool {
        try checkWritable()
        let removed = try transaction.changing { try btree.delete(key) }
        if removed { transaction.generation &+= 1 }
        return removed
    }

    /// Stores each `(key, value)` of `entries`, whose keys are strictly ascending (any values
    /// there replaced). The entries one leaf takes cost one descent and one rebuild of the leaf
    /// — split into as many leaves as they need, each left a little short of full — instead of
    /// a descent, and perhaps a share or a split, each: putting many keys spread over a large
    /// tree (a batch insert's index entries, sorted) reads and rewrites each leaf once.
    ///
    /// - Throws: `invalidArgument` when the keys are not strictly ascending (nothing is
    ///   written) or a key is longer than ``maximumKeySize``; `misuse` in a read transaction.
    public func put(batch entries: [(key: [UInt8], value: [UInt8])]) throws {
        try checkWritable()
        guard !entries.isEmpty else { return }
        try transaction.changing { try btree.put(sortedBatch: entries) }
        transaction.generation &+= 1
    }

    /// Removes `keys` (those absent are skipped, a key listed twice is removed once); returns how
    /// many were there. Keys in ascending order cost one descent per leaf they fall in instead of
    /// one per key, each leaf written and rebalanced once: deleting many keys spread over a large
    /// tree (a cascade's rows and index entries) reads and spills each leaf once. Any order is
    /// correct.
    @discardableResult
    public func delete(batch keys: [[UInt8]]) throws -> Int {
        try checkWritable()
        guard !keys.isEmpty else { return 0 }
        let removed = try transaction.changing { try btree.delete(batch: keys) }
        if removed > 0 { transaction.generation &+= 1 }
        return removed
    }

    /// A cursor over the tree, not yet positioned.
    public func makeCursor() throws -> Cursor {
        try transaction.checkOpen()
        return Cursor(tree: self)
    }

    /// Visits the entries in key order, from the first key ≥ `start` (or the first key), passing
    /// each key and value as bytes read in place — the fastest way through a tree: no copies, a
    /// few page-cache lookups per leaf (the leaf, its parent for the next leaf's prefetch). Return
    /// `false` from `body` to stop.
    ///
    /// The buffers are valid only during the call. Trees cannot change while `body` runs: puts,
    /// deletes, sequences, creating and dropping trees fail with `misuse` until it returns.
    ///
    /// - Complexity: O(log n + entries visited).
    public func forEach(from start: [UInt8]? = nil,
                        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool) throws {
        try forEach(from: start, prefilter: nil, selecting: { _ in true }, body)
    }

    /// Visits the entries in key order, as ``forEach(from:_:)`` does, calling `body` only for
    /// those whose value passes `prefilter` (tests run inside the leaf loop, with no call) and
    /// then `select`: a scan that turns most entries down on their values alone (a filter on a
    /// table's rows) spares assembling their keys and a call per entry.
    ///
    /// The buffers are valid only during each call, and trees cannot change meanwhile.
    ///
    /// - Complexity: O(log n + entries visited).
    public func forEach(from start: [UInt8]? = nil,
                        prefilter: ValuePrefilter? = nil,
                        selecting select: (_ value: UnsafeRawBufferPointer) throws -> Bool,
                        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool) throws {
        try transaction.checkOpen()
        transaction.activeScans += 1
        defer { transaction.activeScans -= 1 }
        var cursor = BTreeCursor(tree: btree)
        var valid = try start.map { try cursor.seek($0) } ?? cursor.first()
        let keyBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: NodeLayout.maxKeySize(usable: btree.usable), alignment: 1)
        defer { keyBuffer.deallocate() }
        let compiled = prefilter.map(CompiledPrefilter.init)
        /// Visits up to `leaves` leaves (all: nil); returns whether the scan ended.
        func visit(_ leaves: Int?) throws -> Bool {
            var visited = 0
            while valid {
                if let leaves, visited == leaves { return false }
                cursor.prefetchNextLeaf()
                if try cursor.forEachInLeaf(keyBuffer: keyBuffer, prefilter: compiled, select: select, body) { return true }
                valid = try cursor.nextLeaf()
                visited += 1
            }
            return true
        }
        // A scan that goes on through a tree larger than half the cache is read through the
        // cache's scan ring (its pages do not evict the cache); a smaller tree is cached as any
        // page is, so the next scan finds it there (docs/architecture.md, "Page cache"). The
        // first leaves are read as any page is, before the tree's size is asked: most scans
        // (a prefix, a range of a few entries) end there, and counting a large tree's pages
        // would read all its interior nodes for each of them.
        let cache = transaction.pager.cache
        if cache.scanning {
            _ = try visit(nil)
            return
        }
        if try visit(Self.leavesBeforeScanRing) { return }
        let limit = cache.capacity / 2
        let large = try btree.pageCount(limit: limit) > limit
        try cache.scanning(large) { _ = try visit(nil) }
    }

    /// The leaves a scan reads as any page is before it asks whether the tree is large enough
    /// for the scan ring.
    static let leavesBeforeScanRing = 8

    /// The last sequence number the tree handed out (0: none yet): ``nextSequence()`` hands out
    /// the one after it.
    public var sequence: UInt64 { descriptor.sequence }

    /// Hands out the tree's next sequence number (1, 2, 3, …), durable with the transaction: the
    /// primary-key allocator of tables.
    public func nextSequence() throws -> UInt64 {
        try nextSequence(reserving: 1).lowerBound
    }

    /// Hands out `count` consecutive sequence numbers at once (one catalog update), durable with
    /// the transaction.
    ///
    /// - Throws: `invalidArgument` when `count` is not positive; `corrupt` when the stored
    ///   sequence leaves no room for `count` more.
    public func nextSequence(reserving count: Int) throws -> ClosedRange<UInt64> {
        guard count > 0 else {
            throw StoreError(.invalidArgument, "cannot reserve \(count) sequence numbers of tree \"\(name)\"; reserve at least one")
        }
        try checkWritable()
        guard var current = try transaction.catalog.lookup(name) else {
            throw StoreError(.misuse, "tree \"\(name)\" was dropped")
        }
        // The sequence is read from the file: a value that leaves no room is an error, not a trap.
        guard current.sequence <= UInt64.max - UInt64(count) else {
            throw StoreError(.corrupt, "tree \"\(name)\" has sequence number \(current.sequence) in its catalog entry: no \(count) more fit")
        }
        let first = current.sequence + 1
        current.sequence += UInt64(count)
        try transaction.changing { try transaction.catalog.update(current) }
        descriptor = current
        transaction.generation &+= 1
        return first...current.sequence
    }

    /// Counts the entries and pages of the tree by walking it.
    ///
    /// - Complexity: O(pages).
    public func statistics() throws -> TreeStatistics {
        try transaction.checkOpen()
        var problems: [IntegrityProblem] = []
        var statistics = TreeStatistics()
        var usage = PageUsage(pageCount: transaction.pager.pageCount)
        IntegrityChecker(pager: transaction.pager)
            .walk(btree, name: "tree \"\(name)\"", usage: &usage, statistics: &statistics, problems: &problems, verifyValues: false)
        if let problem = problems.first {
            throw StoreError(.corrupt, problem.description, page: problem.page, path: transaction.pager.path)
        }
        if btree.dictionaryLength > 0 {
            statistics.dictionaryPages = (btree.dictionaryLength + btree.overflowPayload - 1) / btree.overflowPayload
        }
        return statistics
    }
}

/// Sizes of a tree, from ``Tree/statistics()``.
public struct TreeStatistics: Sendable, Equatable {
    /// Key-value entries.
    public var entries = 0
    /// Levels, leaves included (1 for a tree that is a single leaf).
    public var depth = 0
    /// Leaf pages.
    public var leafPages = 0
    /// Interior pages.
    public var interiorPages = 0
    /// Overflow pages holding large values.
    public var overflowPages = 0
    /// Values stored LZ4-compressed.
    public var compressedValues = 0
    /// Pages holding the tree's compression dictionary.
    public var dictionaryPages = 0
    /// Bytes in use in the tree's leaf and interior pages (headers, offsets, cells).
    public var usedBytes = 0
    /// Bytes available in the tree's leaf and interior pages.
    public var capacityBytes = 0

    /// Creates zeroed statistics.
    public init() {}

    /// All pages of the tree.
    public var pages: Int { leafPages + interiorPages + overflowPages + dictionaryPages }

    /// How full the tree's nodes are, 0…1.
    public var fillFactor: Double { capacityBytes == 0 ? 0 : Double(usedBytes) / Double(capacityBytes) }
}

/// A position in a tree, moving in key order.
///
/// Positioning calls return whether the cursor is now on an entry. A cursor stays usable while
/// its transaction lasts, even when the tree changes under it: it then continues from the key it
/// was on (or, if that key was deleted, from where it would have been).
public final class Cursor {
    let tree: Tree
    @exclusivity(unchecked) private var core: BTreeCursor
    @exclusivity(unchecked) private var generation: UInt64
    @exclusivity(unchecked) private var currentKey: [UInt8]?

    init(tree: Tree) {
        self.tree = tree
        core = BTreeCursor(tree: tree.btree)
        generation = tree.transaction.generation
    }

    /// Whether the cursor is on an entry.
    public var isValid: Bool { currentKey != nil }

    /// The key the cursor is on.
    public var key: [UInt8]? { currentKey }

    /// The value of the entry the cursor is on.
    public func value() throws -> [UInt8]? {
        guard let currentKey else { return nil }
        try tree.transaction.checkOpen()
        if try refreshIfChanged() {
            return try core.isValid && core.key() == currentKey ? core.value() : tree.get(currentKey)
        }
        return try core.value()
    }

    private func settle(_ moved: Bool) throws -> Bool {
        currentKey = moved ? try core.key() : nil
        generation = tree.transaction.generation
        return moved
    }

    /// Re-seeks after a change to the tree; returns whether it had to.
    private func refreshIfChanged() throws -> Bool {
        guard generation != tree.transaction.generation else { return false }
        core = BTreeCursor(tree: tree.btree)
        if let currentKey { _ = try core.seek(currentKey) }
        generation = tree.transaction.generation
        return true
    }

    /// Moves to the smallest key.
    @discardableResult
    public func first() throws -> Bool {
        try tree.transaction.checkOpen()
        core = BTreeCursor(tree: tree.btree)
        return try settle(core.first())
    }

    /// Moves to the largest key.
    @discardableResult
    public func last() throws -> Bool {
        try tree.transaction.checkOpen()
        core = BTreeCursor(tree: tree.btree)
        return try settle(core.last())
    }

    /// Moves to the first key greater than or equal to `key`.
    @discardableResult
    public func seek(_ key: [UInt8]) throws -> Bool {
        try tree.transaction.checkOpen()
        core = BTreeCursor(tree: tree.btree)
        return try settle(core.seek(key))
    }

    /// Moves to the next key.
    @discardableResult
    public func next() throws -> Bool {
        try tree.transaction.checkOpen()
        guard let currentKey else { return false }
        if try refreshIfChanged() {
            guard core.isValid else { return try settle(false) }
            // On the old key: step past it. On a greater key (the old one was deleted): stay.
            if try core.key() != currentKey { return try settle(true) }
        }
        return try settle(core.next())
    }

    /// Moves to the previous key.
    @discardableResult
    public func previous() throws -> Bool {
        try tree.transaction.checkOpen()
        guard currentKey != nil else { return false }
        if try refreshIfChanged() {
            // Seek landed on the first key ≥ the old one (or nowhere): the previous key is before it.
            if !core.isValid { return try settle(core.last()) }
        }
        return try settle(core.previous())
    }
}
