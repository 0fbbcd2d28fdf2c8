import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// Issue 26, item 1: comparisons of key paths through to-one relationships run in the store as
/// joins (docs/relational-planning.md), and give what the in-memory evaluator gives on the same
/// saved objects.
@Suite("Joins through to-one relationships")
struct JoinTests {
    /// The relational test model (``RelationalGrammar/model()``).
    static func model() throws -> ManagedObjectModel { try RelationalGrammar.model() }

    /// A random graph, saved: divisions, departments (some without a division, some nameless),
    /// people of two sub-entities (some without a department or a manager). `varied` gives the
    /// people names with case, diacritics and wildcards, ratings (NaN and nil among them), badges
    /// and agencies, and leaves some projects' titles and clients' countries nil (drawn from a
    /// generator of their own, so the graph is otherwise the same).
    struct Graph {
        let stack: Stack
        let context: ManagedObjectContext
        var people: [ManagedObject] = []
        let departmentNames = RelationalGrammar.departmentNames

        init(seed: UInt64, people count: Int = 120, path: String? = nil, varied: Bool = false) throws {
            var random = SplitMix64(seed: seed)
            stack = try Stack(model: try JoinTests.model(), path: path)
            context = stack.context()
            let divisions = try ["North", "South", "East"].map { try stack.insert("Division", in: context, ["title": $0]) }
            var departments: [ManagedObject] = []
            for name in departmentNames {
                let department = try stack.insert("Department", in: context, ["budget": Int64.random(in: 0...9, using: &random) * 1000])
                if Int.random(in: 0..<6, using: &random) > 0 { try department.setValue(name, forKey: "name") }
                if Int.random(in: 0..<4, using: &random) > 0 { try department.setValue(divisions.randomElement(using: &random), forKey: "division") }
                departments.append(department)
            }
            let clients = try ["FR", "DE", "US"].map { try stack.insert("Client", in: context, ["country": $0]) }
            var projects: [ManagedObject] = []
            for title in ["Atlas", "Apollo", "Borealis", "Cygnus", "Draco"] {
                let project = try stack.insert("Project", in: context, ["title": title])
                if Int.random(in: 0..<5, using: &random) > 0 { try project.setValue(clients.randomElement(using: &random), forKey: "client") }
                projects.append(project)
            }
            for index in 0..<count {
                let entity = index % 3 == 0 ? "Contractor" : "Employee"
                let person = try stack.insert(entity, in: context, ["name": "p\(index % 17)", "salary": Int64.random(in: 0...20, using: &random) * 500])
                if Int.random(in: 0..<5, using: &random) > 0 { try person.setValue(departments.randomElement(using: &random), forKey: "department") }
                if !people.isEmpty, Int.random(in: 0..<4, using: &random) > 0 { try person.setValue(people.randomElement(using: &random), forKey: "manager") }
                let joined = Set((0..<Int.random(in: 0...2, using: &random)).map { _ in projects.randomElement(using: &random)! })
                try person.setValue(joined, forKey: "projects")
                people.append(person)
            }
            if varied {
                var other = SplitMix64(seed: seed ^ 0x7A11_ED5E_ED00_0001)
                for (index, person) in people.enumerated() {
                    if Int.random(in: 0..<3, using: &other) > 0 {
                        try person.setValue(RelationalGrammar.personNames.randomElement(using: &other)!, forKey: "name")
                    }
                    try person.setValue(RelationalGrammar.ratings.randomElement(using: &other)!, forKey: "rating")
                    if index % 3 == 0 {
                        try person.setValue(RelationalGrammar.agencies.randomElement(using: &other)!, forKey: "agency")
                    } else if Int.random(in: 0..<5, using: &other) > 0 {
                        try person.setValue(Int32.random(in: 0...40, using: &other), forKey: "badge")
                    }
                }
                for project in projects where Int.random(in: 0..<5, using: &other) == 0 { try project.setValue(nil, forKey: "title") }
                for client in clients where Int.random(in: 0..<4, using: &other) == 0 { try client.setValue(nil, forKey: "country") }
            }
            try context.save()
        }
    }

    static let formats = [
        "department.name == 'Sales'",
        "department.name ==[c] 'sales'",
        "department.name ==[cd] 'elan'",
        "department.name != 'Sales'",
        "department.name == nil",
        "department.name != nil",
        "department.name BEGINSWITH 'S'",
        "department.name IN {'Ops', 'Research', 'Nope'}",
        "department.name > 'R'",
        "department.budget >= 5000",
        "department.budget BETWEEN {2000, 6000}",
        "department.division.title == 'North'",
        "department.division.title != 'North'",
        "department.division == nil",
        "manager.department.name == 'Support'",
        "manager.salary > 6000",
        "manager.manager.name == 'p3'",
        "manager.manager.manager.department.budget < 3000",
        "manager.name == nil",
        "department.name == 'Sales' AND salary > 3000",
        "department.name BEGINSWITH 'S' AND manager.salary < 8000",
        "salary == 1000 AND department.budget > 2000",
        "department.name == 'Sales' OR salary > 9000",
        "NOT (department.name == 'Sales')",
        // Through to-many relationships (issue 26, item 2).
        "ANY reports.salary > 8000",
        "NONE reports.salary > 8000",
        "ALL reports.salary > 2000",
        "ANY projects.title BEGINSWITH 'A'",
        "ANY projects.client.country == 'FR'",
        "ANY projects.client.country == nil",
        "ALL projects.client.country != 'FR'",
        "ANY department.employees.salary > 9000",
        "NONE department.employees.name == 'p3'",
        "ANY manager.reports.name == 'p1'",
        "ANY reports.department.name == 'Sales' AND salary > 1000",
        "ANY department.name == 'Sales'",
        "NONE manager.name == 'p2'",
        "reports.@count > 1",
        "reports.@count == 0",
        "projects.@count >= 2",
        "SUBQUERY(reports, $r, $r.salary > 5000).@count > 0",
        "SUBQUERY(projects, $p, $p.title BEGINSWITH 'A').@count == 1",
        "SUBQUERY(reports, $r, $r.salary > 5000 AND $r.name != 'p1').@count < 2 AND salary > 0",
    ]

    static let departmentFormats = [
        "ANY employees.salary > 9000",
        "NONE employees.manager == nil",
        "ALL employees.salary >= 1000",
        "ANY employees.projects.client.country == 'DE'",
        "ANY employees.manager.name == 'p4' AND budget > 1000",
        "employees.@count > 5",
        "SUBQUERY(employees, $e, $e.salary >= 9000).@count >= 1",
    ]

    @Test("every join agrees with the in-memory evaluator on random graphs, for sub-entities and with other terms", arguments: Array(0..<6))
    func differential(round: Int) throws {
        let seed = UInt64(0x1011 &+ round &* 7_777)
        let graph = try Graph(seed: seed)
        let reader = graph.stack.context()
        let all = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Person"))
        for format in Self.formats {
            let predicate = try ObjectPredicate(format: format)
            let expected = Set(try all.filter { try predicate.evaluate(with: $0) }.map(\.objectID))
            for entity in ["Person", "Employee"] {
                var request = FetchRequest<ManagedObjectID>(entityName: entity)
                request.predicate = predicate
                let fetched = try reader.fetch(request)
                let wanted = entity == "Person" ? expected : expected.filter { $0.entityName == "Employee" }
                #expect(Set(fetched) == wanted && fetched.count == wanted.count, "seed \(seed), \(entity): \(format)")
                #expect(try reader.count(for: request) == wanted.count, "seed \(seed), count of \(entity): \(format)")
                if !format.contains(" OR ") && !format.hasPrefix("NOT") {
                    #expect(try !request.explain(in: reader).contains("then in memory"), "\(format) runs in the store")
                }
            }
        }
        let departments = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Department"))
        for format in Self.departmentFormats {
            let predicate = try ObjectPredicate(format: format)
            let expected = Set(try departments.filter { try predicate.evaluate(with: $0) }.map(\.objectID))
            var request = FetchRequest<ManagedObjectID>(entityName: "Department")
            request.predicate = predicate
            #expect(Set(try reader.fetch(request)) == expected, "seed \(seed), Department: \(format)")
            #expect(try !request.explain(in: reader).contains("then in memory"), "\(format) runs in the store")
        }
    }

    @Test("a join term is planned in the store and named by explain; the rows come through the foreign-key tree when its keys are few, else each row is checked")
    func explainAndStrategies() throws {
        let graph = try Graph(seed: 42, people: 400)
        let reader = graph.stack.context()
        func explain(_ format: String) throws -> String {
            try FetchRequest<ManagedObject>(entityName: "Person", format: format).explain(in: reader)
        }
        let unique = try explain("department.name == 'Sales'")
        #expect(unique.contains("join department.name == \"Sales\": Department by unique.Department.name, range = \"Sales\""))
        #expect(unique.contains("Person through fk.Person.department for each key"))
        #expect(!unique.contains("then in memory"))
        let twoHops = try explain("manager.department.name BEGINSWITH 'S'")
        #expect(twoHops.contains("Person through fk.Person.department") && twoHops.contains("Person through fk.Person.manager"))
        #expect(try explain("department.name == nil").contains("Person rows checked for their department"), "nil matches: rows are read")
        // The same answers through the tree (one department) and through checks (every budget).
        var few = try FetchRequest<ManagedObjectID>(entityName: "Person", format: "department.name == 'Sales'")
        var many = try FetchRequest<ManagedObjectID>(entityName: "Person", format: "department.budget >= 0")
        few.sortDescriptors = [ObjectSortDescriptor(key: "salary", ascending: false)]
        many.sortDescriptors = few.sortDescriptors
        let all = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Person"))
        for request in [few, many] {
            let predicate = try #require(request.predicate)
            func salary(_ object: ManagedObject) -> Int64 { (try? object.value(forKey: "salary")) as? Int64 ?? 0 }
            let expected = try all.filter { try predicate.evaluate(with: $0) }
            let fetched = try reader.fetch(request)
            #expect(Set(fetched) == Set(expected.map(\.objectID)))
            let salaries = try fetched.map { salary(try reader.existingObject(with: $0)) }
            #expect(salaries == salaries.sorted(by: >), "the request's order, made after the join")
            var limited = request
            limited.fetchLimit = 3
            limited.fetchOffset = 1
            #expect(try reader.fetch(limited) == Array(fetched.dropFirst().prefix(3)))
        }
    }

    @Test("a store plans a context's fetch from the split the context made: the same joins and row terms, and the same plan as the fetch made by hand; a new predicate is split again")
    func storePlansFromTheContextsSplit() throws {
        let graph = try Graph(seed: 7, people: 60)
        let format = "department.name == 'Sales' AND salary > 1000 AND manager.department.budget >= 2000 AND name BEGINSWITH 'p'"
        let request = try FetchRequest<ManagedObjectID>(entityName: "Person", format: format)
        let logical = try LogicalPlan(entityName: "Person", predicate: request.predicate, sortDescriptors: [], model: graph.stack.model)
        let person = try #require(graph.stack.model.entity(named: "Person"))
        var carried = StoreFetch(logical, window: false)
        let split = carried.split(for: person)
        #expect(split.joins.map(\.term.predicateFormat) == logical.joins.map(\.term.predicateFormat))
        #expect(split.joins.count == 2 && split.rowTerms.count == 2 && split.onObjects.isEmpty)
        // The same fetch made by hand is split by the store, and planned alike.
        var byHand = StoreFetch(entityName: "Person")
        byHand.predicate = carried.predicate
        #expect(byHand == carried)
        let store = try #require(graph.stack.coordinator.persistentStores.first)
        #expect(try store.explain(byHand) == store.explain(carried))
        #expect(try Set(store.fetch(byHand).map(\.0)) == Set(store.fetch(carried).map(\.0)))
        // A predicate set afterwards is the one planned: the carried split is dropped.
        carried.predicate = try ObjectPredicate(format: "salary > 1000")
        #expect(carried.split(for: person).joins.isEmpty && carried.split(for: person).rowTerms.count == 1)
        #expect(try store.explain(carried).joins.isEmpty)
        // A hand-made fetch's term that a context would judge on objects is checked on rows.
        byHand.predicate = try ObjectPredicate(format: "salary > 1000 OR department.name == 'Sales'")
        #expect(byHand.split(for: person).rowTerms.count == 1 && byHand.split(for: person).onObjects.isEmpty)
    }

    @Test("sorting by a to-one key path happens in the store (with its window): the order the in-memory sort gives, nils first ascending", arguments: [
        [ObjectSortDescriptor(key: "department.name")],
        [ObjectSortDescriptor(key: "department.name", ascending: false), ObjectSortDescriptor(key: "salary")],
        [ObjectSortDescriptor(key: "manager.department.budget"), ObjectSortDescriptor(key: "name", ascending: false)],
        [ObjectSortDescriptor(key: "department.name", options: [.caseInsensitive, .diacriticInsensitive])],
    ])
    func sortsByKeyPath(descriptors: [ObjectSortDescriptor]) throws {
        let graph = try Graph(seed: 5)
        let reader = graph.stack.context()
        var request = try FetchRequest<ManagedObjectID>(entityName: "Person", format: "salary > 1000")
        request.sortDescriptors = descriptors
        let plan = try request.explain(in: reader)
        #expect(plan.contains("  sort: ") && !plan.contains("then in memory"), "\(plan)")
        let all = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Person", format: "salary > 1000"))
        // The in-memory order: by the descriptors, ties by primary key (the store's order of ties).
        let expected = try all.sorted { $0.objectID.key < $1.objectID.key }.sorted(by: descriptors).map(\.objectID)
        let fetched = try reader.fetch(request)
        #expect(fetched == expected)
        request.fetchOffset = 3
        request.fetchLimit = 7
        #expect(try reader.fetch(request) == Array(expected.dropFirst(3).prefix(7)))
    }

    @Test("ANY, NONE and ALL through to-one relationships only: the path's one value is the element, and nil none (found by DifferentialTests: the store took a department without a name for an element nil)")
    func quantifiersThroughToOneOnly() throws {
        let graph = try Graph(seed: 11)
        let staffed = try #require(try graph.context.fetch(FetchRequest<ManagedObject>(entityName: "Department")).first {
            ((try? $0.value(forKey: "employees")) as? Set<ManagedObject>)?.isEmpty == false
        })
        try staffed.setValue(nil, forKey: "name")
        try graph.context.save()
        let reader = graph.stack.context()
        let all = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Person"))
        for format in ["ANY department.name == nil", "NONE department.name == nil", "ANY department.name != 'Sales'", "ALL department.name != 'Sales'",
                       "NONE department.division == nil", "ANY manager.department.name == nil", "ALL manager.salary > 3000", "NONE manager.manager.name == nil"] {
            let predicate = try ObjectPredicate(format: format)
            let expected = Set(try all.filter { try predicate.evaluate(with: $0) }.map(\.objectID))
            var request = FetchRequest<ManagedObjectID>(entityName: "Person")
            request.predicate = predicate
            #expect(try request.explain(in: reader).contains("join "), "\(format) runs in the store")
            #expect(Set(try reader.fetch(request)) == expected, "\(format)")
            #expect(try reader.count(for: request) == expected.count, "count: \(format)")
        }
        // A nil name is no element: nothing is ANY-equal to nil, and everyone NONE-equal.
        #expect(try reader.count(for: FetchRequest<ManagedObjectID>(entityName: "Person", format: "ANY department.name == nil")) == 0)
        #expect(try reader.count(for: FetchRequest<ManagedObjectID>(entityName: "Person", format: "NONE department.name == nil")) == all.count)
    }

    @Test("a sort by a to-one key path is made on objects while the context has unsaved changes in the entities the path reaches (found by DifferentialTests: the store sorted by the rows' older values)")
    func pendingChangesKeepKeyPathSortsInMemory() throws {
        let graph = try Graph(seed: 7)
        let context = graph.context
        let department = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Department")).first {
            ((try? $0.value(forKey: "employees")) as? Set<ManagedObject>)?.isEmpty == false
        })
        let members = Set(try #require(try department.value(forKey: "employees") as? Set<ManagedObject>).map(\.objectID))
        var request = FetchRequest<ManagedObjectID>(entityName: "Person")
        request.sortDescriptors = [ObjectSortDescriptor(key: "department.name", ascending: false)]
        #expect(try !request.explain(in: context).contains("then in memory"), "no changes: the store sorts")
        try department.setValue("ÿÿ", forKey: "name")  // After every name, "Élan" too (by scalars)
        #expect(try request.explain(in: context).contains("then in memory: sort: department.name descending"))
        #expect(Set(try context.fetch(request).prefix(members.count)) == members, "the renamed department's people first")
        request.fetchLimit = members.count
        #expect(Set(try context.fetch(request)) == members, "and the window after the order")
        try context.save()
        #expect(try !request.explain(in: context).contains("then in memory"))
        #expect(Set(try context.fetch(request)) == members)
    }

    @Test("S000-22/S000-23: with unsaved changes in a joined entity, the term is judged on objects (the store's rows do not hold the change)")
    func pendingChangesKeepJoinsInMemory() throws {
        let graph = try Graph(seed: 7)
        let context = graph.context
        let sales = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Department", format: "name != nil")).first {
            ((try? $0.value(forKey: "employees")) as? Set<ManagedObject>)?.isEmpty == false
        })
        let request = try FetchRequest<ManagedObjectID>(entityName: "Person", format: "department.name == 'Renamed'")
        #expect(try context.fetch(request).isEmpty)
        try sales.setValue("Renamed", forKey: "name")
        #expect(try request.explain(in: context).contains("then in memory: check each object: department.name == \"Renamed\""))
        let members = try context.fetch(FetchRequest<ManagedObject>(entityName: "Person")).filter { (try $0.value(forKeyPath: "department.name")) as? String == "Renamed" }
        #expect(Set(try context.fetch(request)) == Set(members.map(\.objectID)) && !members.isEmpty)
        try context.save()
        #expect(try request.explain(in: context).contains("join department.name"))
        #expect(Set(try context.fetch(request)) == Set(members.map(\.objectID)))
    }

    @Test("joins on a store file read back after reopening, and a dictionary fetch and a count use them")
    func onAFile() throws {
        let path = try temporaryDirectory() + "/joins.arbor"
        let saved = try Graph(seed: 99, path: path)
        let expected = try saved.stack.context().fetch(FetchRequest<ManagedObjectID>(entityName: "Person", format: "department.division.title == 'South'"))
        let stack = try Stack(model: try Self.model(), path: path)
        let reader = stack.context()
        let request = try FetchRequest<ManagedObjectID>(entityName: "Person", format: "department.division.title == 'South'")
        #expect(Set(try reader.fetch(request)) == Set(expected))
        #expect(try reader.count(for: request) == expected.count)
    }
}
