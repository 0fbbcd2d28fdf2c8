import Foundation

/// Whether a native store records persistent history (docs/history.md): Core Data's
/// `NSPersistentHistoryTrackingKey`, with what to do about a store that records one.
public enum PersistentHistoryTracking: Sendable, Hashable {
    /// Nothing is recorded. A store that records history is refused when it is opened for
    /// writing this way (its history would get a hole); read-only, it opens.
    case off
    /// Every save and batch request is recorded, in the transaction that writes it. A store
    /// that did not record history starts to with its next save.
    case on
    /// The store's history, if it has one, is deleted when the store opens (in one
    /// transaction), and nothing is recorded from then on.
    case dropRecorded
}

/// A place in the persistent history of a coordinator's stores (Core Data's
/// `NSPersistentHistoryToken`): for each store, the number of the last transaction it covers.
///
/// Tokens persist across launches: an application keeps the last one it has processed
/// (it is `Codable`) and fetches the history after it on its next launch.
///
/// ```swift
/// let data = try JSONEncoder().encode(token)                     // kept in user defaults, a file…
/// let token = try JSONDecoder().decode(PersistentHistoryToken.self, from: data)
/// let newer = try context.execute(.fetchHistory(after: token)).transactions ?? []
/// ```
public struct PersistentHistoryToken: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The number of the last transaction covered, by store identifier. A store not named is
    /// covered by none of its transactions.
    public let transactionNumbers: [UUID: Int64]

    /// A token covering transactions up to `transactionNumbers[store]` of each store.
    public init(transactionNumbers: [UUID: Int64]) {
        self.transactionNumbers = transactionNumbers
    }

    /// The last transaction covered in `store` (0: none).
    public func transactionNumber(in store: UUID) -> Int64 { transactionNumbers[store] ?? 0 }

    /// Whether the token covers at least what `other` covers, in every store.
    public func covers(_ other: PersistentHistoryToken) -> Bool {
        other.transactionNumbers.allSatisfy { transactionNumber(in: $0.key) >= $0.value }
    }

    public var description: String {
        "PersistentHistoryToken(" + transactionNumbers.sorted { $0.key.uuidString < $1.key.uuidString }
            .map { "\($0.key.uuidString.prefix(8)): \($0.value)" }.joined(separator: ", ") + ")"
    }
}

/// A value a persistent history change records for one property.
public enum PersistentHistoryValue: Sendable, Hashable, CustomStringConvertible {
    /// No value: nil, or no destination.
    case null
    /// An attribute's value.
    case attribute(AttributeValue)
    /// A to-one relationship's destination.
    case object(ManagedObjectID)
    /// An ordered to-many relationship's destinations, in order.
    case orderedObjects([ManagedObjectID])
    /// The links a save added to and removed from a many-to-many relationship: the new value of
    /// an update change (nil its old value), or, for a delete, the old value of each
    /// many-to-many relationship (every link removed). An object's links are recorded on the
    /// side the saving context changed, after the transaction's inserts and updates.
    case links(added: [ManagedObjectID], removed: [ManagedObjectID])

    /// The attribute value, when the value is one.
    public var attributeValue: AttributeValue? {
        if case .attribute(let value) = self { return value }
        return nil
    }

    public var description: String {
        switch self {
        case .null: "nil"
        case .attribute(let value): value.description
        case .object(let id): id.description
        case .orderedObjects(let ids): "[" + ids.map(\.description).joined(separator: ", ") + "]"
        case .links(let added, let removed): "+\(added) -\(removed)"
        }
    }
}

/// What a change did to its object (Core Data's `NSPersistentHistoryChangeType`).
public enum PersistentHistoryChangeType: Sendable, Hashable {
    /// The object was inserted.
    case insert
    /// Some of the object's properties changed.
    case update
    /// The object was deleted.
    case delete
}

/// One object's change in a transaction of persistent history (Core Data's
/// `NSPersistentHistoryChange`), with what no peer keeps: the values before and after.
public struct PersistentHistoryChange: Sendable, Hashable {
    /// The change's place in its transaction, from 0.
    public let changeID: Int
    /// The number of the transaction the change belongs to.
    public let transactionNumber: Int64
    /// What the change did.
    public let changeType: PersistentHistoryChangeType
    /// The object changed (its permanent ID).
    public let changedObjectID: ManagedObjectID
    /// The properties an update changed (nil for an insert or a delete).
    public let updatedProperties: Set<String>?
    /// The values before the change: for an update, of the properties it changed; for a delete,
    /// of every stored property, and each many-to-many relationship's links as
    /// ``PersistentHistoryValue/links(added:removed:)`` removed; empty for an insert.
    public let oldValues: [String: PersistentHistoryValue]
    /// The values after the change: for an update, of the properties it changed; for an insert,
    /// of every stored property; empty for a delete.
    public let newValues: [String: PersistentHistoryValue]

    /// For a delete, the attributes the deleted object held (Core Data's `tombstone`, which
    /// keeps only those the model marks; Arbor keeps every one). Nil for other changes.
    public var tombstone: [String: AttributeValue]? {
        guard changeType == .delete else { return nil }
        return oldValues.compactMapValues(\.attributeValue)
    }
}

/// What kind of work a transaction of persistent history records.
public enum PersistentHistoryTransactionKind: String, Sendable, Hashable {
    /// A context's save.
    case save
    /// A ``BatchDeleteRequest``.
    case batchDelete
    /// A ``BatchUpdateRequest``.
    case batchUpdate
    /// A ``BatchInsertRequest``.
    case batchInsert
}

/// One save or batch request, as persistent history records it (Core Data's
/// `NSPersistentHistoryTransaction`).
public struct PersistentHistoryTransaction: Sendable, Hashable {
    /// The transaction's number in its store: numbers only grow, across launches and
    /// processes.
    public let transactionNumber: Int64
    /// The store the transaction wrote.
    public let storeID: UUID
    /// When it was written.
    public let timestamp: Date
    /// The ``ManagedObjectContext/transactionAuthor`` of the context that wrote it.
    public let author: String?
    /// The ``ManagedObjectContext/name`` of the context that wrote it.
    public let contextName: String?
    /// The process that wrote it.
    public let processID: Int32
    /// The name of that process (Core Data's `bundleID`).
    public let processName: String
    /// What wrote it.
    public let kind: PersistentHistoryTransactionKind
    /// How many changes it holds.
    public let changeCount: Int
    /// Its changes, in the order they were written (nil when the request asked for
    /// transactions only).
    public let changes: [PersistentHistoryChange]?

    /// The token covering this transaction and those before it in its store.
    public var token: PersistentHistoryToken { PersistentHistoryToken(transactionNumbers: [storeID: transactionNumber]) }
}

/// What a ``PersistentHistoryResult`` carries (Core Data's `NSPersistentHistoryResultType`).
public enum PersistentHistoryResultType: Sendable, Hashable {
    /// Whether the request succeeded, and nothing else.
    case statusOnly
    /// The number of transactions fetched or deleted.
    case count
    /// The transactions, without their changes.
    case transactionsOnly
    /// The transactions with their changes.
    case transactionsAndChanges
}

/// Fetches or deletes persistent history, run by
/// ``ManagedObjectContext/execute(_:)-(PersistentHistoryChangeRequest)`` (Core Data's
/// `NSPersistentHistoryChangeRequest`). Stores opened without history tracking have none.
///
/// ```swift
/// var request = PersistentHistoryChangeRequest.fetchHistory(after: lastToken)
/// request.predicate = try ObjectPredicate(format: "author != %@", "import")
/// for transaction in try context.execute(request).transactions ?? [] {
///     for change in transaction.changes ?? [] where change.changeType == .update {
///         print(change.changedObjectID, change.oldValues, change.newValues)
///     }
/// }
/// ```
public struct PersistentHistoryChangeRequest: Sendable {
    /// Where a request starts or stops.
    enum Bound: Sendable {
        /// After (or before) the transactions a token covers; nil: from the start.
        case token(PersistentHistoryToken?)
        /// After (or before) a moment.
        case date(Date)
    }

    /// What the request does.
    enum Operation: Sendable {
        case fetch(after: Bound)
        case delete(before: Bound)
    }

    let operation: Operation
    /// What the result carries (``PersistentHistoryResultType/transactionsAndChanges`` by
    /// default).
    public var resultType: PersistentHistoryResultType = .transactionsAndChanges
    /// A predicate the transactions fetched must match, over their `author`, `contextName`,
    /// `timestamp`, `processID`, `processName`, `kind` (a string) and `transactionNumber`
    /// (nil: every one). Ignored by deletions.
    public var predicate: ObjectPredicate?

    private init(_ operation: Operation) {
        self.operation = operation
    }

    /// The transactions after those `token` covers (nil: every transaction), oldest first.
    public static func fetchHistory(after token: PersistentHistoryToken?) -> PersistentHistoryChangeRequest {
        PersistentHistoryChangeRequest(.fetch(after: .token(token)))
    }

    /// The transactions written after `date`, oldest first.
    public static func fetchHistory(after date: Date) -> PersistentHistoryChangeRequest {
        PersistentHistoryChangeRequest(.fetch(after: .date(date)))
    }

    /// The transactions after `transaction` in its store, oldest first.
    public static func fetchHistory(after transaction: PersistentHistoryTransaction) -> PersistentHistoryChangeRequest {
        fetchHistory(after: transaction.token)
    }

    /// Deletes the transactions before those `token` covers — the last one it covers in each
    /// store is kept, so that history after it stays well-defined — or, for nil, every
    /// transaction. History is trimmed from its oldest end only.
    public static func deleteHistory(before token: PersistentHistoryToken?) -> PersistentHistoryChangeRequest {
        PersistentHistoryChangeRequest(.delete(before: .token(token)))
    }

    /// Deletes the transactions written before `date`.
    public static func deleteHistory(before date: Date) -> PersistentHistoryChangeRequest {
        PersistentHistoryChangeRequest(.delete(before: .date(date)))
    }

    /// Deletes the transactions before `transaction` in its store (it is kept).
    public static func deleteHistory(before transaction: PersistentHistoryTransaction) -> PersistentHistoryChangeRequest {
        deleteHistory(before: transaction.token)
    }
}

/// What a ``PersistentHistoryChangeRequest`` did (Core Data's `NSPersistentHistoryResult`), as
/// much as its ``PersistentHistoryChangeRequest/resultType`` asked for.
public struct PersistentHistoryResult: Sendable {
    /// What the result carries.
    public let resultType: PersistentHistoryResultType
    /// Whether the request succeeded: always true for a result (a failure throws).
    public let status: Bool
    /// The number of transactions fetched or deleted (every result type but
    /// ``PersistentHistoryResultType/statusOnly``).
    public let count: Int?
    /// The transactions fetched, oldest first (by timestamp across stores), for
    /// ``PersistentHistoryResultType/transactionsOnly`` and
    /// ``PersistentHistoryResultType/transactionsAndChanges``; nil for a deletion.
    public let transactions: [PersistentHistoryTransaction]?

    init(resultType: PersistentHistoryResultType, count: Int, transactions: [PersistentHistoryTransaction]?) {
        self.resultType = resultType
        status = true
        self.count = resultType == .statusOnly ? nil : count
        self.transactions = resultType == .transactionsOnly || resultType == .transactionsAndChanges ? transactions : nil
    }
}

extension PersistentHistoryTransaction {
    /// The transaction with `changes`.
    func with(changes: [PersistentHistoryChange]) -> PersistentHistoryTransaction {
        PersistentHistoryTransaction(transactionNumber: transactionNumber, storeID: storeID, timestamp: timestamp, author: author,
                                     contextName: contextName, processID: processID, processName: processName, kind: kind,
                                     changeCount: changeCount, changes: changes)
    }
}
