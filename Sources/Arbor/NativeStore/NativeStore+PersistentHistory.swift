import ArborStore
import Foundation

/// Persistent history in a native store (docs/history.md): whether the store records it, and
/// reading and trimming it. The records are written by the save's write pass
/// (``HistoryWriter``); their bytes are ``HistoryRecords``'.
extension NativeStore {
    /// The metadata key present (value 1) in a store that records persistent history.
    static let trackingKey = MetadataKey.historyTracking

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
                    let metadata = try NativeStore.metadata(creatingIn: transaction)
                    try metadata.put(trackingKey, [1])
                    try setTrackingHash(true, metadata: metadata)
                }
            }
            database.options.logger.info("the store records persistent history from now on", metadata: ["arbor.path": "\(path)"])
            return true
        case (.dropRecorded, true):
            try storeError("delete the persistent history of \(path)", code: .storeOpen) {
                try database.write { transaction in
                    let metadata = try NativeStore.metadata(creatingIn: transaction)
                    if let transactions = try transaction.tree(named: HistoryRecords.transactionsTree) {
                        // The tree stays, emptied: its sequence goes on, so that a number is never
                        // handed out twice, and every token up to the last number has expired.
                        let count = try deleteAll(transactions)
                        database.options.logger.info("deleting the persistent history of the store, as asked (dropsPersistentHistory)",
                                                       metadata: ["arbor.path": "\(path)", "arbor.transactions": "\(count)"])
                        try raiseTrimmedMark(to: primaryKey(fromSequence: transactions.sequence, of: transactions), metadata: metadata)
                    }
                    _ = try transaction.dropTree(named: HistoryRecords.changesTree)
                    _ = try metadata.delete(trackingKey)
                    try setTrackingHash(false, metadata: metadata)
                }
            }
            return false
        }
    }

    /// The metadata key of the number of the last transaction deleted from the history (absent:
    /// none was): a token before it has expired.
    static let trimmedKey = MetadataKey.historyTrimmed

    /// The number of the last transaction deleted from the history (0: none).
    static func trimmedMark(metadata: Tree?) throws -> Int64 {
        guard let bytes = try metadata?.get(trimmedKey) else { return 0 }
        guard bytes.count == 8 else { throw StoreError(.corrupt, "the metadata entry historyTrimmed has \(bytes.count) bytes, not 8") }
        let value = bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard let mark = Int64(exactly: value) else { throw StoreError(.corrupt, "the metadata entry historyTrimmed holds \(value), past any transaction number") }
        return mark
    }

    /// Records that the history up to transaction `number` was deleted.
    static func raiseTrimmedMark(to number: Int64, metadata: Tree) throws {
        guard number > (try trimmedMark(metadata: metadata)) else { return }
        try metadata.put(trimmedKey, withUnsafeBytes(of: UInt64(number).bigEndian) { Array($0) })
    }

    /// Deletes every entry of `tree`; returns how many there were.
    private static func deleteAll(_ tree: Tree) throws -> Int {
        var keys: [[UInt8]] = []
        try tree.forEach { key, _ in
            keys.append(Array(key))
            return true
        }
        return try tree.delete(batch: keys)
    }

    /// Adds or removes the tracking entry of a store's recorded hashes.
    static func setTrackingHash(_ present: Bool, metadata: Tree) throws {
        guard let bytes = try metadata.get(MetadataKey.hashes),
              var hashes = try? JSONDecoder().decode([String: String].self, from: Data(bytes)) else {
            throw ArborError(.storeOpen, "the Arbor metadata is damaged: its model hashes are missing or unreadable")
        }
        hashes[trackingHashKey] = present ? "01" : nil
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try metadata.put(MetadataKey.hashes, Array(try encoder.encode(hashes)))
    }

    /// The history writer of a write transaction (nil when the store records no history).
    func historyWriter(_ transaction: WriteTransaction, _ origin: TransactionOrigin) -> HistoryWriter? {
        tracksHistory ? HistoryWriter(store: self, transaction: transaction, origin: origin) : nil
    }

    /// The number of the last transaction the store recorded (0: none), whether or not its
    /// history still holds it: tokens never go backwards.
    func lastHistoryTransaction() throws -> Int64 {
        try Self.storeError("read the persistent history of \(path ?? "memory")") {
            try database.read { transaction in
                guard let tree = try transaction.tree(named: HistoryRecords.transactionsTree) else { return 0 }
                return try NativeStore.primaryKey(fromSequence: tree.sequence, of: tree)
            }
        }
    }

    /// The transactions after number `after` (or written after `date`) that `include` accepts,
    /// oldest first, with their changes when `changes` is set.
    ///
    /// - Parameter token: `after` comes from a token: when history after it was deleted, the
    ///   token has expired (``ArborError/Code/persistentHistoryTokenExpired``).
    func fetchHistory(after: Int64, token: Bool = false, date: Date?, changes: Bool,
                      _ include: (PersistentHistoryTransaction) throws -> Bool) throws -> [PersistentHistoryTransaction] {
        try Self.storeError("read the persistent history of \(path ?? "memory")") {
            try database.read { transaction in
                if token {
                    let trimmed = try Self.trimmedMark(metadata: NativeStore.metadata(in: transaction))
                    if after < trimmed {
                        throw ArborError(.persistentHistoryTokenExpired,
                                         "the history token names transaction \(after) of store \(identifier), but the history up to transaction \(trimmed) was deleted: "
                                            + "fetch the history from the start (a nil token) and rebuild what depended on the token")
                    }
                }
                guard after < Int64.max, let transactions = try transaction.tree(named: HistoryRecords.transactionsTree) else { return [] }
                var found: [(transaction: PersistentHistoryTransaction, names: [String])] = []
                try transactions.forEach(from: HistoryRecords.transactionKey(after + 1)) { key, value in
                    let record = try HistoryRecords.transaction(key: Array(key), value: Array(value), store: identifier)
                    if let date, record.transaction.timestamp <= date { return true }
                    if try include(record.transaction) { found.append(record) }
                    return true
                }
                guard changes else { return found.map(\.transaction) }
                let tree = try transaction.tree(named: HistoryRecords.changesTree)
                return try found.map { record, names in
                    var list: [PersistentHistoryChange] = []
                    // The count is read from the file: a hostile one reserves no more than a page's worth.
                    list.reserveCapacity(max(0, min(record.changeCount, 1024)))
                    guard let tree else { return record.with(changes: list) }
                    let prefix = HistoryRecords.transactionKey(record.transactionNumber)
                    // A change key is (number, index): its encoding starts with the number's.
                    try tree.forEach(from: prefix) { key, value in
                        guard key.starts(with: prefix), HistoryRecords.transactionNumber(ofChangeKey: Array(key)) == record.transactionNumber else { return false }
                        list.append(try HistoryRecords.change(key: Array(key), value: Array(value), names: names, objectID: objectID(_:_:)))
                        return true
                    }
                    return record.with(changes: list)
                }
            }
        }
    }

    /// Deletes the transactions numbered below `before` (or written before `date`), with their
    /// changes, in one write transaction: history is trimmed from its oldest end. Returns how
    /// many transactions went. Transactions after `keeping` (the oldest query generation a
    /// context is pinned to) stay.
    func deleteHistory(before: Int64?, date: Date?, keeping: Int64? = nil) throws -> Int {
        try Self.storeError("delete the persistent history of \(path ?? "memory")", code: .storeSave) {
            try ownWrite { transaction in
                guard let transactions = try transaction.tree(named: HistoryRecords.transactionsTree) else { return 0 }
                var doomed: [[UInt8]] = []
                var last: Int64?
                try transactions.forEach { key, value in
                    let number: Int64
                    if let date {
                        let record = try HistoryRecords.transaction(key: Array(key), value: Array(value), store: identifier).transaction
                        // Oldest end only: the first transaction at or after the date stops it.
                        if record.timestamp >= date { return false }
                        number = record.transactionNumber
                    } else {
                        // By number, the key is enough: no record is decoded.
                        guard let parts = try? KeyEncoding.decode(Array(key)), parts.count == 1, case .int(let value) = parts[0] else {
                            throw ArborError(.store, "the persistent history of store \(identifier) holds a damaged transaction key")
                        }
                        number = value
                    }
                    if let before, number >= before { return false }
                    if let keeping, number > keeping { return false }
                    doomed.append(Array(key))
                    last = number
                    return true
                }
                guard let last else { return 0 }
                try Self.raiseTrimmedMark(to: last, metadata: NativeStore.metadata(creatingIn: transaction))
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
