import Dispatch
import Foundation
import Testing
@testable import Arbor

/// Issue 6, item 9: several private-queue contexts (and two processes) incrementing one counter
/// at once. Optimistic locking must turn every lost update into a reported conflict: each
/// increment a save acknowledges is in the final value, and each refused save carries the
/// counter's conflict record.
@Suite("Concurrent saves under stress")
struct ConcurrentSaveStressTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Counter") {
                Attribute("name", .string).required()
                Attribute("value", .integer64).defaultValue(Int64(0))
            }
        }
    }

    /// What a context's increments came to.
    struct Tally: Sendable {
        var saved = 0
        var conflicts = 0
        /// Conflicts whose error did not name exactly the counter (must stay 0).
        var unexplained = 0
    }

    /// Increments the counter `times` times from a new private-queue context on `coordinator`:
    /// read, add one, save; a refused save is counted, the counter refreshed from the store, and
    /// the increment tried again.
    static func increment(_ id: ManagedObjectID, times: Int, on coordinator: PersistentStoreCoordinator) throws -> Tally {
        try increment(id, on: coordinator, while: { $0.saved < times })
    }

    /// Increments the counter while `going` says so: read, add one, `meet`, save, `meet` again;
    /// a refused save is counted and the counter refreshed from the store.
    static func increment(_ id: ManagedObjectID, on coordinator: PersistentStoreCoordinator, while going: (Tally) -> Bool,
                          meet: () -> Void = {}) throws -> Tally {
        let context = ManagedObjectContext(concurrencyType: .privateQueue)
        context.persistentStoreCoordinator = coordinator
        context.stalenessInterval = 0
        return try context.performAndWait { () throws -> Tally in
            let counter = try context.existingObject(with: id)
            var tally = Tally()
            while going(tally) {
                let value = try counter.value(forKey: "value") as! Int64
                try counter.setValue(value + 1, forKey: "value")
                meet()
                do {
                    try context.save()
                    tally.saved += 1
                } catch let error as ArborError where error.code == .mergeConflict {
                    tally.conflicts += 1
                    if error.conflicts.map(\.objectID) != [id] || error.conflicts.first?.newVersionNumber ?? 0 <= error.conflicts.first?.oldVersionNumber ?? 0 {
                        tally.unexplained += 1
                    }
                    context.refresh(counter, mergeChanges: false)
                }
                meet()
            }
            return tally
        }
    }

    static func makeCounter(on coordinator: PersistentStoreCoordinator, model: ManagedObjectModel) throws -> ManagedObjectID {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let counter = ManagedObject(entity: model.entity(named: "Counter")!, insertInto: context)
        try counter.setValue("hits", forKey: "name")
        try context.save()
        return counter.objectID
    }

    static func value(of id: ManagedObjectID, on coordinator: PersistentStoreCoordinator) throws -> Int64 {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        context.stalenessInterval = 0
        return try context.existingObject(with: id).value(forKey: "value") as! Int64
    }

    @Test("four private-queue contexts on one coordinator increment one counter in lockstep: each round one save wins and the other three are reported conflicts; none is lost")
    func lockstep() throws {
        let model = try Self.model()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try coordinator.addNativeStore(at: directory + "/counter.arbor")
        let id = try Self.makeCounter(on: coordinator, model: model)

        // Each round every context reads the counter, all meet, then all save: all read the
        // same value, so exactly one save can be right.
        let contexts = 4, rounds = 25
        let barrier = Barrier(parties: contexts)
        let tallies = Tallies()
        let threads = (0..<contexts).map { _ in
            Thread {
                tallies.add(Result {
                    try Self.increment(id, on: coordinator, while: { $0.saved + $0.conflicts < rounds }, meet: barrier.wait)
                })
                barrier.leave()
            }
        }
        for thread in threads { thread.start() }
        barrier.waitForDepartures()
        let all = try tallies.all.map { try $0.get() }
        #expect(all.map(\.saved).reduce(0, +) == rounds, "one save per round")
        #expect(all.map(\.conflicts).reduce(0, +) == rounds * (contexts - 1), "every other save of the round was refused and reported")
        #expect(all.allSatisfy { $0.unexplained == 0 }, "every refusal carried the counter's conflict record")
        #expect(try Self.value(of: id, on: coordinator) == Int64(rounds))
    }

    @Test("four private-queue contexts on one coordinator increment one counter freely: no acknowledged save is lost")
    func oneCoordinator() throws {
        let model = try Self.model()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try coordinator.addNativeStore(at: directory + "/counter.arbor")
        let id = try Self.makeCounter(on: coordinator, model: model)

        let contexts = 4, times = 100
        let tallies = Tallies()
        DispatchQueue.concurrentPerform(iterations: contexts) { _ in
            tallies.add(Result { try Self.increment(id, times: times, on: coordinator) })
        }
        let all = try tallies.all.map { try $0.get() }
        #expect(all.map(\.saved) == Array(repeating: times, count: contexts))
        #expect(all.allSatisfy { $0.unexplained == 0 }, "every refused save carried the counter's conflict record")
        #expect(try Self.value(of: id, on: coordinator) == Int64(contexts * times), "no acknowledged increment was lost")
    }

    @Test("two processes, each with its own coordinator, increment one counter in one file: no acknowledged save is lost")
    func twoProcesses() async throws {
        let model = try Self.model()
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/counter.arbor"
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addNativeStore(at: path)
        let id = try Self.makeCounter(on: coordinator, model: model)
        let uri = id.uriRepresentation()
        let times = 150

        // The other process increments through a coordinator of its own while this one does.
        async let other = #expect(processExitsWith: .success) { [path = path as String, uri = uri as URL, times = times as Int] in
            let model = try! ConcurrentSaveStressTests.model()
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try! coordinator.addNativeStore(at: path)
            let id = coordinator.managedObjectID(forURIRepresentation: uri)!
            // Tell the test this process is ready, so that both increment at once.
            _ = FileManager.default.createFile(atPath: path + ".ready", contents: Data())
            let tally = try! ConcurrentSaveStressTests.increment(id, times: times, on: coordinator)
            if tally.unexplained > 0 { exit(2) }
        }
        // Wait (bounded) for the other process to be ready, then increment alongside it. The
        // wait sleeps as a task: blocking a thread of the cooperative pool could keep the task
        // that starts the other process from running until the wait ran out.
        let deadline = Date().addingTimeInterval(120)
        while !FileManager.default.fileExists(atPath: path + ".ready") && Date() < deadline { try await Task.sleep(for: .milliseconds(1)) }
        let tallies = Tallies()
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            tallies.add(Result { try Self.increment(id, times: times, on: coordinator) })
        }
        _ = await other
        let all = try tallies.all.map { try $0.get() }
        #expect(all.allSatisfy { $0.saved == times && $0.unexplained == 0 })
        #expect(try Self.value(of: id, on: coordinator) == Int64(3 * times), "both processes' acknowledged increments are all there")
    }
}

/// Results gathered from several threads.
final class Tallies: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [Result<ConcurrentSaveStressTests.Tally, any Error>] = []

    func add(_ result: Result<ConcurrentSaveStressTests.Tally, any Error>) {
        lock.withLock { results.append(result) }
    }

    var all: [Result<ConcurrentSaveStressTests.Tally, any Error>] { lock.withLock { results } }
}

/// A reusable meeting point for a fixed number of threads (a test's choreography).
final class Barrier: @unchecked Sendable {
    private let condition = NSCondition()
    private let parties: Int
    private var waiting = 0
    private var generation = 0
    private var departed = 0

    init(parties: Int) { self.parties = parties }

    /// Waits until every party has arrived.
    func wait() {
        condition.lock()
        defer { condition.unlock() }
        let current = generation
        waiting += 1
        if waiting == parties {
            waiting = 0
            generation += 1
            condition.broadcast()
            return
        }
        while generation == current { condition.wait() }
    }

    /// A party is done.
    func leave() {
        condition.lock()
        departed += 1
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until every party is done.
    func waitForDepartures() {
        condition.lock()
        while departed < parties { condition.wait() }
        condition.unlock()
    }
}
