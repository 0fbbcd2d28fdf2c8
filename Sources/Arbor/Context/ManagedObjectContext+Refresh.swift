import Foundation

/// Refreshing objects from the store (S000-54…S000-60, S002-32…S002-36).
extension ManagedObjectContext {
    /// Whether the row of `id` can be read now (from the parent context, for a child).
    private func rowExists(_ id: ManagedObjectID) throws -> Bool {
        if let parent { return try parentRow(parent, id) != nil }
        guard let coordinator = persistentStoreCoordinator else { return false }
        return try coordinator.rows(for: [id]).first.map { $0 != nil } ?? false
    }

    /// Brings `object`'s persistent values up to date with the row cache or the store (the
    /// cached snapshot is reused while ``stalenessInterval`` allows, S000-58).
    ///
    /// - With `mergeChanges` false the object turns into a fault: its pending changes are lost
    ///   (it leaves ``updatedObjects``; a pending deletion is undone), its transient values are
    ///   released, and it holds no related objects; its values load again when next used (S000-55,
    ///   S000-59, S000-60).
    /// - With `mergeChanges` true its values are reloaded, then the changes made in this context
    ///   are applied again over them, property by property; transient values are kept (set back
    ///   after ``ManagedObject/awakeFromFetch()`` runs). This never fails and never involves a
    ///   merge policy (S000-56, S000-57, S002-34). When the row is gone (another context deleted
    ///   it) or cannot be read now, a changed object is left as it is, changes included: the next
    ///   save meets the deletion, and its merge policy decides.
    ///
    /// `willTurnIntoFault()` and `didTurnIntoFault()` run either way (S002-36). New objects are
    /// not affected.
    public func refresh(_ object: ManagedObject, mergeChanges: Bool) {
        checkQueue()
        guard object.managedObjectContext === self, !object.insertedFlag, !object.faulted else { return }
        // Observation is told that any property may change (docs/observation.md).
        object.observingChangeOfEveryProperty { refreshValues(object, mergeChanges: mergeChanges) }
    }

    /// ``refresh(_:mergeChanges:)`` of an object that can be refreshed.
    private func refreshValues(_ object: ManagedObject, mergeChanges: Bool) {
        // Merging needs the row: when it is gone, or cannot be read now, the object keeps its
        // values and changes — the next save meets the deletion (or the error) and its merge
        // policy decides — instead of turning into a fault that has lost them.
        if mergeChanges && object.hasChanges {
            guard (try? rowExists(object.objectID)) == true else { return }
        }
        let pendingKeys = object.changedKeys
        let pending = Dictionary(uniqueKeysWithValues: pendingKeys.map { ($0, object.values[$0] ?? PropertyValue.none) })
        // A changed to-many relationship comes back as what this context added and removed,
        // applied over the destinations loaded afresh (not as a whole set, which would undo what
        // others changed — and leave the removals unwritten).
        var deltas: [String: RelationshipDelta] = [:]
        for key in pendingKeys where object.entity.relationshipsByName[key]?.isToMany == true {
            if let before = object.committed?[key]?.objectIDs, let now = pending[key]?.objectIDs {
                deltas[key] = RelationshipDelta(from: before, to: now)
            }
        }
        var transient: [String: PropertyValue] = [:]
        for attribute in object.entity.attributes where attribute.isTransient {
            transient[attribute.name] = object.values[attribute.name] ?? PropertyValue.none
        }
        // Values a typed property refused are pending changes: kept when merging, gone with the
        // others otherwise.
        object.becomeFault(keepingRefusals: mergeChanges)
        if object.deletedFlag && !mergeChanges { withdrawDeletion(object) }
        updated.remove(object)
        guard mergeChanges else { return noteRefreshed(object) }
        // Reload now, then put this context's changes back over the new values (a pending
        // deletion stays pending).
        do {
            try fulfillFault(object)
        } catch {
            // The row is gone or unreadable: the object stays a fault and reports that when used.
            return noteRefreshed(object)
        }
        for (key, var value) in pending {
            if let delta = deltas[key] {
                try? object.loadRelationship(key)
                value = .objects(delta.applied(to: object.values[key]?.objectIDs ?? []))
            }
            guard let slot = object.entity.propertyLayout.index[key] else { continue }
            object.takeChange(value, slot: slot)
        }
        object.restoreTransients(transient)
        objectDidChange(object, noting: false)
        noteRefreshed(object)
    }

    /// Refreshes every registered object, keeping this context's pending changes (as
    /// ``refresh(_:mergeChanges:)`` with `mergeChanges` true; S001-22). A context pinned to a
    /// query generation moves on to the current one first.
    public func refreshAllObjects() {
        checkQueue()
        moveQueryGenerationOn()
        for object in registeredObjects { refresh(object, mergeChanges: true) }
    }
}
