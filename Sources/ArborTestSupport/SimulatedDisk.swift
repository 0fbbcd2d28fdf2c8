import ArborStore
import Synchronization
import SystemPackage

// Safety: Bytes are copied between the caller's buffer and the simulated file's array within both
// bounds, inside `withNode` (the disk's lock), for the call.

/// A file system in memory that models what a real disk does on power loss, and fails on demand.
///
/// Every file keeps its *durable* bytes apart from the writes made since its last sync. A power cut
/// (``powerCut(_:)``) decides the fate of each unsynced write independently: applied fully, dropped,
/// or torn at sector granularity (some of its 512-byte sectors reach the platter, others do not);
/// a sector itself is never half-written. An unsynced truncation (shrinking or extending) happens
/// or not, independently of the writes around it and never to a length in between (`random` and
/// `tearAll` toss a coin for each; `applyAll` and `dropAll` keep or lose all). File creations and
/// deletions are durable only after the directory is synced. After a cut, every handle opened before it is dead (each call fails), as
/// the process that held it would be.
///
/// Faults: ``inject(_:atOperation:persistent:)`` fails the Nth I/O operation from now (open, read,
/// write, sync, truncate, size, delete, directory sync) with EIO, ENOSPC, a short write, or a power
/// cut, once or on every operation from then on.
///
/// Randomness is seeded: the same seed and the same calls give the same disk.
public final class SimulatedDisk: FileSystem, Sendable {
    /// The sector size: the unit a write can be torn at.
    public static let sectorSize = 512

    /// What a power cut does to the writes that were not yet synced.
    public enum PowerCutDamage: Sendable, Hashable, CustomStringConvertible {
        /// Every unsynced write and directory change reaches the disk.
        case applyAll
        /// None does.
        case dropAll
        /// Each independently: applied, dropped, or torn at sector granularity.
        case random(seed: UInt64)
        /// Every write is torn: each of its sectors independently reaches the disk or not.
        case tearAll(seed: UInt64)

        public var description: String {
            switch self {
            case .applyAll: "apply-all"
            case .dropAll: "drop-all"
            case .random(let seed): "random(\(seed))"
            case .tearAll(let seed): "tear-all(\(seed))"
            }
        }
    }

    /// An injected failure.
    public enum Fault: Sendable, Hashable, CustomStringConvertible {
        /// The operation fails with EIO.
        case ioError
        /// The operation fails with ENOSPC.
        case diskFull
        /// A write stores only its first half, then fails with ENOSPC; other operations fail with EIO.
        case shortWrite
        /// Power is lost instead of the operation, with the given damage.
        case powerCut(PowerCutDamage)

        public var description: String {
            switch self {
            case .ioError: "EIO"
            case .diskFull: "ENOSPC"
            case .shortWrite: "short write"
            case .powerCut(let damage): "power cut (\(damage))"
            }
        }
    }

    enum Pending {
        case write(offset: Int, bytes: [UInt8])
        case truncate(size: Int)
    }

    struct Node {
        var durable: [UInt8] = []
        var current: [UInt8] = []
        var pending: [Pending] = []
    }

    /// The whole disk: a value, so tests can snapshot and restore it.
    public struct Image: Sendable {
        var nodes: [UInt64: Node] = [:]
        var names: [String: UInt64] = [:]
        var durableNames: [String: UInt64] = [:]
        var nextNode: UInt64 = 1
    }

    struct State {
        var image = Image()
        var locks: [UInt64: ByteRangeLocks] = [:]
        var generation: UInt64 = 0
        var nextHandle: UInt64 = 1
        var operations = 0
        var fault: (kind: Fault, at: Int, persistent: Bool)?
        var trace: [String]? = nil
    }

    private let state = Mutex(State())
    private let identityDevice: UInt64

    /// Creates an empty disk.
    public init() {
        var generator = SystemRandomNumberGenerator()
        identityDevice = generator.next()
    }

    // MARK: Test controls

    /// The number of I/O operations performed so far.
    public var operationCount: Int { state.withLock { $0.operations } }

    /// Fails the `n`th I/O operation from now (1 = the next one) with `fault`; with `persistent`,
    /// every later operation fails too (a power cut happens once: later operations on old handles
    /// fail anyway).
    public func inject(_ fault: Fault, atOperation n: Int, persistent: Bool = false) {
        precondition(n >= 1)
        state.withLock { $0.fault = (fault, $0.operations + n, persistent) }
    }

    /// Removes any injected fault.
    public func clearFaults() {
        state.withLock { $0.fault = nil }
    }

    /// Starts recording a line per operation (for failure messages); returns what was recorded.
    public func startTrace() { state.withLock { $0.trace = [] } }

    /// The operations recorded since ``startTrace()``.
    public var trace: [String] { state.withLock { $0.trace ?? [] } }

    /// Stops recording operations (and drops what was recorded).
    public func stopTrace() { state.withLock { $0.trace = nil } }

    /// Whether an injected fault has yet to happen: false once a one-time fault (a power cut, say)
    /// has struck, or when none was injected.
    public var faultPending: Bool {
        state.withLock { state in
            guard let fault = state.fault else { return false }
            return fault.persistent || state.operations < fault.at
        }
    }

    /// The disk as it is now (unsynced writes included, as a running system sees it).
    public func snapshot() -> Image { state.withLock { $0.image } }

    /// Replaces the disk with `image`, as after a clean reboot: every handle opened before is
    /// dead, locks are gone, faults are cleared.
    public func restore(_ image: Image) {
        state.withLock { state in
            state.image = image
            state.locks = [:]
            state.generation += 1
            state.fault = nil
        }
    }

    /// Cuts the power now: each unsynced write and directory change meets the fate `damage`
    /// decides; every open handle dies.
    public func powerCut(_ damage: PowerCutDamage) {
        state.withLock { Self.cut(&$0, damage) }
    }

    /// Makes every unsynced write durable (a clean shutdown).
    public func syncAll() {
        state.withLock { state in
            for id in state.image.nodes.keys { Self.flush(&state.image.nodes[id]!) }
            state.image.durableNames = state.image.names
        }
    }

    /// The bytes of `path` as a running system sees them, or nil when there is no such file.
    public func contents(of path: String) -> [UInt8]? {
        state.withLock { state in state.image.names[path].map { state.image.nodes[$0]!.current } }
    }

    /// Replaces the bytes of `path` (durably), creating the file. For building hostile files.
    public func setContents(of path: String, to bytes: [UInt8]) {
        state.withLock { state in
            let id = state.image.names[path] ?? {
                let id = state.image.nextNode
                state.image.nextNode += 1
                return id
            }()
            state.image.nodes[id] = Node(durable: bytes, current: bytes, pending: [])
            state.image.names[path] = id
            state.image.durableNames[path] = id
        }
    }

    // MARK: FileSystem

    public func open(_ path: String, mode: FileOpenMode) throws -> any StoreFile {
        try state.withLock { state -> any StoreFile in
            try Self.countOperation(&state, "open \(path)", path: path, isWrite: false)
            let id: UInt64
            if let existing = state.image.names[path] {
                id = existing
            } else {
                guard mode == .readWriteCreate else {
                    throw StoreError(.notFound, "no such file", errno: .noSuchFileOrDirectory, path: path)
                }
                id = state.image.nextNode
                state.image.nextNode += 1
                state.image.nodes[id] = Node()
                state.image.names[path] = id
            }
            let handle = state.nextHandle
            state.nextHandle += 1
            return SimulatedFile(disk: self, path: path, node: id, handle: handle, generation: state.generation,
                                 readOnly: mode == .readOnly,
                                 identity: FileIdentity(device: identityDevice, inode: id))
        }
    }

    public func exists(_ path: String) throws -> Bool {
        state.withLock { $0.image.names[path] != nil }
    }

    public func delete(_ path: String) throws {
        try state.withLock { state in
            try Self.countOperation(&state, "delete \(path)", path: path, isWrite: false)
            state.image.names[path] = nil
        }
    }

    public func syncDirectory(containing path: String) throws {
        try state.withLock { state in
            try Self.countOperation(&state, "sync directory of \(path)", path: path, isWrite: false)
            state.image.durableNames = state.image.names
        }
    }

    // MARK: Handle operations

    func withNode<R>(_ file: SimulatedFile, _ what: @autoclosure () -> String, isWrite: Bool = false,
                     _ body: (inout Node) throws -> R) throws -> R {
        try state.withLock { state in
            guard file.generation == state.generation else {
                throw StoreError(.ioError, "the disk lost power: this handle is dead", errno: .ioError, path: file.path)
            }
            try Self.countOperation(&state, what(), path: file.path, isWrite: isWrite)
            return try body(&state.image.nodes[file.node]!)
        }
    }

    func write(_ file: SimulatedFile, _ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        precondition(!file.readOnly, "write through a read-only handle")
        var data = Array(bytes)
        do {
            try withNode(file, "write \(file.path) @\(offset) +\(bytes.count)", isWrite: true) { node in
                Self.apply(.write(offset: Int(offset), bytes: data), to: &node.current)
                node.pending.append(.write(offset: Int(offset), bytes: data))
            }
        } catch let error as ShortWrite {
            data = Array(data.prefix(data.count / 2))
            state.withLock { state in
                var node = state.image.nodes[file.node]!
                Self.apply(.write(offset: Int(offset), bytes: data), to: &node.current)
                node.pending.append(.write(offset: Int(offset), bytes: data))
                state.image.nodes[file.node] = node
            }
            throw StoreError(.full, "short write: \(data.count) of \(bytes.count) bytes written, then ENOSPC",
                             errno: .noSpace, path: error.path)
        }
    }

    func read(_ file: SimulatedFile, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        try withNode(file, "read \(file.path) @\(offset) +\(buffer.count)") { node in
            let start = Int(offset)
            guard start < node.current.count else { return 0 }
            let n = min(buffer.count, node.current.count - start)
            node.current.withUnsafeBytes { source in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[start..<(start + n)]))
            }
            return n
        }
    }

    func sync(_ file: SimulatedFile) throws {
        try withNode(file, "sync \(file.path)") { node in Self.flush(&node) }
    }

    func truncate(_ file: SimulatedFile, to size: Int64) throws {
        try withNode(file, "truncate \(file.path) to \(size)") { node in
            Self.apply(.truncate(size: Int(size)), to: &node.current)
            node.pending.append(.truncate(size: Int(size)))
        }
    }

    func size(_ file: SimulatedFile) throws -> Int64 {
        try withNode(file, "size \(file.path)") { node in Int64(node.current.count) }
    }

    func lock(_ file: SimulatedFile, _ request: FileLockRequest, offset: Int64, length: Int64) throws -> Bool {
        try state.withLock { state in
            guard file.generation == state.generation else {
                throw StoreError(.ioError, "the disk lost power: this handle is dead", errno: .ioError, path: file.path)
            }
            return state.locks[file.node, default: ByteRangeLocks()].apply(request, owner: file.handle, offset: offset, length: length)
        }
    }

    func close(_ file: SimulatedFile) {
        state.withLock { state in
            guard file.generation == state.generation else { return }
            state.locks[file.node]?.release(owner: file.handle)
        }
    }

    // MARK: Mechanics

    struct ShortWrite: Error { var path: String }

    private static func countOperation(_ state: inout State, _ what: @autoclosure () -> String, path: String, isWrite: Bool) throws {
        state.operations += 1
        if state.trace != nil { state.trace!.append("\(state.operations): \(what())") }
        guard let fault = state.fault, state.operations >= fault.at else { return }
        if !fault.persistent && state.operations > fault.at { return }
        switch fault.kind {
        case .ioError:
            throw StoreError(.ioError, "injected EIO at operation \(state.operations)", errno: .ioError, path: path)
        case .diskFull:
            throw StoreError(.full, "injected ENOSPC at operation \(state.operations)", errno: .noSpace, path: path)
        case .shortWrite:
            if isWrite { throw ShortWrite(path: path) }
            throw StoreError(.ioError, "injected EIO at operation \(state.operations)", errno: .ioError, path: path)
        case .powerCut(let damage):
            state.fault = nil
            cut(&state, damage)
            throw StoreError(.ioError, "injected power cut at operation \(state.operations)", errno: .ioError, path: path)
        }
    }

    private static func cut(_ state: inout State, _ damage: PowerCutDamage) {
        var random = SplitMix64(seed: {
            switch damage {
            case .random(let seed), .tearAll(let seed): return seed
            default: return 0
            }
        }())
        for id in state.image.nodes.keys.sorted() {
            var node = state.image.nodes[id]!
            for pending in node.pending {
                switch (pending, damage) {
                case (_, .applyAll):
                    apply(pending, to: &node.durable)
                case (_, .dropAll):
                    break
                case (.truncate, _):
                    if random.next() & 1 == 0 { apply(pending, to: &node.durable) }
                case (.write(let offset, let bytes), .random):
                    switch random.next() % 3 {
                    case 0: apply(pending, to: &node.durable)
                    case 1: break
                    default: tear(offset: offset, bytes: bytes, into: &node.durable, random: &random)
                    }
                case (.write(let offset, let bytes), .tearAll):
                    tear(offset: offset, bytes: bytes, into: &node.durable, random: &random)
                }
            }
            node.pending = []
            node.current = node.durable
            state.image.nodes[id] = node
        }
        // Directory changes since the last directory sync: kept or lost.
        var names = state.image.durableNames
        let changed = Set(state.image.names.keys).union(state.image.durableNames.keys)
            .filter { state.image.names[$0] != state.image.durableNames[$0] }.sorted()
        for name in changed {
            let keep: Bool
            switch damage {
            case .applyAll: keep = true
            case .dropAll: keep = false
            case .random, .tearAll: keep = random.next() & 1 == 0
            }
            if keep { names[name] = state.image.names[name] }
        }
        state.image.names = names
        state.image.durableNames = names
        state.locks = [:]
        state.generation += 1
    }

    private static func tear(offset: Int, bytes: [UInt8], into target: inout [UInt8], random: inout SplitMix64) {
        // Split at absolute sector boundaries; each piece independently reaches the disk or not.
        var start = offset
        let end = offset + bytes.count
        while start < end {
            let boundary = min(end, (start / sectorSize + 1) * sectorSize)
            if random.next() & 1 == 0 {
                apply(.write(offset: start, bytes: Array(bytes[(start - offset)..<(boundary - offset)])), to: &target)
            } else if start >= target.count {
                // A sector past the end that did not land still extends nothing.
            }
            start = boundary
        }
    }

    private static func flush(_ node: inout Node) {
        node.durable = node.current
        node.pending = []
    }

    private static func apply(_ pending: Pending, to bytes: inout [UInt8]) {
        switch pending {
        case .write(let offset, let data):
            if bytes.count < offset + data.count {
                bytes.append(contentsOf: repeatElement(0, count: offset + data.count - bytes.count))
            }
            bytes.replaceSubrange(offset..<(offset + data.count), with: data)
        case .truncate(let size):
            if size < bytes.count {
                bytes.removeSubrange(size...)
            } else {
                bytes.append(contentsOf: repeatElement(0, count: size - bytes.count))
            }
        }
    }
}

/// A handle on a ``SimulatedDisk`` file.
final class SimulatedFile: StoreFile {
    let disk: SimulatedDisk
    let path: String
    let node: UInt64
    let handle: UInt64
    let generation: UInt64
    let readOnly: Bool
    let identity: FileIdentity

    init(disk: SimulatedDisk, path: String, node: UInt64, handle: UInt64, generation: UInt64, readOnly: Bool, identity: FileIdentity) {
        self.disk = disk
        self.path = path
        self.node = node
        self.handle = handle
        self.generation = generation
        self.readOnly = readOnly
        self.identity = identity
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        try disk.read(self, into: buffer, at: offset)
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        try disk.write(self, bytes, at: offset)
    }

    func sync() throws { try disk.sync(self) }

    func truncate(to size: Int64) throws { try disk.truncate(self, to: size) }

    func size() throws -> Int64 { try disk.size(self) }

    func lock(_ request: FileLockRequest, offset: Int64, length: Int64) throws -> Bool {
        try disk.lock(self, request, offset: offset, length: length)
    }

    func close() { disk.close(self) }
}
