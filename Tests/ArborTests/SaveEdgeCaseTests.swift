import ArborStore
import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// A note that, as it is first saved, counts itself on a tally object it is given (a change
/// `willSave` makes to an object that had no changes of its own).
final class CountingNote: ManagedObject {
    var tally: ManagedObject?
    override func willSave() {
        super.willSave()
        guard isInserted, let tally else { return }
        let count = (try? tally.value(forKey: "count") as? Int32) ?? 0
        try? tally.setValue(count + 1, forKey: "count")
    }
}

/// A note that counts the times `willSave` was called on it.
final class AnnouncedNote: ManagedObject {
    var willSaveCalls = 0
    override func willSave() {
        super.willSave()
        willSaveCalls += 1
    }
}

@Suite("Save edge cases")
struct SaveEdgeCaseTests {
    @Test("updates move only the index, uniqueness and foreign-key entries whose values changed, and every tree holds exactly the rows' entries afterwards (a salary changed, a name, a team, emails traded)")
    func updatesKeepUnchangedEntries() throws {
        let model = try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("members", to: "Person", inverse: "team").toMany()
            }
            Entity("Person") {
                Attribute("email", .string)
                Attribute("name", .string).indexed()
                Attribute("salary", .integer64)
                Relationship("team", to: "Team", inverse: "members")
                Unique("email")
            }
        }
        let path = try temporaryDirectory() + "/people.arbor"
        var ids: [ManagedObjectID] = []
        do {
            let stack = try Stack(model: model, path: path)
            let context = stack.context()
            let teams = try (0..<3).map { try stack.insert("Team", in: context, ["name": "T\($0)"]) }
            let people = try (0..<30).map {
                try stack.insert("Person", in: context, ["email": "p\($0)@x", "name": "N\($0 % 7)", "salary": Int64($0 * 10), "team": teams[$0 % 3]])
            }
            try context.save()
            ids = people.map(\.objectID)
            for (i, person) in people.enumerated() {
                switch i % 5 {
                case 0: try person.setValue(Int64(i * 11), forKey: "salary")
                case 1: try person.setValue("Renamed \(i)", forKey: "name")
                case 2: try person.setValue(teams[(i + 1) % 3], forKey: "team")
                case 3: try person.setValue(nil, forKey: "team")
                default: break
                }
            }
            // Two people trade emails in the same save; one more takes a freed one's.
            try people[4].setValue("p9@x", forKey: "email")
            try people[9].setValue("p4@x", forKey: "email")
            try people[14].setValue("new14@x", forKey: "email")
            try context.save()
            try people[19].setValue("p14@x", forKey: "email")
            try context.save()
            // A held email is still refused.
            try people[24].setValue("p9@x", forKey: "email")
            #expect(throws: ArborError.self) { try context.save() }
        }
        // Every tree holds exactly one entry per row with a value, made from the row.
        let context = try Stack(model: model, path: path).context()
        let people = try ids.map { try context.existingObject(with: $0) }
        var expectedNames: [String: Set<ManagedObjectID>] = [:]
        var expectedTeams: [ManagedObjectID: Set<ManagedObjectID>] = [:]
        for person in people {
            expectedNames[try #require(person.value(forKey: "name") as? String), default: []].insert(person.objectID)
            if let team = try person.value(forKey: "team") as? ManagedObject { expectedTeams[team.objectID, default: []].insert(person.objectID) }
        }
        for (name, expected) in expectedNames {
            let found = try context.fetch(try FetchRequest<ManagedObject>(entityName: "Person", format: "name == %@", name))
            #expect(Set(found.map(\.objectID)) == expected, "\(name)")
        }
        for (team, expected) in expectedTeams {
            let found = try context.fetch(try FetchRequest<ManagedObject>(entityName: "Person", format: "team == %@", context.existingObject(with: team)))
            #expect(Set(found.map(\.objectID)) == expected)
        }
        #expect(try people[4].value(forKey: "email") as? String == "p9@x" && people[9].value(forKey: "email") as? String == "p4@x")
        #expect(try people[19].value(forKey: "email") as? String == "p14@x")
        let database = try Database(path: path)
        defer { database.close() }
        let counts = try database.read { transaction in
            try ["index.Person.name", "unique.Person.email", "fk.Person.team"].map { name in
                var count = 0
                try transaction.tree(named: name)?.forEach { _, _ in count += 1; return true }
                return count
            }
        }
        let withTeam = people.count { (try? $0.value(forKey: "team")) as? ManagedObject != nil }
        #expect(counts == [30, 30, withTeam])
    }

    @Test("the count of saves wraps without skipping willSave: an object announced in save 1 long ago is announced again in the save numbered 1 after the wrap")
    func saveCountWraps() throws {
        let model = try ManagedObjectModel { Entity("Note", class: AnnouncedNote.self) { Attribute("text", .string) } }
        let stack = try Stack(model: model)
        let context = stack.context()
        let old = AnnouncedNote(context: context)
        try old.setValue("first", forKey: "text")
        try context.save()
        #expect(context.saveCount == 1 && old.willSaveCalls == 1)
        // Far later: the count is about to wrap.
        context.saveCount = .max - 1
        let other = AnnouncedNote(context: context)
        try other.setValue("other", forKey: "text")
        try context.save()
        #expect(context.saveCount == .max)
        try old.setValue("second", forKey: "text")
        try context.save()
        #expect(context.saveCount == 1, "the count wrapped")
        #expect(old.willSaveCalls == 2, "willSave ran in the save after the wrap")
        #expect(try stack.context().existingObject(with: old.objectID).value(forKey: "text") as? String == "second")
    }

    @Test("saving an object whose ordered relationship was never loaded keeps the stored list")
    func unloadedOrderedRelationship() throws {
        let stack = try Stack()
        let context = stack.context()
        let ada = try stack.insert("Employee", in: context, ["firstName": "Ada", "lastName": "Lovelace"])
        let grace = try stack.insert("Employee", in: context, ["firstName": "Grace", "lastName": "Hopper"])
        let alan = try stack.insert("Employee", in: context, ["firstName": "Alan", "lastName": "Turing"])
        try ada.setValue([grace, alan] as [ManagedObject], forKey: "reports")
        try context.save()

        let editor = stack.context()
        let adaAgain = try editor.existingObject(with: ada.objectID)
        try adaAgain.setValue("Augusta", forKey: "firstName")
        #expect(adaAgain.unloadedRelationships.contains("reports"), "the rename does not load the reports")
        try editor.save()

        let reader = stack.context()
        let reports = try reader.existingObject(with: ada.objectID).value(forKey: "reports") as? [ManagedObject] ?? []
        #expect(try reports.map { try $0.value(forKey: "firstName") as? String } == ["Grace", "Alan"])
    }

    @Test("new objects pointing at new objects are saved pointing at the right rows, whether their temporary IDs run in sequence or not")
    func temporaryIDRuns() throws {
        let stack = try Stack()
        let context = stack.context()
        // Made before the rest, inserted after them: its serial number is out of the run.
        let late = ManagedObject(entity: try #require(stack.model.entity(named: "Department")), insertInto: nil)
        try late.setValue("Late", forKey: "name")
        let sales = try stack.insert("Department", in: context, ["name": "Sales"])
        // A serial number taken in between, by another context's object.
        _ = try stack.insert("Department", in: stack.context(), ["name": "Elsewhere"])
        let ada = try stack.insert("Employee", in: context, ["firstName": "Ada", "lastName": "Lovelace", "department": sales])
        // One made and deleted again: a gap in the run.
        context.delete(try stack.insert("Employee", in: context, ["firstName": "Gone", "lastName": "Away"]))
        context.insert(late)
        let grace = try stack.insert("Employee", in: context, ["firstName": "Grace", "lastName": "Hopper", "department": late, "manager": ada])
        let alan = try stack.insert("Employee", in: context, ["firstName": "Alan", "lastName": "Turing", "department": sales, "manager": grace])
        try context.save()

        let reader = stack.context()
        func read(_ object: ManagedObject, _ keyPath: String) throws -> String? {
            try reader.existingObject(with: object.objectID).value(forKeyPath: keyPath) as? String
        }
        #expect(try read(ada, "department.name") == "Sales")
        #expect(try read(grace, "department.name") == "Late")
        #expect(try read(grace, "manager.firstName") == "Ada")
        #expect(try read(alan, "manager.firstName") == "Grace")
        #expect(try read(alan, "manager.manager.lastName") == "Lovelace")
        let reports = try reader.existingObject(with: ada.objectID).value(forKey: "reports") as? [ManagedObject] ?? []
        #expect(try reports.map { try $0.value(forKey: "firstName") as? String } == ["Grace"])
        #expect(try !grace.objectID.isTemporaryID && grace.value(forKey: "manager") as? ManagedObject === ada)
    }

    @Test("a many-to-many link is saved once whichever side records it: both sides changed, one side set primitively, links made and taken back")
    func manyToManyLinkSides() throws {
        let stack = try Stack(model: try JoinTests.model())
        let context = stack.context()
        let atlas = try stack.insert("Project", in: context, ["title": "Atlas"])
        let draco = try stack.insert("Project", in: context, ["title": "Draco"])
        let ada = try stack.insert("Employee", in: context, ["name": "Ada"])
        let alan = try stack.insert("Employee", in: context, ["name": "Alan"])
        // Both sides: the inverse is kept in memory.
        try ada.setValue(Set([atlas, draco]), forKey: "projects")
        try draco.setValue(Set([ada, alan]), forKey: "members")
        // One side only ("projects" sorts after "members": the side that defers to the other
        // when the other shows the link).
        let grace = try stack.insert("Employee", in: context, ["name": "Grace"])
        grace.setPrimitive(.objects([atlas.objectID]), forKey: "projects", persistent: true)
        try context.save()

        func members(_ project: ManagedObject) throws -> Set<String> {
            let reader = stack.context()
            let members = try reader.existingObject(with: project.objectID).value(forKey: "members") as? Set<ManagedObject> ?? []
            return Set(try members.map { try #require($0.value(forKey: "name") as? String) })
        }
        func projects(_ person: ManagedObject) throws -> Set<String> {
            let reader = stack.context()
            let projects = try reader.existingObject(with: person.objectID).value(forKey: "projects") as? Set<ManagedObject> ?? []
            return Set(try projects.map { try #require($0.value(forKey: "title") as? String) })
        }
        #expect(try members(atlas) == ["Ada", "Grace"])
        #expect(try members(draco) == ["Ada", "Alan"])
        #expect(try projects(ada) == ["Atlas", "Draco"])
        #expect(try projects(grace) == ["Atlas"])

        // Taken back: through the inverse, and on one side only.
        try draco.setValue(Set([alan]), forKey: "members")
        grace.setPrimitive(.objects([]), forKey: "projects", persistent: true)
        try context.save()
        #expect(try members(draco) == ["Alan"])
        #expect(try projects(ada) == ["Atlas"])
        #expect(try members(atlas) == ["Ada"])
        #expect(try projects(grace) == [])
    }

    @Test("a merging refresh of a deleted object keeps the deletion pending, and the save deletes it")
    func refreshKeepsDeletion() throws {
        let stack = try Stack()
        let setup = stack.context()
        let sales = try stack.insert("Department", in: setup, ["name": "Sales"])
        let ada = try stack.insert("Employee", in: setup, ["firstName": "Ada", "lastName": "Lovelace", "department": sales])
        try setup.save()

        let context = stack.context()
        let employee = try context.existingObject(with: ada.objectID)
        _ = try employee.value(forKeyPath: "department.employees")
        context.delete(employee)
        context.processPendingChanges()
        context.refreshAllObjects()
        #expect(employee.isDeleted && context.deletedObjects.contains(employee))
        #expect(!context.updatedObjects.contains(employee), "a deleted object is never also updated")
        try context.save()
        #expect(throws: ArborError.self) { try stack.context().existingObject(with: ada.objectID) }
    }

    @Test("changes willSave makes to other objects are saved with the rest")
    func willSaveChanges() throws {
        let model = try ManagedObjectModel {
            Entity("Tally") { Attribute("count", .integer32).defaultValue(Int32(0)) }
            Entity("Note", class: CountingNote.self) { Attribute("text", .string) }
        }
        let stack = try Stack(model: model)
        let context = stack.context()
        let tally = try stack.insert("Tally", in: context, [:])
        try context.save()
        for text in ["a", "b"] {
            let note = CountingNote(context: context)
            try note.setValue(text, forKey: "text")
            note.tally = tally
        }
        #expect(!tally.hasChanges)
        try context.save()
        #expect(!context.hasChanges, "nothing is left pending")
        let reader = stack.context()
        #expect(try reader.existingObject(with: tally.objectID).value(forKey: "count") as? Int32 == 2)
    }

    @Test("an object inserted, deleted and dropped can be inserted again")
    func reinsertAfterDelete() throws {
        let graph = try Graph()
        let sales = try graph.department("Sales")
        graph.context.delete(sales)
        graph.context.processPendingChanges()
        #expect(sales.managedObjectContext == nil)
        graph.context.insert(sales)
        #expect(sales.isInserted && !sales.isDeleted && graph.context.insertedObjects.contains(sales))
        graph.context.delete(sales)
        #expect(!graph.context.insertedObjects.contains(sales), "and deleted again")
    }

    @Test("bad arguments are typed errors, not traps: an ordered index out of range, @sum past Int64, an object listed twice")
    func badArguments() throws {
        let stack = try Stack(model: try employeeModel(salaryType: .integer64, salaryDefault: Int64(0)))
        let context = stack.context()
        let ada = try stack.insert("Employee", in: context, ["firstName": "Ada", "lastName": "Lovelace", "salary": Int64.max])
        let grace = try stack.insert("Employee", in: context, ["firstName": "Grace", "lastName": "Hopper", "salary": Int64.max])
        let reports = try ada.mutableOrderedSetValue(forKey: "reports")
        for index in [-1, 1] {
            #expect(throws: ArborError.self) { try reports.insert(grace, at: index) }
        }
        try reports.insert(grace, at: 0)
        #expect(reports.count == 1)

        let sales = try stack.insert("Department", in: context, ["name": "Sales"])
        try sales.setValue(Set([ada, grace]), forKey: "employees")
        #expect(try sales.value(forKeyPath: "employees.@sum.salary") as? Decimal == Decimal(Int64.max) * 2,
                "an Int64 overflow sums as Decimal")

        try context.obtainPermanentIDs(for: [sales, sales])
        #expect(!sales.objectID.isTemporaryID)
        try context.save()
    }

    @Test("NaN set twice is one change; it is saved and read back")
    func notANumber() throws {
        let stack = try Stack(model: try employeeModel(salaryType: .double, salaryDefault: 0.0))
        let context = stack.context()
        let ada = try stack.insert("Employee", in: context, ["firstName": "Ada", "lastName": "Lovelace"])
        try context.save()
        try ada.setValue(Double.nan, forKey: "salary")
        #expect(ada.isUpdated)
        try context.save()
        try ada.setValue(Double.nan, forKey: "salary")
        #expect(!ada.hasChanges && !context.hasChanges, "the same NaN again is no change")
        let reader = stack.context()
        let salary = try reader.existingObject(with: ada.objectID).value(forKey: "salary") as? Double
        #expect(salary?.isNaN == true)
    }

    @Test("item 7: delete rules that cannot be applied (a relationship that cannot be read) stay pending; the save applies them or fails, never saving the deletion alone")
    func deleteRulesAfterAReadFailure() throws {
        let disk = SimulatedDisk()
        var options = DatabaseOptions()
        options.fileSystem = disk
        options.lockTable = LockTable()
        let model = try employeeModel(departmentDeleteRule: .nullify)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addNativeStore(at: "/db", options: options)
        let writer = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let stack = Stack(model: model, coordinator: coordinator)
        let sales = try stack.insert("Department", in: writer, ["name": "Sales"])
        let ada = try stack.insert("Employee", in: writer, ["firstName": "Ada", "lastName": "Lovelace", "department": sales])
        try writer.save()

        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let department = context.object(with: sales.objectID)
        // Every read fails while the deletion's rules run at the end of the event.
        disk.inject(.ioError, atOperation: 1, persistent: true)
        context.delete(department)
        context.processPendingChanges()
        #expect {
            try context.save()
        } throws: { error in
            (error as? ArborError)?.code == .store
        }
        disk.clearFaults()
        // The rules run again at the save: Ada is unlinked (nullify) in the same transaction.
        try context.save()
        let check = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(throws: ArborError.self) { try check.existingObject(with: sales.objectID) }
        #expect(try check.existingObject(with: ada.objectID).value(forKey: "department") == nil)
    }
}
