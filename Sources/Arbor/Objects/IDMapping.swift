/// Old → new object IDs: the permanent IDs one save gives its new objects. The save's writer
/// translates references to new objects with it, and the context gives its objects their new
/// IDs and translates their relationships with it.
///
/// Kept in an ``ObjectIDTable`` (temporary IDs' serial numbers come in sequence, so they index
/// chunks of slots, no hashing), with the old IDs in a list for going through the pairs: about
/// 40 bytes per ID, where a `[ManagedObjectID: ManagedObjectID]` took 125 — 50 MB of a
/// 400,000-object import's peak, twice (docs/performance.md, "Memory").
///
/// Not thread-safe: it belongs to the save that made it (what crosses to child contexts is
/// ``dictionary``).
final class IDMapping {
    private var table = ObjectIDTable<ManagedObjectID>()
    /// The old IDs, in the order they were added.
    private(set) var oldIDs: [ManagedObjectID] = []

    /// An empty mapping, with room for `capacity` pairs in its list.
    init(capacity: Int = 0) {
        oldIDs.reserveCapacity(capacity)
    }

    /// Whether no ID changes.
    var isEmpty: Bool { oldIDs.isEmpty }

    /// The number of IDs that change.
    var count: Int { oldIDs.count }

    /// The new ID of `old` (nil: it does not change).
    subscript(old: ManagedObjectID) -> ManagedObjectID? {
        table[old]
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
        result.reserveCapacity(oldIDs.count)
        for old in oldIDs { result[old] = table[old] }
        return result
    }
}
