import Foundation
import OrderedCollections

/// What one write changed, by object: the record a store's write pass returns, and the one value
/// every consumer of changes made elsewhere reads (docs/object-graph-internals.md, "The change
/// record").
///
/// - A batch delete, update or insert returns it from the store's transaction; the coordinator
///   brings its row cache up to date from ``writtenRows`` and ``deleted``, and the request's
///   result is read from it.
/// - Remote changes are the records of other connections' transactions, read from persistent
///   history (``init(history:store:token:)``): the file is how another process hands them over.
/// - Every merge into a context — a batch request, another context's save, a remote change, a
///   merge asked for by IDs — is a record posted to the context's inbox.
///
/// The three sets are disjoint: an object inserted and deleted within what one record covers is
/// only deleted, and one inserted and then updated is only inserted.
struct ChangeRecord: Sendable {
    /// The store written, when one is (a context's save may span several).
    var store: UUID?
    /// The objects inserted, in the order written, each once. A list, not a set: a save's new
    /// objects are many and only ever gone through, so no hash table is made for them.
    var inserted: [ManagedObjectID] = []
    /// The objects updated, in the order written.
    var updated: OrderedSet<ManagedObjectID> = []
    /// The objects deleted, in the order written.
    var deleted: OrderedSet<ManagedObjectID> = []
    /// The properties each updated object changed, where the writer knows them (a batch update's
    /// attributes, the relationships a nullify rule cleared, history's updated properties).
    var changedKeys: [ManagedObjectID: Set<String>] = [:]
    /// Keys every updated object of the record changed, held once (a batch update's attributes:
    /// no entry per row). ``keys(changedBy:)`` reads both.
    var keysOfEveryUpdate: Set<String>?
    /// The rows written for updated objects (and for objects written anew under an ID the row
    /// cache may hold), as stored, at their new versions: what the row cache takes. Empty for a
    /// record known by ID only (another connection's).
    /// In the order written (a later row of an object supersedes an earlier one); a list, as
    /// only ever gone through, so a large batch request hashes nothing for it.
    var writtenRows: [(id: ManagedObjectID, row: StoreRow)] = []
    /// Objects whose to-many relationships gained or lost members without a change of their own
    /// (the destinations a batch insert's rows name): a merge reads those relationships again.
    var related: Set<ManagedObjectID> = []
    /// The token of the last history transaction the record covers (nil: the store records no
    /// history, or the record does not come from it).
    var token: PersistentHistoryToken?

    /// An empty record of `store`.
    init(store: UUID? = nil) {
        self.store = store
    }

    /// Whether it names no object.
    var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty && related.isEmpty }

    /// The record without its written rows: what a merge into a context needs (the rows went to
    /// the row cache with the write).
    var byID: ChangeRecord {
        var record = self
        record.writtenRows = []
        return record
    }

    /// The properties the update of `id` changed, where the writer knows them (nil: not known,
    /// or `id` is not updated here).
    func keys(changedBy id: ManagedObjectID) -> Set<String>? {
        let own = changedKeys[id]
        guard let every = keysOfEveryUpdate, updated.contains(id) else { return own }
        return own.map { $0.union(every) } ?? every
    }

    /// The last row written for `id` (nil: none kept).
    func writtenRow(of id: ManagedObjectID) -> StoreRow? {
        writtenRows.last { $0.id == id }?.row
    }

    /// Notes that `id` was updated to `row` (nil: by ID only), changing `keys` (nil: not known).
    mutating func noteUpdated(_ id: ManagedObjectID, row: StoreRow? = nil, keys: Set<String>? = nil) {
        updated.append(id)
        if let row { writtenRows.append((id, row)) }
        // A first note takes the keys as given: a batch update's rows share one set.
        if let keys {
            if let known = changedKeys[id] { changedKeys[id] = known.union(keys) } else { changedKeys[id] = keys }
        }
    }

    /// Adds what `later` changed after what this record holds (another store's part of the same
    /// request, a later transaction), keeping the sets disjoint.
    mutating func append(_ later: ChangeRecord) {
        // Nothing here yet (a total being started): the later record as it is.
        if isEmpty && writtenRows.isEmpty && changedKeys.isEmpty && keysOfEveryUpdate == nil && token == nil {
            let kept = store == later.store ? store : nil
            self = later
            store = kept
            return
        }
        if store != later.store { store = nil }
        inserted.append(contentsOf: later.inserted)
        updated.append(contentsOf: later.updated)
        deleted.append(contentsOf: later.deleted)
        if keysOfEveryUpdate != later.keysOfEveryUpdate {
            // Kept once only while both records say the same keys for all their updates.
            for (record, keys) in [(self, keysOfEveryUpdate), (later, later.keysOfEveryUpdate)] {
                guard let keys else { continue }
                for id in record.updated { changedKeys[id, default: []].formUnion(keys) }
            }
            keysOfEveryUpdate = nil
        }
        changedKeys.merge(later.changedKeys) { $0.union($1) }
        writtenRows.append(contentsOf: later.writtenRows)
        related.formUnion(later.related)
        token = later.token ?? token
        settle()
    }

    /// Keeps the sets disjoint — deleted wins over inserted and updated, inserted over updated —
    /// the keys to the objects still updated, and the rows to those not deleted.
    private mutating func settle() {
        guard !deleted.isEmpty || !inserted.isEmpty else { return }
        if !deleted.isEmpty { inserted.removeAll(where: deleted.contains) }
        updated.subtract(deleted)
        updated.subtract(inserted)
        if changedKeys.count > updated.count { changedKeys = changedKeys.filter { updated.contains($0.key) } }
        if !deleted.isEmpty && !writtenRows.isEmpty { writtenRows.removeAll { deleted.contains($0.id) } }
    }

    /// The record of a save a store made of `changes` (``PersistentStore/save(_:)``), which
    /// returned `result`: the one place a save's record is derived. New objects are listed by
    /// the permanent IDs the store gave them; the rows written for updated objects are kept
    /// as stored — at the version written (``StoreSaveResult/rebasedVersions``), with
    /// permanent IDs in place of the save's temporary ones — for those `held` says someone holds
    /// (the coordinator's row cache), as are the rows written anew under permanent IDs (an
    /// object deleted elsewhere and written back by the overwrite policy). No other new row is
    /// kept: a large save never holds all its new rows at once.
    init(saving changes: StoreChanges, result: StoreSaveResult, store: UUID, held: (ManagedObjectID) -> Bool) {
        self.init(store: store)
        inserted = result.insertedIDs
        // Made the first time a kept row names a new object (most saves never need it).
        var mapping: IDMapping?
        func stored(_ row: StoreRow, version: Int64? = nil) -> StoreRow {
            var row = row
            if let version { row.version = version }
            row.values.replaceObjectIDs { old in
                let permanent = mapping ?? changes.permanentIDs(result.insertedIDs)
                mapping = permanent
                return permanent[old]
            }
            return row
        }
        updated.reserveCapacity(changes.updated.count)
        for (id, row, _) in changes.updated {
            updated.append(id)
            guard held(id) else { continue }
            writtenRows.append((id, stored(row, version: result.rebasedVersions.isEmpty ? nil : result.rebasedVersions[id])))
        }
        for position in 0..<changes.insertedCount {
            let id = changes.insertedID(at: position)
            if !id.isTemporaryID && held(id) { writtenRows.append((id, stored(changes.insertedRow(at: position)))) }
        }
        deleted = OrderedSet(changes.deleted.lazy.map(\.0))
    }

    /// The record of other connections' transactions of `store`, read from its persistent
    /// history (with their changes), oldest first; `token` names the last one read.
    init(history transactions: [PersistentHistoryTransaction], store: UUID, token: PersistentHistoryToken?) {
        self.init(store: store)
        self.token = token
        for change in transactions.lazy.flatMap({ $0.changes ?? [] }) {
            switch change.changeType {
            case .insert: inserted.append(change.changedObjectID)
            case .update: noteUpdated(change.changedObjectID, keys: change.updatedProperties)
            case .delete: deleted.append(change.changedObjectID)
            }
        }
        settle()
    }
}
