import ArborStore
import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// Merges never wait for another context's queue (docs/concurrency.md, "Merges never wait"):
/// contexts busy on their own queues take each other's batch requests, and remote changes, on
/// their next block or fetch, in order. Each test runs 1,000 rounds under a watchdog that ends
/// the process, naming the test, when a round makes no progress for 20 seconds (a deadlock would
/// otherwise hang the whole run).
@Suite("Merges that cannot deadlock", .serialized)
struct MergeDeadlockTests {
    static let rounds = 1_000

    /// Ends the process when ``progress()`` is not called for `patience`.
    final class Watchdog: @unchecked Sendable {
        private let lock = NSLock()
        private var last = ContinuousClock.now
        private var stopped = false

        init(_ test: String, patience: Duration = .seconds(20)) {
            let thread = Thread { [self] in
                while true {
                    usleep(50_000)
                    let (stopped, last) = lock.withLock { (self.stopped, self.last) }
                    if stopped { return }
                    if ContinuousClock.now - last > patience {
                        FileHandle.standardError.write(Data("watchdog: \(test) made no progress for \(patience): a deadlock\n".utf8))
                        exit(3)
                    }
                }
            }
            thread.start()
        }

        func progress() { lock.withLock { last = .now } }
        func stop() { lock.withLock { stopped = true } }
    }

    /// A coordinator over an in-memory store with two departments (budget 0), and their IDs.
    static func departments(_ stack: Stack) throws -> [ManagedObjectID] {
        let context = stack.context()
        let ids = try (0..<2).map { i in try stack.insert("Department", in: context, ["name": "D\(i)", "budget": Int32(0)]) }
        try context.save()
        return ids.map(\.objectID)
    }

    /// Sets the budget of department `id` to `value` by a batch update from `context`.
    static func batchBudget(_ context: ManagedObjectContext, _ id: ManagedObjectID, _ value: Int) throws {
        var request = BatchUpdateRequest(entityName: "Department")
        request.predicate = try ObjectPredicate(format: "self == %@", id)
        request.propertiesToUpdate = ["budget": .constant(.int(Int64(value)))]
        _ = try context.execute(request)
    }

    /// A private-queue context on `coordinator` that keeps the objects it registers.
    static func privateContext(_ coordinator: PersistentStoreCoordinator, _ name: String) -> ManagedObjectContext {
        let context = ManagedObjectContext(concurrencyType: .privateQueue)
        context.persistentStoreCoordinator = coordinator
        context.name = name
        context.retainsRegisteredObjects = true
        return context
    }

    /// The budgets `context` reads for `ids`, after a fetch (which merges what was posted).
    static func budgets(_ context: ManagedObjectContext, _ ids: [ManagedObjectID]) throws -> [Int32] {
        _ = try context.count(for: FetchRequest<Int>(entityName: "Department"))
        return try ids.map { try context.existingObject(with: $0).value(forKey: "budget") as! Int32 }
    }

    @Test("two private queues run batch updates at once, each inside its own block while the other is in its: neither waits, and each sees both updates at its next fetch")
    func twoPrivateQueues() throws {
        let stack = try Stack()
        let ids = try Self.departments(stack)
        let contexts = [Self.privateContext(stack.coordinator, "a"), Self.privateContext(stack.coordinator, "b")]
        for context in contexts { _ = try context.performAndWait { try Self.budgets(context, ids) } }
        let watchdog = Watchdog("twoPrivateQueues")
        defer { watchdog.stop() }
        for round in 1...Self.rounds {
            let inside = [DispatchSemaphore(value: 0), DispatchSemaphore(value: 0)]
            let done = DispatchGroup()
            let failures = Failures()
            for (index, context) in contexts.enumerated() {
                done.enter()
                context.perform {
                    defer { done.leave() }
                    // Both blocks hold their queues before either runs its batch update.
                    inside[index].signal()
                    inside[1 - index].wait()
                    do {
                        try Self.batchBudget(context, ids[index], round)
                    } catch {
                        failures.add("round \(round), \(context.name!): \(error)")
                    }
                }
            }
            done.wait()
            #expect(failures.all.isEmpty, "\(failures.all)")
            for context in contexts {
                let seen = try context.performAndWait { try Self.budgets(context, ids) }
                if seen != [Int32(round), Int32(round)] {
                    Issue.record("round \(round): \(context.name!) reads \(seen)")
                    return
                }
            }
            watchdog.progress()
        }
    }

    @Test("a background batch request runs while the main queue waits on that context (performAndWait): the main-queue context is not waited for, and its next fetch sees the update")
    func mainQueueWaitsOnBackground() throws {
        let stack = try Stack()
        let ids = try Self.departments(stack)
        let background = Self.privateContext(stack.coordinator, "background")
        let view = ManagedObjectContext(concurrencyType: .mainQueue)
        view.persistentStoreCoordinator = stack.coordinator
        view.retainsRegisteredObjects = true
        let failures = Failures()
        let ready = DispatchSemaphore(value: 0)
        DispatchQueue.main.async {
            do { _ = try Self.budgets(view, ids) } catch { failures.add("\(error)") }
            ready.signal()
        }
        ready.wait()
        let watchdog = Watchdog("mainQueueWaitsOnBackground")
        defer { watchdog.stop() }
        for round in 1...Self.rounds {
            let running = DispatchSemaphore(value: 0), mainWaits = DispatchSemaphore(value: 0), checked = DispatchSemaphore(value: 0)
            background.perform {
                running.signal()
                // The main queue is blocked in performAndWait on this context by now.
                mainWaits.wait()
                do { try Self.batchBudget(background, ids[0], round) } catch { failures.add("round \(round): \(error)") }
            }
            DispatchQueue.main.async {
                running.wait()
                mainWaits.signal()
                background.performAndWait {}
                do {
                    let seen = try Self.budgets(view, ids)
                    if seen[0] != Int32(round) { failures.add("round \(round): the view reads \(seen)") }
                } catch {
                    failures.add("round \(round): \(error)")
                }
                checked.signal()
            }
            checked.wait()
            if !failures.all.isEmpty { break }
            watchdog.progress()
        }
        #expect(failures.all.isEmpty, "\(failures.all.prefix(3))")
    }

    @Test("remote changes arrive while every context is busy, and each busy block merges a remote save into all three: nobody waits, and each context takes the changes in order (a note inserted, then deleted, is never left registered)")
    func remoteChangesWhileBusy() throws {
        let model = try ManagedObjectModel {
            Entity("Note") { Attribute("text", .string) }
        }
        var options = DatabaseOptions()
        options.fileSystem = MemoryFileSystem()
        options.lockTable = LockTable()
        let here = PersistentStoreCoordinator(managedObjectModel: model)
        try here.addNativeStore(at: "/notes.arbor", options: options)
        let there = PersistentStoreCoordinator(managedObjectModel: model)
        try there.addNativeStore(at: "/notes.arbor", options: options)
        let writer = ManagedObjectContext(persistentStoreCoordinator: there)
        let main = ManagedObjectContext(concurrencyType: .mainQueue)
        main.persistentStoreCoordinator = here
        let contexts = [Self.privateContext(here, "first"), Self.privateContext(here, "second"), main]
        for context in contexts { context.performAndWait { context.automaticallyMergesChangesFromParent = true } }
        let watchdog = Watchdog("remoteChangesWhileBusy")
        defer { watchdog.stop() }
        let failures = Failures()
        for round in 1...Self.rounds {
            // Every context busy in a block until released.
            let busy = DispatchGroup(), release = DispatchSemaphore(value: 0), done = DispatchGroup()
            // Another coordinator inserts a note, then deletes it: two remote commits.
            let note = ManagedObject(entity: model.entity(named: "Note")!, insertInto: writer)
            try note.setValue("n\(round)", forKey: "text")
            try writer.save()
            let id = note.objectID
            let uri = id.uriRepresentation()
            for context in contexts {
                busy.enter()
                done.enter()
                let body: @Sendable () -> Void = {
                    busy.leave()
                    release.wait()
                    // Each busy block hands a remote save to every context (itself included).
                    ManagedObjectContext.mergeChanges(fromRemoteContextSave: [ManagedObjectContext.NotificationKey.updatedObjects.rawValue: [uri]], into: contexts)
                    do {
                        // The remote insert and delete arrived while busy: merged in order before
                        // this fetch, so the note is not left registered.
                        let count = try context.count(for: FetchRequest<Int>(entityName: "Note"))
                        if count != 0 || context.registeredObject(for: id) != nil {
                            failures.add("round \(round), \(context.name ?? "main"): \(count) notes, registered \(context.registeredObject(for: id) != nil)")
                        }
                    } catch {
                        failures.add("round \(round): \(error)")
                    }
                    done.leave()
                }
                if context === main { DispatchQueue.main.async { context.performAndWait(body) } } else { context.perform(body) }
            }
            busy.wait()
            _ = try here.processRemoteChanges()
            writer.delete(note)
            try writer.save()
            _ = try here.processRemoteChanges()
            for _ in contexts { release.signal() }
            done.wait()
            if !failures.all.isEmpty { break }
            watchdog.progress()
        }
        #expect(failures.all.isEmpty, "\(failures.all.prefix(3))")
    }
}

/// Messages gathered from several threads.
final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var messages: [String] = []

    func add(_ message: String) { lock.withLock { messages.append(message) } }
    var all: [String] { lock.withLock { messages } }
}
