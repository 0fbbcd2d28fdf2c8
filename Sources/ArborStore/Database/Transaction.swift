// Safety: A transaction's unchecked state is used only inside the closure of `read` or `write`, on
// the thread running it; `rewriteValues` lends slices of its own arrays to `put` for the call.

/// A read transaction: a consistent view of the database as committed when it began.
///
/// Valid only inside the closure given to ``Database/read(_:)``; calls after it fail with
/// `misuse`.
public class ReadTransaction {
    let pager: Pager
    /// `options.compressionThreshold`, read once (trees read it on every put). (The options
    /// themselves are not kept: copying them — a logger, a file system, a metrics factory —
    /// counted references on every transaction.)
    let compressionThreshold: Int
    /// `options.compressionDictionarySize`, likewise.
    let dictionarySize: Int
    /// Whether this is a ``WriteTransaction`` (without a dynamic cast on every change).
    let isWritable: Bool
    @exclusivity(unchecked) var isOpen = true
    /// Bumped by every change in a write transaction: cursors re-seek when it moves.
    @exclusivity(unchecked) var generation: UInt64 = 0
    /// `Tree.forEach` calls running: changes are refused while one reads pages in place.
    @exclusivity(unchecked) var activeScans = 0
    /// The first error out of a change that may have been left half made (a split interrupted by
    /// `busy` or a full disk): the transaction can then only roll back, whatever its closure
    /// does with the error (``Database/write(_:)`` throws it again instead of committing).
    var failure: (any Error)?

    /// Runs a change of the file. An error out of it leaves the transaction unable to commit,
    /// unless it is one thrown before anything changed (a bad argument, a misuse).
    func changing<R>(_ body: () throws -> R) throws -> R {
        do {
            return try body()
        } catch {
            let beforeAnyChange = (error as? StoreError).map { $0.code == .invalidArgument || $0.code == .misuse } ?? false
            if failure == nil && !beforeAnyChange { failure = error }
            throw error
        }
    }

    init(pager: Pager, options: DatabaseOptions, writable: Bool = false) {
        self.pager = pager
        compressionThreshold = options.compressionThreshold
        dictionarySize = min(max(options.compressionDictionarySize, 0), Catalog.maximumDictionaryLength)
        isWritable = writable
    }

    func checkOpen() throws {
        guard isOpen else {
            throw StoreError(.misuse, "the transaction has ended; use trees and cursors only inside its closure")
        }
    }

    /// Refuses changes while a `forEach` reads pages in place.
    func checkNoScan() throws {
        guard activeScans == 0 else {
            throw StoreError(.misuse, "trees cannot change inside Tree.forEach; collect the keys first, or walk with a Cursor")
        }
    }

    var catalog: Catalog { Catalog(pager: pager) }

    /// The tree named `name`, or nil when there is none.
    public func tree(named name: String) throws -> Tree? {
        try checkOpen()
        guard let descriptor = try catalog.lookup(name) else { return nil }
        return Tree(transaction: self, descriptor: descriptor)
    }

    /// Every tree's descriptor, by name.
    public func trees() throws -> [TreeDescriptor] {
        try checkOpen()
        return try catalog.all()
    }

    /// The freelist's trunk and leaf pages, with any problem found walking it.
    public func freelist() throws -> (layout: FreelistLayout, problems: [IntegrityProblem]) {
        try checkOpen()
        var problems: [IntegrityProblem] = []
        let layout = try pager.freelist(problems: &problems)
        return (layout, problems)
    }

    /// The file's header as this transaction sees it.
    public var header: DatabaseHeader { pager.currentHeader }

    /// The page cache's counters of this transaction's connection.
    public var cacheStatistics: PageCacheStatistics { pager.cacheStatistics }
}

/// A write transaction: everything it does becomes durable together when its closure returns, or
/// not at all.
public final class WriteTransaction: ReadTransaction {
    /// The tree named `name`; with `create`, made (as a table) when missing.
    public func tree(named name: String, create: Bool) throws -> Tree? {
        if let existing = try tree(named: name) { return existing }
        guard create else { return nil }
        return try createTree(named: name)
    }

    /// Creates a tree.
    ///
    /// - Throws: `invalidArgument` when the name is taken or empty or longer than 200 bytes.
    @discardableResult
    public func createTree(named name: String, kind: TreeKind = .table) throws -> Tree {
        try checkOpen()
        try checkNoScan()
        let descriptor = try changing { try catalog.create(name, kind: kind) }
        generation &+= 1
        return Tree(transaction: self, descriptor: descriptor)
    }

    /// Drops a tree and returns its pages to the freelist; returns whether it existed.
    @discardableResult
    public func dropTree(named name: String) throws -> Bool {
        try checkOpen()
        try checkNoScan()
        guard let descriptor = try catalog.lookup(name) else { return false }
        try changing {
            let tree = BTree(pager: pager, descriptor: descriptor, compressionThreshold: compressionThreshold)
            try tree.destroy()
            if descriptor.dictionaryPage != 0 {
                try tree.freeOverflow(first: descriptor.dictionaryPage, length: descriptor.dictionaryLength)
                pager.dictionaries[descriptor.dictionaryPage] = nil
            }
            pager.newDictionaries[descriptor.root] = nil
            pager.dictionarySamples[descriptor.root] = nil
            try catalog.remove(name)
        }
        generation &+= 1
        return true
    }

    /// Renames a tree: its pages, entries, sequence and compression dictionary stay as they are
    /// (one catalog entry is moved). A ``Tree`` obtained under the old name must not be used
    /// afterwards; ask for the tree by its new name.
    ///
    /// - Throws: `invalidArgument` when no tree is named `name`, or `newName` is taken, empty or
    ///   longer than 200 bytes.
    public func renameTree(named name: String, to newName: String) throws {
        try checkOpen()
        try checkNoScan()
        guard newName != name else { return }
        try catalog.validate(name: newName)
        guard var descriptor = try catalog.lookup(name) else {
            throw StoreError(.invalidArgument, "there is no tree named \"\(name)\" to rename")
        }
        guard try catalog.lookup(newName) == nil else {
            throw StoreError(.invalidArgument, "a tree named \"\(newName)\" already exists")
        }
        try changing {
            try catalog.remove(name)
            descriptor.name = newName
            try catalog.update(descriptor)
        }
        generation &+= 1
    }

    /// Makes a tree named `name` (default: `source`'s name) holding a copy of `source` — a tree of
    /// this or another database, in any transaction — with its kind and sequence: the entries are
    /// inserted in key order, so the copy's pages are filled densely whatever the source's fill.
    /// What a whole-store replacement is built from (a staged migration copies its result into
    /// the original file this way, in one transaction).
    ///
    /// - Throws: `invalidArgument` when the name is taken or invalid; the source's read errors.
    @discardableResult
    public func copyTree(_ source: Tree, named name: String? = nil) throws -> Tree {
        let name = name ?? source.name
        guard try catalog.lookup(name) == nil else {
            throw StoreError(.invalidArgument, "a tree named \"\(name)\" already exists")
        }
        let copy = try createTree(named: name, kind: source.descriptor.kind)
        let sequence = try source.transaction.catalog.lookup(source.name)?.sequence ?? source.descriptor.sequence
        if sequence > 0 { _ = try copy.nextSequence(reserving: Int(clamping: sequence)) }
        // The source is read a batch at a time (when both are one transaction's trees, it cannot
        // be written while it is scanned).
        var start: [UInt8]? = nil
        while true {
            var batch: [([UInt8], [UInt8])] = []
            try source.forEach(from: start) { key, value in
                batch.append((Array(key), Array(value)))
                return batch.count < 1024
            }
            for (key, value) in batch { try copy.put(key, value) }
            guard batch.count == 1024, var next = batch.last?.0 else { return copy }
            next.append(0)
            start = next
        }
    }

    /// Copies every tree of `source` (a transaction of another database) into this one, as
    /// ``copyTree(_:named:)`` does each: a database's whole contents, densely packed.
    ///
    /// - Throws: `invalidArgument` when this database has a tree of the same name.
    public func copyTrees(of source: ReadTransaction) throws {
        for descriptor in try source.trees() {
            guard let tree = try source.tree(named: descriptor.name) else { continue }
            try copyTree(tree)
        }
    }

    /// Rewrites the value of every entry of `tree` into fresh pages and returns the tree under
    /// its name, whose old pages are freed: `transform` sees each entry in key order (key and
    /// value read in place, valid only during the call) and appends the entry's new value to
    /// `output`. Keys, the sequence and the compression dictionary stay.
    ///
    /// Cheaper than a `put` per entry for a whole tree: the new pages are filled densely in key
    /// order with no descent, and, when the file grows to hold them, need no journal records (a
    /// rollback truncates them away); only the pages that list the freed ones are journaled. The
    /// file holds both trees until the transaction commits, so it grows by the tree's size
    /// (the old pages are on the freelist afterwards). What a migration that rewrites every row
    /// uses. `tree` must not be used afterwards; use the tree returned.
    ///
    /// - Throws: `misuse` when the tree was dropped or a scan is running; what `transform`
    ///   throws (the transaction can then only roll back); the engine's read and write errors.
    @discardableResult
    public func rewriteValues(of tree: Tree,
                              _ transform: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, _ output: inout [UInt8]) throws -> Void) throws -> Tree {
        try checkOpen()
        try checkNoScan()
        guard tree.transaction === self, var descriptor = try catalog.lookup(tree.name), descriptor.root == tree.descriptor.root else {
            throw StoreError(.misuse, "tree \"\(tree.name)\" is not a live tree of this transaction; ask for it by name")
        }
        let target = BTree(pager: pager, root: try changing { try BTree.create(in: pager) }, compressionThreshold: compressionThreshold,
                           dictionaryPage: descriptor.dictionaryPage, dictionaryLength: descriptor.dictionaryLength)
        // A batch of entries is read (keys and new values packed in two buffers), then written:
        // no tree may change while one is scanned.
        let batchSize = 2048
        var keys: [UInt8] = [], values: [UInt8] = [], ends: [(key: Int, value: Int)] = []
        var start: [UInt8]? = nil
        while true {
            keys.removeAll(keepingCapacity: true)
            values.removeAll(keepingCapacity: true)
            ends.removeAll(keepingCapacity: true)
            do {
                try tree.forEach(from: start) { key, value in
                    keys.append(contentsOf: key)
                    try transform(key, value, &values)
                    ends.append((keys.count, values.count))
                    return ends.count < batchSize
                }
            } catch {
                if failure == nil { failure = error }
                throw error
            }
            try changing {
                try keys.withUnsafeBytes { keys in
                    try values.withUnsafeBytes { values in
                        var previous = (key: 0, value: 0)
                        for end in ends {
                            try target.put(UnsafeRawBufferPointer(rebasing: keys[previous.key..<end.key]),
                                           UnsafeRawBufferPointer(rebasing: values[previous.value..<end.value]))
                            previous = end
                        }
                    }
                }
            }
            guard ends.count == batchSize else { break }
            start = Array(keys[(ends[ends.count - 2].key)...]) + [0]
        }
        try changing {
            try BTree(pager: pager, descriptor: descriptor, compressionThreshold: compressionThreshold).destroy()
            descriptor.root = target.root
            try catalog.update(descriptor)
        }
        generation &+= 1
        return Tree(transaction: self, descriptor: descriptor)
    }

    /// Sets the application's version number in the header.
    public func setUserVersion(_ version: UInt32) throws {
        try checkOpen()
        try changing { try pager.setUserVersion(version) }
    }
}
