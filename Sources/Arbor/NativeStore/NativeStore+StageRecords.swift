import ArborStore
import Foundation

/// What a custom migration stage (Migration/NativeStore+StagedMigration.swift) reads from its
/// source store and writes to its destination store's metadata: the store's identity, its model
/// history and its persistent history. The stage copies objects through contexts; these are the
/// parts of the file no context sees, kept here with the rest of the metadata's keys.
extension NativeStore {
    /// The store's identity (its 16 bytes as recorded) and its model history, oldest first.
    func identityAndModelHistory() throws -> (identity: [UInt8], history: [StoreModelVersion]) {
        try Self.storeError("read the identity and model history of \(path ?? "memory")", code: .storeOpen) {
            try database.read { transaction in
                let metadata = try NativeStore.requiredMetadata(in: transaction)
                return (try metadata.get(MetadataKey.identifier) ?? [], try NativeStore.recordedHistory(metadata, path: path ?? "memory") ?? [])
            }
        }
    }

    /// Finishes a custom stage in this store, its destination, in one write transaction: takes
    /// `identity` (what ``identityAndModelHistory()`` read from `source`), copies `source`'s
    /// persistent history when it records one (its numbering too: tokens stay valid; the stage's
    /// own writes are not recorded: docs/history.md, "Migrations"), and records `history`.
    func finishStage(identity: [UInt8], from source: NativeStore, history: [StoreModelVersion]) throws {
        try Self.storeError("record the migrated model of \(path ?? "memory")", code: .storeSave) {
            try database.write { transaction in
                let metadata = try NativeStore.requiredMetadata(in: transaction)
                if identity.count == 16 { try metadata.put(MetadataKey.identifier, identity) }
                try source.database.read { from in
                    guard try NativeStore.metadata(in: from)?.get(NativeStore.trackingKey) != nil else { return }
                    for name in [HistoryRecords.transactionsTree, HistoryRecords.changesTree] {
                        if let tree = try from.tree(named: name) { _ = try transaction.copyTree(tree) }
                    }
                    try metadata.put(NativeStore.trackingKey, [1])
                    try NativeStore.setTrackingHash(true, metadata: metadata)
                }
                try metadata.put(NativeStore.historyKey, try NativeStore.historyBytes(history))
            }
        }
    }
}
