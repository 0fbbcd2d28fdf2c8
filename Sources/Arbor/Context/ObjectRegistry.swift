import Logging
import Synchronization

// Safety: `ContextLink.contextReference` holds the context unretained: the context sets it and
// clears it in its `deinit`, and it is read on the context's queue while the context is alive (a
// context must not end on another thread while its objects are in use: docs/contexts.md).

/// A context's registered objects, by ID: one instance per object ID (uniquing).
///
/// An object is held strongly while it has changes or the context retains all its objects, and
/// otherwise not at all: an unchanged object the application no longer uses goes away, and
/// reading its ID again makes a new fault.
///
/// Not through a `weak` reference: a weak reference gives every managed object a side table,
/// which sends each retain and release of it through the runtime's slow path.
/// The registry keeps a ``LeanWeakReference`` instead (weak, without the side table), and the
/// object reports its end: its `deinit` appends its ID to the context's ``RetiredObjects``
/// (through its ``ContextLink``), and the registry drops those entries before it is next read.
/// The last reference to an object may go on another thread at any moment, even between that
/// purge and a read of the entry: the read then gives nil, as a `weak` load would.
struct ObjectRegistry: ~Copyable {
    struct Entry {
        /// The object, weakly.
        let reference: LeanWeakReference<ManagedObject>
        /// The object itself while it is held strongly.
        var strongObject: ManagedObject?

        /// (The object is borrowed: an entry of an object held weakly counts no strong reference.)
        init(_ object: borrowing ManagedObject, strongly: Bool) {
            reference = LeanWeakReference(copy object)
            strongObject = strongly ? copy object : nil
        }

        /// The object, or nil when it has ended or is ending (on any thread).
        var object: ManagedObject? { strongObject ?? reference.object }
    }

    private(set) var entries = ObjectIDTable<Entry>()
    /// The context's link with its objects (each registered object holds it).
    let link = ContextLink()

    /// Drops the entries of objects that have ended.
    mutating func purge() {
        let retired = link.retired
        guard !retired.isEmpty else { return }
        let ended = retired.take()
        for (id, identity) in ended {
            // An entry made for the same address may name a new object there (an ending
            // object's entry replaced, and its memory reused): it stays while its object lives.
            guard let entry = entries[id], entry.reference.refers(to: identity), entry.object == nil else { continue }
            entries[id] = nil
        }
    }

    /// The object registered for `id` (call ``purge()`` first).
    subscript(id: ManagedObjectID) -> ManagedObject? {
        mutating get { entries[id]?.object }
    }

    /// Registers `object` (`linked`: it holds this registry's link already, a new fault).
    mutating func register(_ object: ManagedObject, strongly: Bool, linked: Bool = false) {
        if !linked && object.link !== link { object.link = link }
        entries[object.objectID] = Entry(object, strongly: strongly)
    }

    /// Moves the entry registered under `oldID` to `newID`.
    mutating func move(from oldID: ManagedObjectID, to newID: ManagedObjectID) {
        guard let entry = entries[oldID] else { return }
        entries[oldID] = nil
        entries[newID] = entry
    }

    mutating func remove(_ id: ManagedObjectID) { entries[id] = nil }

    mutating func removeAll() { entries.removeAll() }

    /// Every registered object (call ``purge()`` first).
    var objects: [ManagedObject] { entries.values.compactMap(\.object) }
}

/// The registered objects of a context that have ended (their IDs and identities), posted by
/// ``ManagedObject``'s `deinit` and taken by ``ObjectRegistry/purge()``. An inbox of its own, so
/// that an object ending while the context changes its registry touches nothing the change is
/// using — and locked: the last reference to an object may go on any thread (an observer of a
/// did-save notification holding the saved objects, say), while the context purges on its queue.
typealias RetiredObjects = LockedInbox<(ManagedObjectID, ObjectIdentifier)>

/// What a context's objects hold of it: the context itself, without a reference count, and the
/// inbox where they report their end.
///
/// Not a `weak` reference in each object: that gives the context a side table, and then every
/// retain and release of it — one for each `setValue`, fault fire and fetched object — takes
/// the runtime's slow path. The context clears ``context`` as it ends, once for all its objects;
/// an object taken out of its context drops its link. The link itself is held strongly by the
/// objects, so an object ending on any thread, even while its context ends, reports to an inbox
/// that is still there and never reaches the context.
final class ContextLink: @unchecked Sendable {
    /// The context; nil once it has ended. Read on the context's queue (its objects never cross
    /// queues), and cleared by its `deinit`, wherever that runs: the context must not end on
    /// another thread while its objects are in use (docs/contexts.md).
    var context: ManagedObjectContext? {
        get { contextReference?.takeUnretainedValue() }
        set { contextReference = newValue.map { Unmanaged.passUnretained($0) } }
    }
    /// ``context`` as stored: unretained (paths that only look at the context use it so, without
    /// counting a reference).
    private(set) var contextReference: Unmanaged<ManagedObjectContext>? {
        didSet { isOpen.store(contextReference != nil, ordering: .relaxed) }
    }
    /// Whether the context is there (readable from any thread: an object ending after its
    /// context has nothing to report).
    private let isOpen = Atomic<Bool>(false)
    /// The registry's objects that have ended since it was last purged.
    let retired = RetiredObjects()
    /// Whether this link stands for a context that was reset: what the context's objects hold
    /// after ``ManagedObjectContext/reset()`` (a link whose ``context`` is never set).
    let afterReset: Bool
    /// Where an object reports what no caller sees — a typed property that could not read or
    /// write (``ManagedObject/accessFailure``): the coordinator's logger, set when the context
    /// gets one, and kept when the context ends or is reset.
    var logger: Logger?

    init(afterReset: Bool = false, logger: Logger? = nil) {
        self.afterReset = afterReset
        self.logger = logger
    }

    /// Reports the end of an object registered under `objectID` (any thread).
    func objectDidEnd(_ objectID: ManagedObjectID, _ identity: ObjectIdentifier) {
        guard isOpen.load(ordering: .relaxed) else { return }
        retired.post((objectID, identity))
    }
}

/// The objects of one of a context's change sets (inserted, updated or deleted), in the order
/// they joined it. Membership is found through the object's ``ManagedObject/changeSlot`` (an
/// object is in at most one change set at a time), so adding, removing and testing cost no
/// hashing; removed objects leave a hole, closed up when holes outnumber members.
struct ChangeList: Sequence {
    private var slots: [ManagedObject?] = []
    /// The number of objects in the set.
    private(set) var count = 0
    /// Bumped by every change of membership: equal values mean the same objects.
    private(set) var generation = 0

    var isEmpty: Bool { count == 0 }

    func contains(_ object: ManagedObject) -> Bool {
        let slot = Int(object.changeSlot)
        return slot >= 0 && slot < slots.count && slots[slot] === object
    }

    /// Adds `object` at the end (nothing when it is in the set already).
    mutating func append(_ object: ManagedObject) {
        guard !contains(object) else { return }
        object.changeSlot = Int32(slots.count)
        slots.append(object)
        count += 1
        generation += 1
    }

    mutating func remove(_ object: ManagedObject) {
        guard contains(object) else { return }
        slots[Int(object.changeSlot)] = nil
        object.changeSlot = -1
        count -= 1
        generation += 1
        if slots.count > 16 && slots.count > 2 * count { compact() }
    }

    mutating func removeAll() {
        for case let object? in slots { object.changeSlot = -1 }
        slots = []
        count = 0
        generation += 1
    }

    private mutating func compact() {
        slots = slots.filter { $0 != nil }
        for (slot, object) in slots.enumerated() { object!.changeSlot = Int32(slot) }
    }

    /// Appends to `problems` what is wrong with the list's bookkeeping (its count, each member's
    /// ``ManagedObject/changeSlot``) and with its members, as `member` judges them (nil: nothing),
    /// naming the list `name` (``ManagedObjectContext/invariantViolations()``).
    func checkBookkeeping(_ name: String, into problems: inout [String], _ member: (ManagedObject) -> String?) {
        var members = 0
        for (slot, object) in slots.enumerated() {
            guard let object else { continue }
            members += 1
            if Int(object.changeSlot) != slot {
                problems.append("\(object.objectID) sits at \(slot) of the \(name) objects, but its changeSlot is \(object.changeSlot)")
            }
            if let problem = member(object) { problems.append("\(object.objectID), among the \(name) objects, \(problem)") }
        }
        if members != count { problems.append("the \(name) objects count \(count), but the list holds \(members)") }
    }

    /// The objects, in order.
    var objects: [ManagedObject] { count == slots.count ? slots.map { $0.unsafelyUnwrapped } : slots.compactMap { $0 } }

    /// Iterates the objects in order, skipping the places of removed ones (no array is made).
    func makeIterator() -> Iterator { Iterator(slots: slots) }

    struct Iterator: IteratorProtocol {
        let slots: [ManagedObject?]
        var position = 0

        mutating func next() -> ManagedObject? {
            while position < slots.count {
                defer { position += 1 }
                if let object = slots[position] { return object }
            }
            return nil
        }
    }
}
