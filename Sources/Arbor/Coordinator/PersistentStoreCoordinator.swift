import Foundation

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

/// The coordinator: the model, the stores, and the row cache every context of the coordinator
/// shares. It serialises store access (contexts on different threads may use it at once).
///
/// The row cache keeps one snapshot per row — its values, version number and the time it was
/// read — reference-counted by the managed objects (in every context) that hold data from it, and
/// dropped when the count reaches zero. A fault fire takes the cached snapshot when the context's
/// staleness interval allows (negative: any age), else reads the store.
public final class PersistentStoreCoordinator: @unchecked Sendable {
    /// The model.
    public let managedObjectModel: ManagedObjectModel
    private let lock = NSRecursiveLock()
    private var stores: [any PersistentStore] = []

    struct Snapshot {
        var row: StoreRow
        var readAt: ContinuousClock.Instant
        var references: Int
    }

    private var cache: [ManagedObjectID: Snapshot] = [:]
    private var statistics = RowCacheStatistics()

    /// A coordinator for `model`, with no store yet.
    public init(managedObjectModel: ManagedObjectModel) {
        self.managedObjectModel = managedObjectModel
    }

    func locked<R>(_ body: () throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    // MARK: Stores

    /// The stores, in the order they were added.
    public var persistentStores: [any PersistentStore] { locked { stores } }

    /// Adds a store (objects of entities it accepts are saved to the first such store).
    public func addPersistentStore(_ store: any PersistentStore) {
        locked { stores.append(store) }
    }

    /// Opens (creating when missing) a native store at `path` and adds it.
    ///
    /// - Throws: ``ArborError/Code/incompatibleModel``, ``ArborError/Code/storeOpen``.
    @discardableResult
    public func addNativeStore(at path: String, configuration: String? = nil, options: DatabaseOptions = DatabaseOptions()) throws -> NativeStore {
        let store = try NativeStore(path: path, model: managedObjectModel, configuration: configuration, options: options)
        addPersistentStore(store)
        return store
    }

    /// Adds an in-memory store (the engine over memory).
    @discardableResult
    public func addInMemoryStore(configuration: String? = nil) throws -> NativeStore {
        let store = try NativeStore.inMemory(model: managedObjectModel, configuration: configuration)
        addPersistentStore(store)
        return store
    }

    /// The store holding `objectID`'s row (nil for a temporary ID or an unknown store).
    public func persistentStore(for objectID: ManagedObjectID) -> (any PersistentStore)? {
        locked { store(of: objectID) }
    }

    /// The store holding `objectID`'s row (call with the lock held).
    private func store(of objectID: ManagedObjectID) -> (any PersistentStore)? {
        guard let identifier = objectID.storeIdentifier else { return nil }
        return store(identified: identifier)
    }

    /// The store whose identifier is `identifier` (call with the lock held).
    private func store(identified identifier: UUID) -> (any PersistentStore)? {
        stores.first { $0.identifier == identifier }
    }

    /// The store holding `objectID`'s row, or ``ArborError/Code/invalidObjectID`` (call with the
    /// lock held).
    private func requireStore(of objectID: ManagedObjectID) throws -> any PersistentStore {
        guard let store = store(of: objectID) else {
            throw ArborError(.invalidObjectID, "\(objectID) belongs to no store of this coordinator", objectID: objectID)
        }
        return store
    }

    /// The store new objects of `entity` are saved to: the first whose configuration includes
    /// the entity (a store without a configuration takes every entity).
    func store(for entity: EntityDescription) throws -> any PersistentStore {
        guard let store = locked({ stores.first { managedObjectModel.configuration($0.configurationName, includes: entity) } }) else {
            throw ArborError(.misuse, "no persistent store of the coordinator takes \(entity.name) objects (check the stores' configurations)",
                             entity: entity.name)
        }
        return store
    }

    /// The object ID a URI names (made by ``ManagedObjectID/uriRepresentation()``), when it names
    /// an entity of the model in one of the coordinator's stores (or is a temporary ID).
    public func managedObjectID(forURIRepresentation uri: URL) -> ManagedObjectID? {
        ManagedObjectID(uri: uri).flatMap { knows($0) ? $0 : nil }
    }

    /// Whether `id` names an entity of the model in one of the coordinator's stores (or is a
    /// temporary ID of such an entity).
    func knows(_ id: ManagedObjectID) -> Bool {
        guard managedObjectModel.entity(named: id.entityName) != nil else { return false }
        return id.isTemporaryID || persistentStore(for: id) != nil
    }

    // MARK: Row cache

    /// The cache's counters.
    public var rowCacheStatistics: RowCacheStatistics {
        locked {
            var result = statistics
            result.snapshots = cache.count
            return result
        }
    }

    /// The row of `objectID` for a fault fire, from the cache when its age is within `staleness`
    /// (negative: any age), else from the store; the caller now holds a reference to the snapshot.
    /// Nil when there is no such row.
    func fetchSnapshot(for objectID: ManagedObjectID, staleness: TimeInterval) throws -> StoreRow? {
        try locked {
            // One lookup: the snapshot is read and updated in place through its index (an
            // `inout` access; reading a field through the getter would copy the whole snapshot,
            // retaining and releasing its row).
            if let index = cache.index(forKey: objectID) {
                func take(_ snapshot: inout Snapshot) -> StoreRow? {
                    guard staleness < 0 || Self.seconds(since: snapshot.readAt) <= staleness else { return nil }
                    snapshot.references += 1
                    return snapshot.row
                }
                if let row = take(&cache.values[index]) {
                    statistics.hits += 1
                    return row
                }
                statistics.staleReads += 1
            } else {
                statistics.misses += 1
            }
            guard let row = try requireStore(of: objectID).row(for: objectID) else {
                cache[objectID] = nil
                return nil
            }
            let references = (cache[objectID]?.references ?? 0) + 1
            cache[objectID] = Snapshot(row: row, readAt: .now, references: references)
            return row
        }
    }

    /// The age of a snapshot in seconds (compared as a `Double`, so that any staleness interval,
    /// however large, is accepted).
    static func seconds(since instant: ContinuousClock.Instant) -> Double {
        let age = (ContinuousClock.now - instant).components
        return Double(age.seconds) + Double(age.attoseconds) / 1e18
    }

    /// One more managed object holds data from each row's snapshot (after a save): the saved
    /// rows replace what the cache had.
    func retainSnapshots(_ rows: [(ManagedObjectID, StoreRow)]) {
        guard !rows.isEmpty else { return }
        let now = ContinuousClock.now
        locked {
            cache.reserveCapacity(cache.count + rows.count)
            func retain(_ snapshot: inout Snapshot, _ row: StoreRow) {
                snapshot.row = row
                snapshot.readAt = now
                snapshot.references += 1
            }
            for (objectID, row) in rows {
                retain(&cache[objectID, default: Snapshot(row: row, readAt: now, references: 0)], row)
            }
        }
    }

    /// Reads again the rows of those of `ids` the cache holds (another coordinator saved them):
    /// the snapshots take the stored rows, and those whose rows are gone are dropped.
    func reloadSnapshots(_ ids: [ManagedObjectID]) throws {
        try locked {
            let cached = ids.filter { cache[$0] != nil }
            guard !cached.isEmpty else { return }
            let now = ContinuousClock.now
            for (id, row) in zip(cached, try rows(for: cached)) {
                if let row {
                    cache[id]?.row = row
                    cache[id]?.readAt = now
                } else {
                    cache[id] = nil
                }
            }
        }
    }

    /// The cached row of `objectID`, if the cache holds one.
    func cachedRow(for objectID: ManagedObjectID) -> StoreRow? {
        locked { cache[objectID]?.row }
    }

    /// The object whose row holds `row`'s values of `constraint` in `store`.
    func objectID(holding constraint: [String], of row: StoreRow, in store: any PersistentStore) throws -> ManagedObjectID? {
        try locked { try store.objectID(holding: constraint, of: row) }
    }

    /// A managed object no longer holds data from `objectID`'s snapshot; the last one drops it.
    func releaseSnapshot(_ objectID: ManagedObjectID) {
        locked {
            guard let index = cache.index(forKey: objectID) else { return }
            func release(_ snapshot: inout Snapshot) -> Int {
                snapshot.references -= 1
                return snapshot.references
            }
            if release(&cache.values[index]) <= 0 { cache.remove(at: index) }
        }
    }

    // MARK: Fetching

    /// The stores holding objects of `entity` (by their configurations), in the order added.
    func stores(holding entity: EntityDescription) -> [any PersistentStore] {
        locked { stores.filter { managedObjectModel.configuration($0.configurationName, includes: entity) } }
    }

    /// The rows of a fetch from each of `stores`, one after the other (the caller merges the
    /// order and applies the window when there are several).
    func fetch(_ request: StoreFetch, in stores: [any PersistentStore]) throws -> [(ManagedObjectID, StoreRow)] {
        try locked { try stores.flatMap { try $0.fetch(request) } }
    }

    /// The rows of `ids` (nil for those that are gone), read store by store, each store once.
    func rows(for ids: [ManagedObjectID]) throws -> [StoreRow?] {
        try locked {
            var result = [StoreRow?](repeating: nil, count: ids.count)
            var byStore: [UUID: [Int]] = [:]
            for (position, id) in ids.enumerated() {
                guard let store = id.storeIdentifier else { continue }
                byStore[store, default: []].append(position)
            }
            for (identifier, positions) in byStore {
                guard let store = store(identified: identifier) else { continue }
                for (position, row) in zip(positions, try store.rows(for: positions.map { ids[$0] })) { result[position] = row }
            }
            return result
        }
    }

    /// The number of rows a fetch matches in `stores`.
    func count(_ request: StoreFetch, in stores: [any PersistentStore]) throws -> Int {
        try locked { try stores.reduce(0) { $0 + (try $1.count(request)) } }
    }

    /// The destinations of a to-many relationship of a saved object.
    func relatedObjectIDs(of objectID: ManagedObjectID, relationship: RelationshipDescription) throws -> [ManagedObjectID] {
        try locked { try requireStore(of: objectID).relatedObjectIDs(of: objectID, relationship: relationship) }
    }

    /// New permanent IDs for objects of `entity`, in `store` (by default the store the entity's
    /// objects are saved to).
    func allocateObjectIDs(for entity: EntityDescription, count: Int, in chosen: (any PersistentStore)? = nil) throws -> [ManagedObjectID] {
        try locked {
            let store = try chosen ?? store(for: entity)
            return try store.allocatePrimaryKeys(for: entity, count: count).map {
                ManagedObjectID(entityName: entity.name, store: store.identifier, key: $0)
            }
        }
    }

    /// Saves `changes` (grouped by store) and brings the row cache up to date. One store at a
    /// time; each store's part is atomic. Returns, for each part, the IDs of its inserted rows
    /// (``PersistentStore/save(_:)``).
    func save(_ changes: [(store: UUID, changes: StoreChanges)]) throws -> [[ManagedObjectID]] {
        try locked {
            var result: [[ManagedObjectID]] = []
            for (identifier, part) in changes {
                guard let store = store(identified: identifier) else {
                    throw ArborError(.misuse, "a save names a store the coordinator does not have")
                }
                let assigned: [ManagedObjectID]
                do {
                    assigned = try store.save(part)
                } catch {
                    // The stores before this one saved their parts: the caller must know which.
                    if !result.isEmpty { throw PartialSave(assigned: result, failure: error) }
                    throw error
                }
                guard assigned.count == part.inserted.count else {
                    throw ArborError(.storeSave, "the store \(identifier) returned \(assigned.count) IDs for \(part.inserted.count) new rows")
                }
                result.append(assigned)
                if !part.updated.isEmpty {
                    let mapping = part.permanentIDs(assigned)
                    let now = ContinuousClock.now
                    for (id, row, _) in part.updated {
                        guard let index = cache.index(forKey: id) else { continue }
                        cache.values[index].row = row.translated(mapping)
                        cache.values[index].readAt = now
                    }
                }
                for (id, _) in part.deleted { cache[id] = nil }
            }
            return result
        }
    }
}

/// A save over several stores that failed after the first stores had saved their parts:
/// `assigned` holds the committed parts' new IDs (the first `assigned.count` parts).
struct PartialSave: Error {
    let assigned: [[ManagedObjectID]]
    let failure: any Error
}
