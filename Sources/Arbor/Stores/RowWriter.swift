import Foundation

/// Applies one save's changes to a ``NativeStore`` inside one engine write transaction: rows,
/// foreign-key indexes, join trees, order trees and uniqueness constraints, with the version
/// checks of optimistic locking.
struct RowWriter {
    let store: NativeStore
    let transaction: WriteTransaction
    /// Permanent IDs for the temporary ones of this save's new rows (applied as rows are written).
    var permanent: [ManagedObjectID: ManagedObjectID] = [:]

    /// The permanent key of `id` (translating a temporary ID of this save).
    func key(_ id: ManagedObjectID) throws -> Int64 { try store.primaryKey(of: permanent[id] ?? id) }

    func tree(_ name: String) throws -> Tree {
        try transaction.tree(named: name, create: true)!
    }

    /// Permanent IDs for the inserted rows that have temporary ones: keys from each hierarchy
    /// tree's sequence, reserved once per hierarchy.
    mutating func allocateKeys(for changes: StoreChanges) throws -> [ManagedObjectID: ManagedObjectID] {
        var byRoot: [String: [ManagedObjectID]] = [:]
        for (id, _) in changes.inserted where id.isTemporaryID {
            byRoot[try store.entity(id.entityName).rootEntity.name, default: []].append(id)
        }
        var mapping: [ManagedObjectID: ManagedObjectID] = [:]
        for (root, ids) in byRoot {
            let keys = try tree(NativeStore.rowsTree(try store.entity(root))).nextSequence(reserving: ids.count)
            for (id, key) in zip(ids, keys) { mapping[id] = store.objectID(id.entityName, Int64(key)) }
        }
        permanent = mapping
        return mapping
    }

    mutating func apply(_ changes: StoreChanges) throws {
        // Deletions first (their unique values and links go), then updates, then insertions.
        for (id, expected) in changes.deleted {
            let old = try current(id, expected: expected)
            try removeIndexes(of: id, row: old)
            try tree(NativeStore.rowsTree(try store.entity(id.entityName))).delete(NativeStore.key(try store.primaryKey(of: id)))
            try removeLinks(of: id)
        }
        for (id, row, expected) in changes.updated {
            let old = try current(id, expected: expected)
            try removeIndexes(of: id, row: old)
            try write(id, row)
        }
        for (id, row) in changes.inserted { try write(id, row) }
        for (id, key, other) in changes.unlinked { try link(id, key, other, add: false) }
        for (id, key, other) in changes.linked { try link(id, key, other, add: true) }
    }

    /// The stored row of `id`, which must be at version `expected`.
    func current(_ id: ManagedObjectID, expected: Int64) throws -> StoreRow {
        guard let row = try readRow(id) else {
            throw ArborError(.mergeConflict, "\(id) was deleted by another context since it was read", objectID: id)
        }
        guard row.version == expected else {
            throw ArborError(.mergeConflict, "\(id) changed in the store since it was read (version \(row.version), expected \(expected))",
                             objectID: id)
        }
        return row
    }

    func readRow(_ id: ManagedObjectID) throws -> StoreRow? {
        let entity = try store.entity(id.entityName)
        guard let bytes = try tree(NativeStore.rowsTree(entity)).get(NativeStore.key(try store.primaryKey(of: id))) else { return nil }
        return try store.decode(bytes, objectID: id)
    }

    func write(_ id: ManagedObjectID, _ row: StoreRow) throws {
        let entity = try store.entity(row.entityName)
        let key = try self.key(id)
        try tree(NativeStore.rowsTree(entity)).put(NativeStore.key(key), try store.encode(row, entity: entity, permanent: permanent))
        for constraint in entity.uniquenessConstraints {
            guard let value = try store.uniqueKey(row, constraint, permanent: permanent) else { continue }
            let unique = try tree(NativeStore.uniqueTree(entity, constraint))
            if let holder = try unique.get(value), holder != NativeStore.key(key) {
                let other = (try? KeyEncoding.decode(holder)).flatMap { components -> Int64? in
                    if case .int(let other) = components.first { return other }
                    return nil
                }
                let values = constraint.map { "\($0) = \(row.attributes[$0]?.description ?? row.toOne[$0]?.description ?? "nil")" }
                throw ArborError(.constraintConflict,
                                 "\(id) would break the uniqueness of \(entity.rootEntity.name)(\(constraint.joined(separator: ", "))): \(values.joined(separator: ", ")) is already held by \(other.map { store.objectID(entity.rootEntity.name, $0).description } ?? "another object")",
                                 entity: entity.name, key: constraint.joined(separator: ","), value: values.joined(separator: ", "), objectID: id)
            }
            try unique.put(value, NativeStore.key(key))
        }
        for relationship in entity.relationships where NativeStore.isIndexedForeignKey(relationship) {
            guard let destination = row.toOne[relationship.name] else { continue }
            try tree(NativeStore.foreignKeyTree(relationship)).put(NativeStore.pair(try self.key(destination), key), [])
        }
        // An ordered relationship the saving context never loaded is not in the row: its stored
        // list stays as it is.
        for relationship in entity.relationships where relationship.isToMany && relationship.isOrdered {
            guard let destinations = row.ordered[relationship.name] else { continue }
            let order = try tree(NativeStore.orderTree(relationship))
            try clear(order, prefix: NativeStore.key(key))
            for (position, destination) in destinations.enumerated() {
                try order.put(KeyEncoding.encode([.int(key), .int(Int64(position)), .int(try self.key(destination))]), [])
            }
        }
    }

    /// Removes what `row` (the stored row of `id`) put in the uniqueness and foreign-key trees.
    func removeIndexes(of id: ManagedObjectID, row: StoreRow) throws {
        let entity = try store.entity(row.entityName)
        let key = try store.primaryKey(of: id)
        for constraint in entity.uniquenessConstraints {
            guard let value = try store.uniqueKey(row, constraint) else { continue }
            let unique = try tree(NativeStore.uniqueTree(entity, constraint))
            if try unique.get(value) == NativeStore.key(key) { try unique.delete(value) }
        }
        for relationship in entity.relationships where NativeStore.isIndexedForeignKey(relationship) {
            guard let destination = row.toOne[relationship.name] else { continue }
            try tree(NativeStore.foreignKeyTree(relationship)).delete(NativeStore.pair(try store.primaryKey(of: destination), key))
        }
    }

    /// Removes a deleted object's ordered lists and its many-to-many links, in both directions.
    func removeLinks(of id: ManagedObjectID) throws {
        let entity = try store.entity(id.entityName)
        let key = try store.primaryKey(of: id)
        for relationship in entity.relationships where relationship.isToMany && relationship.isOrdered {
            try clear(try tree(NativeStore.orderTree(relationship)), prefix: NativeStore.key(key))
        }
        for relationship in entity.relationships where NativeStore.isJoined(relationship) {
            let forward = try tree(NativeStore.joinTree(relationship))
            var others: [Int64] = []
            try forward.forEach(from: NativeStore.key(key)) { entryKey, _ in
                guard entryKey.starts(with: NativeStore.key(key)) else { return false }
                if case .int(let other)? = (try? KeyEncoding.decode(Array(entryKey)))?.last { others.append(other) }
                return true
            }
            let backward = try backwardTree(relationship)
            for other in others {
                try forward.delete(NativeStore.pair(key, other))
                try backward?.delete(NativeStore.pair(other, key))
            }
        }
    }

    /// The inverse's join tree, when the inverse is kept in one (an ordered inverse is kept in
    /// its owner's order tree instead).
    func backwardTree(_ relationship: RelationshipDescription) throws -> Tree? {
        guard let inverse = relationship.inverseRelationship, NativeStore.isJoined(inverse) else { return nil }
        return try tree(NativeStore.joinTree(inverse))
    }

    /// Adds or removes one many-to-many link. Links of relationships this store keeps elsewhere
    /// (ordered ones live in order trees written with the row) are ignored.
    func link(_ id: ManagedObjectID, _ key: String, _ other: ManagedObjectID, add: Bool) throws {
        let entity = try store.entity(id.entityName)
        guard let relationship = entity.relationshipsByName[key], NativeStore.isJoined(relationship) else { return }
        let a = try self.key(id), b = try self.key(other)
        let forward = try tree(NativeStore.joinTree(relationship)), backward = try backwardTree(relationship)
        if add {
            try forward.put(NativeStore.pair(a, b), [])
            try backward?.put(NativeStore.pair(b, a), [])
        } else {
            try forward.delete(NativeStore.pair(a, b))
            try backward?.delete(NativeStore.pair(b, a))
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
        for key in keys { try tree.delete(key) }
    }
}
