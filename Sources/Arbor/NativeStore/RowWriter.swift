import Foundation

// Safety: A writer lives inside one write transaction, on the thread running it, so its unchecked
// fields are never accessed from two places at once; `lastSpace` is an interned ID space's address,
// only compared.

/// Applies one save's changes to a ``NativeStore`` inside one engine write transaction: rows,
/// foreign-key indexes, join trees, order trees and uniqueness constraints, with the version
/// checks of optimistic locking.
///
/// A writer lives inside one write transaction, on the thread that runs it: its state is read
/// and written without dynamic exclusivity checks (as the engine's transaction state).
final class RowWriter {
    let store: NativeStore
    let transaction: WriteTransaction
    let changes: StoreChanges
    /// The IDs of `changes.inserted`, in order: permanent ones for those that came temporary.
    @exclusivity(unchecked) private(set) var insertedIDs: [ManagedObjectID] = []
    /// Temporary → permanent IDs of this save's new rows, made the first time a row refers to a
    /// new object (most saves never need it).
    @exclusivity(unchecked) private var permanentIDs: IDMapping?
    /// The trees opened so far, by name (a tree's root never moves, so a handle stays valid for
    /// the whole transaction; opening one reads the catalog).
    @exclusivity(unchecked) private var trees: [String: Tree] = [:]
    /// What writing a row of each entity met so far takes, and the last one used.
    @exclusivity(unchecked) private var entityWrites: [ObjectIdentifier: EntityWrites] = [:]
    @exclusivity(unchecked) private var lastWrites: EntityWrites?

    /// What writing a row of one entity takes, worked out once per entity and save: its rows
    /// tree, its index trees, and which of its relationships need trees of their own.
    struct EntityWrites {
        let entity: EntityDescription
        let rows: Tree
        let indexes: [(StoreIndex, Tree)]
        let indexedForeignKeys: [RelationshipDescription]
        let orderedToMany: [RelationshipDescription]
        /// The slots of the properties the entity's uniqueness, foreign-key and index entries are
        /// made of (nil when one is not a slot of its layout): a row whose new values equal the
        /// stored ones there keeps every entry, found without making one.
        let entrySlots: [Int]?
    }

    /// The writes of `entity` (the last entity's without a lookup).
    func writes(_ entity: EntityDescription) throws -> EntityWrites {
        if let lastWrites, lastWrites.entity === entity { return lastWrites }
        if let known = entityWrites[ObjectIdentifier(entity)] {
            lastWrites = known
            return known
        }
        let indexes = NativeStore.indexes(of: entity)
        let indexedForeignKeys = entity.relationships.filter(NativeStore.isIndexedForeignKey)
        let entryKeys = Set(entity.uniquenessConstraints.flatMap { $0 } + indexedForeignKeys.map(\.name) + indexes.flatMap(\.keys))
        let entrySlots = entryKeys.map { entity.propertyLayout.index[$0] }
        let made = EntityWrites(entity: entity, rows: try rowsTree(entity),
                                indexes: try indexes.map { ($0, try tree($0.tree)) },
                                indexedForeignKeys: indexedForeignKeys,
                                orderedToMany: entity.relationships.filter { $0.isToMany && $0.isOrdered },
                                entrySlots: entrySlots.contains(nil) ? nil : entrySlots.compactMap { $0 }.sorted())
        entityWrites[ObjectIdentifier(entity)] = made
        lastWrites = made
        return made
    }

    /// The persistent history the pass records its changes in (nil: the store tracks none).
    let history: HistoryWriter?

    init(store: NativeStore, transaction: WriteTransaction, changes: StoreChanges, history: HistoryWriter? = nil) {
        self.store = store
        self.transaction = transaction
        self.changes = changes
        self.history = history
    }

    /// Finishes the history of the pass (its links and its transaction record): called after
    /// the pass, before the transaction commits.
    func finishHistory() throws {
        try history?.finish()
    }

    /// `id`, or the permanent ID this save gives it when it is a temporary one.
    ///
    /// Temporary IDs' serial numbers are handed out in sequence, so the new objects of a save
    /// made one after the other have consecutive ones: a new object's position among the inserted
    /// rows is then its serial number's distance from the first's (checked against the row
    /// there). Only IDs out of that run make the mapping (otherwise an import's largest table,
    /// an entry per new object at the save's peak).
    func permanent(_ id: ManagedObjectID) -> ManagedObjectID {
        guard id.isTemporaryID else { return id }
        if !insertedIDs.isEmpty, let first = firstInsertedID, first.isTemporaryID {
            let position = Int(first.key) - Int(id.key)
            if position >= 0 && position < insertedIDs.count && changes.insertedID(at: position) == id { return insertedIDs[position] }
        }
        if permanentIDs == nil { permanentIDs = changes.permanentIDs(insertedIDs) }
        return permanentIDs.unsafelyUnwrapped[id] ?? id
    }

    /// The ID the first new row came with (asked once: new rows may be made on demand, each
    /// ask a call into the context).
    private lazy var firstInsertedID: ManagedObjectID? = changes.insertedCount > 0 ? changes.insertedID(at: 0) : nil

    /// The permanent key of `id` (translating a temporary ID of this save).
    func key(_ id: ManagedObjectID) throws -> Int64 {
        try store.primaryKey(of: permanent(id))
    }

    func tree(_ name: String) throws -> Tree {
        if let tree = trees[name] { return tree }
        let tree = try transaction.tree(named: name, create: true)!
        trees[name] = tree
        return tree
    }

    /// Trees found by the identity of what owns them: an entity its rows tree, a to-one
    /// relationship its foreign-key tree, a many-to-many one its join tree (one tree each: a
    /// relationship has a foreign key or a join tree, never both); and the uniqueness trees of
    /// each entity's constraints. A row or an entry finds its tree without making its name.
    @exclusivity(unchecked) private var treesByOwner: [ObjectIdentifier: Tree] = [:]
    @exclusivity(unchecked) private var uniqueTrees: [ObjectIdentifier: [[String]: Tree]] = [:]

    /// The tree `name` names, found by `owner` after the first time.
    private func tree(of owner: AnyObject, _ name: @autoclosure () -> String) throws -> Tree {
        if let tree = treesByOwner[ObjectIdentifier(owner)] { return tree }
        let tree = try tree(name())
        treesByOwner[ObjectIdentifier(owner)] = tree
        return tree
    }

    func foreignKeyTree(_ relationship: RelationshipDescription) throws -> Tree {
        try tree(of: relationship, NativeStore.foreignKeyTree(relationship))
    }

    /// The join tree of a many-to-many relationship (keyed by its own side's keys).
    func joinTree(_ relationship: RelationshipDescription) throws -> Tree {
        try tree(of: relationship, NativeStore.joinTree(relationship))
    }

    func rowsTree(_ entity: EntityDescription) throws -> Tree {
        try tree(of: entity, NativeStore.rowsTree(entity))
    }

    func uniqueTree(_ entity: EntityDescription, _ constraint: [String]) throws -> Tree {
        if let tree = uniqueTrees[ObjectIdentifier(entity)]?[constraint] { return tree }
        let tree = try tree(NativeStore.uniqueTree(entity, constraint))
        uniqueTrees[ObjectIdentifier(entity), default: [:]][constraint] = tree
        return tree
    }

    /// The entity named `name` (a row's): the last one written without a lookup.
    func entity(_ name: String) throws -> EntityDescription {
        if let last = lastWrites?.entity, last.name == name { return last }
        return try store.entity(name)
    }

    /// The space of the last ID whose entity was looked up, and that entity.
    @exclusivity(unchecked) private var lastSpace: UnsafeMutableRawPointer?
    @exclusivity(unchecked) private var lastSpaceEntity: EntityDescription?

    /// The entity of `id` (and of its rows): found by the ID's space when it is the last one met
    /// (saves mostly write runs of one entity), else by name.
    func entity(of id: ManagedObjectID) throws -> EntityDescription {
        if let lastSpaceEntity, id.spaceAddress == lastSpace { return lastSpaceEntity }
        let entity = try store.entity(id.entityName)
        lastSpace = id.spaceAddress
        lastSpaceEntity = entity
        return entity
    }

    /// Permanent IDs for the inserted rows that have temporary ones: keys from each hierarchy
    /// tree's sequence, reserved once per hierarchy.
    func allocateKeys() throws {
        insertedIDs = (0..<changes.insertedCount).map(changes.insertedID(at:))
        // Positions of the temporary IDs, by hierarchy (a handful of hierarchies at most: a
        // list, and the last one met tried first), as runs of consecutive positions (an
        // import's new objects come in runs of one entity: a range per run, where a position
        // per object would add to the save's peak memory).
        var groups: [(root: EntityDescription, runs: [Range<Int>], count: Int)] = []
        var last = -1
        for position in insertedIDs.indices where insertedIDs[position].isTemporaryID {
            let root = try entity(of: insertedIDs[position]).rootEntity
            if last < 0 || groups[last].root !== root {
                if let index = groups.firstIndex(where: { $0.root === root }) {
                    last = index
                } else {
                    groups.append((root, [], 0))
                    last = groups.count - 1
                }
            }
            if let run = groups[last].runs.last, run.upperBound == position {
                groups[last].runs[groups[last].runs.count - 1] = run.lowerBound..<(position + 1)
            } else {
                groups[last].runs.append(position..<(position + 1))
            }
            groups[last].count += 1
        }
        for (root, runs, count) in groups {
            let tree = try rowsTree(root)
            var keys = try tree.nextSequence(reserving: count).makeIterator()
            for run in runs {
                for position in run {
                    guard let key = keys.next() else { throw ArborError(.store, "\(tree.name) reserved fewer keys than asked") }
                    insertedIDs[position] = store.objectID(try entity(of: insertedIDs[position]), try NativeStore.primaryKey(fromSequence: key, of: tree))
                }
            }
        }
    }

    /// Updated rows written at the stored version plus one, not at their new row's version:
    /// rows that moved on since they were read, with their values unchanged (``RowExpectation``).
    @exclusivity(unchecked) private(set) var rebasedVersions: [ManagedObjectID: Int64] = [:]

    /// Writes the changes. Every conflict the pass meets is gathered, not thrown at the first
    /// (docs/object-graph-internals.md, "Conflicts in one pass"): the rows that must be as read are all
    /// read and checked first, and the optimistic-locking conflicts among them thrown together
    /// (nothing after them is written); then the rows are written, and every uniqueness conflict
    /// met on the way is thrown together at the end. The caller's transaction rolls back.
    ///
    /// - Throws: ``ArborError/Code/mergeConflict`` with ``ArborError/conflicts``, or
    ///   ``ArborError/Code/constraintConflict`` with ``ArborError/constraintConflicts``.
    func apply() throws {
        // Long: the pass's order is its correctness: checks, deletions, every updated row's entries
        // removed before any is written back (rows may trade unique values), then insertions and
        // links.
        // Deletions first (their unique values and links go), then updates, then insertions.
        for (id, expected) in changes.checked { try check(try readRow(id), of: id, expected: expected) }
        // Many deletions are gathered and made tree by tree in key order (``flushDeletions()``).
        deferredDeletions = changes.deleted.count >= Self.deletionsDeferredFrom ? [:] : nil
        for (id, expected) in changes.deleted {
            // Deleting a row another context deleted already is no conflict (S004-15).
            guard let old = try readRow(id) else { continue }
            try check(old, of: id, expected: expected)
            guard lockingConflicts.isEmpty else { continue }
            try history?.deleted(id, old: old, entity: try entity(old.entityName))
            try removeIndexes(of: id, row: old)
            try delete(store.key(try store.primaryKey(of: id)), from: try rowsTree(try entity(of: id)))
            try removeLinks(of: id)
        }
        try flushDeletions()
        // Every changed row leaves its index and uniqueness entries before any is written back,
        // so that rows may trade unique values within one save — except the entries its new
        // values leave as they are (a raise changes a salary, not the row's email, name or
        // department: those entries are neither deleted nor written again).
        var kept: [EntrySet] = []
        kept.reserveCapacity(changes.updated.count)
        // The stored rows, for history's old values (kept only when it records).
        var stored: [StoreRow] = []
        for (id, row, expected) in changes.updated {
            let old = try readRow(id)
            try check(old, of: id, expected: expected)
            guard let old, lockingConflicts.isEmpty else {
                kept.append(0)
                continue
            }
            if history != nil { stored.append(old) }
            if old.version != expected.version { rebasedVersions[id] = old.version + 1 }
            kept.append(try removeIndexes(of: id, row: old, keeping: row))
        }
        if !lockingConflicts.isEmpty { throw ArborError.conflicts(lockingConflicts) }
        for (index, ((id, row, _), kept)) in zip(changes.updated, kept).enumerated() {
            if let history { try history.updated(id, old: stored[index], new: row, entity: try entity(row.entityName), permanent: permanent) }
            guard let version = rebasedVersions.isEmpty ? nil : rebasedVersions[id] else {
                try write(id, row, kept: kept)
                continue
            }
            var rebased = row
            rebased.version = version
            try write(id, rebased, kept: kept)
        }
        // A new row made on demand lives only while it is written. The foreign-key and index
        // entries of many new rows are gathered and put tree by tree in key order (``flushPuts()``).
        // (A batch insert's only: a context's import puts them as it goes, which leaves its
        // trees smaller at no extra cost; docs/performance.md.)
        deferredPuts = changes.origin.kind == .batchInsert && insertedIDs.count >= Self.putsDeferredFrom ? [:] : nil
        for position in 0..<insertedIDs.count {
            let id = insertedIDs[position], row = changes.insertedRow(at: position)
            if let history { try history.inserted(id, row, entity: try entity(row.entityName), permanent: permanent) }
            try write(id, row, newAs: changes.insertedID(at: position))
        }
        try flushPuts()
        for (id, key, other) in changes.unlinked { try link(id, key, other, add: false) }
        for (id, key, other) in changes.linked { try link(id, key, other, add: true) }
        // New objects' links, made with them on demand (a few per object at a time).
        if let rows = changes.insertedOnDemand {
            var links: [(ManagedObjectID, String, ManagedObjectID, Bool)] = []
            for position in 0..<rows.count {
                links.removeAll(keepingCapacity: true)
                rows.links(position) { links.append(($0, $1, $2, $3)) }
                for (id, key, other, added) in links { try link(id, key, other, add: added) }
            }
        }
        if !uniqueness.isEmpty { throw ArborError.constraintConflicts(uniqueness.conflicts) }
    }

    /// The optimistic-locking conflicts met so far: rows not as their save expected.
    @exclusivity(unchecked) private(set) var lockingConflicts: [MergeConflict] = []

    /// Checks that `row`, the stored row of `id` (nil: gone), is as `expected`
    /// (``RowExpectation``); a conflict is recorded when it is not.
    func check(_ row: StoreRow?, of id: ManagedObjectID, expected: RowExpectation) throws {
        if let row, expected.isMet(by: row, entity: try entity(of: id)) { return }
        // The cached row is the coordinator's to add.
        lockingConflicts.append(MergeConflict(objectID: id, objectSnapshot: expected.snapshot, cachedSnapshot: nil, persistedSnapshot: row,
                                              oldVersionNumber: expected.version, newVersionNumber: row?.version ?? 0))
    }

    func readRow(_ id: ManagedObjectID) throws -> StoreRow? {
        try store.readRow(id, in: try rowsTree(try entity(of: id)))
    }

    /// Writes `row` as the row of `id`, with its entries in the uniqueness, foreign-key and
    /// index trees — but those in `kept`, which are in place already — and its orders. `newID`
    /// is set for a row the save inserts: the ID its caller knows it by (a temporary one).
    func write(_ id: ManagedObjectID, _ row: StoreRow, kept: EntrySet = 0, newAs newID: ManagedObjectID? = nil) throws {
        let entity = try entity(row.entityName)
        let writes = try writes(entity)
        let key = try self.key(id)
        try writes.rows.put(store.key(key), try store.encode(row, entity: entity, permanent: permanent))
        try forEachEntry(of: row, key: key, entity: entity, permanent: permanent, skipping: kept) { _, kind, entry in
            guard let entry else { return }
            switch kind {
            case .unique(let constraint): try putUnique(entry, constraint, of: newID ?? id, key: key, row: row, entity: entity, new: newID != nil)
            case .foreignKey(let relationship):
                let tree = try foreignKeyTree(relationship)
                if newID != nil, deferredPuts != nil { try deferPut(entry, into: tree) } else { try tree.put(entry, []) }
            case .index(let tree):
                if newID != nil, deferredPuts != nil { try deferPut(entry, into: tree) } else { try tree.put(entry, []) }
            }
        }
        try writeOrders(row, key: key, writes: writes)
    }

    /// The uniqueness conflicts met so far.
    @exclusivity(unchecked) private var uniqueness = UniquenessConflicts()

    /// Puts `value` in the uniqueness tree of `constraint` for row `key` (of `id` as the save's
    /// caller knows it; a row the save inserts when `new`), or records a conflict when another
    /// row holds it.
    private func putUnique(_ value: [UInt8], _ constraint: [String], of id: ManagedObjectID, key: Int64, row: StoreRow,
                           entity: EntityDescription, new: Bool) throws {
        let unique = try uniqueTree(entity, constraint)
        guard let holder = try unique.get(value), holder != store.key(key) else {
            try unique.put(value, store.key(key))
            // An updated row's new claim: should another row of the save claim the values too,
            // this one is not the store's holder but one of the save's claimants.
            if !new { uniqueness.claimedByUpdates.insert(UniquenessConflicts.Place(tree: unique.name, value: value)) }
            return
        }
        let place = UniquenessConflicts.Place(tree: unique.name, value: value)
        if uniqueness.add(id, at: place) { return }
        // The first conflict over these values: who holds them, a row of this save or one the
        // store held before it.
        let root = entity.rootEntity
        guard let holderKey = holder.withUnsafeBytes({ KeyEncoding.integer(exactly: $0) }), NativeStore.isPrimaryKey(holderKey) else {
            throw ArborError(.store, "the uniqueness tree \(unique.name) holds a damaged key")
        }
        let holderEntity = try readRawEntity(holderKey, root: root)
        let holderID = store.objectID(holderEntity, holderKey)
        var claimants = [id]
        var stored: (ManagedObjectID, StoreRow?)?
        if let claimant = try claimant(holderID), claimant.new || uniqueness.claimedByUpdates.contains(place) {
            claimants.insert(claimant.id, at: 0)
        } else {
            stored = (holderID, try store.readRow(holderID, in: try rowsTree(root)))
        }
        var shown: [String: String] = [:]
        for name in constraint {
            if let value = row.attribute(name) {
                if case .string(let string) = value { shown[name] = string } else { shown[name] = value.description }
            } else {
                shown[name] = row.destination(name)?.description ?? "nil"
            }
        }
        uniqueness.open(at: place, entityName: entity.name, constraint: constraint, values: shown, claimants: claimants, holder: stored)
    }

    /// The entity of the row `key` of `root`'s hierarchy (a sub-entity's row names it).
    private func readRawEntity(_ key: Int64, root: EntityDescription) throws -> EntityDescription {
        let name = try rowsTree(root).get(store.key(key)).flatMap { bytes in bytes.withUnsafeBytes { store.entityName(ofRow: $0, hierarchy: root) } }
        return try name.map { try store.entity($0) } ?? root
    }

    /// Rows of this save by permanent ID: the ID the save's caller knows each by, and whether
    /// it is a row the save inserts. Made at the first uniqueness conflict.
    @exclusivity(unchecked) private var saveRows: [ManagedObjectID: (id: ManagedObjectID, new: Bool)]?

    /// The row `permanentID` of this save, if it is one.
    private func claimant(_ permanentID: ManagedObjectID) throws -> (id: ManagedObjectID, new: Bool)? {
        if saveRows == nil {
            var rows: [ManagedObjectID: (id: ManagedObjectID, new: Bool)] = [:]
            for (id, _, _) in changes.updated { rows[id] = (id, false) }
            for (position, id) in insertedIDs.enumerated() { rows[id] = (changes.insertedID(at: position), true) }
            saveRows = rows
        }
        return saveRows?[permanentID]
    }

    /// Writes the order trees of `row`'s ordered to-many relationships.
    private func writeOrders(_ row: StoreRow, key: Int64, writes: EntityWrites) throws {
        // An ordered relationship the saving context never loaded is not in the row: its stored
        // list stays as it is.
        for relationship in writes.orderedToMany {
            guard let destinations = row.orderedDestinations(relationship.name) else { continue }
            let order = try tree(NativeStore.orderTree(relationship))
            try clear(order, prefix: store.key(key))
            for (position, destination) in destinations.enumerated() {
                try order.put(store.orderKey(owner: key, position: Int64(position), member: try self.key(destination)), [])
            }
        }
    }

    /// Removes a deleted object's ordered lists and its many-to-many links, in both directions.
    func removeLinks(of id: ManagedObjectID) throws {
        let entity = try entity(of: id)
        let key = try store.primaryKey(of: id)
        for relationship in try writes(entity).orderedToMany {
            try clear(try tree(NativeStore.orderTree(relationship)), prefix: store.key(key))
        }
        for relationship in entity.relationships where NativeStore.isJoined(relationship) {
            let forward = try joinTree(relationship)
            let prefix = store.key(key)
            var others: [Int64] = []
            try forward.forEach(from: prefix) { entryKey, _ in
                guard entryKey.starts(with: prefix) else { return false }
                others.append(try NativeStore.lastKey(of: entryKey, in: forward.name))
                return true
            }
            let backward = try backwardTree(relationship)
            for other in others {
                try delete(store.pair(key, other), from: forward)
                if let backward { try delete(store.pair(other, key), from: backward) }
            }
        }
    }

    /// The inverse's join tree, when the inverse is kept in one (an ordered inverse is kept in
    /// its owner's order tree instead).
    func backwardTree(_ relationship: RelationshipDescription) throws -> Tree? {
        guard let inverse = relationship.inverseRelationship, NativeStore.isJoined(inverse) else { return nil }
        return try joinTree(inverse)
    }

    /// Adds or removes one many-to-many link. Links of relationships this store keeps elsewhere
    /// (ordered ones live in order trees written with the row) are ignored.
    func link(_ id: ManagedObjectID, _ key: String, _ other: ManagedObjectID, add: Bool) throws {
        let entity = try entity(of: id)
        guard let relationship = entity.relationshipsByName[key], NativeStore.isJoined(relationship) else { return }
        let a = try self.key(id), b = try self.key(other)
        let forward = try joinTree(relationship), backward = try backwardTree(relationship)
        // History records the links that change: a context may remove a link another save or a
        // batch delete already removed (its objects were read before), or add one twice.
        if add {
            let existed = try history != nil && forward.get(store.pair(a, b)) != nil
            try forward.put(store.pair(a, b), [])
            try backward?.put(store.pair(b, a), [])
            if !existed { history?.linked(permanent(id), key, permanent(other), added: true) }
        } else {
            let removed = try forward.delete(store.pair(a, b))
            try backward?.delete(store.pair(b, a))
            if removed { history?.linked(permanent(id), key, permanent(other), added: false) }
        }
    }

    /// Deletes rows already read in this transaction (a batch delete's, `rows` in key order
    /// where it can), with their uniqueness, foreign-key, index, join and order entries: no
    /// expectation is checked, nothing is read again. Many are made tree by tree in key order.
    func delete(rows: [(id: ManagedObjectID, row: StoreRow)]) throws {
        deferredDeletions = rows.count >= Self.deletionsDeferredFrom ? [:] : nil
        for (id, row) in rows {
            try history?.deleted(id, old: row, entity: try entity(row.entityName))
            try removeIndexes(of: id, row: row)
            try delete(store.key(try store.primaryKey(of: id)), from: try rowsTree(try entity(of: id)))
            try removeLinks(of: id)
        }
        try flushDeletions()
    }

    /// Writes `changes.updated` over rows read in this transaction (`stored`, in the same order:
    /// a batch update's), with no expectation checked and nothing read again: each row's
    /// changed index, uniqueness and foreign-key entries leave first (so rows may trade unique
    /// values), then the rows are written; every uniqueness conflict is thrown together.
    ///
    /// `changing` names the attributes the update may change (nil: any): a row of an entity none
    /// of whose uniqueness constraints and indexes name one of them keeps every entry, and its
    /// entries are not even computed (a raise changes salaries, which no index holds).
    func update(stored: [StoreRow], changing: Set<String>? = nil) throws {
        guard stored.count == changes.updated.count else {
            throw ArborError(.misuse, "an update of \(changes.updated.count) rows was given \(stored.count) stored rows")
        }
        var untouched: [ObjectIdentifier: Bool] = [:]
        func keepsEverything(_ entityName: String) throws -> Bool {
            guard let changing else { return false }
            let entity = try entity(entityName)
            if let known = untouched[ObjectIdentifier(entity)] { return known }
            let named = entity.uniquenessConstraints.flatMap { $0 } + NativeStore.indexes(of: entity).flatMap(\.keys)
            let keeps = changing.isDisjoint(with: named)
            untouched[ObjectIdentifier(entity)] = keeps
            return keeps
        }
        var kept: [EntrySet] = []
        kept.reserveCapacity(stored.count)
        for ((id, row, _), old) in zip(changes.updated, stored) {
            if old.entityName == row.entityName, try keepsEverything(row.entityName) {
                kept.append(~0)
            } else {
                kept.append(try removeIndexes(of: id, row: old, keeping: row))
            }
        }
        for ((id, row, _), (old, kept)) in zip(changes.updated, zip(stored, kept)) {
            try history?.updated(id, old: old, new: row, entity: try entity(row.entityName), permanent: permanent)
            try write(id, row, kept: kept)
        }
        if !uniqueness.isEmpty { throw ArborError.constraintConflicts(uniqueness.conflicts) }
    }

    /// From how many deleted rows a save's deletions are deferred.
    static let deletionsDeferredFrom = 32

    /// From how many new rows a batch insert's foreign-key and index entries are deferred.
    static let putsDeferredFrom = 32
    /// How many deferred entries are put at once, at most (the memory they take stays small:
    /// a 400,000-row import's entries go in chunks).
    static let putsDeferredLimit = 16_384

    /// The foreign-key and index entries of new rows gathered while deferred (nil: put at
    /// once), by tree, and how many.
    @exclusivity(unchecked) private var deferredPuts: [String: (tree: Tree, keys: [[UInt8]])]?
    @exclusivity(unchecked) private var deferredPutCount = 0

    /// Notes entry `key` (an empty value) of `tree` to be put with the others. New rows'
    /// entries land all over their trees (a batch insert's timesheets name employees in no
    /// order): put one at a time, each descends to another leaf and may share or split it; put
    /// in key order, each leaf takes its entries in one rebuild (``Tree/put(batch:)``).
    /// (Deferring is sound: an entry names its new row, which nothing in the pass reads
    /// through these trees before they are put.)
    private func deferPut(_ key: [UInt8], into tree: Tree) throws {
        deferredPuts![tree.name, default: (tree, [])].keys.append(key)
        deferredPutCount += 1
        if deferredPutCount >= Self.putsDeferredLimit {
            try flushPuts(keepDeferring: true)
        }
    }

    /// Puts the deferred entries, each tree's in key order; stops deferring unless
    /// `keepDeferring`.
    private func flushPuts(keepDeferring: Bool = false) throws {
        guard let puts = deferredPuts else { return }
        deferredPuts = keepDeferring ? [:] : nil
        deferredPutCount = 0
        for name in puts.keys.sorted() {
            let (tree, keys) = puts[name]!
            // Each entry ends with its own row's key: no two are equal.
            try tree.put(batch: keys.sorted { $0.lexicographicallyPrecedes($1) }.map { (key: $0, value: [UInt8]()) })
        }
    }

    /// The deletions gathered while deferred (nil: made at once), by tree.
    @exclusivity(unchecked) private var deferredDeletions: [String: (tree: Tree, keys: [[UInt8]])]?

    /// Deletes `key` from `tree` — or, while deletions are deferred, notes it. A save deleting
    /// many rows touches their entries in every tree in no order (a cascade's timesheets are
    /// spread over the whole key space): made one row at a time, each deletion descends to
    /// another leaf, and past the page cache every one reads and spills a page. Gathered and
    /// made tree by tree in key order, each leaf is visited once for all its deletions.
    /// (Deferring is sound because the deletion phase reads nothing it deletes: each entry
    /// belongs to one deleted row, and a uniqueness entry's holder is checked when noted.)
    func delete(_ key: [UInt8], from tree: Tree) throws {
        guard deferredDeletions != nil else {
            _ = try tree.delete(key)
            return
        }
        deferredDeletions![tree.name, default: (tree, [])].keys.append(key)
    }

    /// Makes the deferred deletions, each tree's in key order, and stops deferring.
    private func flushDeletions() throws {
        guard let deletions = deferredDeletions else { return }
        deferredDeletions = nil
        for name in deletions.keys.sorted() {
            let (tree, keys) = deletions[name]!
            try tree.delete(batch: keys.sorted { $0.lexicographicallyPrecedes($1) })
        }
    }

    /// Deletes every entry of `tree` whose key starts with `prefix`.
    func clear(_ tree: Tree, prefix: [UInt8]) throws {
        var keys: [[UInt8]] = []
        try tree.forEach(from: prefix) { key, _ in
            guard key.starts(with: prefix) else { return false }
            keys.append(Array(key))
            return true
        }
        for key in keys { try delete(key, from: tree) }
    }
}
