import Dispatch
import Foundation
import Testing
@testable import Arbor

/// Issue 6, item 4: child contexts (seed 001, "Parent Store").
@Suite("Parent and child contexts")
struct ParentContextTests {
    func privateContext(_ coordinator: PersistentStoreCoordinator? = nil, parent: ManagedObjectContext? = nil, name: String) -> ManagedObjectContext {
        let context = ManagedObjectContext(concurrencyType: .privateQueue)
        if let coordinator { context.persistentStoreCoordinator = coordinator }
        if let parent { context.parent = parent }
        context.name = name
        return context
    }

    func storedNames(_ stack: Stack) throws -> [String] {
        let reader = stack.context()
        var request = FetchRequest<ManagedObject>(entityName: "Department")
        request.sortDescriptors = [ObjectSortDescriptor(key: "name")]
        return try reader.fetch(request).map { try $0.value(forKey: "name") as? String ?? "" }
    }

    @Test("S001-06/S001-07/S001-02/S001-03/S003-06/S003-07: a child's save goes one level up only; the root's save reaches the store and gives the child's objects permanent IDs")
    func oneLevelUp() throws {
        let stack = try Stack()
        let root = privateContext(stack.coordinator, name: "root")
        let child = privateContext(parent: root, name: "child")
        #expect(root.parent == nil && child.parent === root)
        #expect(child.persistentStoreCoordinator === stack.coordinator, "a child has its root's coordinator")
        let entity = stack.model.entity(named: "Department")!

        // The child's object is held here: an unchanged object nobody holds leaves its context.
        let childSales = try child.performAndWait { () throws -> ManagedObject in
            let sales = ManagedObject(entity: entity, insertInto: child)
            try sales.setValue("Sales", forKey: "name")
            try child.save()
            #expect(!child.hasChanges)
            return sales
        }
        let temporary = child.performAndWait { childSales.objectID }
        #expect(temporary.isTemporaryID, "IDs stay temporary until the root saves")
        let pushed = root.performAndWait { () -> Bool in
            root.hasChanges && root.insertedObjects.map(\.objectID) == [temporary]
        }
        #expect(pushed, "the parent holds the child's object as its own unsaved insertion")
        #expect(try storedNames(stack).isEmpty, "nothing reaches the store before the root saves")

        try root.performAndWait { try root.save() }
        #expect(try storedNames(stack) == ["Sales"])
        let permanent = child.performAndWait { childSales.objectID }
        #expect(!permanent.isTemporaryID, "the root's save resolved the child's temporary ID")
        #expect(permanent == (try stack.context().fetch(FetchRequest<ManagedObject>(entityName: "Department")).first?.objectID))
    }

    @Test("S001-04: a child's fetches and faults see the parent's unsaved inserts, changes and deletions; the child's own changes come on top")
    func childSeesParent() throws {
        let stack = try Stack()
        let setup = stack.context()
        let sales = try stack.insert("Department", in: setup, ["name": "Sales", "budget": 1])
        let hr = try stack.insert("Department", in: setup, ["name": "HR", "budget": 2])
        try setup.save()

        let root = privateContext(stack.coordinator, name: "root")
        try root.performAndWait {
            try root.existingObject(with: sales.objectID).setValue(10, forKey: "budget")
            root.delete(try root.existingObject(with: hr.objectID))
            _ = try stack.insert("Department", in: root, ["name": "Research", "budget": 3])
        }
        let child = privateContext(parent: root, name: "child")
        let seen = try child.performAndWait { () throws -> [String: Int32] in
            var request = FetchRequest<ManagedObject>(entityName: "Department")
            request.sortDescriptors = [ObjectSortDescriptor(key: "name")]
            var result: [String: Int32] = [:]
            for object in try child.fetch(request) {
                result[try object.value(forKey: "name") as! String] = try object.value(forKey: "budget") as? Int32
            }
            return result
        }
        #expect(seen == ["Research": 3, "Sales": 10], "the parent's insertion and change are seen; its deletion hides HR")

        let fromFault = try child.performAndWait { try child.object(with: sales.objectID).value(forKey: "budget") as? Int32 }
        #expect(fromFault == 10)
        let count = try child.performAndWait { () throws -> Int in
            try child.existingObject(with: sales.objectID).setValue(100, forKey: "budget")
            var request = FetchRequest<ManagedObject>(entityName: "Department")
            request.predicate = try ObjectPredicate(format: "budget >= 50")
            return try child.count(for: request)
        }
        #expect(count == 1, "the child's own change is judged in memory")
    }

    @Test("S001-08: the parent does not pull a child's unsaved changes when it saves")
    func noPull() throws {
        let stack = try Stack()
        let root = privateContext(stack.coordinator, name: "root")
        let child = privateContext(parent: root, name: "child")
        try child.performAndWait { _ = try stack.insert("Department", in: child, ["name": "Unsaved"]) }
        try root.performAndWait {
            _ = try stack.insert("Department", in: root, ["name": "Root"])
            try root.save()
        }
        #expect(try storedNames(stack) == ["Root"])
        #expect(child.performAndWait { child.hasChanges })
    }

    @Test("three levels, each on its own queue, a main-queue root: saves climb one level at a time; changed properties and relationships arrive; temporary IDs resolve all the way down")
    func threeLevels() throws {
        let stack = try Stack()
        let setup = stack.context()
        let sales = try stack.insert("Department", in: setup, ["name": "Sales", "budget": 1])
        try setup.save()

        let root = ManagedObjectContext(concurrencyType: .mainQueue)
        root.persistentStoreCoordinator = stack.coordinator
        let middle = privateContext(parent: root, name: "middle")
        let leaf = privateContext(parent: middle, name: "leaf")
        let leafAda = try leaf.performAndWait { () throws -> ManagedObject in
            let department = try leaf.existingObject(with: sales.objectID)
            try department.setValue(5, forKey: "budget")
            let ada = try stack.insert("Employee", in: leaf, ["firstName": "Ada", "lastName": "Lovelace", "department": department])
            try leaf.save()
            return ada
        }
        let temporary = leaf.performAndWait { leafAda.objectID }
        #expect(middle.performAndWait { middle.insertedObjects.count == 1 && middle.updatedObjects.count == 1 })
        #expect(!root.performAndWait { root.hasChanges }, "one level at a time")
        try middle.performAndWait { try middle.save() }
        let rootSees = try root.performAndWait { () throws -> Bool in
            let ada = try #require(root.registeredObject(for: temporary))
            return try (ada.value(forKey: "department") as? ManagedObject)?.objectID == sales.objectID
                && root.updatedObjects.count == 1
        }
        #expect(rootSees)
        try root.performAndWait { try root.save() }

        let reader = stack.context()
        let savedSales = try reader.existingObject(with: sales.objectID)
        #expect(try savedSales.value(forKey: "budget") as? Int32 == 5)
        let employees = try #require(try savedSales.value(forKey: "employees") as? Set<ManagedObject>)
        #expect(try employees.map { try $0.value(forKey: "firstName") as? String } == ["Ada"])
        // The permanent ID reaches the leaf, through the middle.
        middle.performAndWait {}
        let leafID = leaf.performAndWait { leafAda.objectID }
        #expect(leafID == employees.first?.objectID)
        #expect(!leafID.isTemporaryID)
    }

    @Test("a child deletes an object of its parent, and a new one of its own; the root's save removes the row")
    func childDeletes() throws {
        let stack = try Stack()
        let setup = stack.context()
        let sales = try stack.insert("Department", in: setup, ["name": "Sales"])
        try setup.save()
        let root = privateContext(stack.coordinator, name: "root")
        let child = privateContext(parent: root, name: "child")
        try child.performAndWait {
            child.delete(try child.existingObject(with: sales.objectID))
            let scratch = try stack.insert("Department", in: child, ["name": "Scratch"])
            try child.save()
            child.delete(scratch)
            try child.save()
        }
        #expect(root.performAndWait { root.deletedObjects.count == 1 && root.insertedObjects.isEmpty })
        try root.performAndWait { try root.save() }
        #expect(try storedNames(stack).isEmpty)
    }

    @Test("S001-05/S003-03: a confinement context can be neither a parent nor a child (a programmer error that stops the program)")
    func confinementParents() async {
        await #expect(processExitsWith: .failure) {
            let child = ManagedObjectContext(concurrencyType: .privateQueue)
            child.parent = ManagedObjectContext(persistentStoreCoordinator: nil)
        }
        await #expect(processExitsWith: .failure) {
            let child = ManagedObjectContext(persistentStoreCoordinator: nil)
            child.parent = ManagedObjectContext(concurrencyType: .privateQueue)
        }
        await #expect(processExitsWith: .success) {
            let child = ManagedObjectContext(concurrencyType: .privateQueue)
            child.parent = ManagedObjectContext(concurrencyType: .mainQueue)
        }
    }

    @Test("S001-25: a child that merges automatically sees its parent's saves")
    func childMergesParentSaves() throws {
        let stack = try Stack()
        let setup = stack.context()
        let sales = try stack.insert("Department", in: setup, ["name": "Sales", "budget": 1])
        try setup.save()
        let root = privateContext(stack.coordinator, name: "root")
        let child = privateContext(parent: root, name: "child")
        child.automaticallyMergesChangesFromParent = true
        let held = try child.performAndWait { try child.existingObject(with: sales.objectID) }
        try root.performAndWait {
            try root.existingObject(with: sales.objectID).setValue(42, forKey: "budget")
            try root.save()
        }
        #expect(try child.performAndWait { try held.value(forKey: "budget") as? Int32 } == 42)
    }
}
