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
