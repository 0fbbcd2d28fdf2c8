import Foundation

/// Optimistic locking and uniqueness conflicts at save (S004-01…S004-18, S000-83…S000-91;
/// docs/contexts.md, "Optimistic locking and merge policies").
extension ManagedObjectContext {
    /// How this context's saves settle conflicts with what others saved since its objects were
    /// read (``MergePolicy/error`` by default, S000-39). Settable from any thread.
    public var mergePolicy: MergePolicy {
        get { _mergePolicy }
        set { onQueue { _mergePolicy = newValue } }
    }

    /// Marks an unchanged object for optimistic locking at the next save: if its row changes in
    /// the store before then, that save finds a conflict as if the object had changed (S000-16).
    /// Changed and deleted objects are always checked (S000-17).
    public func detectConflicts(for object: ManagedObject) {
        checkQueue()
        guard object.managedObjectContext === self, !object.objectID.isTemporaryID,
              conflictChecked[ObjectIdentifier(object)] == nil else { return }
        if object.faulted { try? object.fireFault() }
        conflictChecked[ObjectIdentifier(object)] = object
    }

    /// The marked, unchanged objects whose rows must still be as read, for each store's save.
    func lockChecks() -> [ManagedObject] {
        conflictChecked.values.filter { $0.managedObjectContext === self && !$0.hasChanges && !$0.faulted }
    }

    /// What a save expects of `object`'s stored row (``RowExpectation``): the version it was
    /// read at, and its committed values as the snapshot seed 004 compares.
    func lockExpectation(of object: ManagedObject) -> RowExpectation {
        RowExpectation(version: object.committedVersion,
                       snapshot: object.committed.map { StoreRow(entityName: object.entity.name, version: object.committedVersion, values: $0) })
    }

    // MARK: Settling the conflicts a save met

    /// After the stores refused a save for conflicts: hands the conflicts they listed (every
    /// one their write pass met, ``PersistentStoreCoordinator/save(_:)``) to the merge policy,
    /// which throws, or changes objects so that the save can be tried again. Optimistic-locking
    /// conflicts are settled first; uniqueness conflicts are those of a write that met none.
    func resolveConflicts(_ error: ArborError) throws {
        if !error.conflicts.isEmpty {
            try mergePolicy.resolve(optimisticLockingConflicts: error.conflicts, in: self)
        } else if !error.constraintConflicts.isEmpty {
            try mergePolicy.resolve(constraintConflicts: error.constraintConflicts, in: self)
        } else {
            // A store that names no conflict: its error says what it is.
            throw error
        }
        propagateDeletes()
    }

    // MARK: Settling conflicts (the built-in policies)

    /// Settles one optimistic-locking conflict of `object` the way `type` says.
    func settle(_ object: ManagedObject, _ conflict: MergeConflict, _ type: MergePolicyType) {
        guard let stored = conflict.persistedSnapshot else {
            // Deleted in the store: written again by overwrite (S004-18), else deleted here too.
            if type == .overwrite && !object.deletedFlag {
                resurrect(object)
            } else {
                forget([object])
            }
            return
        }
        if object.deletedFlag {
            guard type == .rollback else {
                // The deletion stands, at the row's new version.
                object.takeStoredVersion(stored.version)
                return
            }
            withdrawDeletion(object)
        }
        switch type {
        case .error, .overwrite:
            // This context's values are written whole.
            object.takeStoredVersion(stored.version)
        case .rollback:
            rebase(object, on: stored) { _, _ in false }
        case .mergeByPropertyStoreTrump:
            rebase(object, on: stored) { changedHere, changedThere in changedHere && !changedThere }
        case .mergeByPropertyObjectTrump:
            rebase(object, on: stored) { changedHere, _ in changedHere }
        }
    }

    /// Makes `row` the object's committed values; each property carried by the row keeps this
    /// context's value when `keepsOwn(changed here, changed in the store)` says so, and takes the
    /// stored value otherwise. Observers of the object are told (its values may change).
    func rebase(_ object: ManagedObject, on row: StoreRow, keepsOwn: (Bool, Bool) -> Bool) {
        object.observingChangeOfEveryProperty { object.rebase(on: row, keepsOwn: keepsOwn) }
        objectDidChange(object, noting: false)
        noteRefreshed(object)
    }

    /// An object whose row another context deleted, saved again whole (the overwrite policy):
    /// it is written as a new row under its own ID.
    func resurrect(_ object: ManagedObject) {
        updated.remove(object)
        object.becomeNewRow()
        inserted.append(object)
    }

    /// Objects whose rows are gone (deleted by another context): deleted here and forgotten,
    /// without a pending deletion.
    func forget(_ objects: [ManagedObject]) {
        let gone = Set(objects.map(ObjectIdentifier.init))
        if !pendingDeletes.isEmpty { pendingDeletes.removeAll { gone.contains(ObjectIdentifier($0)) } }
        for object in objects {
            object.markDeleted()
            noteDeleted(object)
            inserted.remove(object)
            updated.remove(object)
            deleted.remove(object)
            conflictChecked[ObjectIdentifier(object)] = nil
            removeFromContext(object)
        }
    }

    /// Settles one uniqueness conflict the way `type` says (false: it cannot).
    func settle(_ conflict: ConstraintConflict, _ type: MergePolicyType) -> Bool {
        let objects = conflict.conflictingObjectIDs.compactMap { registeredObject(for: $0) }
        let survivor: ManagedObject
        if let holder = conflict.databaseObjectID {
            guard let saved = try? existingObject(with: holder) else { return false }
            survivor = saved
        } else {
            guard let first = objects.first(where: { !$0.insertedFlag }) ?? objects.first else { return true }
            survivor = first
        }
        let objectWins = type == .mergeByPropertyObjectTrump || type == .overwrite
        for other in objects where other !== survivor {
            if other.insertedFlag {
                do {
                    try fold(other, into: survivor, takingValues: objectWins)
                } catch {
                    return false
                }
                delete(other)
            } else if !objectWins {
                // A saved object changed to collide: its constrained values go back.
                for key in conflict.constraint {
                    other.setPrimitive(other.committed?[key] ?? PropertyValue.none, forKey: key, persistent: true)
                }
            } else {
                return false
            }
        }
        return true
    }

    /// Moves what a new object holds to `survivor`: its attribute values (when `takingValues`)
    /// and its relationships (to-one ones where the survivor has none or `takingValues`).
    func fold(_ object: ManagedObject, into survivor: ManagedObject, takingValues: Bool) throws {
        if survivor.faulted { try survivor.fireFault() }
        for attribute in object.entity.attributes where !attribute.isTransient && survivor.entity.attributesByName[attribute.name] != nil {
            guard takingValues, let value = object.values[attribute.name] else { continue }
            survivor.setPrimitive(value, forKey: attribute.name, persistent: true)
        }
        for relationship in object.entity.relationships where survivor.entity.relationshipsByName[relationship.name] != nil {
            let key = relationship.name
            if relationship.isToMany {
                let destinations = try object.mutableSetValue(forKey: key).objects
                let target = try survivor.mutableSetValue(forKey: key)
                for destination in destinations where !target.contains(destination) { try target.insert(destination) }
            } else if let destination = try object.value(forKey: key) as? ManagedObject {
                let current = try survivor.value(forKey: key)
                if takingValues || current == nil { try survivor.setValue(destination, forKey: key) }
            }
        }
    }
}
