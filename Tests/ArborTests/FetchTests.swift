import ArborTestSupport
import ArborStore
import Foundation
import Testing
@testable import Arbor

/// People in teams, with indexes (plain, folded, unique) to plan fetches with.
func fetchModel(indexed: Bool = true) throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Team") {
            Attribute("name", .string).required()
            Relationship("members", to: "Person", inverse: "team").toMany()
            if indexed { Unique("name") }
        }
        Entity("Person") {
            Attribute("serial", .integer64).required()
            Attribute("name", .string)
            Attribute("age", .integer32)
            Attribute("score", .double)
            Attribute("born", .date)
            Attribute("active", .boolean).defaultValue(false)
            Attribute("note", .string).transient()
            Relationship("team", to: "Team", inverse: "members")
            if indexed {
                Indexed("age")
                Indexed("name", caseInsensitive: true)
                Indexed("score")
                Indexed("born")
                Unique("serial")
            }
        }
        Entity("Employee", parent: "Person") {
            Attribute("salary", .integer64)
        }
    }
}

/// A stack on the fetch model, with helpers to make people.
struct People {
    let stack: Stack
    let context: ManagedObjectContext

    init(indexed: Bool = true, rowLayout: RowFormat.Layout? = nil) throws {
        stack = try Stack(model: fetchModel(indexed: indexed), rowLayout: rowLayout)
        context = stack.context()
    }

    @discardableResult
    func person(_ serial: Int, _ name: String?, age: Int? = nil, score: Double? = nil, team: ManagedObject? = nil,
                entity: String = "Person", in context: ManagedObjectContext? = nil) throws -> ManagedObject {
        var values: [String: Any] = ["serial": Int64(serial)]
        if let name { values["name"] = name }
        if let age { values["age"] = Int32(age) }
        if let score { values["score"] = score }
        if let team { values["team"] = team }
        return try stack.insert(entity, in: context ?? self.context, values)
    }

    func fetch(_ format: String? = nil, _ arguments: Any?..., sort: [ObjectSortDescriptor] = [], in context: ManagedObjectContext? = nil,
               configure: (inout FetchRequest<ManagedObject>) -> Void = { _ in }) throws -> [ManagedObject] {
        var request = FetchRequest<ManagedObject>(entityName: "Person")
        if let format { request.predicate = try ObjectPredicate(format: format, argumentArray: arguments) }
        request.sortDescriptors = sort
        configure(&request)
        return try (context ?? self.context).fetch(request)
    }

    func serials(_ objects: [ManagedObject]) throws -> [Int64] {
        try objects.map { try #require($0.value(forKey: "serial") as? Int64) }
    }
}

@Suite("Fetch requests")
struct FetchTests {
    /// Five saved people, two teams.
    func saved() throws -> People {
        let people = try People()
        let red = try people.stack.insert("Team", in: people.context, ["name": "Red"])
        let blue = try people.stack.insert("Team", in: people.context, ["name": "Blue"])
        try people.person(1, "Ann", age: 31, score: 2.5, team: red)
        try people.person(2, "bob", age: 25, score: 1.0, team: red)
        try people.person(3, "Cid", age: 40, team: blue)
        try people.person(4, "Dee", age: 25, score: 9.0, entity: "Employee")
        try people.person(5, nil, age: nil, score: .nan)
        try people.context.save()
        return people
    }

    @Test("item 6: an index that names one row twice (damaged) makes one snapshot reference per object: none is left when the objects go")
    func damagedIndexLeaksNoSnapshot() throws {
        let people = try saved()
        let store = try #require(people.stack.coordinator.persistentStores.first as? NativeStore)
        let annID = try #require(try people.fetch("serial == 1").first).objectID
        let key = try store.primaryKey(of: annID)
        let entity = try #require(people.stack.model.entity(named: "Person"))
        let ageIndex = try #require(NativeStore.indexes(of: entity).first { $0.keys == ["age"] })
        // A second entry for Ann's row, under an age she does not have.
        try store.database.write { transaction in
            try #require(try transaction.tree(named: ageIndex.tree)).put(KeyEncoding.encode([.int(32)]) + store.key(key), [])
        }
        #expect(people.stack.coordinator.rowCacheStatistics.snapshots == 0, "nothing holds a row")
        do {
            let reader = people.stack.context()
            let fetched = try people.fetch("age BETWEEN {31, 32}", in: reader)
            #expect(!fetched.isEmpty && fetched.allSatisfy { $0.objectID == annID })
            #expect(Set(fetched.map(ObjectIdentifier.init)).count == 1, "one instance per object ID")
            #expect(people.stack.coordinator.rowCacheStatistics.snapshots == 1, "one snapshot for Ann's row")
            #expect(try fetched[0].value(forKey: "name") as? String == "Ann")
        }
        #expect(people.stack.coordinator.rowCacheStatistics.snapshots == 0, "no reference was left behind")
    }

    @Test("S000-18: no match is an empty array, not an error")
    func noMatch() throws {
        let people = try saved()
        #expect(try people.fetch("age > 100").isEmpty)
    }

    @Test("S000-19/S000-20: no predicate returns every instance, and every object returned is registered")
    func everyInstance() throws {
        let people = try saved()
        let other = people.stack.context()
        let all = try people.fetch(in: other)
        #expect(try Set(people.serials(all)) == [1, 2, 3, 4, 5])
        for object in all { #expect(other.registeredObject(for: object.objectID) === object) }
        #expect(!all.contains { $0.objectID.isTemporaryID }, "S000-03: fetched objects have permanent IDs")
    }

    @Test("S000-21: a pending insert that matches is returned, in its own context only; S002-14")
    func pendingInserts() throws {
        let people = try saved()
        let new = try people.person(6, "Eve", age: 50)
        #expect(try people.fetch("age >= 40").contains { $0 === new })
        #expect(try !people.fetch("age < 40").contains { $0 === new })
        let other = people.stack.context()
        #expect(try people.serials(people.fetch("age >= 40", in: other)).sorted() == [3], "not in another context")
    }

    @Test("S000-22/S000-23: a changed object is judged by its in-memory values, both ways")
    func modifiedObjects() throws {
        let people = try saved()
        let bob = try #require(people.fetch("serial == 2").first)
        let cid = try #require(people.fetch("serial == 3").first)
        try bob.setValue(Int32(45), forKey: "age")   // stored 25: now matches age > 30
        try cid.setValue(Int32(20), forKey: "age")   // stored 40: no longer matches
        let older = try people.fetch("age > 30")
        #expect(older.contains { $0 === bob }, "S000-22: the store's row does not match, the object does")
        #expect(!older.contains { $0 === cid }, "S000-23: the store's row matches, the object does not")
        #expect(try people.context.count(for: request("age > 30")) == older.count)
    }

    @Test("S000-24: a deleted object is never returned (nor counted) before the save")
    func pendingDeletes() throws {
        let people = try saved()
        let ann = try #require(people.fetch("serial == 1").first)
        people.context.delete(ann)
        #expect(try !people.fetch().contains { $0 === ann })
        #expect(try people.context.count(for: request(nil)) == 4)
        #expect(try people.fetch("name == 'Ann'").isEmpty)
    }

    @Test("S000-25/S002-31: a fetch returns the registered instances with their in-memory state, even after another context saved")
    func realizedObjectsKeepState() throws {
        let people = try saved()
        let ann = try #require(people.fetch("serial == 1").first)
        #expect(try ann.value(forKey: "name") as? String == "Ann")
        let other = people.stack.context()
        let otherAnn = try #require(people.fetch("serial == 1", in: other).first)
        try otherAnn.setValue("Anna", forKey: "name")
        try other.save()
        let again = try people.fetch("serial == 1")
        #expect(again.first === ann, "the same instance")
        #expect(try ann.value(forKey: "name") as? String == "Ann", "S002-31: not the newly committed value")
        // An unsaved change survives a fetch that returns a superset.
        try ann.setValue(Int32(99), forKey: "age")
        _ = try people.fetch()
        #expect(try ann.value(forKey: "age") as? Int32 == 99 && ann.isUpdated)
    }

    @Test("S000-08: count(for:) equals the number fetch returns, pending changes and windows included")
    func countMatchesFetch() throws {
        let people = try saved()
        try people.person(6, "Eve", age: 25)
        let bob = try #require(people.fetch("serial == 2").first)
        people.context.delete(bob)
        for format in [nil, "age == 25", "age > 20 AND name BEGINSWITH 'D'", "team.name == 'Red'", "score > 1"] as [String?] {
            for (offset, limit) in [(0, 0), (1, 2), (0, 1)] {
                var r = try request(format)
                r.fetchOffset = offset
                r.fetchLimit = limit
                #expect(try people.context.count(for: r) == people.context.fetch(r).count, "\(format ?? "all") \(offset) \(limit)")
            }
        }
    }

    @Test("S004-17: refetching with IN over saved IDs returns only the rows that still exist")
    func refetchByIDs() throws {
        let people = try saved()
        let all = try people.fetch()
        let ids = all.map(\.objectID)
        let other = people.stack.context()
        let gone = try #require(people.fetch("serial == 4", in: other).first)
        other.delete(gone)
        try other.save()
        let fresh = people.stack.context()
        let refetched = try people.fetch("SELF IN %@", ids, in: fresh)
        #expect(try Set(people.serials(refetched)) == [1, 2, 3, 5])
    }

    @Test("sort descriptors: several keys, descending, case-insensitive, through a to-one relationship; nil first ascending and last descending")
    func sorting() throws {
        let people = try saved()
        func order(_ sort: [ObjectSortDescriptor], _ format: String? = nil) throws -> [Int64] {
            let context = people.stack.context()
            return try people.serials(people.fetch(format, sort: sort, in: context))
        }
        #expect(try order([ObjectSortDescriptor(key: "name")]) == [5, 1, 3, 4, 2], "nil first; then scalar order: uppercase before lowercase")
        #expect(try order([ObjectSortDescriptor(key: "name", options: .caseInsensitive)]) == [5, 1, 2, 3, 4])
        #expect(try order([ObjectSortDescriptor(key: "name", ascending: false)]) == [2, 4, 3, 1, 5], "nil last descending")
        #expect(try order([ObjectSortDescriptor(key: "age"), ObjectSortDescriptor(key: "serial", ascending: false)]) == [5, 4, 2, 1, 3])
        #expect(try order([ObjectSortDescriptor(key: "team.name"), ObjectSortDescriptor(key: "serial")]) == [4, 5, 3, 1, 2])
        #expect(try order([ObjectSortDescriptor(key: "score")]) == [3, 2, 1, 4, 5], "nil first, NaN after every number")
        // Pending changes are sorted with the rest.
        let eve = try people.person(0, "Aaron", age: 1)
        #expect(try people.fetch(sort: [ObjectSortDescriptor(key: "age")]).dropFirst().first === eve)
        // Arrays of values and dictionaries sort the same way.
        #expect(try [["n": "b"], ["n": nil], ["n": "a"]].sorted(by: [ObjectSortDescriptor(key: "n")]).map { $0["n"] ?? nil } == [nil, "a", "b"])
    }

    @Test("fetchLimit and fetchOffset, with and without pending changes")
    func windows() throws {
        let people = try saved()
        let byAge = [ObjectSortDescriptor(key: "serial")]
        #expect(try people.serials(people.fetch(sort: byAge) { $0.fetchLimit = 2; $0.fetchOffset = 1 }) == [2, 3])
        try people.person(0, "Zed", age: 1)
        #expect(try people.serials(people.fetch(sort: byAge) { $0.fetchLimit = 2 }) == [0, 1])
        #expect(try people.serials(people.fetch(sort: byAge) { $0.fetchOffset = 5 }) == [5])
    }

    @Test("result types: object IDs, count, dictionaries with aggregates, grouping, having and distinct results")
    func resultTypes() throws {
        let people = try saved()
        let ids = try people.context.fetch(FetchRequest<ManagedObjectID>(entityName: "Person", format: "age == 25"))
        #expect(ids.count == 2 && ids.allSatisfy { $0.entityName == "Person" || $0.entityName == "Employee" })
        #expect(try people.context.fetch(FetchRequest<Int>(entityName: "Person", format: "age == 25")) == [2])

        var names = try FetchRequest<[String: Any]>(entityName: "Person", format: "age != nil")
        names.propertiesToFetch = [.key("name"), .key("team.name")]
        names.sortDescriptors = [ObjectSortDescriptor(key: "serial")]
        let rows = try people.context.fetch(names)
        #expect(rows.map { $0["name"] as? String } == ["Ann", "bob", "Cid", "Dee"])
        #expect(rows.map { $0["team.name"] as? String } == ["Red", "Red", "Blue", nil])

        var byAge = try FetchRequest<[String: Any]>(entityName: "Person", format: "age != nil")
        byAge.propertiesToGroupBy = ["age"]
        byAge.propertiesToFetch = [.key("age"), .aggregate(.count, of: "serial", as: "people"), .aggregate(.max, of: "score", as: "best")]
        byAge.sortDescriptors = [ObjectSortDescriptor(key: "age")]
        byAge.havingPredicate = try ObjectPredicate(format: "people > 1")
        let groups = try people.context.fetch(byAge)
        #expect(groups.count == 1 && groups[0]["age"] as? Int64 == 25 && groups[0]["people"] as? Int64 == 2 && groups[0]["best"] as? Double == 9)

        var total = FetchRequest<[String: Any]>(entityName: "Person")
        total.propertiesToFetch = [.aggregate(.sum, of: "age", as: "years"), .aggregate(.average, of: "age", as: "mean")]
        let sums = try people.context.fetch(total)
        #expect(sums.count == 1 && sums[0]["years"] as? Int64 == 121 && sums[0]["mean"] as? Double == 30.25)

        var distinct = try FetchRequest<[String: Any]>(entityName: "Person", format: "age != nil")
        distinct.propertiesToFetch = [.key("age")]
        distinct.returnsDistinctResults = true
        #expect(try people.context.fetch(distinct).count == 3)
    }

    @Test("includesSubentities, includesPendingChanges, returnsObjectsAsFaults and prefetching")
    func options() throws {
        let people = try saved()
        #expect(try people.serials(people.fetch { $0.includesSubentities = false }).sorted() == [1, 2, 3, 5])
        var employees = FetchRequest<ManagedObject>(entityName: "Employee")
        employees.predicate = try ObjectPredicate(format: "age == 25")
        #expect(try people.context.fetch(employees).count == 1)

        try people.person(9, "New", age: 25)
        #expect(try people.fetch("age == 25") { $0.includesPendingChanges = false }.count == 2)
        #expect(try people.fetch("age == 25").count == 3)

        let fresh = people.stack.context()
        let faults = try people.fetch("serial < 3", in: fresh)
        #expect(faults.allSatisfy { $0.isFault }, "returned as faults, rows in the row cache")
        let hits = people.stack.coordinator.rowCacheStatistics.hits
        #expect(try faults[0].value(forKey: "name") != nil && people.stack.coordinator.rowCacheStatistics.hits == hits + 1)
        let realized = try people.fetch("serial < 3", in: people.stack.context()) { $0.returnsObjectsAsFaults = false }
        #expect(realized.allSatisfy { !$0.isFault })

        let prefetching = people.stack.context()
        let members = try people.fetch("serial == 1", in: prefetching) { $0.relationshipKeyPathsForPrefetching = ["team"] }
        let team = try #require(members.first.flatMap { $0.values["team"]?.objectIDs.first }.flatMap { prefetching.registeredObject(for: $0) })
        #expect(!team.isFault)
    }

    @Test("prefetching a to-many key path loads it for every fetched object, faults included (their rows and the relationship read for all at once), with the destinations each has")
    func prefetchToMany() throws {
        let people = try People()
        var teams: [ManagedObject] = []
        for index in 0..<4 { teams.append(try people.stack.insert("Team", in: people.context, ["name": "T\(index)"])) }
        for serial in 1...30 { try people.person(serial, "P\(serial)", team: serial % 5 == 0 ? nil : teams[serial % 4], entity: serial % 7 == 0 ? "Employee" : "Person") }
        try people.context.save()
        let fresh = people.stack.context()
        var request = FetchRequest<ManagedObject>(entityName: "Team")
        request.relationshipKeyPathsForPrefetching = ["members"]
        let fetched = try fresh.fetch(request)
        #expect(fetched.count == 4)
        for team in fetched {
            #expect(!team.isFault && !team.unloadedRelationships.contains("members"), "loaded by the prefetch")
            let name = try #require(team.value(forKey: "name") as? String)
            let index = try #require(Int(name.dropFirst()))
            let serials = try (team.value(forKey: "members") as? Set<ManagedObject> ?? []).map { try #require($0.value(forKey: "serial") as? Int64) }.sorted()
            #expect(serials == (1...30).filter { $0 % 5 != 0 && $0 % 4 == index }.map(Int64.init), "\(name)")
        }
    }

    @Test("fetchBatchSize: results are faults whose rows load a batch at a time, as they are used")
    func batches() throws {
        let people = try People()
        for serial in 1...25 { try people.person(serial, "P\(serial)", age: serial) }
        try people.context.save()
        let fresh = people.stack.context()
        let coordinator = people.stack.coordinator
        let before = coordinator.rowCacheStatistics.snapshots
        let results = try people.fetch(sort: [ObjectSortDescriptor(key: "serial")], in: fresh) { $0.fetchBatchSize = 10 }
        #expect(results.count == 25 && results.allSatisfy { $0.isFault })
        #expect(coordinator.rowCacheStatistics.snapshots == before, "no rows held yet")
        #expect(try results[12].value(forKey: "serial") as? Int64 == 13)
        #expect(coordinator.rowCacheStatistics.snapshots == before + 10, "the second batch (11…20) was loaded")
        #expect(results[10].isFault && results[10].snapshot != nil && results[9].snapshot == nil)
        #expect(try people.serials(results) == Array(1...25), "every batch loads when used, in order")
        #expect(coordinator.rowCacheStatistics.snapshots == before + 25)
    }

    @Test("a to-many relationship's faults load their rows together, a batch of 256 at a time, when the first of a batch fires; one deleted meanwhile fires as an inaccessible fault")
    func relationshipBatches() throws {
        let people = try People()
        let team = try people.stack.insert("Team", in: people.context, ["name": "Big"])
        for serial in 1...300 { try people.person(serial, "P\(serial)", team: team, entity: serial % 7 == 0 ? "Employee" : "Person") }
        try people.context.save()
        let coordinator = people.stack.coordinator
        let fresh = people.stack.context()
        let big = try #require(try fresh.fetch(FetchRequest<ManagedObject>(entityName: "Team")).first)
        let members = try #require(try big.value(forKey: "members") as? Set<ManagedObject>)
        #expect(members.count == 300 && members.allSatisfy { $0.isFault && $0.snapshot == nil && $0.faultBatch != nil })
        // Another context deletes one member before any fires.
        let gone = try #require(members.first { $0.objectID.entityName == "Person" })
        do {
            let other = people.stack.context()
            try other.delete(other.existingObject(with: gone.objectID))
            try other.save()
        }
        let before = coordinator.rowCacheStatistics.snapshots
        let some = try #require(members.first { $0 !== gone })
        _ = try some.value(forKey: "serial")
        let first = coordinator.rowCacheStatistics.snapshots - before
        #expect(first == 256 || first == 255 || first == 299 - 256 || first == 300 - 256, "one batch loaded (\(first) rows)")
        var serials: [Int64] = []
        for member in members where member !== gone { serials.append(try #require(member.value(forKey: "serial") as? Int64)) }
        #expect(Set(serials).count == 299 && serials.allSatisfy { (1...300).contains($0) })
        #expect(coordinator.rowCacheStatistics.snapshots - before == 299, "every row read once, in two batches")
        // The member deleted meanwhile fires as any inaccessible fault does (shouldDeleteInaccessibleFaults).
        #expect(try gone.value(forKey: "serial") == nil && gone.isDeleted)
        // A relationship set's objects batch the same way.
        let again = people.stack.context()
        let bigAgain = try #require(try again.fetch(FetchRequest<ManagedObject>(entityName: "Team")).first)
        let objects = try bigAgain.mutableSetValue(forKey: "members").objects
        #expect(objects.count == 299 && objects.allSatisfy { $0.faultBatch != nil })
        _ = try objects[0].value(forKey: "serial")
        #expect(objects.filter { $0.snapshot != nil }.count == 256 || objects.filter { $0.snapshot != nil }.count == 299 - 256)
    }

    @Test("a model rebuilt from the schema a store keeps has the same version hashes")
    func storedSchema() throws {
        let directory = try temporaryDirectory()
        let path = directory + "/people.arbor"
        let stack = try Stack(model: fetchModel(), path: path)
        _ = stack
        let stored = try ManagedObjectModel.stored(in: path)
        #expect(stored.versionHash == stack.model.versionHash)
        #expect(stored.entities.map(\.versionHash) == stack.model.entities.map(\.versionHash))
        #expect(try ModelSchema(employeeModel()).model().versionHash == employeeModel().versionHash)
        #expect(try ModelSchema(typedModel()).model().versionHash == typedModel().versionHash)
        struct Note: Codable, Sendable, Equatable { var text: String }
        let transformable = try ManagedObjectModel { Entity("N") { Attribute("note", .transformable(Note.self)) } }
        #expect(try ModelSchema(transformable).model().versionHash == transformable.versionHash)
    }

    @Test("typed requests return subclass instances; a request whose results are not its type is a typed error")
    func typedRequests() throws {
        let stack = try Stack(model: typedModel())
        let context = stack.context()
        let sales = Department(entity: stack.model.entity(named: "Department")!, insertInto: context)
        sales.name = "Sales"
        try context.save()
        let fresh = stack.context()
        let departments: [Department] = try fresh.fetch(FetchRequest<Department>())
        #expect(departments.count == 1 && departments[0].name == "Sales")
        var wrong = FetchRequest<Employee>(entityName: "Department")
        wrong.resultType = .managedObject
        #expect(arborErrorCode { try fresh.fetch(wrong) } == .invalidFetchRequest)
    }

    @Test("an unknown entity or key, or a constant of the wrong type, is invalidFetchRequest or unknownKey at fetch time")
    func errors() throws {
        let people = try saved()
        #expect(arborErrorCode { try people.context.fetch(FetchRequest<ManagedObject>(entityName: "Nope")) } == .invalidFetchRequest)
        #expect(arborErrorCode { try people.fetch("height > 3") } == .unknownKey)
        #expect(arborErrorCode { try people.fetch("team.colour == 'red'") } == .unknownKey)
        #expect(arborErrorCode { try people.fetch("age == 'old'") } == .invalidFetchRequest)
        #expect(arborErrorCode { try people.fetch("age BEGINSWITH '3'") } == .invalidFetchRequest)
        #expect(arborErrorCode { try people.fetch("name.length == 3") } == .unknownKey)
        #expect(arborErrorCode { try people.fetch("age > $x") } == .invalidFetchRequest)
        #expect(arborErrorCode { try people.fetch(sort: [ObjectSortDescriptor(key: "nope")]) } == .invalidFetchRequest)
        #expect(arborErrorCode { try people.fetch("age IN {1, 'x'}") } == .invalidFetchRequest, "every element of a list is checked")
        #expect(arborErrorCode { try people.fetch("age BETWEEN {1, 'x'}") } == .invalidFetchRequest)
        // The checks refuse only what is wrong.
        #expect((try? people.fetch("name BEGINSWITH 'A' OR name LIKE '*n' OR age IN {1, 2} OR age == 3.5 OR age == TRUE")) != nil)
        do {
            _ = try people.fetch("age == 'old'")
        } catch let error as ArborError {
            #expect(error.message.contains("Person.age is integer32") && error.key == "age")
        }
        do {
            _ = try people.fetch("height > 3")
        } catch let error as ArborError {
            #expect(error.message.contains("the predicate's key path height") && error.key == "height", "\(error.message)")
        }
    }

    @Test("key paths through relationships, ANY/ALL/NONE, SUBQUERY and @count run in memory after the store")
    func relationshipPredicates() throws {
        let people = try saved()
        var teams = FetchRequest<ManagedObject>(entityName: "Team")
        teams.sortDescriptors = [ObjectSortDescriptor(key: "name")]
        func names(_ format: String) throws -> [String] {
            teams.predicate = try ObjectPredicate(format: format)
            return try people.context.fetch(teams).map { try #require($0.value(forKey: "name") as? String) }
        }
        #expect(try names("members.@count == 2") == ["Red"])
        #expect(try names("ANY members.age > 35") == ["Blue"])
        #expect(try names("ALL members.age < 35") == ["Red"])
        #expect(try names("NONE members.name == 'Ann'") == ["Blue"])
        #expect(try names("SUBQUERY(members, $m, $m.score > 2).@count == 1") == ["Red"])
        #expect(try names("members.@avg.age == 28") == ["Red"])
        let red = try #require(people.context.fetch(teams).first { try $0.value(forKey: "name") as? String == "Red" })
        #expect(try people.serials(people.fetch("team == %@", red, sort: [ObjectSortDescriptor(key: "serial")])) == [1, 2])
        #expect(try people.serials(people.fetch("team.name == 'Red' AND age > 30")) == [1])
    }

    func request(_ format: String?) throws -> FetchRequest<ManagedObject> {
        var request = FetchRequest<ManagedObject>(entityName: "Person")
        if let format { request.predicate = try ObjectPredicate(format: format) }
        return request
    }
}
