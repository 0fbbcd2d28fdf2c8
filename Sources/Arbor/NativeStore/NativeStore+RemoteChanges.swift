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
    /// The transaction each write in progress records, by write transaction (noted as its own
    /// when that write commits, forgotten when it fails).
    var pending: [ObjectIdentifier: Int64] = [:]
}

extension NativeStore {
    /// Runs one write transaction of this store's own, accounting for its commit: the change
    /// counter it leaves is known (unless others committed since this store last looked: then
    /// it stays as it was, for ``remoteChanges(refreshing:)`` to find theirs), and the history
    /// transaction it recorded is its own.
    ///
    /// Every write also checks that the file still records history exactly when this store
    /// does: another process may have started recording it, or deleted it
    /// (``PersistentStoreDescription/dropsPersistentHistory``), since this store opened, and a
    /// write of this store would leave a hole in the history, or history without its flag.
    ///
    /// - Throws: ``ArborError/Code/storeSave`` when tracking changed under the store.
    func ownWrite<R>(_ body: (WriteTransaction) throws -> R) throws -> R {
        var begin: UInt64 = 0
        var writing: ObjectIdentifier?
        let result: R
        let end: UInt64
        do {
            // The counter the commit left, not the latest any transaction saw: another thread's
            // read may have seen another process's later commit, which is still to be found.
            (result, end) = try database.writeCounting { transaction in
                writing = ObjectIdentifier(transaction)
                begin = transaction.header.changeCounter
                try checkTracking(transaction)
                return try body(transaction)
            }
        } catch {
            if let writing { remoteWatch.withLock { _ = $0.pending.removeValue(forKey: writing) } }
            throw error
        }
        remoteWatch.withLock { watch in
            if watch.known == begin { watch.known = end }
            if let writing, let number = watch.pending.removeValue(forKey: writing) { watch.own.insert(number) }
        }
        return result
    }

    /// Throws when the file's tracking flag says otherwise than ``tracksHistory``.
    private func checkTracking(_ transaction: WriteTransaction) throws {
        guard !historySuspended else { return }
        let recorded = try NativeStore.metadata(in: transaction)?.get(Self.trackingKey) != nil
        guard recorded != tracksHistory else { return }
        let file = path ?? "memory"
        throw ArborError(.storeSave, recorded
            ? "another process started recording the persistent history of \(file) after this store opened without it: "
                + "a write of this store would leave a hole in the history; open the store again with persistentHistoryTracking on"
            : "another process deleted the persistent history of \(file) (dropsPersistentHistory) after this store opened recording it: "
                + "a write of this store would start a history without its beginning; open the store again")
    }

    /// Notes the history transaction that write transaction `transaction` records
    /// (``HistoryWriter``).
    func noteRecording(_ number: Int64, in transaction: WriteTransaction) {
        remoteWatch.withLock { $0.pending[ObjectIdentifier(transaction)] = number }
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

    /// What the store finds since it last looked, to be accounted for once processed
    /// (``accept(_:)``): nil when the file's change counter did not move. Its changes are nil
    /// when only the store's own commits moved it. `refreshing` first reads the file's header
    /// (a poll), else only what the store's own transactions saw is compared. With history, the
    /// transactions of others are read (the store's own are skipped) and their objects named.
    /// Nothing is accounted for here: a failure to process what was found leaves it to be found
    /// again.
    func remoteChanges(refreshing: Bool) throws -> FoundRemoteChanges? {
        if refreshing { _ = try Self.storeError("read \(path ?? "memory")") { try database.read { _ in } } }
        let counter = database.latestChangeCounter
        let (known, after, own) = remoteWatch.withLock { ($0.known, $0.lastHistory, $0.own) }
        guard known != counter else { return nil }
        guard tracksHistory else {
            return FoundRemoteChanges(counter: counter, lastHistory: nil, changes: ChangeRecord(store: identifier))
        }
        let transactions = try fetchHistory(after: after, date: nil, changes: true) { _ in true }
        let last = transactions.last?.transactionNumber ?? after
        let others = transactions.filter { !own.contains($0.transactionNumber) }
        guard !others.isEmpty else { return FoundRemoteChanges(counter: counter, lastHistory: last, changes: nil) }
        let changes = ChangeRecord(history: others, store: identifier, token: PersistentHistoryToken(transactionNumbers: [identifier: last]))
        return FoundRemoteChanges(counter: counter, lastHistory: last, changes: changes)
    }

    /// Accounts for what ``remoteChanges(refreshing:)`` found, once it was processed.
    func accept(_ found: FoundRemoteChanges) {
        remoteWatch.withLock { watch in
            watch.known = found.counter
            if let last = found.lastHistory {
                watch.lastHistory = max(watch.lastHistory, last)
                watch.own = watch.own.filter { $0 > last }
            }
        }
    }
}
