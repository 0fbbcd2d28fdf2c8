import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// Issue 28, item 6: `FetchedResultsController` (docs/fetched-results.md): sections, objects and
/// a change stream applied incrementally from the context's changes and merges.
@Suite("Fetched-results controller")
struct FetchedResultsControllerTests {
    typealias Graph = BatchDeleteTests

    /// The sections as (name, objects by identity — their IDs change when a save makes them
    /// permanent), the way a controller shows them; `seen` keeps every object met.
    static func layout(_ controller: FetchedResultsController<ManagedObject>, seen: inout [ManagedObject]) -> [[String]] {
        seen += controller.fetchedObjects
        return controller.sections.map { section in [section.name] + section.objects.map { "\(ObjectIdentifier($0))" } }
    }

    /// `before` with `changes` applied one after the other, as their index paths say.
    static func applied(_ changes: FetchedResultsChanges, to before: [[String]], identity: (ManagedObjectID) -> String, names: (String) -> String) -> [[String]] {
        var sections = before
        var sectionChanges = changes.sections[...]
        var objectChanges = changes.objects[...]
        // Section changes happen where the object changes around them need them: a removal
        // empties a section (then it goes), an insertion into a new section makes it first.
        func applySectionChange(insertion: Bool, name: String) {
            guard let next = sectionChanges.first, next.isInsertion == insertion, next.name == name else { return }
            sectionChanges.removeFirst()
            if insertion { sections.insert([name], at: next.sectionIndex) } else { sections.remove(at: next.sectionIndex) }
        }
        while let change = objectChanges.popFirst() {
            let id = identity(change.objectID)
            if let from = change.indexPath, change.kind == .delete || change.kind == .move {
                #expect(sections[from[0]][from[1] + 1] == id, "\(change)")
                sections[from[0]].remove(at: from[1] + 1)
                if sections[from[0]].count == 1 { applySectionChange(insertion: false, name: sections[from[0]][0]) }
            }
            if let to = change.newIndexPath {
                applySectionChange(insertion: true, name: names(id))
                sections[to[0]].insert(id, at: to[1] + 1)
            }
            if change.kind == .update, let at = change.indexPath { #expect(sections[at[0]][at[1] + 1] == id, "\(change)") }
        }
        return sections
    }

    @Test("random edits, saves and merges: the controller's sections always equal a fresh fetch's, and its changes, applied in order, turn the old sections into the new", arguments: [UInt64(0xF1_0001), 0xF1_0002, 0xF1_0003])
    func followsChanges(seed: UInt64) throws {
        let stack = try Graph.graph(seed: seed, employees: 60)
        let context = stack.context()
        context.automaticallyMergesChangesFromParent = true
        var request = try FetchRequest<ManagedObject>(entityName: "Employee", format: "salary >= 3000")
        request.sortDescriptors = [ObjectSortDescriptor(key: "department.name"), ObjectSortDescriptor(key: "name"), ObjectSortDescriptor(key: "salary", ascending: false)]
        let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "department.name")
        try controller.performFetch()
        let recorder = Recorder()
        controller.delegate = recorder
        var random = SplitMix64(seed: seed)
        let other = stack.context()
        var seen: [ManagedObject] = []
        for round in 0..<25 {
            let before = Self.layout(controller, seen: &seen)
            recorder.rounds.removeAll()
            let employees = try context.fetch(FetchRequest<ManagedObject>(entityName: "Employee"))
            let departments = try context.fetch(FetchRequest<ManagedObject>(entityName: "Department"))
            switch Int.random(in: 0..<6, using: &random) {
            case 0:
                for employee in employees.shuffled(using: &random).prefix(3) {
                    try employee.setValue(Int64.random(in: 1...9, using: &random) * 1000, forKey: "salary")
                }
            case 1:
                try employees.randomElement(using: &random)?.setValue(departments.randomElement(using: &random), forKey: "department")
            case 2:
                if let employee = employees.randomElement(using: &random) { context.delete(employee) }
            case 3:
                _ = try stack.insert("Employee", in: context, ["name": "N\(round)", "email": "n\(round)-\(seed)@x", "salary": Int64(5000),
                                                                 "department": departments.randomElement(using: &random)!])
            case 4:
                try context.save()
            default:
                // Another context's save, merged.
                let theirs = try other.fetch(FetchRequest<ManagedObject>(entityName: "Employee"))
                if let employee = theirs.randomElement(using: &random) { try employee.setValue("M\(round)", forKey: "name") }
                if let employee = theirs.randomElement(using: &random), !employee.hasChanges { other.delete(employee) }
                try other.save()   // merged by `context` as it saves (automatic merging)
            }
            context.processPendingChanges()
            let fresh = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "department.name")
            try fresh.performFetch()
            let now = Self.layout(controller, seen: &seen)
            var unused: [ManagedObject] = []
            #expect(now == Self.layout(fresh, seen: &unused), "round \(round) (seed \(seed))")
            let identities = Dictionary((seen + context.registeredObjects).map { ($0.objectID, "\(ObjectIdentifier($0))") }, uniquingKeysWith: { a, _ in a })
            var rebuilt = before
            let names = Dictionary(now.flatMap { section in section.dropFirst().map { ($0, section[0]) } }, uniquingKeysWith: { a, _ in a })
            for changes in recorder.rounds {
                rebuilt = Self.applied(changes, to: rebuilt, identity: { identities[$0] ?? "\($0)" }, names: { names[$0] ?? "" })
            }
            #expect(rebuilt == now, "round \(round): the changes reported turn the old sections into the new")
            for (section, objects) in controller.sections.enumerated() {
                for (item, object) in objects.objects.enumerated() {
                    #expect(controller.indexPath(forObject: object) == IndexPath(indexes: [section, item]))
                }
            }
        }
    }

    @Test("sections are runs of section values the first sort descriptor finds equal (\"Sales\" and \"sales\" case-insensitively): updates and deletions find their objects; a reset reports a reload")
    func sectionsByOrder() throws {
        let stack = try Graph.graph(seed: 0xF1_0009, employees: 0)
        let context = stack.context()
        let upper = try stack.insert("Department", in: context, ["name": "Sales"])
        let lower = try stack.insert("Department", in: context, ["name": "sales"])
        var people: [ManagedObject] = []
        for index in 0..<6 {
            people.append(try stack.insert("Employee", in: context, ["name": "P\(index)", "email": "p\(index)@x", "salary": Int64(index),
                                                                    "department": index % 2 == 0 ? upper : lower]))
        }
        try context.save()
        var request = FetchRequest<ManagedObject>(entityName: "Employee")
        request.sortDescriptors = [ObjectSortDescriptor(key: "department.name", options: .caseInsensitive), ObjectSortDescriptor(key: "name")]
        let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "department.name")
        try controller.performFetch()
        #expect(controller.sections.count == 1 && controller.fetchedObjects.count == 6)
        let recorder = Recorder()
        controller.delegate = recorder
        try people[1].setValue("P1b", forKey: "name")
        context.delete(people[2])
        context.processPendingChanges()
        #expect(controller.fetchedObjects.count == 5)
        #expect(Set(controller.fetchedObjects.map(ObjectIdentifier.init)).count == 5, "no object twice")
        #expect(!controller.fetchedObjects.contains { $0 === people[2] })
        for object in controller.fetchedObjects { #expect(controller.indexPath(forObject: object) != nil) }
        context.reset()
        #expect(recorder.rounds.last?.reloaded == true)
    }

    final class Recorder: FetchedResultsControllerDelegate {
        var rounds: [FetchedResultsChanges] = []
        func controllerDidChangeContent(_ changes: FetchedResultsChanges) { rounds.append(changes) }
    }

    @Test("the change stream gives each round; a request with a limit, or sections not ordered first, is refused")
    func streamAndRefusals() async throws {
        let stack = try Graph.graph(seed: 0xF1_0004, employees: 10)
        let context = stack.context()
        var request = FetchRequest<ManagedObject>(entityName: "Department")
        request.sortDescriptors = [ObjectSortDescriptor(key: "name")]
        let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
        try controller.performFetch()
        #expect(controller.sections.count == 1 && controller.fetchedObjects.count == 6)
        var iterator = controller.changes.makeAsyncIterator()
        let department = try stack.insert("Department", in: context, ["name": "D0a"])
        context.processPendingChanges()
        let changes = await iterator.next()
        #expect(changes?.objects == [FetchedResultsChange(kind: .insert, objectID: department.objectID, indexPath: nil, newIndexPath: IndexPath(indexes: [0, 1]))])
        #expect(controller.object(at: IndexPath(indexes: [0, 1])) === department)

        var limited = request
        limited.fetchLimit = 3
        #expect(throws: ArborError.self) { try FetchedResultsController(fetchRequest: limited, managedObjectContext: context).performFetch() }
        #expect(throws: ArborError.self) {
            try FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "employees.@count").performFetch()
        }
    }
}
