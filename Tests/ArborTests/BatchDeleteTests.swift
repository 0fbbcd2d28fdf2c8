import ArborTestSupport
import Foundation
import Synchronization
import Testing
@testable import Arbor

/// Issue 28, item 4: `BatchDeleteRequest` run by `execute(_:)` in the store, honouring delete
/// rules (cascade, nullify, deny) and merging into every live context (docs/batch-requests.md).
@Suite("Batch delete")
struct BatchDeleteTests {
    /// Every kind of relationship and rule: one-to-many cascades (departments' employees,
    /// employees' timesheets), a self one-to-many nullified (manager and reports), a many-to-many
    /// (projects and members), an ordered to-many (a project's milestones), a one-to-one (an
    /// employee's badge), a deny rule (a client's projects), a sub-entity (contractors) and a
    /// uniqueness constraint.
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Department") {
                Attribute("name", .string).indexed()
                Relationship("employees", to: "Employee", inverse: "department").toMany().deleteRule(.cascade)
            }
            Entity("Employee") {
                Attribute("name", .string)
                Attribute("email", .string)
                Attribute("salary", .integer64).minimum(Int64(0))
                Attribute("note", .string).transient()
                Relationship("department", to: "Department", inverse: "employees")
                Relationship("manager", to: "Employee", inverse: "reports")
                Relationship("reports", to: "Employee", inverse: "manager").toMany()
                Relationship("timesheets", to: "Timesheet", inverse: "employee").toMany().deleteRule(.cascade)
                Relationship("projects", to: "Project", inverse: "members").toMany()
                Relationship("badge", to: "Badge", inverse: "holder")
                Unique("email")
            }
            Entity("Contractor", parent: "Employee") { Attribute("agency", .string) }
            Entity("Timesheet") {
                Attribute("hours", .integer32)
                Relationship("employee", to: "Employee", inverse: "timesheets")
            }
            Entity("Project") {
                Attribute("title", .string)
                Relationship("members", to: "Employee", inverse: "projects").toMany()
                Relationship("milestones", to: "Milestone", inverse: "project").toMany(ordered: true)
                Relationship("client", to: "Client", inverse: "projects")
            }
            Entity("Milestone") {
                Attribute("title", .string)
                Relationship("project", to: "Project", inverse: "milestones")
            }
            Entity("Client") {
                Attribute("country", .string)
                Relationship("projects", to: "Project", inverse: "client").toMany().deleteRule(.deny)
            }
            Entity("Badge") {
                Attribute("number", .integer32)
                Relationship("holder", to: "Employee", inverse: "badge")
            }
        }
    }

    /// A random graph of the model from `seed`, saved (the same seed makes the same rows, keys
    /// included).
    static func graph(seed: UInt64, employees: Int = 60) throws -> Stack {
        let stack = try Stack(model: try model())
        try fill(stack, seed: seed, employees: employees)
        return stack
    }

    /// Fills `stack`'s store with the graph of `seed`.
    static func fill(_ stack: Stack, seed: UInt64, employees: Int = 60) throws {
        var random = SplitMix64(seed: seed)
        let context = stack.context()
        let departments = try (0..<6).map { try stack.insert("Department", in: context, ["name": "D\($0)"]) }
        let clients = try ["FR", "DE"].map { try stack.insert("Client", in: context, ["country": $0]) }
        var projects: [ManagedObject] = []
        for index in 0..<5 {
            let project = try stack.insert("Project", in: context, ["title": "P\(index)"])
            if Int.random(in: 0..<3, using: &random) == 0 { try project.setValue(clients.randomElement(using: &random), forKey: "client") }
            let milestones = try (0..<Int.random(in: 0...3, using: &random)).map { try stack.insert("Milestone", in: context, ["title": "M\(index).\($0)"]) }
            try project.setValue(milestones, forKey: "milestones")
            projects.append(project)
        }
        var people: [ManagedObject] = []
        for index in 0..<employees {
            let person = try stack.insert(index % 4 == 0 ? "Contractor" : "Employee", in: context,
                                          ["name": "E\(index % 7)", "email": "e\(index)@x", "salary": Int64.random(in: 1...10, using: &random) * 1000])
            if Int.random(in: 0..<6, using: &random) > 0 { try person.setValue(departments.randomElement(using: &random), forKey: "department") }
            if !people.isEmpty, Int.random(in: 0..<3, using: &random) > 0 { try person.setValue(people.randomElement(using: &random), forKey: "manager") }
            try person.setValue(Set((0..<Int.random(in: 0...2, using: &random)).map { _ in projects.randomElement(using: &random)! }), forKey: "projects")
            for week in 0..<Int.random(in: 0...3, using: &random) { _ = try stack.insert("Timesheet", in: context, ["hours": Int32(week + 1), "employee": person]) }
            if Int.random(in: 0..<3, using: &random) == 0 { _ = try stack.insert("Badge", in: context, ["number": Int32(index), "holder": person]) }
            people.append(person)
        }
        try context.save()
    }

    /// Every row of the store as a line — its entity, key, attributes, and relationships as
    /// keys (a to-many's sorted, an ordered one's in order) — read by a new context (or `given`), so that to-many
    /// relationships come from the store's foreign-key, join and order trees. Versions are left out.
    static func dump(_ stack: Stack, through given: ManagedObjectContext? = nil) throws -> [String] {
        let context = given ?? stack.context()
        var lines: [String] = []
        for entity in stack.model.entities {
            var request = FetchRequest<ManagedObject>(entityName: entity.name)
            request.includesSubentities = false
            for object in try context.fetch(request) {
                var parts = ["\(entity.name)#\(object.objectID.primaryKey ?? -1)"]
                for attribute in entity.attributes.sorted(by: { $0.name < $1.name }) {
                    parts.append("\(attribute.name)=\(String(describing: try object.value(forKey: attribute.name)))")
                }
                for relationship in entity.relationships.sorted(by: { $0.name < $1.name }) {
                    let value = try object.value(forKey: relationship.name)
                    let keys: [Int64]
                    if let one = value as? ManagedObject {
                        keys = [one.objectID.primaryKey ?? -1]
                    } else if let ordered = value as? [ManagedObject] {
                        keys = ordered.map { $0.objectID.primaryKey ?? -1 }
                    } else if let set = value as? Set<ManagedObject> {
                        keys = set.map { $0.objectID.primaryKey ?? -1 }.sorted()
                    } else {
                        keys = []
                    }
                    parts.append("\(relationship.name)=\(keys)")
                }
                lines.append(parts.joined(separator: " "))
            }
        }
        return lines.sorted()
    }

    static let cases: [(entity: String, predicate: String)] = [
        ("Department", "name == 'D1'"),
        ("Department", "name BEGINSWITH 'D'"),
        ("Employee", "salary > 6000"),
        ("Employee", "department.name IN {'D2', 'D3'}"),
        ("Employee", "ANY projects.title == 'P1'"),
        ("Employee", "manager == nil"),
        ("Contractor", "salary < 5000"),
        ("Timesheet", "hours == 2"),
        ("Project", "client == nil"),
        ("Project", "title == 'P3'"),
        ("Milestone", "title ENDSWITH '.1'"),
        ("Badge", "number < 30"),
        ("Client", "country == 'DE'"),
    ]

    @Test("the store's batch delete leaves the store as a context's deletion of the same objects and save does — cascades, nullified to-ones, one-to-ones and ordered lists, many-to-many links, sub-entities — or both refuse for a deny rule (random graphs)")
    func sameAsContextDeletion() throws {
        for seed: UInt64 in [0xBA7C_0001, 0xBA7C_0002, UInt64.random(in: 0...UInt64.max)] {
            for (entity, format) in Self.cases {
                let label = "seed \(String(seed, radix: 16)), \(entity) \(format)"
                let batch = try Self.graph(seed: seed), objects = try Self.graph(seed: seed)
                #expect(try Self.dump(batch) == Self.dump(objects), "\(label): the same graph twice")
                let request = try FetchRequest<ManagedObject>(entityName: entity, format: format)
                var batchError: ArborError?
                do {
                    var delete = BatchDeleteRequest(fetchRequest: request)
                    delete.resultType = .objectIDs
                    _ = try batch.context().execute(delete)
                } catch let error as ArborError {
                    batchError = error
                }
                var objectError: ArborError?
                let context = objects.context()
                for object in try context.fetch(request) { context.delete(object) }
                do {
                    try context.save()
                } catch let error as ArborError {
                    objectError = error
                }
                #expect((batchError == nil) == (objectError == nil), "\(label): \(String(describing: batchError)) against \(String(describing: objectError))")
                if let batchError {
                    #expect(batchError.code == .validationRelationshipDeniedDelete || batchError.code == .validationMultipleErrors, "\(label): \(batchError)")
                }
                let after = try Self.dump(batch), expected = try Self.dump(objects)
                #expect(after == expected, "\(label): \(Set(after).symmetricDifference(expected).sorted().prefix(6))")
            }
        }
    }

    @Test("a to-many relationship of many objects read together (a wave of deletions' rules, a prefetch) equals each object's read alone — one-to-many, self, many-to-many, ordered, sub-entity destinations, owners with none (a context's deletions through it: sameAsContextDeletion)")
    func relatedObjectIDsTogether() throws {
        let stack = try Self.graph(seed: 0xBA7C_0101, employees: 80)
        let store = try #require(stack.coordinator.persistentStores.first)
        let context = stack.context()
        var checked = 0
        for entity in stack.model.entities {
            var request = FetchRequest<ManagedObject>(entityName: entity.name)
            request.includesSubentities = false
            let ids = try context.fetch(request).map(\.objectID).shuffled()
            for relationship in entity.relationships where relationship.isToMany {
                let together = try store.relatedObjectIDs(ofEach: ids, relationship: relationship)
                let alone = try ids.map { try store.relatedObjectIDs(of: $0, relationship: relationship) }
                #expect(together == alone, "\(entity.name).\(relationship.name)")
                checked += together.reduce(0) { $0 + $1.count }
            }
        }
        #expect(checked > 200)
    }

    @Test("a deny rule refuses the whole request, naming the relationship and the objects, and nothing is deleted")
    func denyRefuses() throws {
        let stack = try Stack(model: try Self.model())
        let context = stack.context()
        let client = try stack.insert("Client", in: context, ["country": "FR"])
        let project = try stack.insert("Project", in: context, ["title": "Atlas", "client": client])
        _ = try stack.insert("Client", in: context, ["country": "DE"])
        try context.save()
        let error = try #require(throws: ArborError.self) {
            try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Client")))
        }
        #expect(error.code == .validationRelationshipDeniedDelete && error.key == "projects" && error.objectID == client.objectID)
        #expect(error.message.contains(project.objectID.description))
        #expect(try stack.context().count(for: FetchRequest<ManagedObject>(entityName: "Client")) == 2, "nothing deleted")
        // With the project deleted in the same request (by ID), the deny rule has nothing to deny.
        var both = BatchDeleteRequest(objectIDs: [project.objectID, client.objectID])
        both.resultType = .count
        #expect(try context.execute(both).count == 2)
    }

    @Test("results: status, count and IDs (matched first, then cascaded), the nullified IDs; IDs as the target; a predicate the store cannot answer is invalidFetchRequest")
    func results() throws {
        let stack = try Stack(model: try Self.model())
        let context = stack.context()
        let sales = try stack.insert("Department", in: context, ["name": "Sales"])
        let boss = try stack.insert("Employee", in: context, ["name": "Boss", "email": "b@x", "department": sales])
        let report = try stack.insert("Employee", in: context, ["name": "Report", "email": "r@x", "manager": boss])
        let sheet = try stack.insert("Timesheet", in: context, ["hours": 3, "employee": boss])
        try context.save()

        var request = BatchDeleteRequest(fetchRequest: try FetchRequest<ManagedObject>(entityName: "Department", format: "name == 'Sales'"))
        #expect(try context.execute(request).status && context.execute(request).count == nil, "status only (the second run deletes nothing)")
        try context.save()
        #expect(try stack.context().count(for: FetchRequest<ManagedObject>(entityName: "Department")) == 0)

        let stack2 = try Stack(model: try Self.model())
        let other = stack2.context()
        let ops = try stack2.insert("Department", in: other, ["name": "Ops"])
        let lead = try stack2.insert("Employee", in: other, ["name": "Lead", "email": "l@x", "department": ops])
        let member = try stack2.insert("Employee", in: other, ["name": "Member", "email": "m@x", "manager": lead])
        let hours = try stack2.insert("Timesheet", in: other, ["hours": 1, "employee": lead])
        try other.save()
        request = BatchDeleteRequest(objectIDs: [ops.objectID])
        request.resultType = .objectIDs
        let result = try other.execute(request)
        #expect(result.count == 3 && result.deletedObjectIDs == [ops.objectID, lead.objectID, hours.objectID])
        #expect(result.updatedObjectIDs == [member.objectID], "the report's manager was nullified")
        _ = (boss, report, sheet)

        let invalid = try #require(throws: ArborError.self) {
            try other.execute(BatchDeleteRequest(fetchRequest: try FetchRequest<ManagedObject>(entityName: "Employee", format: "note == 'x'")))
        }
        #expect(invalid.code == .invalidFetchRequest && invalid.message.contains("needs objects"), "\(invalid)")
        #expect(try stack2.context().count(for: FetchRequest<ManagedObject>(entityName: "Employee")) == 1)
    }

    @Test("every live context merges the deletion by default — deleted objects leave, nullified ones are refreshed, unsaved changes stay — and none does with merging off")
    func mergesIntoContexts() throws {
        let stack = try Stack(model: try Self.model())
        let writer = stack.context()
        let sales = try stack.insert("Department", in: writer, ["name": "Sales"])
        let boss = try stack.insert("Employee", in: writer, ["name": "Boss", "email": "b@x", "department": sales])
        let report = try stack.insert("Employee", in: writer, ["name": "Report", "email": "r@x", "manager": boss])
        try writer.save()

        let viewer = stack.context()
        let seenSales = try viewer.existingObject(with: sales.objectID)
        let seenBoss = try viewer.existingObject(with: boss.objectID)
        let seenReport = try viewer.existingObject(with: report.objectID)
        try seenReport.setValue("Renamed", forKey: "name")
        #expect((try seenSales.value(forKey: "employees") as? Set<ManagedObject>)?.count == 1)
        let changes = Mutex(0)
        let token = NotificationCenter.default.addObserver(forName: ManagedObjectContext.didChangeObjectsNotification, object: viewer, queue: nil) { _ in
            changes.withLock { $0 += 1 }
        }
        defer { NotificationCenter.default.removeObserver(token) }

        _ = try writer.execute(BatchDeleteRequest(objectIDs: [sales.objectID]))
        #expect(viewer.registeredObject(for: sales.objectID) == nil && viewer.registeredObject(for: boss.objectID) == nil)
        #expect(writer.registeredObject(for: boss.objectID) == nil, "the calling context merged too")
        #expect(try seenReport.value(forKey: "manager") == nil, "nullified in the store, refreshed here")
        #expect(try seenReport.value(forKey: "name") as? String == "Renamed" && seenReport.hasChanges, "unsaved changes stay")
        #expect(changes.withLock { $0 } > 0, "objects-did-change posted")
        try viewer.save()
        _ = seenBoss

        // Merging off: a context keeps the objects until it refreshes them.
        let next = try stack.insert("Department", in: writer, ["name": "Next"])
        try writer.save()
        let held = try viewer.existingObject(with: next.objectID)
        var quiet = BatchDeleteRequest(objectIDs: [next.objectID])
        quiet.mergesIntoContexts = false
        _ = try writer.execute(quiet)
        #expect(viewer.registeredObject(for: next.objectID) === held)
        #expect(try stack.context().count(for: FetchRequest<ManagedObject>(entityName: "Department")) == 0)
    }

    @Test("after a batch delete the unique values, foreign-key, join and order entries of the deleted rows are gone: the values can be taken again and the file checks clean")
    func entriesGone() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/batch.arbor"
        let stack = try Stack(model: try Self.model(), path: path)
        let context = stack.context()
        let project = try stack.insert("Project", in: context, ["title": "Atlas"])
        let milestones = try (0..<3).map { try stack.insert("Milestone", in: context, ["title": "M\($0)"]) }
        try project.setValue(milestones, forKey: "milestones")
        let ada = try stack.insert("Employee", in: context, ["name": "Ada", "email": "ada@x", "projects": Set([project])])
        try context.save()
        _ = try context.execute(BatchDeleteRequest(objectIDs: [ada.objectID, milestones[1].objectID]))
        let reader = stack.context()
        let saved = try reader.existingObject(with: project.objectID)
        #expect((try saved.value(forKey: "milestones") as? [ManagedObject])?.map(\.objectID) == [milestones[0].objectID, milestones[2].objectID])
        #expect((try saved.value(forKey: "members") as? Set<ManagedObject>)?.isEmpty == true)
        _ = try stack.insert("Employee", in: reader, ["name": "Ada", "email": "ada@x"])
        try reader.save()
        let report = try Database(path: path).checkIntegrity()
        #expect(report.problems.isEmpty, "\(report.problems)")
    }

    @Test("a power cut at every I/O operation of a batch delete leaves the store as it was before or after the request, whole, never between")
    func powerCut() throws {
        let request = BatchDeleteRequest(fetchRequest: try FetchRequest<ManagedObject>(entityName: "Department", format: "name IN {'D1', 'D2', 'D4'}"))
        let (images, operations) = try Self.checkPowerCuts { _ = try $0.execute(request) }
        print("batch delete crash images checked: \(images) at \(operations) operations")
    }

    /// Runs `request` on a store of a random graph on a simulated disk with a power cut at each of
    /// its I/O operations (three kinds of damage each): reopened, the store must be exactly as
    /// before the request or exactly as after it, and sound. Returns the images checked and the
    /// request's operations.
    /// With `history`, the store tracks persistent history and what is compared includes it:
    /// a cut never leaves rows without their history or history without its rows.
    static func checkPowerCuts(history: Bool = false, _ request: (ManagedObjectContext) throws -> Void) throws -> (images: Int, operations: Int) {
        let disk = SimulatedDisk()
        let options = MigrationTests.diskOptions(disk)
        let path = "/batch.arbor"
        let model = try Self.model()
        func open() throws -> Stack {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addNativeStore(at: path, options: options, history: history ? .on : .off)
            return Stack(model: model, coordinator: coordinator)
        }
        func dump(_ stack: Stack) throws -> [String] {
            guard history else { return try Self.dump(stack) }
            // Every transaction and change but its timestamp.
            let transactions = try stack.context().execute(.fetchHistory(after: nil)).transactions ?? []
            return try Self.dump(stack) + transactions.map { transaction in
                "history \(transaction.transactionNumber) \(transaction.kind) " + (transaction.changes ?? []).map { change in
                    "\(change.changeType) \(change.changedObjectID) \(change.oldValues.sorted { $0.key < $1.key }) \(change.newValues.sorted { $0.key < $1.key })"
                }.joined(separator: "; ")
            }
        }
        try Self.fill(try open(), seed: 0xBA7C_0003, employees: 40)
        disk.syncAll()
        let image = disk.snapshot()
        let before = try dump(try open())
        let start = disk.operationCount
        try request(try open().context())
        let operations = disk.operationCount - start
        let after = try dump(try open())
        #expect(after != before)
        var outcomes = (before: 0, after: 0)
        for point in 1...operations {
            for damage: SimulatedDisk.PowerCutDamage in [.applyAll, .dropAll, .random(seed: UInt64(point))] {
                disk.restore(image)
                disk.inject(.powerCut(damage), atOperation: point)
                try? request(try open().context())
                disk.clearFaults()
                let now = try dump(try open())
                #expect(now == before || now == after, "power cut at \(point) of \(operations), \(damage)")
                if now == before { outcomes.before += 1 } else if now == after { outcomes.after += 1 }
                let database = try Database(path: path, options: options)
                #expect(try database.checkIntegrity().problems.isEmpty, "power cut at \(point), \(damage)")
                database.close()
            }
        }
        // (Which cuts leave the request done depends on where the commit point falls among the
        // operations counted — the last few, or none when only the closing follows it; what
        // matters is that none leaves anything between.)
        #expect(outcomes.before > 0, "\(outcomes)")
        return (outcomes.before + outcomes.after, operations)
    }
}
