import ArborStore
import Foundation
import Synchronization

/// What a native store knows of the commits to its file (docs/history.md, "Remote changes"):
/// the change counter of the file header as of the last commit this store made or saw, and the
/// persistent history transactions it wrote itself, so that those of others can be told apart.
struct RemoteWatch {
    /// The file's change counter as this store last accounted for it.
    var known: UInt64 = 0
    /// The last history transaction accounted for (its own or another's).
    var lastHistory: Int64 = 0
    /// Transactions this store wrote and committed since it last looked.
    var own: Set<Int64> = []
    /// The transaction the write in progress records (noted when it commits).
    var pending: Int64?
}

/// The commits of others a store found since it last looked.
struct RemoteChanges: Sendable {
    /// The store.
    let store: UUID
    /// The token of the last transaction found (nil: the store records no history).
    let token: PersistentHistoryToken?
    /// The objects the transactions of others inserted, updated and deleted (empty without
    /// history).
    var inserted: Set<ManagedObjectID> = []
    var updated: Set<ManagedObjectID> = []
    var deleted: Set<ManagedObjectID> = []
}

extension NativeStore {
    /// Runs one write transaction of this store's own, accounting for its commit: the change
    /// counter it leaves is known (unless others committed since this store last looked: then
    /// it stays as it was, for ``remoteChanges(refreshing:)`` to find theirs), and the history
    /// transaction it recorded is its own.
    func ownWrite<R>(_ body: (WriteTransaction) throws -> R) throws -> R {
        var begin: UInt64 = 0
        let result: R
        do {
            result = try database.write { transaction in
                begin = transaction.header.changeCounter
                return try body(transaction)
            }
        } catch {
            remoteWatch.withLock { $0.pending = nil }
            throw error
        }
        let end = database.latestChangeCounter
        remoteWatch.withLock { watch in
            if watch.known == begin { watch.known = end }
            if let pending = watch.pending { watch.own.insert(pending) }
            watch.pending = nil
        }
        return result
    }

    /// Notes the history transaction the write in progress records (``HistoryWriter``).
    func noteRecording(_ number: Int64) {
        remoteWatch.withLock { $0.pending = number }
    }

    /// Starts watching: the file as it is now is accounted for.
    func startWatching() throws {
        _ = try Self.storeError("read \(path ?? "memory")") { try database.read { _ in } }
        let last = tracksHistory ? try lastHistoryTransaction() : 0
        let counter = database.latestChangeCounter
        remoteWatch.withLock { watch in
            watch.known = counter
            watch.lastHistory = last
        }
    }

    /// Whether the file's change counter, as this store's transactions last saw it, moved past
    /// what the store accounted for: someone else committed (no I/O).
    var mayHaveRemoteChanges: Bool {
        let counter = database.latestChangeCounter
        return remoteWatch.withLock { $0.known != counter }
    }

    /// The commits of others since the store last looked, or nil when there are none;
    /// `refreshing` first reads the file's header (a poll), else only what the store's own
    /// transactions saw is compared. With history, the transactions of others are read (the
    /// store's own are skipped) and their objects named.
    func remoteChanges(refreshing: Bool) throws -> RemoteChanges? {
        if refreshing { _ = try Self.storeError("read \(path ?? "memory")") { try database.read { _ in } } }
        let counter = database.latestChangeCounter
        let (moved, after, own) = remoteWatch.withLock { watch -> (Bool, Int64, Set<Int64>) in
            defer { watch.known = counter }
            return (watch.known != counter, watch.lastHistory, watch.own)
        }
        guard moved else { return nil }
        guard tracksHistory else { return RemoteChanges(store: identifier, token: nil) }
        let transactions = try fetchHistory(after: after, date: nil, changes: true) { _ in true }
        let last = transactions.last?.transactionNumber ?? after
        remoteWatch.withLock { watch in
            watch.lastHistory = max(watch.lastHistory, last)
            watch.own = watch.own.filter { $0 > last }
        }
        let others = transactions.filter { !own.contains($0.transactionNumber) }
        guard !others.isEmpty else { return nil }
        var changes = RemoteChanges(store: identifier, token: PersistentHistoryToken(transactionNumbers: [identifier: last]))
        for change in others.flatMap({ $0.changes ?? [] }) {
            switch change.changeType {
            case .insert: changes.inserted.insert(change.changedObjectID)
            case .update: changes.updated.insert(change.changedObjectID)
            case .delete: changes.deleted.insert(change.changedObjectID)
            }
        }
        // An object inserted and deleted by others meanwhile is only deleted; one inserted and
        // updated is only inserted.
        changes.inserted.subtract(changes.deleted)
        changes.updated.subtract(changes.deleted)
        changes.updated.subtract(changes.inserted)
        return changes
    }
}
