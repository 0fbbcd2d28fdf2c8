import Foundation

// Safety: `withKey` lends a key encoded on the stack to `body` only, for its call.

/// The store's schema: the trees a model's entities live in (their names) and what each holds —
/// rows, index entries, foreign keys, joins, uniqueness — as the planner, the fetch executor and
/// the row writer all read it. The one place that knows a tree's name or an index entry's bytes
/// (docs/object-graph-internals.md lists the trees).
extension NativeStore {
    static func rowsTree(_ entity: EntityDescription) -> String { rowsTree(root: entity.rootEntity.name) }
    static func foreignKeyTree(_ relationship: RelationshipDescription) -> String {
        foreignKeyTree(entity: relationship.entity?.name ?? "?", relationship: relationship.name)
    }

    // The names by the names of their parts (a migration names the trees of another model).
    static func rowsTree(root: String) -> String { "rows.\(root)" }
    static func foreignKeyTree(entity: String, relationship: String) -> String { "fk.\(entity).\(relationship)" }
    static func uniqueTree(root: String, keys: [String]) -> String { "unique.\(root).\(keys.joined(separator: "+"))" }
    static func indexTree(root: String, keys: [String], folded: Bool) -> String {
        "index.\(root).\(keys.joined(separator: "+"))\(folded ? ".cd" : "")"
    }
    static func joinTree(_ relationship: RelationshipDescription) -> String {
        "join.\(relationship.entity?.name ?? "?").\(relationship.name)"
    }
    static func uniqueTree(_ entity: EntityDescription, _ keys: [String]) -> String {
        uniqueTree(root: entity.rootEntity.name, keys: keys)
    }

    /// How a store writes the primary keys in its trees' keys (docs/file-format.md, "Key
    /// encoding"; docs/row-format.md, "Keys"): recorded as `keys` in `arbor.metadata`.
    enum KeyForm: UInt8, Sendable {
        /// Nine bytes each (``KeyEncoding/Tag/int``): stores made before compact keys, and
        /// stores of row layouts 1 and 2.
        case standard = 1
        /// As many bytes as the key needs, after a tag saying how many
        /// (``KeyEncoding/Tag/compactInteger``): a key below 2^24 takes four bytes. New stores.
        case compact = 2
    }

    /// Whether this store's keys write primary keys compactly.
    var compactKeys: Bool { keyForm == .compact }

    // The primary keys in a tree's key, in the store's key form: the only writers of them.
    // (Readers — `lastKey(of:in:)`, `KeyEncoding.integer(exactly:)`, `KeyReader` — read both
    // forms.) A destination in an index entry is a primary key too (``indexEntry(_:_:key:permanent:)``);
    // attribute values in index entries, the values of uniqueness keys and the values in rows
    // stay in the standard form.

    /// A rows tree's key, or a uniqueness tree's value: `primaryKey` alone.
    func key(_ primaryKey: Int64) -> [UInt8] { KeyEncoding.withEncodedInteger(primaryKey, compact: compactKeys) { Array($0) } }
    /// ``key(_:)`` in a buffer on the stack, valid during `body`.
    func withKey<R>(_ primaryKey: Int64, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try KeyEncoding.withEncodedInteger(primaryKey, compact: compactKeys, body)
    }
    /// A foreign-key or join tree's key: two primary keys.
    func pair(_ a: Int64, _ b: Int64) -> [UInt8] { KeyEncoding.encode([.int(a), .int(b)], compactIntegers: compactKeys) }
    /// An ordered to-many's order-tree key: the owner, the position, the member.
    func orderKey(owner: Int64, position: Int64, member: Int64) -> [UInt8] {
        KeyEncoding.encode([.int(owner), .int(position), .int(member)], compactIntegers: compactKeys)
    }

    /// Whether a to-one relationship keeps a foreign-key index (its inverse is an unordered
    /// to-many).
    static func isIndexedForeignKey(_ relationship: RelationshipDescription) -> Bool {
        guard !relationship.isToMany, let inverse = relationship.inverseRelationship else { return false }
        return inverse.isToMany && !inverse.isOrdered
    }

    /// Whether a to-many relationship is kept in a join tree (an unordered many-to-many).
    static func isJoined(_ relationship: RelationshipDescription) -> Bool {
        relationship.isUnorderedManyToMany
    }
}

/// An index tree of a hierarchy, as the planner and the row writer see it.
struct StoreIndex {
    enum Kind {
        /// `index.<Root>.<keys>`: (values…, primary key) → nothing; every row has an entry.
        case index
        /// `unique.<Root>.<keys>`: values → primary key; rows with a nil value have none.
        case unique
        /// `fk.<Entity>.<relationship>`: (destination key, primary key) → nothing; rows with no
        /// destination have none.
        case foreignKey
    }

    let tree: String
    let keys: [String]
    /// Strings are stored folded (case and diacritics): the index serves `[cd]` comparisons.
    let folded: Bool
    let kind: Kind

    /// Whether a row with a nil value in the first key has an entry (the index can serve an
    /// unfiltered scan and `== nil`).
    var coversEveryRow: Bool { kind == .index }
}

extension NativeStore {
    static func indexTree(_ entity: EntityDescription, _ index: IndexDescription) -> String {
        indexTree(root: entity.rootEntity.name, keys: index.keys, folded: index.caseAndDiacriticInsensitive)
    }

    /// The indexes kept for rows of `entity` (its own and inherited ones, each tree once).
    static func indexes(of entity: EntityDescription) -> [StoreIndex] {
        var seen = Set<String>()
        var result: [StoreIndex] = []
        for index in entity.indexes {
            let tree = indexTree(entity, index)
            if seen.insert(tree).inserted {
                result.append(StoreIndex(tree: tree, keys: index.keys, folded: index.caseAndDiacriticInsensitive, kind: .index))
            }
        }
        return result
    }

    /// Every index, uniqueness and foreign-key tree that can find rows of `entity`.
    static func accessPaths(of entity: EntityDescription) -> [StoreIndex] {
        var paths = indexes(of: entity)
        // A uniqueness tree has no entry for a row with a nil value: a compound one cannot find a
        // row by its first key alone.
        for constraint in entity.uniquenessConstraints where constraint.count == 1 {
            paths.append(StoreIndex(tree: uniqueTree(entity, constraint), keys: constraint, folded: false, kind: .unique))
        }
        for relationship in entity.relationships where isIndexedForeignKey(relationship) {
            paths.append(StoreIndex(tree: foreignKeyTree(relationship), keys: [relationship.name], folded: false, kind: .foreignKey))
        }
        return paths
    }

    /// The component an index stores for a value of a row.
    func indexComponent(_ value: PropertyValue?, folded: Bool, permanent: (ManagedObjectID) -> ManagedObjectID) throws -> KeyComponent {
        switch value {
        case .attribute(.string(let text))? where folded:
            return .string(PredicateEvaluator.fold(text, [.caseInsensitive, .diacriticInsensitive]))
        case .attribute(let stored)?: return Self.component(stored)
        case .object(let id)?: return .int(try primaryKey(of: permanent(id)))
        default: return .null
        }
    }

    /// The entry of `row` (primary key `key`) in an index.
    func indexEntry(_ row: StoreRow, _ index: StoreIndex, key: Int64,
                    permanent: (ManagedObjectID) -> ManagedObjectID = { $0 }) throws -> [UInt8] {
        var bytes: [UInt8] = []
        for name in index.keys {
            let value = row.values[name]
            // A destination is a primary key: in the store's key form, as in a foreign-key tree.
            var isObject = false
            if case .object? = value { isObject = true }
            KeyEncoding.append(try indexComponent(value, folded: index.folded, permanent: permanent), to: &bytes,
                               compactIntegers: isObject && compactKeys)
        }
        KeyEncoding.append(.int(key), to: &bytes, compactIntegers: compactKeys)
        return bytes
    }
}
