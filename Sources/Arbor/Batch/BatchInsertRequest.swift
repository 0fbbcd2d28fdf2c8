import Foundation

/// What a ``BatchInsertResult`` carries (Core Data's `NSBatchInsertRequestResultType`).
public enum BatchInsertResultType: Sendable, Hashable {
    /// Whether the request succeeded, and nothing else.
    case statusOnly
    /// The number of objects inserted or, by an upsert, updated.
    case count
    /// The IDs of the objects inserted and of those an upsert updated, and their number.
    case objectIDs
}

/// Inserts rows of one entity from dictionaries of values — given as a list, or made one at a
/// time by a handler — in the store, in one transaction, without managed objects (Core Data's
/// `NSBatchInsertRequest`), run by ``ManagedObjectContext/execute(_:)-(BatchInsertRequest)``.
///
/// Each dictionary gives attribute values by name (converted to the attributes' types as
/// ``ManagedObject/setValue(_:forKey:)`` converts them; absent attributes take their default
/// values), and may give to-one relationships whose inverse is an unordered to-many (or none)
/// as the ``ManagedObjectID`` of a saved object. Values are validated by default. A row whose
/// unique values another row holds is settled by the context's merge policy: an **upsert** under
/// ``MergePolicyType/mergeByPropertyObjectTrump`` and ``MergePolicyType/overwrite`` (the stored
/// row takes the values the dictionary gives), skipped under
/// ``MergePolicyType/mergeByPropertyStoreTrump`` and ``MergePolicyType/rollback``, a
/// ``ArborError/Code/constraintConflict`` under ``MergePolicyType/error`` (docs/batch-requests.md).
///
/// ```swift
/// var request = BatchInsertRequest(entityName: "Employee", objects: rows.map { ["name": $0.name, "email": $0.email] })
/// request.resultType = .objectIDs
/// let inserted = try context.execute(request).insertedObjectIDs ?? []
/// ```
public struct BatchInsertRequest: Sendable {
    /// Where the dictionaries come from.
    enum Source: Sendable {
        case objects([[String: any Sendable]])
        case dictionaryHandler(@Sendable (inout [String: Any]) throws -> Bool)
        case managedObjectHandler(@Sendable (ManagedObject) throws -> Bool)
    }

    /// The entity of the rows (a concrete one).
    public let entityName: String
    let source: Source
    /// What the result carries (``BatchInsertResultType/statusOnly`` by default).
    public var resultType: BatchInsertResultType = .statusOnly
    /// Whether each value is checked against its attribute's rules (true by default; a
    /// required attribute left nil is refused either way).
    public var validatesValues = true
    /// Whether every live context of the coordinator merges what the request did (true by
    /// default): the inserted objects are announced, the upserted ones refreshed.
    public var mergesIntoContexts = true

    /// A request inserting one row of `entityName` per dictionary of `objects`.
    public init(entityName: String, objects: [[String: any Sendable]]) {
        self.entityName = entityName
        source = .objects(objects)
    }

    /// A request inserting the rows `handler` makes: it is called with an empty dictionary to
    /// fill, again and again, and returns true when it is done (the dictionary of that call is
    /// not inserted), as Core Data's `dictionaryHandler`.
    public init(entityName: String, dictionaryHandler handler: @escaping @Sendable (inout [String: Any]) throws -> Bool) {
        self.entityName = entityName
        source = .dictionaryHandler(handler)
    }

    /// A request inserting the rows `handler` makes by setting the attributes of an object of
    /// the entity (of its class, in no context): it is called with a new object again and again
    /// and returns true when it is done (the object of that call is not inserted), as Core
    /// Data's `managedObjectHandler`. Only the attributes it sets are read (an upsert writes
    /// those, its other attributes stay): an object in no context cannot relate to saved
    /// objects, so rows that name destinations come from dictionaries, by object ID.
    public init(entityName: String, managedObjectHandler handler: @escaping @Sendable (ManagedObject) throws -> Bool) {
        self.entityName = entityName
        source = .managedObjectHandler(handler)
    }
}

/// What a ``BatchInsertRequest`` did (Core Data's `NSBatchInsertResult`), as much as its
/// ``BatchInsertRequest/resultType`` asked for.
public struct BatchInsertResult: Sendable {
    /// What the result carries.
    public let resultType: BatchInsertResultType
    /// Whether the request succeeded: always true for a result (a failure throws).
    public let status: Bool
    /// The number of objects inserted or updated by an upsert, for
    /// ``BatchInsertResultType/count`` and ``BatchInsertResultType/objectIDs``.
    public let count: Int?
    /// The objects inserted, in the order of their dictionaries, for
    /// ``BatchInsertResultType/objectIDs``.
    public let insertedObjectIDs: [ManagedObjectID]?
    /// The stored objects an upsert gave new values, for ``BatchInsertResultType/objectIDs``.
    public let updatedObjectIDs: [ManagedObjectID]?

    init(resultType: BatchInsertResultType, inserted: [ManagedObjectID], updated: [ManagedObjectID]) {
        self.resultType = resultType
        status = true
        count = resultType == .statusOnly ? nil : inserted.count + updated.count
        insertedObjectIDs = resultType == .objectIDs ? inserted : nil
        updatedObjectIDs = resultType == .objectIDs ? updated : nil
    }
}
