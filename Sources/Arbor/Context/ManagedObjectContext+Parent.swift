import Foundation
import OrderedCollections

/// What a child context's save hands its parent (S001-06): values only, so it crosses queues.
struct ChildSave: Sendable {
    /// New objects: their IDs (temporary until the root saves) and persistent values.
    var inserted: [(ManagedObjectID, String, PropertyStorage)] = []
    /// Changed objects: the properties changed, with their new values.
    var updated: [(ManagedObjectID, [(String, PropertyValue)])] = []
    /// Changed to-many relationships of changed objects, as what was added and removed (applied
    /// over the parent's own destinations).
    var relationshipDeltas: [(ManagedObjectID, String, RelationshipDelta)] = []
    /// Deleted objects.
    var deleted: [ManagedObjectID] = []
}

/// Child contexts (S001-02…S001-08; docs/contexts.md, "Parent and child contexts"): the child
/// reads and saves through its parent, reached with `performAndWait` on the parent's queue. The
/// parent serves values, never its objects.
extension ManagedObjectContext {
    // MARK: Served by the parent (called on the parent's queue)

    /// The object a child names: the registered one, else a fault — of a saved object, or, in a
    /// context that has a parent itself, of a new object this context passed up and has let go
    /// since (unchanged here, nobody held it), which loads from the parent. A temporary ID a
    /// root context does not have names nothing (its new objects are held until saved).
    func objectForChild(_ id: ManagedObjectID) -> ManagedObject? {
        takePermanentIDs()
        let id = currentID(id)
        if let object = registeredObject(for: id) { return object }
        guard !id.isTemporaryID || parent != nil else { return nil }
        return resolve(id)
    }

    /// The object's current values in this context as a row (its committed version), for a
    /// child's fault; nil when this context has no such object or has deleted it.
    func rowForChild(_ id: ManagedObjectID) throws -> StoreRow? {
        guard let object = objectForChild(id) else { return nil }
        if object.faulted {
            do {
                try object.fireFault()
            } catch ArborError.objectNotFound {
                return nil
            }
        }
        guard !object.deletedFlag else { return nil }
        return childRow(of: object)
    }

    /// An object's persistent values (to-many relationships only where loaded), as a row.
    func childRow(of object: ManagedObject) -> StoreRow {
        StoreRow(entityName: object.entity.name, version: object.committedVersion, values: object.persistentValues)
    }

    /// The destinations of a to-many relationship of an object of this context, for a child.
    func relatedIDsForChild(_ id: ManagedObjectID, _ key: String) throws -> [ManagedObjectID] {
        guard let object = objectForChild(id) else { return [] }
        if object.faulted { try object.fireFault() }
        try object.loadRelationship(key)
        return Array(object.values[key]?.objectIDs ?? [])
    }

    /// The rows of a child's fetch: the request run over this context's state, pending changes
    /// included.
    func rowsForChild(_ request: FetchRequest<ManagedObject>) throws -> [(ManagedObjectID, StoreRow)] {
        var request = request
        request.includesPendingChanges = true
        request.returnsObjectsAsFaults = false
        request.relationshipKeyPathsForPrefetching = []
        return try fetch(request).map { object in
            if object.faulted { try object.fireFault() }
            return (object.objectID, childRow(of: object))
        }
    }

    /// Takes a child's save as this context's own unsaved changes: new objects under their IDs,
    /// changed properties over this context's values, deletions (S001-06).
    func acceptChildSave(_ save: ChildSave) throws {
        // The child may name objects by temporary IDs this context has replaced since (its root
        // saved while the child's save was on its way, or before the child heard of it).
        takePermanentIDs()
        let save = replacedTemporaryIDs.isEmpty ? save : translated(save)
        // Everything that can fail (loading the objects and relationships changed, and the
        // objects deleted) happens before anything changes: a child's save lands whole or not at
        // all. The loaded objects are held here until the end (an unchanged object nobody holds
        // would leave the registry, and come back as a fault).
        var objects: [ManagedObjectID: ManagedObject] = [:]
        func load(_ id: ManagedObjectID) throws -> ManagedObject? {
            if let object = objects[id] { return object }
            guard let object = objectForChild(id) else { return nil }
            if object.faulted { try object.fireFault() }
            objects[id] = object
            return object
        }
        for (id, changes) in save.updated {
            guard let object = try load(id) else { continue }
            // A to-many relationship is loaded first: its committed destinations are what the
            // root's save compares with.
            for (key, _) in changes where object.entity.relationshipsByName[key]?.isToMany == true { try object.loadRelationship(key) }
        }
        for (id, key, _) in save.relationshipDeltas { try load(id)?.loadRelationship(key) }
        for id in save.deleted { _ = try load(id) }

        for (id, entityName, values) in save.inserted {
            if let existing = registeredObject(for: id) {
                for (key, value) in values where existing.entity.propertyLayout.index[key] != nil {
                    existing.setPrimitive(value, forKey: key, persistent: true)
                }
                continue
            }
            guard let entity = persistentStoreCoordinator?.managedObjectModel.entity(named: entityName) else { continue }
            let object = entity.managedObjectClass.init(fault: id, entity: entity, context: self)
            recordUndoExistence(object, existed: false)
            object.fillAsNew(values)
            register(object)
            inserted.append(object)
            noteInserted(object)
        }
        for (id, changes) in save.updated {
            guard let object = objects[id] else { continue }
            for (key, value) in changes { object.setPrimitive(value, forKey: key, persistent: true) }
        }
        for (id, key, delta) in save.relationshipDeltas {
            guard let object = objects[id] else { continue }
            let current = object.values[key]?.objectIDs ?? []
            object.setPrimitive(.objects(delta.applied(to: current)), forKey: key, persistent: true)
        }
        for id in save.deleted {
            guard let object = objects[id] else { continue }
            if !object.deletedFlag { delete(object) }
        }
    }

    /// `save` with the temporary IDs this context has replaced given as the new IDs.
    private func translated(_ save: ChildSave) -> ChildSave {
        var result = ChildSave()
        result.inserted = save.inserted.map { id, entityName, values in
            var current = values
            for (key, value) in values {
                if let translated = currentIDs(value), translated != value { current[key] = translated }
            }
            return (currentID(id), entityName, current)
        }
        result.updated = save.updated.map { id, changes in
            (currentID(id), changes.map { key, value in (key, currentIDs(value) ?? value) })
        }
        result.relationshipDeltas = save.relationshipDeltas.map { id, key, delta in
            var delta = delta
            delta.added = delta.added.map(currentID)
            delta.removed = Set(delta.removed.map(currentID))
            return (currentID(id), key, delta)
        }
        result.deleted = save.deleted.map(currentID)
        return result
    }

    // MARK: Used by the child

    /// The row of `id` from the parent context (nil: the parent has no such object).
    func parentRow(_ parent: ManagedObjectContext, _ id: ManagedObjectID) throws -> StoreRow? {
        try parent.performAndWait { try parent.rowForChild(id) }
    }

    /// Hands the pending changes to the parent context: the child's save (S001-06).
    func pushToParent(_ parent: ManagedObjectContext, inserted: [ManagedObject], updated: [ManagedObject], deleted: [ManagedObject]) throws {
        var save = ChildSave()
        save.inserted = inserted.map { ($0.objectID, $0.entity.name, childRow(of: $0).values) }
        for object in updated {
            var changes: [(String, PropertyValue)] = []
            for key in object.changedKeys {
                let value = object.values[key] ?? PropertyValue.none
                if object.entity.relationshipsByName[key]?.isToMany == true, let before = object.committed?[key]?.objectIDs {
                    let delta = RelationshipDelta(from: before, to: value.objectIDs)
                    // An ordered relationship whose members stayed but whose order changed goes whole.
                    if !(delta.added.isEmpty && delta.removed.isEmpty) || object.entity.relationshipsByName[key]?.isOrdered != true {
                        save.relationshipDeltas.append((object.objectID, key, delta))
                        continue
                    }
                }
                changes.append((key, value))
            }
            save.updated.append((object.objectID, changes))
        }
        save.deleted = deleted.map(\.objectID)
        try parent.performAndWait { try parent.acceptChildSave(save) }
    }

    /// Tells the child contexts (and theirs) the permanent IDs of new objects the root saved;
    /// each applies them on its own queue before its next block.
    ///
    /// The mapping goes into each child's mailbox at once, and the child takes it before its next
    /// save, fetch, fault or lookup — even within a block that is running now (a child block that
    /// saves, has the root save, and saves again) — or in a block of its own, whichever is first.
    func sendPermanentIDs(_ mapping: [ManagedObjectID: ManagedObjectID]) {
        guard !mapping.isEmpty else { return }
        for child in children.all {
            child.permanentIDMailbox.post(mapping)
            child.perform { child.takePermanentIDs() }
        }
    }

    /// Applies the permanent IDs the parent sent, if any (on the context's queue).
    @inline(__always)
    func takePermanentIDs() {
        guard !permanentIDMailbox.isEmpty else { return }
        for mapping in permanentIDMailbox.take() { changeIDs(mapping) }
    }
}

/// What a to-many relationship gained and lost between two sets of destinations.
struct RelationshipDelta: Sendable {
    var added: [ManagedObjectID]
    var removed: Set<ManagedObjectID>

    init(from before: OrderedSet<ManagedObjectID>, to after: OrderedSet<ManagedObjectID>) {
        added = after.filter { !before.contains($0) }
        removed = Set(before.filter { !after.contains($0) })
    }

    /// `base` with the removals taken out and the additions appended.
    func applied(to base: OrderedSet<ManagedObjectID>) -> OrderedSet<ManagedObjectID> {
        var result = removed.isEmpty ? base : base.filter { !removed.contains($0) }
        for id in added { result.append(id) }
        return result
    }
}
