import Foundation

/// What a fetch returns.
public enum FetchResultType: Sendable, Hashable {
    /// Managed objects (the default).
    case managedObject
    /// Their object IDs.
    case managedObjectID
    /// Dictionaries of the ``FetchRequest/propertiesToFetch`` (every attribute when nil), with
    /// grouping and aggregates.
    case dictionary
    /// The number of matching objects, as the single element of the result.
    case count
    /// Values of a `Decodable` type, decoded from each matching object's row by coding key:
    /// attributes by name, to-one key paths (`"department.name"`), to-one relationships as
    /// nested values, to-many relationships as lists. No managed object
    /// is made when the store's rows answer the request (the context has no unsaved changes and
    /// nothing is left to check on objects). A request with one property in
    /// ``FetchRequest/propertiesToFetch`` decodes a single value (`FetchRequest<String>`).
    case values
}

/// A property a dictionary fetch returns: an attribute (or key path), or a named aggregate or
/// expression. Core Data's `propertiesToFetch` entries (names and `NSExpressionDescription`s).
public struct PropertyToFetch: Sendable, Hashable {
    /// The aggregate functions.
    public enum Function: String, Sendable, Hashable {
        /// The number of objects (of non-nil values, for a key).
        case count
        /// The sum of the values.
        case sum
        /// Their average.
        case average
        /// The smallest.
        case min
        /// The largest.
        case max

        /// The key-path collection operator that computes it (`@count`, `@sum`, `@avg`, `@min`,
        /// `@max`).
        var collectionOperator: CollectionOperator {
            switch self {
            case .count: .count
            case .sum: .sum
            case .average: .avg
            case .min: .min
            case .max: .max
            }
        }
    }

    enum Kind: Sendable, Hashable {
        case key(String)
        case aggregate(Function, String)
        case expression(ObjectExpression)
    }

    /// The key of the value in each result dictionary.
    public let name: String
    let kind: Kind

    /// An attribute, or a key path through to-one relationships, named as itself.
    public static func key(_ keyPath: String) -> PropertyToFetch { PropertyToFetch(name: keyPath, kind: .key(keyPath)) }

    /// An aggregate of a key over each group (or over every object when nothing is grouped),
    /// named `name`.
    public static func aggregate(_ function: Function, of keyPath: String, as name: String) -> PropertyToFetch {
        PropertyToFetch(name: name, kind: .aggregate(function, keyPath))
    }

    /// An expression evaluated on each object (or, grouped, on the group's first), named `name`.
    public static func expression(_ expression: ObjectExpression, as name: String) -> PropertyToFetch {
        PropertyToFetch(name: name, kind: .expression(expression))
    }
}

/// A description of the objects to fetch: an entity, an optional predicate, an order, limits,
/// and what to return. Core Data's `NSFetchRequest`.
///
/// ```swift
/// var request = FetchRequest<Employee>(entityName: "Employee")
/// request.predicate = try ObjectPredicate(format: "salary > %@ AND department.name == %@", 50_000, "Sales")
/// request.sortDescriptors = [ObjectSortDescriptor(key: "lastName")]
/// request.fetchLimit = 20
/// let employees = try context.fetch(request)   // [Employee]
/// ```
///
/// `Result` is what the fetch returns: `ManagedObject` or a subclass (``FetchResultType/managedObject``),
/// `ManagedObjectID`, `[String: any Sendable]` (``FetchResultType/dictionary``: values that may
/// cross queues, so a dictionary fetch can run in `performBackgroundTask` and return its results;
/// `[String: Any]` works too), `Int` (``FetchResultType/count``), or any other `Decodable` type
/// (``FetchResultType/values``: plain values, decoded from rows without managed objects):
///
/// ```swift
/// struct Row: Decodable, Sendable {
///     let lastName: String
///     let salary: Int?
///     let departmentName: String?
///     enum CodingKeys: String, CodingKey { case lastName, salary, departmentName = "department.name" }
/// }
/// let rows = try context.fetch(FetchRequest<Row>(entityName: "Employee"))   // [Row]
/// ```
public struct FetchRequest<Result>: Sendable, Hashable {
    /// The entity whose objects are fetched.
    public var entityName: String
    /// The condition objects must meet (nil: every object).
    public var predicate: ObjectPredicate?
    /// The order of the results (none: the store's order, unspecified).
    public var sortDescriptors: [ObjectSortDescriptor] = []
    /// The most results returned (0: no limit).
    public var fetchLimit = 0
    /// How many matching results to skip first.
    public var fetchOffset = 0
    /// When positive, objects are returned as faults whose rows are loaded this many at a time,
    /// as they are first used (the whole list of IDs is fetched at once).
    public var fetchBatchSize = 0
    /// What the fetch returns.
    public var resultType: FetchResultType
    /// The properties of dictionary results (nil: every attribute).
    public var propertiesToFetch: [PropertyToFetch]?
    /// Keys to group dictionary results by (each group gives one dictionary, with its
    /// aggregates).
    public var propertiesToGroupBy: [String]?
    /// A condition on the grouped dictionaries (their keys are the properties' names).
    public var havingPredicate: ObjectPredicate?
    /// Whether equal dictionaries are returned once.
    public var returnsDistinctResults = false
    /// Whether unsaved changes of the context count: new objects that match are returned,
    /// changed ones are judged by their in-memory values, deleted ones are left out (true, as
    /// in Core Data).
    public var includesPendingChanges = true
    /// Whether the fetch must be answered by the store alone (false by default; Core Data has no
    /// such option): when a term of the predicate would be judged on objects instead — every row
    /// the store returns made into an object first (docs/predicates.md, "What runs on objects") —
    /// or a grouped fetch grouped objects, the fetch throws
    /// ``ArborError/Code/invalidFetchRequest`` naming the term and why, before anything is read.
    /// Objects with unsaved changes are still merged, and judged, in memory: they are not in the
    /// store.
    public var requiresStoreEvaluation = false
    /// Whether objects of sub-entities are returned too.
    public var includesSubentities = true
    /// Whether objects not yet registered are returned as faults (their rows are in the row
    /// cache, so using them reads no store).
    public var returnsObjectsAsFaults = true
    /// Relationships whose destinations are loaded with the results (key paths of
    /// relationships, `department` or `department.manager`).
    public var relationshipKeyPathsForPrefetching: [String] = []

    /// A request for objects of `entityName`, returning `Result`s: objects for a managed object
    /// type, IDs for `ManagedObjectID`, dictionaries for `[String: any Sendable]` (or
    /// `[String: Any]`), a count for `Int`, decoded values for any other `Decodable` type.
    public init(entityName: String) {
        self.entityName = entityName
        switch Result.self {
        case is ManagedObjectID.Type: resultType = .managedObjectID
        case is [String: Any].Type, is [String: Any?].Type: resultType = .dictionary
        case _ where Result.self == [String: any Sendable].self: resultType = .dictionary
        case is Int.Type: resultType = .count
        case is ManagedObject.Type: resultType = .managedObject
        case is any Decodable.Type: resultType = .values
        default: resultType = .managedObject
        }
    }

    /// A request for objects of `entityName` matching a predicate format string.
    ///
    /// - Throws: as ``ObjectPredicate/init(format:_:)``.
    public init(entityName: String, format: String, _ arguments: Any?...) throws {
        self.init(entityName: entityName)
        predicate = try ObjectPredicate(format: format, argumentArray: arguments)
    }

    public static func == (a: FetchRequest, b: FetchRequest) -> Bool {
        a.entityName == b.entityName && a.predicate == b.predicate && a.sortDescriptors == b.sortDescriptors
            && a.fetchLimit == b.fetchLimit && a.fetchOffset == b.fetchOffset && a.fetchBatchSize == b.fetchBatchSize
            && a.resultType == b.resultType && a.propertiesToFetch == b.propertiesToFetch
            && a.propertiesToGroupBy == b.propertiesToGroupBy && a.havingPredicate == b.havingPredicate
            && a.returnsDistinctResults == b.returnsDistinctResults && a.includesPendingChanges == b.includesPendingChanges
            && a.includesSubentities == b.includesSubentities && a.returnsObjectsAsFaults == b.returnsObjectsAsFaults
            && a.relationshipKeyPathsForPrefetching == b.relationshipKeyPathsForPrefetching
            && a.requiresStoreEvaluation == b.requiresStoreEvaluation
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(entityName)
        hasher.combine(predicate)
        hasher.combine(sortDescriptors)
        hasher.combine(fetchLimit)
        hasher.combine(fetchOffset)
    }

    /// The plan the context's stores would follow for this request (which index, which range,
    /// whether a sort is needed), as text: `arbor query --explain` prints it.
    ///
    /// - Throws: as ``ManagedObjectContext/fetch(_:)``.
    public func explain(in context: ManagedObjectContext) throws -> String {
        try context.explain(self)
    }
}

extension FetchRequest where Result: ManagedObject {
    /// A request for the objects of `Result`'s entity: the entity the model declares with this
    /// class (found when the request runs), else the entity named as the class.
    public init() {
        self.init(entityName: String(describing: Result.self))
    }
}
