import ArborStore
import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// `NativeStore.forEachRow`: the rows `fetch` returns, in its order, handed over one at a time;
/// stopping where the window or the body says, reading no further.
@Suite("Streaming store reads")
struct StreamingFetchTests {
    /// Sixty people of the fetch model (every tenth an Employee, some without a name, an age or
    /// a score, a few scores NaN) in three teams, saved; seeded, so every run reads the same rows.
    static func people() throws -> (People, NativeStore, [ManagedObject]) {
        let people = try People()
        let teams = try ["Red", "Blue", "Green"].map { try people.stack.insert("Team", in: people.context, ["name": $0]) }
        var generator = SplitMix64(seed: 0x5EED_0025)
        let names = ["Ann", "bob", "Cid", "Dee", "Éva", "ann", "Zed", "Ola"]
        for serial in 1...60 {
            let roll = Int(generator.next() % 1_000)
            try people.person(serial, roll % 9 == 0 ? nil : names[roll % names.count] + "\(roll % 7)",
                              age: roll % 11 == 0 ? nil : 20 + roll % 21,
                              score: roll % 13 == 0 ? .nan : (roll % 5 == 0 ? nil : Double(roll % 17) / 2),
                              team: roll % 4 == 0 ? nil : teams[roll % 3],
                              entity: serial % 10 == 0 ? "Employee" : "Person")
        }
        try people.context.save()
        let store = try #require(people.stack.coordinator.persistentStores.first as? NativeStore)
        return (people, store, teams)
    }

    /// A fetch of `entity` with a predicate, an order and a window.
    static func request(_ format: String?, _ arguments: [Any?] = [], sort: [ObjectSortDescriptor] = [], offset: Int = 0, limit: Int = 0,
                        entity: String = "Person", subentities: Bool = true) throws -> StoreFetch {
        var request = StoreFetch(entityName: entity)
        request.predicate = try format.map { try ObjectPredicate(format: $0, argumentArray: arguments) }
        request.sortDescriptors = sort
        request.offset = offset
        request.limit = limit
        request.includesSubentities = subentities
        return request
    }

    /// Every row `forEachRow` hands over, in order.
    static func streamed(_ store: NativeStore, _ request: StoreFetch) throws -> [(ManagedObjectID, StoreRow)] {
        var rows: [(ManagedObjectID, StoreRow)] = []
        try store.forEachRow(request) { id, row in
            rows.append((id, row))
            return true
        }
        return rows
    }

    /// What each request is read by: a scan, an index range, and whether the store sorts after.
    enum Access: String { case scan, index }

    static let windows: [(offset: Int, limit: Int)] = [(0, 0), (0, 1), (0, 7), (3, 0), (3, 7), (59, 5), (100, 0)]

    @Test("the same rows in the same order as fetch: scans, index ranges (forwards and backwards), in-memory sorts, sub-entities, every window",
          arguments: [
              // Scans: every row; a filter on encoded values; a filter the evaluator decides.
              (nil, [], Access.scan, false),
              ("name ENDSWITH '3' OR age < 25", [], .scan, false),
              ("age + 1 > 30 AND score != nil", [], .scan, false),
              ("name ENDSWITH '1'", ["name"], .scan, true),
              // Index ranges: points, ranges, IN, a folded prefix, a unique tree, a foreign key.
              ("age == 25", [], .index, false),
              ("age > 30", [], .index, false),
              ("age BETWEEN {22, 30} AND name != nil", [], .index, false),
              ("age IN {21, 25, 33, 40}", [], .index, false),
              ("name BEGINSWITH[cd] 'a'", [], .index, false),
              ("serial == 7", [], .index, false),
              // The index gives the order (backwards for a descending sort; the whole index).
              ("score > 2", ["score:desc"], .index, false),
              ("age > 22", ["age"], .index, false),
              (nil, ["age:desc"], .index, false),
              // An index range, then a sort in memory.
              ("age >= 30", ["name", "serial:desc"], .index, true),
              (nil, ["score", "serial"], .scan, true),
          ] as [(String?, [String], Access, Bool)])
    func sameRowsAsFetch(_ case: (String?, [String], Access, Bool)) throws {
        let (format, keys, access, sorts) = `case`
        let (_, store, _) = try Self.people()
        let sort = keys.map { key in
            key.hasSuffix(":desc") ? ObjectSortDescriptor(key: String(key.dropLast(5)), ascending: false) : ObjectSortDescriptor(key: key)
        }
        for (entity, subentities) in [("Person", true), ("Person", false), ("Employee", true)] {
            for window in Self.windows {
                let request = try Self.request(format, sort: sort, offset: window.offset, limit: window.limit, entity: entity, subentities: subentities)
                let plan = try store.explain(request)
                switch plan.access {
                case .scan: #expect(access == .scan, "\(request): \(plan)")
                case .index: #expect(access == .index, "\(request): \(plan)")
                }
                #expect(plan.sort.isEmpty == !sorts, "\(request): \(plan)")
                let fetched = try store.fetch(request)
                let streamed = try Self.streamed(store, request)
                #expect(streamed.map(\.0) == fetched.map(\.0), "\(request): \(plan)")
                #expect(streamed.map(\.1) == fetched.map(\.1), "\(request)")
                #expect(try store.count(request) == fetched.count, "\(request)")
            }
        }
        // The cases read something, and the entity test is not vacuous.
        #expect(try !store.fetch(Self.request(format, sort: sort)).isEmpty)
    }

    @Test("an object argument (a to-one relationship's foreign-key tree) and a fetch of nothing")
    func foreignKeysAndNothing() throws {
        let (_, store, teams) = try Self.people()
        for window in Self.windows {
            let request = try Self.request("team == %@", [teams[1].objectID], offset: window.offset, limit: window.limit)
            guard case .index(let tree, _, _) = try store.explain(request).access else { Issue.record("not an index read"); return }
            #expect(tree == "fk.Person.team")
            #expect(try Self.streamed(store, request).map(\.0) == store.fetch(request).map(\.0))
        }
        #expect(try Self.streamed(store, Self.request("age IN {}")).isEmpty)
        #expect(try Self.streamed(store, Self.request("age > 100")).isEmpty)
        #expect(try Self.streamed(store, Self.request(nil, entity: "Team")).count == 3)
    }

    @Test("body returning false stops the read: the rows before it only, whatever the plan")
    func bodyStops() throws {
        let (_, store, _) = try Self.people()
        for request in [try Self.request(nil), try Self.request("age > 22", sort: [ObjectSortDescriptor(key: "age")], limit: 50),
                        try Self.request("age >= 21"), try Self.request(nil, sort: [ObjectSortDescriptor(key: "name")])] {
            let all = try store.fetch(request)
            for stop in [1, 2, 9] {
                var handed: [ManagedObjectID] = []
                try store.forEachRow(request) { id, _ in
                    handed.append(id)
                    return handed.count < stop
                }
                #expect(handed == Array(all.prefix(stop).map(\.0)), "\(request)")
            }
        }
    }

    /// Puts a row that cannot be read after every row of `rows.Person`, and an `age` index entry
    /// naming a row that does not exist after every other entry: a read that reaches either fails.
    static func damageTheEnds(of store: NativeStore) throws {
        try store.database.write { transaction in
            let rows = try #require(try transaction.tree(named: "rows.Person"))
            try rows.put(store.key(1_000_000), [0xFF, 0x00, 0x13])
            let ages = try #require(try transaction.tree(named: "index.Person.age"))
            try ages.put(KeyEncoding.encode([.int(99)]) + store.key(999_999), [])
        }
    }

    @Test("a limit, or body's false, ends the read there: a damaged row or index entry further on is never read")
    func readsNoFurther() throws {
        let (_, store, _) = try Self.people()
        try Self.damageTheEnds(of: store)
        let scan = try Self.request(nil)
        let byAge = try Self.request("age > 20", sort: [ObjectSortDescriptor(key: "age")])
        // Read whole, each reaches its damage.
        for request in [scan, byAge] {
            let error = try #require(throws: ArborError.self) { try Self.streamed(store, request) }
            #expect(error.code == .store, "\(error)")
        }
        for var request in [scan, byAge] {
            // Stopped by the limit: every row before the damage, exactly the limit handed over.
            request.limit = 30
            request.offset = 5
            var handed = 0
            try store.forEachRow(request) { _, _ in
                handed += 1
                return true
            }
            #expect(handed == 30)
            // Stopped by body.
            request.limit = 0
            request.offset = 0
            handed = 0
            try store.forEachRow(request) { _, _ in
                handed += 1
                return handed < 25
            }
            #expect(handed == 25)
        }
        // A sort made in memory must read every match first: the damage is reached, limit or not.
        var sorted = try Self.request(nil, sort: [ObjectSortDescriptor(key: "name")], limit: 1)
        #expect(try !store.explain(sorted).sort.isEmpty)
        #expect(throws: ArborError.self) { try store.forEachRow(sorted) { _, _ in false } }
        sorted.sortDescriptors = [ObjectSortDescriptor(key: "serial")]
        #expect(throws: ArborError.self) { try Self.streamed(store, sorted) }
    }

    struct Stop: Error, Equatable { let after: Int }

    @Test("an error thrown by body ends the read and comes out as it was thrown")
    func bodyThrows() throws {
        let (_, store, _) = try Self.people()
        var handed = 0
        #expect(throws: Stop(after: 3)) {
            try store.forEachRow(try Self.request(nil)) { _, _ in
                handed += 1
                if handed == 3 { throw Stop(after: 3) }
                return true
            }
        }
        #expect(handed == 3)
    }

    @Test("a negative window or an unknown entity is refused before anything is read")
    func refused() throws {
        let (_, store, _) = try Self.people()
        var negative = try Self.request(nil)
        negative.limit = -1
        #expect(throws: ArborError.self) { try store.forEachRow(negative) { _, _ in Issue.record("a row was read"); return true } }
        #expect(throws: ArborError.self) { try store.forEachRow(StoreFetch(entityName: "Nobody")) { _, _ in true } }
    }

    @Test("PersistentStore's default forEachRow (a store without its own) hands over fetch's rows and stops at false")
    func protocolDefault() throws {
        let (_, store, _) = try Self.people()
        let forwarding: any PersistentStore = FailingStore(store)
        let request = try Self.request("age > 25", sort: [ObjectSortDescriptor(key: "name")], offset: 2, limit: 20)
        var rows: [ManagedObjectID] = []
        try forwarding.forEachRow(request) { id, _ in
            rows.append(id)
            return rows.count < 10
        }
        #expect(rows == Array(try store.fetch(request).prefix(10).map(\.0)))
    }

    @Test("StoreFetch(whole:) is the store's fetch when rows answer the whole request, nil when objects are needed")
    func wholeRequests() throws {
        let (people, store, _) = try Self.people()
        let model = people.stack.model
        var request = try FetchRequest<ManagedObjectID>(entityName: "Person", format: "age > 25 AND name BEGINSWITH 'A'")
        request.sortDescriptors = [ObjectSortDescriptor(key: "name")]
        request.fetchOffset = 2
        request.fetchLimit = 5
        let whole = try #require(try StoreFetch(whole: request, model: model))
        #expect(whole.predicate == request.predicate && whole.sortDescriptors == request.sortDescriptors)
        #expect(whole.offset == 2 && whole.limit == 5 && whole.includesSubentities)
        // The context's fetch of the same request: the same objects, in the same order.
        #expect(try Self.streamed(store, whole).map(\.0) == people.context.fetch(request))
        // A join through a to-one key path, and a sort by one, are the store's too (issue 26); a
        // key path compared with another, and a transient, are not.
        var joined = try FetchRequest<ManagedObjectID>(entityName: "Person", format: "team.name == 'Red'")
        joined.sortDescriptors = [ObjectSortDescriptor(key: "team.name")]
        #expect(try StoreFetch(whole: joined, model: model) != nil)
        for (format, sort) in [("team.name == name", "name"), ("note == 'x'", "name")] {
            var partial = try FetchRequest<ManagedObjectID>(entityName: "Person", format: format)
            partial.sortDescriptors = [ObjectSortDescriptor(key: sort)]
            #expect(try StoreFetch(whole: partial, model: model) == nil, "\(format), \(sort)")
        }
        #expect(throws: ArborError.self) { try StoreFetch(whole: FetchRequest<ManagedObjectID>(entityName: "Person", format: "height > 3"), model: model) }
    }
}
