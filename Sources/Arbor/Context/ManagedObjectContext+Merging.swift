import Foundation
import OrderedCollections
import Synchronization

/// Merging what other contexts saved (S000-37, S001-25; docs/contexts.md, "Merging another
/// context's save").
extension ManagedObjectContext {
    /// Brings in a save of another context, from its ``didSaveObjectsNotification``: objects it
    /// updated that are registered here are refreshed (this context's unsaved changes stay on
    /// top, as with ``refresh(_:mergeChanges:)``), objects it inserted are registered as faults,
    /// and objects it deleted are deleted here and forgotten. Only the notification's object IDs
    /// are used, so it may come from a context on another queue (S003-15) — or on another
    /// coordinator of the same store file, whose rows are then read afresh. Ends with a
    /// ``didChangeObjectsNotification`` naming what changed here.
    public func mergeChanges(fromContextDidSave notification: Notification) {
        checkQueue()
        guard let change = ContextChange(notification), change.kind == .didSave else { return }
        let sender = notification.userInfo?[Self.coordinatorKey] as? PersistentStoreCoordinator
        merge(ChangeRecord(didSave: notification, change), fromOwnCoordinator: sender === persistentStoreCoordinator)
    }

    /// Merges a save made elsewhere (another process, say) into each of `contexts`, on each
    /// context's queue — at once for a context the calling thread may use now, else before that
    /// context's next block, fetch or save (the caller does not wait for its queue): `changes` holds, under ``NotificationKey/insertedObjects``,
    /// ``NotificationKey/updatedObjects`` and ``NotificationKey/deletedObjects`` (or their ID
    /// keys), collections of ``ManagedObjectID``s or of their URIs. IDs no context's coordinator
    /// knows are skipped. The rows are read afresh from the store.
    public static func mergeChanges(fromRemoteContextSave changes: [AnyHashable: Any], into contexts: [ManagedObjectContext]) {
        func values(_ keys: NotificationKey...) -> [Any] {
            keys.flatMap { key -> [Any] in
                guard let value = changes[key.rawValue] else { return [] }
                if let many = value as? any Sequence { return many.map { $0 as Any } }
                return [value]
            }
        }
        let inserted = values(.insertedObjects, .insertedObjectIDs)
        let updated = values(.updatedObjects, .updatedObjectIDs)
        let deleted = values(.deletedObjects, .deletedObjectIDs)
        // Posted to every context first, then delivered: none is waited for
        // (ManagedObjectContext+MergeInbox.swift).
        var posted: [ManagedObjectContext] = []
        for context in contexts {
            guard let coordinator = context.persistentStoreCoordinator else { continue }
            func ids(_ values: [Any]) -> Set<ManagedObjectID> {
                Set(values.compactMap { value -> ManagedObjectID? in
                    if let id = value as? ManagedObjectID { return coordinator.knows(id) ? id : nil }
                    return (value as? URL).flatMap(coordinator.managedObjectID(forURIRepresentation:))
                })
            }
            var record = ChangeRecord()
            record.inserted = Array(ids(inserted))
            record.updated = OrderedSet(ids(updated))
            record.deleted = OrderedSet(ids(deleted))
            context.postMerge(PendingMerge(record: record, fromOwnCoordinator: false, source: .requested))
            posted.append(context)
        }
        for context in posted { context.deliverMerges(.whereWaitingWould) }
    }

    /// Whether the context merges, on its own queue, the saves of its parent context and of the
    /// parent's other children — or, with no parent context, of the other contexts of its
    /// coordinator that have none either (S001-25).
    /// False by default. A confinement context merges on the thread of the saving context, so
    /// both must be used from one thread.
    public var automaticallyMergesChangesFromParent: Bool {
        get { mergeObserver != nil }
        set { onQueue { setMergesAutomatically(newValue) } }
    }

    /// Starts or stops observing other contexts' saves (on the context's queue, or before anyone
    /// else can see the context).
    func setMergesAutomatically(_ merges: Bool) {
        guard merges != (mergeObserver != nil) else { return }
        self.merges.takesAutomaticMerges.store(merges, ordering: .releasing)
        if let mergeObserver {
            NotificationCenter.default.removeObserver(mergeObserver)
            self.mergeObserver = nil
            return
        }
        // Held as a `WeakContext`, not captured `weak`: that would give the context a side table.
        let context = WeakContext(context: self)
        mergeObserver = NotificationCenter.default.addObserver(forName: Self.didSaveObjectsNotification, object: nil, queue: nil) { notification in
            context.context?.anotherContextDidSave(notification)
        }
    }

    /// A did-save of some context, seen by a context that merges automatically: merged when it
    /// is its parent's, or a sibling root's on the same coordinator.
    private func anotherContextDidSave(_ notification: Notification) {
        guard let sender = notification.object as? ManagedObjectContext, sender !== self,
              let change = ContextChange(notification) else { return }
        if let parent {
            // The parent's saves, and its other children's (they saved into the parent).
            guard sender === parent || sender.parent === parent else { return }
        } else {
            guard sender.parent == nil, let coordinator = persistentStoreCoordinator,
                  notification.userInfo?[Self.coordinatorKey] as? PersistentStoreCoordinator === coordinator else { return }
        }
        postMerge(PendingMerge(record: ChangeRecord(didSave: notification, change), fromOwnCoordinator: true, source: .automatic))
        deliverMerges(.wherePerformWould)
    }

    /// Merges a record of changes made elsewhere (by ID). `fromOwnCoordinator`: they went through
    /// this context's coordinator (or parent), whose row cache already holds the rows written.
    func merge(_ record: ChangeRecord, fromOwnCoordinator: Bool) {
        // What this context did so far is an event of its own. The merge itself is not undoable:
        // it brings in what is saved, and undoing it would put back values the store no longer has.
        processPendingChanges()
        // A pinned context merging a save moves on to the current generation.
        moveQueryGenerationOn()
        let suspended = undoRecording.suspend()
        defer { undoRecording.resume(suspended) }
        if !fromOwnCoordinator, parent == nil, let coordinator = persistentStoreCoordinator {
            try? coordinator.reloadSnapshots(Array(record.updated.union(record.deleted)))
        }
        for id in record.updated {
            guard let object = registeredObject(for: id), !object.insertedFlag else { continue }
            if object.faulted {
                // Fires with the saved row when next used.
                object.leaveFaultBatch()
            } else {
                refresh(object, mergeChanges: true)
            }
        }
        // Objects whose to-many relationships gained or lost members read them again (those
        // this context changed keep its changes).
        for id in record.related {
            guard let object = registeredObject(for: id), !object.faulted, !object.insertedFlag else { continue }
            for (relationship, slot) in zip(object.entity.relationships, object.entity.relationshipSlots)
            where relationship.isToMany && !object.unloadedRelationships.contains(relationship.name) && !object.changedSlots.contains(slot) {
                object.observingChange(of: slot) { object.unloadRelationship(relationship.name, slot: slot) }
            }
        }
        // Objects deleted there are deleted here: their delete rules unlink what this context
        // still relates to them; then they leave the context (their rows are gone already). Only
        // their rules run now: this context's own deletions wait as they would have.
        var gone: [ManagedObject] = []
        let waiting = pendingDeletes
        pendingDeletes = []
        for id in record.deleted {
            guard let object = registeredObject(for: id) else { continue }
            gone.append(object)
            if !object.deletedFlag {
                object.markDeleted()
                pendingDeletes.append(object)
            }
        }
        propagateDeletes()
        pendingDeletes = waiting
        forget(gone)
        // Faults of the objects inserted there ("faults in any newly-inserted objects": seed 000).
        for id in record.inserted where registeredObject(for: id) == nil {
            if let entity = modelEntity(of: id) { noteInserted(makeFault(id, entity: entity)) }
        }
        postObjectsDidChange()
    }
}

extension ChangeRecord {
    /// The record of a context's save, from its did-save `notification` (whose `change` it is):
    /// the stores' record a root context's save carries, else (a child's save, or a
    /// notification made by hand) one made from the change's IDs.
    init(didSave notification: Notification, _ change: ContextChange) {
        if let record = notification.userInfo?[ManagedObjectContext.changeRecordKey] as? ChangeRecord,
           record.inserted.count == change.insertedObjectIDs.count, record.updated.count == change.updatedObjectIDs.count,
           record.deleted.count == change.deletedObjectIDs.count {
            self = record
            return
        }
        self.init()
        inserted = Array(change.insertedObjectIDs)
        updated = OrderedSet(change.updatedObjectIDs)
        deleted = OrderedSet(change.deletedObjectIDs)
    }
}

/// The child contexts of a context, held weakly (a child holds its parent, not the reverse).
final class ChildContexts: @unchecked Sendable {
    private let lock = NSLock()
    private var contexts: [ObjectIdentifier: WeakContext] = [:]


    /// Whether a child was ever added (read without the lock, on every ID a save replaces).
    private let everAdded = Atomic<Bool>(false)
    var hadAny: Bool { everAdded.load(ordering: .relaxed) }

    func add(_ context: ManagedObjectContext) {
        lock.withLock {
            dropEnded()
            contexts[ObjectIdentifier(context)] = WeakContext(context: context)
        }
        everAdded.store(true, ordering: .relaxed)
    }

    func remove(_ context: ManagedObjectContext) {
        _ = lock.withLock { contexts.removeValue(forKey: ObjectIdentifier(context)) }
    }

    /// The entries held, of children alive or ended (tests).
    var entryCount: Int { lock.withLock { contexts.count } }

    /// The children still alive.
    var all: [ManagedObjectContext] {
        lock.withLock {
            dropEnded()
            return contexts.values.compactMap(\.context)
        }
    }

    /// Drops the entries of children that ended (each keeps its context's memory); under the lock.
    private func dropEnded() {
        contexts = contexts.filter { $0.value.context != nil }
    }
}

/// A context held weakly (without the side table a `weak` reference would give it: every retain
/// and release of the context would take the runtime's slow path).
struct WeakContext: Sendable {
    private let reference: LeanWeakReference<ManagedObjectContext>

    init(context: ManagedObjectContext) { reference = LeanWeakReference(context) }

    /// The context, or nil once it has ended.
    var context: ManagedObjectContext? { reference.object }
}
