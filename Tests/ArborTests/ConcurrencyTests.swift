import Dispatch
import Foundation
import Testing
@testable import Arbor

/// Issue 6, items 1 and 7: concurrency types, perform, performAndWait, the async perform, the
/// debug queue checks, thread-safe setters, locks and identity (seed 001, "Concurrency").
@Suite("Concurrency")
struct ConcurrencyTests {
    struct Failure: Error, Equatable {
        let code: Int
    }

    @Test("S001-13/S001-30/S001-17/S003-10/S003-11: a private-queue context runs perform and performAndWait on its own queue; perform returns at once; performAndWait is reentrant and returns or rethrows")
    func privateQueue() async throws {
        let stack = try Stack()
        let context = ManagedObjectContext(concurrencyType: .privateQueue)
        context.persistentStoreCoordinator = stack.coordinator
        #expect(context.concurrencyType == .privateQueue)
        #expect(!context.isOnContextQueue, "the test's thread is not the context's queue")

        let inside = context.performAndWait { context.isOnContextQueue }
        #expect(inside)
        let nested = context.performAndWait { context.performAndWait { context.isOnContextQueue } }
        #expect(nested, "performAndWait inside the context's own block runs at once (no deadlock)")
        #expect(throws: Failure(code: 7)) {
            try context.performAndWait { () throws(Failure) -> Int in throw Failure(code: 7) }
        }

        // perform returns at once; the block runs later, on the queue.
        let ran = DispatchSemaphore(value: 0)
        let flag = Flag()
        func schedule() {
            context.perform {
                flag.set(context.isOnContextQueue)
                ran.signal()
            }
        }
        schedule()
        ran.wait()
        #expect(flag.value)

        // The async perform returns the block's value (IDs cross queues; objects do not).
        let entity = stack.model.entity(named: "Department")!
        let id = try await context.perform { () throws -> ManagedObjectID in
            let department = ManagedObject(entity: entity, insertInto: context)
            try department.setValue("Sales", forKey: "name")
            try context.save()
            return department.objectID
        }
        #expect(!id.isTemporaryID)
        await #expect(throws: Failure(code: 3)) {
            try await context.perform { () throws(Failure) -> Int in throw Failure(code: 3) }
        }
        let name = try await context.perform { try context.existingObject(with: id).value(forKey: "name") as? String }
        #expect(name == "Sales")
    }

    @Test("S001-14/S001-16: a main-queue context runs its blocks on the main queue, and is used directly there")
    func mainQueue() async throws {
        let stack = try Stack()
        let context = ManagedObjectContext(concurrencyType: .mainQueue)
        context.persistentStoreCoordinator = stack.coordinator
        // Blocks on the main queue need not run on the main thread (on Linux they may not): the
        // test marks the main queue to see where they run.
        let key = DispatchSpecificKey<Int>()
        DispatchQueue.main.setSpecific(key: key, value: 42)
        let onMain = await context.perform(schedule: .enqueued) { DispatchQueue.getSpecific(key: key) == 42 && context.isOnContextQueue }
        #expect(onMain)
        let fromBackground = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                let outside = context.isOnContextQueue
                continuation.resume(returning: !outside && context.performAndWait { DispatchQueue.getSpecific(key: key) == 42 })
            }
        }
        #expect(fromBackground, "performAndWait from another thread runs the block on the main queue")
    }

    @Test("S001-11: private-queue contexts made per thread on one shared coordinator save concurrently; every object arrives")
    func concurrentSaves() async throws {
        let stack = try Stack()
        let coordinator = stack.coordinator
        let entity = stack.model.entity(named: "Department")!
        let contexts = 4, objects = 150
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<contexts {
                group.addTask {
                    let context = ManagedObjectContext(concurrencyType: .privateQueue)
                    context.persistentStoreCoordinator = coordinator
                    context.name = "importer \(worker)"
                    for batch in 0..<3 {
                        try await context.perform {
                            for i in 0..<(objects / 3) {
                                let department = ManagedObject(entity: entity, insertInto: context)
                                try department.setValue("d\(worker)-\(batch)-\(i)", forKey: "name")
                            }
                            try context.save()
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let reader = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let names = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Department")).map { try $0.value(forKey: "name") as! String }
        #expect(names.count == contexts * objects)
        #expect(Set(names).count == contexts * objects, "no object lost or written twice")
    }

    @Test("readers fetch and fire faults on their queues while writers save on theirs; every read sees whole saves")
    func readersAndWriters() async throws {
        let stack = try Stack()
        let coordinator = stack.coordinator
        let entity = stack.model.entity(named: "Department")!
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<2 {
                group.addTask {
                    let context = ManagedObjectContext(concurrencyType: .privateQueue)
                    context.persistentStoreCoordinator = coordinator
                    for batch in 0..<10 {
                        try await context.perform {
                            // Each save writes 20 departments: readers must never see part of one.
                            for i in 0..<20 {
                                let department = ManagedObject(entity: entity, insertInto: context)
                                try department.setValue("w\(writer)-\(batch)-\(i)", forKey: "name")
                            }
                            try context.save()
                            context.reset()
                        }
                    }
                }
            }
            for reader in 0..<2 {
                group.addTask {
                    let context = ManagedObjectContext(concurrencyType: .privateQueue)
                    context.persistentStoreCoordinator = coordinator
                    context.stalenessInterval = reader == 0 ? 0 : -1
                    for _ in 0..<15 {
                        try await context.perform {
                            let departments = try context.fetch(FetchRequest<ManagedObject>(entityName: "Department"))
                            var perSave: [String: Int] = [:]
                            for department in departments {
                                let name = try department.value(forKey: "name") as! String
                                perSave[String(name.split(separator: "-").prefix(2).joined(separator: "-")), default: 0] += 1
                            }
                            #expect(perSave.values.allSatisfy { $0 == 20 }, "a fetch saw part of a save: \(perSave)")
                            context.reset()
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let count = try ManagedObjectContext(persistentStoreCoordinator: coordinator).count(for: FetchRequest<ManagedObject>(entityName: "Department"))
        #expect(count == 2 * 10 * 20)
    }

    @Test("S001-15: setters of a queue-based context may be called from any thread while its queue works")
    func settersFromAnyThread() async throws {
        let stack = try Stack()
        let context = ManagedObjectContext(concurrencyType: .privateQueue)
        context.persistentStoreCoordinator = stack.coordinator
        let entity = stack.model.entity(named: "Department")!
        func schedule() {
            context.perform {
                for i in 0..<300 {
                    let department = ManagedObject(entity: entity, insertInto: context)
                    try? department.setValue("d\(i)", forKey: "name")
                    _ = context.hasChanges
                }
            }
        }
        schedule()
        DispatchQueue.concurrentPerform(iterations: 200) { i in
            context.name = "context \(i)"
            context.stalenessInterval = Double(i)
            context.retainsRegisteredObjects = i % 2 == 0
            context.userInfo = ["round": i]
        }
        context.stalenessInterval = 5
        context.name = "done"
        let (inserted, staleness, name) = context.performAndWait { (context.insertedObjects.count, context.stalenessInterval, context.name) }
        #expect(inserted == 300 && staleness == 5 && name == "done")
    }

    @Test("S000-34/S000-35/S000-36/S003-08: lock, unlock and tryLock: a recursive lock, held by one thread at a time")
    func locks() {
        // Synchronous on purpose: a recursive lock belongs to a thread, and an async test may
        // resume on another thread after each await.
        let context = ManagedObjectContext(concurrencyType: .privateQueue)
        func onAnotherThread(_ body: @escaping @Sendable () -> Bool) -> Bool {
            let done = DispatchSemaphore(value: 0)
            let result = Flag()
            Thread.detachNewThread {
                result.set(body())
                done.signal()
            }
            done.wait()
            return result.value
        }
        context.lock()
        #expect(context.tryLock(), "the holding thread may take it again")
        context.unlock()
        #expect(!onAnotherThread { context.tryLock() }, "another thread cannot take a held lock")
        context.unlock()
        #expect(onAnotherThread {
            let taken = context.tryLock()
            if taken { context.unlock() }
            return taken
        })
    }

    @Test("S001-20/S003-12/S003-13/S003-01/S003-02/S003-04: identity — concurrency type (confinement for init(persistentStoreCoordinator:), used directly), name, user info, coordinator; a new coordinator resets the context")
    func identity() throws {
        let stack = try Stack()
        let context = ManagedObjectContext(persistentStoreCoordinator: stack.coordinator)
        #expect(context.concurrencyType == .confinement && context.isOnContextQueue)
        context.name = "editor"
        context.userInfo["owner"] = "tests"
        #expect(context.name == "editor" && context.userInfo["owner"] as? String == "tests")
        let object = try stack.insert("Department", in: context, ["name": "Sales"])
        context.persistentStoreCoordinator = stack.coordinator
        #expect(context.insertedObjects == [object], "setting the same coordinator changes nothing")
        let other = try Stack()
        context.persistentStoreCoordinator = other.coordinator
        #expect(context.persistentStoreCoordinator === other.coordinator)
        #expect(context.registeredObjects.isEmpty && !context.hasChanges, "the objects belonged to the old coordinator")
    }

    #if ARBOR_QUEUE_CHECKS
    @Test("S003-14: debug builds stop a context or its objects (those a notification carries too) used outside its queue, naming the context and the call")
    func queueChecks() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let context = ManagedObjectContext(concurrencyType: .privateQueue)
            context.name = "importer"
            _ = context.hasChanges
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("hasChanges") && message.contains("\"importer\"") && message.contains("perform"), "\(message)")
        await #expect(processExitsWith: .failure) {
            let model = try! ManagedObjectModel { Entity("Item") { Attribute("title", .string) } }
            let context = ManagedObjectContext(concurrencyType: .privateQueue)
            let item = context.performAndWait { ManagedObject(entity: model.entity(named: "Item")!, insertInto: context) }
            _ = try? item.value(forKey: "title")
        }
        await #expect(processExitsWith: .success) {
            let context = ManagedObjectContext(concurrencyType: .privateQueue)
            context.performAndWait { _ = context.hasChanges }
        }
    }
    #endif
}

/// A Bool set on one thread and read on another.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var stored = false
    var value: Bool { lock.withLock { stored } }
    func set(_ value: Bool) { lock.withLock { stored = value } }
}
