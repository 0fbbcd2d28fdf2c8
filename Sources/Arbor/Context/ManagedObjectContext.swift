import Dispatch
import Foundation
import OrderedCollections

// Safety: The unchecked fields (registry, change lists, event, held destinations, last key path,
// observation flag, undo recording) are used only on the context's queue, by code that calls out to no hook,
// observer or subclass while it changes them, so no two accesses overlap.

/// A scratch pad of managed objects: it registers the objects you insert and fetch (one instance
/// per object ID: uniquing), tracks their changes, applies delete rules, validates, saves them
/// through its coordinator and fires their faults.
///
/// A context is used from one queue (docs/concurrency.md): a private-queue context's work runs in
/// ``perform(_:)`` and ``performAndWait(_:)``; a main-queue context's on the main thread; a
/// confinement context (what ``init(persistentStoreCoordinator:)`` makes) on one thread at a
/// time of the caller's choosing. Its setters may be called from any thread. In debug builds
/// every entry point of the context and of its objects checks that it runs where it may.
/// Managed objects never cross queues; their ``ManagedObjectID``s do.
public final class ManagedObjectContext: @unchecked Sendable {
    /// The registered objects (see ``ObjectRegistry``): read and changed only through
    /// ``registeredObject(for:)``, ``allRegistered()``, ``register(_:strongly:)``,
    /// ``unregister(_:)`` and ``reregister(from:to:)`` (those that read or add purge the objects that
    /// ended first). No dynamic exclusivity check: a change to it calls out to nothing that could
    /// reach it again (an object that ends meanwhile posts to the link's inbox, not here).
    @exclusivity(unchecked) private(set) var registry = ObjectRegistry()
    /// The registry's link with the objects (``ContextLink``), kept here too: its inbox of ended
    /// objects is looked at on every lookup, without an access to the registry when it is empty.
    let link: ContextLink
    // The change lists and the event are changed in place for every object changed: no
    // dynamic exclusivity check. Only the context's own code changes them, and none of it calls
    // out — to hooks, observers or subclasses — while it does.
    @exclusivity(unchecked) var inserted = ChangeList()
    @exclusivity(unchecked) var updated = ChangeList()
    @exclusivity(unchecked) var deleted = ChangeList()
    /// The number of saves begun (each save's `willSave` round is told apart by it), wrapping
    /// (``beginSaveRound()``).
    var saveCount: UInt32 = 0
    /// Deleted objects whose delete rules have not been applied yet.
    var pendingDeletes: [ManagedObject] = []
    /// The objects to-one relationships handed out lately, held (``holdDestination(_:)``), and
    /// the place of the next to let go once the limit is reached.
    @exclusivity(unchecked) var heldDestinations: [ManagedObject] = []
    var nextHeldDestination = 0
    /// What the current event changed (posted by ``processPendingChanges()``).
    @exclusivity(unchecked) var event = EventChanges()
    /// The new objects the last objects-did-change reported, and the set it posted of them: a
    /// save's did-save reports the same objects (in the same order) when one event made them
    /// all, and posts the same set instead of building it again. Cleared by did-save.
    var lastInsertedSet: (objects: [ManagedObject], set: Set<ManagedObject>)?
    /// The last key path `value(forKeyPath:)` was asked on this context's objects, split into
    /// its keys (a loop over objects asks the same path of each).
    @exclusivity(unchecked) var lastKeyPath: (path: String, keys: [String])?
    /// The streams of ``changes``.
    let changeStreams = ChangeStreams()
    /// The query generation the context is pinned to (nil: it reads the stores as they are).
    var queryGeneration: QueryGeneration?
    /// New objects assigned to a store with `assign(_:to:)`, by (temporary) ID.
    var assignments: [ManagedObjectID: any PersistentStore] = [:]

    /// How the context is used from threads.
    public let concurrencyType: ConcurrencyType
    /// The queue work on the context runs on (nil for confinement).
    let queue: DispatchQueue?
    /// The lock of ``lock()``, ``unlock()`` and ``tryLock()``.
    let contextLock = NSRecursiveLock()

    /// The undo manager, what the current event changed for it, and whether undo records now
    /// (ManagedObjectContext+Undo.swift). Read on the path of every change, with no dynamic
    /// exclusivity check: its mutating methods call out to nothing.
    @exclusivity(unchecked) var undoRecording = UndoRecording()
    /// Temporary IDs replaced by permanent ones (old → new) while an undo manager records or the
    /// context has children: undo and redo steps keep the values they recorded, and a child's
    /// save may still name objects by IDs that a save of the root has since made permanent
    /// (forgotten at ``reset()``).
    var replacedTemporaryIDs: [ManagedObjectID: ManagedObjectID] = [:]
    /// Why the delete rules of some pending deletions could not be applied at the last end of
    /// event (they stay pending; a save fails with this error while it lasts).
    var deletePropagationFailure: (any Error)?
    /// The entity ``modelEntity(of:)`` found last.
    private var lastModelEntity: EntityDescription?
    /// The merge policy (``mergePolicy``).
    var _mergePolicy = MergePolicy.error
    /// Unchanged objects marked with ``detectConflicts(for:)`` since the last save.
    var conflictChecked: [ObjectIdentifier: ManagedObject] = [:]
    /// The observer of other contexts' saves, while ``automaticallyMergesChangesFromParent``.
    var mergeObserver: (any NSObjectProtocol)?

    private var _retainsRegisteredObjects = false
    private var _propagatesDeletesAtEndOfEvent = true
    private var _shouldDeleteInaccessibleFaults = true
    private var _stalenessInterval: TimeInterval = -1
    /// (Every assignment of a coordinator also registers the context among the coordinator's
    /// live contexts, which batch requests merge into.)
    private var _persistentStoreCoordinator: PersistentStoreCoordinator?
    private var _parent: ManagedObjectContext?
    /// The contexts whose parent this context is (told the permanent IDs of a root save).
    let children = ChildContexts()
    /// Permanent IDs sent by the parent, not applied yet.
    let permanentIDMailbox = LockedInbox<[ManagedObjectID: ManagedObjectID]>()
    /// Changes made elsewhere, waiting to be merged on the context's queue
    /// (ManagedObjectContext+MergeInbox.swift).
    let merges = MergeInbox()
    private var _name: String?
    private var _transactionAuthor: String?
    /// ``isObservationEnabled`` (read by the context's objects on its queue).
    @exclusivity(unchecked) var observationEnabled = false
    private var _userInfo: [String: any Sendable] = [:]

    /// Whether the context keeps every registered object alive (false by default: unchanged
    /// objects are not held, and go away when the application drops them).
    public var retainsRegisteredObjects: Bool {
        get { _retainsRegisteredObjects }
        set {
            onQueue {
                _retainsRegisteredObjects = newValue
                for object in allRegistered() { register(object) }
            }
        }
    }

    /// Whether delete rules are applied at the end of each event — at ``processPendingChanges()``
    /// — (true, the default) or only when saving (false).
    public var propagatesDeletesAtEndOfEvent: Bool {
        get { _propagatesDeletesAtEndOfEvent }
        set { onQueue { _propagatesDeletesAtEndOfEvent = newValue } }
    }

    /// Whether a fault whose row is gone is treated as deleted (true, as in Core Data) instead of
    /// failing with ``ArborError/Code/objectNotFound`` when it fires.
    public var shouldDeleteInaccessibleFaults: Bool {
        get { _shouldDeleteInaccessibleFaults }
        set { onQueue { _shouldDeleteInaccessibleFaults = newValue } }
    }

    /// How old cached row data may be when a fault fires or an object is refreshed: negative (the
    /// default, -1) means any age, 0 means always read the store.
    public var stalenessInterval: TimeInterval {
        get { _stalenessInterval }
        set { onQueue { _stalenessInterval = newValue } }
    }

    /// Whether a fault a fetch filled fires from its values without reading the row cache again
    /// (``ManagedObject/fireFault()``): in a root context accepting cached data of any age.
    /// Not in a context pinned to a query generation: a fault filled with a row of now may be
    /// one to read as it was.
    var firesFromFilledValues: Bool { _stalenessInterval < 0 && _parent == nil && queryGeneration == nil }

    /// The coordinator the context saves to and loads from (nil: a scratch context that can
    /// insert, relate, validate and roll back, but not save or fire faults). Setting another
    /// coordinator first resets the context (its objects belong to the old one).
    ///
    /// A child context (one with a ``parent``) has its root's coordinator; setting one makes the
    /// context a root again.
    public var persistentStoreCoordinator: PersistentStoreCoordinator? {
        get { _parent?.persistentStoreCoordinator ?? _persistentStoreCoordinator }
        set {
            onQueue {
                guard newValue !== persistentStoreCoordinator || _parent != nil else { return }
                if persistentStoreCoordinator != nil { reset() }
                detachFromParent()
                lastModelEntity = nil
                _persistentStoreCoordinator = newValue
                newValue?.register(self)
            }
        }
    }

    /// The context this one reads from and saves to, when it is a child context (nil for a root
    /// context, which uses its ``persistentStoreCoordinator``; S001-07). Setting one resets the
    /// context when it had a parent or coordinator before. A child's fetches and faults see its
    /// parent's unsaved state, and its saves go to the parent only (docs/contexts.md, "Parent and
    /// child contexts").
    ///
    /// - Precondition: neither context is a confinement context (S001-05, S003-03), and the
    ///   parent is not this context or one of its descendants.
    public var parent: ManagedObjectContext? {
        get { _parent }
        set {
            onQueue {
                guard newValue !== _parent else { return }
                if let newValue {
                    precondition(newValue.concurrencyType != .confinement && concurrencyType != .confinement,
                                 "confinement contexts cannot be parent or child contexts (S001-05, S003-03): a parent serves children on other queues, through its own queue; use .privateQueue or .mainQueue")
                    var ancestor: ManagedObjectContext? = newValue
                    while let next = ancestor {
                        precondition(next !== self, "a context cannot be its own ancestor")
                        ancestor = next.parent
                    }
                }
                if persistentStoreCoordinator != nil { reset() }
                detachFromParent()
                lastModelEntity = nil
                _persistentStoreCoordinator = nil
                _parent = newValue
                newValue?.children.add(self)
            }
        }
    }

    private func detachFromParent() {
        _parent?.children.remove(self)
        _parent = nil
    }

    /// A name for the context, for the application's own use and in Arbor's messages.
    public var name: String? {
        get { _name }
        set { onQueue { _name = newValue } }
    }

    /// The author that persistent history records for this context's saves and batch
    /// requests (Core Data's `transactionAuthor`): "the author for the context that is used as an
    /// identifier in persistent history transactions" (seed 001). An application names its
    /// importer, its extension or its sync engine, and skips its own transactions when it reads
    /// history (docs/history.md).
    public var transactionAuthor: String? {
        get { _transactionAuthor }
        set { onQueue { _transactionAuthor = newValue } }
    }

    /// Whether the context's managed objects report the properties read and changed to Swift's
    /// Observation framework, so that `withObservationTracking` — and SwiftUI — see them
    /// (docs/observation.md). True by default for a main-queue context (the one a user
    /// interface reads), false for the others: an object reports its first read by making an
    /// `ObservationRegistrar`, a few allocations that a background context reading thousands of
    /// objects need not pay.
    public var isObservationEnabled: Bool {
        get { observationEnabled }
        set { onQueue { observationEnabled = newValue } }
    }

    /// Who writes a transaction of this context's, for persistent history.
    func transactionOrigin(_ kind: PersistentHistoryTransactionKind) -> TransactionOrigin {
        TransactionOrigin(author: _transactionAuthor, contextName: _name, kind: kind)
    }

    /// Values the application keeps with the context.
    public var userInfo: [String: any Sendable] {
        get { _userInfo }
        set { onQueue { _userInfo = newValue } }
    }

    deinit {
        if let mergeObserver { NotificationCenter.default.removeObserver(mergeObserver) }
        // A pin to a query generation goes with the context (its entry would keep the
        // context's memory).
        unpinQueryGeneration()
        // Objects that outlive the context find nil through their link from now on.
        link.context = nil
    }

    /// Makes an empty confinement context on `coordinator`: used by one thread at a time, with
    /// no queue of its own (see ``ConcurrencyType/confinement``).
    public convenience init(persistentStoreCoordinator coordinator: PersistentStoreCoordinator? = nil) {
        self.init(concurrencyType: .confinement)
        _persistentStoreCoordinator = coordinator
        coordinator?.register(self)
    }

    /// A context set up before anyone else can see it (no hop to its queue: a main-queue
    /// context made off the main thread must not wait for the main queue).
    convenience init(concurrencyType: ConcurrencyType, coordinator: PersistentStoreCoordinator, name: String, mergesAutomatically: Bool) {
        self.init(concurrencyType: concurrencyType)
        _persistentStoreCoordinator = coordinator
        coordinator.register(self)
        _name = name
        setMergesAutomatically(mergesAutomatically)
    }

    /// Makes an empty context of `concurrencyType`; set its ``persistentStoreCoordinator`` next
    /// (from any thread).
    public init(concurrencyType: ConcurrencyType) {
        self.concurrencyType = concurrencyType
        observationEnabled = concurrencyType == .mainQueue
        link = registry.link
        switch concurrencyType {
        case .confinement: queue = nil
        case .mainQueue:
            queue = DispatchQueue.main
            _ = ContextQueue.mainKey
        case .privateQueue: queue = DispatchQueue(label: "Arbor.ManagedObjectContext")
        }
        if concurrencyType == .privateQueue { queue?.setSpecific(key: ContextQueue.key, value: ObjectIdentifier(self)) }
        link.context = self
    }

    // MARK: Objects

    /// The objects inserted and not yet saved (never those inserted and deleted again).
    public var insertedObjects: Set<ManagedObject> { checkQueue(); return Set(inserted.objects) }
    /// The registered objects with unsaved changes (neither new nor deleted).
    public var updatedObjects: Set<ManagedObject> { checkQueue(); return Set(updated.objects) }
    /// The objects deleted and not yet saved (never those inserted and deleted again).
    public var deletedObjects: Set<ManagedObject> { checkQueue(); return Set(deleted.objects) }
    /// Every object registered in the context: faults, fetched, inserted and deleted ones.
    public var registeredObjects: Set<ManagedObject> { checkQueue(); return Set(allRegistered()) }
    /// Whether the context has unsaved changes.
    public var hasChanges: Bool { checkQueue(); return !inserted.isEmpty || !updated.isEmpty || !deleted.isEmpty || !pendingDeletes.isEmpty }

    /// The object registered for `objectID`, or nil; never fetches and never makes a fault.
    public func registeredObject(for objectID: ManagedObjectID) -> ManagedObject? {
        checkQueue()
        takePermanentIDs()
        purgeRegistry()
        return registry[objectID]
    }

    /// Drops the registry's entries of objects that have ended (none, most times: then the
    /// registry is not touched).
    @inline(__always)
    func purgeRegistry() {
        if !link.retired.isEmpty { registry.purge() }
    }

    /// Every registered object.
    func allRegistered() -> [ManagedObject] {
        purgeRegistry()
        return registry.objects
    }

    /// Registers `object` under its ID, held by the registry when the context retains all its
    /// objects. (An object with changes is held anyway: by its change set, or by the pending
    /// deletions.)
    func register(_ object: ManagedObject) {
        purgeRegistry()
        registry.register(object, strongly: retainsRegisteredObjects)
    }

    /// Forgets the object registered for `objectID`.
    func unregister(_ objectID: ManagedObjectID) {
        registry.remove(objectID)
    }

    /// Takes `object` out of the context for good: unregistered, its row-cache snapshot released,
    /// no longer pointing at the context (a saved deletion, a new object dropped, a row gone).
    func removeFromContext(_ object: ManagedObject) {
        unregister(object.objectID)
        object.leaveContext()
    }

    /// Withdraws the pending deletion of `object` (a refresh, a rollback policy, an undo).
    func withdrawDeletion(_ object: ManagedObject) {
        object.undelete()
        deleted.remove(object)
        pendingDeletes.removeAll { $0 === object }
    }

    /// Moves the object registered under `oldID` to its new ID `newID`.
    func reregister(from oldID: ManagedObjectID, to newID: ManagedObjectID) {
        rememberReplacement(of: oldID, by: newID)
        purgeRegistry()
        registry.move(from: oldID, to: newID)
    }

    /// Records that `newID` replaced the temporary `oldID`, when someone may still name the
    /// object by it: an undo step, or a child context (``replacedTemporaryIDs``).
    func rememberReplacement(of oldID: ManagedObjectID, by newID: ManagedObjectID) {
        if oldID.isTemporaryID && (undoRecording.manager != nil || children.hadAny) { replacedTemporaryIDs[oldID] = newID }
    }

    /// The ID this context now has for `id` (a replaced temporary ID gives its permanent one).
    @inline(__always)
    func currentID(_ id: ManagedObjectID) -> ManagedObjectID {
        guard id.isTemporaryID, !replacedTemporaryIDs.isEmpty else { return id }
        return replacedTemporaryIDs[id] ?? id
    }

    /// `value` with the temporary IDs this context has replaced given as their new IDs.
    func currentIDs(_ value: PropertyValue?) -> PropertyValue? {
        guard !replacedTemporaryIDs.isEmpty, let value else { return value }
        switch value {
        case .object(let id):
            return .object(currentID(id))
        case .objects(let ids):
            return .objects(OrderedSet(ids.map(currentID)))
        default:
            return value
        }
    }

    /// The object for `objectID`: the registered instance when there is one, else a new fault
    /// (registered). Never nil, and never reads the store: the row is assumed to exist, and
    /// firing the fault fails (or marks the object deleted) if it does not (S000-41, S000-42).
    ///
    /// - Precondition: the context has a coordinator whose model has the ID's entity.
    public func object(with objectID: ManagedObjectID) -> ManagedObject {
        if let object = registeredObject(for: objectID) { return object }
        guard let entity = modelEntity(of: objectID) else {
            preconditionFailure("\(objectID) is not registered, and the context has no coordinator whose model has \(objectID.entityName)")
        }
        let fault = makeFault(objectID, entity: entity)
        // A temporary ID a root context does not have names no row anywhere (an insertion rolled
        // back, another context's new object): known at once, found when it fires.
        if objectID.isTemporaryID && parent == nil { fault.markRowMissing(true) }
        return fault
    }

    /// The object registered for `objectID`, or else a new fault of `entity`, registered (a
    /// fetch's common case: the entity is at hand, borrowed).
    func registeredObjectOrFault(_ objectID: ManagedObjectID, entity: EntityDescription) -> ManagedObject {
        takePermanentIDs()
        purgeRegistry()
        if let object = registry[objectID] { return object }
        // Made outside any access to the registry: a subclass's init(fault:) may use the context.
        let object = newFault(objectID, entity: entity)
        // `init(fault:)` gave it the context's link (the registry's).
        registry.register(object, strongly: retainsRegisteredObjects, linked: true)
        return object
    }

    /// A new fault of `entity`'s class for `objectID` (not registered yet).
    func newFault(_ objectID: ManagedObjectID, entity: EntityDescription) -> ManagedObject {
        entity.managedObjectClass.init(fault: objectID, entity: entity, context: self)
    }

    /// The object for `objectID` when one can be had: registered, or a fault when the context has
    /// a coordinator (nil in a scratch context for an ID it does not know).
    func resolve(_ objectID: ManagedObjectID) -> ManagedObject? {
        if let object = registeredObject(for: objectID) { return object }
        return modelEntity(of: objectID).map { makeFault(objectID, entity: $0) }
    }

    /// The entity of `objectID` in the coordinator's model (nil without a coordinator, or for an
    /// entity the model does not have).
    func modelEntity(of objectID: ManagedObjectID) -> EntityDescription? {
        // IDs come in runs of one entity: the last answer is checked first (equal names share
        // their storage, so the comparison rarely reads characters).
        if let last = lastModelEntity, last.name == objectID.entityName { return last }
        let entity = persistentStoreCoordinator?.managedObjectModel.entity(named: objectID.entityName)
        lastModelEntity = entity
        return entity
    }

    /// A new fault for `objectID` (not registered yet), registered.
    func makeFault(_ objectID: ManagedObjectID, entity: EntityDescription) -> ManagedObject {
        let object = newFault(objectID, entity: entity)
        register(object)
        return object
    }

    /// Inserts a new object: it is registered with its temporary ID, its default values are set,
    /// and ``ManagedObject/awakeFromInsert()`` runs. It is saved by the next save.
    public func insert(_ object: ManagedObject) {
        checkQueue()
        if object.managedObjectContext === self && registeredObject(for: object.objectID) === object {
            if object.deletedFlag && object.insertedFlag {
                recordUndoExistence(object)
                // Inserted, deleted, inserted again before the deletion was processed.
                object.undelete()
                pendingDeletes.removeAll { $0 === object }
                inserted.append(object)
                noteInserted(object)
            }
            return
        }
        precondition(object.managedObjectContext == nil, "\(object) already belongs to another context")
        recordUndoExistence(object)
        object.enterAsNew(self)
        register(object)
        inserted.append(object)
        noteInserted(object)
        object.awakeFromInsert()
    }

    /// Deletes an object: it is in ``deletedObjects`` until the next save (a new object is simply
    /// dropped: it never appears there). Its delete rules are applied at the end of the event
    /// (``processPendingChanges()``), or at save when ``propagatesDeletesAtEndOfEvent`` is false.
    public func delete(_ object: ManagedObject) {
        checkQueue()
        precondition(object.managedObjectContext === self, "\(object) does not belong to this context")
        guard !object.deletedFlag else { return }
        recordUndoExistence(object)
        object.markDeleted()
        noteDeleted(object)
        if object.insertedFlag {
            inserted.remove(object)
        } else {
            updated.remove(object)
            deleted.append(object)
        }
        pendingDeletes.append(object)
    }

    /// Ends the current event: applies the delete rules of the objects deleted since (when
    /// ``propagatesDeletesAtEndOfEvent``), forgets new objects that were deleted again, and posts
    /// ``didChangeObjectsNotification`` with what the event changed (S000-92). The context calls
    /// it before every fetch and save and at the end of every `perform` and `performAndWait`
    /// block; calling it again when nothing changed does nothing.
    public func processPendingChanges() {
        checkQueue()
        takePermanentIDs()
        endEvent(propagatingDeletes: propagatesDeletesAtEndOfEvent)
    }

    /// The end of an event, the one place it happens: delete rules (when asked), the event's undo
    /// step, its objects-did-change notification. A save ends its events here too, always
    /// applying delete rules.
    func endEvent(propagatingDeletes: Bool) {
        if propagatingDeletes { propagateDeletes() }
        registerPendingUndo()
        // An event without changes cannot have broken the change lists: a fetch, which ends
        // one first, is not charged a pass over them.
        let changed = !event.isEmpty
        postObjectsDidChange()
        if changed { checkInvariants() }
    }

    /// Discards every unsaved change: new objects leave the context, deleted ones come back, and
    /// changed ones return to their last committed values (from the context's own copies: the
    /// store is not read again).
    public func rollback() {
        checkQueue()
        // What the event changed so far is told first; then the rollback reports the objects it
        // restored as refreshed and the new ones it dropped as invalidated. The undo stack goes
        // (S002-24).
        postObjectsDidChange()
        undoRecording.forgetAll()
        // Only changed objects have anything to undo: the change sets and the pending deletions
        // (which also hold new objects deleted again, not yet processed).
        let pending = pendingDeletes
        pendingDeletes.removeAll()
        for object in inserted.objects + pending where object.insertedFlag {
            removeFromContext(object)
            noteInvalidated(object)
        }
        for object in updated.objects + deleted.objects + pending where !object.insertedFlag {
            object.rollBack()
            noteRefreshed(object)
        }
        inserted.removeAll()
        updated.removeAll()
        deleted.removeAll()
        assignments.removeAll()
        postObjectsDidChange()
    }

    /// Forgets every object: the context is as new, and the objects it had must not be used
    /// again (they no longer belong to it). They read the values they hold, as they last held
    /// them, and fail to load anything else (``ManagedObject/inaccessibility`` is
    /// ``ManagedObject/Inaccessibility/contextReset``): keep their ``ManagedObject/objectID``s and
    /// get the objects again.
    public func reset() {
        checkQueue()
        letGoOfDestinations()
        // The objects it had hold a link saying so (``ManagedObject/inaccessibility``): they read
        // the values they hold, and fail to load what they do not.
        let afterReset = ContextLink(afterReset: true, logger: link.logger)
        for object in allRegistered() {
            object.loseContext(to: afterReset)
        }
        registry.removeAll()
        replacedTemporaryIDs = [:]
        event = EventChanges()
        event.invalidatedAll = true
        lastInsertedSet = nil
        undoRecording.forgetAll()
        inserted.removeAll()
        updated.removeAll()
        deleted.removeAll()
        pendingDeletes.removeAll()
        assignments.removeAll()
        conflictChecked.removeAll()
        moveQueryGenerationOn()
        postObjectsDidChange()
    }

    // MARK: Called by objects

    /// Records that `object` changed (or changed back).
    func objectDidChange(_ object: ManagedObject, noting: Bool = true) {
        if noting { noteUpdated(object) }
        guard !object.insertedFlag, !object.deletedFlag else { return }
        if object.changedSlots.isEmpty && object.refusedValues == nil {
            updated.remove(object)
        } else {
            updated.append(object)
        }
    }

}
