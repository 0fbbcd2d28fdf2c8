import Dispatch
import Foundation
import Testing
@testable import Arbor

/// Records the notifications one context posts (synchronously, on the posting thread).
final class NotificationRecorder: @unchecked Sendable {
    struct Entry {
        let notification: Notification
        let change: ContextChange
        var name: Notification.Name { notification.name }
        let userInfo: [AnyHashable: Any]?

        func objects(_ key: ManagedObjectContext.NotificationKey) -> Set<ManagedObject> {
            userInfo?[key.rawValue] as? Set<ManagedObject> ?? []
        }
    }

    private let lock = NSLock()
    private var recorded: [Entry] = []
    private var tokens: [any NSObjectProtocol] = []

    init(_ context: ManagedObjectContext) {
        for name in [ManagedObjectContext.didChangeObjectsNotification, ManagedObjectContext.willSaveObjectsNotification,
                     ManagedObjectContext.didSaveObjectsNotification] {
            tokens.append(NotificationCenter.default.addObserver(forName: name, object: context, queue: nil) { [weak self] notification in
                guard let self, let change = ContextChange(notification) else { return }
                let entry = Entry(notification: notification, change: change, userInfo: notification.userInfo)
                self.lock.withLock { self.recorded.append(entry) }
            })
        }
    }

    deinit {
        for token in tokens { NotificationCenter.default.removeObserver(token) }
    }

    /// The entries recorded since the last call.
    func take() -> [Entry] {
        lock.withLock {
            defer { recorded = [] }
            return recorded
        }
    }
}

/// Issue 6, items 2 and 3: the notifications a context posts, and merging another context's save
/// (seed 000 "Notifications", 004 "Change Management").
@Suite("Notifications and merging")
struct NotificationTests {
    @Test("S000-92/S000-93/S000-94/S000-81/S000-11/S001-09: objects-did-change comes from processPendingChanges with the event's inserted, updated and deleted objects; never for fetched objects")
    func objectsDidChange() throws {
        let stack = try Stack()
        let context = stack.context()
        let recorder = NotificationRecorder(context)
        let sales = try stack.insert("Department", in: context, ["name": "Sales"])
        #expect(recorder.take().isEmpty, "nothing is posted before the event ends (S000-11: the notifications are the only signal, and come at the event's end)")
        // S001-09: notifications name their context; an observer of this one hears no other.
        let neighbour = stack.context()
        _ = try stack.insert("Department", in: neighbour, ["name": "Elsewhere"])
        neighbour.processPendingChanges()
        #expect(recorder.take().isEmpty)
        context.processPendingChanges()
        var posted = recorder.take()
        #expect(posted.count == 1)
        #expect(posted.first?.name == ManagedObjectContext.didChangeObjectsNotification)
        #expect(posted.first?.objects(.insertedObjects) == [sales])
        #expect(posted.first?.change.insertedObjectIDs == [sales.objectID])
        context.processPendingChanges()
        #expect(recorder.take().isEmpty, "an event that changed nothing posts nothing")

        // Inserted and deleted within one event: reported as neither.
        let ghost = try stack.insert("Department", in: context, ["name": "Ghost"])
        context.delete(ghost)
        context.processPendingChanges()
        #expect(recorder.take().isEmpty)

        try context.save()
        _ = recorder.take()
        try sales.setValue("Marketing", forKey: "name")
        try sales.setValue(7, forKey: "budget")
        context.processPendingChanges()
        posted = recorder.take()
        #expect(posted.map(\.name) == [ManagedObjectContext.didChangeObjectsNotification])
        #expect(posted.first?.objects(.updatedObjects) == [sales], "two changes of one object: reported once")
        context.delete(sales)
        context.processPendingChanges()
        #expect(recorder.take().first?.change.deletedObjectIDs == [sales.objectID])
        context.rollback()
        _ = recorder.take()

        // A fetch (and firing faults) registers objects without posting anything (S000-94).
        let reader = stack.context()
        let readerRecorder = NotificationRecorder(reader)
        let fetched = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Department"))
        _ = try fetched.first?.value(forKey: "name")
        reader.processPendingChanges()
        #expect(fetched.count == 1)
        #expect(readerRecorder.take().isEmpty)
    }

    @Test("S000-12/S000-95/S000-96/S000-13/S004-13: save posts objects-did-change, will-save (no user info), then did-save with what it committed; a failed save posts no did-save")
    func saveNotifications() throws {
        let stack = try Stack()
        let context = stack.context()
        let sales = try stack.insert("Department", in: context, ["name": "Sales"])
        let ada = try stack.insert("Employee", in: context, ["firstName": "Ada", "lastName": "Lovelace", "department": sales])
        try context.save()
        let recorder = NotificationRecorder(context)

        let bob = try stack.insert("Employee", in: context, ["firstName": "Bob", "lastName": "Smith", "department": sales])
        let never = try stack.insert("Employee", in: context, ["firstName": "Never", "lastName": "Saved"])
        context.processPendingChanges()
        context.delete(never)
        context.delete(ada)
        try context.save()
        let posted = recorder.take()
        #expect(posted.map(\.name) == [ManagedObjectContext.didChangeObjectsNotification, ManagedObjectContext.didChangeObjectsNotification,
                                       ManagedObjectContext.willSaveObjectsNotification, ManagedObjectContext.didSaveObjectsNotification])
        #expect(posted[2].userInfo == nil, "will-save has no user info")
        let didSave = posted[3]
        #expect(didSave.objects(.insertedObjects) == [bob])
        #expect(didSave.change.insertedObjectIDs == [bob.objectID] && !bob.objectID.isTemporaryID, "inserted objects carry their permanent IDs")
        #expect(didSave.objects(.deletedObjects) == [ada], "an object inserted and deleted without a save is not in did-save (S000-13)")
        // S004-14: the department's employees changed because of the deletion: it is updated.
        #expect(didSave.objects(.updatedObjects).contains(sales))

        // A save that fails validation posts will-save but no did-save.
        try sales.setValue("", forKey: "name")
        #expect(throws: ArborError.self) { try context.save() }
        let failed = recorder.take().map(\.name)
        #expect(failed.contains(ManagedObjectContext.willSaveObjectsNotification))
        #expect(!failed.contains(ManagedObjectContext.didSaveObjectsNotification))
    }

    @Test("S000-95/S000-96: did-save lists every object the save inserted, whether one event or several made them (it reuses the event's set only when it holds exactly those)")
    func didSaveInsertedAcrossEvents() throws {
        let stack = try Stack()
        let context = stack.context()
        let recorder = NotificationRecorder(context)
        func insertedBy(_ entries: [NotificationRecorder.Entry], _ name: Notification.Name) -> [Set<ManagedObject>] {
            entries.filter { $0.name == name }.map { $0.objects(.insertedObjects) }
        }
        // One event made both: objects-did-change and did-save list the same two.
        let a = try stack.insert("Department", in: context, ["name": "A"])
        let b = try stack.insert("Department", in: context, ["name": "B"])
        try context.save()
        var posted = recorder.take()
        #expect(insertedBy(posted, ManagedObjectContext.didChangeObjectsNotification) == [[a, b]])
        #expect(insertedBy(posted, ManagedObjectContext.didSaveObjectsNotification) == [[a, b]])
        // Two events: the save's own event reports the last one; did-save lists all three.
        let c = try stack.insert("Department", in: context, ["name": "C"])
        context.processPendingChanges()
        let d = try stack.insert("Department", in: context, ["name": "D"])
        let e = try stack.insert("Department", in: context, ["name": "E"])
        try context.save()
        posted = recorder.take()
        #expect(insertedBy(posted, ManagedObjectContext.didChangeObjectsNotification) == [[c], [d, e]])
        #expect(insertedBy(posted, ManagedObjectContext.didSaveObjectsNotification) == [[c, d, e]])
        // A failed save, then one that succeeds after a fix: did-save lists what that save inserted.
        let bad = try stack.insert("Department", in: context, ["name": ""])
        let good = try stack.insert("Department", in: context, ["name": "G"])
        #expect(throws: ArborError.self) { try context.save() }
        context.delete(bad)
        try context.save()
        posted = recorder.take()
        #expect(insertedBy(posted, ManagedObjectContext.didSaveObjectsNotification) == [[good]])
    }

    @Test("S000-82/S001-28: refresh reports refreshed objects (updated when they have changes of their own); reset reports invalidated-all; rollback reports what it restored and dropped")
    func refreshResetRollback() throws {
        let stack = try Stack()
        let context = stack.context()
        let sales = try stack.insert("Department", in: context, ["name": "Sales"])
        let hr = try stack.insert("Department", in: context, ["name": "HR"])
        try context.save()
        let recorder = NotificationRecorder(context)

        context.refresh(sales, mergeChanges: false)
        context.processPendingChanges()
        #expect(recorder.take().first?.objects(.refreshedObjects) == [sales])

        try hr.setValue(3, forKey: "budget")
        context.processPendingChanges()
        _ = recorder.take()
        context.refresh(hr, mergeChanges: true)
        context.processPendingChanges()
        let refreshed = recorder.take().first
        #expect(refreshed?.objects(.updatedObjects) == [hr], "a refreshed object with changes of its own is reported as updated")
        #expect(refreshed?.objects(.refreshedObjects).isEmpty == true)

        let new = try stack.insert("Department", in: context, ["name": "New"])
        context.processPendingChanges()
        _ = recorder.take()
        context.rollback()
        let rolledBack = recorder.take().first
        #expect(rolledBack?.objects(.refreshedObjects) == [hr])
        #expect(rolledBack?.objects(.invalidatedObjects) == [new])

        context.reset()
        let reset = recorder.take()
        #expect(reset.count == 1 && reset[0].change.invalidatedAllObjects)
        #expect(reset[0].userInfo?[ManagedObjectContext.NotificationKey.invalidatedAllObjects.rawValue] as? Bool == true)
    }

    @Test("S003-09/S000-50/S001-18: every perform block ends an event (objects-did-change without an explicit call), so does a fetch; blocks run one after another in the order given")
    func eventsEndWithBlocks() throws {
        let stack = try Stack()
        let context = ManagedObjectContext(concurrencyType: .privateQueue)
        context.persistentStoreCoordinator = stack.coordinator
        let recorder = NotificationRecorder(context)
        let entity = stack.model.entity(named: "Department")!
        let order = Order()
        let done = DispatchSemaphore(value: 0)
        func schedule() {
            for index in 0..<20 {
                context.perform {
                    let department = ManagedObject(entity: entity, insertInto: context)
                    try? department.setValue("D\(index)", forKey: "name")
                    order.append(index)
                    if index == 19 { done.signal() }
                }
            }
        }
        schedule()
        done.wait()
        context.performAndWait {}
        #expect(order.values == Array(0..<20), "FIFO")
        let events = recorder.take()
        #expect(events.count == 20 && events.allSatisfy { $0.change.insertedObjectIDs.count == 1 }, "one event per block")

        // A fetch ends the event before it reads.
        let posted = try context.performAndWait { () throws -> Int in
            _ = ManagedObject(entity: entity, insertInto: context)
            _ = try context.fetch(FetchRequest<ManagedObject>(entityName: "Department"))
            return recorder.take().count
        }
        #expect(posted == 1)
    }

    @Test("context.changes delivers every notification as a Sendable ContextChange, in order")
    func changeStream() async throws {
        let stack = try Stack()
        let context = ManagedObjectContext(concurrencyType: .privateQueue)
        context.persistentStoreCoordinator = stack.coordinator
        let stream = context.changes
        let entity = stack.model.entity(named: "Department")!
        let id = try await context.perform { () throws -> ManagedObjectID in
            let department = ManagedObject(entity: entity, insertInto: context)
            try department.setValue("Sales", forKey: "name")
            try context.save()
            return department.objectID
        }
        var kinds: [ContextChange.Kind] = []
        var saved: ContextChange?
        for await change in stream {
            kinds.append(change.kind)
            if change.kind == .didSave {
                saved = change
                break
            }
        }
        #expect(kinds == [.objectsDidChange, .willSave, .didSave])
        #expect(saved?.insertedObjectIDs == [id])
    }

    @Test("S004-12/S000-37/S000-38/S003-16: another context's save changes nothing here until merged; the merge refreshes updated objects (local changes on top), faults in inserted ones and deletes deleted ones")
    func mergeFromDidSave() throws {
        let stack = try Stack()
        let writer = stack.context()
        let sales = try stack.insert("Department", in: writer, ["name": "Sales", "budget": 10])
        let ada = try stack.insert("Employee", in: writer, ["firstName": "Ada", "lastName": "Lovelace", "department": sales])
        try writer.save()

        let reader = stack.context()
        let readerSales = try reader.existingObject(with: sales.objectID)
        let readerAda = try reader.existingObject(with: ada.objectID)
        try readerSales.setValue("Sales EU", forKey: "name")

        let writerRecorder = NotificationRecorder(writer)
        try sales.setValue(99, forKey: "budget")
        try sales.setValue("Sales Worldwide", forKey: "name")
        let bob = try stack.insert("Employee", in: writer, ["firstName": "Bob", "lastName": "Smith", "department": sales])
        writer.delete(ada)
        try writer.save()
        #expect(try readerSales.value(forKey: "budget") as? Int32 == 10, "S004-12: no merge, no change")
        #expect(!readerAda.isDeleted)

        reader.processPendingChanges()
        let recorder = NotificationRecorder(reader)
        // S000-38/S003-16: the merge takes a did-save; a will-save (000's typo) changes nothing.
        let written = writerRecorder.take()
        let willSave = try #require(written.first { $0.name == ManagedObjectContext.willSaveObjectsNotification })
        reader.mergeChanges(fromContextDidSave: willSave.notification)
        #expect(try readerSales.value(forKey: "budget") as? Int32 == 10 && recorder.take().isEmpty)
        reader.mergeChanges(fromContextDidSave: try #require(written.last { $0.name == ManagedObjectContext.didSaveObjectsNotification }).notification)
        #expect(try readerSales.value(forKey: "budget") as? Int32 == 99, "the saved value is merged in")
        #expect(try readerSales.value(forKey: "name") as? String == "Sales EU", "this context's unsaved change stays on top")
        #expect(readerSales.hasChanges)
        #expect(readerAda.isDeleted && readerAda.managedObjectContext == nil, "the deleted object is deleted here")
        #expect(reader.registeredObject(for: ada.objectID) == nil)
        #expect(!reader.deletedObjects.contains(readerAda), "the deletion is not left pending: the row is gone already")
        let readerBob = try #require(reader.registeredObject(for: bob.objectID), "the inserted object is faulted in")
        #expect(readerBob.isFault && !reader.insertedObjects.contains(readerBob))
        let merged = recorder.take()
        #expect(merged.count == 1)
        #expect(merged.first?.change.insertedObjectIDs == [bob.objectID])
        #expect(merged.first?.change.deletedObjectIDs == [ada.objectID])
        #expect(merged.first?.objects(.updatedObjects).contains(readerSales) == true)
        try reader.save()
        #expect(try stack.context().existingObject(with: sales.objectID).value(forKey: "name") as? String == "Sales EU")
    }

    @Test("S001-25/S003-15: automaticallyMergesChangesFromParent merges the saves of other root contexts of the coordinator, on the merging context's queue, by object ID")
    func automaticMerge() throws {
        let stack = try Stack()
        let viewer = ManagedObjectContext(concurrencyType: .privateQueue)
        viewer.persistentStoreCoordinator = stack.coordinator
        viewer.automaticallyMergesChangesFromParent = true
        #expect(viewer.automaticallyMergesChangesFromParent)
        let viewerRecorder = NotificationRecorder(viewer)
        let importer = ManagedObjectContext(concurrencyType: .privateQueue)
        importer.persistentStoreCoordinator = stack.coordinator
        let entity = stack.model.entity(named: "Department")!

        let id = try importer.performAndWait {
            let department = ManagedObject(entity: entity, insertInto: importer)
            try department.setValue("Sales", forKey: "name")
            try importer.save()
            return department.objectID
        }
        viewer.performAndWait {}
        let merged = viewerRecorder.take()
        #expect(merged.map(\.change.insertedObjectIDs) == [[id]], "the viewer merged the insertion and told its observers")
        // Keep the viewer's object alive and loaded, then change it from the importer.
        let kept = try viewer.performAndWait { try viewer.existingObject(with: id) }
        try importer.performAndWait {
            try importer.existingObject(with: id).setValue(500, forKey: "budget")
            try importer.save()
        }
        let budget = try viewer.performAndWait { try kept.value(forKey: "budget") as? Int32 }
        #expect(budget == 500)

        viewer.automaticallyMergesChangesFromParent = false
        try importer.performAndWait {
            try importer.existingObject(with: id).setValue(7, forKey: "budget")
            try importer.save()
        }
        #expect(try viewer.performAndWait { try kept.value(forKey: "budget") as? Int32 } == 500, "merging was turned off")
    }

    @Test("S004-08: a save on another coordinator of the same file merges by object ID, reading the rows afresh; mergeChanges(fromRemoteContextSave:) takes URIs")
    func mergeAcrossCoordinators() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/shared.arbor"
        let first = try Stack(path: path)
        let model = first.model
        let second = try Stack(model: model, path: path)
        let writer = first.context()
        let sales = try first.insert("Department", in: writer, ["name": "Sales", "budget": 1])
        try writer.save()

        let reader = second.context()
        let readerSales = try reader.existingObject(with: sales.objectID)
        let writerRecorder = NotificationRecorder(writer)
        try sales.setValue(2, forKey: "budget")
        try writer.save()
        reader.mergeChanges(fromContextDidSave: try #require(writerRecorder.take().last { $0.name == ManagedObjectContext.didSaveObjectsNotification }).notification)
        #expect(try readerSales.value(forKey: "budget") as? Int32 == 2)

        try sales.setValue(3, forKey: "budget")
        try writer.save()
        ManagedObjectContext.mergeChanges(fromRemoteContextSave: [ManagedObjectContext.NotificationKey.updatedObjects.rawValue: [sales.objectID.uriRepresentation()]],
                                          into: [reader])
        #expect(try readerSales.value(forKey: "budget") as? Int32 == 3)
    }
}

/// Integers appended from a context's queue, read from the test.
final class Order: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [Int] = []
    func append(_ value: Int) { lock.withLock { stored.append(value) } }
    var values: [Int] { lock.withLock { stored } }
}
