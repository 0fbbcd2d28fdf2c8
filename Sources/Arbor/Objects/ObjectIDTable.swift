import Foundation

/// Values by object ID, found without hashing: the row cache's snapshots and a context's
/// registered objects. A store hands out primary keys in sequence, so the keys of one entity in
/// one store are nearly dense: each (entity, store) pair has a table of chunks of 256 slots
/// indexed by key, a chunk made when a key in it is first stored. IDs come in runs of one
/// entity, so the pair last used is checked first; the others are few and searched in order. A
/// lookup is then a comparison and two array reads — against a hash of the ID, a probe and a
/// comparison of 40-byte keys (a fifth of a fault fire's time, measured). IDs without a positive
/// key (temporary ones) go to a dictionary.
///
/// Not thread-safe: its owner guards it (the coordinator's lock, the context's queue).
struct ObjectIDTable<Value> {
    private static var chunkBits: Int { 8 }
    private static var chunkSize: Int { 1 << chunkBits }

    private struct Table {
        let entityName: String
        let store: UUID
        var chunks: [[Value?]?] = []
    }

    private var tables: [Table] = []
    private var lastTable = 0
    private var others: [ManagedObjectID: Value] = [:]
    /// The number of values held.
    private(set) var count = 0

    /// The table of `id`'s entity and store (made when `create`), or nil.
    private mutating func table(of id: ManagedObjectID, create: Bool) -> Int? {
        if lastTable < tables.count, tables[lastTable].entityName == id.entityName, tables[lastTable].store == id.namespace {
            return lastTable
        }
        if let found = tables.firstIndex(where: { $0.entityName == id.entityName && $0.store == id.namespace }) {
            lastTable = found
            return found
        }
        guard create else { return nil }
        tables.append(Table(entityName: id.entityName, store: id.namespace))
        lastTable = tables.count - 1
        return lastTable
    }

    /// The value held for `id`, or nil.
    subscript(id: ManagedObjectID) -> Value? {
        mutating get {
            guard id.key > 0 else { return others[id] }
            guard let table = table(of: id, create: false) else { return nil }
            let chunk = Int(id.key >> Self.chunkBits), slot = Int(id.key) & (Self.chunkSize - 1)
            guard chunk < tables[table].chunks.count else { return nil }
            return tables[table].chunks[chunk]?[slot]
        }
        set {
            guard id.key > 0 else {
                let old: Value?
                if let newValue { old = others.updateValue(newValue, forKey: id) } else { old = others.removeValue(forKey: id) }
                count += (newValue != nil ? 1 : 0) - (old != nil ? 1 : 0)
                return
            }
            guard let table = table(of: id, create: newValue != nil) else { return }
            let chunk = Int(id.key >> Self.chunkBits), slot = Int(id.key) & (Self.chunkSize - 1)
            if chunk >= tables[table].chunks.count {
                guard newValue != nil else { return }
                tables[table].chunks.append(contentsOf: repeatElement(nil, count: chunk + 1 - tables[table].chunks.count))
            }
            if tables[table].chunks[chunk] == nil {
                guard newValue != nil else { return }
                tables[table].chunks[chunk] = [Value?](repeating: nil, count: Self.chunkSize)
            }
            let had = tables[table].chunks[chunk]![slot] != nil
            tables[table].chunks[chunk]![slot] = newValue
            count += (newValue != nil ? 1 : 0) - (had ? 1 : 0)
        }
    }

    /// The value held for `id`, or else the one `make` returns, stored.
    mutating func value(for id: ManagedObjectID, orInsert make: () -> Value) -> Value {
        if let found = self[id] { return found }
        let made = make()
        self[id] = made
        return made
    }

    /// Every value held (in no particular order).
    var values: [Value] {
        var result = Array(others.values)
        result.reserveCapacity(count)
        for table in tables {
            for chunk in table.chunks {
                guard let chunk else { continue }
                for case let value? in chunk { result.append(value) }
            }
        }
        return result
    }

    /// Drops every value.
    mutating func removeAll() {
        tables.removeAll()
        others.removeAll()
        lastTable = 0
        count = 0
    }
}
