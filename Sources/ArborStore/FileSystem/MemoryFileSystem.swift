import Synchronization

// Safety: Bytes are copied between the caller's buffer and the file's array within both bounds,
// inside `withNode` (the file system's lock), for the call.

/// A file system in memory: files are byte arrays that live as long as the file system, syncs do
/// nothing, locks behave as open-file-description locks between handles.
///
/// The in-memory store of the object graph is the engine over one of these: the same pager,
/// B+tree and journal code as a file on disk, without the disk. Nothing survives the process.
public final class MemoryFileSystem: FileSystem, Sendable {
    struct Node {
        var bytes: [UInt8] = []
        var locks = ByteRangeLocks()
    }

    struct State {
        var nodes: [UInt64: Node] = [:]
        var paths: [String: UInt64] = [:]
        var nextNode: UInt64 = 1
        var nextHandle: UInt64 = 1
    }

    private let state = Mutex(State())
    private let device: UInt64

    private static let devices = Atomic<UInt64>(1)

    /// Creates an empty file system.
    public init() {
        device = Self.devices.add(1, ordering: .relaxed).newValue | (1 << 63)
    }

    /// Opens a file, creating it when the mode allows.
    public func open(_ path: String, mode: FileOpenMode) throws -> any StoreFile {
        try state.withLock { state in
            let node: UInt64
            if let existing = state.paths[path] {
                node = existing
            } else {
                guard mode == .readWriteCreate else {
                    throw StoreError(.notFound, "no such file", path: path)
                }
                node = state.nextNode
                state.nextNode += 1
                state.nodes[node] = Node()
                state.paths[path] = node
            }
            let handle = state.nextHandle
            state.nextHandle += 1
            return MemoryFile(fileSystem: self, path: path, node: node, handle: handle, readOnly: mode == .readOnly,
                              identity: FileIdentity(device: device, inode: node))
        }
    }

    /// Whether a file exists at `path`.
    public func exists(_ path: String) throws -> Bool {
        state.withLock { $0.paths[path] != nil }
    }

    /// Removes a file (its open handles fail from then on).
    public func delete(_ path: String) throws {
        state.withLock { state in
            if let node = state.paths.removeValue(forKey: path) { state.nodes[node] = nil }
        }
    }

    /// Nothing to make durable in memory.
    public func syncDirectory(containing path: String) throws {}

    // MARK: Handle operations

    func withNode<R>(_ node: UInt64, _ path: String, _ body: (inout Node) throws -> R) throws -> R {
        try state.withLock { state in
            guard state.nodes[node] != nil else {
                throw StoreError(.notFound, "the file was deleted", path: path)
            }
            return try body(&state.nodes[node]!)
        }
    }

    func lock(_ file: MemoryFile, _ request: FileLockRequest, offset: Int64, length: Int64) throws -> Bool {
        try withNode(file.node, file.path) { node in node.locks.apply(request, owner: file.handle, offset: offset, length: length) }
    }

    func releaseLocks(_ file: MemoryFile) {
        _ = try? withNode(file.node, file.path) { node in node.locks.release(owner: file.handle) }
    }
}

/// A handle on a file of a ``MemoryFileSystem``.
final class MemoryFile: StoreFile {
    let fileSystem: MemoryFileSystem
    let path: String
    let node: UInt64
    let handle: UInt64
    let readOnly: Bool
    let identity: FileIdentity

    init(fileSystem: MemoryFileSystem, path: String, node: UInt64, handle: UInt64, readOnly: Bool, identity: FileIdentity) {
        self.fileSystem = fileSystem
        self.path = path
        self.node = node
        self.handle = handle
        self.readOnly = readOnly
        self.identity = identity
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        try fileSystem.withNode(node, path) { node in
            guard offset < Int64(node.bytes.count) else { return 0 }
            let count = min(buffer.count, node.bytes.count - Int(offset))
            node.bytes.withUnsafeBytes { source in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[Int(offset)..<(Int(offset) + count)]))
            }
            return count
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        guard !readOnly else { throw StoreError(.readOnly, "the file was opened read-only", path: path) }
        try fileSystem.withNode(node, path) { node in
            let end = Int(offset) + bytes.count
            if node.bytes.count < end { node.bytes.append(contentsOf: repeatElement(0, count: end - node.bytes.count)) }
            node.bytes.withUnsafeMutableBytes { target in
                UnsafeMutableRawBufferPointer(rebasing: target[Int(offset)..<end]).copyMemory(from: bytes)
            }
        }
    }

    func sync() throws {}

    func truncate(to size: Int64) throws {
        try fileSystem.withNode(node, path) { node in
            let size = Int(size)
            if node.bytes.count > size {
                node.bytes.removeSubrange(size...)
            } else {
                node.bytes.append(contentsOf: repeatElement(0, count: size - node.bytes.count))
            }
        }
    }

    func size() throws -> Int64 {
        try fileSystem.withNode(node, path) { Int64($0.bytes.count) }
    }

    func lock(_ request: FileLockRequest, offset: Int64, length: Int64) throws -> Bool {
        try fileSystem.lock(self, request, offset: offset, length: length)
    }

    func close() {
        fileSystem.releaseLocks(self)
    }
}
