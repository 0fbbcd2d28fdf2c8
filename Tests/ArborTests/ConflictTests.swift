import Foundation
import Testing
@testable import Arbor

/// Issue 6, items 5 and 6: optimistic locking, merge policies, conflict records, uniqueness
/// conflicts, and staleness across two coordinators (seed 004 "Change Management", seed 000
/// "Merge Policies" and "Conflict records").
@Suite("Optimistic locking and merge policies")
struct ConflictTests {
    /// An employee saved by one context and loaded by another; `store` (the first context)
    /// then saves a change of lastName and salary, while `local` has changed lastName and
    /// startDate without saving.
    struct Conflict {
        let stack: Stack
        let store: ManagedObjectContext
        let local: ManagedObjectContext
        let storeSide: ManagedObject
        let localSide: ManagedObject
        let start = Date(timeIntervalSince1970: 1_000_000)

        init(storeChanges: Bool = true, localChanges: Bool = true) throws {
            stack = try Stack()
            store = stack.context()
            storeSide = try stack.insert("Employee", in: store, ["firstName": "Ada", "lastName": "Lovelace", "salary": 1000])
            try store.save()
            local = stack.context()
            localSide = try local.existingObject(with: storeSide.objectID)
            if localChanges {
                try localSide.setValue("Local", forKey: "lastName")
                try localSide.setValue(start, forKey: "startDate")
            }
            if storeChanges {
                try storeSide.setValue("Store", forKey: "lastName")
                try storeSide.setValue(2000, forKey: "salary")
                try store.save()
            }
        }

        /// The saved row's values, read by a new context.
        func saved() throws -> (lastName: String?, salary: Decimal?, startDate: Date?)? {
            let reader = stack.context()
            guard let object = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Employee")).first else { return nil }
            return (try object.value(forKey: "lastName") as? String, try object.value(forKey: "salary") as? Decimal,
                    try object.value(forKey: "startDate") as? Date)
        }
    }

    @Test("S004-01/S004-04/S004-07/S000-39/S000-83/S000-90/S000-91: the default error policy fails the save, writes nothing, and the error carries inspectable conflict records")
    func errorPolicy() throws {
        let conflict = try Conflict()
        #expect(conflict.local.mergePolicy === MergePolicy.error)
        // A change that does not conflict, in the same save: it must not be written either.
        let other = try conflict.stack.insert("Department", in: conflict.local, ["name": "Research"])
        do {
            try conflict.local.save()
            Issue.record("a conflicting save succeeded")
        } catch let error as ArborError {
            #expect(error.code == .mergeConflict)
            let record = try #require(error.conflicts.first)
            #expect(error.conflicts.count == 1)
            #expect(record.objectID == conflict.localSide.objectID)
            #expect(record.oldVersionNumber == 1 && record.newVersionNumber == 2)
            #expect(record.objectSnapshot?.attributes["lastName"] == .string("Lovelace"), "the snapshot the changes are based on")
            #expect(record.persistedSnapshot?.attributes["lastName"] == .string("Store"), "the row in the store now")
            #expect(record.cachedSnapshot?.version == 2, "the coordinator's cache holds the other context's saved row")
            #expect(!record.isDeletedInStore)
        }
        #expect(try conflict.saved()?.lastName == "Store")
        #expect(try conflict.stack.context().count(for: FetchRequest<ManagedObject>(entityName: "Department")) == 0, "nothing of the save was written")
        #expect(conflict.local.hasChanges && conflict.local.insertedObjects == [other], "the context keeps every change")

        // S004-09: refreshing the object (its snapshot moves on) lets the save through.
        conflict.local.refresh(conflict.localSide, mergeChanges: true)
        try conflict.local.save()
        #expect(try conflict.saved()?.lastName == "Local")
    }

    @Test("S000-84/S000-85/S000-86/S000-87/S000-88/S004-10: the same conflict under each policy — property by property, whole, or rolled back — and the save goes through", arguments: [
        (MergePolicyType.mergeByPropertyStoreTrump, "Store", Decimal(2000), true),
        (.mergeByPropertyObjectTrump, "Local", Decimal(2000), true),
        (.overwrite, "Local", Decimal(1000), true),
        (.rollback, "Store", Decimal(2000), false),
    ])
    func policies(type: MergePolicyType, lastName: String, salary: Decimal, keepsStartDate: Bool) throws {
        let conflict = try Conflict()
        conflict.local.mergePolicy = MergePolicy(merge: type)
        try conflict.local.save()
        let saved = try #require(try conflict.saved())
        #expect(saved.lastName == lastName, "changed on both sides")
        #expect(saved.salary == salary, "changed in the store only")
        #expect((saved.startDate == conflict.start) == keepsStartDate, "changed here only")
        #expect(try conflict.localSide.value(forKey: "lastName") as? String == lastName, "the object shows what was saved")
        #expect(!conflict.local.hasChanges)
    }

    @Test("S004-18/S004-11: a row another coordinator deleted and the overwrite policy wrote again gives the row cache's snapshot the new row (other contexts' faults see it)")
    func overwrittenRowRefreshesTheCache() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/store.arbor"
        let here = try Stack(path: path)
        let setup = here.context()
        let sales = try here.insert("Department", in: setup, ["name": "v1"])
        try setup.save()
        try sales.setValue("v2", forKey: "name")
        try setup.save()
        // Another context of this coordinator holds the row's snapshot (version 2).
        let holder = here.context()
        holder.retainsRegisteredObjects = true
        _ = try holder.existingObject(with: sales.objectID)
        let local = here.context()
        let mine = try local.existingObject(with: sales.objectID)
        try mine.setValue("Local", forKey: "name")
        // Another coordinator (another process) deletes the row.
        let there = try Stack(path: path)
        let remote = there.context()
        remote.delete(try remote.existingObject(with: sales.objectID))
        try remote.save()

        local.mergePolicy = .overwrite
        try local.save()
        let reader = here.context()
        #expect(try reader.object(with: sales.objectID).value(forKey: "name") as? String == "Local",
                "a fault fired from the cache shows the row the overwrite wrote")
    }

    @Test("a row deleted in the store: the error policy reports it; store-trump, object-trump and rollback delete the object here; overwrite writes it again (S004-18)", arguments: [
        MergePolicyType.error, .mergeByPropertyStoreTrump, .mergeByPropertyObjectTrump, .rollback, .overwrite,
    ])
    func deletedInStore(type: MergePolicyType) throws {
        let conflict = try Conflict(storeChanges: false)
        conflict.store.delete(conflict.storeSide)
        try conflict.store.save()
        conflict.local.mergePolicy = MergePolicy(merge: type)
        if type == .error {
            let error = try #require(throws: ArborError.self) { try conflict.local.save() }
            #expect(error.conflicts.first?.isDeletedInStore == true && error.conflicts.first?.newVersionNumber == 0)
            return
        }
        try conflict.local.save()
        if type == .overwrite {
            #expect(try conflict.saved()?.lastName == "Local", "the row is written again with this context's values")
            #expect(!conflict.localSide.isDeleted)
        } else {
            #expect(try conflict.saved() == nil)
            #expect(conflict.localSide.isDeleted && conflict.local.registeredObject(for: conflict.localSide.objectID) == nil)
        }
    }

    @Test("deleted here, changed in the store: error reports it; rollback undoes the deletion; the other policies delete", arguments: [
        MergePolicyType.error, .rollback, .mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump, .overwrite,
    ])
    func deletedHere(type: MergePolicyType) throws {
        let conflict = try Conflict(localChanges: false)
        conflict.local.delete(conflict.localSide)
        conflict.local.mergePolicy = MergePolicy(merge: type)
        switch type {
        case .error:
            #expect(throws: ArborError.self) { try conflict.local.save() }
        case .rollback:
            try conflict.local.save()
            #expect(!conflict.localSide.isDeleted)
            #expect(try conflict.localSide.value(forKey: "lastName") as? String == "Store")
            #expect(try conflict.saved()?.lastName == "Store")
        default:
            try conflict.local.save()
            #expect(try conflict.saved() == nil)
        }
    }

    @Test("S004-15: redeleting an object another context deleted and saved is not an error, even under the error policy")
    func redelete() throws {
        let conflict = try Conflict(storeChanges: false, localChanges: false)
        conflict.store.delete(conflict.storeSide)
        try conflict.store.save()
        conflict.local.delete(conflict.localSide)
        try conflict.local.save()
        #expect(!conflict.local.hasChanges)
    }

    @Test("S004-04/S004-06: a row another context changed and changed back is no conflict — its values are the snapshot's — so the save proceeds, written at the stored version plus one (issue 25, item 3)")
    func changedBackIsNoConflict() throws {
        let conflict = try Conflict(storeChanges: false)
        try conflict.storeSide.setValue("Changed", forKey: "lastName")
        try conflict.store.save()
        try conflict.storeSide.setValue("Lovelace", forKey: "lastName")
        try conflict.store.save()
        #expect(conflict.storeSide.committedVersion == 3)
        try conflict.local.save()
        #expect(try conflict.saved()?.lastName == "Local")
        #expect(try conflict.saved()?.startDate == conflict.start)
        // The version written is the stored one plus one, in the object, the row and the cache.
        #expect(conflict.localSide.committedVersion == 4)
        #expect(try conflict.stack.coordinator.rows(for: [conflict.localSide.objectID]).first??.version == 4)
        #expect(conflict.stack.coordinator.cachedRow(for: conflict.localSide.objectID)?.version == 4)
        // S004-07: the other side's snapshot now differs from the row: its next change conflicts.
        try conflict.storeSide.setValue(3000, forKey: "salary")
        let error = try #require(throws: ArborError.self) { try conflict.store.save() }
        #expect(error.code == .mergeConflict && error.conflicts.first?.persistedSnapshot?.attributes["lastName"] == .string("Local"))
        #expect(error.conflicts.first?.oldVersionNumber == 3 && error.conflicts.first?.newVersionNumber == 4)
    }

    @Test("S004-06: a deletion, and an object marked with detectConflicts(for:), go through when the row moved on with its values unchanged")
    func changedBackDeletedAndChecked() throws {
        let deleted = try Conflict(storeChanges: false, localChanges: false)
        deleted.local.delete(deleted.localSide)
        for name in ["Changed", "Lovelace"] {
            try deleted.storeSide.setValue(name, forKey: "lastName")
            try deleted.store.save()
        }
        try deleted.local.save()
        #expect(try deleted.saved() == nil)

        let checked = try Conflict(storeChanges: false, localChanges: false)
        checked.local.detectConflicts(for: checked.localSide)
        for salary in [5000, 1000] {
            try checked.storeSide.setValue(salary, forKey: "salary")
            try checked.store.save()
        }
        _ = try checked.stack.insert("Department", in: checked.local, ["name": "Research"])
        try checked.local.save()
        #expect(try checked.stack.context().count(for: FetchRequest<ManagedObject>(entityName: "Department")) == 1)
    }

    @Test("S004-02/S004-06: a to-many change elsewhere moves the row's version but not its snapshot (attributes and to-one IDs): renaming the department still saves")
    func toManyChangeIsNoConflict() throws {
        let stack = try Stack()
        let one = stack.context()
        let department = try stack.insert("Department", in: one, ["name": "Research"])
        try one.save()
        let two = stack.context()
        let there = try two.existingObject(with: department.objectID)
        let ada = try stack.insert("Employee", in: two, ["firstName": "Ada", "lastName": "Lovelace"])
        try ada.setValue(there, forKey: "department")
        try two.save()
        #expect(there.committedVersion == 2, "the department's row was written again for its employees")
        try department.setValue("Analytics", forKey: "name")
        try one.save()
        let reader = stack.context()
        let saved = try reader.existingObject(with: department.objectID)
        #expect(try saved.value(forKey: "name") as? String == "Analytics")
        #expect((try saved.value(forKey: "employees") as? Set<ManagedObject>)?.count == 1)
    }

    @Test("S000-16/S000-17/S004-06: detectConflicts(for:) checks an unchanged object at the next save; unmarked unchanged objects are not checked")
    func detectConflicts() throws {
        let conflict = try Conflict(storeChanges: false, localChanges: false)
        let department = try conflict.stack.insert("Department", in: conflict.local, ["name": "Research"])
        try conflict.local.save()
        // Not marked: another context's change of the employee does not stop this save.
        try conflict.storeSide.setValue(1500, forKey: "salary")
        try conflict.store.save()
        try department.setValue(1, forKey: "budget")
        try conflict.local.save()

        conflict.local.detectConflicts(for: conflict.localSide)
        try conflict.storeSide.setValue(1600, forKey: "salary")
        try conflict.store.save()
        try department.setValue(2, forKey: "budget")
        let error = try #require(throws: ArborError.self) { try conflict.local.save() }
        #expect(error.code == .mergeConflict && error.conflicts.map(\.objectID) == [conflict.localSide.objectID])
        #expect(try conflict.stack.context().existingObject(with: department.objectID).value(forKey: "budget") as? Int32 == 1)
    }

    @Test("uniqueness conflicts: the error policy reports constraint records; the other policies fold the new object into the saved one")
    func uniqueness() throws {
        for type in [MergePolicyType.error, .mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump, .overwrite, .rollback] {
            let stack = try Stack()
            let first = stack.context()
            let sales = try stack.insert("Department", in: first, ["name": "Sales", "budget": 10])
            try first.save()
            let context = stack.context()
            context.mergePolicy = MergePolicy(merge: type)
            let duplicate = try stack.insert("Department", in: context, ["name": "Sales", "budget": 99])
            let ada = try stack.insert("Employee", in: context, ["firstName": "Ada", "lastName": "Lovelace", "department": duplicate])
            if type == .error {
                let error = try #require(throws: ArborError.self) { try context.save() }
                #expect(error.code == .constraintConflict)
                let record = try #require(error.constraintConflicts.first)
                #expect(record.constraint == ["name"] && record.constraintValues == ["name": "Sales"])
                #expect(record.conflictingObjectIDs == [duplicate.objectID] && record.databaseObjectID == sales.objectID)
                #expect(record.databaseSnapshot?.attributes["budget"] == .integer(10))
                continue
            }
            try context.save()
            let reader = stack.context()
            let departments = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Department"))
            #expect(departments.count == 1, "\(type): one Sales department")
            let budget = try departments.first?.value(forKey: "budget") as? Int32
            #expect(budget == (type == .mergeByPropertyObjectTrump || type == .overwrite ? 99 : 10), "\(type)")
            let savedAda = try reader.existingObject(with: ada.objectID)
            #expect(try (savedAda.value(forKey: "department") as? ManagedObject)?.objectID == sales.objectID, "\(type): the new employee points at the saved department")
        }
    }

    @Test("a custom policy subclasses MergePolicy, sees the records, and may call super")
    func customPolicy() throws {
        final class Recording: MergePolicy, @unchecked Sendable {
            var seen: [MergeConflict] = []
            override func resolve(optimisticLockingConflicts conflicts: [MergeConflict], in context: ManagedObjectContext) throws {
                seen += conflicts
                try super.resolve(optimisticLockingConflicts: conflicts, in: context)
            }
        }
        let conflict = try Conflict()
        let policy = Recording(merge: .mergeByPropertyObjectTrump)
        conflict.local.mergePolicy = policy
        try conflict.local.save()
        #expect(policy.seen.map(\.objectID) == [conflict.localSide.objectID])
        #expect(try conflict.saved()?.lastName == "Local")
    }

    @Test("S000-58/S000-72/S000-74/S002-33/S002-37/S004-08: with two coordinators on one file, stalenessInterval decides whether a fault shows the cached row or the other side's save; refresh with mergeChanges brings it in and keeps local changes")
    func stalenessAcrossCoordinators() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/staleness.arbor"
        let here = try Stack(path: path)
        let there = try Stack(model: here.model, path: path)
        let writer = there.context()
        let ada = try there.insert("Employee", in: writer, ["firstName": "Ada", "lastName": "Lovelace", "salary": 1000])
        try writer.save()

        // This side reads the row (the cache holds it while the object lives), then the other
        // side saves a change.
        let holder = here.context()
        let held = try holder.existingObject(with: ada.objectID)
        try ada.setValue(2000, forKey: "salary")
        try writer.save()

        #expect(here.context().stalenessInterval == -1, "S000-72: infinite staleness by default")
        func salary(staleness: TimeInterval) throws -> Decimal? {
            let context = here.context()
            context.stalenessInterval = staleness
            return try context.object(with: ada.objectID).value(forKey: "salary") as? Decimal
        }
        #expect(try salary(staleness: -1) == 1000, "any age: the cached row")
        #expect(try salary(staleness: .infinity) == 1000, "infinity: the cached row")
        #expect(try salary(staleness: 3600) == 1000, "a positive interval the snapshot is younger than: the cached row")
        #expect(try salary(staleness: 0) == 2000, "0: the store")
        // Reading the store refreshed the cache; the other side saves again, and a short
        // interval expires.
        try ada.setValue(3000, forKey: "salary")
        try writer.save()
        // (An interval no stall of a loaded machine reaches: 0.05 s was missed under CI's load.)
        #expect(try salary(staleness: 60) == 2000, "an interval the snapshot is younger than: the cached row")
        let deadline = Date().addingTimeInterval(0.06)
        while Date() < deadline { usleep(5_000) }
        #expect(try salary(staleness: 0.05) == 3000, "an interval the snapshot is older than: the store")

        // refresh(mergeChanges: true) brings in the other side's values, local changes on top.
        try held.setValue("Byron", forKey: "lastName")
        try ada.setValue(4000, forKey: "salary")
        try writer.save()
        holder.stalenessInterval = 0
        holder.refresh(held, mergeChanges: true)
        #expect(try held.value(forKey: "salary") as? Decimal == 4000)
        #expect(try held.value(forKey: "lastName") as? String == "Byron")
        try holder.save()
        let check = there.context()
        check.stalenessInterval = 0
        #expect(try check.existingObject(with: ada.objectID).value(forKey: "lastName") as? String == "Byron")
    }

    @Test("S004-08/S000-58: with two processes on one file, stalenessInterval decides whether a fault shows the cached row or the other process's save")
    func stalenessAcrossProcesses() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/processes.arbor"
        let here = try Stack(path: path)
        let writer = here.context()
        let ada = try here.insert("Employee", in: writer, ["firstName": "Ada", "lastName": "Lovelace", "salary": 1000])
        try writer.save()
        // The row is cached while this object lives.
        let held = try here.context().existingObject(with: ada.objectID)
        let uri = ada.objectID.uriRepresentation()

        // Another process, with a coordinator of its own, saves a new salary.
        await #expect(processExitsWith: .success) { [path = path as String, uri = uri as URL] in
            let other = try! Stack(path: path)
            let context = other.context()
            let id = other.coordinator.managedObjectID(forURIRepresentation: uri)!
            try! context.existingObject(with: id).setValue(Decimal(2000), forKey: "salary")
            try! context.save()
        }
        func salary(staleness: TimeInterval) throws -> Decimal? {
            let context = here.context()
            context.stalenessInterval = staleness
            return try context.object(with: ada.objectID).value(forKey: "salary") as? Decimal
        }
        #expect(try salary(staleness: -1) == 1000, "any age: the cached row")
        #expect(try salary(staleness: 3600) == 1000, "a young snapshot: the cached row")
        #expect(try salary(staleness: 0) == 2000, "0: the other process's save")
        #expect(try held.value(forKey: "salary") as? Decimal == 1000, "a loaded object keeps its values until refreshed (S002-37)")
    }
}
