import Foundation
import OrderedCollections

/// Faulting: the context loads a fault's values (from the row cache or the store), fills the
/// faults a fetch returns, loads to-many relationships, and resolves IDs to loaded objects.
extension ManagedObjectContext {
    func requireCoordinator(_ what: @autoclosure () -> String) throws -> PersistentStoreCoordinator {
        guard let persistentStoreCoordinator else {
            throw ArborError(.misuse, "this context has no persistent store coordinator to \(what())")
        }
        return persistentStoreCoordinator
    }

    /// Loads a fault's values: from the coordinator's row cache when the snapshot is young enough
    /// for ``stalenessInterval``, else from the store. A missing row marks the object deleted when
    /// ``shouldDeleteInaccessibleFaults`` is set, else is ``ArborError/Code/objectNotFound``.
    /// `strict` reports a missing row whatever ``shouldDeleteInaccessibleFaults`` says
    /// (``existingObject(with:)``).
    func fulfillFault(_ object: ManagedObject, strict: Bool = false) throws {
        takePermanentIDs()
        let coordinator = try requireCoordinator("load \(object.objectID)")
        var row: StoreRow?
        if let parent {
            row = try parentRow(parent, object.objectID)
        } else if object.objectID.isTemporaryID {
            // No store has a row for a temporary ID (an insertion rolled back): a missing row.
        } else if let found = try coordinator.fetchSnapshot(for: object.objectID, held: object.snapshot, staleness: stalenessInterval) {
            object.hold(found.0)
            row = found.1
        }
        // Pinned to a query generation: the row as it was then (read after the row of now, so
        // that the history covers it).
        if parent == nil, let pinned = queryGeneration, let overlay = pinned.overlay(of: object.objectID) {
            try pinned.catchUp()
            switch overlay.row(of: object.objectID, entity: object.entity, now: row) {
            case .unchanged: break
            case .absent: row = nil
            case .row(let past): row = past
            }
        }
        guard let row else {
            // A fault a fetch filled keeps none of the row it no longer has (its properties read
            // nil, as any fault's for a missing row; delete rules see no destinations).
            object.emptyPersistentValues()
            object.markRowMissing(true)
            if shouldDeleteInaccessibleFaults && !strict {
                // Core Data's inaccessible fault: a deleted object whose properties read nil or
                // zero — said in the log, as Core Data does, since no caller is told.
                coordinator.logger.warning("a fault fired for a row that is gone: it is marked deleted and reads nil or zero (shouldDeleteInaccessibleFaults)",
                                           metadata: ["arbor.object": "\(object.objectID)", "arbor.context": "\(displayName)"])
                object.becomeInaccessible()
                return
            }
            throw ArborError(.objectNotFound, "\(object.objectID) has no row in its store: the object was deleted, or never saved",
                             entity: object.entity.name, objectID: object.objectID)
        }
        // A child's objects hold no snapshot: their rows come from the parent's objects.
        if parent != nil { object.releaseSnapshot() }
        object.markRowMissing(false)
        object.fill(from: row)
        object.awakeFromFetch()
    }

    /// Loads a to-many relationship's destinations from the store.
    func loadRelationship(_ key: String, of object: ManagedObject) throws {
        guard let relationship = object.entity.relationshipsByName[key] else { return }
        takePermanentIDs()
        let coordinator = try requireCoordinator("load \(object.objectID).\(key)")
        let ids = if let parent {
            OrderedSet(try parent.performAndWait { try parent.relatedIDsForChild(object.objectID, key) })
        } else if let pinned = queryGeneration, let overlay = pinned.overlay(of: object.objectID) {
            // Pinned to a query generation: the destinations as they were then.
            try OrderedSet(pinned.catchingUp(coordinator.relatedObjectIDs(of: object.objectID, relationship: relationship)) {
                overlay.related($0, of: object.objectID, relationship: relationship)
            })
        } else {
            OrderedSet(try coordinator.relatedObjectIDs(of: object.objectID, relationship: relationship))
        }
        object.takeLoadedRelationship(key, ids)
    }

    /// Loads the to-many relationships `owners` names (an object and one of its relationships,
    /// each pair once or more) where they are unloaded: one read per relationship and store
    /// instead of one per object (a wave of deletions, a prefetch). Faults and new objects are
    /// skipped (see the one-relationship load below).
    func loadRelationships(_ owners: some Sequence<(ManagedObject, RelationshipDescription)>) throws {
        var groups: [ObjectIdentifier: (relationship: RelationshipDescription, objects: [ManagedObject], seen: Set<ObjectIdentifier>)] = [:]
        for (object, relationship) in owners where relationship.isToMany {
            if groups[ObjectIdentifier(relationship), default: (relationship, [], [])].seen.insert(ObjectIdentifier(object)).inserted {
                groups[ObjectIdentifier(relationship)]?.objects.append(object)
            }
        }
        for group in groups.values { try loadRelationship(group.relationship, of: group.objects) }
    }

    /// Loads the to-many `relationship` of every object of `objects` that has it unloaded, in
    /// one read per store instead of one per object. Faults are skipped (firing one unloads its
    /// relationships again), as are new objects. A context with a parent or pinned to a query
    /// generation loads them one by one, as an object's own load (`loadRelationship(_:of:)` with
    /// a key) does.
    private func loadRelationship(_ relationship: RelationshipDescription, of objects: [ManagedObject]) throws {
        guard relationship.isToMany else { return }
        let key = relationship.name
        takePermanentIDs()
        let owners = objects.filter { !$0.faulted && !$0.objectID.isTemporaryID && $0.unloadedRelationships.contains(key) }
        guard !owners.isEmpty else { return }
        guard owners.count > 1, parent == nil, queryGeneration == nil else {
            for owner in owners { try loadRelationship(key, of: owner) }
            return
        }
        let coordinator = try requireCoordinator("load \(relationship.entity?.name ?? "?").\(key) of \(owners.count) objects")
        let related = try coordinator.relatedObjectIDs(ofEach: owners.map(\.objectID), relationship: relationship)
        for (owner, ids) in zip(owners, related) {
            guard let ids else { continue }
            owner.takeLoadedRelationship(key, OrderedSet(ids))
        }
    }

    /// The object for `objectID`, with its values loaded: the registered instance (a fault is
    /// fired first), else the row is read and the object registered. Never a fault (S000-27,
    /// S000-28).
    ///
    /// - Throws: ``ArborError/Code/objectNotFound`` when there is no such row (S000-26).
    public func existingObject(with objectID: ManagedObjectID) throws -> ManagedObject {
        checkQueue()
        drainMerges()
        if let object = registeredObject(for: objectID) {
            if object.faulted { try fulfillFault(object, strict: true) }
            return object
        }
        // A child context may load a new object of its parent (by its temporary ID).
        guard let entity = modelEntity(of: objectID), !objectID.isTemporaryID || parent != nil else {
            throw ArborError(.objectNotFound, "\(objectID) is not registered in this context and names no saved object", objectID: objectID)
        }
        let object = makeFault(objectID, entity: entity)
        do {
            try fulfillFault(object, strict: true)
        } catch {
            removeFromContext(object)
            throw error
        }
        return object
    }

    // MARK: A relationship's destinations

    /// The objects of a to-many relationship's destinations `ids` (faults made for those not
    /// registered). Those that are faults with no row at hand share fault batches of at most
    /// ``destinationBatchSize``: the first of a batch to fire reads the rows of all in one read
    /// (as a fetch's ``FetchRequest/fetchBatchSize`` batches do), so walking a relationship's
    /// objects costs a read per batch, not one per object.
    func resolveDestinations(_ ids: some Collection<ManagedObjectID>) -> [ManagedObject] {
        var objects: [ManagedObject] = []
        objects.reserveCapacity(ids.count)
        var faults: [ManagedObject] = []
        for id in ids {
            guard let object = resolve(id) else { continue }
            objects.append(object)
            if object.faulted && object.snapshot == nil && object.faultBatch == nil { faults.append(object) }
        }
        // A child context's faults read their parent, one by one.
        if parent == nil, persistentStoreCoordinator != nil { makeFaultBatches(of: faults, size: Self.destinationBatchSize) }
        return objects
    }

    /// Holds `destination`, an object a to-one relationship handed out, among the last
    /// ``heldDestinationLimit`` such objects (each once, the oldest let go first). Reading
    /// `department.name` on a thousand employees of one department then fires the department
    /// once, not once per employee after it went away again (an unchanged object nothing holds
    /// ends at once). Held by the context, not by the objects that read them: objects never
    /// keep each other alive (no reference cycles), and what is held is bounded and goes with the
    /// context or its reset.
    @inline(__always)
    func holdDestination(_ destination: ManagedObject) {
        guard !destination.heldByContext else { return }
        destination.heldByContext = true
        if heldDestinations.count < Self.heldDestinationLimit {
            heldDestinations.append(destination)
            return
        }
        heldDestinations[nextHeldDestination].heldByContext = false
        heldDestinations[nextHeldDestination] = destination
        nextHeldDestination = (nextHeldDestination + 1) % Self.heldDestinationLimit
    }

    /// Lets go of the destinations ``holdDestination(_:)`` holds.
    func letGoOfDestinations() {
        for destination in heldDestinations { destination.heldByContext = false }
        heldDestinations = []
        nextHeldDestination = 0
    }

    /// How many objects to-one relationships handed out the context holds at most.
    static let heldDestinationLimit = 1024

    /// The most faults of one relationship whose rows are read together
    /// (``resolveDestinations(_:)``).
    static let destinationBatchSize = 256
}
