import Foundation
import Testing
@testable import Arbor

/// Issue 28, item 1: a save in named phases, whose store write pass returns every conflict it
/// meets — with the stored row and version — in one pass, nothing re-read to rebuild them.
@Suite("A save in phases: conflicts in one pass")
struct SavePhaseTests {
    @Test("every optimistic-locking conflict of a save comes back from one write pass, with the row and version the store holds and the context's snapshot")
    func everyLockingConflict() throws {
        let stack = try Stack()
        let writer = stack.context()
        let employees = try (0..<4).map { try stack.insert("Employee", in: writer, ["firstName": "E\($0)", "lastName": "Lee", "salary": 100]) }
        try writer.save()
        let local = stack.context()
        let mine = try employees.map { try local.existingObject(with: $0.objectID) }
        // Another context changes three of them and deletes nothing; one more is deleted.
        for employee in employees.prefix(3) { try employee.setValue(200, forKey: "salary") }
        writer.delete(employees[3])
        try writer.save()
        for employee in mine { try employee.setValue("Changed", forKey: "lastName") }
        let error = try #require(throws: ArborError.self) { try local.save() }
        #expect(error.code == .mergeConflict && error.conflicts.count == 4)
        let byID = Dictionary(uniqueKeysWithValues: error.conflicts.map { ($0.objectID, $0) })
        for employee in mine.prefix(3) {
            let record = try #require(byID[employee.objectID])
            #expect(record.oldVersionNumber == 1 && record.newVersionNumber == 2)
            #expect(record.persistedSnapshot?.attributes["salary"] == .decimal(200))
            #expect(record.objectSnapshot?.attributes["lastName"] == .string("Lee"))
        }
        let deleted = try #require(byID[mine[3].objectID])
        #expect(deleted.isDeletedInStore && deleted.newVersionNumber == 0)
    }

    @Test("uniqueness conflicts gathered by value: new objects among themselves, against a stored holder, against a changed object that keeps its value, and against one that takes it anew")
    func everyUniquenessConflict() throws {
        let stack = try Stack()
        let first = stack.context()
        let sales = try stack.insert("Department", in: first, ["name": "Sales"])
        let ops = try stack.insert("Department", in: first, ["name": "Ops", "budget": 1])
        let legal = try stack.insert("Department", in: first, ["name": "Legal"])
        try first.save()
        let context = stack.context()
        let twinA = try stack.insert("Department", in: context, ["name": "Twin"])
        let twinB = try stack.insert("Department", in: context, ["name": "Twin"])
        let salesCopy = try stack.insert("Department", in: context, ["name": "Sales"])
        // Ops changes its budget and keeps its name: it holds "Ops" as the store did.
        try context.existingObject(with: ops.objectID).setValue(2, forKey: "budget")
        let opsCopy = try stack.insert("Department", in: context, ["name": "Ops"])
        // Legal is renamed to "Audit", which a new department takes too.
        try context.existingObject(with: legal.objectID).setValue("Audit", forKey: "name")
        let audit = try stack.insert("Department", in: context, ["name": "Audit"])
        let error = try #require(throws: ArborError.self) { try context.save() }
        #expect(error.code == .constraintConflict && error.constraintConflicts.count == 4)
        let byName = Dictionary(uniqueKeysWithValues: error.constraintConflicts.map { ($0.constraintValues["name"] ?? "", $0) })
        #expect(byName["Twin"]?.conflictingObjectIDs == [twinA.objectID, twinB.objectID] && byName["Twin"]?.databaseObjectID == nil)
        #expect(byName["Sales"]?.conflictingObjectIDs == [salesCopy.objectID] && byName["Sales"]?.databaseObjectID == sales.objectID)
        #expect(byName["Sales"]?.databaseSnapshot?.attributes["name"] == .string("Sales"))
        #expect(byName["Ops"]?.conflictingObjectIDs == [opsCopy.objectID] && byName["Ops"]?.databaseObjectID == ops.objectID)
        #expect(byName["Audit"]?.conflictingObjectIDs == [legal.objectID, audit.objectID] && byName["Audit"]?.databaseObjectID == nil)
        #expect(try stack.context().count(for: FetchRequest<ManagedObject>(entityName: "Department")) == 3, "nothing written")

        // Each settled by the store-trump policy: the new copies fold into the saved holders,
        // the twins into one, and the new Audit into the renamed Legal (the saved claimant).
        context.mergePolicy = MergePolicy(merge: .mergeByPropertyStoreTrump)
        try context.save()
        let reader = stack.context()
        let names = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Department")).map { try $0.value(forKey: "name") as? String }
        #expect(Set(names.compactMap { $0 }) == ["Sales", "Ops", "Twin", "Audit"] && names.count == 4, "\(names)")
    }
}
