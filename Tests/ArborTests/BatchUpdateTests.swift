import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// Issue 28, item 4: `BatchUpdateRequest` run by `execute(_:)` in the store, keeping validation,
/// uniqueness (with the merge policy) and indexes, and merging into every live context
/// (docs/batch-requests.md). The model and graphs are `BatchDeleteTests`'.
@Suite("Batch update")
struct BatchUpdateTests {
    static let cases: [(entity: String, predicate: String?, key: String, expression: String)] = [
        ("Employee", "salary > 6000", "salary", "salary * 2"),
        ("Employee", "department.name IN {'D2', 'D3'}", "name", "'moved'"),
        ("Employee", "ANY projects.title == 'P1'", "salary", "salary + salary / 10"),
        ("Employee", nil, "email", "email"),
        ("Contractor", "salary < 5000", "agency", "'Acme'"),
        ("Timesheet", "hours == 2", "hours", "hours + 10"),
        ("Department", "name BEGINSWITH 'D'", "name", "nil"),
        ("Project", "client == nil", "title", "'orphan'"),
    ]

    @Test("a batch update leaves the store as a context's fetch, change and save of the same objects does (random graphs; the values, indexes and relationships read back)")
    func sameAsContextUpdate() throws {
        for seed: UInt64 in [0xB0D7_0001, UInt64.random(in: 0...UInt64.max)] {
            for (entity, format, key, expression) in Self.cases {
                let label = "seed \(String(seed, radix: 16)), \(entity) \(format ?? "all"): \(key) = \(expression)"
                let batch = try BatchDeleteTests.graph(seed: seed), objects = try BatchDeleteTests.graph(seed: seed)
                var request = BatchUpdateRequest(entityName: entity)
                request.predicate = try format.map { try ObjectPredicate(format: $0) }
                request.propertiesToUpdate = [key: try ObjectExpression(format: expression)]
                request.resultType = .objectIDs
                let result = try batch.context().execute(request)

                let context = objects.context()
                var fetch = FetchRequest<ManagedObject>(entityName: entity)
                fetch.predicate = request.predicate
                let matched = try context.fetch(fetch)
                let parsed = try ObjectExpression(format: expression)
                for object in matched {
                    let value = try PredicateEvaluator(context: context).value(of: parsed, on: .object(object))
                    let attribute = try #require(object.entity.attributesByName[key])
                    let stored = try ManagedObjectContext.storedValue(value, for: attribute, entity: object.entity.name)
                    object.setPrimitive(stored.map(PropertyValue.attribute) ?? PropertyValue.none, forKey: key, persistent: true)
                }
                try context.save()
                // (Two stores: the same entities and keys.)
                func keys(_ ids: [ManagedObjectID]) -> Set<String> { Set(ids.map { "\($0.entityName)#\($0.primaryKey ?? -1)" }) }
                #expect(keys(result.updatedObjectIDs ?? []) == keys(matched.map(\.objectID)), "\(label): the objects updated")
                let after = try BatchDeleteTests.dump(batch), expected = try BatchDeleteTests.dump(objects)
                #expect(after == expected, "\(label): \(Set(after).symmetricDifference(expected).sorted().prefix(4))")
            }
        }
    }

    @Test("values are checked: a wrong type, a value past a validation rule, nil for a required attribute, a key that is not a persistent attribute — each a typed error, nothing written")
    func badValues() throws {
        let stack = try BatchDeleteTests.graph(seed: 0xB0D7_0002, employees: 10)
        let context = stack.context()
        func refused(_ key: String, _ expression: String, validates: Bool = true) throws -> ArborError {
            var request = BatchUpdateRequest(entityName: "Employee")
            request.propertiesToUpdate = [key: try ObjectExpression(format: expression)]
            request.validatesValues = validates
            return try #require(throws: ArborError.self) { try context.execute(request) }
        }
        let before = try BatchDeleteTests.dump(stack)
        #expect(try refused("salary", "'lots'").code == .wrongValueType)
        #expect(try refused("salary", "salary - 1000000").code == .validationNumberTooSmall)
        #expect(try refused("note", "'x'").code == .invalidFetchRequest, "a transient attribute")
        #expect(try refused("department", "nil").code == .invalidFetchRequest, "a relationship")
        #expect(try refused("salary", "1e300").code == .wrongValueType, "past Int64")
        #expect(try BatchDeleteTests.dump(stack) == before, "nothing written")
        // Without validation the minimum is not checked (the type still is).
        var unchecked = BatchUpdateRequest(entityName: "Employee")
        unchecked.propertiesToUpdate = ["salary": .constant(.int(-5))]
        unchecked.validatesValues = false
        unchecked.resultType = .count
        #expect(try context.execute(unchecked).count == 10)
    }

    @Test("uniqueness: the error policy fails the request with the conflicts and writes nothing; store-trump leaves the colliding rows as they were and updates the rest; indexes follow the new values")
    func uniquenessAndIndexes() throws {
        let stack = try Stack(model: try BatchDeleteTests.model())
        let context = stack.context()
        let ada = try stack.insert("Employee", in: context, ["name": "Ada", "email": "ada@x", "salary": Int64(10)])
        let bob = try stack.insert("Employee", in: context, ["name": "Bob", "email": "bob@x", "salary": Int64(20)])
        let cy = try stack.insert("Employee", in: context, ["name": "Cy", "email": "cy@x", "salary": Int64(30)])
        try context.save()
        var request = BatchUpdateRequest(entityName: "Employee")
        request.predicate = try ObjectPredicate(format: "salary >= 20")
        request.propertiesToUpdate = ["email": try ObjectExpression(format: "'ada@x'")]
        let error = try #require(throws: ArborError.self) { try context.execute(request) }
        let conflict = try #require(error.constraintConflicts.first)
        #expect(error.code == .constraintConflict && conflict.databaseObjectID == ada.objectID)
        #expect(Set(conflict.conflictingObjectIDs) == [bob.objectID, cy.objectID])
        #expect(try stack.context().existingObject(with: bob.objectID).value(forKey: "email") as? String == "bob@x")

        // Store-trump: Dee's new email collides with Ada's and Dee keeps hers; Bob and Cy change.
        let dee = try stack.insert("Employee", in: context, ["name": "ada@x", "email": "dee@x", "salary": Int64(40)])
        try context.save()
        context.mergePolicy = MergePolicy(merge: .mergeByPropertyStoreTrump)
        request.propertiesToUpdate = ["email": try ObjectExpression(format: "name")]
        request.resultType = .objectIDs
        let result = try context.execute(request)
        #expect(Set(result.updatedObjectIDs ?? []) == [bob.objectID, cy.objectID])
        let reader = stack.context()
        #expect(try reader.existingObject(with: dee.objectID).value(forKey: "email") as? String == "dee@x")
        // The uniqueness tree follows: the new values are found by it, the old ones are free.
        let found = try reader.fetch(try FetchRequest<ManagedObject>(entityName: "Employee", format: "email == 'Bob'"))
        #expect(found.map(\.objectID) == [bob.objectID])
        _ = try stack.insert("Employee", in: reader, ["name": "New", "email": "bob@x", "salary": Int64(1)])
        try reader.save()
    }

    @Test("an update to a canonically equivalent string (precomposed é to e + U+0301) moves its uniqueness entry: the entries follow the bytes, which Swift's == would call equal")
    func equivalentStringsMoveEntries() throws {
        let stack = try Stack(model: try BatchDeleteTests.model())
        let context = stack.context()
        let precomposed = "caf\u{E9}@x", decomposed = "cafe\u{301}@x"
        #expect(precomposed == decomposed && !precomposed.utf8.elementsEqual(decomposed.utf8))
        let ada = try stack.insert("Employee", in: context, ["name": "Ada", "email": precomposed, "salary": Int64(10)])
        try context.save()
        var request = BatchUpdateRequest(entityName: "Employee")
        request.propertiesToUpdate = ["email": .constant(.string(decomposed))]
        _ = try context.execute(request)
        let reader = stack.context()
        let found = try reader.fetch(try FetchRequest<ManagedObject>(entityName: "Employee", format: "email == %@", decomposed))
        #expect(found.map(\.objectID) == [ada.objectID], "found through the uniqueness tree by its new bytes")
        #expect(try reader.fetch(try FetchRequest<ManagedObject>(entityName: "Employee", format: "email == %@", precomposed)).isEmpty)
        // The old bytes are free again, the new ones taken.
        _ = try stack.insert("Employee", in: reader, ["name": "Bo", "email": precomposed, "salary": Int64(1)])
        try reader.save()
        _ = try stack.insert("Employee", in: reader, ["name": "Cy", "email": decomposed, "salary": Int64(2)])
        #expect(throws: ArborError.self) { try reader.save() }
    }

    @Test("every live context merges the updated objects by default: a registered object shows the new value, with its unsaved changes on top")
    func mergesIntoContexts() throws {
        let stack = try Stack(model: try BatchDeleteTests.model())
        let writer = stack.context()
        let ada = try stack.insert("Employee", in: writer, ["name": "Ada", "email": "ada@x", "salary": Int64(10)])
        try writer.save()
        let viewer = stack.context()
        let seen = try viewer.existingObject(with: ada.objectID)
        try seen.setValue("Ada L.", forKey: "name")
        var raise = BatchUpdateRequest(entityName: "Employee")
        raise.propertiesToUpdate = ["salary": try ObjectExpression(format: "salary * 3")]
        raise.resultType = .count
        #expect(try writer.execute(raise).count == 1)
        #expect(try seen.value(forKey: "salary") as? Int64 == 30 && seen.value(forKey: "name") as? String == "Ada L.")
        #expect(try ada.value(forKey: "salary") as? Int64 == 30, "the calling context merged too")
        try viewer.save()
        #expect(try stack.context().existingObject(with: ada.objectID).value(forKey: "name") as? String == "Ada L.")
    }

    @Test("a power cut at every I/O operation of a batch update leaves the store as it was before or after the request, whole, never between")
    func powerCut() throws {
        var request = BatchUpdateRequest(entityName: "Employee")
        request.predicate = try ObjectPredicate(format: "salary > 3000")
        request.propertiesToUpdate = ["salary": try ObjectExpression(format: "salary * 2"), "name": .constant(.string("raised"))]
        let (images, operations) = try BatchDeleteTests.checkPowerCuts { _ = try $0.execute(request) }
        print("batch update crash images checked: \(images) at \(operations) operations")
    }
}
