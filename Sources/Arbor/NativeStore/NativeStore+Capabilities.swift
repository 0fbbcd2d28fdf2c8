import ArborStore

/// The native store has every capability a store may have (StoreCapabilities.swift); each is
/// implemented in the file of its concern.
extension NativeStore: NestingStore, RowCheckingStore, BatchRequestStore, GroupingStore, HistoryStore, RemoteChangeStore {
    /// The file header's change counter as this store's transactions last saw it.
    var changeCounter: UInt64 { database.latestChangeCounter }

    func canGroup(_ properties: [PropertyToFetch], by groupBy: [String], of entity: EntityDescription) -> Bool {
        Self.canGroup(properties, by: groupBy, of: entity)
    }
}
