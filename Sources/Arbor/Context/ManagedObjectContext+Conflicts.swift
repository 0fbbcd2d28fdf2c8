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

    // MARK: Finding conflicts

    /// The optimistic-locking conflicts of the pending save: changed, deleted and marked objects
    /// whose row has moved on (a deleted object whose row is gone is not one: S004-15).
    func optimisticLockingConflicts(_ coordinator: PersistentStoreCoordinator) throws -> [MergeConflict] {
        let candidates = (updated.objects + deleted.objects + lockChecks()).filter { !$0.objectID.isTemporaryID && !$0.insertedFlag }
        guard !candidates.isEmpty else { return [] }
        let rows = try coordinator.rows(for: candidates.map(\.objectID))
        var conflicts: [MergeConflict] = []
        for (object, row) in zip(candidates, rows) {
            if row == nil && object.deletedFlag { continue }
            if let row, lockExpectation(of: object).isMet(by: row, entity: object.entity) { continue }
            let snapshot = object.committed.map { StoreRow(entityName: object.entity.name, version: object.committedVersion, values: $0) }
            conflicts.append(MergeConflict(objectID: object.objectID, objectSnapshot: snapshot, cachedSnapshot: coordinator.cachedRow(for: object.objectID),
                                           persistedSnapshot: row, oldVersionNumber: object.committedVersion, newVersionNumber: row?.version ?? 0))
        }
        return conflicts
    }

    /// The uniqueness conflicts of the pending save: groups of new or changed objects sharing the
    /// values of a constraint, or holding values a saved row (not deleted or changed away by this
    /// save) holds.
    func constraintConflicts(_ coordinator: PersistentStoreCoordinator) throws -> [ConstraintConflict] {
        struct Group {
            let entity: EntityDescription
            let constraint: [String]
            let values: [String: String]
            let probe: StoreRow
            var objects: [ManagedObject]
        }
        var groups: [String: Group] = [:]
        var order: [String] = []
        for object in inserted.objects + updated.objects where !object.deletedFlag {
            for constraint in object.entity.uniquenessConstraints {
                var attributes: [String: AttributeValue] = [:]
                var toOne: [String: ManagedObjectID] = [:]
                var shown: [String: String] = [:]
                var complete = true
                for key in constraint {
                    switch object.values[key] {
                    case .attribute(let value)?:
                        attributes[key] = value
                        if case .string(let string) = value { shown[key] = string } else { shown[key] = value.description }
                    case .object(let id)? where !id.isTemporaryID:
                        toOne[key] = id
                        shown[key] = id.description
                    default:
                        complete = false
                    }
                }
                guard complete else { continue }
                let root = object.entity.rootEntity.name
                let name = "\(root)\u{1}\(constraint.joined(separator: "\u{1}"))\u{1}" + constraint.map { shown[$0]! }.joined(separator: "\u{1}")
                if groups[name] == nil {
                    order.append(name)
                    let probe = StoreRow(entityName: object.entity.name, version: 0, attributes: attributes, toOne: toOne)
                    groups[name] = Group(entity: object.entity, constraint: constraint, values: shown, probe: probe, objects: [])
                }
                groups[name]!.objects.append(object)
            }
        }
        var conflicts: [ConstraintConflict] = []
        for name in order {
            let group = groups[name]!
            let store = group.objects.first { !$0.objectID.isTemporaryID }.flatMap { coordinator.persistentStore(for: $0.objectID) }
                ?? (try? coordinator.store(for: group.entity))
            var holder = try store.flatMap { try coordinator.objectID(holding: group.constraint, of: group.probe, in: $0) }
            if let id = holder, let object = registeredObject(for: id) {
                // A row this save deletes, or changes away from the values, stops holding them.
                let vacates = object.deletedFlag
                    || group.constraint.contains { object.values[$0] != object.committed?[$0] } && !group.objects.contains { $0 === object }
                if vacates { holder = nil }
            }
            let others = group.objects.filter { $0.objectID != holder }
            guard others.count > 1 || (holder != nil && !others.isEmpty) else { continue }
            let holderRow = try holder.flatMap { try coordinator.rows(for: [$0]).first ?? nil }
            conflicts.append(ConstraintConflict(entityName: group.entity.name, constraint: group.constraint, constraintValues: group.values,
                                                conflictingObjectIDs: others.map(\.objectID), databaseObjectID: holder, databaseSnapshot: holderRow))
        }
        return conflicts
    }

    /// After a store refused a save for a conflict: finds every conflict and hands them to the
    /// merge policy (which throws, or changes objects so that the save can be tried again).
    func resolveConflicts(after error: ArborError, _ coordinator: PersistentStoreCoordinator) throws {
        let locking = try optimisticLockingConflicts(coordinator)
        if !locking.isEmpty { try mergePolicy.resolve(optimisticLockingConflicts: locking, in: self) }
        if error.code == .constraintConflict {
            let constraints = try constraintConflicts(coordinator)
            // A refusal nothing here explains (a constraint on a relationship to a new object):
            // the store's own error says what it is.
            guard !constraints.isEmpty || !locking.isEmpty else { throw error }
            if !constraints.isEmpty { try mergePolicy.resolve(constraintConflicts: constraints, in: self) }
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
                object.committedVersion = stored.version
                return
            }
            withdrawDeletion(object)
        }
        switch type {
        case .error, .overwrite:
            // This context's values are written whole.
            object.committedVersion = stored.version
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
    /// stored value otherwise.
    func rebase(_ object: ManagedObject, on row: StoreRow, keepsOwn: (Bool, Bool) -> Bool) {
        let entity = object.entity
        var committed = object.committed ?? PropertyStorage(layout: entity.propertyLayout)
        for (index, name) in entity.propertyLayout.names.enumerated() {
            let isAttribute = entity.attributesByName[name].map { !$0.isTransient } ?? false
            let relationship = entity.relationshipsByName[name]
            guard isAttribute || relationship.map({ !$0.isToMany || ($0.isOrdered && row.orderedDestinations(name) != nil) }) == true else { continue }
            let stored: PropertyValue = isAttribute
                ? row.attributeValue(name)
                : relationship!.isToMany ? row.values[name] ?? .objects([]) : row.toOneValue(name)
            let before = committed[slot: index] ?? PropertyValue.none
            let changedHere = object.changedSlots.contains(index)
            if !keepsOwn(changedHere, stored != before) { object.values[slot: index] = stored }
            committed[slot: index] = stored
        }
        object.committed = committed
        object.committedVersion = row.version
        object.changedSlots.removeAll()
        for index in entity.propertyLayout.names.indices where committed[slot: index] != nil && object.values[slot: index] != committed[slot: index] {
            object.changedSlots.insert(index)
        }
        objectDidChange(object, noting: false)
        noteRefreshed(object)
    }

    /// An object whose row another context deleted, saved again whole (the overwrite policy):
    /// it is written as a new row under its own ID.
    func resurrect(_ object: ManagedObject) {
        updated.remove(object)
        object.insertedFlag = true
        object.committedVersion = 0
        // The links of its many-to-many relationships went with the row: all are written again.
        for relationship in object.entity.relationships where relationship.isManyToMany {
            if object.committed?[relationship.name] != nil { object.committed?[relationship.name] = .objects([]) }
        }
        inserted.append(object)
    }

    /// Objects whose rows are gone (deleted by another context): deleted here and forgotten,
    /// without a pending deletion.
    func forget(_ objects: [ManagedObject]) {
        let gone = Set(objects.map(ObjectIdentifier.init))
        if !pendingDeletes.isEmpty { pendingDeletes.removeAll { gone.contains(ObjectIdentifier($0)) } }
        for object in objects {
            object.deletedFlag = true
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
