import ArborStore
import Foundation

// What a store may do besides the ``PersistentStore`` protocol's reads and saves: one protocol
// per capability. The coordinator asks a store for a capability when a request needs it
// (``PersistentStoreCoordinator/capability(_:of:for:)``) and refuses the request with
// ``ArborError/Code/unsupported`` when the store lacks it; contexts reach these only through the
// coordinator, under its lock (docs/architecture.md, "The store boundary").

/// A store whose save runs more work inside its own transaction before committing: the
/// coordinator writes the other stores of a multi-store save there, so that a conflict or a
/// failure in any of them leaves every store as it was.
protocol NestingStore: PersistentStore {
    /// Saves `changes` in one transaction, calling `beforeCommit` with the result once every
    /// change is written and before the commit; an error it throws rolls the transaction back.
    ///
    /// - Throws: as ``PersistentStore/save(_:)``, and what `beforeCommit` throws.
    func save(_ changes: StoreChanges, beforeCommit: (StoreSaveResult) throws -> Void) throws -> StoreSaveResult
}

/// A store that checks the rows a save requires (``StoreChanges/requiredRows``) inside the
/// save's own transaction, and finds many missing rows in one read.
protocol RowCheckingStore: PersistentStore {
    /// Those of `ids` whose rows the store does not hold (of the ID's own entity).
    func missingRows(_ ids: [ManagedObjectID]) throws -> [ManagedObjectID]
}

/// A store that runs batch deletes and updates itself, with the model's delete rules, indexes
/// and uniqueness (docs/batch-requests.md).
protocol BatchRequestStore: PersistentStore {
    /// Deletes, in one transaction, the rows `fetch` matches (or, without one, the rows of
    /// `objectIDs` that exist), applying the delete rules to every deleted row. Returns the
    /// transaction's record: the rows deleted (those matched first, then those the cascade rules
    /// reached), and the rows the nullify rules rewrote, with the relationships cleared.
    func batchDelete(matching fetch: StoreFetch?, objectIDs: [ManagedObjectID], origin: TransactionOrigin) throws -> ChangeRecord
    /// Rewrites, in one transaction, the rows `fetch` matches (but those in `excluded`) with the
    /// row `change` makes of each (nil: the row stays), changing only the attributes `changing`
    /// names; returns the transaction's record (the rows written, with the attributes changed).
    func batchUpdate(matching fetch: StoreFetch, excluding excluded: Set<ManagedObjectID>, changing: Set<String>, origin: TransactionOrigin,
                     _ change: (ManagedObjectID, StoreRow) throws -> StoreRow?) throws -> ChangeRecord
}

/// A store that computes grouped and aggregated dictionary fetches over its rows, in one pass
/// (docs/relational-planning.md, "Aggregates in the store").
protocol GroupingStore: PersistentStore {
    /// Whether the store can compute `properties` grouped by `groupBy` over rows of `entity`.
    func canGroup(_ properties: [PropertyToFetch], by groupBy: [String], of entity: EntityDescription) -> Bool
    /// The groups of `grouping`.
    func groups(_ grouping: StoreGrouping) throws -> [StoreGroup]
}

/// A store that records persistent history (docs/history.md).
protocol HistoryStore: PersistentStore {
    /// Whether the store records history now (a store may be able to and not be asked to).
    var tracksHistory: Bool { get }
    /// A number that moves with every commit to the store, by any connection, as far as this
    /// store's transactions have seen; reading it costs no I/O.
    var changeCounter: UInt64 { get }
    /// The number of the last transaction recorded (0: none).
    func lastHistoryTransaction() throws -> Int64
    /// The transactions after number `after` (or written after `date`) that `include` accepts,
    /// oldest first, with their changes when `changes` is set. `token`: `after` comes from a
    /// token, which has expired when history after it was deleted
    /// (``ArborError/Code/persistentHistoryTokenExpired``).
    func fetchHistory(after: Int64, token: Bool, date: Date?, changes: Bool,
                      _ include: (PersistentHistoryTransaction) throws -> Bool) throws -> [PersistentHistoryTransaction]
    /// Deletes the transactions numbered below `before` (or written before `date`) from the
    /// oldest end, keeping those after `keeping`; returns how many went.
    func deleteHistory(before: Int64?, date: Date?, keeping: Int64?) throws -> Int
}

/// A store that others (other processes, other coordinators) may change, and that can say what
/// they changed (docs/history.md, "Remote changes").
protocol RemoteChangeStore: PersistentStore {
    /// Whether someone else may have committed since the store last looked (no I/O).
    var mayHaveRemoteChanges: Bool { get }
    /// What the store finds since it last looked (nil: nothing), to be accounted for once
    /// processed (``accept(_:)``); `refreshing` reads the store's state first (a poll).
    func remoteChanges(refreshing: Bool) throws -> FoundRemoteChanges?
    /// Accounts for what ``remoteChanges(refreshing:)`` found, once it was processed.
    func accept(_ found: FoundRemoteChanges)
}

/// A store that can copy itself into a new file while others use it: what
/// ``PersistentStoreCoordinator/migratePersistentStore(_:to:options:)`` needs of a store.
protocol BackupSource: PersistentStore {
    /// Writes a consistent copy of the store to a new file at `path` (through `fileSystem`, or
    /// the store's own).
    func backup(to path: String, fileSystem: (any FileSystem)?) throws
}

/// What a store found since it last looked, and what to account for once it is processed.
struct FoundRemoteChanges: Sendable {
    /// The file's change counter it found.
    let counter: UInt64
    /// The last history transaction it read (nil: the store records no history).
    let lastHistory: Int64?
    /// The record of the commits of others (nil: only the store's own moved the counter); by
    /// ID only, and empty when the store records no history.
    let changes: ChangeRecord?
}

/// A dictionary fetch that groups or aggregates, as a store runs it: one pass over the matching
/// rows into a table of groups, no managed objects (docs/relational-planning.md, "Aggregates in
/// the store").
struct StoreGrouping {
    /// The rows: the fetch's predicate (its joins included), no order, no window.
    var rows: StoreFetch
    /// The key paths grouped by (none: one group of every row).
    var groupBy: [String]
    /// The properties each group gives.
    var properties: [PropertyToFetch]
}

/// One group of a ``StoreGrouping``: its dictionary, and the values of its group-by keys (for
/// sorting by a key it groups by but does not fetch).
struct StoreGroup {
    var values: [String: any Sendable]
    var groupValues: [String: Operand]
}
