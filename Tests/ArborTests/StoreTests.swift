import ArborStore
import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// A coordinator on an in-memory store (or a native store on a file) for the employee model.
struct Stack {
    let model: ManagedObjectModel
    let coordinator: PersistentStoreCoordinator

    /// - Parameter rowLayout: the row layout of a new store (nil: the default, which
    ///   `ARBOR_NEW_ROW_LAYOUT` may change); tests of one layout's bytes name it.
    init(model: ManagedObjectModel? = nil, path: String? = nil, rowLayout: RowFormat.Layout? = nil) throws {
        self.model = try model ?? employeeModel()
        coordinator = PersistentStoreCoordinator(managedObjectModel: self.model)
        if let rowLayout {
            var options = DatabaseOptions()
            if path == nil {
                options.fileSystem = MemoryFileSystem()
                options.lockTable = LockTable()
            }
            coordinator.addPersistentStore(try NativeStore(path: path ?? "/memory.arbor", type: path == nil ? "memory" : "native", model: self.model,
                                                           configuration: nil, options: options, newRowLayout: rowLayout))
        } else if let path {
            try coordinator.addNativeStore(at: path)
        } else {
            try coordinator.addInMemoryStore()
        }
    }

    /// A stack on a coordinator made elsewhere (a store on a simulated disk, say).
    init(model: ManagedObjectModel, coordinator: PersistentStoreCoordinator) {
        self.model = model
        self.coordinator = coordinator
    }

    func context() -> ManagedObjectContext { ManagedObjectContext(persistentStoreCoordinator: coordinator) }

    func insert(_ entity: String, in context: ManagedObjectContext, _ values: [String: Any]) throws -> ManagedObject {
        let object = ManagedObject(entity: model.entity(named: entity)!, insertInto: context)
        for (key, value) in values { try object.setValue(value, forKey: key) }
        return object
    }
}

func temporaryDirectory() throws -> String {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-store-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    return directory
}

@Suite("Saving and faulting")
struct StoreTests {
    @Test("item 5: a row encodes to the same bytes from its entity's layout as from values by key, and decodes back (with and without a destination that names its entity)")
    func rowEncodingPaths() throws {
        let model = try ManagedObjectModel {
            Entity("Party") {
                Attribute("name", .string)
                Relationship("things", to: "Thing", inverse: "owner").toMany()
            }
            Entity("Person", parent: "Party") { Attribute("age", .integer32) }
            Entity("Thing") {
                Attribute("label", .string)
                Attribute("count", .integer64)
                Attribute("scratch", .string).transient()
                Relationship("owner", to: "Party", inverse: "things")
            }
        }
        let store = try NativeStore.inMemory(model: model)
        let thing = try #require(model.entity(named: "Thing"))
        for owner in [store.objectID(entityName: "Person", primaryKey: 4), nil] {
            let byKey = StoreRow(entityName: "Thing", version: 3, attributes: ["label": .string("box"), "count": .integer(7)],
                                 toOne: owner.map { ["owner": $0] } ?? [:])
            var values = PropertyStorage(layout: thing.propertyLayout)
            values["label"] = .attribute(.string("box"))
            values["count"] = .attribute(.integer(7))
            values["scratch"] = .attribute(.string("not stored"))
            if let owner { values["owner"] = .object(owner) }
            let inLayout = StoreRow(entityName: "Thing", version: 3, values: values)
            let bytes = try store.encode(inLayout, entity: thing)
            #expect(try bytes == store.encode(byKey, entity: thing))
            let decoded = try store.decode(bytes, objectID: store.objectID(entityName: "Thing", primaryKey: 1))
            #expect(decoded.attributes == byKey.attributes && decoded.toOne == byKey.toOne && decoded.version == 3)
        }
        // A row whose relationship names an entity the model lacks (a damaged or foreign file)
        // is a typed error, not an ID of an unknown entity.
        // (Records name a destination's entity by its place in the store's entity list: such a
        // row is refused when encoded.)
        let ghost = StoreRow(entityName: "Thing", version: 1, attributes: [:], toOne: ["owner": store.objectID(entityName: "Ghost", primaryKey: 1)])
        #expect(arborErrorCode {
            let damaged = try store.encode(ghost, entity: thing)
            _ = try store.decode(damaged, objectID: store.objectID(entityName: "Thing", primaryKey: 2))
        } == .store)
    }

    @Test("S002-11/S000-32: a save gives permanent IDs; another context gets faults that fire lazily, uniqued (S000-01, S000-41, S002-28)")
    func saveAndFault() throws {
        let stack = try Stack()
        let context = stack.context()
        let sales = try stack.insert("Department", in: context, ["name": "Sales", "budget": 1000])
        let ada = try stack.insert("Employee", in: context, ["firstName": "Ada", "lastName": "Lovelace", "department": sales])
        let temporary = ada.objectID
        try context.save()
        #expect(!ada.objectID.isTemporaryID && ada.objectID != temporary)
        #expect(!context.hasChanges && context.insertedObjects.isEmpty && !ada.isInserted)
        #expect(try ada.value(forKey: "department") as? ManagedObject === sales, "relationships follow the new IDs")

        let other = stack.context()
        let fault = other.object(with: ada.objectID)
        #expect(fault.isFault && fault !== ada)
        #expect(other.object(with: ada.objectID) === fault, "one instance per ID per context")
        #expect(other.registeredObject(for: ada.objectID) === fault)
        #expect(try fault.value(forKey: "firstName") as? String == "Ada")
        #expect(!fault.isFault)
        let department = try #require(try fault.value(forKey: "department") as? ManagedObject)
        #expect(department.objectID == sales.objectID && department.isFault, "S002-29: related objects start as faults")
        #expect(set(try department.value(forKey: "employees")) == [fault], "to-many relationships load from the inverse")
        #expect(try department.value(forKeyPath: "employees.@count") as? Int == 1)
    }

    @Test("S000-27/S000-28: existingObject never returns a fault; S000-26: a missing row is an error")
    func existingObject() throws {
        let stack = try Stack()
        let context = stack.context()
        let sales = try stack.insert("Department", in: context, ["name": "Sales"])
        try context.save()
        let other = stack.context()
        let object = try other.existingObject(with: sales.objectID)
        #expect(!object.isFault)
        #expect(try object.value(forKey: "name") as? String == "Sales")
        #expect(try other.existingObject(with: sales.objectID) === object)
        context.delete(sales)
        try context.save()
        let third = stack.context()
        #expect(throws: ArborError.self) { _ = try third.existingObject(with: sales.objectID) }
        #expect(third.registeredObject(for: sales.objectID) == nil)
    }

    @Test("S000-42: a fault for a missing row fails only when it fires — or is marked deleted with shouldDeleteInaccessibleFaults")
    func inaccessibleFaults() throws {
        let stack = try Stack()
        let context = stack.context()
        let sales = try stack.insert("Department", in: context, ["name": "Sales"])
        try context.save()
        let id = sales.objectID
        context.delete(sales)
        try context.save()
        let tolerant = stack.context()
        #expect(tolerant.shouldDeleteInaccessibleFaults)
        let gone = tolerant.object(with: id)
        #expect(try gone.value(forKey: "name") == nil)
        #expect(gone.isDeleted)
        let strict = stack.context()
        strict.shouldDeleteInaccessibleFaults = false
        let missing = strict.object(with: id)
        do {
            _ = try missing.value(forKey: "name")
            Issue.record("a fault for a deleted row fired")
        } catch let error as ArborError {
            #expect(error.code == .objectNotFound && error.objectID == id)
        }
    }

    @Test("S000-42: a fault a fetch returned, whose row another context then deletes, is marked deleted with no values left — or fails — when it fires")
    func inaccessibleFetchedFaults() throws {
        let stack = try Stack()
        let setup = stack.context()
        let sales = try stack.insert("Department", in: setup, ["name": "Sales"])
        try setup.save()
        let id = sales.objectID
        let tolerant = stack.context(), strict = stack.context()
        strict.shouldDeleteInaccessibleFaults = false
        let gone = try #require(try tolerant.fetch(FetchRequest<ManagedObject>(entityName: "Department")).first)
        let missing = try #require(try strict.fetch(FetchRequest<ManagedObject>(entityName: "Department")).first)
        #expect(gone.isFault && missing.isFault)
        setup.delete(sales)
        try setup.save()
        #expect(try gone.value(forKey: "name") == nil, "the fetched values are not shown for a row that is gone")
        #expect(gone.isDeleted && gone.committedValues(forKeys: nil).isEmpty)
        #expect(throws: ArborError.self) { try missing.value(forKey: "name") }
        #expect(missing.isFault && missing.committedValues(forKeys: nil).isEmpty)
        #expect(missing.objectID == id)
    }

    @Test("updates reach other contexts through the store; optimistic locking refuses a save over a newer row")
    func updatesAndConflicts() throws {
        let stack = try Stack()
        let setup = stack.context()
        let sales = try stack.insert("Department", in: setup, ["name": "Sales", "budget": 10])
        try setup.save()
        let a = stack.context(), b = stack.context()
        let inA = try a.existingObject(with: sales.objectID), inB = try b.existingObject(with: sales.objectID)
        try inA.setValue(20, forKey: "budget")
        #expect(a.updatedObjects == [inA] && inA.isUpdated)
        #expect(inA.changedValues()["budget"] as? Int32 == 20)
        #expect(inA.committedValues(forKeys: ["budget"])["budget"] as? Int32 == 10)
        try a.save()
        #expect(!inA.isUpdated && a.updatedObjects.isEmpty)
        try inB.setValue(30, forKey: "budget")
        do {
            try b.save()
            Issue.record("a save over a newer row went through")
        } catch let error as ArborError {
            #expect(error.code == .mergeConflict && error.objectID == sales.objectID)
        }
        #expect(b.hasChanges && inB.isUpdated, "a failed save keeps the context's changes")
        let fresh = stack.context()
        #expect(try fresh.existingObject(with: sales.objectID).value(forKey: "budget") as? Int32 == 20)
    }

    @Test("S002-08: a save that fails validation writes nothing and keeps every change; uniqueness violations name the values")
    func failedSaves() throws {
        let stack = try Stack()
        let context = stack.context()
        let sales = try stack.insert("Department", in: context, ["name": "Sales"])
        try context.save()
        let invalid = try stack.insert("Employee", in: context, ["firstName": "ada"])
        try sales.setValue("Sales & Marketing", forKey: "name")
        do {
            try context.save()
            Issue.record("an invalid object was saved")
        } catch let error as ArborError {
            #expect(error.code.isValidation)
            #expect(error.detailedErrors.isEmpty || error.detailedErrors.allSatisfy { $0.objectID == invalid.objectID })
        }
        #expect(context.insertedObjects == [invalid] && context.updatedObjects == [sales])
        let reader = stack.context()
        #expect(try reader.existingObject(with: sales.objectID).value(forKey: "name") as? String == "Sales")
        context.delete(invalid)
        try context.save()

        _ = try stack.insert("Department", in: context, ["name": "Sales & Marketing"])
        do {
            try context.save()
            Issue.record("a duplicate department name was saved")
        } catch let error as ArborError {
            #expect(error.code == .constraintConflict && error.value?.contains("Sales & Marketing") == true)
        }
        #expect(context.insertedObjects.count == 1)
    }

    @Test("S000-64/S000-65: rollback restores saved objects' committed values and undeletes, without reading the store")
    func rollbackSaved() throws {
        let stack = try Stack()
        let context = stack.context()
        let sales = try stack.insert("Department", in: context, ["name": "Sales", "budget": 5])
        let ada = try stack.insert("Employee", in: context, ["firstName": "Ada", "lastName": "Lovelace", "department": sales])
        try context.save()
        try sales.setValue(7, forKey: "budget")
        try ada.setValue(nil, forKey: "department")
        context.delete(ada)
        context.rollback()
        #expect(!context.hasChanges && !ada.isDeleted && !sales.isUpdated)
        #expect(try sales.value(forKey: "budget") as? Int32 == 5)
        #expect(try ada.value(forKey: "department") as? ManagedObject === sales)
    }

    @Test("deletes are saved with their cascade; the rows are gone for every context")
    func cascadeSaved() throws {
        let stack = try Stack()
        let context = stack.context()
        let sales = try stack.insert("Department", in: context, ["name": "Sales"])
        let ada = try stack.insert("Employee", in: context, ["firstName": "Ada", "lastName": "Lovelace", "department": sales])
        let grace = try stack.insert("Employee", in: context, ["firstName": "Grace", "lastName": "Hopper", "department": sales])
        try context.save()
        let ids = [sales.objectID, ada.objectID, grace.objectID]
        let other = stack.context()
        let department = try other.existingObject(with: sales.objectID)
        other.delete(department)
        try other.save()
        #expect(other.deletedObjects.isEmpty && department.managedObjectContext == nil)
        let fresh = stack.context()
        for id in ids { #expect(throws: ArborError.self) { _ = try fresh.existingObject(with: id) } }
    }

    @Test("S000-44…S000-46: obtainPermanentIDs gives permanent IDs to new objects, which stay inserted; saved ones are ignored")
    func permanentIDs() throws {
        let stack = try Stack()
        let context = stack.context()
        let sales = try stack.insert("Department", in: context, ["name": "Sales"])
        let ada = try stack.insert("Employee", in: context, ["firstName": "Ada", "lastName": "Lovelace", "department": sales])
        try context.obtainPermanentIDs(for: [sales, ada])
        #expect(!sales.objectID.isTemporaryID && sales.isInserted && context.insertedObjects.contains(sales))
        let id = sales.objectID
        try context.obtainPermanentIDs(for: [sales])
        #expect(sales.objectID == id)
        try context.save()
        #expect(sales.objectID == id, "the save keeps the permanent ID")
        let reader = stack.context()
        #expect(try reader.existingObject(with: ada.objectID).value(forKeyPath: "department.name") as? String == "Sales")
    }

    @Test("item 3: URIs of saved objects round-trip through the coordinator; temporary ones are distinguishable")
    func uriRoundTrip() throws {
        let stack = try Stack()
        let context = stack.context()
        let sales = try stack.insert("Department", in: context, ["name": "Sales"])
        let temporaryURI = sales.objectID.uriRepresentation()
        try context.save()
        let uri = sales.objectID.uriRepresentation()
        #expect(uri.absoluteString.hasPrefix("x-arbor://\(stack.coordinator.persistentStores[0].identifier.uuidString)/Department/p"))
        #expect(stack.coordinator.managedObjectID(forURIRepresentation: uri) == sales.objectID)
        #expect(stack.coordinator.managedObjectID(forURIRepresentation: temporaryURI)?.isTemporaryID == true)
        let foreign = URL(string: "x-arbor://\(UUID().uuidString)/Department/p1")!
        #expect(stack.coordinator.managedObjectID(forURIRepresentation: foreign) == nil)
    }

    @Test("ordered and many-to-many relationships are saved and read back in order")
    func orderedAndManyToMany() throws {
        let model = try ManagedObjectModel {
            Entity("Person") {
                Attribute("name", .string).required()
                Relationship("projects", to: "Project", inverse: "members").toMany()
                Relationship("tasks", to: "Task", inverse: "owner").toMany(ordered: true)
            }
            Entity("Project") {
                Attribute("title", .string)
                Relationship("members", to: "Person", inverse: "projects").toMany()
            }
            Entity("Task") {
                Attribute("title", .string)
                Relationship("owner", to: "Person", inverse: "tasks")
            }
        }
        let stack = try Stack(model: model)
        let context = stack.context()
        let ada = try stack.insert("Person", in: context, ["name": "Ada"])
        let alan = try stack.insert("Person", in: context, ["name": "Alan"])
        let engine = try stack.insert("Project", in: context, ["title": "Engine"])
        let graph = try stack.insert("Project", in: context, ["title": "Graph"])
        try ada.setValue(Set([engine, graph]), forKey: "projects")
        try alan.setValue(Set([engine]), forKey: "projects")
        let tasks = try (0..<4).map { try stack.insert("Task", in: context, ["title": "t\($0)"]) }
        try ada.setValue(tasks.reversed() as [ManagedObject], forKey: "tasks")
        try context.save()

        let other = stack.context()
        let adaAgain = try other.existingObject(with: ada.objectID)
        let titles = try (adaAgain.value(forKey: "tasks") as? [ManagedObject] ?? []).map { try $0.value(forKey: "title") as? String }
        #expect(titles == ["t3", "t2", "t1", "t0"])
        #expect(Set(try (adaAgain.value(forKeyPath: "projects.title") as? [Any] ?? []).compactMap { $0 as? String }) == ["Engine", "Graph"])
        let engineAgain = try other.existingObject(with: engine.objectID)
        #expect(Set(try (engineAgain.value(forKeyPath: "members.name") as? [Any] ?? []).compactMap { $0 as? String }) == ["Ada", "Alan"])
        // Unlink, reorder, save; a third context sees it.
        try (try engineAgain.mutableSetValue(forKey: "members")).remove(adaAgain)
        let ordered = try adaAgain.mutableOrderedSetValue(forKey: "tasks")
        try ordered.remove(at: 0)
        try other.save()
        let third = stack.context()
        let adaThird = try third.existingObject(with: ada.objectID)
        #expect(try (adaThird.value(forKeyPath: "projects.title") as? [Any] ?? []).compactMap { $0 as? String } == ["Graph"])
        #expect(try (adaThird.value(forKey: "tasks") as? [ManagedObject] ?? []).count == 3)
    }

    @Test("an ordered many-to-many keeps its order in the owner's order tree and its inverse in a join tree, and nothing else")
    func orderedManyToMany() throws {
        let model = try ManagedObjectModel {
            Entity("Playlist") {
                Attribute("name", .string)
                Relationship("songs", to: "Song", inverse: "playlists").toMany(ordered: true)
            }
            Entity("Song") {
                Attribute("title", .string)
                Relationship("playlists", to: "Playlist", inverse: "songs").toMany()
            }
        }
        let stack = try Stack(model: model)
        let context = stack.context()
        let mix = try stack.insert("Playlist", in: context, ["name": "Mix"])
        let calm = try stack.insert("Playlist", in: context, ["name": "Calm"])
        let songs = try (0..<3).map { try stack.insert("Song", in: context, ["title": "s\($0)"]) }
        try mix.setValue([songs[2], songs[0], songs[1]] as [ManagedObject], forKey: "songs")
        try calm.setValue([songs[0]] as [ManagedObject], forKey: "songs")
        try context.save()

        let other = stack.context()
        let mixAgain = try other.existingObject(with: mix.objectID)
        #expect(try (mixAgain.value(forKey: "songs") as? [ManagedObject] ?? []).map { try $0.value(forKey: "title") as? String } == ["s2", "s0", "s1"])
        let first = try other.existingObject(with: songs[0].objectID)
        #expect(Set(try (first.value(forKeyPath: "playlists.name") as? [Any] ?? []).compactMap { $0 as? String }) == ["Mix", "Calm"])
        // Take s0 out of Mix from the ordered side; the unordered side follows in the store.
        try mixAgain.mutableOrderedSetValue(forKey: "songs").remove(first)
        try other.save()
        let third = stack.context()
        let firstAgain = try third.existingObject(with: songs[0].objectID)
        #expect(try (firstAgain.value(forKeyPath: "playlists.name") as? [Any] ?? []).compactMap { $0 as? String } == ["Calm"])
        #expect(try (third.existingObject(with: mix.objectID).value(forKey: "songs") as? [ManagedObject] ?? []).count == 2)

        let store = try #require(stack.coordinator.persistentStores.first as? NativeStore)
        let names = Set(try store.database.read { try $0.trees().map(\.name) })
        #expect(names.contains("join.Song.playlists") && names.contains("order.Playlist.songs"))
        #expect(!names.contains("join.Playlist.songs"), "the ordered side has no join tree: \(names.sorted())")
    }

    @Test("item 6: one snapshot per row shared by every context, counted, released at zero; staleness 0 always reads the store")
    func rowCache() throws {
        let stack = try Stack()
        var id: ManagedObjectID?
        do {
            let setup = stack.context()
            let sales = try stack.insert("Department", in: setup, ["name": "Sales"])
            try setup.save()
            id = sales.objectID
            #expect(stack.coordinator.rowCacheStatistics.snapshots == 0, "a new object's save makes no snapshot: its values are the row")
        }
        #expect(stack.coordinator.rowCacheStatistics.snapshots == 0, "released when the last object holding it went away")
        let objectID = try #require(id)
        do {
            let a = stack.context(), b = stack.context()
            let inA = try a.existingObject(with: objectID)
            let afterFirst = stack.coordinator.rowCacheStatistics
            #expect(afterFirst.snapshots == 1 && afterFirst.misses == 1)
            let inB = try b.existingObject(with: objectID)
            let shared = stack.coordinator.rowCacheStatistics
            #expect(shared.snapshots == 1 && shared.hits == afterFirst.hits + 1, "a second context fires from the cache")
            // S000-71: staleness 0 means no cached data is acceptable.
            let strict = stack.context()
            strict.stalenessInterval = 0
            _ = try strict.existingObject(with: objectID)
            #expect(stack.coordinator.rowCacheStatistics.staleReads == shared.staleReads + 1)
            // S000-73: the interval never changes realized objects.
            #expect(try inB.value(forKey: "name") as? String == "Sales")
            #expect(try inA.value(forKey: "name") as? String == "Sales")
        }
        #expect(stack.coordinator.rowCacheStatistics.snapshots == 0)
        // retainsRegisteredObjects keeps unchanged objects (and their snapshots) alive.
        let keeping = stack.context()
        keeping.retainsRegisteredObjects = true
        _ = try keeping.existingObject(with: objectID)
        #expect(stack.coordinator.rowCacheStatistics.snapshots == 1 && keeping.registeredObjects.count == 1)
        let dropping = stack.context()
        _ = try dropping.existingObject(with: objectID)
        #expect(dropping.registeredObjects.isEmpty, "unchanged objects are held weakly by default")
        // A saved object that held a snapshot holds it with the saved row: another context fires from it.
        let editor = stack.context()
        let edited = try editor.existingObject(with: objectID)
        try edited.setValue("Sales EMEA", forKey: "name")
        try editor.save()
        #expect(stack.coordinator.rowCacheStatistics.snapshots == 1)
        let hits = stack.coordinator.rowCacheStatistics.hits
        #expect(try stack.context().existingObject(with: objectID).value(forKey: "name") as? String == "Sales EMEA")
        #expect(stack.coordinator.rowCacheStatistics.hits == hits + 1, "the snapshot took the saved values")
    }

    @Test("a native store on a file keeps its objects across coordinators; another model is refused")
    func nativeFile() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/employees.arbor"
        var id: ManagedObjectID?
        do {
            let stack = try Stack(path: path)
            let context = stack.context()
            let sales = try stack.insert("Department", in: context, ["name": "Sales"])
            _ = try stack.insert("Employee", in: context, ["firstName": "Ada", "lastName": "Lovelace", "department": sales])
            try context.save()
            id = sales.objectID
        }
        let reopened = try Stack(path: path)
        let reader = reopened.context()
        let department = try reader.existingObject(with: try #require(id))
        #expect(try department.value(forKeyPath: "employees.@count") as? Int == 1)
        #expect(try Database(path: path).checkIntegrity().isSound)
        do {
            _ = try Stack(model: try employeeModel(salaryType: .double, salaryDefault: 0.0), path: path)
            Issue.record("a store made with another model opened")
        } catch let error as ArborError {
            #expect(error.code == .incompatibleModel && error.message.contains("Employee"))
        }
    }

    @Test("a database of something else, or an Arbor store with damaged metadata, is refused with storeOpen and left as it was")
    func foreignAndDamagedFiles() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func opening(_ path: String) -> ArborError.Code? {
            do {
                _ = try Stack(path: path)
                return nil
            } catch let error as ArborError {
                return error.code
            } catch {
                return nil
            }
        }
        let foreign = directory + "/foreign.db"
        do {
            let database = try Database(path: foreign)
            try database.write { try $0.tree(named: "people", create: true)!.put([1], [2]) }
            database.close()
        }
        #expect(opening(foreign) == .storeOpen)
        #expect(try Database(path: foreign).read { try $0.trees().map(\.name) } == ["people"], "nothing was added to it")

        let damaged = directory + "/damaged.arbor"
        _ = try Stack(path: damaged)
        do {
            let database = try Database(path: damaged)
            try database.write { _ = try $0.tree(named: "arbor.metadata")!.delete(Array("hashes".utf8)) }
            database.close()
        }
        #expect(opening(damaged) == .storeOpen, "not silently given a new identity")
        #expect(opening(directory + "/new.arbor") == nil, "a new file becomes a store")
    }
}

@Suite("Several stores")
struct SeveralStoresTests {
    @Test("item 5: entities go to the store whose configuration includes them; assign(_:to:) picks another; IDs name their store")
    func configurations() throws {
        let model = try ManagedObjectModel(configurations: ["Catalog": ["Product"], "Logs": ["Entry"], "Both": ["Product", "Entry"]]) {
            Entity("Product") { Attribute("name", .string) }
            Entity("Entry") { Attribute("text", .string) }
        }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let catalog = try coordinator.addInMemoryStore(configuration: "Catalog")
        let logs = try coordinator.addInMemoryStore(configuration: "Logs")
        let both = try coordinator.addInMemoryStore(configuration: "Both")
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let product = ManagedObject(entity: model.entity(named: "Product")!, insertInto: context)
        let entry = ManagedObject(entity: model.entity(named: "Entry")!, insertInto: context)
        let assigned = ManagedObject(entity: model.entity(named: "Entry")!, insertInto: context)
        try product.setValue("lamp", forKey: "name")
        try entry.setValue("first", forKey: "text")
        try assigned.setValue("second", forKey: "text")
        try context.assign(assigned, to: both)
        #expect(throws: ArborError.self) { try context.assign(product, to: logs) }
        try context.save()
        #expect(product.objectID.storeIdentifier == catalog.identifier)
        #expect(entry.objectID.storeIdentifier == logs.identifier)
        #expect(assigned.objectID.storeIdentifier == both.identifier)
        #expect(coordinator.persistentStore(for: assigned.objectID) === both)
        #expect(try logs.row(for: entry.objectID)?.attributes["text"] == .string("first"))
        let reader = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try reader.existingObject(with: assigned.objectID).value(forKey: "text") as? String == "second")
        #expect(throws: ArborError.self) {
            _ = try ManagedObjectModel(configurations: ["Bad": ["Nothing"]]) { Entity("A") { Attribute("x", .string) } }
        }
    }

    @Test("explain describes what runs (one plan, issue 26, item 6): with two stores the order and the window are applied to objects; counts are counted in the store; a values fetch says whether it decodes rows or objects")
    func explainFollowsThePlan() throws {
        let model = try ManagedObjectModel(configurations: ["Logs": ["Entry"], "Both": ["Entry"]]) {
            Entity("Entry") { Attribute("text", .string) }
        }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        _ = try coordinator.addInMemoryStore(configuration: "Logs")
        let both = try coordinator.addInMemoryStore(configuration: "Both")
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for (text, second) in [("b", false), ("a", true), ("c", false), ("d", true)] {
            let entry = ManagedObject(entity: try #require(model.entity(named: "Entry")), insertInto: context)
            try entry.setValue(text, forKey: "text")
            if second { try context.assign(entry, to: both) }
        }
        try context.save()
        var request = try FetchRequest<ManagedObject>(entityName: "Entry", format: "text != %@", "c")
        request.sortDescriptors = [ObjectSortDescriptor(key: "text")]
        request.fetchLimit = 2
        #expect(try context.fetch(request).map { try $0.value(forKey: "text") as? String } == ["a", "b"])
        let twoStores = try request.explain(in: context)
        #expect(twoStores.contains("offset 0, limit 2"), "the window is applied after both stores' rows: \(twoStores)")
        #expect(twoStores.contains("sort: "), "so is the order: \(twoStores)")

        var counting = FetchRequest<ManagedObject>(entityName: "Entry")
        counting.resultType = .count
        #expect(try context.count(for: counting) == 4)
        #expect(try counting.explain(in: context).contains("count in the store"))
        let inserted = ManagedObject(entity: try #require(model.entity(named: "Entry")), insertInto: context)
        try inserted.setValue("e", forKey: "text")
        #expect(try context.count(for: counting) == 5)
        let pendingCount = try counting.explain(in: context)
        #expect(pendingCount.contains("merge 1 objects with unsaved changes") && pendingCount.contains("count the objects"), "\(pendingCount)")

        struct Entry: Decodable, Sendable { let text: String }
        var values = FetchRequest<Entry>(entityName: "Entry")
        values.resultType = .values
        #expect(try values.explain(in: context).contains("decode each object into a value"), "unsaved changes: from objects")
        try context.save()
        let single = try ManagedObjectModel { Entity("Entry") { Attribute("text", .string) } }
        let stack = try Stack(model: single)
        let oneStore = stack.context()
        _ = try stack.insert("Entry", in: oneStore, ["text": "x"])
        try oneStore.save()
        #expect(try values.explain(in: oneStore).contains("decode each row into a value"))
        #expect(try oneStore.fetch(values).map(\.text) == ["x"])
        var windowed = FetchRequest<ManagedObject>(entityName: "Entry")
        windowed.sortDescriptors = [ObjectSortDescriptor(key: "text")]
        windowed.fetchLimit = 1
        #expect(try !windowed.explain(in: oneStore).contains("offset 0, limit 1"), "one store applies the window itself")
    }
}
