import Foundation

/// Values by object ID, found without hashing: the row cache's snapshots and a context's
/// registered objects. A store hands out primary keys in sequence, so the keys of one entity in
/// one store are nearly dense: each (entity, store) pair has a table of chunks of 256 slots
/// indexed by key, a chunk made when a key in it is first stored. IDs come in runs of one
/// entity, so the pair last used is checked first; the others are few and searched in order. A
/// lookup is then a comparison and two array reads — against a hash of the ID, a probe and a
/// comparison of 40-byte keys (a fifth of a fault fire's time, measured). Temporary IDs'
/// serial numbers are sequential too, and go into tables of their own (a key's sign is part of a
/// table's identity). A table spans the keys it has seen; keys too far from them go to a
/// dictionary. A chunk left empty is freed, a few kept for reuse.
///
/// Not thread-safe: its owner guards it (the coordinator's lock, the context's queue).
struct ObjectIDTable<Value> {
    private static var chunkBits: Int { 8 }
    private static var chunkSize: Int { 1 << chunkBits }

    /// The most chunks one table spans (16M keys): keys beyond that span (an ID from another
    /// process's sequence, say) go to the dictionary.
    private static var maximumSpan: Int { 1 << 16 }

    private struct Table {
        /// The entity and store of the IDs in the table (their space's address: spaces are
        /// interned and never freed).
        let space: UnsafeMutableRawPointer
        /// Whether the table holds negative keys (temporary IDs' negated serial numbers): an ID
        /// of either sign may name any namespace (a URI can say anything), so the sign is part of
        /// the table's identity, and no two IDs share a slot.
        let negative: Bool
        /// The chunk index of `chunks[0]`: a table covers the span of keys it has seen.
        var firstChunk = 0
        var chunks: [[Value?]?] = []
        /// The values in each chunk: a chunk left empty is freed.
        var filled: [Int32] = []
        /// Emptied chunks kept for the next chunks made, up to ``maximumSpares`` (objects made
        /// and dropped over and over — keyed fetches, small queries over scattered keys — would
        /// otherwise allocate and free chunks each time).
        var spares: [[Value?]] = []
    }

    /// The most emptied chunks a table keeps for reuse.
    private static var maximumSpares: Int { 64 }

    private var tables: [Table] = []
    private var lastTable = 0
    private var others: [ManagedObjectID: Value] = [:]
    /// The number of values held.
    private(set) var count = 0

    /// The table of `id`'s entity and store (made when `create`), or nil.
    private mutating func table(of id: ManagedObjectID, create: Bool) -> Int? {
        let negative = id.key < 0
        let space = id.spaceAddress
        if lastTable < tables.count, tables[lastTable].space == space, tables[lastTable].negative == negative {
            return lastTable
        }
        if let found = tables.firstIndex(where: { $0.space == space && $0.negative == negative }) {
            lastTable = found
            return found
        }
        guard create else { return nil }
        tables.append(Table(space: space, negative: negative))
        lastTable = tables.count - 1
        return lastTable
    }

    /// Where `id` goes: its chunk and slot. A permanent ID's key and a temporary ID's serial
    /// number (its key negated) are both handed out in sequence; the sign keeps the two kinds in
    /// tables of their own.
    @inline(__always)
    private static func place(of id: ManagedObjectID) -> (chunk: Int, slot: Int)? {
        guard id.key != 0, id.key != .min else { return nil }
        let index = Int(id.key.magnitude)
        return (index >> chunkBits, index & (chunkSize - 1))
    }

    /// The value held for `id`, or nil.
    subscript(id: ManagedObjectID) -> Value? {
        mutating get {
            guard let (chunk, slot) = Self.place(of: id), let table = table(of: id, create: false) else {
                return others.isEmpty ? nil : others[id]
            }
            let position = chunk - tables[table].firstChunk
            guard position >= 0, position < tables[table].chunks.count, let found = tables[table].chunks[position]?[slot] else {
                return others.isEmpty ? nil : others[id]
            }
            return found
        }
        set {
            if let (chunk, slot) = Self.place(of: id), let table = table(of: id, create: newValue != nil),
               newValue == nil ? spans(table, chunk) : reach(table, chunk) {
                // A key once put in the dictionary (out of the span then) leaves it.
                if !others.isEmpty, others.removeValue(forKey: id) != nil { count -= 1 }
                let position = chunk - tables[table].firstChunk
                if tables[table].chunks[position] == nil {
                    guard newValue != nil else { return }
                    tables[table].chunks[position] = tables[table].spares.popLast() ?? [Value?](repeating: nil, count: Self.chunkSize)
                }
                let had = tables[table].chunks[position]![slot] != nil
                let change = (newValue != nil ? 1 : 0) - (had ? 1 : 0)
                count += change
                tables[table].filled[position] += Int32(change)
                if tables[table].filled[position] == 0 {
                    // Memory follows the values held, not the keys ever seen (a few emptied
                    // chunks are kept for reuse: their slots are all nil again).
                    tables[table].chunks[position]![slot] = nil
                    let emptied = tables[table].chunks[position]!
                    tables[table].chunks[position] = nil
                    if tables[table].spares.count < Self.maximumSpares { tables[table].spares.append(emptied) }
                } else {
                    tables[table].chunks[position]![slot] = newValue
                }
                return
            }
            let old: Value?
            if let newValue { old = others.updateValue(newValue, forKey: id) } else { old = others.removeValue(forKey: id) }
            count += (newValue != nil ? 1 : 0) - (old != nil ? 1 : 0)
        }
    }

    /// Whether `table` spans `chunk` now.
    private func spans(_ table: Int, _ chunk: Int) -> Bool {
        chunk >= tables[table].firstChunk && chunk < tables[table].firstChunk + tables[table].chunks.count
    }

    /// Makes `table` span `chunk`; false when that would pass ``maximumSpan`` (the key then goes
    /// to the dictionary).
    private mutating func reach(_ table: Int, _ chunk: Int) -> Bool {
        if tables[table].chunks.isEmpty {
            tables[table].firstChunk = chunk
            tables[table].chunks = [nil]
            tables[table].filled = [0]
            return true
        }
        let first = tables[table].firstChunk, end = first + tables[table].chunks.count
        if chunk >= first && chunk < end { return true }
        let newFirst = min(first, chunk), newEnd = max(end, chunk + 1)
        guard newEnd - newFirst <= Self.maximumSpan else { return false }
        if chunk < first {
            tables[table].chunks.insert(contentsOf: repeatElement(nil, count: first - chunk), at: 0)
            tables[table].filled.insert(contentsOf: repeatElement(0, count: first - chunk), at: 0)
            tables[table].firstChunk = chunk
        } else {
            tables[table].chunks.append(contentsOf: repeatElement(nil, count: newEnd - end))
            tables[table].filled.append(contentsOf: repeatElement(0, count: newEnd - end))
        }
        return true
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

    /// The chunks allocated now (chunks left empty are freed).
    var allocatedChunks: Int { tables.reduce(0) { $0 + $1.chunks.count { $0 != nil } } }

    /// Drops every value.
    mutating func removeAll() {
        tables.removeAll()
        others.removeAll()
        lastTable = 0
        count = 0
    }
}
