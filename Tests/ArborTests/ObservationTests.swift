import Foundation
import Observation
import Synchronization
import Testing
@testable import Arbor

/// Issue 28, item 7: managed objects work with Swift's Observation framework
/// (docs/observation.md): `withObservationTracking` sees changes made through setters, undo,
/// refresh and merges.
@Suite("Observation")
struct ObservationTests {
    final class Employee: ManagedObject {
        @Managed("name") var name: String?
        @Managed("salary") var salary: Int64
    }

    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Employee", class: Employee.self) {
                Attribute("name", .string)
                Attribute("salary", .integer64).required().defaultValue(Int64(0))
            }
        }
    }

    /// A context of `stack` whose objects report to Observation.
    static func observed(_ stack: Stack) -> ManagedObjectContext {
        let context = stack.context()
        context.isObservationEnabled = true
        return context
    }

    /// Whether `change` makes the tracking of `read` fire.
    static func fires(_ read: () -> Void, after change: () throws -> Void) rethrows -> Bool {
        let fired = Atomic<Bool>(false)
        withObservationTracking(read) { fired.store(true, ordering: .relaxed) }
        try change()
        return fired.load(ordering: .relaxed)
    }

    @Test("a read property's setter fires the tracking; another property's, or another object's, does not")
    func setters() throws {
        let stack = try Stack(model: try Self.model())
        let context = Self.observed(stack)
        let ada = Employee(entity: stack.model.entity(named: "Employee")!, insertInto: context)
        let grace = Employee(entity: stack.model.entity(named: "Employee")!, insertInto: context)
        ada.name = "Ada"
        grace.name = "Grace"
        try context.save()
        #expect(Self.fires({ _ = ada.name }, after: { ada.name = "Ada L." }))
        #expect(!Self.fires({ _ = ada.name }, after: { ada.salary = 10 }))
        #expect(!Self.fires({ _ = ada.name }, after: { grace.name = "G." }))
        #expect(try Self.fires({ _ = try? ada.value(forKey: "salary") }, after: { try ada.setValue(Int64(20), forKey: "salary") }))
        // Setting the same value is no change.
        #expect(!Self.fires({ _ = ada.name }, after: { ada.name = "Ada L." }))
    }

    @Test("undo and redo fire the tracking of what they change")
    func undo() throws {
        let stack = try Stack(model: try Self.model())
        let context = Self.observed(stack)
        context.undoManager = ObjectUndoManager()
        let ada = Employee(entity: stack.model.entity(named: "Employee")!, insertInto: context)
        ada.name = "Ada"
        try context.save()
        ada.name = "Changed"
        context.processPendingChanges()
        #expect(Self.fires({ _ = ada.name }, after: { context.undo() }))
        #expect(ada.name == "Ada")
        #expect(Self.fires({ _ = ada.name }, after: { context.redo() }))
        #expect(ada.name == "Changed")
    }

    @Test("a rollback fires the tracking of the values it puts back")
    func rollback() throws {
        let stack = try Stack(model: try Self.model())
        let context = Self.observed(stack)
        let ada = Employee(entity: stack.model.entity(named: "Employee")!, insertInto: context)
        ada.name = "Ada"
        try context.save()
        ada.name = "Unsaved"
        #expect(Self.fires({ _ = ada.name }, after: { context.rollback() }))
        #expect(ada.name == "Ada")
    }

    @Test("a save whose conflict the merge policy settles with the store's values fires the tracking of the values it replaces")
    func conflictSettled() throws {
        let stack = try Stack(model: try Self.model())
        let context = Self.observed(stack)
        context.mergePolicy = MergePolicy(merge: .mergeByPropertyStoreTrump)
        let ada = Employee(entity: stack.model.entity(named: "Employee")!, insertInto: context)
        ada.name = "Ada"
        try context.save()
        _ = ada.salary
        let other = stack.context()
        let there = try #require(try other.existingObject(with: ada.objectID) as? Employee)
        there.salary = 99
        try other.save()
        ada.salary = 5
        #expect(try Self.fires({ _ = ada.salary }, after: { try context.save() }))
        #expect(ada.salary == 99, "the store's value won")
    }

    @Test("a refresh, and a merge of another context's save, fire the tracking")
    func refreshAndMerge() throws {
        let stack = try Stack(model: try Self.model())
        let context = Self.observed(stack)
        let ada = Employee(entity: stack.model.entity(named: "Employee")!, insertInto: context)
        ada.name = "Ada"
        try context.save()
        #expect(Self.fires({ _ = ada.salary }, after: { context.refresh(ada, mergeChanges: false) }))
        #expect(ada.name == "Ada")
        let other = stack.context()
        let there = try #require(try other.existingObject(with: ada.objectID) as? Employee)
        there.salary = 99
        try other.save()
        #expect(Self.fires({ _ = ada.salary }, after: {
            ManagedObjectContext.mergeChanges(fromRemoteContextSave: [ManagedObjectContext.NotificationKey.updatedObjectIDs.rawValue: [ada.objectID]], into: [context])
        }))
        #expect(ada.salary == 99)
    }

    @Test("an object only written (an import's) makes no registrar; one read does")
    func registrarOnlyWhenRead() throws {
        let stack = try Stack(model: try Self.model())
        let context = Self.observed(stack)
        let written = Employee(entity: stack.model.entity(named: "Employee")!, insertInto: context)
        written.name = "W"
        #expect(written.observationRegistrar == nil)
        _ = written.name
        #expect(written.observationRegistrar != nil)
        // Off (a background context's default), reads make none and report nothing.
        let background = stack.context()
        background.isObservationEnabled = false
        let quiet = Employee(entity: stack.model.entity(named: "Employee")!, insertInto: background)
        quiet.name = "Q"
        #expect(!Self.fires({ _ = quiet.name }, after: { quiet.name = "R" }))
        #expect(quiet.observationRegistrar == nil)
        #expect(ManagedObjectContext(concurrencyType: .mainQueue).isObservationEnabled)
        #expect(!ManagedObjectContext(concurrencyType: .privateQueue).isObservationEnabled)
    }
}

/// The pattern docs/observation.md shows for observing fetch results from async code.
extension ManagedObjectContext {
    /// The results of `request` now, then again after every change of the context.
    func results<T: Decodable & Sendable>(of request: FetchRequest<T>) -> AsyncStream<[T]> {
        AsyncStream { continuation in
            let fetch: @Sendable () -> Void = { [weak self] in
                guard let self else { return }
                self.perform {
                    if let values = try? self.fetch(request) { continuation.yield(values) }
                }
            }
            nonisolated(unsafe) let observer = NotificationCenter.default.addObserver(forName: ManagedObjectContext.didChangeObjectsNotification,
                                                                                      object: self, queue: nil) { _ in fetch() }
            continuation.onTermination = { _ in NotificationCenter.default.removeObserver(observer) }
            fetch()
        }
    }
}

extension ObservationTests {
    struct Row: Decodable, Sendable, Equatable {
        let name: String?
        let salary: Int64
    }

    @Test("the documented pattern for async code: a stream of fetched values, fetched again after another context's save is merged")
    func asyncResults() async throws {
        let stack = try Stack(model: try Self.model())
        let writer = stack.context()
        let first = Employee(entity: stack.model.entity(named: "Employee")!, insertInto: writer)
        first.name = "Ada"
        try writer.save()
        let reader = ManagedObjectContext(concurrencyType: .privateQueue)
        reader.performAndWait {
            reader.persistentStoreCoordinator = stack.coordinator
            reader.automaticallyMergesChangesFromParent = true
        }
        var request = FetchRequest<Row>(entityName: "Employee")
        request.sortDescriptors = [ObjectSortDescriptor(key: "name")]
        var iterator = reader.results(of: request).makeAsyncIterator()
        #expect(await iterator.next() == [Row(name: "Ada", salary: 0)])
        let second = Employee(entity: stack.model.entity(named: "Employee")!, insertInto: writer)
        second.name = "Grace"
        second.salary = 7
        try writer.save()
        var latest = await iterator.next()
        // A merge may announce more than once; the stream settles on the saved rows.
        while latest != [Row(name: "Ada", salary: 0), Row(name: "Grace", salary: 7)], let next = await iterator.next() { latest = next }
        #expect(latest == [Row(name: "Ada", salary: 0), Row(name: "Grace", salary: 7)])
    }
}
