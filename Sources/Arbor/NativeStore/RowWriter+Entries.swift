import ArborStore
import Foundation

/// A row's entries in the uniqueness, foreign-key and index trees: made from the row (one
/// order, one place each), removed with it, and kept as they are by an update that does not
/// change what they are made of.
extension RowWriter {
    /// Which of a row's entries in the uniqueness, foreign-key and index trees are in place
    /// already: bit `i` for the `i`th of ``forEachEntry(of:key:entity:permanent:_:)``'s entries
    /// (past 64, none).
    typealias EntrySet = UInt64

    /// Calls `body` with each entry `row` (primary key `key`) puts in the uniqueness,
    /// foreign-key and index trees — its place among them, and its bytes (nil: no entry, a nil
    /// value) — but those in `skipping`, whose bytes are not even made. The order is the
    /// entity's: uniqueness constraints, indexed foreign keys, indexes.
    func forEachEntry(of row: StoreRow, key: Int64, entity: EntityDescription,
                              permanent: (ManagedObjectID) -> ManagedObjectID, skipping: EntrySet = 0,
                              _ body: (Int, EntryKind, [UInt8]?) throws -> Void) throws {
        let writes = try writes(entity)
        var place = 0
        func skipped() -> Bool { place < 64 && skipping & (1 << place) != 0 }
        for constraint in entity.uniquenessConstraints {
            defer { place += 1 }
            if skipped() { continue }
            try body(place, .unique(constraint), try store.uniqueKey(row, constraint, permanent: permanent))
        }
        for relationship in writes.indexedForeignKeys {
            defer { place += 1 }
            if skipped() { continue }
            let entry = try row.destination(relationship.name).map { store.pair(try store.primaryKey(of: permanent($0)), key) }
            try body(place, .foreignKey(relationship), entry)
        }
        for (index, tree) in writes.indexes {
            defer { place += 1 }
            if skipped() { continue }
            try body(place, .index(tree), try store.indexEntry(row, index, key: key, permanent: permanent))
        }
    }

    /// What tree an entry of ``forEachEntry(of:key:entity:permanent:_:)`` belongs to.
    enum EntryKind {
        case unique([String])
        case foreignKey(RelationshipDescription)
        case index(Tree)
    }

    /// Removes what `row` (the stored row of `id`) put in the uniqueness, foreign-key and index
    /// trees, except the entries `new` (its next row) puts there the same: returns those.
    func removeIndexes(of id: ManagedObjectID, row: StoreRow, keeping new: StoreRow) throws -> EntrySet {
        let entity = try entity(row.entityName)
        guard new.entityName == row.entityName else {
            try removeIndexes(of: id, row: row)
            return 0
        }
        // The common update (a raise changes a salary): nothing an entry is made of changed, so
        // every entry stays, and none is made to find that out.
        if let slots = try writes(entity).entrySlots, new.values.layout === row.values.layout,
           slots.allSatisfy({ Self.makesSameEntries(new.values[slot: $0], row.values[slot: $0]) }) {
            return ~0
        }
        let key = try store.primaryKey(of: id)
        var newEntries: [[UInt8]?] = []
        try forEachEntry(of: new, key: key, entity: entity, permanent: permanent) { _, _, entry in newEntries.append(entry) }
        var kept: EntrySet = 0
        try forEachEntry(of: row, key: key, entity: entity, permanent: { $0 }) { place, kind, entry in
            guard let entry else { return }
            if place < 64 && newEntries[place] == entry {
                kept |= 1 << place
                return
            }
            try removeEntry(entry, kind, key: key, entity: entity)
        }
        return kept
    }

    /// Whether two values of one property surely make the same entry bytes: the same
    /// destination, or attributes equal to the bit (a string's UTF-8: `==` equates canonically
    /// equivalent strings, which entries keep apart; a double's bits: `==` equates 0 and -0).
    /// False leaves it to the entries themselves.
    static func makesSameEntries(_ a: PropertyValue?, _ b: PropertyValue?) -> Bool {
        switch (a, b) {
        case (nil, nil), (.none?, .none?): true
        case (.object(let x)?, .object(let y)?): x == y
        case (.attribute(let x)?, .attribute(let y)?):
            switch (x, y) {
            case (.integer(let i), .integer(let j)): i == j
            case (.boolean(let p), .boolean(let q)): p == q
            case (.string(let s), .string(let t)): s.utf8.elementsEqual(t.utf8)
            case (.double(let d), .double(let e)): d.bitPattern == e.bitPattern
            case (.float(let d), .float(let e)): d.bitPattern == e.bitPattern
            case (.date(let d), .date(let e)): d.timeIntervalSinceReferenceDate.bitPattern == e.timeIntervalSinceReferenceDate.bitPattern
            default: false
            }
        default: false
        }
    }

    /// Removes what `row` (the stored row of `id`) put in the uniqueness, foreign-key and index
    /// trees.
    func removeIndexes(of id: ManagedObjectID, row: StoreRow) throws {
        let entity = try entity(row.entityName)
        let key = try store.primaryKey(of: id)
        try forEachEntry(of: row, key: key, entity: entity, permanent: { $0 }) { _, kind, entry in
            guard let entry else { return }
            try removeEntry(entry, kind, key: key, entity: entity)
        }
    }

    /// Removes one entry of row `key` (a uniqueness entry only while the row holds it).
    func removeEntry(_ entry: [UInt8], _ kind: EntryKind, key: Int64, entity: EntityDescription) throws {
        switch kind {
        case .unique(let constraint):
            let unique = try uniqueTree(entity, constraint)
            if try unique.get(entry) == store.key(key) { try delete(entry, from: unique) }
        case .foreignKey(let relationship): try delete(entry, from: try foreignKeyTree(relationship))
        case .index(let tree): try delete(entry, from: tree)
        }
    }
}
