import ArborStore
import Foundation
import OrderedCollections

extension NativeStore {
    /// Deletes, in one write transaction, the rows `fetch` matches (or, without one, the rows of
    /// `objectIDs` that exist) and applies the model's delete rules to every deleted row in the
    /// store (docs/batch-requests.md): cascade deletes the destinations, nullify rewrites the
    /// destinations that hold the row in a to-one or an ordered to-many, deny refuses the whole
    /// request while a destination is not deleted itself.
    ///
    /// - Throws: ``ArborError/Code/validationRelationshipDeniedDelete`` (several gathered into
    ///   ``ArborError/Code/validationMultipleErrors``) for a deny rule, with nothing written;
    ///   ``ArborError/Code/storeSave`` for an engine failure.
    /// `origin` names who deletes, for persistent history.
    func batchDelete(matching fetch: StoreFetch?, objectIDs: [ManagedObjectID], origin: TransactionOrigin) throws -> ChangeRecord {
        try Self.storeError("batch delete from \(path ?? "memory")", code: .storeSave) {
            try ownWrite { transaction in
                let deleter = BatchDeleter(store: self, transaction: transaction, origin: origin)
                if var fetch {
                    // Only the IDs are kept: no value is decoded but what the order needs.
                    if fetch.sortDescriptors.isEmpty { fetch.decodedProperties = [] }
                    var matched: [ManagedObjectID] = []
                    try forEachRow(prepare(fetch), in: transaction) { id, _ in
                        matched.append(id)
                        return true
                    }
                    try deleter.delete(matched)
                } else {
                    try deleter.delete(objectIDs)
                }
                return try deleter.finish()
            }
        }
    }
}

/// The work of one batch delete inside its write transaction: the rows to delete, found by
/// following the delete rules through the trees the store keeps, then one ``RowWriter`` pass.
final class BatchDeleter {
    let store: NativeStore
    let transaction: WriteTransaction

    /// A row of the store, whatever entity of its hierarchy names it.
    private struct RowKey: Hashable {
        let root: ObjectIdentifier
        let key: Int64
    }

    /// The rows to delete, in the order met, with their stored rows.
    private var order: [(id: ManagedObjectID, row: StoreRow)] = []
    private var deleting: Set<RowKey> = []
    /// Rows a nullify rule changes: what to take out of which relationship, by row.
    private var nullified: [RowKey: (id: ManagedObjectID, clears: [(relationship: RelationshipDescription, of: RowKey)])] = [:]
    private var nullifiedOrder: [RowKey] = []
    /// Deny rules met: the deleted row, its relationship, the destinations.
    private var denials: [(id: ManagedObjectID, entity: EntityDescription, relationship: RelationshipDescription, destinations: [(RowKey, ManagedObjectID)])] = []
    /// Join entries of a destination's unordered many-to-many pointing at a deleted row whose own
    /// side is not kept in a join tree (an ordered to-many): tree, destination, deleted row.
    private var joinEntries: [(tree: String, destination: RowKey, deleted: Int64)] = []
    /// The trees each to-many relationship's destinations are read from, opened at its first
    /// read (nil: the relationship has none yet).
    private var relationshipTrees: [ObjectIdentifier: (keyed: Tree, rows: Tree?)?] = [:]

    /// Who deletes, for persistent history.
    let origin: TransactionOrigin

    init(store: NativeStore, transaction: WriteTransaction, origin: TransactionOrigin) {
        self.store = store
        self.transaction = transaction
        self.origin = origin
    }

    private func rowKey(_ id: ManagedObjectID) throws -> RowKey {
        RowKey(root: ObjectIdentifier(try store.entity(id.entityName).rootEntity), key: try store.primaryKey(of: id))
    }

    /// Adds the rows of `ids` to the deletion, with what their rules reach (rows already gone
    /// are skipped). The rows are read a wave at a time — those named, then the destinations
    /// their cascade rules reach, and so on — each wave in key order, tree by tree, so that a
    /// leaf is read once for all its rows.
    func delete(_ ids: [ManagedObjectID]) throws {
        var wave = ids
        while !wave.isEmpty {
            var keyed: [(key: RowKey, id: ManagedObjectID)] = []
            keyed.reserveCapacity(wave.count)
            for id in wave {
                guard id.storeIdentifier == store.identifier, !id.isTemporaryID else {
                    throw ArborError(.misuse, "\(id) is not an object of the store \(store.identifier) that a batch delete can name", objectID: id)
                }
                let key = try rowKey(id)
                if !deleting.contains(key) { keyed.append((key, id)) }
            }
            keyed.sort { $0.key.root == $1.key.root ? $0.key.key < $1.key.key : $0.key.root < $1.key.root }
            let first = order.count
            try add(keyed)
            var next: [ManagedObjectID] = []
            for index in first..<order.count { try applyRules(order[index].id, order[index].row, cascading: &next) }
            wave = next
        }
    }

    /// Reads the rows of `keyed` (in key order, each row once) in one batched lookup per rows
    /// tree and adds those that exist to the deletion.
    private func add(_ keyed: [(key: RowKey, id: ManagedObjectID)]) throws {
        var named = Set<RowKey>()
        let fresh = keyed.filter { named.insert($0.key).inserted }
        for ((key, id), row) in zip(fresh, try store.rows(of: fresh.map(\.id), in: transaction)) {
            guard let row else { continue }
            deleting.insert(key)
            // Named by the row's own entity (a sub-entity's row names it).
            let exact = row.entityName == id.entityName ? id : store.objectID(row.entityName, key.key)
            order.append((exact, row))
        }
    }

    /// The destinations of the to-many `relationship` of the row with primary key `key`, read
    /// through trees opened once per relationship (opening one reads the catalog).
    private func destinations(ofKey key: Int64, _ relationship: RelationshipDescription) throws -> [ManagedObjectID] {
        let trees: (keyed: Tree, rows: Tree?)?
        if let opened = relationshipTrees[ObjectIdentifier(relationship)] {
            trees = opened
        } else {
            trees = try store.relationshipTrees(relationship, in: transaction)
            relationshipTrees[ObjectIdentifier(relationship)] = trees
        }
        guard let trees else { return [] }
        return try store.relatedObjectIDs(ofKey: key, relationship: relationship, trees: trees)
    }

    /// Applies the delete rules of a deleted row: the destinations a cascade reaches go to
    /// `cascading` (the next wave); nullified and denying destinations are noted.
    private func applyRules(_ id: ManagedObjectID, _ row: StoreRow, cascading: inout [ManagedObjectID]) throws {
        let entity = try store.entity(row.entityName)
        let key = try rowKey(id)
        for relationship in entity.relationships {
            let destinations: [ManagedObjectID]
            if relationship.isToMany {
                destinations = try self.destinations(ofKey: key.key, relationship)
            } else {
                destinations = row.destination(relationship.name).map { [$0] } ?? []
            }
            guard !destinations.isEmpty else { continue }
            let inverse = relationship.inverseRelationship
            if let inverse, NativeStore.isJoined(inverse) && !NativeStore.isJoined(relationship) {
                for destination in destinations {
                    joinEntries.append((NativeStore.joinTree(inverse), try rowKey(destination), key.key))
                }
            }
            switch relationship.deleteRule {
            case .cascade:
                cascading += destinations
            case .nullify:
                // Only a destination holding the row in its own row, or in its ordered list,
                // changes; an unordered to-many is the deleted row's foreign key or join entries.
                guard let inverse, !inverse.isToMany || inverse.isOrdered else { continue }
                for destination in destinations {
                    let other = try rowKey(destination)
                    if nullified[other] == nil {
                        nullified[other] = (destination, [])
                        nullifiedOrder.append(other)
                    }
                    nullified[other]!.clears.append((inverse, key))
                }
            case .deny:
                denials.append((id, entity, relationship, try destinations.map { (try rowKey($0), $0) }))
            case .noAction:
                break
            }
        }
    }

    /// Checks the deny rules, then writes the deletions and the nullified rows in one pass;
    /// returns the transaction's record.
    func finish() throws -> ChangeRecord {
        var failures: [ArborError] = []
        for (id, entity, relationship, destinations) in denials {
            let denying = destinations.filter { !deleting.contains($0.0) }.map(\.1)
            guard !denying.isEmpty else { continue }
            failures.append(Validation.denial(entity: entity, relationship: relationship, of: id, holding: denying))
        }
        if let error = ArborError.gathering(failures) { throw error }

        var record = ChangeRecord(store: store.identifier)
        record.deleted = OrderedSet(order.map(\.id))
        var updates = StoreChanges()
        // The rows kept, read in one batched lookup per rows tree.
        let kept = nullifiedOrder.filter { !deleting.contains($0) }
        for (key, row) in zip(kept, try store.rows(of: kept.map { nullified[$0]!.id }, in: transaction)) {
            guard let row else { continue }
            let (id, clears) = nullified[key]!
            let exact = row.entityName == id.entityName ? id : store.objectID(row.entityName, key.key)
            var toOne = row.toOne
            var ordered = row.ordered
            for (relationship, deleted) in clears {
                if !relationship.isToMany {
                    if let held = toOne[relationship.name], try rowKey(held) == deleted { toOne[relationship.name] = nil }
                } else {
                    let list = try ordered[relationship.name] ?? store.relatedObjectIDs(of: exact, relationship: relationship, in: transaction)
                    ordered[relationship.name] = try list.filter { try rowKey($0) != deleted }
                }
            }
            let changed = StoreRow(entityName: row.entityName, version: row.version + 1, attributes: row.attributes, toOne: toOne, ordered: ordered)
            updates.updated.append((exact, changed, RowExpectation(version: row.version)))
            record.noteUpdated(exact, row: changed, keys: Set(clears.map(\.0.name)))
        }
        // The rows read once: deleted without a second read; then the nullified rows' writes.
        let writer = RowWriter(store: store, transaction: transaction, changes: updates, history: store.historyWriter(transaction, origin))
        try writer.delete(rows: order.sorted { $0.row.entityName == $1.row.entityName ? (($0.id.primaryKey ?? 0) < ($1.id.primaryKey ?? 0)) : $0.row.entityName < $1.row.entityName })
        try writer.apply()
        for (name, destination, deleted) in joinEntries where !deleting.contains(destination) {
            guard let tree = try transaction.tree(named: name) else { continue }
            _ = try tree.delete(store.pair(destination.key, deleted))
        }
        try writer.finishHistory()
        return record
    }
}

extension NativeStore {
    /// Rewrites, in one write transaction, the rows `fetch` matches (but those in `excluded`)
    /// with the row `change` makes of each (changing only the attributes `changing` names) (nil: the row stays as it is), at the next version,
    /// in one ``RowWriter`` pass — indexes, uniqueness and foreign-key entries follow; every
    /// uniqueness conflict comes back together (docs/batch-requests.md, `BatchUpdateRequest`).
    ///
    /// - Throws: ``ArborError/Code/constraintConflict`` listing the conflicts, with nothing
    ///   written; what `change` throws; ``ArborError/Code/storeSave`` for an engine failure.
    func batchUpdate(matching fetch: StoreFetch, excluding excluded: Set<ManagedObjectID>, changing: Set<String>, origin: TransactionOrigin,
                     _ change: (ManagedObjectID, StoreRow) throws -> StoreRow?) throws -> ChangeRecord {
        let prepared = try prepare(fetch)
        return try Self.storeError("batch update in \(path ?? "memory")", code: .storeSave) {
            try ownWrite { transaction in
                var changes = StoreChanges()
                var stored: [StoreRow] = []
                try forEachRow(prepared, in: transaction) { id, row in
                    guard !excluded.contains(id), var new = try change(id, row) else { return true }
                    new.version = row.version + 1
                    changes.updated.append((id, new, RowExpectation(version: row.version)))
                    stored.append(row)
                    return true
                }
                // The record is made once the rows are known: every row changed the same keys.
                var record = ChangeRecord(store: identifier)
                record.updated = OrderedSet(uncheckedUniqueElements: changes.updated.map(\.0))
                record.writtenRows = changes.updated.map { ($0.0, $0.1) }
                if !record.updated.isEmpty { record.keysOfEveryUpdate = changing }
                // The rows were read in this transaction: written without a second read.
                let writer = RowWriter(store: self, transaction: transaction, changes: changes, history: historyWriter(transaction, origin))
                try writer.update(stored: stored, changing: changing)
                try writer.finishHistory()
                return record
            }
        }
    }
}
