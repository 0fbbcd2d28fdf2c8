/// Old → new object IDs: the permanent IDs one save gives its new objects. The save's writer
/// translates references to new objects with it, and the context gives its objects their new
/// IDs and translates their relationships with it.
///
/// Kept in an ``ObjectIDTable`` (temporary IDs' serial numbers come in sequence, so they index
/// chunks of slots, no hashing), with the old IDs in a list for going through the pairs: a
/// fraction of a `[ManagedObjectID: ManagedObjectID]`'s bytes per ID, which counts at an
/// import's peak memory (docs/performance.md, "Memory").
///
/// Not thread-safe: it belongs to the save that made it (what crosses to child contexts is
/// ``dictionary``).
final class IDMapping {
    private var table = ObjectIDTable<ManagedObjectID>()
    /// The old IDs, in the order they were added.
    private(set) var oldIDs: [ManagedObjectID] = []
    /// A run of old IDs (``init(run:new:)``): the first, and the new IDs in order.
    private var runFirst: ManagedObjectID?
    private var runNew: [ManagedObjectID] = []

    /// An empty mapping, with room for `capacity` pairs in its list.
    init(capacity: Int = 0) {
        oldIDs.reserveCapacity(capacity)
    }

    /// Whether no ID changes.
    var isEmpty: Bool { oldIDs.isEmpty && runNew.isEmpty }

    /// The number of IDs that change.
    var count: Int { oldIDs.count + runNew.count }

    /// The new ID of `old` (nil: it does not change).
    subscript(old: ManagedObjectID) -> ManagedObjectID? {
        if let runFirst, old.isTemporaryID, old.namespace == runFirst.namespace {
            let position = Int(runFirst.key) - Int(old.key)
            if position >= 0 && position < runNew.count { return runNew[position] }
        }
        return table[old]
    }

    /// A mapping whose old IDs are the temporary IDs of one run of serial numbers, starting at
    /// `first` — the old ID at position `i` is the temporary ID of `first`'s namespace whose key
    /// is `first.key - i`, every one of them the caller's (serial numbers are unique in a
    /// namespace) — becoming `new`, in order: no table and no list (an import's new objects,
    /// made one after another and saved to one store, are such a run, which then holds nothing
    /// per object at the save's peak). More pairs may be added to it.
    convenience init(run first: ManagedObjectID, new: [ManagedObjectID]) {
        self.init()
        runFirst = first
        runNew = new
    }

    /// Records that `old` becomes `new` (the last word for an old ID counts).
    func add(_ old: ManagedObjectID, _ new: ManagedObjectID) {
        if table[old] == nil { oldIDs.append(old) }
        table[old] = new
    }

    /// The pairs, for what needs a dictionary (the mailboxes of child contexts, which take it on
    /// their own queues).
    var dictionary: [ManagedObjectID: ManagedObjectID] {
        var result: [ManagedObjectID: ManagedObjectID] = [:]
        result.reserveCapacity(count)
        for old in oldIDs { result[old] = table[old] }
        if let runFirst {
            for (position, new) in runNew.enumerated() {
                // The old ID's space: the new one's entity in the run's namespace.
                let space = ObjectIDSpace.interned(new.entityName, runFirst.namespace)
                result[ManagedObjectID(space: space, key: runFirst.key - Int64(position))] = new
            }
        }
        return result
    }
}
