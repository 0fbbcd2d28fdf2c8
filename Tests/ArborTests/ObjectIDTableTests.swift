import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// The table behind the registry and the row cache, against a dictionary doing the same.
@Suite("Object ID tables")
struct ObjectIDTableTests {
    @Test("random sets, removals and lookups agree with a dictionary: several entities and stores, temporary IDs, sparse keys")
    func agreesWithDictionary() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SplitMix64(seed: seed)
        let stores = [UUID(), UUID()]
        let entities = ["Employee", "Department", "A very long entity name, past the small-string size"]
        func randomID() -> ManagedObjectID {
            let entity = entities[Int(random.next() % UInt64(entities.count))]
            switch random.next() % 12 {
            case 0: return ManagedObjectID(temporaryFor: entity)
            case 1: return ManagedObjectID(entityName: entity, store: stores[0], key: Int64(random.next() % 5_000_000) + 1)
            // Keys far apart (past a table's span: some go to the dictionary, then their table
            // may come to span them), and the largest.
            case 2: return ManagedObjectID(entityName: entity, store: stores[1], key: Int64(random.next() % 40_000_000_000) + 1)
            case 3: return ManagedObjectID(entityName: entity, store: stores[1], key: [Int64.max, Int64.max - 1, 1][Int(random.next() % 3)])
            default:
                let store = stores[Int(random.next() % 2)]
                return ManagedObjectID(entityName: entity, store: store, key: Int64(random.next() % 3000) + 1)
            }
        }
        var table = ObjectIDTable<Int>()
        var model: [ManagedObjectID: Int] = [:]
        var known: [ManagedObjectID] = []
        for step in 0..<20_000 {
            let id = known.isEmpty || random.next() % 3 == 0 ? randomID() : known[Int(random.next() % UInt64(known.count))]
            known.append(id)
            switch random.next() % 4 {
            case 0:
                table[id] = nil
                model[id] = nil
            case 1:
                let made = table.value(for: id) { step }
                #expect(made == model[id, default: step], "seed \(seed)")
                model[id] = made
            default:
                table[id] = step
                model[id] = step
            }
            #expect(table[id] == model[id], "seed \(seed), step \(step)")
            #expect(table.count == model.count, "seed \(seed), step \(step)")
        }
        for id in known { #expect(table[id] == model[id], "seed \(seed)") }
        #expect(table.values.sorted() == model.values.sorted(), "seed \(seed)")
        table.removeAll()
        #expect(table.count == 0 && table.values.isEmpty && known.allSatisfy { table[$0] == nil })
    }

    @Test("IDs of one key in another entity or store are other entries")
    func keysAreScopedByEntityAndStore() {
        let a = UUID(), b = UUID()
        var table = ObjectIDTable<String>()
        table[ManagedObjectID(entityName: "Employee", store: a, key: 7)] = "employee in a"
        table[ManagedObjectID(entityName: "Manager", store: a, key: 7)] = "manager in a"
        table[ManagedObjectID(entityName: "Employee", store: b, key: 7)] = "employee in b"
        #expect(table[ManagedObjectID(entityName: "Employee", store: a, key: 7)] == "employee in a")
        #expect(table[ManagedObjectID(entityName: "Manager", store: a, key: 7)] == "manager in a")
        #expect(table[ManagedObjectID(entityName: "Employee", store: b, key: 7)] == "employee in b")
        #expect(table[ManagedObjectID(entityName: "Employee", store: a, key: 8)] == nil)
        #expect(table.count == 3)
        // A negative key (a temporary ID's) never shares a slot with the positive one, whatever
        // namespace the ID names (a URI can name any).
        table[ManagedObjectID(entityName: "Employee", store: a, key: -7)] = "negative in a"
        #expect(table[ManagedObjectID(entityName: "Employee", store: a, key: 7)] == "employee in a")
        #expect(table[ManagedObjectID(entityName: "Employee", store: a, key: -7)] == "negative in a")
        #expect(table.count == 4)
    }

    @Test("a chunk left empty is freed: memory follows the values held, not the keys ever seen")
    func emptyChunksAreFreed() {
        let store = UUID()
        var table = ObjectIDTable<Int>()
        let ids = (1...10_000).map { ManagedObjectID(entityName: "Employee", store: store, key: Int64($0)) }
        for (value, id) in ids.enumerated() { table[id] = value }
        #expect(table.allocatedChunks >= 10_000 / 256)
        for id in ids.prefix(5_000) { table[id] = nil }
        #expect(table.allocatedChunks <= 5_000 / 256 + 2 && table.count == 5_000)
        for id in ids.suffix(5_000) { table[id] = nil }
        #expect(table.allocatedChunks == 0 && table.count == 0)
        table[ids[42]] = 1
        #expect(table[ids[42]] == 1 && table.count == 1)
    }

    final class Tracked {}

    @Test("the table owns its memory: removing a value, emptying it, and dropping it each release what it held")
    func valuesAreReleased() {
        let store = UUID()
        let ids = (1...1_000).map { ManagedObjectID(entityName: "Employee", store: store, key: Int64($0 * 3)) }
        var watched: [() -> Bool] = []
        func fill(_ table: inout ObjectIDTable<Tracked>) {
            for id in ids {
                let value = Tracked()
                weak let weakValue = value
                watched.append { weakValue == nil }
                table[id] = value
            }
            // A key far outside the table's span, kept in its dictionary.
            let far = Tracked()
            weak let weakFar = far
            watched.append { weakFar == nil }
            table[ManagedObjectID(entityName: "Employee", store: store, key: 40_000_000_000)] = far
        }
        do {
            var table = ObjectIDTable<Tracked>()
            fill(&table)
            #expect(watched.allSatisfy { !$0() })
            table[ids[0]] = nil
            #expect(watched[0]())
            table[ids[1]] = Tracked()
            #expect(watched[1]())
            table.removeAll()
            #expect(watched.allSatisfy { $0() } && table.count == 0)
            watched = []
            fill(&table)
            #expect(watched.allSatisfy { !$0() })
        }
        #expect(watched.allSatisfy { $0() })
    }

    /// A table whose values may use it as they end (as a managed object held by the registry
    /// may end into code that looks up another object).
    final class Box {
        @exclusivity(unchecked) var table = ObjectIDTable<Ending>()
    }

    final class Ending {
        var onEnd: (() -> Void)?
        deinit { onEnd?() }
    }

    @Test("a value released by the table may use the table as it ends: the value it sets is kept, in the same chunk, in a table made then, and after removeAll")
    func valuesEndingIntoTheTable() {
        let store = UUID()
        func id(_ entity: String, _ key: Int64) -> ManagedObjectID { ManagedObjectID(entityName: entity, store: store, key: key) }
        let box = Box()
        func ending(_ onEnd: @escaping () -> Void) -> Ending {
            let value = Ending()
            value.onEnd = onEnd
            return value
        }
        // The last value of a chunk, replaced by nil, sets another key of that chunk as it ends.
        box.table[id("Employee", 1)] = ending { box.table[id("Employee", 2)] = Ending() }
        box.table[id("Employee", 1)] = nil
        #expect(box.table[id("Employee", 2)] != nil && box.table.count == 1)
        // A value replaced makes tables of four other entities as it ends (the table list grows).
        box.table[id("Employee", 3)] = ending { for name in ["A", "B", "C", "D"] { box.table[id(name, 7)] = Ending() } }
        box.table[id("Employee", 3)] = Ending()
        #expect(["A", "B", "C", "D"].allSatisfy { box.table[id($0, 7)] != nil } && box.table.count == 6)
        // Values dropped by removeAll set a key as they end: the table is empty by then.
        box.table[id("Employee", 5)] = ending { box.table[id("Employee", 9)] = Ending() }
        box.table.removeAll()
        #expect(box.table[id("Employee", 9)] != nil && box.table.count == 1)
    }

    @Test("an ID mapping of a run of temporary IDs maps each of the run, and nothing else, without a table; its dictionary lists the run's pairs")
    func idMappingRun() {
        let store = UUID()
        // A run of serial numbers across two entities (each ID's entity is kept in the
        // dictionary's old IDs).
        let entities = ["Department", "Employee", "Employee", "Department", "Employee"]
        // Serial numbers far past any this process hands out, so that tests running alongside
        // take none of them.
        func temporary(_ entity: String, serial: Int64) -> ManagedObjectID {
            ManagedObjectID(space: ObjectIDSpace.interned(entity, ManagedObjectID.temporaryNamespace), key: -serial)
        }
        let old = entities.enumerated().map { temporary($1, serial: 1 << 40 + Int64($0)) }
        let first = old[0]
        #expect(old.allSatisfy { $0.isTemporaryID })
        let new = entities.enumerated().map { ManagedObjectID(entityName: $1, store: store, key: Int64(100 + $0)) }
        let mapping = IDMapping(run: first, new: new)
        let outside = temporary("Employee", serial: 1 << 40 + 10)
        let added = ManagedObjectID(entityName: "Employee", store: store, key: 7)
        mapping.add(outside, added)
        #expect(mapping.count == 6 && !mapping.isEmpty)
        for (o, n) in zip(old, new) { #expect(mapping[o] == n) }
        #expect(mapping[outside] == added, "a pair past the run is in the table")
        // Neither a permanent ID, nor a temporary ID of another namespace with a key in the run.
        #expect(mapping[new[0]] == nil)
        let foreign = ManagedObjectID(space: ObjectIDSpace.interned("Employee", UUID()), key: old[1].key)
        #expect(mapping[foreign] == nil)
        #expect(mapping[ManagedObjectID(space: ObjectIDSpace.interned("Employee", first.namespace), key: first.key + 1)] == nil,
                "a serial number before the run")
        var expected = Dictionary(uniqueKeysWithValues: zip(old, new))
        expected[outside] = added
        #expect(mapping.dictionary == expected)
    }
}
