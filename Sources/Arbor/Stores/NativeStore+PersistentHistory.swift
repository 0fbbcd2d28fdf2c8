import ArborStore
import Foundation

/// Persistent history in a native store (docs/history.md): whether the store records it, and
/// reading and trimming it. The records are written by the save's write pass
/// (``HistoryWriter``); their bytes are ``HistoryRecords``'.
extension NativeStore {
    /// The metadata key present (value 1) in a store that records persistent history.
    static let trackingKey = Array("tracking".utf8)

    /// The entry of the recorded hashes of a store that records persistent history: builds that
    /// do not know history refuse the store (an entity only in the store) instead of writing
    /// saves without their history.
    static let trackingHashKey = "(history tracking)"

    /// Settles, when a store opens, whether it records history from now on: records the start
    /// of tracking in a store that did not track (one transaction: the flag and the hash
    /// entry), deletes the history of a store asked to drop it (one transaction: both trees,
    /// the flag and the entry), and refuses to write to a tracking store without tracking.
    ///
    /// - Parameter suspended: the store is opened by Arbor itself (a migration's working copy,
    ///   a verification's copy): a tracking store opens and records nothing.
    /// - Returns: whether the store records history.
    /// - Throws: ``ArborError/Code/storeOpen``.
    static func settleHistoryTracking(_ mode: PersistentHistoryTracking, recorded: Bool, suspended: Bool, database: Database, path: String,
                                      readOnly: Bool) throws -> Bool {
        if suspended || readOnly { return recorded && mode != .dropRecorded && !suspended }
        switch (mode, recorded) {
        case (.on, true): return true
        case (.off, false), (.dropRecorded, false): return false
        case (.off, true):
            throw ArborError(.storeOpen, "\(path) records persistent history: open it with persistent history tracking on "
                                + "(PersistentStoreDescription.persistentHistoryTracking), or with dropsPersistentHistory to delete its history; "
                                + "written to without it, its history would miss saves")
        case (.on, false):
            try storeError("start recording the persistent history of \(path)", code: .storeOpen) {
                try database.write { transaction in
                    let metadata = try transaction.tree(named: "arbor.metadata", create: true)!
                    try metadata.put(trackingKey, [1])
                    try setTrackingHash(true, metadata: metadata)
                }
            }
            database.options.logger.notice("the store records persistent history from now on", metadata: ["arbor.path": "\(path)"])
            return true
        case (.dropRecorded, true):
            try storeError("delete the persistent history of \(path)", code: .storeOpen) {
                try database.write { transaction in
                    let count = try transaction.tree(named: HistoryRecords.transactionsTree)?.statistics().entries ?? 0
                    database.options.logger.notice("deleting the persistent history of the store, as asked (dropsPersistentHistory)",
                                                   metadata: ["arbor.path": "\(path)", "arbor.transactions": "\(count)"])
                    _ = try transaction.dropTree(named: HistoryRecords.transactionsTree)
                    _ = try transaction.dropTree(named: HistoryRecords.changesTree)
                    let metadata = try transaction.tree(named: "arbor.metadata", create: true)!
                    _ = try metadata.delete(trackingKey)
                    try setTrackingHash(false, metadata: metadata)
                }
            }
            return false
        }
    }

    /// Adds or removes the tracking entry of a store's recorded hashes.
    static func setTrackingHash(_ present: Bool, metadata: Tree) throws {
        guard let bytes = try metadata.get(Array("hashes".utf8)),
              var hashes = try? JSONDecoder().decode([String: String].self, from: Data(bytes)) else {
            throw ArborError(.storeOpen, "the Arbor metadata is damaged: its model hashes are missing or unreadable")
        }
        hashes[trackingHashKey] = present ? "01" : nil
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try metadata.put(Array("hashes".utf8), Array(try encoder.encode(hashes)))
    }

    /// The history writer of a write transaction (nil when the store records no history).
    func historyWriter(_ transaction: WriteTransaction, _ origin: TransactionOrigin) -> HistoryWriter? {
        tracksHistory ? HistoryWriter(store: self, transaction: transaction, origin: origin) : nil
    }

    /// The number of the last transaction the store's history holds (0: none).
    func lastHistoryTransaction() throws -> Int64 {
        try Self.storeError("read the persistent history of \(path ?? "memory")") {
            try database.read { transaction in
                guard let tree = try transaction.tree(named: HistoryRecords.transactionsTree) else { return 0 }
                let cursor = try tree.makeCursor()
                guard try cursor.last(), let key = cursor.key, let value = try cursor.value() else { return 0 }
                return try HistoryRecords.transaction(key: key, value: value, store: identifier).transaction.transactionNumber
            }
        }
    }

    /// The transactions after number `after` (or written after `date`) that `include` accepts,
    /// oldest first, with their changes when `changes` is set.
    func fetchHistory(after: Int64, date: Date?, changes: Bool, _ include: (PersistentHistoryTransaction) throws -> Bool) throws -> [PersistentHistoryTransaction] {
        try Self.storeError("read the persistent history of \(path ?? "memory")") {
            try database.read { transaction in
                guard after < Int64.max, let transactions = try transaction.tree(named: HistoryRecords.transactionsTree) else { return [] }
                var found: [(transaction: PersistentHistoryTransaction, names: [String])] = []
                try transactions.forEach(from: HistoryRecords.transactionKey(after + 1)) { key, value in
                    let record = try HistoryRecords.transaction(key: Array(key), value: Array(value), store: identifier)
                    if let date, record.transaction.timestamp <= date { return true }
                    if try include(record.transaction) { found.append(record) }
                    return true
                }
                guard changes, let tree = try transaction.tree(named: HistoryRecords.changesTree) else { return found.map(\.transaction) }
                return try found.map { record, names in
                    var list: [PersistentHistoryChange] = []
                    list.reserveCapacity(record.changeCount)
                    let prefix = HistoryRecords.transactionKey(record.transactionNumber)
                    // A change key is (number, index): its encoding starts with the number's.
                    try tree.forEach(from: prefix) { key, value in
                        guard key.starts(with: prefix), HistoryRecords.transactionNumber(ofChangeKey: Array(key)) == record.transactionNumber else { return false }
                        list.append(try HistoryRecords.change(key: Array(key), value: Array(value), names: names, objectID: objectID(_:_:)))
                        return true
                    }
                    return PersistentHistoryTransaction(transactionNumber: record.transactionNumber, storeID: record.storeID, timestamp: record.timestamp,
                                                        author: record.author, contextName: record.contextName, processID: record.processID,
                                                        processName: record.processName, kind: record.kind, changeCount: record.changeCount, changes: list)
                }
            }
        }
    }

    /// Deletes the transactions numbered below `before` (or written before `date`), with their
    /// changes, in one write transaction: history is trimmed from its oldest end. Returns how
    /// many transactions went.
    func deleteHistory(before: Int64?, date: Date?) throws -> Int {
        try Self.storeError("delete the persistent history of \(path ?? "memory")", code: .storeSave) {
            try ownWrite { transaction in
                guard let transactions = try transaction.tree(named: HistoryRecords.transactionsTree) else { return 0 }
                var doomed: [[UInt8]] = []
                var last: Int64?
                try transactions.forEach { key, value in
                    let record = try HistoryRecords.transaction(key: Array(key), value: Array(value), store: identifier).transaction
                    if let before, record.transactionNumber >= before { return false }
                    // Oldest end only: the first transaction at or after the date stops it.
                    if let date, record.timestamp >= date { return false }
                    doomed.append(Array(key))
                    last = record.transactionNumber
                    return true
                }
                guard let last else { return 0 }
                if let changes = try transaction.tree(named: HistoryRecords.changesTree) {
                    var keys: [[UInt8]] = []
                    try changes.forEach { key, _ in
                        let bytes = Array(key)
                        guard let number = HistoryRecords.transactionNumber(ofChangeKey: bytes), number <= last else { return false }
                        keys.append(bytes)
                        return true
                    }
                    _ = try changes.delete(batch: keys)
                }
                _ = try transactions.delete(batch: doomed)
                return doomed.count
            }
        }
    }
}
