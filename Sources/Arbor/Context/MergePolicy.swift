import Foundation

/// The ways a ``MergePolicy`` resolves conflicts (Core Data's `NSMergePolicyType`; see
/// docs/contexts.md, "Optimistic locking and merge policies").
public enum MergePolicyType: Sendable, Hashable {
    /// The save fails with the conflicts; nothing is written (the default, S000-83).
    case error
    /// Property by property; where both sides changed a property, the store's value wins (S000-84).
    case mergeByPropertyStoreTrump
    /// Property by property; where both sides changed a property, this context's value wins (S000-85).
    case mergeByPropertyObjectTrump
    /// This context's objects are written whole over the store's (S000-86, S004-18).
    case overwrite
    /// This context's changes to the objects in conflict are dropped for the store's (S000-87).
    case rollback
}

/// How a context's save resolves conflicts with what others saved (Core Data's `NSMergePolicy`).
///
/// A save that finds conflicts hands them to its context's ``ManagedObjectContext/mergePolicy``
/// and, unless that throws, saves again. The policy runs on the context's queue and changes the
/// context's objects to settle each conflict. Subclass it for a policy of your own: override
/// ``resolve(optimisticLockingConflicts:in:)`` and ``resolve(constraintConflicts:in:)``, and call
/// `super` for what the built-in behaviour should do.
///
/// ```swift
/// context.mergePolicy = .mergeByPropertyObjectTrump
/// ```
open class MergePolicy: @unchecked Sendable {
    /// How this policy resolves conflicts.
    public let mergeType: MergePolicyType

    /// A policy resolving conflicts the way `type` says.
    public init(merge type: MergePolicyType) {
        mergeType = type
    }

    /// Fails every save that finds a conflict (the default).
    public static let error = MergePolicy(merge: .error)
    /// Merges by property; the store wins where both sides changed a property.
    public static let mergeByPropertyStoreTrump = MergePolicy(merge: .mergeByPropertyStoreTrump)
    /// Merges by property; this context wins where both sides changed a property.
    public static let mergeByPropertyObjectTrump = MergePolicy(merge: .mergeByPropertyObjectTrump)
    /// Writes this context's objects whole over the store's.
    public static let overwrite = MergePolicy(merge: .overwrite)
    /// Drops this context's changes to the objects in conflict.
    public static let rollback = MergePolicy(merge: .rollback)

    /// Settles optimistic-locking conflicts by changing the context's objects (the built-in
    /// policies follow the table in docs/contexts.md).
    ///
    /// - Throws: ``ArborError/Code/mergeConflict`` carrying `conflicts` (the error policy).
    open func resolve(optimisticLockingConflicts conflicts: [MergeConflict], in context: ManagedObjectContext) throws {
        guard mergeType != .error else { throw ArborError.conflicts(conflicts) }
        for conflict in conflicts {
            guard let object = context.registeredObject(for: conflict.objectID) else { continue }
            context.settle(object, conflict, mergeType)
        }
    }

    /// Settles uniqueness conflicts: the object already saved is kept and the new ones are
    /// folded into it (their attribute values win under the object-trump and overwrite policies,
    /// the saved ones under the store-trump and rollback policies; what pointed at a new object
    /// points at the saved one). A changed object that collides with another gets its committed
    /// values back under the store-trump and rollback policies.
    ///
    /// - Throws: ``ArborError/Code/constraintConflict`` carrying `conflicts` (the error policy,
    ///   and conflicts no policy can settle: a changed object the object-trump and overwrite
    ///   policies would have to keep against another saved one).
    open func resolve(constraintConflicts conflicts: [ConstraintConflict], in context: ManagedObjectContext) throws {
        guard mergeType != .error else { throw ArborError.constraintConflicts(conflicts) }
        var unsettled: [ConstraintConflict] = []
        for conflict in conflicts where !context.settle(conflict, mergeType) { unsettled.append(conflict) }
        if !unsettled.isEmpty { throw ArborError.constraintConflicts(unsettled) }
    }
}
