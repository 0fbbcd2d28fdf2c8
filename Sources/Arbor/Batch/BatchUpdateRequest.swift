import Foundation

/// What a ``BatchUpdateResult`` carries (Core Data's `NSBatchUpdateRequestResultType`).
public enum BatchUpdateResultType: Sendable, Hashable {
    /// Whether the request succeeded, and nothing else.
    case statusOnly
    /// The number of objects updated.
    case count
    /// The IDs of the objects updated, and their number.
    case objectIDs
}

/// Changes attributes of every row a predicate matches, in the store, in one transaction,
/// without managed objects (Core Data's `NSBatchUpdateRequest`), run by
/// ``ManagedObjectContext/execute(_:)-(BatchUpdateRequest)``.
///
/// Each new value is an expression evaluated on the row — a constant, another attribute, or
/// arithmetic on them — converted to the attribute's type. Unlike Core Data's, the request keeps
/// the model's rules: values are validated (by default), uniqueness constraints are checked
/// with the context's merge policy, indexes follow, and every live context of the coordinator
/// merges the updated objects (docs/batch-requests.md).
///
/// ```swift
/// var raise = BatchUpdateRequest(entityName: "Employee")
/// raise.predicate = try ObjectPredicate(format: "salary < %@", 39_000)
/// raise.propertiesToUpdate = ["salary": try ObjectExpression(format: "salary + salary / 10")]
/// raise.resultType = .count
/// let raised = try context.execute(raise).count
/// ```
public struct BatchUpdateRequest: Sendable {
    /// The entity whose rows change.
    public var entityName: String
    /// The rows that change (nil: every row of the entity).
    public var predicate: ObjectPredicate?
    /// Whether rows of sub-entities change too (true by default).
    public var includesSubentities = true
    /// The new value of each attribute, by name: an expression evaluated on the row as it was
    /// (`.constant(…)`, `salary * 2`, `lastName`). A numeric result stored in an integer
    /// attribute is truncated toward zero, as SQL's integer division does.
    public var propertiesToUpdate: [String: ObjectExpression] = [:]
    /// What the result carries (``BatchUpdateResultType/statusOnly`` by default).
    public var resultType: BatchUpdateResultType = .statusOnly
    /// Whether the new values are checked against the model's validation rules (true by
    /// default; Core Data's never are). The type of a value and a required attribute's nil are
    /// checked either way.
    public var validatesValues = true
    /// Whether every live context of the coordinator merges the updated objects (true by
    /// default): they are refreshed, their unsaved changes on top.
    public var mergesIntoContexts = true

    /// A request changing rows of `entityName` (set ``propertiesToUpdate``, and a
    /// ``predicate`` for fewer than all of them).
    public init(entityName: String) {
        self.entityName = entityName
    }
}

/// What a ``BatchUpdateRequest`` did (Core Data's `NSBatchUpdateResult`), as much as its
/// ``BatchUpdateRequest/resultType`` asked for.
public struct BatchUpdateResult: Sendable {
    /// What the result carries.
    public let resultType: BatchUpdateResultType
    /// Whether the request succeeded: always true for a result (a failure throws).
    public let status: Bool
    /// The number of objects updated, for ``BatchUpdateResultType/count`` and
    /// ``BatchUpdateResultType/objectIDs``.
    public let count: Int?
    /// The objects updated, for ``BatchUpdateResultType/objectIDs``.
    public let updatedObjectIDs: [ManagedObjectID]?

    init(resultType: BatchUpdateResultType, updated: [ManagedObjectID]) {
        self.resultType = resultType
        status = true
        count = resultType == .statusOnly ? nil : updated.count
        updatedObjectIDs = resultType == .objectIDs ? updated : nil
    }
}
