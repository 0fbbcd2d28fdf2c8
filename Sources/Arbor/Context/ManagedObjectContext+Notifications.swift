import Foundation

/// What a context changed, told as it happens: the notifications it posts through
/// `NotificationCenter.default` (S000-92…S000-96) and the same as a stream of ``ContextChange``
/// values (docs/contexts.md, "Notifications").
extension ManagedObjectContext {
    /// Posted by ``processPendingChanges()`` when the event it ends changed objects: user info
    /// under the ``NotificationKey`` keys (sets of objects and of IDs). Core Data's
    /// `NSManagedObjectContextObjectsDidChange`.
    public static let didChangeObjectsNotification = Notification.Name("ArborManagedObjectContextObjectsDidChange")
    /// Posted by ``save()`` before it commits; no user info (S000-96).
    public static let willSaveObjectsNotification = Notification.Name("ArborManagedObjectContextWillSave")
    /// Posted by ``save()`` after it committed: the inserted, updated and deleted objects (and
    /// their IDs), never objects inserted and deleted without a save between (S000-13).
    public static let didSaveObjectsNotification = Notification.Name("ArborManagedObjectContextDidSave")

    /// The keys of the notifications' user info (Core Data's, with the same strings).
    public enum NotificationKey: String, Sendable, CaseIterable {
        /// The objects inserted (`Set<ManagedObject>`).
        case insertedObjects = "inserted"
        /// The objects updated (`Set<ManagedObject>`).
        case updatedObjects = "updated"
        /// The objects deleted (`Set<ManagedObject>`).
        case deletedObjects = "deleted"
        /// The objects refreshed, without changes of their own in this context (`Set<ManagedObject>`).
        case refreshedObjects = "refreshed"
        /// The objects that left the context without being deleted (`Set<ManagedObject>`).
        case invalidatedObjects = "invalidated"
        /// Present (true) when every object left the context: ``reset()``.
        case invalidatedAllObjects = "invalidatedAll"
        /// The IDs of the inserted objects (`Set<ManagedObjectID>`).
        case insertedObjectIDs = "inserted_objectIDs"
        /// The IDs of the updated objects (`Set<ManagedObjectID>`).
        case updatedObjectIDs = "updated_objectIDs"
        /// The IDs of the deleted objects (`Set<ManagedObjectID>`).
        case deletedObjectIDs = "deleted_objectIDs"
        /// The IDs of the refreshed objects (`Set<ManagedObjectID>`).
        case refreshedObjectIDs = "refreshed_objectIDs"
        /// The IDs of the invalidated objects (`Set<ManagedObjectID>`).
        case invalidatedObjectIDs = "invalidated_objectIDs"
    }

    /// The user-info key under which a did-save carries the saving context's coordinator (a
    /// merge trusts that coordinator's row cache only when it is its own).
    static let coordinatorKey = "arbor.coordinator"
    /// The user-info key under which a root context's did-save carries its stores' change
    /// record, by ID (``ChangeRecord``): what contexts that merge the save take.
    static let changeRecordKey = "arbor.changeRecord"

    /// A stream of the context's changes: one ``ContextChange`` per notification it posts from
    /// now on. It ends when the consumer stops iterating or the context goes away.
    public var changes: AsyncStream<ContextChange> {
        let (stream, continuation) = AsyncStream<ContextChange>.makeStream(bufferingPolicy: .unbounded)
        let token = changeStreams.add(continuation)
        continuation.onTermination = { [weak streams = changeStreams] _ in streams?.remove(token) }
        return stream
    }

    // MARK: Recording an event

    /// Records that `object` was inserted in the current event.
    func noteInserted(_ object: ManagedObject) {
        guard object.eventMarks & EventMarks.inserted == 0 else { return }
        object.addEventMark(EventMarks.inserted)
        event.inserted.append(object)
    }

    /// Records that `object` changed in the current event (not reported for an object inserted
    /// in it).
    @inline(__always)
    func noteUpdated(_ object: ManagedObject) {
        guard object.eventMarks & (EventMarks.updated | EventMarks.inserted) == 0 else { return }
        object.addEventMark(EventMarks.updated)
        event.updated.append(object)
    }

    /// Records that `object` was deleted in the current event: an object inserted in the same
    /// event is simply no longer reported.
    func noteDeleted(_ object: ManagedObject) {
        if object.eventMarks & EventMarks.inserted != 0 {
            // Left in the list, unmarked: the notification skips it (no search per deletion).
            object.removeEventMark(EventMarks.inserted)
            return
        }
        guard object.eventMarks & EventMarks.deleted == 0 else { return }
        object.addEventMark(EventMarks.deleted)
        event.deleted.append(object)
    }

    /// Records that `object` was refreshed (reported as updated when it has changes of its own).
    func noteRefreshed(_ object: ManagedObject) {
        if object.hasChanges { return noteUpdated(object) }
        guard object.eventMarks & EventMarks.refreshed == 0 else { return }
        object.addEventMark(EventMarks.refreshed)
        event.refreshed.append(object)
    }

    /// Records that `object` left the context without being deleted.
    func noteInvalidated(_ object: ManagedObject) {
        event.invalidated.append(object)
    }

    /// Posts objects-did-change for the event that ends, if it changed anything, and starts a new
    /// one.
    func postObjectsDidChange() {
        guard !event.isEmpty else { return }
        var ended = event
        event = EventChanges()
        for list in [ended.updated, ended.deleted, ended.refreshed] {
            for object in list { object.clearEventMarks() }
        }
        // New objects deleted again within the event lost their mark: they are not reported.
        ended.inserted = ended.inserted.filter { object in
            defer { object.clearEventMarks() }
            return object.eventMarks & EventMarks.inserted != 0
        }
        ended.updated.removeAll { $0.deletedFlag }
        guard !ended.isEmpty else { return }
        var info: [AnyHashable: Any] = [:]
        var change = ContextChange(kind: .objectsDidChange)
        // Only the kinds the event has.
        func add(_ objects: [ManagedObject], _ key: NotificationKey, _ idKey: NotificationKey,
                 set: Set<ManagedObject>? = nil) -> Set<ManagedObjectID> {
            objects.isEmpty ? [] : Self.put(objects, key, idKey, in: &info, set: set)
        }
        let insertedSet = ended.inserted.isEmpty ? nil : Set(ended.inserted)
        change.insertedObjectIDs = add(ended.inserted, .insertedObjects, .insertedObjectIDs, set: insertedSet)
        lastInsertedSet = insertedSet.map { (ended.inserted, $0) }
        change.updatedObjectIDs = add(ended.updated, .updatedObjects, .updatedObjectIDs)
        change.deletedObjectIDs = add(ended.deleted, .deletedObjects, .deletedObjectIDs)
        change.refreshedObjectIDs = add(ended.refreshed, .refreshedObjects, .refreshedObjectIDs)
        change.invalidatedObjectIDs = add(ended.invalidated, .invalidatedObjects, .invalidatedObjectIDs)
        if ended.invalidatedAll {
            info[NotificationKey.invalidatedAllObjects.rawValue] = true
            change.invalidatedAllObjects = true
        }
        if let token = queryGeneration?.token { info[Self.queryGenerationKey] = token }
        post(Self.didChangeObjectsNotification, info, change)
    }

    /// Posts will-save (no user info).
    func postWillSave() {
        post(Self.willSaveObjectsNotification, nil, ContextChange(kind: .willSave))
    }

    /// Posts did-save for the objects a save committed (inserted ones with their permanent IDs),
    /// with the stores' record of a root save.
    func postDidSave(inserted: [ManagedObject], updated: [ManagedObject], deleted: [ManagedObject], record: ChangeRecord?) {
        // All three kinds, even when empty (room for every key: growing it rehashes its keys).
        var info = [AnyHashable: Any](minimumCapacity: 9)
        var change = ContextChange(kind: .didSave)
        // The set of new objects the save's first event posted, when it holds exactly these.
        let known = lastInsertedSet.flatMap { last in
            last.objects.count == inserted.count && zip(last.objects, inserted).allSatisfy { $0 === $1 } ? last.set : nil
        }
        lastInsertedSet = nil
        change.insertedObjectIDs = Self.put(inserted, .insertedObjects, .insertedObjectIDs, in: &info, set: known)
        change.updatedObjectIDs = Self.put(updated, .updatedObjects, .updatedObjectIDs, in: &info)
        change.deletedObjectIDs = Self.put(deleted, .deletedObjects, .deletedObjectIDs, in: &info)
        if let persistentStoreCoordinator { info[Self.coordinatorKey] = persistentStoreCoordinator }
        if let record { info[Self.changeRecordKey] = record.byID }
        // A pinned context moves on to the generation its save made.
        if queryGeneration != nil {
            moveQueryGenerationOn()
            if let token = queryGeneration?.token { info[Self.queryGenerationKey] = token }
        }
        post(Self.didSaveObjectsNotification, info, change)
    }

    /// Puts `objects` and their IDs into a notification's user info; returns the IDs.
    private static func put(_ objects: [ManagedObject], _ key: NotificationKey, _ idKey: NotificationKey,
                            in info: inout [AnyHashable: Any], set: Set<ManagedObject>? = nil) -> Set<ManagedObjectID> {
        var ids = Set<ManagedObjectID>(minimumCapacity: objects.count)
        for object in objects { ids.insert(object.objectID) }
        info[key.rawValue] = set ?? Set(objects)
        info[idKey.rawValue] = ids
        return ids
    }

    private func post(_ name: Notification.Name, _ info: [AnyHashable: Any]?, _ change: ContextChange) {
        NotificationCenter.default.post(name: name, object: self, userInfo: info)
        changeStreams.yield(change)
    }
}

/// Bits of ``ManagedObject/eventMarks``: how the current event has reported an object so far.
enum EventMarks {
    static let inserted: UInt8 = 1
    static let updated: UInt8 = 2
    static let deleted: UInt8 = 4
    static let refreshed: UInt8 = 8
}

/// The objects the current event changed, for its objects-did-change notification.
struct EventChanges {
    var inserted: [ManagedObject] = []
    var updated: [ManagedObject] = []
    var deleted: [ManagedObject] = []
    var refreshed: [ManagedObject] = []
    var invalidated: [ManagedObject] = []
    var invalidatedAll = false

    var isEmpty: Bool {
        inserted.isEmpty && updated.isEmpty && deleted.isEmpty && refreshed.isEmpty && invalidated.isEmpty && !invalidatedAll
    }
}

/// One notification of a context as a `Sendable` value: what kind it is and the IDs of the
/// objects it names (``ManagedObjectContext/changes``).
public struct ContextChange: Sendable, Equatable {
    /// Which notification.
    public enum Kind: Sendable, Hashable {
        /// ``ManagedObjectContext/didChangeObjectsNotification``.
        case objectsDidChange
        /// ``ManagedObjectContext/willSaveObjectsNotification``.
        case willSave
        /// ``ManagedObjectContext/didSaveObjectsNotification``.
        case didSave
    }

    /// Which notification this is.
    public var kind: Kind
    /// The IDs of the objects inserted (for a did-save, their permanent IDs).
    public var insertedObjectIDs: Set<ManagedObjectID> = []
    /// The IDs of the objects updated.
    public var updatedObjectIDs: Set<ManagedObjectID> = []
    /// The IDs of the objects deleted.
    public var deletedObjectIDs: Set<ManagedObjectID> = []
    /// The IDs of the objects refreshed.
    public var refreshedObjectIDs: Set<ManagedObjectID> = []
    /// The IDs of the objects invalidated.
    public var invalidatedObjectIDs: Set<ManagedObjectID> = []
    /// Whether every object was invalidated (``ManagedObjectContext/reset()``).
    public var invalidatedAllObjects = false

    /// An empty change of `kind`.
    public init(kind: Kind) {
        self.kind = kind
    }

    /// The change a notification of a context tells (nil for any other notification).
    public init?(_ notification: Notification) {
        switch notification.name {
        case ManagedObjectContext.didChangeObjectsNotification: kind = .objectsDidChange
        case ManagedObjectContext.willSaveObjectsNotification: kind = .willSave
        case ManagedObjectContext.didSaveObjectsNotification: kind = .didSave
        default: return nil
        }
        let info = notification.userInfo ?? [:]
        func ids(_ key: ManagedObjectContext.NotificationKey) -> Set<ManagedObjectID> {
            info[key.rawValue] as? Set<ManagedObjectID> ?? []
        }
        insertedObjectIDs = ids(.insertedObjectIDs)
        updatedObjectIDs = ids(.updatedObjectIDs)
        deletedObjectIDs = ids(.deletedObjectIDs)
        refreshedObjectIDs = ids(.refreshedObjectIDs)
        invalidatedObjectIDs = ids(.invalidatedObjectIDs)
        invalidatedAllObjects = info[ManagedObjectContext.NotificationKey.invalidatedAllObjects.rawValue] as? Bool ?? false
    }
}

/// The continuations of a context's ``ManagedObjectContext/changes`` streams.
final class ChangeStreams: @unchecked Sendable {
    private let lock = NSLock()
    private var continuations: [Int: AsyncStream<ContextChange>.Continuation] = [:]
    private var next = 0

    func add(_ continuation: AsyncStream<ContextChange>.Continuation) -> Int {
        lock.withLock {
            next += 1
            continuations[next] = continuation
            return next
        }
    }

    func remove(_ token: Int) {
        _ = lock.withLock { continuations.removeValue(forKey: token) }
    }

    func yield(_ change: ContextChange) {
        let all = lock.withLock { Array(continuations.values) }
        for continuation in all { continuation.yield(change) }
    }

    deinit {
        for continuation in continuations.values { continuation.finish() }
    }
}
