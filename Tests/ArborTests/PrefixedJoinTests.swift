import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// Counts and aggregates of a to-many relationship reached through to-one ones, and SUBQUERY
/// bodies with to-one key paths, run in the store (docs/relational-planning.md, "Through
/// to-one relationships first"), equal to the in-memory evaluator's answers, and
/// batch deletes accept them.
@Suite("Counts through to-one paths, and SUBQUERY bodies with joins")
struct PrefixedJoinTests {
    static let formats = [
        // A to-one hop, then a to-many count or aggregate (the key-path form: a nil prefix is nil).
        "department.employees.@count > 3",
        "department.employees.@count == 0",
        "department.employees.@count <= 5",
        "department.employees.@count == nil",
        "manager.department.employees.@count >= 4",
        "department.division.departments.@count > 1",
        "department.employees.@sum.salary > 20000",
        "department.employees.@avg.salary < 5000",
        "department.employees.@max.salary >= 9000",
        "department.employees.@min.name == 'p0'",
        "manager.projects.@count > 1",
        "department.employees.@sum.salary == 0",
        // The SUBQUERY form: a nil prefix is an empty collection.
        "SUBQUERY(department.employees, $e, $e.salary > 5000).@count > 1",
        "SUBQUERY(department.employees, $e, $e.salary > 5000).@count == 0",
        "SUBQUERY(manager.projects, $p, $p.title BEGINSWITH 'A').@count > 0",
        // SUBQUERY bodies with to-one key paths, and compound ones.
        "SUBQUERY(reports, $r, $r.department.name == 'Sales').@count > 0",
        "SUBQUERY(reports, $r, $r.department.name == 'Sales').@count == 0",
        "SUBQUERY(reports, $r, $r.department.division.title == 'North' AND $r.salary > 2000).@count >= 1",
        "SUBQUERY(projects, $p, $p.client.country == 'FR').@count > 0",
        "SUBQUERY(reports, $r, $r.salary > 1000 AND $r.salary < 8000).@count > 1",
        "SUBQUERY(department.employees, $e, $e.manager.name == 'p3').@count > 0",
    ]

    @Test("each shape runs in the store, named by explain, and agrees with the in-memory evaluator, for the entity and a sub-entity, counts included", arguments: Array(0..<4))
    func agreeWithTheEvaluator(round: Int) throws {
        let seed = UInt64(0x50B0 &+ round &* 3_331)
        let graph = try JoinTests.Graph(seed: seed, people: 150, varied: round % 2 == 1)
        let reader = graph.stack.context()
        let all = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Person"))
        for format in Self.formats {
            let predicate = try ObjectPredicate(format: format)
            let expected = Set(try all.filter { try predicate.evaluate(with: $0) }.map(\.objectID))
            for entity in ["Person", "Contractor"] {
                var request = FetchRequest<ManagedObjectID>(entityName: entity)
                request.predicate = predicate
                let wanted = entity == "Person" ? expected : expected.filter { $0.entityName == entity }
                #expect(Set(try reader.fetch(request)) == wanted, "seed \(seed), \(entity): \(format)")
                #expect(try reader.count(for: request) == wanted.count, "seed \(seed), count of \(entity): \(format)")
                let plan = try request.explain(in: reader)
                #expect(!plan.contains("then in memory"), "\(format) runs in the store: \(plan)")
                #expect(plan.contains("join "), "\(format): \(plan)")
            }
        }
    }

    @Test("explain names the count, the owner entity and the steps back along the prefix")
    func explainNamesTheSteps() throws {
        let graph = try JoinTests.Graph(seed: 7, people: 200)
        let reader = graph.stack.context()
        let plan = try FetchRequest<ManagedObject>(entityName: "Person", format: "department.employees.@count > 3").explain(in: reader)
        #expect(plan.contains("counted per Department by their department"), "\(plan)")
        #expect(plan.contains("Person through fk.Person.department"), "\(plan)")
        let sum = try FetchRequest<ManagedObject>(entityName: "Person", format: "department.employees.@sum.salary > 100").explain(in: reader)
        #expect(sum.contains("@sum.salary per Department"), "\(sum)")
        let nested = try FetchRequest<ManagedObject>(entityName: "Person", format: "SUBQUERY(reports, $r, $r.department.name == 'Sales').@count > 0").explain(in: reader)
        #expect(nested.contains("counted per Person") && !nested.contains("then in memory"), "\(nested)")
    }

    @Test("with unsaved changes in an entity the count's prefix or a SUBQUERY body's join reaches, the term is judged on objects, with the changes")
    func pendingChangesReachedByNestedJoins() throws {
        let graph = try JoinTests.Graph(seed: 11, people: 120)
        let context = graph.context
        let sales = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Department", format: "name == 'Sales'")).first)
        try sales.setValue("Renamed", forKey: "name")
        for format in ["SUBQUERY(reports, $r, $r.department.name == 'Renamed').@count > 0", "department.employees.@count > 3"] {
            let predicate = try ObjectPredicate(format: format)
            let all = try context.fetch(FetchRequest<ManagedObject>(entityName: "Person"))
            let expected = Set(try all.filter { try predicate.evaluate(with: $0) }.map(\.objectID))
            #expect(Set(try context.fetch(FetchRequest<ManagedObjectID>(entityName: "Person", format: format))) == expected, "\(format)")
        }
    }

    @Test("a batch delete accepts a count through a to-one path and a SUBQUERY with a to-one path, deleting what the evaluator selects", arguments: [
        "department.employees.@count > 6",
        "SUBQUERY(reports, $r, $r.department.name == 'Sales').@count > 0",
    ])
    func batchDeletes(format: String) throws {
        let graph = try JoinTests.Graph(seed: 23, people: 160)
        let reader = graph.stack.context()
        let predicate = try ObjectPredicate(format: format)
        let all = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Person"))
        let doomed = Set(try all.filter { try predicate.evaluate(with: $0) }.map(\.objectID))
        #expect(!doomed.isEmpty)
        var request = BatchDeleteRequest(fetchRequest: try FetchRequest<ManagedObject>(entityName: "Person", format: format))
        request.resultType = .objectIDs
        let result = try graph.stack.context().execute(request)
        #expect(Set(result.deletedObjectIDs ?? []) == doomed)
        let left = Set(try graph.stack.context().fetch(FetchRequest<ManagedObjectID>(entityName: "Person")))
        #expect(left == Set(all.map(\.objectID)).subtracting(doomed))
    }
}

/// What runs on objects, named by explain, and refused by a request that requires store
/// evaluation (docs/predicates.md, "What runs on objects").
@Suite("Terms judged on objects")
struct OnObjectsTests {
    static let shapes: [(format: String, reason: String)] = [
        ("department.name == 'Sales' OR salary > 5", "an OR or NOT around a key path"),
        ("NOT (department.name == 'Sales')", "an OR or NOT around a key path"),
        ("salary > manager.salary", "compares a key path with another key path"),
        ("projects.title == 'Atlas'", "through a to-many relationship without ANY, ALL or NONE"),
        ("projects.members.@count > 3", "not to-one relationships then one to-many relationship"),
        ("reports == nil", "ends at a to-many relationship"),
        ("department.employees.@max.rating > 1.5", "@max of a double attribute"),
        ("SUBQUERY(reports, $r, $r.name == 'a' OR $r.department.name == 'b').@count > 0", "the SUBQUERY's body is not a conjunction"),
        ("department.employees.@distinctUnionOfObjects.name == 'p1'", "@distinctUnionOfObjects"),
    ]

    @Test("each shape's explain line says it is judged on objects and why; with requiresStoreEvaluation the fetch throws naming the term and the reason, before reading; the results are right either way")
    func namedAndRefused() throws {
        let graph = try JoinTests.Graph(seed: 5, people: 80)
        let reader = graph.stack.context()
        let all = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Person"))
        for (format, reason) in Self.shapes {
            var request = try FetchRequest<ManagedObjectID>(entityName: "Person", format: format)
            let plan = try request.explain(in: reader)
            #expect(plan.contains("check each object: ") && plan.contains("— on objects: ") && plan.contains(reason), "\(format): \(plan)")
            let predicate = try #require(request.predicate)
            #expect(Set(try reader.fetch(request)) == Set(try all.filter { try predicate.evaluate(with: $0) }.map(\.objectID)), "\(format)")
            request.requiresStoreEvaluation = true
            let error = try #require(throws: ArborError.self) { _ = try reader.fetch(request) }
            #expect(error.code == .invalidFetchRequest && error.message.contains("requires store evaluation") && error.message.contains(reason), "\(error.message)")
            #expect(throws: ArborError.self) { _ = try reader.count(for: request) }
        }
        // What the store answers passes.
        var store = try FetchRequest<ManagedObjectID>(entityName: "Person", format: "department.employees.@count > 3 AND ANY projects.title == 'Atlas'")
        store.requiresStoreEvaluation = true
        _ = try reader.fetch(store)
    }

    @Test("unsaved changes in an entity a join reaches put the join on objects, said so, and refused under requiresStoreEvaluation; so is a grouping made of objects")
    func unsavedChanges() throws {
        let graph = try JoinTests.Graph(seed: 9, people: 60)
        let context = graph.context
        let department = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Department")).first)
        try department.setValue(Int64(123), forKey: "budget")
        var request = try FetchRequest<ManagedObjectID>(entityName: "Person", format: "department.budget == 123")
        #expect(try request.explain(in: context).contains("unsaved changes"))
        request.requiresStoreEvaluation = true
        let error = try #require(throws: ArborError.self) { _ = try context.fetch(request) }
        #expect(error.message.contains("unsaved changes"), "\(error.message)")
        var grouped = FetchRequest<[String: any Sendable]>(entityName: "Person")
        grouped.resultType = .dictionary
        grouped.propertiesToGroupBy = ["department.name"]
        grouped.propertiesToFetch = [.key("department.name"), .aggregate(.count, of: "salary", as: "n")]
        grouped.requiresStoreEvaluation = true
        #expect(throws: ArborError.self) { _ = try context.fetch(grouped) }
        _ = try graph.stack.context().fetch(grouped)
    }
}
