import Dispatch
import Synchronization

/// The lock level a connection holds on a database file, in increasing strength.
///
/// The levels follow SQLite's rollback-journal locking (see `docs/locking.md`):
/// - `shared`: reading; any number of connections.
/// - `reserved`: a writer is preparing a transaction in its cache; readers may still come and go.
/// - `pending`: the writer wants to write the file; no new reader may start, existing ones finish.
/// - `exclusive`: the writer is writing the database file; nobody else holds any lock.
public enum LockLevel: Int, Comparable, Sendable, CustomStringConvertible {
    /// No lock.
    case none = 0
    /// Reading.
    case shared
    /// Preparing a write transaction in the cache.
    case reserved
    /// Waiting for readers to leave before writing the file.
    case pending
    /// Writing the file.
    case exclusive

    /// Orders levels by strength.
    public static func < (lhs: LockLevel, rhs: LockLevel) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
        switch self {
        case .none: "none"
        case .shared: "shared"
        case .reserved: "reserved"
        case .pending: "pending"
        case .exclusive: "exclusive"
        }
    }
}

/// Byte ranges of the database file used as advisory locks, at 1 TiB: past the data of any file
/// below that size, and, being advisory, harmless to reads and writes of larger ones.
enum LockBytes {
    static let pending: Int64 = 1 << 40
    static let reserved: Int64 = pending + 1
    static let sharedFirst: Int64 = pending + 2
    static let sharedCount: Int64 = 510
}

/// A process's lock table: one entry per database file (per inode), shared by every connection in
/// the process that opened that file.
///
/// The entry arbitrates between the process's own connections and holds the process's operating-
/// system locks on one descriptor of its own, so that other processes see one well-behaved peer:
/// - a connection taking `shared` while another connection of the process already reads costs no
///   system call (and needs no hot-journal check: no writer can have crashed mid-commit while a
///   shared lock was held);
/// - the process's locks outlive the closing of any connection's descriptor.
///
/// Tests that simulate several processes over one simulated disk give each "process" its own
/// table (`LockTable()`); real code uses ``processWide``.
public final class LockTable: Sendable {
    /// The table of this process.
    public static let processWide = LockTable()

    struct Key: Hashable {
        var fileSystem: ObjectIdentifier
        var identity: FileIdentity
    }

    private let entries = Mutex<[Key: InodeLock]>([:])

    /// Creates an independent lock table (for tests that simulate several processes).
    public init() {}

    /// Attaches a connection to the entry of the file `file` (opening the entry's lock descriptor
    /// when it is the first).
    func attach(fileSystem: any FileSystem, file: any StoreFile, readOnly: Bool) throws -> InodeLock {
        let key = Key(fileSystem: ObjectIdentifier(fileSystem), identity: file.identity)
        return try entries.withLock { entries in
            if let entry = entries[key] {
                entry.attachCount.withLock { $0 += 1 }
                return entry
            }
            // The descriptor holds the locks of every connection of the process, writers' too:
            // read-write whenever the file allows it, even when the first connection only reads
            // (a write lock on a read-only descriptor fails, EBADF, and would fail every later
            // writer in the process).
            let lockFile: any StoreFile
            do {
                lockFile = try fileSystem.open(file.path, mode: .readWrite)
            } catch where readOnly {
                lockFile = try fileSystem.open(file.path, mode: .readOnly)
            }
            let entry = InodeLock(file: lockFile)
            entries[key] = entry
            return entry
        }
    }

    /// Detaches a connection; the last one closes the entry's descriptor.
    func detach(_ entry: InodeLock) {
        entries.withLock { entries in
            let remaining = entry.attachCount.withLock { count -> Int in
                count -= 1
                return count
            }
            guard remaining == 0 else { return }
            if let key = entries.first(where: { $0.value === entry })?.key {
                entries[key] = nil
            }
            entry.closeFile()
        }
    }
}

/// The in-process lock state of one database file, and the descriptor holding the process's
/// operating-system locks on it.
final class InodeLock: Sendable {
    struct State {
        /// Connections of this process holding at least `shared` (retained locks included).
        var sharedCount = 0
        /// The strongest level a connection of this process holds above `shared`, and which one.
        var writerLevel = LockLevel.none
        var writer: ObjectIdentifier?
        /// Connections keeping a `shared` lock between transactions (lock rule 9).
        var retained: Set<ObjectIdentifier> = []
        /// When the process took its operating-system `shared` lock (nil while it holds none).
        var sharedSince: ContinuousClock.Instant?
        /// Whether the idle timer of lock rule 10 is scheduled.
        var expiryScheduled = false
        /// The descriptor was closed (the last connection detached).
        var closed = false
    }

    let file: any StoreFile
    let attachCount = Mutex(1)
    private let state = Mutex(State())

    init(file: any StoreFile) {
        self.file = file
    }

    /// Tries to raise `owner` from `current` to `target` without waiting.
    ///
    /// - Returns: whether the lock was taken, and for `shared`, whether the process newly took
    ///   its operating-system shared lock (only then can a hot journal be present).
    func tryLock(_ target: LockLevel, owner: ObjectIdentifier, current: LockLevel) throws -> (granted: Bool, firstReader: Bool) {
        precondition(target > current, "lock level may only rise: \(current) -> \(target)")
        return try state.withLock { state in
            switch target {
            case .shared:
                if state.writerLevel >= .pending { return (false, false) }
                if state.sharedCount > 0 {
                    state.sharedCount += 1
                    return (true, false)
                }
                // A pending writer in another process holds the pending byte exclusively:
                // checking it first is what keeps writers from starving.
                guard try file.lock(.shared, offset: LockBytes.pending, length: 1) else { return (false, false) }
                // The pending byte is let go whatever happens next (an error included).
                let granted: Bool
                do {
                    granted = try file.lock(.shared, offset: LockBytes.sharedFirst, length: LockBytes.sharedCount)
                } catch {
                    _ = try? file.lock(.unlock, offset: LockBytes.pending, length: 1)
                    throw error
                }
                _ = try? file.lock(.unlock, offset: LockBytes.pending, length: 1)
                guard granted else { return (false, false) }
                state.sharedCount = 1
                state.sharedSince = .now
                return (true, true)
            case .reserved:
                precondition(current == .shared, "reserved needs shared first")
                if state.writerLevel >= .reserved { return (false, false) }
                guard try file.lock(.exclusive, offset: LockBytes.reserved, length: 1) else { return (false, false) }
                state.writerLevel = .reserved
                state.writer = owner
                return (true, false)
            case .pending, .exclusive:
                precondition(current >= .reserved && state.writer == owner, "exclusive needs reserved first")
                if state.writerLevel < .pending {
                    guard try file.lock(.exclusive, offset: LockBytes.pending, length: 1) else { return (false, false) }
                    state.writerLevel = .pending
                }
                // Retained locks of this process give way to its writer (lock rule 10).
                revokeRetained(&state)
                if target == .pending { return (true, false) }
                // Other connections of this process still reading: wait for them.
                if state.sharedCount > 1 { return (false, false) }
                guard try file.lock(.exclusive, offset: LockBytes.sharedFirst, length: LockBytes.sharedCount) else {
                    return (false, false)
                }
                state.writerLevel = .exclusive
                return (true, false)
            case .none:
                preconditionFailure("cannot lock to none")
            }
        }
    }

    /// Lowers `owner` from `current` to `target` (`shared` or `none`).
    func unlock(to target: LockLevel, owner: ObjectIdentifier, current: LockLevel) {
        guard target < current else { return }
        state.withLock { state in
            if current >= .reserved {
                if current == .exclusive {
                    _ = try? file.lock(.shared, offset: LockBytes.sharedFirst, length: LockBytes.sharedCount)
                }
                _ = try? file.lock(.unlock, offset: LockBytes.pending, length: 2)
                state.writerLevel = .none
                state.writer = nil
            }
            if target == .none && current >= .shared {
                releaseShared(&state)
            }
        }
    }

    /// Drops one reader of the process, releasing the operating-system lock with the last.
    private func releaseShared(_ state: inout State) {
        state.sharedCount -= 1
        if state.sharedCount == 0 {
            state.sharedSince = nil
            if !state.closed {
                _ = try? file.lock(.unlock, offset: LockBytes.sharedFirst, length: LockBytes.sharedCount)
            }
        }
    }

    /// Revokes every retained lock of the process (lock rule 10).
    private func revokeRetained(_ state: inout State) {
        guard !state.retained.isEmpty else { return }
        let count = state.retained.count
        state.retained.removeAll(keepingCapacity: true)
        for _ in 0..<count { releaseShared(&state) }
    }

    // MARK: Retained read locks (lock rules 9 and 10)

    /// Keeps `owner`'s `shared` lock after its read transaction ended, for at most `retention`
    /// after the process took its operating-system lock; schedules the idle timer.
    func retain(owner: ObjectIdentifier, retention: Duration) {
        state.withLock { state in
            precondition(state.sharedCount > 0, "a retained lock must be held")
            state.retained.insert(owner)
            scheduleExpiry(&state, retention: retention)
        }
    }

    /// Turns `owner`'s retained lock back into a held one for a new transaction. Returns false —
    /// and `owner` holds nothing any more — when the lock was revoked, when a writer of this
    /// process is at `pending` or above, or when the operating-system lock is older than
    /// `retention`: the caller then takes the lock afresh. In the last two cases every retained
    /// lock of the process is revoked, so that the operating-system lock is released unless a
    /// reader is inside a transaction (otherwise connections taking turns could keep it forever).
    func resume(owner: ObjectIdentifier, retention: Duration) -> Bool {
        state.withLock { state in
            guard state.retained.contains(owner) else { return false }
            if state.writerLevel < .pending, let since = state.sharedSince, ContinuousClock.now - since < retention {
                state.retained.remove(owner)
                return true
            }
            revokeRetained(&state)
            return false
        }
    }

    /// Gives up `owner`'s retained lock, if it still has one (closing the connection).
    func releaseRetained(owner: ObjectIdentifier) {
        state.withLock { state in
            if state.retained.remove(owner) != nil { releaseShared(&state) }
        }
    }

    private func scheduleExpiry(_ state: inout State, retention: Duration) {
        guard !state.expiryScheduled, let since = state.sharedSince else { return }
        state.expiryScheduled = true
        let remaining = max(Duration.zero, retention - (ContinuousClock.now - since))
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Self.timerNanoseconds(remaining))) { [weak self] in
            self?.expire(retention: retention)
        }
    }

    /// `duration` (not negative) in whole nanoseconds for a Dispatch timer, rounded up, and
    /// saturating at `Int.max` (a timer that never fires) rather than overflowing: the options
    /// allow a day (`PagerOptions.maximumWait`), but a lock table may be used directly.
    static func timerNanoseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = Int(clamping: seconds).multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return .max }
        let (total, carry) = whole.addingReportingOverflow(Int(attoseconds / 1_000_000_000) + 1)
        return carry ? .max : total
    }

    /// The idle timer: revokes the retained locks once the operating-system lock is older than
    /// `retention`, or waits again.
    private func expire(retention: Duration) {
        state.withLock { state in
            state.expiryScheduled = false
            guard !state.retained.isEmpty, !state.closed else { return }
            if let since = state.sharedSince, ContinuousClock.now - since < retention {
                scheduleExpiry(&state, retention: retention)
                return
            }
            revokeRetained(&state)
        }
    }

    /// Closes the lock descriptor (the last connection detached); a late timer then does nothing.
    func closeFile() {
        state.withLock { state in
            state.closed = true
            state.retained.removeAll()
        }
        file.close()
    }
}
