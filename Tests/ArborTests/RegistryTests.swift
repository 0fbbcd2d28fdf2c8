import Foundation
import Synchronization
import Testing
@testable import Arbor

/// The registry (unowned entries purged when their objects end), the change sets (object lists
/// with holes) and compact object IDs: the structures the bulk-insert path was rebuilt on.
/// A department that counts its `willSave` calls.
final class CountingDepartment: ManagedObject {
    var willSaves = 0
    override func willSave() {
        super.willSave()
        willSaves += 1
    }
}

@Suite("Registry and change sets")
struct RegistryTests {
    @Test("S000-01 uniquing holds while unchanged objects end and come back as new faults, many times over")
    func endedObjectsLeaveTheRegistry() throws {
        let stack = try Stack()
        let context = stack.context()
        let departments = try (0..<50).map { try stack.insert("Department", in: context, ["name": "D\($0)", "budget": $0]) }
        try context.save()
        let ids = departments.map(\.objectID)
        let reader = stack.context()
        for round in 0..<3 {
            var seen: [ObjectIdentifier] = []
            for id in ids {
                // Made, fired and dropped at once: nothing holds an unchanged object.
                let object = try reader.existingObject(with: id)
                #expect(try object.value(forKey: "name") as? String == "D\(ids.firstIndex(of: id)!)")
                seen.append(ObjectIdentifier(object))
            }
            #expect(reader.registeredObjects.isEmpty, "round \(round): every object ended and left the registry")
            #expect(stack.coordinator.rowCacheStatistics.snapshots == 0, "every snapshot a read made went with its object (saved objects hold none)")
        }
        // An object kept alive stays the one instance for its ID, among ended neighbours.
        let kept = try reader.existingObject(with: ids[7])
        for id in ids where id != ids[7] { _ = try reader.existingObject(with: id) }
        #expect(reader.object(with: ids[7]) === kept && reader.registeredObjects == [kept])
        // A changed object is held until it is saved, then held no longer.
        do {
            try reader.existingObject(with: ids[8]).setValue("changed", forKey: "name")
        }
        #expect(reader.updatedObjects.count == 1 && reader.registeredObjects.count == 2)
        try reader.save()
        #expect(reader.registeredObjects == [kept], "after its save the changed object was no longer held")
        #expect(try stack.context().existingObject(with: ids[8]).value(forKey: "name") as? String == "changed")
    }

    @Test("S000-32: the change sets keep insertion order and membership through deletes, re-inserts and compaction")
    func changeSets() throws {
        let stack = try Stack()
        let context = stack.context()
        context.propagatesDeletesAtEndOfEvent = false
        let objects = try (0..<200).map { try stack.insert("Department", in: context, ["name": "D\($0)", "budget": $0]) }
        for (index, object) in objects.enumerated() where index % 3 != 0 { context.delete(object) }
        #expect(context.insertedObjects.count == 67 && context.deletedObjects.isEmpty, "inserted then deleted objects are in neither set")
        #expect(context.inserted.objects.map { try! $0.value(forKey: "budget") as? Int32 } == stride(from: 0, to: 200, by: 3).map { Int32($0) },
                "holes closed up in order")
        // Inserted, deleted, inserted again before the deletion was processed: inserted once.
        context.insert(objects[1])
        context.insert(objects[1])
        #expect(context.insertedObjects.count == 68 && context.inserted.objects.last === objects[1])
        try context.save()
        #expect(!context.hasChanges)
        let saved = objects.filter { !$0.objectID.isTemporaryID }
        #expect(saved.count == 68)
        // Updates and deletes of saved objects move them between the sets.
        try saved[0].setValue("renamed", forKey: "name")
        #expect(context.updatedObjects == [saved[0]])
        context.delete(saved[0])
        #expect(context.updatedObjects.isEmpty && context.deletedObjects == [saved[0]])
        context.rollback()
        #expect(!context.hasChanges)
        #expect(try saved[0].value(forKey: "name") as? String == "D0")
    }

    @Test("temporary IDs: a counter per process with a random namespace; another process's IDs never equal ours")
    func temporaryIDs() throws {
        let a = ManagedObjectID(temporaryFor: "Employee"), b = ManagedObjectID(temporaryFor: "Employee")
        #expect(a != b && a.isTemporaryID && a.storeIdentifier == nil)
        let uri = a.uriRepresentation().absoluteString
        #expect(uri.hasPrefix("x-arbor://temporary/Employee/t\(ManagedObjectID.temporaryNamespace.uuidString)-"))
        // The same serial number in another namespace is another ID (with the same hash: the
        // key alone is hashed, and equality tells them apart).
        let foreign = try #require(ManagedObjectID(uri: URL(string: uri.replacingOccurrences(of: ManagedObjectID.temporaryNamespace.uuidString,
                                                                                             with: UUID().uuidString))!))
        #expect(foreign.isTemporaryID && foreign != a && foreign.hashValue == a.hashValue)
        #expect(Set([a, b, foreign]).count == 3)
        // A permanent and a temporary ID never collide, nor do rows of two stores.
        let store = UUID()
        let permanent = ManagedObjectID(entityName: "Employee", store: store, key: 1)
        #expect(permanent != ManagedObjectID(entityName: "Employee", store: UUID(), key: 1))
        #expect(permanent != ManagedObjectID(entityName: "Department", store: store, key: 1))
        for bad in ["x-arbor://temporary/Employee/t\(UUID().uuidString)", "x-arbor://temporary/Employee/t\(UUID().uuidString)-0",
                    "x-arbor://temporary/Employee/t\(UUID().uuidString)-x", "x-arbor://temporary/Employee/t\(UUID().uuidString)--3"] {
            #expect(ManagedObjectID(uri: URL(string: bad)!) == nil, "\(bad)")
        }
    }

    @Test("changed properties are a bit set: it agrees with a Set<Int> over slots past 64")
    func slotSet() {
        var bits = SlotSet(), reference = Set<Int>()
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let slot = Int(generator.next() % 200)
            if generator.next() % 3 == 0 {
                bits.remove(slot)
                reference.remove(slot)
            } else {
                bits.insert(slot)
                reference.insert(slot)
            }
            #expect(bits.contains(slot) == reference.contains(slot))
        }
        #expect(bits.slots == reference.sorted() && bits.isEmpty == reference.isEmpty)
        bits.removeAll()
        #expect(bits.isEmpty && bits.slots.isEmpty && !bits.contains(130))
    }

    @Test("S002-08: willSave runs in every save attempt, also for an object that moved to another context after a failed save")
    func willSaveAcrossContexts() throws {
        let stack = try Stack()
        let first = stack.context()
        let department = CountingDepartment(entity: stack.model.entity(named: "Department")!, insertInto: first)
        #expect(throws: ArborError.self) { try first.save() }
        #expect(department.willSaves == 1, "the failed save announced it")
        first.rollback()
        #expect(department.managedObjectContext == nil)
        try department.setValue("Sales", forKey: "name")
        let second = stack.context()
        second.insert(department)
        try second.save()
        #expect(department.willSaves == 2, "the other context's first save announced it too")
        #expect(try stack.context().existingObject(with: department.objectID).value(forKey: "name") as? String == "Sales")
    }

    @Test("S000-26: an ID naming the row's parent entity is no object (one row, one ID): existingObject throws objectNotFound")
    func idOfAnotherEntity() throws {
        let stack = try Stack()
        let context = stack.context()
        let ada = try stack.insert("Employee", in: context, ["firstName": "Ada", "lastName": "Lovelace"])
        try context.save()
        let store = try #require(stack.coordinator.persistentStores.first)
        let asPerson = store.objectID(entityName: "Person", primaryKey: ada.objectID.primaryKey!)
        let reader = stack.context()
        let error = #expect(throws: ArborError.self) { _ = try reader.existingObject(with: asPerson) }
        #expect(error?.code == .objectNotFound)
        #expect(reader.registeredObjects.isEmpty)
        #expect(try reader.existingObject(with: ada.objectID).value(forKey: "firstName") as? String == "Ada")
    }

    @Test("objects that outlive their context find no context (they hold it unowned; the context clears them as it ends)")
    func objectsOutliveTheirContext() throws {
        let stack = try Stack()
        var saved: [ManagedObject] = []
        var pending: ManagedObject?
        var fault: ManagedObject?
        var fetched: [ManagedObject] = []
        var held: ManagedObject?
        do {
            let context = stack.context()
            saved = try (0..<20).map { try stack.insert("Department", in: context, ["name": "D\($0)", "budget": $0]) }
            try context.save()
            pending = try stack.insert("Department", in: context, ["name": "pending", "budget": 1])
            let reader = stack.context()
            fetched = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Department"))
            let faulting = stack.context()
            fault = faulting.object(with: saved[0].objectID)
            let retaining = stack.context()
            retaining.retainsRegisteredObjects = true
            held = try retaining.existingObject(with: saved[1].objectID)
            #expect(fault?.managedObjectContext === faulting && held?.managedObjectContext === retaining)
        }
        // Every context has ended: saved, inserted-unsaved, fault, fetched and retained objects.
        for object in saved + fetched + [pending!, fault!, held!] {
            #expect(object.managedObjectContext == nil)
        }
        // A fault holds no values, and cannot load them (ManagedObject+Inaccessibility.swift).
        let error = #expect(throws: ArborError.self) { _ = try fault!.value(forKey: "name") }
        #expect(error?.code == .objectInaccessible && fault!.inaccessibility == .contextEnded, "\(String(describing: error))")
        // Saved values stay readable on the objects that hold them, fetched faults' included;
        // the row cache let go of them.
        #expect(try saved[3].value(forKey: "name") as? String == "D3")
        #expect(Set(try fetched.map { try $0.value(forKey: "name") as? String }) == Set((0..<20).map { "D\($0)" }))
        saved = []
        fetched = []
        fault = nil
        held = nil
        pending = nil
        #expect(stack.coordinator.rowCacheStatistics.snapshots == 0, "no snapshot is left held")
    }

    /// Objects handed across threads on purpose: only their ends happen there.
    final class Box: @unchecked Sendable {
        var objects: [ManagedObject]
        /// Set once `objects` were let go.
        let done = Atomic<Bool>(false)
        init(_ objects: [ManagedObject]) { self.objects = objects }
    }

    /// A stack with 64 saved departments, and their IDs.
    static func savedDepartments() throws -> (Stack, [ManagedObjectID]) {
        let stack = try Stack()
        let setup = stack.context()
        let inserted = try (0..<64).map { try stack.insert("Department", in: setup, ["name": "D\($0)", "budget": $0]) }
        try setup.save()
        return (stack, inserted.map(\.objectID))
    }

    @Test("objects ending on other threads while their context reads their entries: it finds each object or none, never an ended one (run under Thread Sanitizer too)")
    func objectsEndOnOtherThreadsWhileTheirContextReadsThem() async throws {
        let (stack, ids) = try Self.savedDepartments()
        let context = stack.context()
        var found = 0
        for _ in 0..<200 {
            let box = Box(try ids.map { try context.existingObject(with: $0) })
            // The objects' last references go on another thread while this one reads the
            // registry: an entry read as its object ends gives that object or nothing.
            let releaser = Task.detached {
                box.objects = []
                box.done.store(true, ordering: .releasing)
            }
            repeat {
                for id in ids {
                    if let object = context.registeredObject(for: id) {
                        #expect(object.objectID == id && object.managedObjectContext === context)
                        found += 1
                    }
                }
            } while !box.done.load(ordering: .acquiring)
            await releaser.value
            #expect(context.registeredObjects.isEmpty, "every object ended, and its entry went")
        }
        #expect(found > 0)
        #expect(stack.coordinator.rowCacheStatistics.snapshots == 0)
    }

    @Test("objects ending on other threads while their context ends: none reaches the context (run under Thread Sanitizer too)")
    func objectsEndOnOtherThreadsAsTheirContextEnds() async throws {
        let (stack, ids) = try Self.savedDepartments()
        for _ in 0..<200 {
            var context: ManagedObjectContext? = stack.context()
            let box = Box(try ids.map { try context!.existingObject(with: $0) })
            #expect(box.objects.allSatisfy { $0.managedObjectContext === context })
            // The objects' last references go on another thread as the context ends on this one.
            let releaser = Task.detached { box.objects = [] }
            context = nil
            await releaser.value
        }
        #expect(stack.coordinator.rowCacheStatistics.snapshots == 0, "every object ended and let go of its snapshot (the saved ones hold none)")
        // Objects kept past their context's end find none.
        var context: ManagedObjectContext? = stack.context()
        let kept = try ids.map { try context!.existingObject(with: $0) }
        let box = Box(Array(kept.prefix(32)))
        let releaser = Task.detached { box.objects = [] }
        context = nil
        await releaser.value
        #expect(kept.allSatisfy { $0.managedObjectContext == nil })
    }
}

