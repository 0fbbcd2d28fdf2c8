import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// Issue 28, item 4: `BatchInsertRequest` run by `execute(_:)` through the save's write pass,
/// with defaults, validation, uniqueness under the merge policy (upserts), indexes, foreign keys
/// and history, merged into every live context (docs/batch-requests.md).
@Suite("Batch insert")
struct BatchInsertTests {
    typealias Graph = BatchDeleteTests

    /// New employees' values: a department (by ID), a manager for some, unique emails.
    static func rows(_ stack: Stack, count: Int, seed: UInt64) throws -> [[String: any Sendable]] {
        var random = SplitMix64(seed: seed)
        let context = stack.context()
        let departments = try context.fetch(FetchRequest<ManagedObject>(entityName: "Department")).map(\.objectID).sorted { $0.primaryKey! < $1.primaryKey! }
        return (0..<count).map { index in
            var values: [String: any Sendable] = ["name": "N\(index % 5)", "email": "new\(index)@x", "salary": Int64.random(in: 1...9, using: &random) * 1000]
            if Int.random(in: 0..<4, using: &random) > 0 { values["department"] = departments.randomElement(using: &random)! }
            return values
        }
    }

    @Test("a batch insert leaves the store as a context inserting the same values and saving does: rows, keys, foreign keys, indexes, uniqueness entries", arguments: [UInt64(0xB1_0001), 0xB1_0002])
    func sameAsContextInsert(seed: UInt64) throws {
        let batch = try Graph.graph(seed: seed, employees: 30)
        let saved = try Graph.graph(seed: seed, employees: 30)
        let values = try Self.rows(batch, count: 120, seed: seed)
        var request = BatchInsertRequest(entityName: "Employee", objects: values)
        request.resultType = .objectIDs
        let result = try batch.context().execute(request)
        #expect(result.count == 120 && result.insertedObjectIDs?.count == 120 && result.updatedObjectIDs == [])
        let context = saved.context()
        for row in values {
            let employee = try saved.insert("Employee", in: context, [:])
            for (key, value) in row {
                if let id = value as? ManagedObjectID {
                    try employee.setValue(try context.existingObject(with: (saved.coordinator.persistentStores[0] as! NativeStore).objectID(entityName: id.entityName, primaryKey: id.primaryKey!)), forKey: key)
                } else {
                    try employee.setValue(value, forKey: key)
                }
            }
        }
        try context.save()
        #expect(try Graph.dump(batch) == Graph.dump(saved))
        // The store's own searches read the new rows through the trees the insert wrote.
        for stack in [batch, saved] {
            let found = try stack.context().fetch(FetchRequest<ManagedObject>(entityName: "Employee", format: "email == %@ AND department.name BEGINSWITH 'D'", "new7@x"))
            #expect(found.count == (values[7]["department"] == nil ? 0 : 1))
        }
        #expect(try result.insertedObjectIDs?.map { try batch.context().existingObject(with: $0).value(forKey: "email") as? String } == values.map { $0["email"] as? String })
    }

    @Test("bad rows are typed errors and nothing is written: unknown keys, wrong types, to-many keys, missing required values, broken rules, dangling destinations, abstract entities")
    func badRows() throws {
        let stack = try Graph.graph(seed: 0xB1_0003, employees: 10)
        let context = stack.context()
        let before = try Graph.dump(stack)
        let otherStore = try Stack(model: stack.model)
        let foreign = try otherStore.insert("Department", in: otherStore.context(), ["name": "X"])
        try foreign.managedObjectContext?.save()
        let cases: [([String: any Sendable], ArborError.Code)] = [
            (["email": "a@x", "nonsense": 1], .unknownKey),
            (["email": "a@x", "salary": "lots"], .wrongValueType),
            (["email": "a@x", "timesheets": [ManagedObjectID]()], .wrongValueType),
            (["email": "a@x", "salary": Int64(-5)], .validationNumberTooSmall),
            (["email": "a@x", "department": foreign.objectID], .misuse),
            (["email": "a@x", "badge": foreign.objectID], .wrongValueType),
        ]
        for (row, code) in cases {
            let error = #expect(throws: ArborError.self) { try context.execute(BatchInsertRequest(entityName: "Employee", objects: [["email": "ok@x"], row])) }
            #expect(error?.code == code, "\(row): \(String(describing: error))")
        }
        let required = try ManagedObjectModel {
            Entity("Item", abstract: true) { Attribute("title", .string) }
            Entity("Note", parent: "Item") { Attribute("text", .string).required() }
        }
        let notes = try Stack(model: required)
        #expect(try #require(throws: ArborError.self) { try notes.context().execute(BatchInsertRequest(entityName: "Item", objects: [[:]])) }.code == .invalidFetchRequest)
        var unchecked = BatchInsertRequest(entityName: "Note", objects: [[:]])
        unchecked.validatesValues = false
        #expect(throws: ArborError.self) { try notes.context().execute(unchecked) }
        #expect(throws: ArborError.self) { try context.execute(BatchInsertRequest(entityName: "Nothing", objects: [[:]])) }
        #expect(try Graph.dump(stack) == before)
        // Unchecked, a value the rules refuse goes in (a required one never stays nil).
        var lenient = BatchInsertRequest(entityName: "Employee", objects: [["email": "low@x", "salary": Int64(-5)]])
        lenient.validatesValues = false
        #expect(try context.execute(lenient).status)
    }

    @Test("unique values held by stored rows: an upsert under object-trump and overwrite, skipped under store-trump and rollback, an error under the error policy; duplicates among the rows keep one")
    func uniqueness() throws {
        for policy in [MergePolicyType.error, .mergeByPropertyObjectTrump, .overwrite, .mergeByPropertyStoreTrump, .rollback] {
            let stack = try Graph.graph(seed: 0xB1_0004, employees: 10)
            let context = stack.context()
            context.mergePolicy = MergePolicy(merge: policy)
            let holder = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Employee", format: "email == 'e1@x'")).first)
            let oldName = try holder.value(forKey: "name") as? String
            let oldSalary = try holder.value(forKey: "salary") as? Int64
            var request = BatchInsertRequest(entityName: "Employee", objects: [
                ["email": "e1@x", "salary": Int64(99_000)],
                ["email": "dup@x", "salary": Int64(1)],
                ["email": "fresh@x", "salary": Int64(2)],
                ["email": "dup@x", "salary": Int64(3)],
            ])
            request.resultType = .objectIDs
            let before = try Graph.dump(stack)
            if policy == .error {
                let error = #expect(throws: ArborError.self) { try context.execute(request) }
                #expect(error?.code == .constraintConflict && error?.constraintConflicts.count == 2)
                #expect(try Graph.dump(stack) == before)
                continue
            }
            let result = try context.execute(request)
            let objectTrump = policy == .mergeByPropertyObjectTrump || policy == .overwrite
            #expect(result.insertedObjectIDs?.count == 2, "\(policy)")
            #expect(result.updatedObjectIDs == (objectTrump ? [holder.objectID] : []), "\(policy)")
            // The holder (registered in this live context) was merged: it shows the stored values.
            #expect(try holder.value(forKey: "salary") as? Int64 == (objectTrump ? 99_000 : oldSalary), "\(policy)")
            #expect(try holder.value(forKey: "name") as? String == oldName, "an upsert keeps what the row does not give")
            let fresh = stack.context()
            let duplicate = try #require(try fresh.fetch(FetchRequest<ManagedObject>(entityName: "Employee", format: "email == 'dup@x'")).first)
            #expect(try duplicate.value(forKey: "salary") as? Int64 == (objectTrump ? 3 : 1), "\(policy)")
            #expect(try fresh.count(for: FetchRequest<ManagedObject>(entityName: "Employee", format: "email == 'fresh@x'")) == 1)
        }
    }

    @Test("upserts meeting one stored row on several constraints, and duplicates on several; an object handler's upsert writes only what it set; a sibling entity's row is not upserted")
    func upsertsAcrossConstraints() throws {
        let model = try ManagedObjectModel {
            Entity("Party", abstract: true) {
                Attribute("code", .string)
                Unique("code")
            }
            Entity("Account", parent: "Party") {
                Attribute("email", .string)
                Attribute("number", .integer64)
                Attribute("note", .string).defaultValue("none")
                Attribute("balance", .integer64).defaultValue(Int64(0))
                Unique("email")
                Unique("number")
            }
            Entity("Supplier", parent: "Party") { Attribute("name", .string) }
        }
        let stack = try Stack(model: model)
        let context = stack.context()
        context.mergePolicy = MergePolicy(merge: .mergeByPropertyObjectTrump)
        let held = try stack.insert("Account", in: context, ["code": "A1", "email": "a@x", "number": Int64(1), "note": "kept", "balance": Int64(10)])
        _ = try stack.insert("Supplier", in: context, ["code": "S1", "name": "Acme"])
        try context.save()
        // One row meeting the stored one on both email and number; two new rows duplicating each
        // other on both.
        let result = try context.execute(BatchInsertRequest(entityName: "Account", objects: [
            ["code": "A1", "email": "a@x", "number": Int64(1), "balance": Int64(20)],
            ["code": "B1", "email": "b@x", "number": Int64(2)],
            ["code": "B1", "email": "b@x", "number": Int64(2), "balance": Int64(5)],
        ]))
        #expect(result.status)
        let fresh = stack.context()
        #expect(try fresh.count(for: FetchRequest<ManagedObject>(entityName: "Account")) == 2)
        let account = try fresh.existingObject(with: held.objectID)
        #expect(try account.value(forKey: "balance") as? Int64 == 20 && account.value(forKey: "note") as? String == "kept")
        let duplicate = try #require(try fresh.fetch(FetchRequest<ManagedObject>(entityName: "Account", format: "email == 'b@x'")).first)
        #expect(try duplicate.value(forKey: "balance") as? Int64 == 5)

        // An object handler sets the balance only: the note the stored row has stays.
        nonisolated(unsafe) var done = false
        #expect(try context.execute(BatchInsertRequest(entityName: "Account") { object in
            guard !done else { return true }
            done = true
            try object.setValue("A1", forKey: "code")
            try object.setValue("a@x", forKey: "email")
            try object.setValue(Int64(1), forKey: "number")
            try object.setValue(Int64(30), forKey: "balance")
            return false
        }).status)
        let again = try stack.context().existingObject(with: held.objectID)
        #expect(try again.value(forKey: "balance") as? Int64 == 30)
        #expect(try again.value(forKey: "note") as? String == "kept", "the handler did not set the note")

        // A code a supplier holds: an account row cannot become an update of the supplier.
        let sibling = try #require(throws: ArborError.self) {
            try context.execute(BatchInsertRequest(entityName: "Account", objects: [["code": "S1", "email": "s@x", "number": Int64(9)]]))
        }
        #expect(sibling.code == .constraintConflict)
        #expect(try stack.context().count(for: FetchRequest<ManagedObject>(entityName: "Supplier", format: "name == 'Acme'")) == 1)
    }

    @Test("a destination deleted after the request checked it is found in the write's own transaction: the rows are refused, nothing written")
    func destinationsCheckedInTheWrite() throws {
        let stack = try Graph.graph(seed: 0xB1_0008, employees: 0)
        let context = stack.context()
        let department = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Department")).first)
        let id = department.objectID
        context.delete(department)
        try context.save()
        // What a batch insert writes after another connection deleted its destination.
        let store = try #require(stack.coordinator.persistentStores.first as? NativeStore)
        var changes = StoreChanges()
        changes.inserted = [(ManagedObjectID(temporaryFor: "Employee"),
                             StoreRow(entityName: "Employee", version: 1, attributes: ["email": .string("late@x"), "salary": .integer(1)], toOne: ["department": id]))]
        changes.requiredRows = [id: "department"]
        let refusal = try #require(throws: ArborError.self) { try store.save(changes) }
        #expect(refusal.code == .misuse && refusal.message.contains("does not hold"))
        #expect(try stack.context().count(for: FetchRequest<ManagedObject>(entityName: "Employee")) == 0)
    }

    @Test("a context that loaded a destination's to-many relationship sees the rows a batch insert added to it")
    func destinationsMerged() throws {
        let stack = try Graph.graph(seed: 0xB1_0007, employees: 5)
        let context = stack.context()
        let department = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Department")).first)
        let before = try #require(try department.value(forKey: "employees") as? Set<ManagedObject>).count
        let other = stack.context()
        _ = try other.execute(BatchInsertRequest(entityName: "Employee", objects: [
            ["email": "joined1@x", "salary": Int64(1), "department": department.objectID],
            ["email": "joined2@x", "salary": Int64(1), "department": department.objectID],
        ]))
        let after = try #require(try department.value(forKey: "employees") as? Set<ManagedObject>)
        #expect(after.count == before + 2)
    }

    @Test("handlers make the rows one at a time: a dictionary handler, and an object handler setting typed values on an object in no context")
    func handlers() throws {
        let stack = try Graph.graph(seed: 0xB1_0005, employees: 5)
        let context = stack.context()
        let department = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Department")).first)
        nonisolated(unsafe) var made = 0
        var request = BatchInsertRequest(entityName: "Timesheet") { values in
            guard made < 250 else { return true }
            values["hours"] = Int32(made % 9)
            made += 1
            return false
        }
        request.resultType = .count
        #expect(try context.execute(request).count == 250)
        nonisolated(unsafe) var built = 0
        let departmentID = department.objectID
        let byObject = BatchInsertRequest(entityName: "Employee") { object in
            guard built < 20 else { return true }
            try object.setValue("H\(built)", forKey: "name")
            try object.setValue("h\(built)@x", forKey: "email")
            try object.setValue(Int64(built * 100), forKey: "salary")
            built += 1
            _ = departmentID
            return false
        }
        #expect(try context.execute(byObject).status)
        // Dictionaries of `Any` hold nil as NSNull or as an empty optional, and values in optionals.
        let optional: [String: any Sendable] = ["email": Optional("opt@x"), "name": NSNull(), "salary": Optional<Int64>.none,
                                                 "department": Optional(departmentID)]
        #expect(try context.execute(BatchInsertRequest(entityName: "Employee", objects: [optional])).status)
        let opt = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Employee", format: "email == 'opt@x'")).first)
        #expect(try opt.value(forKey: "name") == nil && opt.value(forKey: "salary") == nil)
        #expect((try opt.value(forKey: "department") as? ManagedObject)?.objectID == departmentID)
        #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Timesheet", format: "hours == 8")) >= 27)
        let inserted = try context.fetch(FetchRequest<ManagedObject>(entityName: "Employee", format: "email ENDSWITH 'h19@x'"))
        #expect(try inserted.first?.value(forKey: "salary") as? Int64 == 1_900)
    }

    @Test("a batch insert is recorded in persistent history as its kind, its upserts as updates with their old values")
    func history() throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Graph.model())
        try coordinator.addInMemoryStore(history: .on)
        let stack = Stack(model: coordinator.managedObjectModel, coordinator: coordinator)
        try Graph.fill(stack, seed: 0xB1_0006, employees: 10)
        let context = stack.context()
        context.mergePolicy = .mergeByPropertyObjectTrump
        context.transactionAuthor = "importer"
        let token = try #require(try coordinator.currentPersistentHistoryToken())
        _ = try context.execute(BatchInsertRequest(entityName: "Employee", objects: [["email": "e2@x", "salary": Int64(1)], ["email": "z@x", "salary": Int64(2)]]))
        let transactions = try #require(try context.execute(.fetchHistory(after: token)).transactions)
        try #require(transactions.count == 1)
        #expect(transactions[0].kind == .batchInsert && transactions[0].author == "importer")
        let changes = try #require(transactions[0].changes)
        #expect(changes.map(\.changeType).sorted { "\($0)" < "\($1)" } == [.insert, .update])
        let update = try #require(changes.first { $0.changeType == .update })
        #expect(update.newValues["salary"] == .attribute(.integer(1)) && update.oldValues["salary"] != nil)
    }

    @Test("a power cut at any I/O operation of a batch insert leaves the store (and its history) as before or as after")
    func powerCut() throws {
        let result = try Graph.checkPowerCuts(history: true) { context in
            let departments = try context.fetch(FetchRequest<ManagedObject>(entityName: "Department")).map(\.objectID)
            let rows: [[String: any Sendable]] = (0..<300).map { ["email": "cut\($0)@x", "salary": Int64($0), "department": departments[$0 % departments.count]] }
            _ = try context.execute(BatchInsertRequest(entityName: "Employee", objects: rows))
        }
        #expect(result.images > 0)
    }
}
