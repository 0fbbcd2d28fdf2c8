import Foundation
import Testing
@testable import Arbor

/// Issue 7: undo and redo (seeds 000 and 002, "Undo Management").
@Suite("Undo and redo")
struct UndoTests {
    /// A stack with a saved Sales department and its employee Ada, and a context with an undo
    /// manager.
    struct Scene {
        let stack: Stack
        let context: ManagedObjectContext
        let undo = ObjectUndoManager()
        let sales: ManagedObject
        let ada: ManagedObject

        init() throws {
            stack = try Stack()
            context = stack.context()
            sales = try stack.insert("Department", in: context, ["name": "Sales", "budget": 10])
            ada = try stack.insert("Employee", in: context, ["firstName": "Ada", "lastName": "Lovelace", "department": sales])
            try context.save()
            context.undoManager = undo
        }
    }

    @Test("S000-76/S000-78: a context has no undo manager by default; changes are still tracked and undo does nothing")
    func noUndoManager() throws {
        let stack = try Stack()
        let context = stack.context()
        #expect(context.undoManager == nil)
        let sales = try stack.insert("Department", in: context, ["name": "Sales"])
        context.processPendingChanges()
        context.undo()
        #expect(context.insertedObjects == [sales], "undo without an undo manager changes nothing")
    }

    @Test("S000-77/S000-79/S000-53/S000-49/S002-23: an attribute change is registered at processPendingChanges, undone and redone")
    func attribute() throws {
        let scene = try Scene()
        try scene.sales.setValue(20, forKey: "budget")
        #expect(!scene.undo.canUndo, "registered at the end of the event, not at each change")
        scene.context.processPendingChanges()
        #expect(scene.undo.canUndo)
        scene.context.undo()
        #expect(try scene.sales.value(forKey: "budget") as? Int32 == 10)
        #expect(!scene.context.hasChanges, "back to the committed value: no change left")
        #expect(scene.undo.canRedo)
        scene.context.redo()
        #expect(try scene.sales.value(forKey: "budget") as? Int32 == 20)
        #expect(scene.context.updatedObjects == [scene.sales])
    }

    @Test("S002-01/S002-23: a relationship change is undone at both ends")
    func relationship() throws {
        let scene = try Scene()
        let hr = try scene.stack.insert("Department", in: scene.context, ["name": "HR"])
        scene.context.processPendingChanges()
        try scene.ada.setValue(hr, forKey: "department")
        scene.context.processPendingChanges()
        #expect(set(try hr.value(forKey: "employees")) == [scene.ada])
        scene.context.undo()
        #expect(try scene.ada.value(forKey: "department") as? ManagedObject === scene.sales)
        #expect(set(try scene.sales.value(forKey: "employees")) == [scene.ada])
        #expect(set(try hr.value(forKey: "employees")).isEmpty)
        scene.context.redo()
        #expect(try scene.ada.value(forKey: "department") as? ManagedObject === hr)
        #expect(set(try scene.sales.value(forKey: "employees")).isEmpty)
        #expect(set(try hr.value(forKey: "employees")) == [scene.ada])
    }

    @Test("S000-79: insertions and deletions are undone and redone; a cascade delete is undone as one step")
    func insertAndDelete() throws {
        let scene = try Scene()
        let hr = try scene.stack.insert("Department", in: scene.context, ["name": "HR"])
        scene.context.processPendingChanges()
        scene.context.undo()
        #expect(scene.context.insertedObjects.isEmpty && hr.managedObjectContext == nil, "the insertion is undone")
        scene.context.redo()
        #expect(scene.context.insertedObjects == [hr] && hr.managedObjectContext === scene.context)

        // Deleting the department cascades to Ada (employeeModel's default rule): one step.
        scene.context.delete(scene.sales)
        scene.context.processPendingChanges()
        #expect(scene.ada.isDeleted && scene.context.deletedObjects == [scene.sales, scene.ada])
        scene.context.undo()
        #expect(!scene.sales.isDeleted && !scene.ada.isDeleted)
        #expect(scene.context.deletedObjects.isEmpty)
        #expect(try scene.ada.value(forKey: "department") as? ManagedObject === scene.sales)
        scene.context.redo()
        #expect(scene.context.deletedObjects == [scene.sales, scene.ada])
        scene.context.undo()
        try scene.context.save()
        let reader = scene.stack.context()
        #expect(try reader.count(for: FetchRequest<ManagedObject>(entityName: "Department")) == 2)
        #expect(try reader.count(for: FetchRequest<ManagedObject>(entityName: "Employee")) == 1)
    }

    @Test("S002-22: transient properties are undone too")
    func transient() throws {
        let scene = try Scene()
        try scene.ada.setValue("Ada Lovelace", forKey: "fullName")
        scene.context.processPendingChanges()
        try scene.ada.setValue("Countess", forKey: "fullName")
        scene.context.processPendingChanges()
        scene.context.undo()
        #expect(try scene.ada.value(forKey: "fullName") as? String == "Ada Lovelace")
        scene.context.undo()
        #expect(try scene.ada.value(forKey: "fullName") == nil)
    }

    @Test("S002-25: changes within an event coalesce — repeated changes undo to the value before the event; contradictory ones register nothing")
    func coalescing() throws {
        let scene = try Scene()
        for budget in 11...20 { try scene.sales.setValue(budget, forKey: "budget") }
        scene.context.processPendingChanges()
        #expect(scene.undo.undoCount == 1)
        scene.context.undo()
        #expect(try scene.sales.value(forKey: "budget") as? Int32 == 10)
        #expect(!scene.undo.canUndo)

        let ghost = try scene.stack.insert("Department", in: scene.context, ["name": "Ghost"])
        scene.context.delete(ghost)
        try scene.sales.setValue(99, forKey: "budget")
        try scene.sales.setValue(10, forKey: "budget")
        scene.context.processPendingChanges()
        #expect(!scene.undo.canUndo, "insert-then-delete and a value changed back register nothing")
    }

    @Test("S002-24/S004-16: rollback and reset clear the undo stack; a save does not, and undo after a save makes the object dirty again")
    func rollbackResetSave() throws {
        let scene = try Scene()
        try scene.sales.setValue(20, forKey: "budget")
        scene.context.processPendingChanges()
        scene.context.rollback()
        #expect(!scene.undo.canUndo && !scene.undo.canRedo)

        try scene.sales.setValue(30, forKey: "budget")
        try scene.context.save()
        #expect(scene.undo.canUndo, "a save leaves the undo stack alone")
        scene.context.undo()
        #expect(scene.context.updatedObjects == [scene.sales], "undone after the save: dirty again")
        try scene.context.save()
        #expect(try scene.stack.context().existingObject(with: scene.sales.objectID).value(forKey: "budget") as? Int32 == 10,
                "the second save writes the undone value")

        try scene.sales.setValue(40, forKey: "budget")
        scene.context.processPendingChanges()
        scene.context.reset()
        #expect(!scene.undo.canUndo)
    }

    @Test("S002-27: the seed's recipe — processPendingChanges, disable, change, processPendingChanges, enable — leaves a change that cannot be undone but is still pending")
    func disabledRegistration() throws {
        let scene = try Scene()
        try scene.sales.setValue(11, forKey: "budget")
        scene.context.processPendingChanges()
        scene.undo.disableUndoRegistration()
        try scene.ada.setValue("Byron", forKey: "lastName")
        scene.context.processPendingChanges()
        scene.undo.enableUndoRegistration()
        #expect(scene.context.hasChanges && scene.context.updatedObjects.contains(scene.ada))
        #expect(scene.undo.undoCount == 1)
        scene.context.undo()
        #expect(try scene.sales.value(forKey: "budget") as? Int32 == 10, "the registered change is undone")
        #expect(try scene.ada.value(forKey: "lastName") as? String == "Byron", "the unregistered one stays")
    }

    @Test("S002-26: an explicit group spans several events and undoes as one step")
    func explicitGrouping() throws {
        let scene = try Scene()
        scene.undo.beginUndoGrouping()
        try scene.sales.setValue(11, forKey: "budget")
        scene.context.processPendingChanges()
        try scene.ada.setValue("Byron", forKey: "lastName")
        scene.context.processPendingChanges()
        scene.undo.setActionName("Edit")
        scene.undo.endUndoGrouping()
        #expect(scene.undo.undoCount == 1 && scene.undo.undoActionName == "Edit")
        scene.context.undo()
        #expect(try scene.sales.value(forKey: "budget") as? Int32 == 10)
        #expect(try scene.ada.value(forKey: "lastName") as? String == "Lovelace")
        #expect(scene.undo.redoActionName == "Edit")
    }

    @Test("levelsOfUndo bounds the undo stack (and so the memory it holds)")
    func levels() throws {
        let scene = try Scene()
        scene.undo.levelsOfUndo = 5
        for budget in 11...30 {
            try scene.sales.setValue(budget, forKey: "budget")
            scene.context.processPendingChanges()
        }
        #expect(scene.undo.undoCount == 5)
        for _ in 0..<10 { scene.context.undo() }
        #expect(try scene.sales.value(forKey: "budget") as? Int32 == 25, "the five most recent steps undo; older ones are gone")
    }

    @Test("the undo manager on its own: closures, nested disabling, action names, a new registration clears redo")
    func standalone() {
        let manager = ObjectUndoManager()
        var value = 0
        func set(_ new: Int) {
            let old = value
            value = new
            manager.registerUndo { set(old) }
        }
        set(1)
        manager.setActionName("One")
        set(2)
        #expect(manager.undoCount == 2 && manager.undoActionName == "")
        manager.undo()
        #expect(value == 1 && manager.canRedo && manager.redoActionName == "")
        manager.undo()
        #expect(value == 0 && manager.redoActionName == "One")
        manager.redo()
        #expect(value == 1)
        set(5)
        #expect(!manager.canRedo, "a new action clears the redo stack")
        manager.disableUndoRegistration()
        manager.disableUndoRegistration()
        manager.enableUndoRegistration()
        set(6)
        #expect(!manager.isUndoRegistrationEnabled && manager.undoCount == 2)
        manager.enableUndoRegistration()
        manager.removeAllActions()
        #expect(!manager.canUndo && !manager.canRedo)
    }

    @Test("S000-49/S000-50: processPendingChanges is the one place events end — explicit calls coalesce, save and fetch call it — and a merge of another context's save is not undoable")
    func eventsAndMerges() throws {
        let scene = try Scene()
        try scene.sales.setValue(11, forKey: "budget")
        _ = try scene.context.fetch(FetchRequest<ManagedObject>(entityName: "Department"))
        #expect(scene.undo.undoCount == 1, "the fetch ended the event")
        try scene.sales.setValue(12, forKey: "budget")
        scene.context.processPendingChanges()
        scene.context.processPendingChanges()
        #expect(scene.undo.undoCount == 2, "a second call with nothing new adds nothing")
        try scene.sales.setValue(13, forKey: "budget")
        try scene.context.save()
        #expect(scene.undo.undoCount == 3, "the save ended the event")

        let other = scene.stack.context()
        let recorder = NotificationRecorder(other)
        try other.existingObject(with: scene.ada.objectID).setValue("Byron", forKey: "lastName")
        try other.save()
        let didSave = try #require(recorder.take().last { $0.name == ManagedObjectContext.didSaveObjectsNotification })
        scene.context.mergeChanges(fromContextDidSave: didSave.notification)
        #expect(try scene.ada.value(forKey: "lastName") as? String == "Byron")
        #expect(scene.undo.undoCount == 3, "the merge registered nothing")
    }

    @Test("redoing an insertion leaves an object that has since joined another context where it is (it is never registered in two)")
    func redoAfterTheObjectMoved() throws {
        let scene = try Scene()
        let other = scene.stack.context()
        var hr: ManagedObject? = try scene.stack.insert("Department", in: scene.context, ["name": "HR"])
        let id = try #require(hr?.objectID)
        scene.context.processPendingChanges()
        scene.context.undo()
        #expect(hr?.managedObjectContext == nil)
        other.insert(hr!)
        scene.context.redo()
        #expect(hr?.managedObjectContext === other && scene.context.insertedObjects.isEmpty && other.insertedObjects == [hr!])
        #expect(scene.context.registeredObject(for: id) == nil)
        // Dropped from the other context, it ends: neither context has it any more.
        other.rollback()
        hr = nil
        #expect(other.registeredObject(for: id) == nil && scene.context.registeredObject(for: id) == nil)
    }

    @Test("S002-24/S004-16: an undo or redo after a save puts back objects by their permanent IDs (the graph stays savable)")
    func undoAfterSaveUsesPermanentIDs() throws {
        let scene = try Scene()
        let dev = try scene.stack.insert("Department", in: scene.context, ["name": "Dev"])
        try scene.ada.setValue(dev, forKey: "department")
        scene.context.processPendingChanges()
        try scene.ada.setValue(scene.sales, forKey: "department")
        scene.context.processPendingChanges()
        try scene.context.save()
        #expect(!dev.objectID.isTemporaryID)
        // Undo recorded Dev by its temporary ID; the save made it permanent.
        scene.context.undo()
        #expect(try scene.ada.value(forKey: "department") as? ManagedObject === dev)
        try scene.context.save()
        let check = scene.stack.context()
        let ada = try check.existingObject(with: scene.ada.objectID)
        #expect(try (ada.value(forKey: "department") as? ManagedObject)?.value(forKey: "name") as? String == "Dev")
        scene.context.redo()
        #expect(try scene.ada.value(forKey: "department") as? ManagedObject === scene.sales)
        try scene.context.save()
    }
}

@Suite("Key paths and relationship faults")
struct KeyPathWriteTests {
    @Test("S002-02/S002-05: setValue(_:forKeyPath:) sets through to-one relationships; hasFault(forRelationshipNamed:) tells whether a relationship is loaded")
    func keyPathsAndFaults() throws {
        let stack = try Stack()
        let context = stack.context()
        let sales = try stack.insert("Department", in: context, ["name": "Sales"])
        let grace = try stack.insert("Employee", in: context, ["firstName": "Grace", "lastName": "Hopper", "department": sales])
        let ada = try stack.insert("Employee", in: context, ["firstName": "Ada", "lastName": "Lovelace", "manager": grace])
        try ada.setValue(Decimal(2000), forKeyPath: "manager.salary")
        #expect(try grace.value(forKey: "salary") as? Decimal == 2000)
        try ada.setValue(7, forKeyPath: "manager.department.budget")
        #expect(try sales.value(forKey: "budget") as? Int32 == 7)
        #expect(throws: ArborError.self) { try sales.setValue("x", forKeyPath: "employees.lastName") }
        #expect(throws: ArborError.self) { try ada.setValue("x", forKeyPath: "lastName.size") }
        try context.save()

        let reader = stack.context()
        let fault = reader.object(with: sales.objectID)
        #expect(try fault.hasFault(forRelationshipNamed: "employees"))
        _ = try fault.value(forKey: "name")
        #expect(try fault.hasFault(forRelationshipNamed: "employees"), "firing the object does not load its to-many relationships")
        _ = try fault.value(forKey: "employees")
        #expect(try !fault.hasFault(forRelationshipNamed: "employees"))
        #expect(throws: ArborError.self) { try fault.hasFault(forRelationshipNamed: "name") }
    }
}
