import Foundation

/// The uniqueness conflicts one save's write pass meets, gathered by the values in conflict: for
/// each, the rows of the save that claim them and the row that held them before the save.
struct UniquenessConflicts {
    /// Values of one uniqueness tree.
    struct Place: Hashable {
        let tree: String
        let value: [UInt8]
    }

    private struct Pending {
        let entityName: String
        let constraint: [String]
        let values: [String: String]
        var claimants: [ManagedObjectID]
        let holder: (ManagedObjectID, StoreRow?)?
    }

    private var pending: [Pending] = []
    private var byPlace: [Place: Int] = [:]
    /// The values updated rows of the save claimed anew (not those they kept): empty for most
    /// saves — an update that keeps its unique values puts nothing.
    var claimedByUpdates: Set<Place> = []

    var isEmpty: Bool { pending.isEmpty }

    /// Adds `id` to the conflict over the values at `place`; false when there is none yet.
    mutating func add(_ id: ManagedObjectID, at place: Place) -> Bool {
        guard let index = byPlace[place] else { return false }
        pending[index].claimants.append(id)
        return true
    }

    /// Records the first conflict over the values at `place`.
    mutating func open(at place: Place, entityName: String, constraint: [String], values: [String: String], claimants: [ManagedObjectID],
                       holder: (ManagedObjectID, StoreRow?)?) {
        byPlace[place] = pending.count
        pending.append(Pending(entityName: entityName, constraint: constraint, values: values, claimants: claimants, holder: holder))
    }

    /// The conflicts, in the order they were met.
    var conflicts: [ConstraintConflict] {
        pending.map {
            ConstraintConflict(entityName: $0.entityName, constraint: $0.constraint, constraintValues: $0.values, conflictingObjectIDs: $0.claimants,
                               databaseObjectID: $0.holder?.0, databaseSnapshot: $0.holder?.1)
        }
    }
}
