import Synchronization

/// Counters of a coordinator's row cache.
public struct RowCacheStatistics: Sendable, Equatable {
    /// Snapshots held now (rows some managed object uses).
    public var snapshots = 0
    /// Fault fires answered from the cache.
    public var hits = 0
    /// Fault fires that read the store (no snapshot).
    public var misses = 0
    /// Fault fires that read the store because the snapshot was older than the context's
    /// staleness interval.
    public var staleReads = 0

    /// Creates zeroed counters.
    public init() {}
}

/// One row's snapshot in a coordinator's row cache: the row, when it was read, and how many
/// managed objects (in every context of the coordinator) hold data from it. An object keeps a
/// reference to the snapshot it holds, so that its fault fires and its release need no lookup.
///
/// The row, its time and whether the cache holds it are read and changed under the coordinator's
/// lock. Two fields are atomic, for the paths that take no lock:
/// - ``generation`` changes with every change of the row or of ``isCached``: an object a fetch
///   filled from the snapshot fires without the lock while the generation is the one it saw
///   (``ManagedObject/fireFault()``);
/// - ``references`` is counted down without the lock when an object lets go of the snapshot;
///   the holder that takes it to zero then drops the snapshot under the lock (where it is
///   checked again: a fetch may have taken a reference in between).
final class RowSnapshot: @unchecked Sendable {
    let objectID: ManagedObjectID
    /// The coordinator whose cache made the snapshot. Held strongly, so that objects holding
    /// the snapshot keep the coordinator they release it to; the cycle through the cache ends
    /// when the snapshot is dropped from it (at no references, or when its row goes).
    let coordinator: PersistentStoreCoordinator
    private(set) var row: StoreRow
    private(set) var readAt: ContinuousClock.Instant
    let references: Atomic<Int>
    let generation = Atomic<UInt64>(0)
    /// Whether the cache holds this snapshot (false once dropped: at no references, or when its
    /// row went away while objects still held it).
    private(set) var isCached = true

    init(objectID: ManagedObjectID, row: StoreRow, readAt: ContinuousClock.Instant, coordinator: PersistentStoreCoordinator, references: Int = 0) {
        self.references = Atomic(references)
        self.objectID = objectID
        self.coordinator = coordinator
        self.row = row
        self.readAt = readAt
    }

    /// Counts a fire answered by the values a fetch gave a fault from this snapshot.
    func countFilledHit() {
        coordinator.countFilledHit()
    }

    /// A holder lets go of the snapshot (``PersistentStoreCoordinator/release(_:)``).
    func release() {
        coordinator.release(self)
    }

    /// Replaces the row, read at `readAt` (under the coordinator's lock).
    func replace(_ row: StoreRow, readAt: ContinuousClock.Instant) {
        self.row = row
        self.readAt = readAt
        generation.add(1, ordering: .releasing)
    }

    /// Records that the row was read again, unchanged, at `readAt` (under the coordinator's lock).
    func touch(readAt: ContinuousClock.Instant) {
        self.readAt = readAt
    }

    /// Marks the snapshot as no longer in the cache (under the coordinator's lock).
    func markDropped() {
        isCached = false
        // Only holders read the generation: at no references (the last holder let go, the
        // common drop) there is no one to tell.
        if references.load(ordering: .relaxed) > 0 { generation.add(1, ordering: .releasing) }
    }
}
