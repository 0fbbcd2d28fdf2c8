import OrderedCollections

/// Undo and redo of the object graph (seeds 000 and 002, "Undo Management"; docs/undo.md).
///
/// While the context has an undo manager, every change of an event is recorded as it happens —
/// the first value each property of each object had in the event, and whether the object existed
/// (registered and not deleted) — and at the end of the event (``processPendingChanges()``) the
/// event's changes become one undo action: the objects' states before the event. Recording
/// coalesces (a property changed many times keeps its first value) and cancels (an object
/// inserted and deleted in one event, or a value changed back, registers nothing). Without an
/// undo manager nothing is recorded.
extension ManagedObjectContext {
    /// The undo manager recording this context's changes (nil, the default: no undo, and
    /// recording costs nothing). Setting one starts recording with the next change; setting nil
    /// drops what the current event recorded. Settable from any thread.
    public var undoManager: ObjectUndoManager? {
        get { undoRecording.manager }
        set { onQueue { undoRecording.attach(newValue) } }
    }

    /// Ends the event and asks the undo manager to undo its last step: the objects take back
    /// their states before it (S000-79).
    public func undo() {
        checkQueue()
        guard let undoManager = undoRecording.manager else { return }
        processPendingChanges()
        undoManager.undo()
        postObjectsDidChange()
    }

    /// Ends the event and asks the undo manager to redo the last undone step (S000-53).
    public func redo() {
        checkQueue()
        guard let undoManager = undoRecording.manager else { return }
        processPendingChanges()
        undoManager.redo()
        postObjectsDidChange()
    }

    // MARK: Recording

    /// Records, the first time in the event, `object`'s value in `slot` before it changes.
    @inline(__always)
    func recordUndo(_ object: ManagedObject, slot: Int) {
        guard let pending = undoRecording.pending, !undoRecording.isSuspended else { return }
        pending.record(object, slot: slot, context: self)
    }

    /// Records, the first time in the event, whether `object` existed before it is inserted or
    /// deleted.
    @inline(__always)
    func recordUndoExistence(_ object: ManagedObject, existed: Bool? = nil) {
        guard let pending = undoRecording.pending, !undoRecording.isSuspended else { return }
        pending.touch(object, context: self, existed: existed)
    }

    /// Turns the event's recorded changes into one undo action (called at the end of every
    /// event). Nothing is registered while registration is disabled — the changes stay pending
    /// changes, they just cannot be undone (S002-27).
    func registerPendingUndo() {
        guard let pending = undoRecording.pending, !pending.entries.isEmpty, let undoManager = undoRecording.manager else { return }
        let entries = pending.take()
        guard undoManager.isUndoRegistrationEnabled else { return }
        var steps: [UndoStep] = []
        for entry in entries {
            let object = entry.object
            var before = entry.before
            var after = ObjectState(exists: exists(object), values: [])
            // Out of the graph before and after (inserted and deleted in the event): nothing to undo.
            guard before.exists || after.exists else { continue }
            // Slots changed back are dropped from both states.
            before.values.removeAll { slot, value in
                let now = object.values[slot: slot]
                if now == value { return true }
                after.values.append((slot, now))
                return false
            }
            guard before.exists != after.exists || !before.values.isEmpty else { continue }
            steps.append(UndoStep(object: object, before: before, after: after))
        }
        guard !steps.isEmpty else { return }
        // One step per event, unless the application has a group open (its group takes it).
        let byEvent = undoManager.groupsByEvent && undoManager.groupingLevel == 0
        if byEvent { undoManager.beginUndoGrouping() }
        let context = WeakContext(context: self)
        undoManager.registerUndo { context.context?.apply(steps, forward: false) }
        if byEvent { undoManager.endUndoGrouping() }
    }

    /// Whether `object` is in the graph now: registered here and not deleted.
    func exists(_ object: ManagedObject) -> Bool {
        object.managedObjectContext === self && !object.deletedFlag
    }

    // MARK: Applying an undo or a redo

    /// Puts the objects of `steps` in their states before (`forward` false: undo) or after
    /// (redo) their event, and registers the opposite with the undo manager.
    func apply(_ steps: [UndoStep], forward: Bool) {
        let suspended = undoRecording.suspend()
        defer { undoRecording.resume(suspended) }
        for step in forward ? steps : steps.reversed() {
            let object = step.object
            let state = forward ? step.after : step.before
            if object.faulted && object.managedObjectContext === self { try? object.fireFault() }
            if state.exists && !exists(object) { revive(object) }
            for (slot, value) in state.values { setForUndo(object, slot: slot, value) }
            if !state.exists && exists(object) { retire(object) }
            objectDidChange(object, noting: true)
        }
        let context = WeakContext(context: self)
        undoRecording.manager?.registerUndo { context.context?.apply(steps, forward: !forward) }
    }

    /// Sets a slot as undo or redo says, keeping the object's changed slots right.
    private func setForUndo(_ object: ManagedObject, slot: Int, _ recorded: PropertyValue?) {
        let value = currentIDs(recorded)
        object.observingChange(of: slot) { object.takeChange(value, slot: slot) }
    }

    /// Brings an object back into the graph: a deletion not yet saved is undone; an object that
    /// left the context (a new one whose insertion was undone, or one whose deletion was saved)
    /// is inserted again, under its own ID.
    private func revive(_ object: ManagedObject) {
        // An object that has since joined another context stays there: taking it back would
        // leave it registered in both.
        if let other = object.managedObjectContext, other !== self { return }
        if object.managedObjectContext === self && object.deletedFlag {
            withdrawDeletion(object)
            if object.insertedFlag { inserted.append(object) }
            noteInserted(object)
            return
        }
        // A saved object's row was deleted by a save: written again as a new row with its ID,
        // all relationships included.
        object.reenter(self)
        register(object)
        inserted.append(object)
        noteInserted(object)
    }

    /// Takes an object out of the graph: a new one leaves the context; a saved one is deleted
    /// (its delete rules are not applied again: the changes they made are undone or redone with
    /// the other objects of the step).
    private func retire(_ object: ManagedObject) {
        if object.insertedFlag {
            inserted.remove(object)
            pendingDeletes.removeAll { $0 === object }
            removeFromContext(object)
            object.undelete()
            noteInvalidated(object)
        } else {
            object.markDeleted()
            updated.remove(object)
            deleted.append(object)
            noteDeleted(object)
        }
    }
}

/// An object's state for undo: whether it is in the graph, and the values of some slots.
struct ObjectState {
    var exists: Bool
    /// Slots and their values (a few per object: a list, not a table).
    var values: [(slot: Int, value: PropertyValue?)]
}

/// What one event did to one object: its state before and after.
struct UndoStep {
    let object: ManagedObject
    let before: ObjectState
    let after: ObjectState
}

/// A context's undo recording: its undo manager, what the current event changed for it, and
/// whether undo records now. Stored in the context (no indirection on the path of every change);
/// its fields change only through these methods.
struct UndoRecording {
    /// The undo manager (``ManagedObjectContext/undoManager``; nil: nothing is recorded).
    private(set) var manager: ObjectUndoManager?
    /// What the current event changed, for undo (nil without an undo manager).
    private(set) var pending: PendingUndo?
    /// Whether changes are made that undo must not record: an undo or redo applying states, a
    /// merge of changes made elsewhere.
    private(set) var isSuspended = false

    /// Records for `manager` from the next change on (nil: stops, dropping what the event
    /// recorded).
    mutating func attach(_ manager: ObjectUndoManager?) {
        self.manager = manager
        pending = manager == nil ? nil : PendingUndo()
    }

    /// Forgets what the event recorded and every action of the undo manager (a rollback, a
    /// reset: S002-24).
    func forgetAll() {
        pending?.clear()
        manager?.removeAllActions()
    }

    /// Stops recording; returns whether it was stopped already, for ``resume(_:)``.
    mutating func suspend() -> Bool {
        defer { isSuspended = true }
        return isSuspended
    }

    /// Puts recording back as ``suspend()`` found it.
    mutating func resume(_ wasSuspended: Bool) {
        isSuspended = wasSuspended
    }
}

/// The changes of the current event, recorded for undo as they happen.
final class PendingUndo {
    struct Entry {
        let object: ManagedObject
        var before: ObjectState
    }

    private(set) var entries: [Entry] = []
    private var index: [ObjectIdentifier: Int] = [:]

    /// The entry of `object`, made (with its existence now) the first time it is touched.
    @discardableResult
    func touch(_ object: ManagedObject, context: ManagedObjectContext, existed: Bool? = nil) -> Int {
        let key = ObjectIdentifier(object)
        if let position = index[key] { return position }
        entries.append(Entry(object: object, before: ObjectState(exists: existed ?? context.exists(object), values: [])))
        index[key] = entries.count - 1
        return entries.count - 1
    }

    /// Keeps the value `slot` of `object` has now, unless the event recorded one already.
    func record(_ object: ManagedObject, slot: Int, context: ManagedObjectContext) {
        // The object reached its context through its own reference: it is in the graph unless
        // deleted (no second load of that reference).
        let position = touch(object, context: context, existed: !object.deletedFlag)
        guard !entries[position].before.values.contains(where: { $0.slot == slot }) else { return }
        entries[position].before.values.append((slot, object.values[slot: slot]))
    }

    /// The entries, leaving none.
    func take() -> [Entry] {
        defer {
            entries = []
            index = [:]
        }
        return entries
    }

    /// Forgets what the event recorded.
    func clear() {
        entries = []
        index = [:]
    }
}
