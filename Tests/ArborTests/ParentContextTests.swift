import Dispatch
import Foundation
import Testing
@testable import Arbor

/// A private-queue context, on `coordinator` or under `parent`.
func privateContext(_ coordinator: PersistentStoreCoordinator? = nil, parent: ManagedObjectContext? = nil, name: String) -> ManagedObjectContext {
    let context = ManagedObjectContext(concurrencyType: .privateQueue)
    if let coordinator { context.persistentStoreCoordinator = coordinator }
    if let parent { context.parent = parent }
    context.name = name
    return context
}

/// The names of the departments in the store, sorted.
func storedNames(_ stack: Stack) throws -> [String] {
    let reader = stack.context()
    var request = FetchRequest<ManagedObject>(entityName: "Department")
    request.sortDescriptors = [ObjectSortDescriptor(key: "name")]
    return try reader.fetch(request).map { try $0.value(forKey: "name") as? String ?? "" }
}

/// Root, middle and leaf contexts in a chain, and a department "a" the leaf inserted and saved
/// into the middle.
func chainWithNewDepartment(_ stack: Stack) throws -> (root: ManagedObjectContext, middle: ManagedObjectContext, leaf: ManagedObjectContext, sales: ManagedObject) {
    let root = privateContext(stack.coordinator, name: "root")
    let middle = privateContext(parent: root, name: "middle")
    let leaf = privateContext(parent: middle, name: "leaf")
    let sales = try leaf.performAndWait {
        let sales = try stack.insert("Department", in: leaf, ["name": "a"])
        try leaf.save()
        return sales
    }
    return (root, middle, leaf, sales)
}

/// Issue 6, item 4: child contexts (seed 001, "Parent Store").
@Suite("Parent and child contexts")
struct ParentContextTests {
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

/// Fixes found in review: permanent IDs reaching a child mid-block, nested blocks of a parent and
/// its child on one thread, to-many changes carried as additions and removals, unique values
/// traded within a save.
@Suite("Parent and child contexts: edge cases")
struct ParentContextEdgeTests {
    static func tagModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Post") {
                Attribute("title", .string).required()
                Relationship("tags", to: "Tag", inverse: "posts").toMany()
            }
            Entity("Tag") {
                Attribute("name", .string).required()
                Relationship("posts", to: "Post", inverse: "tags").toMany()
                Unique("name")
            }
        }
    }

    /// A post tagged t1 and t2, saved.
    static func taggedPost(_ stack: Stack) throws -> (post: ManagedObjectID, t1: ManagedObjectID, t2: ManagedObjectID) {
        let context = stack.context()
        let t1 = try stack.insert("Tag", in: context, ["name": "t1"])
        let t2 = try stack.insert("Tag", in: context, ["name": "t2"])
        let post = try stack.insert("Post", in: context, ["title": "P"])
        try post.setValue(Set([t1, t2]), forKey: "tags")
        try context.save()
        return (post.objectID, t1.objectID, t2.objectID)
    }

    static func storedTags(_ stack: Stack, _ post: ManagedObjectID) throws -> Set<String> {
        let reader = stack.context()
        let tags = try reader.existingObject(with: post).value(forKey: "tags") as? Set<ManagedObject> ?? []
        return Set(try tags.map { try $0.value(forKey: "name") as? String ?? "" })
    }

    @Test("a child block that saves, has the root save, changes the object again and saves again loses nothing (also after obtainPermanentIDs in the parent)")
    func childSavesAgain() throws {
        for usePermanentIDs in [false, true] {
            let stack = try Stack()
            let root = ManagedObjectContext(concurrencyType: .privateQueue)
            root.persistentStoreCoordinator = stack.coordinator
            let child = ManagedObjectContext(concurrencyType: .privateQueue)
            child.parent = root
            try child.performAndWait {
                let sales = try stack.insert("Department", in: child, ["name": "a"])
                try child.save()
                try root.performAndWait {
                    if usePermanentIDs { try root.obtainPermanentIDs(for: Array(root.insertedObjects)) }
                    try root.save()
                }
                try sales.setValue("b", forKey: "name")
                try child.save()
                #expect(!sales.objectID.isTemporaryID)
                try root.performAndWait { try root.save() }
            }
            let reader = stack.context()
            let names = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Department")).map { try $0.value(forKey: "name") as? String }
            #expect(names == ["b"], "obtainPermanentIDs: \(usePermanentIDs)")
        }
    }

    @Test("S001-06/S000-44: a grandchild's save that names an object by the temporary ID the root's save has just replaced lands in the middle context")
    func grandchildSaveAfterRootSave() throws {
        let stack = try Stack()
        let (root, middle, leaf, sales) = try chainWithNewDepartment(stack)
        try middle.performAndWait { try middle.save() }
        try middle.performAndWait {
            // The root saves while the middle is busy: the permanent IDs wait in its mailbox,
            // and the leaf, not told yet, saves under the temporary ID.
            try root.performAndWait { try root.save() }
            try rename(sales, in: leaf)
        }
        try saveUpAndExpectRenamed(stack, middle, root)
    }

    @Test("S001-06: a child's change to a new object its parent passed up and let go (unchanged there) still lands in the parent")
    func childChangeToAnObjectTheParentLetGo() throws {
        let stack = try Stack()
        let (root, middle, leaf, sales) = try chainWithNewDepartment(stack)
        // The middle passes Sales up; unchanged there now, nobody holds its instance.
        try middle.performAndWait { try middle.save() }
        #expect(middle.performAndWait { middle.registeredObjects.isEmpty })
        try rename(sales, in: leaf)
        try saveUpAndExpectRenamed(stack, middle, root)
    }

    /// Names `sales` "b" in `leaf` and saves the leaf.
    private func rename(_ sales: ManagedObject, in leaf: ManagedObjectContext) throws {
        try leaf.performAndWait {
            try sales.setValue("b", forKey: "name")
            try leaf.save()
        }
    }

    /// Saves `middle`, then `root`, and expects the store to hold the renamed department only.
    private func saveUpAndExpectRenamed(_ stack: Stack, _ middle: ManagedObjectContext, _ root: ManagedObjectContext) throws {
        try middle.performAndWait { try middle.save() }
        try root.performAndWait { try root.save() }
        #expect(try storedNames(stack) == ["b"])
    }

    @Test("S000-44…S000-47: obtainPermanentIDs in a child gives an object its parent already has one identity in both")
    func permanentIDsInAChild() throws {
        let stack = try Stack()
        let root = privateContext(stack.coordinator, name: "root")
        let child = privateContext(parent: root, name: "child")
        let (sales, hr) = try child.performAndWait {
            let sales = try stack.insert("Department", in: child, ["name": "a"])
            try child.save()
            // HR is new in the child only; Sales is in the root too.
            let hr = try stack.insert("Department", in: child, ["name": "HR"])
            try child.obtainPermanentIDs(for: [sales, hr])
            #expect(!sales.objectID.isTemporaryID && !hr.objectID.isTemporaryID)
            try sales.setValue("b", forKey: "name")
            try child.save()
            return (sales, hr)
        }
        let rootIDs = root.performAndWait { Set(root.insertedObjects.map(\.objectID)) }
        #expect(rootIDs == [sales.objectID, hr.objectID], "the root knows both objects by the IDs the child has")
        try root.performAndWait { try root.save() }
        let reader = stack.context()
        #expect(try reader.existingObject(with: sales.objectID).value(forKey: "name") as? String == "b")
        #expect(try reader.existingObject(with: hr.objectID).value(forKey: "name") as? String == "HR")
        let count = try reader.count(for: FetchRequest<ManagedObject>(entityName: "Department"))
        #expect(count == 2)
    }

    @Test("a parent's block may use a child whose block uses the parent, on one thread: no trap, no deadlock")
    func nestedBlocks() throws {
        let stack = try Stack()
        let root = ManagedObjectContext(concurrencyType: .privateQueue)
        root.persistentStoreCoordinator = stack.coordinator
        let child = ManagedObjectContext(concurrencyType: .privateQueue)
        child.parent = root
        let count = try root.performAndWait {
            _ = try stack.insert("Department", in: root, ["name": "Sales"])
            return try child.performAndWait { () throws -> Int in
                _ = try stack.insert("Department", in: child, ["name": "HR"])
                try child.save()
                return try child.count(for: FetchRequest<ManagedObject>(entityName: "Department"))
            }
        }
        #expect(count == 2)
        #expect(root.performAndWait { root.insertedObjects.count } == 2)
    }

    @Test("a pending to-many change survives refreshAllObjects and a merge as additions and removals: the removal is written, and another context's removal is not undone")
    func toManyDeltas() throws {
        let stack = try Stack(model: try Self.tagModel())
        let (post, t1, t2) = try Self.taggedPost(stack)

        // Own removal, then refreshAllObjects (which keeps pending changes): the removal is saved.
        let context = stack.context()
        let p = try context.existingObject(with: post)
        try p.mutableSetValue(forKey: "tags").remove(try context.existingObject(with: t1))
        context.refreshAllObjects()
        try context.save()
        #expect(try Self.storedTags(stack, post) == ["t2"])

        // This context adds t3; another removes t2 and saves; the merge keeps both changes.
        let editor = stack.context()
        let editorPost = try editor.existingObject(with: post)
        let t3 = try stack.insert("Tag", in: editor, ["name": "t3"])
        try editorPost.mutableSetValue(forKey: "tags").insert(t3)
        let other = stack.context()
        let recorder = NotificationRecorder(other)
        try other.existingObject(with: post).mutableSetValue(forKey: "tags").remove(try other.existingObject(with: t2))
        try other.save()
        let didSave = try #require(recorder.take().last { $0.name == ManagedObjectContext.didSaveObjectsNotification })
        editor.mergeChanges(fromContextDidSave: didSave.notification)
        try editor.save()
        #expect(try Self.storedTags(stack, post) == ["t3"], "t2's removal by the other context stands; t3 is added")
    }

    @Test("a child's to-many change lands in its parent as additions and removals over the parent's own change")
    func childToManyDelta() throws {
        let stack = try Stack(model: try Self.tagModel())
        let (post, t1, _) = try Self.taggedPost(stack)
        let root = ManagedObjectContext(concurrencyType: .privateQueue)
        root.persistentStoreCoordinator = stack.coordinator
        let child = ManagedObjectContext(concurrencyType: .privateQueue)
        child.parent = root
        // The child loads the tags first; then the parent removes t1 (unsaved).
        let held = try child.performAndWait { () throws -> ManagedObject in
            let p = try child.existingObject(with: post)
            _ = try p.value(forKey: "tags")
            return p
        }
        try root.performAndWait {
            try root.existingObject(with: post).mutableSetValue(forKey: "tags").remove(try root.existingObject(with: t1))
        }
        try child.performAndWait {
            let t3 = try stack.insert("Tag", in: child, ["name": "t3"])
            try held.mutableSetValue(forKey: "tags").insert(t3)
            try child.save()
        }
        try root.performAndWait { try root.save() }
        #expect(try Self.storedTags(stack, post) == ["t2", "t3"], "the parent's removal of t1 stands")
    }

    @Test("S001-25: a child that merges automatically sees its siblings' saves into the shared parent")
    func siblingMerges() throws {
        let stack = try Stack()
        let setup = stack.context()
        let sales = try stack.insert("Department", in: setup, ["name": "Sales", "budget": 1])
        try setup.save()
        let root = ManagedObjectContext(concurrencyType: .privateQueue)
        root.persistentStoreCoordinator = stack.coordinator
        let viewer = ManagedObjectContext(concurrencyType: .privateQueue)
        viewer.parent = root
        viewer.automaticallyMergesChangesFromParent = true
        let editor = ManagedObjectContext(concurrencyType: .privateQueue)
        editor.parent = root
        let held = try viewer.performAndWait { try viewer.existingObject(with: sales.objectID) }
        try editor.performAndWait {
            try editor.existingObject(with: sales.objectID).setValue(7, forKey: "budget")
            try editor.save()
        }
        #expect(try viewer.performAndWait { try held.value(forKey: "budget") as? Int32 } == 7)
    }

    @Test("two saved objects trade unique values in one save")
    func tradeUniqueValues() throws {
        let stack = try Stack()
        let context = stack.context()
        let a = try stack.insert("Department", in: context, ["name": "A"])
        let b = try stack.insert("Department", in: context, ["name": "B"])
        try context.save()
        try a.setValue("B", forKey: "name")
        try b.setValue("A", forKey: "name")
        try context.save()
        #expect(try stack.context().existingObject(with: a.objectID).value(forKey: "name") as? String == "B")
    }
}

/// A store that forwards to a native store, and refuses saves while `failing` is set.
final class FailingStore: PersistentStore, @unchecked Sendable {
    let base: NativeStore
    var failing = false

    init(_ base: NativeStore) { self.base = base }

    var identifier: UUID { base.identifier }
    var type: String { base.type }
    var path: String? { base.path }
    var configurationName: String? { base.configurationName }
    func row(for objectID: ManagedObjectID) throws -> StoreRow? { try base.row(for: objectID) }
    func relatedObjectIDs(of objectID: ManagedObjectID, relationship: RelationshipDescription) throws -> [ManagedObjectID] {
        try base.relatedObjectIDs(of: objectID, relationship: relationship)
    }
    func allocatePrimaryKeys(for entity: EntityDescription, count: Int) throws -> [Int64] { try base.allocatePrimaryKeys(for: entity, count: count) }
    func save(_ changes: StoreChanges) throws -> StoreSaveResult {
        if failing { throw ArborError(.storeSave, "the disk is full (simulated)") }
        return try base.save(changes)
    }
    func objectID(entityName: String, primaryKey: Int64) -> ManagedObjectID { base.objectID(entityName: entityName, primaryKey: primaryKey) }
    func fetch(_ request: StoreFetch) throws -> [(ManagedObjectID, StoreRow)] { try base.fetch(request) }
    func count(_ request: StoreFetch) throws -> Int { try base.count(request) }
    func explain(_ request: StoreFetch) throws -> QueryPlan { try base.explain(request) }
}

@Suite("Saves over several stores")
struct MultiStoreSaveTests {
    /// A model of two configurations, a coordinator with a store for each (`catalog` for
    /// products, `logs` for entries: native ones unless wrapped), a new product and a new entry.
    struct TwoStores {
        let model: ManagedObjectModel
        let coordinator: PersistentStoreCoordinator
        let context: ManagedObjectContext
        let product: ManagedObject
        let entry: ManagedObject

        init(catalog wrapCatalog: Bool = false, logs wrapLogs: Bool = false) throws {
            model = try ManagedObjectModel(configurations: ["Catalog": ["Product"], "Logs": ["Entry"]]) {
                Entity("Product") {
                    Attribute("name", .string)
                    Unique("name")
                }
                Entity("Entry") { Attribute("text", .string) }
            }
            coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            let catalog = try NativeStore.inMemory(model: model, configuration: "Catalog")
            coordinator.addPersistentStore(wrapCatalog ? FailingStore(catalog) : catalog)
            let logs = try NativeStore.inMemory(model: model, configuration: "Logs")
            coordinator.addPersistentStore(wrapLogs ? FailingStore(logs) : logs)
            context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            product = ManagedObject(entity: model.entity(named: "Product")!, insertInto: context)
            try product.setValue("lamp", forKey: "name")
            entry = ManagedObject(entity: model.entity(named: "Entry")!, insertInto: context)
            try entry.setValue("first", forKey: "text")
        }

        func count(_ entity: String) throws -> Int {
            try ManagedObjectContext(persistentStoreCoordinator: coordinator).count(for: FetchRequest<ManagedObject>(entityName: entity))
        }
    }

    @Test("a later store refusing its part before the commits: the native store written first keeps nothing, every change stays pending, and saving again writes each object once")
    func laterStoreRefuses() throws {
        let stores = try TwoStores(logs: true)
        let logs = try #require(stores.coordinator.persistentStores.compactMap { $0 as? FailingStore }.first)
        logs.failing = true
        let error = try #require(throws: ArborError.self) { try stores.context.save() }
        #expect(error.code == .storeSave && !error.message.contains("still pending"), "\(error)")
        #expect(try stores.count("Product") == 0, "the catalog's transaction rolled back")
        #expect(stores.product.objectID.isTemporaryID && stores.entry.objectID.isTemporaryID)
        #expect(stores.context.insertedObjects == [stores.product, stores.entry])

        logs.failing = false
        try stores.context.save()
        #expect(!stores.context.hasChanges)
        #expect(try stores.count("Product") == 1 && stores.count("Entry") == 1)
    }

    @Test("a store of another kind commits its part on its own: when a later store fails, its objects are saved in the context too, the rest stays pending, and saving again writes nothing twice")
    func partialSave() throws {
        let stores = try TwoStores(catalog: true, logs: true)
        let logs = try #require(stores.coordinator.persistentStores.compactMap { $0 as? FailingStore }.first { $0.configurationName == "Logs" })
        logs.failing = true
        let error = try #require(throws: ArborError.self) { try stores.context.save() }
        #expect(error.code == .storeSave && error.message.contains("still pending"))
        #expect(!stores.product.objectID.isTemporaryID && !stores.product.isInserted, "the first store's object is saved")
        #expect(stores.entry.objectID.isTemporaryID && stores.context.insertedObjects == [stores.entry], "the failed store's object is pending")

        logs.failing = false
        try stores.context.save()
        #expect(!stores.context.hasChanges)
        #expect(try stores.count("Product") == 1, "nothing written twice")
        #expect(try stores.count("Entry") == 1)
    }

    @Test("issue 28 item 1: the conflicts of every store come back from one write pass, and no store keeps anything until they are settled")
    func conflictsOfEveryStore() throws {
        let stores = try TwoStores()
        try stores.context.save()
        // Another context changes the product and the entry, and saves.
        let other = ManagedObjectContext(persistentStoreCoordinator: stores.coordinator)
        // (Held, so that the coordinator's cache keeps their rows.)
        let theirs = [try other.existingObject(with: stores.product.objectID), try other.existingObject(with: stores.entry.objectID)]
        try theirs[0].setValue("desk", forKey: "name")
        try theirs[1].setValue("theirs", forKey: "text")
        try other.save()
        // This context changes both too (a locking conflict in each store), and adds an entry.
        try stores.product.setValue("chair", forKey: "name")
        try stores.entry.setValue("mine", forKey: "text")
        let note = ManagedObject(entity: stores.model.entity(named: "Entry")!, insertInto: stores.context)
        try note.setValue("note", forKey: "text")
        let error = try #require(throws: ArborError.self) { try stores.context.save() }
        #expect(error.code == .mergeConflict)
        #expect(Set(error.conflicts.map(\.objectID)) == [stores.product.objectID, stores.entry.objectID], "both stores' conflicts")
        #expect(error.conflicts.allSatisfy { $0.oldVersionNumber == 1 && $0.newVersionNumber == 2 && $0.cachedSnapshot?.version == 2 })
        #expect(try stores.count("Entry") == 1, "nothing written")
        withExtendedLifetime(theirs) {}

        stores.context.mergePolicy = MergePolicy(merge: .mergeByPropertyStoreTrump)
        try stores.context.save()
        #expect(try stores.count("Entry") == 2)
        #expect(try stores.entry.value(forKey: "text") as? String == "theirs")

        // A uniqueness conflict in the catalog beside a new entry in the logs: the record
        // names the stored holder, and the logs keep nothing.
        stores.context.mergePolicy = .error
        let lamp = ManagedObject(entity: stores.model.entity(named: "Product")!, insertInto: stores.context)
        try lamp.setValue("desk", forKey: "name")
        let extra = ManagedObject(entity: stores.model.entity(named: "Entry")!, insertInto: stores.context)
        try extra.setValue("extra", forKey: "text")
        let refused = try #require(throws: ArborError.self) { try stores.context.save() }
        let record = try #require(refused.constraintConflicts.first)
        #expect(refused.code == .constraintConflict && refused.constraintConflicts.count == 1)
        #expect(record.conflictingObjectIDs == [lamp.objectID] && record.databaseObjectID == stores.product.objectID)
        #expect(record.databaseSnapshot?.attributes["name"] == .string("desk"))
        #expect(try stores.count("Entry") == 2)
    }
}
