import Foundation

/// The coordinator's side of the store boundary: the requests that need a capability of a store
/// (StoreCapabilities.swift) go through these, under the coordinator's lock. A context never
/// asks a store for a capability itself.
extension PersistentStoreCoordinator {
    /// `store` as a store of capability `Capability`, for `request` (named in the error).
    ///
    /// - Throws: ``ArborError/Code/unsupported`` naming the store and the request when the store
    ///   lacks the capability.
    func capability<Capability>(_ type: Capability.Type, of store: any PersistentStore, for request: @autoclosure () -> String) throws -> Capability {
        guard let capable = store as? Capability else {
            throw ArborError(.unsupported, "\(request()) needs a store that can run it; the store \(store.path ?? store.identifier.uuidString) "
                                + "is a \(store.type) store, which cannot")
        }
        return capable
    }

    // MARK: Persistent history

    /// The stores among `stores` (nil: all of the coordinator's) that record history now.
    private func historyStores(_ stores: [any PersistentStore]? = nil) -> [any HistoryStore] {
        (stores ?? self.stores).compactMap { $0 as? any HistoryStore }.filter(\.tracksHistory)
    }

    /// The transactions after `bound` that `include` accepts, of every store that records
    /// history, oldest first (by time across stores), with their changes when `changes` is set.
    func fetchHistory(after bound: PersistentHistoryChangeRequest.Bound, changes: Bool,
                      _ include: (PersistentHistoryTransaction) throws -> Bool) throws -> [PersistentHistoryTransaction] {
        try locked {
            let stores = historyStores()
            var found: [PersistentHistoryTransaction] = []
            for store in stores {
                var after: Int64 = 0
                var date: Date?
                var named = false
                switch bound {
                case .token(let token):
                    // A token that does not name this store (another store's transaction's) reads it from the start.
                    if let number = token?.transactionNumbers[store.identifier] {
                        after = number
                        named = true
                    }
                case .date(let moment): date = moment
                }
                found += try store.fetchHistory(after: after, token: named, date: date, changes: changes, include)
            }
            if stores.count > 1 {
                found.sort { ($0.timestamp, $0.storeID.uuidString, $0.transactionNumber) < ($1.timestamp, $1.storeID.uuidString, $1.transactionNumber) }
            }
            return found
        }
    }

    /// Deletes the history before `bound` in every store that records it, keeping what the
    /// pinned contexts of the coordinator read; returns how many transactions went.
    func deleteHistory(before bound: PersistentHistoryChangeRequest.Bound) throws -> Int {
        try locked {
            var deleted = 0
            for store in historyStores() {
                let keeping = oldestPinnedGeneration(in: store.identifier)
                switch bound {
                case .token(let token?): deleted += try store.deleteHistory(before: token.transactionNumber(in: store.identifier), date: nil, keeping: keeping)
                case .token(nil): deleted += try store.deleteHistory(before: nil, date: nil, keeping: keeping)
                case .date(let moment): deleted += try store.deleteHistory(before: nil, date: moment, keeping: keeping)
                }
            }
            return deleted
        }
    }

    /// The token covering every transaction recorded so far in `stores` (nil: every store of
    /// the coordinator) that record persistent history; nil when none does (Core Data's
    /// `currentPersistentHistoryToken(fromStores:)`).
    ///
    /// - Throws: ``ArborError/Code/store`` for damaged history records.
    public func currentPersistentHistoryToken(fromStores stores: [any PersistentStore]? = nil) throws -> PersistentHistoryToken? {
        try locked {
            let tracking = historyStores(stores)
            guard !tracking.isEmpty else { return nil }
            var numbers: [UUID: Int64] = [:]
            for store in tracking { numbers[store.identifier] = try store.lastHistoryTransaction() }
            return PersistentHistoryToken(transactionNumbers: numbers)
        }
    }

    /// The last history transaction of every store, for a query generation: every store must
    /// record history, since a generation is read from it.
    ///
    /// - Throws: ``ArborError/Code/misuse`` when the coordinator has no store, or a store records
    ///   no history.
    func lastHistoryTransactions() throws -> [UUID: Int64] {
        try locked {
            let untracked = stores.filter { !(($0 as? any HistoryStore)?.tracksHistory ?? false) }
            guard !stores.isEmpty, untracked.isEmpty else {
                let names = untracked.map { $0.path ?? $0.identifier.uuidString }
                throw ArborError(.misuse, stores.isEmpty
                    ? "the coordinator has no store to pin a query generation of"
                    : "a query generation reads the stores as they were from their persistent history, and \(names.joined(separator: ", ")) "
                        + "records none: add the stores with persistentHistoryTracking on")
            }
            var numbers: [UUID: Int64] = [:]
            for store in historyStores() { numbers[store.identifier] = try store.lastHistoryTransaction() }
            return numbers
        }
    }

    /// The history of store `identifier` after transaction `after`, with its changes, and the
    /// store's change counter it was read at; nil when the counter is still `counter` (nothing
    /// committed since: no I/O).
    ///
    /// - Throws: ``ArborError/Code/persistentHistoryTokenExpired`` when history after `after` was
    ///   deleted; ``ArborError/Code/misuse`` when the store is gone or records no history.
    func history(ofStore identifier: UUID, after: Int64, unlessCounterIs counter: UInt64?) throws -> (counter: UInt64, transactions: [PersistentHistoryTransaction])? {
        try locked {
            guard let store = historyStores().first(where: { $0.identifier == identifier }) else {
                throw ArborError(.misuse, "the store \(identifier) a query generation reads is no longer a store of the coordinator that records history")
            }
            let latest = store.changeCounter
            guard latest != counter else { return nil }
            return (latest, try store.fetchHistory(after: after, token: true, date: nil, changes: true) { _ in true })
        }
    }

    // MARK: Fetching

    /// Whether `store` computes the groups of `grouping`: it has the capability, and reads every
    /// key path and expression on rows.
    func canGroup(_ grouping: StoreGrouping, in store: any PersistentStore, entity: EntityDescription) -> Bool {
        (store as? any GroupingStore)?.canGroup(grouping.properties, by: grouping.groupBy, of: entity) ?? false
    }

    /// The groups of `grouping` as `store` computes them; nil when it cannot (``canGroup(_:in:entity:)``).
    func groups(_ grouping: StoreGrouping, in store: any PersistentStore, entity: EntityDescription) throws -> [StoreGroup]? {
        try locked {
            guard let capable = store as? any GroupingStore,
                  capable.canGroup(grouping.properties, by: grouping.groupBy, of: entity) else { return nil }
            return try capable.groups(grouping)
        }
    }

    /// The plan `store` follows for `fetch`.
    func explain(_ fetch: StoreFetch, in store: any PersistentStore) throws -> QueryPlan {
        try locked { try store.explain(fetch) }
    }

    /// Whether `store` checks the rows a save requires (``StoreChanges/requiredRows``) in the
    /// save's own transaction; otherwise the caller checks them first (``missingRows(_:in:)``).
    func checksRequiredRows(in store: any PersistentStore) -> Bool {
        store is any RowCheckingStore
    }

    /// Those of `ids` whose rows `store` does not hold: in one read when the store can, else row
    /// by row.
    func missingRows(_ ids: [ManagedObjectID], in store: any PersistentStore) throws -> [ManagedObjectID] {
        try locked {
            if let checking = store as? any RowCheckingStore { return try checking.missingRows(ids) }
            return try ids.filter { try store.row(for: $0) == nil }
        }
    }
}
