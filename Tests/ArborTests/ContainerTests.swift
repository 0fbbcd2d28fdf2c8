import Foundation
import Testing
@testable import Arbor

/// Issue 6, item 8: the persistent container.
@Suite("Persistent container")
struct ContainerTests {
    @Test("an in-memory container: background tasks save, and the main-queue viewContext merges their inserts and changes")
    func inMemory() async throws {
        let container = PersistentContainer(name: "Employees", managedObjectModel: try employeeModel())
        container.persistentStoreDescriptions = [PersistentStoreDescription(type: .inMemory)]
        try container.loadPersistentStores()
        #expect(container.persistentStoreCoordinator.persistentStores.map(\.type) == ["memory"])
        let view = container.viewContext
        #expect(view.concurrencyType == .mainQueue && view.automaticallyMergesChangesFromParent)

        let entity = container.managedObjectModel.entity(named: "Department")!
        let id = try await container.performBackgroundTask { context in
            #expect(context.concurrencyType == .privateQueue && context.isOnContextQueue)
            let sales = ManagedObject(entity: entity, insertInto: context)
            try sales.setValue("Sales", forKey: "name")
            try sales.setValue(1, forKey: "budget")
            try context.save()
            return sales.objectID
        }
        // The view holds the object; a background change reaches it by the automatic merge.
        let keeper = ObjectKeeper()
        let held = try await view.perform(schedule: .enqueued) { () throws -> Int32? in
            keeper.object = try view.existingObject(with: id)
            return try keeper.object?.value(forKey: "budget") as? Int32
        }
        #expect(held == 1, "the view reads the background context's save")
        try await container.performBackgroundTask { context in
            try context.existingObject(with: id).setValue(2, forKey: "budget")
            try context.save()
        }
        let budget = try await view.perform(schedule: .enqueued) { try keeper.object?.value(forKey: "budget") as? Int32 }
        #expect(budget == 2)

        // The fire-and-forget form runs on a new private queue too.
        let done = DispatchSemaphore(value: 0)
        let flag = Flag()
        // (In async code the name means the async form: the fire-and-forget one is called from
        // synchronous code.)
        func schedule() {
            container.performBackgroundTask { context in
                flag.set(context.isOnContextQueue && context.persistentStoreCoordinator === container.persistentStoreCoordinator)
                done.signal()
            }
        }
        schedule()
        done.wait()
        #expect(flag.value)
    }

    @Test("a file container creates its directory and store file; reopening finds the data; a foreign file fails to load with a typed error")
    func file() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let url = URL(fileURLWithPath: directory + "/nested/store.arbor")
        let model = try employeeModel()
        do {
            let container = PersistentContainer(name: "Employees", managedObjectModel: model)
            container.persistentStoreDescriptions = [PersistentStoreDescription(url: url)]
            try container.loadPersistentStores()
            let context = container.newBackgroundContext()
            try context.performAndWait {
                let sales = ManagedObject(entity: model.entity(named: "Department")!, insertInto: context)
                try sales.setValue("Sales", forKey: "name")
                try context.save()
            }
        }
        let reopened = PersistentContainer(name: "Employees", managedObjectModel: model)
        reopened.persistentStoreDescriptions = [PersistentStoreDescription(url: url)]
        try reopened.loadPersistentStores()
        let context = reopened.newBackgroundContext()
        #expect(try context.performAndWait { try context.count(for: FetchRequest<ManagedObject>(entityName: "Department")) } == 1)

        let foreign = directory + "/foreign.arbor"
        _ = FileManager.default.createFile(atPath: foreign, contents: Data(repeating: 0x41, count: 8192))
        let broken = PersistentContainer(name: "Broken", managedObjectModel: model)
        broken.persistentStoreDescriptions = [PersistentStoreDescription(url: URL(fileURLWithPath: foreign))]
        var reported: [(PersistentStoreDescription, (any Error)?)] = []
        broken.loadPersistentStores { reported.append(($0, $1)) }
        #expect(reported.count == 1)
        #expect((reported.first?.1 as? ArborError)?.code == .storeOpen)
        #expect(PersistentContainer.defaultDirectoryURL().path.isEmpty == false)
    }
}

/// Holds an object across `perform` blocks of its context (used on that context's queue only).
final class ObjectKeeper: @unchecked Sendable {
    var object: ManagedObject?
}
