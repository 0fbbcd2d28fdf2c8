/// Undo and redo stacks of grouped actions (Foundation's `UndoManager`, which Linux lacks in a
/// usable form, under a name of its own).
///
/// An *action* is a closure that reverses something; a *group* is the actions one undo step runs
/// (in reverse order of registration). Actions registered while an undo runs go to the redo
/// stack, and those registered while a redo runs go back to the undo stack; any other
/// registration clears the redo stack.
///
/// A ``ManagedObjectContext`` with an undo manager registers one group per event (at
/// ``ManagedObjectContext/processPendingChanges()``, when ``groupsByEvent`` is true), so each
/// ``undo()`` reverses one event's changes. Applications register their own actions with
/// ``registerUndo(_:)`` and group them with ``beginUndoGrouping()`` / ``endUndoGrouping()``.
///
/// ```swift
/// let undoManager = ObjectUndoManager()
/// context.undoManager = undoManager
/// employee.setValue("Smith", forKey: "lastName")
/// context.processPendingChanges()            // one group: the event's changes
/// context.undo()                             // lastName is back
/// ```
///
/// Not thread-safe: use it on the queue of the context it serves.
public final class ObjectUndoManager {
    /// One undo step.
    struct Group {
        var actions: [() -> Void] = []
        var actionName = ""
    }

    private var undoStack: [Group] = []
    private var redoStack: [Group] = []
    /// The groups open now, innermost last.
    private var open: [Group] = []
    private var disabled = 0
    private enum Mode { case normal, undoing, redoing }
    private var mode = Mode.normal

    /// Whether a context groups the changes of each event (from one `processPendingChanges()`
    /// to the next) into one undo step when no group is open. True by default.
    public var groupsByEvent = true
    /// The most undo steps kept (0: no limit); the oldest go first.
    public var levelsOfUndo = 0 {
        didSet { trim() }
    }

    /// An empty undo manager.
    public init() {}

    // MARK: Groups

    /// Opens a group: actions registered until the matching ``endUndoGrouping()`` undo together.
    /// Groups nest; an inner group becomes part of the outer one.
    public func beginUndoGrouping() {
        open.append(Group())
    }

    /// Closes the innermost open group; a top-level group becomes one undo step (an empty one is
    /// dropped).
    ///
    /// - Precondition: a group is open.
    public func endUndoGrouping() {
        precondition(!open.isEmpty, "endUndoGrouping() without a matching beginUndoGrouping()")
        let group = open.removeLast()
        if open.isEmpty {
            guard !group.actions.isEmpty else { return }
            switch mode {
            case .undoing: redoStack.append(group)
            case .normal, .redoing:
                undoStack.append(group)
                trim()
            }
        } else {
            open[open.count - 1].actions += group.actions
            if open[open.count - 1].actionName.isEmpty { open[open.count - 1].actionName = group.actionName }
        }
    }

    /// How many groups are open.
    public var groupingLevel: Int { open.count }

    // MARK: Registration

    /// Stops registration until the matching ``enableUndoRegistration()`` (calls nest).
    public func disableUndoRegistration() {
        disabled += 1
    }

    /// Undoes one ``disableUndoRegistration()``.
    ///
    /// - Precondition: registration is disabled.
    public func enableUndoRegistration() {
        precondition(disabled > 0, "enableUndoRegistration() without a matching disableUndoRegistration()")
        disabled -= 1
    }

    /// Whether actions are registered now.
    public var isUndoRegistrationEnabled: Bool { disabled == 0 }

    /// Registers `action` in the open group (in a group of its own when none is open). While
    /// an undo runs it lands on the redo stack; otherwise a new action clears the redo stack.
    /// Nothing happens while registration is disabled.
    public func registerUndo(_ action: @escaping () -> Void) {
        guard disabled == 0 else { return }
        if mode == .normal { redoStack.removeAll() }
        if open.isEmpty {
            beginUndoGrouping()
            open[0].actions.append(action)
            endUndoGrouping()
        } else {
            open[open.count - 1].actions.append(action)
        }
    }

    /// Registers `handler`, called with `target` when undone (Foundation's
    /// `registerUndo(withTarget:handler:)`). The target is held strongly until the action is
    /// undone or removed.
    public func registerUndo<Target: AnyObject>(withTarget target: Target, handler: @escaping (Target) -> Void) {
        registerUndo { handler(target) }
    }

    /// Names the open group (or the last undo step when none is open), for menus: "Undo Typing".
    public func setActionName(_ name: String) {
        if !open.isEmpty {
            open[open.count - 1].actionName = name
        } else if mode == .undoing, !redoStack.isEmpty {
            redoStack[redoStack.count - 1].actionName = name
        } else if !undoStack.isEmpty {
            undoStack[undoStack.count - 1].actionName = name
        }
    }

    /// The name of the step ``undo()`` would undo ("" when unnamed or none).
    public var undoActionName: String { undoStack.last?.actionName ?? "" }
    /// The name of the step ``redo()`` would redo.
    public var redoActionName: String { redoStack.last?.actionName ?? "" }

    // MARK: Undo and redo

    /// Whether there is a step to undo (an open group by event counts once it is closed).
    public var canUndo: Bool { !undoStack.isEmpty || open.first.map { !$0.actions.isEmpty } == true }
    /// Whether there is a step to redo.
    public var canRedo: Bool { !redoStack.isEmpty }
    /// Whether an undo is running.
    public var isUndoing: Bool { mode == .undoing }
    /// Whether a redo is running.
    public var isRedoing: Bool { mode == .redoing }

    /// Undoes the last step: runs its actions in reverse order; what they register becomes the
    /// step ``redo()`` runs. Closes an open top-level group first.
    ///
    /// - Precondition: at most one group is open.
    public func undo() {
        precondition(open.count <= 1, "undo() with nested undo groups open")
        if open.count == 1 { endUndoGrouping() }
        guard mode == .normal, let group = undoStack.popLast() else { return }
        run(group, as: .undoing)
    }

    /// Redoes the last undone step.
    public func redo() {
        guard mode == .normal, open.isEmpty, let group = redoStack.popLast() else { return }
        run(group, as: .redoing)
    }

    private func run(_ group: Group, as runMode: Mode) {
        mode = runMode
        defer { mode = .normal }
        beginUndoGrouping()
        open[0].actionName = group.actionName
        for action in group.actions.reversed() { action() }
        let registered = open.removeLast()
        guard !registered.actions.isEmpty else { return }
        if runMode == .undoing {
            redoStack.append(registered)
        } else {
            undoStack.append(registered)
            trim()
        }
    }

    /// Empties both stacks (open groups too).
    public func removeAllActions() {
        undoStack.removeAll()
        redoStack.removeAll()
        open.removeAll()
    }

    /// The number of undo steps held (bounded by ``levelsOfUndo``).
    public var undoCount: Int { undoStack.count }
    /// The number of redo steps held.
    public var redoCount: Int { redoStack.count }

    private func trim() {
        guard levelsOfUndo > 0, undoStack.count > levelsOfUndo else { return }
        undoStack.removeFirst(undoStack.count - levelsOfUndo)
    }
}
