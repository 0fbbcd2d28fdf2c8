import Foundation
import OrderedCollections

/// The object's state transitions that its context drives — turning back into a fault, taking a
/// value as a change, entering the graph again — as methods of the object, so that the fields
/// they change have one owner (the context's files call these instead of writing the fields).
extension ManagedObject {
    /// Turns the object back into a fault (a refresh): its values, changes and loaded state go,
    /// it lets go of its row's snapshot, and `willTurnIntoFault()` and `didTurnIntoFault()` run
    /// around it. Values a typed property refused are changes too: kept when `keepingRefusals`
    /// (a refresh that merges), dropped otherwise.
    func becomeFault(keepingRefusals: Bool) {
        if !keepingRefusals { refusedValues = nil }
        willTurnIntoFault()
        values.removeAll()
        changedSlots.removeAll()
        unloadedRelationships.removeAll()
        faulted = true
        releaseSnapshot()
        prefetchedDestinations = []
        didTurnIntoFault()
    }

    /// Puts `value` in `slot` as a change of the object's context (a refresh putting the context's
    /// changes back over new values, an undo or redo): a to-many relationship counts as loaded,
    /// and the slot is changed unless it holds the committed value (a new object's absent value
    /// is its committed one). A transient attribute is never a change.
    func takeChange(_ value: PropertyValue?, slot: Int) {
        values[slot: slot] = value
        let name = entity.propertyLayout.names[slot]
        if entity.relationshipsByName[name]?.isToMany == true { unloadedRelationships.remove(name) }
        if let attribute = entity.attributesByName[name], attribute.isTransient { return }
        if committed?[slot: slot] == value || (committed == nil && value == nil) {
            changedSlots.remove(slot)
        } else {
            changedSlots.insert(slot)
        }
    }

    /// Sets transient attributes' values, which are not changes (a refresh keeps them).
    func restoreTransients(_ transients: [String: PropertyValue]) {
        for (key, value) in transients { values[key] = value }
    }

    /// Enters `context` again as a new object (an undo of its insertion's undo, or of a saved
    /// deletion): inserted, not deleted, not yet announced in a save. A saved object's row is
    /// written again as a new row under its ID, so it keeps no committed values.
    func reenter(_ context: ManagedObjectContext) {
        managedObjectContext = context
        deletedFlag = false
        insertedFlag = true
        announcedInSave = 0
        if !objectID.isTemporaryID {
            committed = nil
            committedVersion = 0
        }
    }

    /// Takes the stored row's version as the committed one, values unchanged (a conflict settled
    /// by writing this context's values whole, or a deletion that stands).
    func takeStoredVersion(_ version: Int64) {
        committedVersion = version
    }

    /// Becomes a new row under its own ID (its row was deleted elsewhere, and the overwrite
    /// policy saves it again whole): inserted, at no version, and its many-to-many links all to be
    /// written again (they went with the row).
    func becomeNewRow() {
        insertedFlag = true
        committedVersion = 0
        for relationship in entity.relationships where relationship.isManyToMany {
            if committed?[relationship.name] != nil { committed?[relationship.name] = .objects([]) }
        }
    }

    /// Makes `row` the committed values (a conflict settled by a merge policy): each property
    /// the row carries keeps the context's value when `keepsOwn(changed here, changed in the
    /// store)` says so and takes the stored value otherwise; the changed slots are those that
    /// then differ from the row.
    func rebase(on row: StoreRow, keepsOwn: (Bool, Bool) -> Bool) {
        var committed = self.committed ?? PropertyStorage(layout: entity.propertyLayout)
        for (index, name) in entity.propertyLayout.names.enumerated() {
            let isAttribute = entity.attributesByName[name].map { !$0.isTransient } ?? false
            let relationship = entity.relationshipsByName[name]
            guard isAttribute || relationship.map({ !$0.isToMany || ($0.isOrdered && row.orderedDestinations(name) != nil) }) == true else { continue }
            let stored: PropertyValue = isAttribute
                ? row.attributeValue(name)
                : relationship!.isToMany ? row.values[name] ?? .objects([]) : row.toOneValue(name)
            let before = committed[slot: index] ?? PropertyValue.none
            let changedHere = changedSlots.contains(index)
            if !keepsOwn(changedHere, stored != before) { values[slot: index] = stored }
            committed[slot: index] = stored
        }
        self.committed = committed
        committedVersion = row.version
        changedSlots.removeAll()
        for index in entity.propertyLayout.names.indices where committed[slot: index] != nil && values[slot: index] != committed[slot: index] {
            changedSlots.insert(index)
        }
    }

    // MARK: Filling a fault

    /// Takes a fault's persistent values away (a fetch filled it from a row that is gone): it
    /// keeps its transient values only, and no committed values.
    func emptyPersistentValues() {
        guard committed != nil else { return }
        var values = PropertyStorage(layout: entity.propertyLayout)
        if entity.hasTransientAttributes {
            for (attribute, slot) in zip(entity.attributes, entity.attributeSlots) where attribute.isTransient {
                values[slot: slot] = self.values[slot: slot]
            }
        }
        self.values = values
        committed = nil
        committedVersion = 0
        unloadedRelationships.removeAll()
    }

    /// Gives a fault the values of `snapshot`'s row, leaving it a fault that remembers the
    /// snapshot's generation (``ManagedObject/fireFault()``). Called under the coordinator's
    /// lock (the row is read there); calls out to nothing.
    func fill(from snapshot: RowSnapshot) {
        if snapshot.row.values.layout === entity.layoutReference.takeUnretainedValue(),
           !entity.hasToManyRelationships, !entity.hasTransientAttributes,
           unloadedRelationships.isEmpty, changedSlots.isEmpty {
            // The common case, what `fill(from:)` with the row does with nothing to adjust: the
            // values, which are the committed values too, share the snapshot's storage (one
            // count; passing the row copied it first, and the object counted two).
            setValuesAndCommitted(snapshot.row.values)
            committedVersion = snapshot.row.version
        } else {
            fill(from: snapshot.row)
        }
        faulted = true
        filledGeneration = snapshot.generation.load(ordering: .relaxed)
    }

    /// Sets a fault's persistent values (and committed values) from a row: it is no longer a
    /// fault, its to-many relationships are unloaded, its transients kept (or their defaults).
    func fill(from row: StoreRow) {
        // The committed values share the row's storage when it is in the entity's layout (rows
        // Arbor made: then a fault fire allocates nothing but the object).
        var committed: PropertyStorage
        if row.values.layout === entity.propertyLayout {
            committed = row.values
        } else {
            committed = PropertyStorage(layout: entity.propertyLayout)
            for (attribute, slot) in zip(entity.attributes, entity.attributeSlots) where !attribute.isTransient {
                committed[slot: slot] = row.attributeValue(attribute.name)
            }
            for (relationship, slot) in zip(entity.relationships, entity.relationshipSlots) where !relationship.isToMany {
                committed[slot: slot] = row.toOneValue(relationship.name)
            }
        }
        // Every to-many is unloaded: the entity's shared set (copied on the first load).
        unloadedRelationships = entity.toManyRelationshipNames
        if entity.hasToManyRelationships {
            for (relationship, slot) in zip(entity.relationships, entity.relationshipSlots) where relationship.isToMany {
                if committed[slot: slot] != nil { committed[slot: slot] = nil }
            }
        }
        // The values start as the committed ones (sharing their storage), plus the transients.
        if entity.hasTransientAttributes {
            let transients = zip(entity.attributes, entity.attributeSlots).filter { $0.0.isTransient }.map { ($0.0, $0.1, values[slot: $0.1]) }
            values = committed
            for (attribute, slot, held) in transients {
                values[slot: slot] = held ?? attribute.defaultValue.map(PropertyValue.attribute) ?? PropertyValue.none
            }
            self.committed = committed
        } else {
            setValuesAndCommitted(committed)
        }
        committedVersion = row.version
        changedSlots.removeAll()
        faulted = false
    }

    /// A fault whose row is gone, kept as Core Data's inaccessible fault
    /// (``ManagedObjectContext/shouldDeleteInaccessibleFaults``): no longer a fault, deleted, its
    /// properties reading nil or zero.
    func becomeInaccessible() {
        faulted = false
        deletedFlag = true
        unloadedRelationships.removeAll()
    }

    /// Takes the loaded destinations `ids` of the to-many relationship `key`, as its value and
    /// its committed value.
    func takeLoadedRelationship(_ key: String, _ ids: OrderedSet<ManagedObjectID>) {
        unloadedRelationships.remove(key)
        values[key] = .objects(ids)
        committed?[key] = .objects(ids)
    }

    // MARK: Entering and leaving a context

    /// Enters `context` as a new object (``ManagedObjectContext/insert(_:)``): inserted, not
    /// deleted — an object inserted, deleted and dropped by a context may come back — and not yet
    /// announced in a save (its `willSave()` runs in this context's saves, whatever it was told by
    /// another's).
    func enterAsNew(_ context: ManagedObjectContext) {
        managedObjectContext = context
        insertedFlag = true
        deletedFlag = false
        announcedInSave = 0
    }

    /// Leaves its context for good (a saved deletion, a new object dropped, a row gone): its
    /// row-cache snapshot released, no longer pointing at the context.
    func leaveContext() {
        releaseSnapshot()
        managedObjectContext = nil
    }

    /// Marks the object deleted (``ManagedObjectContext/delete(_:)``).
    func markDeleted() {
        deletedFlag = true
    }

    /// Withdraws the object's deletion (a refresh, a rollback, an undo, an insertion again).
    func undelete() {
        deletedFlag = false
    }

    /// Takes back its committed values, dropping every change and deletion
    /// (``ManagedObjectContext/rollback()``); observers are told of the values that come back.
    func rollBack() {
        if let committed {
            observingChangeOfEveryProperty { for (key, value) in committed { values[key] = value } }
        }
        deletedFlag = false
        changedSlots.removeAll()
        refusedValues = nil
    }

    /// Loses its context to a reset: `link` (a link saying the context was reset) replaces the
    /// context's, so the object reads what it holds and fails to load the rest; no event has
    /// reported it.
    func loseContext(to link: ContextLink) {
        observingChangeOfEveryProperty { self.link = link }
        eventMarks = 0
    }

    // MARK: Saving

    /// Notes that save `count` (the context's count of saves) ran the object's `willSave()`
    /// (0: none has, once the count starts again).
    func markAnnounced(inSave count: UInt32) {
        announcedInSave = count
    }

    /// Takes `newID`, the permanent ID its store gave it (the context re-registers it).
    func takePermanentID(_ newID: ManagedObjectID) {
        objectID = newID
    }

    /// The persistent values as the object holds them: its values (sharing their storage)
    /// without transients and without the to-many relationships never loaded.
    var persistentValues: PropertyStorage {
        var values = values
        if entity.hasTransientAttributes {
            for attribute in entity.attributes where attribute.isTransient { values[attribute.name] = nil }
        }
        for key in unloadedRelationships { values[key] = nil }
        return values
    }

    /// Its values become its committed values: it has no changes, and is new no more; saved at
    /// `version` when given (a child's save leaves the version to the root's).
    func becomeSaved(at version: Int64? = nil) {
        committed = persistentValues
        changedSlots.removeAll()
        insertedFlag = false
        if let version { committedVersion = version }
    }

    /// Made in a parent context from a child's new object: its initial values, then the child's
    /// `values` (those the entity has); not a fault, and inserted.
    func fillAsNew(_ values: PropertyStorage) {
        self.values = entity.initialValues
        for (key, value) in values where entity.propertyLayout.index[key] != nil { self.values[key] = value }
        faulted = false
        insertedFlag = true
    }

    // MARK: Faults and loaded state

    /// Notes whether the object's row is known to be missing (a new object's temporary ID, a row
    /// gone) or present again.
    func markRowMissing(_ missing: Bool) {
        rowMissing = missing
    }

    /// Joins `batch`: the faults fetched together, which fire together.
    func join(_ batch: FaultBatch) {
        faultBatch = batch
    }

    /// Leaves its fault batch: it fires alone, with the row as saved when next used.
    func leaveFaultBatch() {
        faultBatch = nil
    }

    /// Holds the destinations a prefetch loaded for it, so that they stay registered.
    func holdPrefetched(_ destinations: [ManagedObject]) {
        prefetchedDestinations = destinations
    }

    /// Unloads the to-many relationship `name` in `slot` (another context changed its members):
    /// read again when next used.
    func unloadRelationship(_ name: String, slot: Int) {
        unloadedRelationships.insert(name)
        values[slot: slot] = nil
        committed?[slot: slot] = nil
    }

    // MARK: Event marks

    /// Notes that the current event reported the object as `mark` (an ``EventMarks`` bit).
    @inline(__always)
    func addEventMark(_ mark: UInt8) {
        eventMarks |= mark
    }

    /// Takes `mark` back (an object inserted and deleted within the event).
    @inline(__always)
    func removeEventMark(_ mark: UInt8) {
        eventMarks &= ~mark
    }

    /// Forgets how the event reported the object (the event ended, or the context was reset).
    @inline(__always)
    func clearEventMarks() {
        eventMarks = 0
    }
}
