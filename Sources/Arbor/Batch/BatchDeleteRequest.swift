import Foundation

/// What a ``BatchDeleteResult`` carries (Core Data's `NSBatchDeleteRequestResultType`).
public enum BatchDeleteResultType: Sendable, Hashable {
    /// Whether the request succeeded, and nothing else.
    case statusOnly
    /// The number of objects deleted.
    case count
    /// The IDs of the objects deleted and of those nullified, and their number.
    case objectIDs
}

/// Deletes the rows a fetch request matches — or the rows of a list of objects — in the store,
/// in one transaction, without managed objects (Core Data's `NSBatchDeleteRequest`), run by
/// ``ManagedObjectContext/execute(_:)-(BatchDeleteRequest)``.
///
/// Unlike Core Data's, it honours the model's delete rules in the store — cascade, nullify,
/// deny — and merges what it did into every live context of the coordinator by default
/// (docs/batch-requests.md).
///
/// ```swift
/// var request = BatchDeleteRequest(fetchRequest: try FetchRequest<ManagedObject>(entityName: "Department",
///                                                                                format: "name BEGINSWITH %@", "Old"))
/// request.resultType = .count
/// let deleted = try context.execute(request).count      // departments, and what they cascade to
/// ```
public struct BatchDeleteRequest: Sendable {
    /// The rows to delete: those a fetch request matches, or those of a list of objects.
    public enum Target: Sendable {
        /// The rows a fetch request matches (its entity, predicate, and window with its order).
        case fetch(FetchRequest<ManagedObject>)
        /// The rows of these objects (those that no longer exist are skipped).
        case objectIDs([ManagedObjectID])
    }

    /// The rows to delete.
    public let target: Target
    /// What the result carries (``BatchDeleteResultType/statusOnly`` by default).
    public var resultType: BatchDeleteResultType = .statusOnly
    /// Whether every live context of the coordinator merges what the request did (true by
    /// default): deleted objects leave them, nullified ones are refreshed.
    public var mergesIntoContexts = true

    /// A request deleting the rows `fetchRequest` matches: its entity (and sub-entities when it
    /// includes them), its predicate, and its offset and limit in its order. The predicate must
    /// be one the store answers whole.
    public init<Result>(fetchRequest: FetchRequest<Result>) {
        var request = FetchRequest<ManagedObject>(entityName: fetchRequest.entityName)
        request.predicate = fetchRequest.predicate
        request.sortDescriptors = fetchRequest.sortDescriptors
        request.fetchLimit = fetchRequest.fetchLimit
        request.fetchOffset = fetchRequest.fetchOffset
        request.includesSubentities = fetchRequest.includesSubentities
        target = .fetch(request)
    }

    /// A request deleting the rows of `objectIDs` (permanent IDs; rows already gone are
    /// skipped).
    public init(objectIDs: [ManagedObjectID]) {
        target = .objectIDs(objectIDs)
    }
}

/// What a ``BatchDeleteRequest`` did (Core Data's `NSBatchDeleteResult`), as much as its
/// ``BatchDeleteRequest/resultType`` asked for.
public struct BatchDeleteResult: Sendable {
    /// What the result carries.
    public let resultType: BatchDeleteResultType
    /// Whether the request succeeded: always true for a result (a failure throws).
    public let status: Bool
    /// The number of objects deleted — those the request matched and those its cascade rules
    /// reached — for ``BatchDeleteResultType/count`` and ``BatchDeleteResultType/objectIDs``.
    public let count: Int?
    /// The objects deleted, those the request matched first, for
    /// ``BatchDeleteResultType/objectIDs``.
    public let deletedObjectIDs: [ManagedObjectID]?
    /// The objects whose rows a nullify rule rewrote, for ``BatchDeleteResultType/objectIDs``.
    public let updatedObjectIDs: [ManagedObjectID]?

    init(resultType: BatchDeleteResultType, deleted: [ManagedObjectID], updated: [ManagedObjectID]) {
        self.resultType = resultType
        status = true
        count = resultType == .statusOnly ? nil : deleted.count
        deletedObjectIDs = resultType == .objectIDs ? deleted : nil
        updatedObjectIDs = resultType == .objectIDs ? updated : nil
    }
}
