/// What a named tree is for.
public enum TreeKind: UInt8, Sendable, CustomStringConvertible {
    /// Rows keyed by primary key.
    case table = 1
    /// Index entries (their keys carry the indexed values and the primary key).
    case index = 2

    public var description: String { self == .table ? "table" : "index" }
}

/// A catalog entry: a named tree's root and bookkeeping.
public struct TreeDescriptor: Sendable, Equatable {
    /// The tree's name.
    public var name: String
    /// Table or index.
    public var kind: TreeKind
    /// The root page (it never moves while the tree exists).
    public var root: PageNumber
    /// The last value handed out by the tree's sequence (0: none yet).
    public var sequence: UInt64
    /// The first page of the tree's compression dictionary (0: none; see docs/file-format.md,
    /// "Compression dictionaries").
    public var dictionaryPage: PageNumber = 0
    /// The dictionary's length in bytes (0: none).
    public var dictionaryLength: Int = 0
}

/// The catalog: a B+tree (rooted at the header's catalog root) mapping tree names to their
/// descriptors. Value layout: version (1 byte, 2), kind (1 byte), root page (4 bytes), sequence
/// (8 bytes), dictionary page (4 bytes), dictionary length (4 bytes), little-endian.
struct Catalog {
    let pager: Pager

    static let version: UInt8 = 2
    static let entrySize = 22
    /// The longest dictionary a catalog entry may name.
    static let maximumDictionaryLength = 1 << 16
    static let maximumNameLength = 200

    var tree: BTree? {
        let root = pager.catalogRoot
        return root == 0 ? nil : BTree(pager: pager, root: root, compressionThreshold: .max)
    }

    static func encode(_ descriptor: TreeDescriptor) -> [UInt8] {
        var bytes: [UInt8] = [version, descriptor.kind.rawValue]
        withUnsafeBytes(of: descriptor.root.littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: descriptor.sequence.littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: descriptor.dictionaryPage.littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(descriptor.dictionaryLength).littleEndian) { bytes.append(contentsOf: $0) }
        return bytes
    }

    func decode(name: String, _ bytes: [UInt8]) throws -> TreeDescriptor {
        guard bytes.count == Self.entrySize, bytes[0] == Self.version, let kind = TreeKind(rawValue: bytes[1]) else {
            throw StoreError(.corrupt, "the catalog entry of tree \"\(name)\" is malformed", page: pager.catalogRoot, path: pager.path)
        }
        let root = bytes.withUnsafeBytes { $0.loadLE(UInt32.self, at: 2) }
        let sequence = bytes.withUnsafeBytes { $0.loadLE(UInt64.self, at: 6) }
        let dictionaryPage = bytes.withUnsafeBytes { $0.loadLE(UInt32.self, at: 14) }
        let dictionaryLength = Int(bytes.withUnsafeBytes { $0.loadLE(UInt32.self, at: 18) })
        guard root >= 2, root <= pager.pageCount else {
            throw StoreError(.corrupt, "the catalog says tree \"\(name)\" starts at page \(root), outside the file", page: pager.catalogRoot, path: pager.path)
        }
        guard (dictionaryPage == 0) == (dictionaryLength == 0), dictionaryLength <= Self.maximumDictionaryLength,
              dictionaryPage == 0 || (dictionaryPage >= 2 && dictionaryPage <= pager.pageCount) else {
            throw StoreError(.corrupt, "the catalog entry of tree \"\(name)\" names an impossible dictionary (page \(dictionaryPage), \(dictionaryLength) bytes)", page: pager.catalogRoot, path: pager.path)
        }
        return TreeDescriptor(name: name, kind: kind, root: root, sequence: sequence,
                              dictionaryPage: dictionaryPage, dictionaryLength: dictionaryLength)
    }

    func validate(name: String) throws {
        guard !name.isEmpty, name.utf8.count <= Self.maximumNameLength else {
            throw StoreError(.invalidArgument, "a tree name must have 1…\(Self.maximumNameLength) bytes of UTF-8")
        }
    }

    func lookup(_ name: String) throws -> TreeDescriptor? {
        // Read transactions see a catalog that cannot change under them: remember what they
        // looked up, for as long as the file's change counter stays the same.
        let reading = pager.transactionState == .read
        let counter = pager.currentHeader.changeCounter
        if reading, pager.catalogCache.counter == counter, let cached = pager.catalogCache.entries[name] {
            return cached
        }
        guard let tree, let bytes = try tree.get(Array(name.utf8)) else { return nil }
        let descriptor = try decode(name: name, bytes)
        if reading {
            if pager.catalogCache.counter != counter { pager.catalogCache = (counter, [:]) }
            pager.catalogCache.entries[name] = descriptor
        }
        return descriptor
    }

    func all() throws -> [TreeDescriptor] {
        guard let tree else { return [] }
        var cursor = BTreeCursor(tree: tree)
        var result: [TreeDescriptor] = []
        var more = try cursor.first()
        while more {
            let key = try cursor.key()
            guard let name = String(validating: key, as: UTF8.self) else {
                throw StoreError(.corrupt, "the catalog holds a tree name that is not UTF-8", page: pager.catalogRoot, path: pager.path)
            }
            result.append(try decode(name: name, try cursor.value()))
            more = try cursor.next()
        }
        return result
    }

    /// Creates a tree; fails with `invalidArgument` when the name is taken.
    func create(_ name: String, kind: TreeKind) throws -> TreeDescriptor {
        try validate(name: name)
        if try lookup(name) != nil {
            throw StoreError(.invalidArgument, "a tree named \"\(name)\" already exists")
        }
        if pager.catalogRoot == 0 {
            try pager.setCatalogRoot(try BTree.create(in: pager))
        }
        let descriptor = TreeDescriptor(name: name, kind: kind, root: try BTree.create(in: pager), sequence: 0)
        try tree!.put(Array(name.utf8), Self.encode(descriptor))
        return descriptor
    }

    func update(_ descriptor: TreeDescriptor) throws {
        try tree!.put(Array(descriptor.name.utf8), Self.encode(descriptor))
    }

    /// Removes a tree from the catalog (the caller frees its pages).
    func remove(_ name: String) throws {
        guard let tree else { return }
        try tree.delete(Array(name.utf8))
    }
}
