import Foundation

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
}
