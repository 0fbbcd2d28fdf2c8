import Foundation
import Logging
import Synchronization

// Safety: The row cache and its statistics are read and changed only under `lock`, by code that
// calls out to nothing meanwhile (freeing a snapshot frees only its row); the row pointers
// `retainSnapshots` takes point into a buffer its caller lends for the call (its own, unshared rows
// when consuming).

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
    /// The stores, in the order they were added: read and changed under `lock` only (here, and
    /// in PersistentStoreCoordinator+Lifecycle.swift).
    var stores: [any PersistentStore] = []

    // The row cache and its counters are read and changed only under `lock`, by code that calls
    // out to nothing while it does (freeing a snapshot frees only its row): no dynamic
    // exclusivity check, which every fetch would pay on each access.
    @exclusivity(unchecked) private var cache = ObjectIDTable<RowSnapshot>()
    @exclusivity(unchecked) private var statistics = RowCacheStatistics()
    /// Hits of faults that fired from the values a fetch gave them (counted without the lock).
    private let filledHits = Atomic<Int>(0)
    /// The logger and metrics of the coordinator and its contexts.
    let observer: ObjectGraphObserver

    /// A coordinator for `model`, with no store yet, logging and counting through
    /// `observability` (docs/observability.md).
    public init(managedObjectModel: ManagedObjectModel, observability: ObjectGraphObservability = ObjectGraphObservability()) {
        self.managedObjectModel = managedObjectModel
        observer = ObjectGraphObserver(observability)
    }

    /// How the coordinator looks for other connections' commits (docs/history.md, "Remote
    /// changes").
    let remoteChecking = RemoteChangeChecking()

    deinit {
        remoteChecking.stopPolling()
    }

    /// The logger of the coordinator and its contexts (label `arbor.graph` unless
    /// ``ObjectGraphObservability/logger`` said otherwise).
    public var logger: Logger { observer.logger }

    /// The root contexts made on the coordinator, held weakly (a context set to another
    /// coordinator is skipped when listed).
    private let contextList = Mutex<[WeakContext]>([])
    /// The query generations the coordinator's contexts are pinned to, by context: history a
    /// pin needs is kept when history is deleted.
    let generationPins = Mutex<[ObjectIdentifier: (context: WeakContext, numbers: [UUID: Int64])]>([:])

    /// Adds `context` to the coordinator's live contexts.
    func register(_ context: ManagedObjectContext) {
        context.link.logger = logger
        contextList.withLock { list in
            list.removeAll { $0.context == nil || $0.context === context }
            list.append(WeakContext(context: context))
        }
    }

    /// The live root contexts of the coordinator and, after each, its descendants.
    func liveContexts() -> [ManagedObjectContext] {
        let roots = contextList.withLock { list in
            list.removeAll { $0.context == nil }
            return list.compactMap(\.context)
        }
        var all: [ManagedObjectContext] = []
        func add(_ context: ManagedObjectContext) {
            all.append(context)
            for child in context.children.all { add(child) }
        }
        for root in roots where root.parent == nil && root.persistentStoreCoordinator === self { add(root) }
        return all
    }

    func locked<R>(_ body: () throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        let result = try body()
        // What this access saw of the files may show another connection's commits.
        if remoteChecking.onAccess.load(ordering: .relaxed) { noticeRemoteChanges(stores) }
        return result
    }

    // MARK: Stores

    /// The stores, in the order they were added.
    public var persistentStores: [any PersistentStore] { locked { stores } }

    /// Adds a store (objects of entities it accepts are saved to the first such store).
    public func addPersistentStore(_ store: any PersistentStore) {
        locked { stores.append(store) }
        observer.added(store, model: managedObjectModel)
    }

    /// Opens (creating when missing) a native store at `path` and adds it; a store made with
    /// another model migrates first when `migration` allows it (docs/migration.md).
    ///
    /// `history` says whether it records persistent history (docs/history.md).
    ///
    /// - Throws: ``ArborError/Code/incompatibleModel``, ``ArborError/Code/storeOpen``.
    @discardableResult
    public func addNativeStore(at path: String, configuration: String? = nil, options: DatabaseOptions = DatabaseOptions(),
                               migration: MigrationOptions = MigrationOptions(), history: PersistentHistoryTracking = .off) throws -> NativeStore {
        let store: NativeStore
        do {
            store = try NativeStore(path: path, model: managedObjectModel, configuration: configuration, options: options, migration: migration,
                                    history: history)
        } catch {
            observer.storeFailedToOpen(path, error)
            throw error
        }
        addPersistentStore(store)
        return store
    }

    /// Adds an in-memory store (the engine over memory); `history` says whether it records
    /// persistent history.
    @discardableResult
    public func addInMemoryStore(configuration: String? = nil, history: PersistentHistoryTracking = .off) throws -> NativeStore {
        let store = try NativeStore.inMemory(model: managedObjectModel, configuration: configuration, history: history)
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
        // Checked before an ID is made: a URI naming an entity or a store this coordinator does
        // not know makes no ID space (they are kept for the life of the process).
        guard let (entity, namespace, key) = ManagedObjectID.components(ofURI: uri),
              managedObjectModel.entity(named: entity) != nil,
              key < 0 || locked({ store(identified: namespace) }) != nil,
              let space = ObjectIDSpace.interned(entity, namespace, untrusted: true) else { return nil }
        return ManagedObjectID(space: space, key: key)
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
            result.hits += filledHits.load(ordering: .relaxed)
            return result
        }
    }

    /// The snapshot of `objectID` for a fault fire, and its row: the cached one when its age is
    /// within `staleness` (negative: any age), else one read from the store. The caller holds a
    /// reference to the snapshot returned, in place of `held` (the snapshot it held before, if
    /// any; the one a fetch gave a fault is checked without a lookup). Nil when there is no such
    /// row (`held` is then left as it was).
    func fetchSnapshot(for objectID: ManagedObjectID, held: RowSnapshot?, staleness: TimeInterval) throws -> (RowSnapshot, StoreRow)? {
        try locked {
            let cached = if let held, held.isCached, held.objectID == objectID { held } else { cache[objectID] }
            if let cached {
                if staleness < 0 || Self.seconds(since: cached.readAt) <= staleness {
                    statistics.hits += 1
                    return (adopt(cached, replacing: held), cached.row)
                }
                statistics.staleReads += 1
            } else {
                statistics.misses += 1
            }
            guard let row = try requireStore(of: objectID).row(for: objectID) else {
                if let cached { drop(cached) }
                return nil
            }
            let now = ContinuousClock.now
            if let cached {
                cached.replace(row, readAt: now)
                return (adopt(cached, replacing: held), row)
            }
            let made = RowSnapshot(objectID: objectID, row: row, readAt: now, coordinator: self)
            cache[objectID] = made
            return (adopt(made, replacing: held), row)
        }
    }

    /// Counts a fault fire answered by the values a fetch gave the fault from its snapshot (a
    /// hit: ``ManagedObject/fireFault()``).
    func countFilledHit() {
        filledHits.add(1, ordering: .relaxed)
    }

    /// One more reference to `snapshot`, in place of `held` (call with the lock held).
    private func adopt(_ snapshot: RowSnapshot, replacing held: RowSnapshot?) -> RowSnapshot {
        guard snapshot !== held else { return snapshot }
        snapshot.references.add(1, ordering: .relaxed)
        if let held { releaseLocked(held) }
        return snapshot
    }

    /// Takes `snapshot` out of the cache (its row is gone); its holders keep it, unused (call
    /// with the lock held).
    private func drop(_ snapshot: RowSnapshot) {
        guard snapshot.isCached else { return }
        snapshot.markDropped()
        cache[snapshot.objectID] = nil
    }

    /// Takes the snapshots of `store`'s rows out of the cache (the store was taken out: a store
    /// added again with the same identifier, a restored copy, must read its rows afresh). Call
    /// with the lock held.
    func forgetRows(of store: UUID) {
        var gone: [RowSnapshot] = []
        cache.forEachValue { if $0.objectID.storeIdentifier == store { gone.append($0) } }
        for snapshot in gone { drop(snapshot) }
    }

    /// The age of a snapshot in seconds (compared as a `Double`, so that any staleness interval,
    /// however large, is accepted).
    static func seconds(since instant: ContinuousClock.Instant) -> Double {
        let age = (ContinuousClock.now - instant).components
        return Double(age.seconds) + Double(age.attoseconds) / 1e18
    }

    /// One more managed object holds data from each row's snapshot (after a fetch or a save): the
    /// rows replace what the cache had. Returns the snapshots, in the order of `rows`.
    func retainSnapshots(_ rows: [(ManagedObjectID, StoreRow)]) -> [RowSnapshot] {
        var result: [RowSnapshot] = []
        result.reserveCapacity(rows.count)
        // Each field read in place (a copy of the tuple goes through generic code).
        rows.withUnsafeBufferPointer { rows in
            retainSnapshots(count: rows.count, consuming: false, { index in
                let element = rows.baseAddress.unsafelyUnwrapped.advanced(by: index)
                return (element.pointer(to: \.0).unsafelyUnwrapped.pointee, UnsafeMutablePointer(mutating: element.pointer(to: \.1).unsafelyUnwrapped))
            }, { _, snapshot in result.append(consume snapshot) })
        }
        return result
    }

    /// One more reference to each of `count` snapshots, under one lock: `row(index)` gives the
    /// object ID and the row of the `index`th, and `body(index, snapshot)` runs with the lock
    /// still held once its snapshot has the reference (it may read the snapshot's row, and must
    /// call out to nothing). With `consuming`, a new snapshot takes its row away from where
    /// `row` points, leaving ``StoreRow/placeholder`` there (no count on the row's values for
    /// the copy, nor for dropping the original): the rows must then be the caller's own,
    /// unshared; without, they are only read (and may be an immutable array's).
    func retainSnapshots(count: Int, consuming: Bool, _ row: (Int) -> (ManagedObjectID, UnsafeMutablePointer<StoreRow>),
                         _ body: (Int, __owned RowSnapshot) -> Void) {
        guard count > 0 else { return }
        let now = ContinuousClock.now
        locked {
            for index in 0..<count {
                let (objectID, stored) = row(index)
                body(index, retainLocked(objectID, stored, consuming: consuming, at: now))
            }
        }
    }

    /// One more reference to the snapshot of `objectID`, made from `row` when the cache has
    /// none — taking the row away with `consuming` (call with the lock held).
    private func retainLocked(_ objectID: ManagedObjectID, _ row: UnsafeMutablePointer<StoreRow>, consuming: Bool,
                              at now: ContinuousClock.Instant) -> RowSnapshot {
        var made = false
        let snapshot = cache.value(for: objectID) {
            made = true
            let taken = consuming ? exchange(&row.pointee, with: StoreRow.placeholder) : row.pointee
            // Made with its first reference (set, not counted atomically).
            return RowSnapshot(objectID: objectID, row: taken, readAt: now, coordinator: self, references: 1)
        }
        // A row read before another context's save (the lock was let go in between) does not
        // replace the newer one that save put here. (A cached snapshot may be at no references:
        // its last holder counted down and has yet to drop it.)
        // The same row read again changes only the snapshot's time (faults filled from it
        // stay valid).
        if !made {
            if row.pointee.version >= snapshot.row.version {
                if row.pointee == snapshot.row { snapshot.touch(readAt: now) } else { snapshot.replace(row.pointee, readAt: now) }
            }
            snapshot.references.add(1, ordering: .relaxed)
        }
        return snapshot
    }

    /// Reads again the rows of those of `ids` the cache holds (another coordinator saved them):
    /// the snapshots take the stored rows, and those whose rows are gone are dropped.
    func reloadSnapshots(_ ids: [ManagedObjectID]) throws {
        try locked {
            let cached = ids.compactMap { cache[$0] }
            guard !cached.isEmpty else { return }
            let now = ContinuousClock.now
            for (snapshot, row) in zip(cached, try rows(for: cached.map(\.objectID))) {
                if let row {
                    snapshot.replace(row, readAt: now)
                } else {
                    drop(snapshot)
                }
            }
        }
    }

    /// The cached row of `objectID`, if the cache holds one.
    func cachedRow(for objectID: ManagedObjectID) -> StoreRow? {
        locked { cache[objectID]?.row }
    }

    /// A managed object no longer holds data from `snapshot`; the last one drops it from the
    /// cache. Takes the lock only then (a fetch may have taken a new reference meanwhile: the
    /// count is read again under the lock).
    func release(_ snapshot: RowSnapshot) {
        let left = snapshot.references.subtract(1, ordering: .relaxed).newValue
        guard left <= 0 else { return }
        checkReleased(snapshot, left: left)
        locked { if snapshot.references.load(ordering: .relaxed) <= 0 { drop(snapshot) } }
    }

    /// ``release(_:)`` with the lock held.
    private func releaseLocked(_ snapshot: RowSnapshot) {
        let left = snapshot.references.subtract(1, ordering: .relaxed).newValue
        guard left <= 0 else { return }
        checkReleased(snapshot, left: left)
        drop(snapshot)
    }

    // MARK: The row cache's invariants

    /// What is wrong with the row cache now, one sentence per broken rule (empty: nothing). The
    /// rules, which every reference, release, refresh and drop keeps:
    ///
    /// 1. Every snapshot the cache holds is marked cached, and filed under its own object's ID.
    /// 2. No snapshot's reference count is below zero (a release without its reference).
    ///
    /// - Complexity: O(*n*) in the number of snapshots cached.
    func rowCacheViolations() -> [String] {
        locked {
            var problems: [String] = []
            var count = 0
            cache.forEachValue { snapshot in
                count += 1
                if !snapshot.isCached { problems.append("the snapshot of \(snapshot.objectID) is in the cache and marked dropped") }
                if cache[snapshot.objectID] !== snapshot { problems.append("the snapshot of \(snapshot.objectID) is filed under another ID") }
                let references = snapshot.references.load(ordering: .relaxed)
                if references < 0 { problems.append("the snapshot of \(snapshot.objectID) has \(references) references") }
            }
            if count != cache.count { problems.append("the cache counts \(cache.count) snapshots and holds \(count)") }
            return problems
        }
    }

    /// In builds with Arbor's checks (`ARBOR_INVARIANTS`), stops the program when a release
    /// takes a snapshot's references below zero (an object released the snapshot twice, or one
    /// it never held); other builds compile it away.
    @inline(__always)
    private func checkReleased(_ snapshot: RowSnapshot, left: Int) {
        #if ARBOR_INVARIANTS
        if left < 0 { preconditionFailure("Arbor invariant broken: the row cache's snapshot of \(snapshot.objectID) was released once more than referenced") }
        #endif
    }

    /// In builds with Arbor's checks, stops the program when the row cache breaks a rule of
    /// ``rowCacheViolations()``; other builds compile it away. Called after every save.
    @inline(__always)
    func checkRowCacheInvariants() {
        #if ARBOR_INVARIANTS
        let problems = rowCacheViolations()
        if !problems.isEmpty { preconditionFailure("Arbor invariant broken in the row cache: \(problems.joined(separator: "; "))") }
        #endif
    }

    // MARK: Fetching

    /// The stores holding objects of `entity` (by their configurations), in the order added.
    func stores(holding entity: EntityDescription) -> [any PersistentStore] {
        locked { stores.filter { managedObjectModel.configuration($0.configurationName, includes: entity) } }
    }

    /// The rows of a fetch from each of `stores`, one after the other (the caller merges the
    /// order and applies the window when there are several).
    func fetch(_ request: StoreFetch, in stores: [any PersistentStore]) throws -> [(ManagedObjectID, StoreRow)] {
        try locked { stores.count == 1 ? try stores[0].fetch(request) : try stores.flatMap { try $0.fetch(request) } }
    }

    /// The rows of `ids` (nil for those that are gone), read store by store, each store once.
    func rows(for ids: [ManagedObjectID]) throws -> [StoreRow?] {
        try storeByStore(ids) { store, ids in try store.rows(for: ids) }
    }

    /// The value of the attribute `name` in the rows of `ids` (nil where a row is gone or holds
    /// nil), read store by store.
    func attributeValues(_ name: String, of ids: [ManagedObjectID]) throws -> [AttributeValue?] {
        try storeByStore(ids) { store, ids in try store.attributeValues(name, of: ids) }
    }

    /// `read` of each store given the IDs of `ids` it holds (once per store), the answers put
    /// back in `ids`' order; nil for IDs of no store of this coordinator.
    private func storeByStore<Value>(_ ids: [ManagedObjectID],
                                     _ read: (any PersistentStore, [ManagedObjectID]) throws -> [Value?]) throws -> [Value?] {
        try locked {
            // All of one store (the common case): asked as they are, nothing regrouped.
            if let first = ids.first?.storeIdentifier, let store = store(identified: first),
               ids.allSatisfy({ $0.storeIdentifier == first }) {
                let values = try read(store, ids)
                // One value per ID, as the general way gives (whatever the store answered).
                return values.count == ids.count ? values : ids.indices.map { $0 < values.count ? values[$0] : nil }
            }
            var result = [Value?](repeating: nil, count: ids.count)
            var byStore: [UUID: [Int]] = [:]
            for (position, id) in ids.enumerated() {
                guard let store = id.storeIdentifier else { continue }
                byStore[store, default: []].append(position)
            }
            for (identifier, positions) in byStore {
                guard let store = store(identified: identifier) else { continue }
                for (position, value) in zip(positions, try read(store, positions.map { ids[$0] })) { result[position] = value }
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

    /// The destinations of the to-many `relationship` of several saved objects, read store by
    /// store, each store once; nil for IDs of no store of this coordinator.
    func relatedObjectIDs(ofEach ids: [ManagedObjectID], relationship: RelationshipDescription) throws -> [[ManagedObjectID]?] {
        try storeByStore(ids) { store, ids in try store.relatedObjectIDs(ofEach: ids, relationship: relationship) }
    }

    /// New permanent IDs for objects of `entity`, in `store` (by default the store the entity's
    /// objects are saved to).
    func allocateObjectIDs(for entity: EntityDescription, count: Int, in chosen: (any PersistentStore)? = nil) throws -> [ManagedObjectID] {
        try locked {
            let store = try chosen ?? store(for: entity)
            let space = ObjectIDSpace.interned(entity.name, store.identifier)
            return try store.allocatePrimaryKeys(for: entity, count: count).map { ManagedObjectID(space: space, key: $0) }
        }
    }

    /// The coordinator's phase of a save (docs/object-graph-internals.md, "Saving, step by step"): writes
    /// `parts`, one per store, and brings the row cache up to date from each part's change
    /// record. Returns, for each part, what its store's save did (``PersistentStore/save(_:)``),
    /// and the save's record: the parts' records, one after the other.
    ///
    /// Stores that nest (``NestingStore``) write their parts nested, each inside the previous one's transaction, and
    /// commit from the last back to the first: every store's conflicts are found in the one
    /// pass, a conflict or a failure before the commits leaves every store as it was, and only
    /// a commit failing after a later store committed saves part of the save. Another kind of
    /// store commits its part before the next store writes.
    ///
    /// - Throws: the conflicts of every store together (``ArborError/Code/mergeConflict`` when
    ///   there are optimistic-locking conflicts, else ``ArborError/Code/constraintConflict``),
    ///   a store's error, or ``PartialSave`` when some parts were saved and another failed.
    func save(_ parts: [(store: UUID, changes: StoreChanges)]) throws -> StoresSaved {
        // Long: the nested `gather`, `checked` and `write(from:)` share `results` and the conflicts
        // gathered across the recursion that nests each store's write in the previous one's
        // transaction.
        try locked {
            let stores = try parts.map { part in
                guard let store = store(identified: part.store) else { throw ArborError(.misuse, "a save names a store the coordinator does not have") }
                return store
            }
            var results = [StoreSaveResult?](repeating: nil, count: parts.count)
            var locking: [MergeConflict] = []
            var constraints: [ConstraintConflict] = []
            /// Takes the conflicts a store's own write met (false: `error` is no such error).
            func gather(_ error: ArborError) -> Bool {
                switch error.code {
                case .mergeConflict where !error.conflicts.isEmpty:
                    // The row cache's row is the coordinator's to add.
                    locking += error.conflicts.map {
                        MergeConflict(objectID: $0.objectID, objectSnapshot: $0.objectSnapshot, cachedSnapshot: cache[$0.objectID]?.row,
                                      persistedSnapshot: $0.persistedSnapshot, oldVersionNumber: $0.oldVersionNumber, newVersionNumber: $0.newVersionNumber)
                    }
                case .constraintConflict where !error.constraintConflicts.isEmpty:
                    constraints += error.constraintConflicts
                default:
                    return false
                }
                return true
            }
            func checked(_ result: StoreSaveResult, _ index: Int) throws -> StoreSaveResult {
                guard result.insertedIDs.count == parts[index].changes.insertedCount else {
                    throw ArborError(.storeSave, "the store \(parts[index].store) returned \(result.insertedIDs.count) IDs for \(parts[index].changes.insertedCount) new rows")
                }
                return result
            }
            /// Writes part `index` and, inside its transaction, the parts after it.
            func write(from index: Int) throws {
                guard index < parts.count else {
                    // Every part written: conflicts met anywhere roll them all back. Uniqueness
                    // conflicts met beside locking ones may be of rows the write skipped; they
                    // are looked for again once the locking ones are settled.
                    if !locking.isEmpty { throw ArborError.conflicts(locking) }
                    if !constraints.isEmpty { throw ArborError.constraintConflicts(constraints) }
                    return
                }
                if let nesting = stores[index] as? any NestingStore {
                    var wrote = false
                    do {
                        // A nesting store makes the new rows as it writes them.
                        results[index] = try nesting.save(parts[index].changes) { result in
                            wrote = true
                            _ = try checked(result, index)
                            try write(from: index + 1)
                        }
                    } catch let error as ArborError where !wrote && gather(error) {
                        try write(from: index + 1)
                    }
                } else {
                    do {
                        // Another store is given the new rows all at once.
                        results[index] = try checked(try stores[index].save(parts[index].changes.materialized()), index)
                    } catch let error as ArborError where gather(error) {}
                    try write(from: index + 1)
                }
            }
            /// The record of the parts saved, the cache brought up to date from each.
            func record(of saved: [Int]) -> ChangeRecord {
                var total = ChangeRecord()
                for index in saved {
                    let record = ChangeRecord(saving: parts[index].changes, result: results[index]!, store: parts[index].store) { cache[$0] != nil }
                    refreshCache(after: record)
                    if saved.count == 1 { return record }
                    total.append(record)
                }
                return total
            }
            do {
                try write(from: 0)
            } catch {
                let saved = results.indices.filter { results[$0] != nil }
                guard !saved.isEmpty else { throw error }
                let record = record(of: saved)
                throw PartialSave(saved: Dictionary(uniqueKeysWithValues: saved.map { ($0, results[$0]!) }), record: record, failure: error)
            }
            let record = record(of: Array(parts.indices))
            checkRowCacheInvariants()
            return StoresSaved(results: results.map { $0! }, record: record)
        }
    }

    /// Runs a batch delete in every store holding `entity` (or holding the objects of
    /// `objectIDs`), each in one transaction, and brings the row cache up to date from each
    /// store's record: the deleted rows' snapshots are dropped, the nullified rows' replaced
    /// (docs/batch-requests.md). Returns the stores' records, one after the other.
    func batchDelete(entity: EntityDescription?, fetch: StoreFetch?, objectIDs: [ManagedObjectID], origin: TransactionOrigin) throws -> ChangeRecord {
        try locked {
            var parts: [(any BatchRequestStore, StoreFetch?, [ManagedObjectID])] = []
            func batchStore(_ store: any PersistentStore) throws -> any BatchRequestStore {
                try capability((any BatchRequestStore).self, of: store, for: "a batch delete")
            }
            if let entity, let fetch {
                for store in stores(holding: entity) { parts.append((try batchStore(store), fetch, [])) }
            } else {
                var byStore: [UUID: [ManagedObjectID]] = [:]
                var order: [UUID] = []
                for id in objectIDs {
                    guard let identifier = id.storeIdentifier, !id.isTemporaryID, self.store(identified: identifier) != nil else {
                        throw ArborError(.misuse, "a batch delete names \(id), which is not a saved object of this coordinator's stores", objectID: id)
                    }
                    if byStore[identifier] == nil { order.append(identifier) }
                    byStore[identifier, default: []].append(id)
                }
                for identifier in order { parts.append((try batchStore(self.store(identified: identifier)!), nil, byStore[identifier]!)) }
            }
            var total = ChangeRecord()
            for (store, fetch, ids) in parts {
                let record = try store.batchDelete(matching: fetch, objectIDs: ids, origin: origin)
                refreshCache(after: record)
                total.append(record)
            }
            return total
        }
    }

    /// Runs a batch update in every store holding `entity` (each a ``BatchRequestStore``), each in one
    /// transaction, and gives the row cache the rows written. Returns the stores' records, one
    /// after the other.
    func batchUpdate(entity: EntityDescription, fetch: StoreFetch, excluding excluded: Set<ManagedObjectID>, changing: Set<String>,
                     origin: TransactionOrigin, _ change: (ManagedObjectID, StoreRow) throws -> StoreRow?) throws -> ChangeRecord {
        try locked {
            var total = ChangeRecord()
            for store in stores(holding: entity) {
                let record = try capability((any BatchRequestStore).self, of: store, for: "a batch update").batchUpdate(matching: fetch, excluding: excluded, changing: changing, origin: origin, change)
                refreshCache(after: record)
                total.append(record)
            }
            return total
        }
    }

    /// Brings the row cache up to date from a store's record of a save or a batch request: the
    /// snapshots of rows it wrote take the written rows, those of rows it deleted are dropped.
    /// Called under the lock.
    private func refreshCache(after record: ChangeRecord) {
        let now = ContinuousClock.now
        for (id, row) in record.writtenRows {
            cache[id]?.replace(row, readAt: now)
        }
        for id in record.deleted {
            if let snapshot = cache[id] { drop(snapshot) }
        }
    }
}

/// What the stores of a save did: each part's result, in the order of the parts, and the
/// save's change record.
struct StoresSaved {
    let results: [StoreSaveResult]
    let record: ChangeRecord
}

/// A save over several stores that failed after some stores had saved their parts: `saved`
/// holds what each of those did, by the part's index.
struct PartialSave: Error {
    /// What the stores that saved their parts did, by the part's index.
    let saved: [Int: StoreSaveResult]
    /// The record of the parts saved.
    let record: ChangeRecord
    let failure: any Error
}
