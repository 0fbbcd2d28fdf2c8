import Foundation

// Safety: The table owns its tables and chunks (allocated and freed only here, and noncopyable so
// that no copy frees them twice), reads them only within their counts, and is guarded by its owner
// (the coordinator's lock, the context's queue); space addresses are only compared.

/// Values by object ID, found without hashing: the row cache's snapshots and a context's
/// registered objects. A store hands out primary keys in sequence, so the keys of one entity in
/// one store are nearly dense: each (entity, store) pair has a table of chunks of 256 slots
/// indexed by key, a chunk made when a key in it is first stored. IDs come in runs of one
/// entity, so the pair last used is checked first; the others are few and searched in order. A
/// lookup is then a comparison and two array reads — against a hash of the ID, a probe and a
/// comparison of 40-byte keys, on every fault fire. Temporary IDs'
/// serial numbers are sequential too, and go into tables of their own (a key's sign is part of a
/// table's identity). A table spans the keys it has seen; keys too far from them go to a
/// dictionary. A chunk left empty is freed, a few kept for reuse.
///
/// The table owns its memory: the tables are one allocation and a chunk's slots another, read
/// and written in place. A set is then one store into its slot, where nested arrays of arrays
/// would check each level's uniqueness (copy on write) and retain and release each level's
/// buffer several times per set. The table is therefore noncopyable (a copy would share, and
/// free, the same memory).
///
/// Not thread-safe: its owner guards it (the coordinator's lock, the context's queue).
struct ObjectIDTable<Value>: ~Copyable {
    private static var chunkBits: Int { 8 }
    private static var chunkSize: Int { 1 << chunkBits }

    /// The most chunks one table spans (16M keys): keys beyond that span (an ID from another
    /// process's sequence, say) go to the dictionary.
    private static var maximumSpan: Int { 1 << 16 }

    /// The most emptied chunks a table keeps for reuse.
    private static var maximumSpares: Int { 64 }

    /// A chunk: ``chunkSize`` slots.
    private typealias Slots = UnsafeMutablePointer<Value?>

    /// The slots of one entity in one store, for keys of one sign.
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
        var chunks: [Slots?] = []
        /// The values in each chunk: a chunk left empty is freed.
        var filled: [Int32] = []
        /// Emptied chunks kept for the next chunks made, up to ``maximumSpares`` (objects made
        /// and dropped over and over — keyed fetches, small queries over scattered keys — would
        /// otherwise allocate and free chunks each time).
        var spares: [Slots] = []
    }

    private var tables: UnsafeMutablePointer<Table>
    private var tableCount = 0
    private var tableCapacity = 4
    private var lastTable = 0
    private var others: [ManagedObjectID: Value] = [:]
    /// The number of values held.
    private(set) var count = 0

    init() {
        tables = .allocate(capacity: tableCapacity)
    }

    deinit {
        Self.free(tables, count: tableCount)
        tables.deallocate()
    }

    private static func makeSlots() -> Slots {
        let slots = Slots.allocate(capacity: chunkSize)
        slots.initialize(repeating: nil, count: chunkSize)
        return slots
    }

    private static func freeSlots(_ slots: Slots) {
        slots.deinitialize(count: chunkSize)
        slots.deallocate()
    }

    /// Frees the chunks of the first `count` tables at `tables`, and deinitializes the tables.
    private static func free(_ tables: UnsafeMutablePointer<Table>, count: Int) {
        for table in UnsafeBufferPointer(start: tables, count: count) {
            for case let slots? in table.chunks { freeSlots(slots) }
            for slots in table.spares { freeSlots(slots) }
        }
        tables.deinitialize(count: count)
    }

    /// The table of `id`'s entity and store (made when `create`), or nil.
    @inline(__always)
    private mutating func table(of id: ManagedObjectID, create: Bool) -> UnsafeMutablePointer<Table>? {
        let negative = id.key < 0
        let space = id.spaceAddress
        if lastTable < tableCount, tables[lastTable].space == space, tables[lastTable].negative == negative {
            return tables + lastTable
        }
        return otherTable(space: space, negative: negative, create: create)
    }

    private mutating func otherTable(space: UnsafeMutableRawPointer, negative: Bool, create: Bool) -> UnsafeMutablePointer<Table>? {
        for index in 0..<tableCount where tables[index].space == space && tables[index].negative == negative {
            lastTable = index
            return tables + index
        }
        guard create else { return nil }
        if tableCount == tableCapacity {
            let grown = UnsafeMutablePointer<Table>.allocate(capacity: 2 * tableCapacity)
            grown.moveInitialize(from: tables, count: tableCount)
            tables.deallocate()
            tables = grown
            tableCapacity *= 2
        }
        (tables + tableCount).initialize(to: Table(space: space, negative: negative))
        lastTable = tableCount
        tableCount += 1
        return tables + lastTable
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
            if let (chunk, slot) = Self.place(of: id), let table = table(of: id, create: false), Self.spans(table, chunk),
               let slots = table.pointee.chunks[chunk - table.pointee.firstChunk], let found = slots[slot] {
                return found
            }
            return others.isEmpty ? nil : others[id]
        }
        set {
            // Values replaced or removed are released last, once the table is whole again: a
            // value's deinit may use the table (a managed object held by the registry ending
            // into code that looks up another object), and may make it grow, moving `tables`.
            if let (chunk, slot) = Self.place(of: id), let table = table(of: id, create: newValue != nil),
               newValue == nil ? Self.spans(table, chunk) : Self.reach(table, chunk) {
                // A key once put in the dictionary (out of the span then) leaves it.
                let moved = others.isEmpty ? nil : others.removeValue(forKey: id)
                defer { withExtendedLifetime(moved) {} }
                if moved != nil { count -= 1 }
                let position = chunk - table.pointee.firstChunk
                let slots: Slots
                if let held = table.pointee.chunks[position] {
                    slots = held
                } else {
                    guard newValue != nil else { return }
                    slots = table.pointee.spares.popLast() ?? Self.makeSlots()
                    table.pointee.chunks[position] = slots
                }
                let change = (newValue != nil ? 1 : 0) - (slots[slot] != nil ? 1 : 0)
                count += change
                table.pointee.filled[position] += Int32(change)
                let old = (slots + slot).move()
                (slots + slot).initialize(to: newValue)
                if table.pointee.filled[position] == 0 {
                    // Memory follows the values held, not the keys ever seen (a few emptied
                    // chunks are kept for reuse: their slots are all nil again).
                    table.pointee.chunks[position] = nil
                    if table.pointee.spares.count < Self.maximumSpares {
                        table.pointee.spares.append(slots)
                    } else {
                        // Every slot is nil, which holds nothing: no deinitializing (that went
                        // through the runtime's generic array destroy, slot by slot). This relies
                        // on `Optional.none` owning no resource, whatever `Value` is.
                        slots.deallocate()
                    }
                }
                withExtendedLifetime(old) {}
                return
            }
            let old: Value?
            if let newValue { old = others.updateValue(newValue, forKey: id) } else { old = others.removeValue(forKey: id) }
            count += (newValue != nil ? 1 : 0) - (old != nil ? 1 : 0)
        }
    }

    /// Whether `table` spans `chunk` now.
    private static func spans(_ table: UnsafeMutablePointer<Table>, _ chunk: Int) -> Bool {
        chunk >= table.pointee.firstChunk && chunk < table.pointee.firstChunk + table.pointee.chunks.count
    }

    /// Makes `table` span `chunk`; false when that would pass ``maximumSpan`` (the key then goes
    /// to the dictionary).
    private static func reach(_ table: UnsafeMutablePointer<Table>, _ chunk: Int) -> Bool {
        let first = table.pointee.firstChunk, end = first + table.pointee.chunks.count
        if chunk >= first && chunk < end { return true }
        if table.pointee.chunks.isEmpty {
            table.pointee.firstChunk = chunk
            table.pointee.chunks = [nil]
            table.pointee.filled = [0]
            return true
        }
        let newFirst = min(first, chunk), newEnd = max(end, chunk + 1)
        guard newEnd - newFirst <= maximumSpan else { return false }
        if chunk < first {
            table.pointee.chunks.insert(contentsOf: repeatElement(nil, count: first - chunk), at: 0)
            table.pointee.filled.insert(contentsOf: repeatElement(0, count: first - chunk), at: 0)
            table.pointee.firstChunk = chunk
        } else {
            table.pointee.chunks.append(contentsOf: repeatElement(nil, count: newEnd - end))
            table.pointee.filled.append(contentsOf: repeatElement(0, count: newEnd - end))
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
        for table in UnsafeBufferPointer(start: tables, count: tableCount) {
            for case let slots? in table.chunks {
                for case let value? in UnsafeBufferPointer(start: slots, count: Self.chunkSize) { result.append(value) }
            }
        }
        return result
    }

    /// The chunks allocated now (chunks left empty are freed).
    var allocatedChunks: Int {
        UnsafeBufferPointer(start: tables, count: tableCount).reduce(0) { $0 + $1.chunks.count { $0 != nil } }
    }

    /// Calls `body` with every value held (in no particular order).
    func forEachValue(_ body: (Value) throws -> Void) rethrows {
        for table in UnsafeBufferPointer(start: tables, count: tableCount) {
            for case let chunk? in table.chunks {
                for slot in 0..<Self.chunkSize { if let value = chunk[slot] { try body(value) } }
            }
        }
        for value in others.values { try body(value) }
    }

    /// Drops every value (released once the table is empty: their deinits may use it).
    mutating func removeAll() {
        let dropped = tables, droppedCount = tableCount
        let droppedOthers = others
        tables = .allocate(capacity: tableCapacity)
        tableCount = 0
        others = [:]
        lastTable = 0
        count = 0
        Self.free(dropped, count: droppedCount)
        dropped.deallocate()
        withExtendedLifetime(droppedOthers) {}
    }
}
