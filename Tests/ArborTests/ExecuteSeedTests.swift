import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// S001-21, `execute(_:)`: "Passes a request to the persistent store without affecting the
/// contents of the managed object context and returns a persistent store result." Arbor's batch
/// requests merge what they did into live contexts by default (issue 28 item 4); with
/// `mergesIntoContexts` off they leave the context exactly as the seed says, and either way the
/// context's pending changes stay pending.
@Suite("execute(_:) and the context's contents (S001-21)")
struct ExecuteSeedTests {
    typealias Graph = BatchDeleteTests

    /// What a context holds: its registered objects, its pending changes, and each registered
    /// object's in-memory values of `name` and `salary`.
    static func contents(_ context: ManagedObjectContext) throws -> [String] {
        var lines = ["inserted \(context.insertedObjects.count) updated \(context.updatedObjects.count) deleted \(context.deletedObjects.count)"]
        for object in context.registeredObjects.sorted(by: { "\($0.objectID)" < "\($1.objectID)" }) {
            var line = "\(object.objectID) fault=\(object.isFault)"
            if !object.isFault, object.entity.name == "Employee" || object.entity.name == "Contractor" {
                line += " \(String(describing: object.values["name"])) \(String(describing: object.values["salary"]))"
            }
            lines.append(line)
        }
        return lines
    }

    @Test("batch requests with merging off, and history requests, leave registered objects, pending changes and in-memory values as they were (objects go stale)")
    func leavesTheContext() throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Graph.model())
        try coordinator.addInMemoryStore(history: .on)
        let stack = Stack(model: coordinator.managedObjectModel, coordinator: coordinator)
        try Graph.fill(stack, seed: 0x5E_0021, employees: 30)
        let context = stack.context()
        let employees = try context.fetch(FetchRequest<ManagedObject>(entityName: "Employee"))
        try employees[0].setValue("Pending", forKey: "name")
        _ = try stack.insert("Department", in: context, ["name": "Unsaved"])
        let salary = try #require(try employees[1].value(forKey: "salary") as? Int64)
        context.processPendingChanges()
        let before = try Self.contents(context)

        var update = BatchUpdateRequest(entityName: "Employee")
        update.propertiesToUpdate = ["salary": try ObjectExpression(format: "salary + 1")]
        update.mergesIntoContexts = false
        #expect(try context.execute(update).status)
        var insert = BatchInsertRequest(entityName: "Employee", objects: [["email": "seed@x", "salary": Int64(1)]])
        insert.mergesIntoContexts = false
        #expect(try context.execute(insert).status)
        var delete = BatchDeleteRequest(fetchRequest: try FetchRequest<ManagedObject>(entityName: "Timesheet", format: "hours == 1"))
        delete.mergesIntoContexts = false
        #expect(try context.execute(delete).status)
        #expect(try context.execute(.fetchHistory(after: nil)).transactions?.isEmpty == false)
        #expect(try Self.contents(context) == before, "the context's contents are not affected")
        // The store moved on: a new context sees the raised salaries.
        let fresh = stack.context()
        #expect(try fresh.existingObject(with: employees[1].objectID).value(forKey: "salary") as? Int64 == salary + 1)
        #expect(try employees[1].value(forKey: "salary") as? Int64 == salary, "this context's object is stale, as the seed allows")
    }

    @Test("with merging on (Arbor's default), the pending changes still stay: an unsaved name survives a batch update of its object")
    func pendingChangesStay() throws {
        let stack = try Graph.graph(seed: 0x5E_0022, employees: 10)
        let context = stack.context()
        let employee = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Employee")).first)
        try employee.setValue("Pending", forKey: "name")
        var update = BatchUpdateRequest(entityName: "Employee")
        update.propertiesToUpdate = ["salary": try ObjectExpression(format: "salary + 1")]
        _ = try context.execute(update)
        #expect(try employee.value(forKey: "name") as? String == "Pending")
        #expect(employee.hasChanges && context.updatedObjects.contains(employee))
    }
}
