import Foundation
import Testing
@testable import Arbor

/// The context's change lists keep their rules through every change of an object's state
/// (``ManagedObjectContext/invariantViolations()``), and builds with Arbor's checks stop where
/// one breaks (`ARBOR_INVARIANTS`, the `Checks` trait).
@Suite("Invariants of the change lists")
struct InvariantTests {
    @Test("inserting, changing, deleting, undeleting, saving and rolling back keep every rule of the change lists")
    func keptThroughChanges() throws {
        let stack = try Stack()
        let context = stack.context()
        let sales = try stack.insert("Department", in: context, ["name": "Sales", "budget": 10])
        let ops = try stack.insert("Department", in: context, ["name": "Ops", "budget": 5])
        context.processPendingChanges()
        #expect(context.invariantViolations() == [])
        try context.save()
        try sales.setValue(20, forKey: "budget")
        context.delete(ops)
        let temporary = try stack.insert("Department", in: context, ["name": "Temp", "budget": 1])
        context.delete(temporary)
        context.processPendingChanges()
        #expect(context.invariantViolations() == [])
        #expect(context.updatedObjects == [sales] && context.deletedObjects == [ops] && context.insertedObjects.isEmpty)
        try sales.setValue(10, forKey: "budget")
        context.processPendingChanges()
        #expect(context.invariantViolations() == [] && context.updatedObjects.isEmpty, "a change undone leaves the updated objects")
        context.rollback()
        #expect(context.invariantViolations() == [])
        try context.save()
        #expect(context.invariantViolations() == [] && !context.hasChanges)
    }

    @Test("a change list that breaks a rule is named, with the object and the rule")
    func violationsNamed() throws {
        let stack = try Stack()
        let context = stack.context()
        let sales = try stack.insert("Department", in: context, ["name": "Sales", "budget": 10])
        sales.insertedFlag = false
        defer { sales.insertedFlag = true }
        let problems = context.invariantViolations()
        #expect(problems.count == 1 && problems[0].contains("among the inserted objects") && problems[0].contains("not flagged inserted"), "\(problems)")
        sales.changeSlot = 3
        defer { sales.changeSlot = 0 }
        #expect(context.invariantViolations().contains { $0.contains("its changeSlot is 3") })
    }

    #if ARBOR_INVARIANTS
    @Test("builds with Arbor's checks stop at the end of the event whose change lists break a rule")
    func stopsInCheckedBuilds() async {
        await #expect(processExitsWith: .failure) {
            let stack = try! Stack()
            let context = stack.context()
            let sales = try! stack.insert("Department", in: context, ["name": "Sales", "budget": 10])
            sales.deletedFlag = true
            context.processPendingChanges()
        }
    }
    #endif
}

/// The coordinator's row cache keeps its rules through references, releases, refreshes and drops
/// (``PersistentStoreCoordinator/rowCacheViolations()``), which builds with Arbor's checks verify
/// after every save and at every release (`ARBOR_INVARIANTS`).
@Suite("Invariants of the row cache")
struct RowCacheInvariantTests {
    @Test("fetches, faults, saves in two contexts, refreshes, batch deletes and contexts ending keep every rule of the row cache")
    func keptThroughUse() throws {
        let stack = try Stack()
        let writer = stack.context()
        for index in 0..<20 { _ = try stack.insert("Department", in: writer, ["name": "D\(index)", "budget": index]) }
        try writer.save()
        do {
            let reader = stack.context()
            let departments = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Department"))
            for department in departments.prefix(5) { _ = try department.value(forKey: "name") }
            #expect(stack.coordinator.rowCacheViolations() == [])
            #expect(stack.coordinator.rowCacheStatistics.snapshots > 0)
            for department in writer.registeredObjects.prefix(3) { try department.setValue(99, forKey: "budget") }
            try writer.save()
            reader.refreshAllObjects()
            try reader.execute(BatchDeleteRequest(objectIDs: Array(departments.suffix(4).map(\.objectID))))
            #expect(stack.coordinator.rowCacheViolations() == [])
        }
        writer.reset()
        #expect(stack.coordinator.rowCacheViolations() == [])
        #expect(stack.coordinator.rowCacheStatistics.snapshots == 0, "every snapshot goes with its last holder")
    }
}
