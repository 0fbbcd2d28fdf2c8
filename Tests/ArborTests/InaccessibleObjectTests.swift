import ArborStore
import Foundation
import InMemoryLogging
import Logging
import Observation
import Testing
@testable import Arbor

/// Objects that cannot load never read invented values (docs/object-graph.md, "Objects that
/// cannot load"). Seeds: 000 `reset` ("they will be invalid afterwards"), 000 `objectWithID:`
/// ("the returned object throws an exception when you access any property"), 001
/// `shouldDeleteInaccessibleFaults`, 000 `insertObject:` (a rolled-back insertion is
/// unregistered).
@Suite("Objects that cannot load")
struct InaccessibleObjectTests {
    /// A stack of the volume model with an in-memory log, and a saved volume on a shelf.
    struct Library {
        let handler = InMemoryLogHandler()
        let stack: Stack
        let volume: ManagedObjectID
        let shelf: ManagedObjectID

        init() throws {
            var observability = ObjectGraphObservability()
            observability.logger = Logger(label: "arbor.graph") { [handler] _ in handler }
            let model = try volumeModel()
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model, observability: observability)
            try coordinator.addInMemoryStore()
            stack = Stack(model: model, coordinator: coordinator)
            let context = stack.context()
            let shelf = Shelf(context: context)
            let volume = Volume(context: context)
            volume.title = "Emma"
            volume.pages = 474
            volume.copies = 3
            volume.shelf = shelf
            try context.save()
            self.volume = volume.objectID
            self.shelf = shelf.objectID
        }

        func errors() -> [InMemoryLogHandler.Entry] { handler.entries.filter { $0.level == .error } }
        func warnings() -> [InMemoryLogHandler.Entry] { handler.entries.filter { $0.level == .warning } }
    }

    /// What a reset leaves: a realized volume (with an unsaved change), a filled fault from a
    /// fetch, and a pure fault.
    static func afterReset(_ library: Library) throws -> (realized: Volume, filled: Volume, fault: Volume) {
        let context = library.stack.context()
        let realized = try #require(try context.existingObject(with: library.volume) as? Volume)
        realized.pages = 475
        let other = library.stack.context()
        let filled = try #require(try other.fetch(FetchRequest<Volume>(entityName: "Volume")).first)
        let third = library.stack.context()
        let fault = try #require(third.object(with: library.volume) as? Volume)
        context.reset()
        other.reset()
        third.reset()
        return (realized, filled, fault)
    }

    @Test("after reset, objects read the values they hold as they last held them — a fetch's filled faults included — and say why they cannot load more")
    func resetKeepsHeldValues() throws {
        let library = try Library()
        let (realized, filled, fault) = try Self.afterReset(library)
        for object in [realized, filled, fault] {
            #expect(object.inaccessibility == .contextReset && object.isInaccessible && object.managedObjectContext == nil)
        }
        #expect(realized.title == "Emma" && realized.pages == 475, "its unsaved change is what it last held")
        #expect(try realized.value(forKey: "pages") as? Int32 == 475)
        #expect(filled.title == "Emma" && filled.copies == 3, "a fetch's filled fault holds its values")
        #expect(try filled.value(forKey: "title") as? String == "Emma")
        #expect(realized.accessFailure == nil && filled.accessFailure == nil && library.errors().isEmpty)
    }

    @Test("a fault of a reset or ended context cannot load: value(forKey:) throws objectInaccessible naming the object and the cause; a typed read gives nil or zero, records the failure and logs it once",
          arguments: [ManagedObject.Inaccessibility.contextReset, .contextEnded])
    func unheldValuesFail(cause: ManagedObject.Inaccessibility) throws {
        let library = try Library()
        var fault: Volume!
        do {
            let context = library.stack.context()
            fault = try #require(context.object(with: library.volume) as? Volume)
            if cause == .contextReset { context.reset() }
        }
        #expect(fault.inaccessibility == cause)
        let error = try #require(throws: ArborError.self) { _ = try fault.value(forKey: "title") }
        #expect(error.code == .objectInaccessible && error.objectID == library.volume)
        #expect(error.message.contains(library.volume.description) && error.message.contains(cause.description), "\(error.message)")
        // Release builds: nil or zero, recorded and logged (builds with Arbor's checks stop the
        // program instead: stopsOnInaccessibleRead).
        ManagedObject.$stopsOnInaccessibleAccess.withValue(false) {
            #expect(fault.title == "" && fault.pages == nil && fault.copies == 0, "zero, not the default (1): nothing is made up")
            #expect(fault.shelf == nil)
        }
        #expect(fault.accessFailure?.code == .objectInaccessible)
        #expect(library.errors().count == 1, "logged once per object: \(library.errors().map(\.message))")
        #expect("\(library.errors().first?.metadata["arbor.object"] ?? "")" == library.volume.description)
    }

    @Test("relationships of a reset object name objects it cannot give: value(forKey:) throws, a typed read is nil or empty and recorded")
    func relationshipsFail() throws {
        let library = try Library()
        let context = library.stack.context()
        let volume = try #require(try context.existingObject(with: library.volume) as? Volume)
        let shelf = try #require(try context.existingObject(with: library.shelf) as? Shelf)
        _ = volume.shelf
        _ = shelf.books
        context.reset()
        #expect(throws: ArborError.self) { _ = try volume.value(forKey: "shelf") }
        #expect(throws: ArborError.self) { _ = try shelf.value(forKey: "books") }
        ManagedObject.$stopsOnInaccessibleAccess.withValue(false) {
            #expect(volume.shelf == nil && shelf.books.isEmpty)
        }
        #expect(volume.accessFailure?.code == .objectInaccessible && shelf.accessFailure?.code == .objectInaccessible)
    }

    @Test("an object whose context was reset or ended cannot be changed: setValue throws, a typed setter is refused and says so")
    func writesRefused() throws {
        let library = try Library()
        let (realized, _, _) = try Self.afterReset(library)
        let error = try #require(throws: ArborError.self) { try realized.setValue("Persuasion", forKey: "title") }
        #expect(error.code == .objectInaccessible)
        ManagedObject.$stopsOnInaccessibleAccess.withValue(false) { realized.title = "Persuasion" }
        #expect(realized.title == "Emma", "not set: nothing would save it")
        #expect(realized.refusal(forKey: "title")?.code == .objectInaccessible && realized.refusals.keys.sorted() == ["title"])
        #expect(realized.accessFailure?.code == .objectInaccessible)
    }

    #if ARBOR_QUEUE_CHECKS
    @Test("in builds with Arbor's checks, a typed read of an object that cannot load stops the program, naming the object and the cause")
    func stopsInCheckedBuilds() async {
        await #expect(processExitsWith: .failure) {
            let library = try! Library()
            var fault: Volume!
            do {
                let context = library.stack.context()
                fault = context.object(with: library.volume) as? Volume
            }
            _ = fault.title
        }
    }
    #endif

    @Test("the temporary ID of a rolled-back insertion: object(with:) says at once that its row is missing; it follows shouldDeleteInaccessibleFaults in a root context as in a child",
          arguments: [true, false], [false, true])
    func rolledBackTemporaryID(deletesInaccessibleFaults: Bool, child: Bool) throws {
        let library = try Library()
        let root = ManagedObjectContext(concurrencyType: .privateQueue)
        root.persistentStoreCoordinator = library.stack.coordinator
        let context: ManagedObjectContext
        if child {
            context = ManagedObjectContext(concurrencyType: .privateQueue)
            context.parent = root
        } else {
            context = root
        }
        try context.performAndWait {
            context.shouldDeleteInaccessibleFaults = deletesInaccessibleFaults
            let volume = Volume(context: context)
            volume.title = "Sanditon"
            let id = volume.objectID
            context.rollback()
            let again = try #require(context.object(with: id) as? Volume)
            #expect(again !== volume)
            if !child { #expect(again.inaccessibility == .rowMissing, "known at once") }
            if deletesInaccessibleFaults {
                #expect(try again.value(forKey: "title") == nil)
                #expect(again.isDeleted && again.inaccessibility == .rowMissing)
                #expect(again.title == "" && again.copies == 0, "nil or 0, as Core Data documents")
            } else {
                let error = try #require(throws: ArborError.self) { _ = try again.value(forKey: "title") }
                #expect(error.code == .objectNotFound)
                #expect(again.title == "" && again.accessFailure?.code == .objectNotFound, "not in silence")
            }
        }
        if deletesInaccessibleFaults {
            #expect(library.warnings().contains { "\($0.message)".contains("row that is gone") }, "said in the log, as Core Data does")
        } else {
            #expect(library.errors().count == 1)
        }
    }

    @Test("a fault whose row another context deleted: with shouldDeleteInaccessibleFaults (the default) a deleted object reading nil or zero, with a warning; without it objectNotFound, and a typed read records it")
    func missingRow() throws {
        for deletes in [true, false] {
            let library = try Library()
            let reader = library.stack.context()
            reader.shouldDeleteInaccessibleFaults = deletes
            let fault = try #require(reader.object(with: library.volume) as? Volume)
            let writer = library.stack.context()
            writer.delete(try writer.existingObject(with: library.volume))
            try writer.save()
            if deletes {
                #expect(fault.copies == 0 && fault.title == "" && fault.pages == nil)
                #expect(fault.isDeleted && fault.inaccessibility == .rowMissing && fault.accessFailure == nil)
                #expect(library.warnings().count == 1)
            } else {
                #expect(throws: ArborError.self) { _ = try fault.value(forKey: "title") }
                #expect(fault.copies == 0 && fault.accessFailure?.code == .objectNotFound)
                #expect(fault.inaccessibility == .rowMissing)
            }
        }
    }

    @Test("a typed setter's refused value keeps the old value, and says so: refusal(forKey:), Observation told, the save fails naming it")
    func refusalsSaySo() throws {
        let library = try Library()
        let context = ManagedObjectContext(concurrencyType: .mainQueue)
        context.persistentStoreCoordinator = library.stack.coordinator
        try context.performAndWait {
            let volume = try #require(try context.existingObject(with: library.volume) as? Volume)
            let told = Told()
            withObservationTracking { _ = volume.copies } onChange: { told.set() }
            volume.copies = 40_000                       // .integer16
            #expect(volume.copies == 3, "the old value")
            #expect(volume.refusal(forKey: "copies")?.code == .validationNumberTooLarge)
            #expect(told.value, "observers read it again")
            let error = try #require(throws: ArborError.self) { try context.save() }
            #expect(error.key == "copies" || error.detailedErrors.contains { $0.key == "copies" })
            volume.copies = 4
            #expect(volume.refusal(forKey: "copies") == nil && volume.refusals.isEmpty)
        }
    }
}

/// A flag set from an observation's change handler.
final class Told: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    func set() { lock.withLock { flag = true } }
    var value: Bool { lock.withLock { flag } }
}
