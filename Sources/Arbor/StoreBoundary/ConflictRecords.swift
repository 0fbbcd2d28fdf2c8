import Foundation

/// An optimistic-locking conflict found by a save (Core Data's `NSMergeConflict`): an object this
/// context changed, deleted or marked with ``ManagedObjectContext/detectConflicts(for:)`` whose
/// row another context, coordinator or process saved since the object was read (S000-90, S000-91).
///
/// A value: it names the object by ID (find the object with
/// ``ManagedObjectContext/registeredObject(for:)`` on the context's queue) and carries the rows
/// involved, so it may be kept, printed and compared.
public struct MergeConflict: Sendable, Equatable, CustomStringConvertible {
    /// The object whose save conflicts.
    public let objectID: ManagedObjectID
    /// The object's committed values: the row its changes are based on (nil for an object never
    /// loaded, which only `detectConflicts(for:)` can mark).
    public let objectSnapshot: StoreRow?
    /// The coordinator's cached row for the object, when it holds one.
    public let cachedSnapshot: StoreRow?
    /// The row in the store now; nil when another context deleted it.
    public let persistedSnapshot: StoreRow?
    /// The version of the row the object was read at.
    public let oldVersionNumber: Int64
    /// The version of the row in the store now (0 when it was deleted).
    public let newVersionNumber: Int64

    /// Creates a conflict record.
    public init(objectID: ManagedObjectID, objectSnapshot: StoreRow?, cachedSnapshot: StoreRow?, persistedSnapshot: StoreRow?,
                oldVersionNumber: Int64, newVersionNumber: Int64) {
        self.objectID = objectID
        self.objectSnapshot = objectSnapshot
        self.cachedSnapshot = cachedSnapshot
        self.persistedSnapshot = persistedSnapshot
        self.oldVersionNumber = oldVersionNumber
        self.newVersionNumber = newVersionNumber
    }

    /// Whether another context deleted the row.
    public var isDeletedInStore: Bool { persistedSnapshot == nil }

    public var description: String {
        isDeletedInStore
            ? "\(objectID) was read at version \(oldVersionNumber) and has been deleted since"
            : "\(objectID) was read at version \(oldVersionNumber) and is at version \(newVersionNumber) in the store"
    }
}

/// A uniqueness conflict found by a save (Core Data's `NSConstraintConflict`): objects of this
/// context whose values of a uniqueness constraint another object already holds.
public struct ConstraintConflict: Sendable, Equatable, CustomStringConvertible {
    /// The entity that declares the constraint.
    public let entityName: String
    /// The constrained properties.
    public let constraint: [String]
    /// The values they share, by property: strings as they are, other values described
    /// (related objects by their IDs).
    public let constraintValues: [String: String]
    /// The objects of this context that hold the values (new or changed).
    public let conflictingObjectIDs: [ManagedObjectID]
    /// The saved object that holds them in the store (nil when the conflict is among the objects
    /// being saved only).
    public let databaseObjectID: ManagedObjectID?
    /// That object's row.
    public let databaseSnapshot: StoreRow?

    /// Creates a conflict record.
    public init(entityName: String, constraint: [String], constraintValues: [String: String], conflictingObjectIDs: [ManagedObjectID],
                databaseObjectID: ManagedObjectID?, databaseSnapshot: StoreRow?) {
        self.entityName = entityName
        self.constraint = constraint
        self.constraintValues = constraintValues
        self.conflictingObjectIDs = conflictingObjectIDs
        self.databaseObjectID = databaseObjectID
        self.databaseSnapshot = databaseSnapshot
    }

    public var description: String {
        let values = constraint.map { "\($0) = \(constraintValues[$0] ?? "nil")" }.joined(separator: ", ")
        let holder = databaseObjectID.map { " and \($0) in the store" } ?? ""
        return "\(entityName)(\(constraint.joined(separator: ", "))): \(values) is held by \(conflictingObjectIDs.map(\.description).joined(separator: ", "))\(holder)"
    }
}

extension ArborError {
    /// The error of a save that found optimistic-locking conflicts (``conflicts`` lists them).
    static func conflicts(_ conflicts: [MergeConflict]) -> ArborError {
        var error = ArborError(.mergeConflict, "the save found \(conflicts.count) conflict\(conflicts.count == 1 ? "" : "s") with changes saved since its objects were read; nothing was written: "
                                   + conflicts.map(\.description).joined(separator: "; "),
                               objectID: conflicts.first?.objectID)
        error.conflicts = conflicts
        return error
    }

    /// The error of a save that found uniqueness conflicts (``constraintConflicts`` lists them).
    static func constraintConflicts(_ conflicts: [ConstraintConflict]) -> ArborError {
        var error = ArborError(.constraintConflict, "the save would break uniqueness constraints; nothing was written: "
                                   + conflicts.map(\.description).joined(separator: "; "),
                               entity: conflicts.first?.entityName, key: conflicts.first?.constraint.joined(separator: ","),
                               value: conflicts.first.map { conflict in conflict.constraint.map { "\($0) = \(conflict.constraintValues[$0] ?? "nil")" }.joined(separator: ", ") },
                               objectID: conflicts.first?.conflictingObjectIDs.first)
        error.constraintConflicts = conflicts
        return error
    }
}
