import ArborStore
import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// The change record (docs/object-graph-internals.md, "The change record"): what a store's write
/// returns, and what every merge into a context carries. Seed 000 ("mergeChanges(fromContextDidSave:)":
/// updated objects refreshed, deleted ones forgotten) is what the merges of these records do; the
/// tests here check the records themselves.
@Suite("Change record")
struct ChangeRecordTests {
    /// A stack over an in-memory store that tracks history, with the batch-request model.
    static func stack() throws -> Stack {
        try HistoryTests.tracking(try BatchDeleteTests.model())
    }

    @Test("a batch delete's record lists the rows deleted (matched, then cascaded) and the rows nullified, with the rows written and the keys cleared")
    func batchDeleteRecord() throws {
        let stack = try Self.stack()
        let context = stack.context()
        let department = try stack.insert("Department", in: context, ["name": "Research"])
        let ada = try stack.insert("Employee", in: context, ["name": "Ada", "email": "ada@x", "salary": Int64(1), "department": department])
        let grace = try stack.insert("Employee", in: context, ["name": "Grace", "email": "grace@x", "salary": Int64(2), "department": department])
        let badge = try stack.insert("Badge", in: context, ["number": Int32(7), "holder": ada])
        try context.save()

        let record = try stack.coordinator.batchDelete(entity: nil, fetch: nil, objectIDs: [department.objectID],
                                                       origin: TransactionOrigin(kind: .batchDelete))
        #expect(record.deleted.first == department.objectID, "the row named first, then what its cascade reached")
        #expect(Set(record.deleted) == [department.objectID, ada.objectID, grace.objectID])
        #expect(Array(record.updated) == [badge.objectID], "the badge's holder is nullified")
        #expect(record.changedKeys[badge.objectID] == ["holder"])
        let written = try #require(record.writtenRow(of: badge.objectID))
        #expect(written.destination("holder") == nil && written.attribute("number") == .integer(7))
        #expect(written == (try #require(try stack.coordinator.persistentStores[0].row(for: badge.objectID))), "the row as stored")
        #expect(record.inserted.isEmpty && record.related.isEmpty && !record.isEmpty)
        // What contexts are posted: the same objects and keys, without the rows (the row cache has them).
        let posted = record.byID
        #expect(posted.writtenRows.isEmpty && posted.deleted == record.deleted && posted.updated == record.updated)
        #expect(posted.changedKeys == record.changedKeys)
    }

    @Test("a batch update's record names the attributes it set on each row, and the rows as written, at their next versions")
    func batchUpdateRecord() throws {
        let stack = try Self.stack()
        let context = stack.context()
        let ada = try stack.insert("Employee", in: context, ["name": "Ada", "email": "ada@x", "salary": Int64(1)])
        try context.save()
        let store = stack.coordinator.persistentStores[0]
        let before = try #require(try store.row(for: ada.objectID))

        var request = BatchUpdateRequest(entityName: "Employee")
        request.propertiesToUpdate = ["salary": try ObjectExpression(format: "salary + 1")]
        let entity = try #require(stack.model.entity(named: "Employee"))
        let logical = try LogicalPlan(try context.resolved(FetchRequest<ManagedObject>(entityName: "Employee")), model: stack.model)
        let record = try stack.coordinator.batchUpdate(entity: entity, fetch: StoreFetch(logical, window: false), excluding: [], changing: ["salary"],
                                                       origin: TransactionOrigin(kind: .batchUpdate)) { _, row in
            var new = row
            new.values["salary"] = .attribute(.integer(41))
            return new
        }
        #expect(Array(record.updated) == [ada.objectID] && record.keys(changedBy: ada.objectID) == ["salary"])
        let written = try #require(record.writtenRow(of: ada.objectID))
        #expect(written.version == before.version + 1 && written.attribute("salary") == .integer(41))
        #expect(written == (try #require(try store.row(for: ada.objectID))))
    }

    @Test("a context's save gives one record: new objects by permanent ID, the cached rows as written with permanent IDs, and did-save carries it by ID to the contexts that merge it")
    func saveRecord() throws {
        let stack = try Self.stack()
        let context = stack.context()
        let ada = try stack.insert("Employee", in: context, ["name": "Ada", "email": "ada@x", "salary": Int64(1)])
        let grace = try stack.insert("Employee", in: context, ["name": "Grace", "email": "grace@x", "salary": Int64(2)])
        try context.save()
        // A second context holds Ada realised: her row is in the row cache.
        let other = stack.context()
        let seen = try #require(try other.existingObject(with: ada.objectID))
        #expect(try seen.value(forKey: "salary") as? Int64 == 1)
        #expect(stack.coordinator.cachedRow(for: ada.objectID)?.version == 1)

        let department = try stack.insert("Department", in: context, ["name": "Research"])
        try ada.setValue(department, forKey: "department")
        context.delete(grace)
        nonisolated(unsafe) var posted: ChangeRecord?
        let observer = NotificationCenter.default.addObserver(forName: ManagedObjectContext.didSaveObjectsNotification, object: context, queue: nil) { note in
            posted = note.userInfo?[ManagedObjectContext.changeRecordKey] as? ChangeRecord
        }
        try context.save()
        NotificationCenter.default.removeObserver(observer)

        let record = try #require(posted)
        #expect(!department.objectID.isTemporaryID)
        #expect(Array(record.inserted) == [department.objectID], "the new object by the permanent ID the store gave it")
        #expect(Array(record.updated) == [ada.objectID] && Array(record.deleted) == [grace.objectID])
        #expect(record.store == stack.coordinator.persistentStores[0].identifier)
        #expect(record.writtenRows.isEmpty, "did-save carries the record by ID: the row cache took the rows")
        // The row cache took Ada's row as written: next version, the department by its permanent ID.
        let cached = try #require(stack.coordinator.cachedRow(for: ada.objectID))
        #expect(cached.version == 2 && cached.destination("department") == department.objectID)
        #expect(cached == (try #require(try stack.coordinator.persistentStores[0].row(for: ada.objectID))))
        #expect(stack.coordinator.cachedRow(for: grace.objectID) == nil)

        // The other context merges the record: Ada refreshed, Grace gone, the department a fault.
        other.mergeChanges(fromContextDidSave: Notification(name: ManagedObjectContext.didSaveObjectsNotification, object: context,
                                                            userInfo: [ManagedObjectContext.changeRecordKey: record,
                                                                       ManagedObjectContext.coordinatorKey: stack.coordinator,
                                                                       ManagedObjectContext.NotificationKey.insertedObjectIDs.rawValue: Set(record.inserted),
                                                                       ManagedObjectContext.NotificationKey.updatedObjectIDs.rawValue: Set(record.updated),
                                                                       ManagedObjectContext.NotificationKey.deletedObjectIDs.rawValue: Set(record.deleted)]))
        #expect((try seen.value(forKey: "department") as? ManagedObject)?.objectID == department.objectID)
        #expect(other.registeredObject(for: department.objectID)?.isFault == true)
    }

    @Test("a record read from history keeps its sets disjoint: inserted then updated is inserted, inserted or updated then deleted is deleted; updates keep their keys")
    func recordFromHistory() throws {
        let stack = try Self.stack()
        let context = stack.context()
        let kept = try stack.insert("Employee", in: context, ["name": "Kept", "email": "k@x", "salary": Int64(1)])
        let doomed = try stack.insert("Employee", in: context, ["name": "Doomed", "email": "d@x", "salary": Int64(1)])
        try context.save()
        let token = try #require(try HistoryTests.history(context).last?.token)

        let fresh = try stack.insert("Employee", in: context, ["name": "Fresh", "email": "f@x", "salary": Int64(1)])
        let brief = try stack.insert("Employee", in: context, ["name": "Brief", "email": "b@x", "salary": Int64(1)])
        try context.save()
        try fresh.setValue("Fresher", forKey: "name")
        try kept.setValue(Int64(2), forKey: "salary")
        try doomed.setValue(Int64(3), forKey: "salary")
        try context.save()
        context.delete(brief)
        context.delete(doomed)
        try context.save()

        let transactions = try HistoryTests.history(context, after: token)
        #expect(transactions.count == 3)
        let store = stack.coordinator.persistentStores[0].identifier
        let record = ChangeRecord(history: transactions, store: store, token: transactions.last?.token)
        #expect(Array(record.inserted) == [fresh.objectID])
        #expect(Array(record.updated) == [kept.objectID])
        #expect(Set(record.deleted) == [brief.objectID, doomed.objectID])
        #expect(record.changedKeys[kept.objectID] == ["salary"])
        #expect(record.changedKeys[doomed.objectID] == nil, "a deleted object's keys go with it")
        #expect(record.writtenRows.isEmpty, "a record read from history is by ID only")
        #expect(record.store == store && record.token == transactions.last?.token)
    }

    @Test("records appended keep the order written and stay disjoint")
    func appending() {
        let store = UUID()
        func id(_ key: Int64) -> ManagedObjectID { ManagedObjectID(entityName: "Employee", store: store, key: key) }
        var first = ChangeRecord(store: store)
        first.inserted = [id(1), id(2)]
        first.noteUpdated(id(3), keys: ["name"])
        var later = ChangeRecord(store: store)
        later.noteUpdated(id(1), keys: ["salary"])
        later.noteUpdated(id(3), keys: ["salary"])
        later.deleted = [id(2)]
        first.append(later)
        #expect(Array(first.inserted) == [id(1)])
        #expect(Array(first.updated) == [id(3)] && first.keys(changedBy: id(3)) == ["name", "salary"])
        #expect(Array(first.deleted) == [id(2)])
        #expect(first.store == store)

        // A batch update's keys, held once, stay right when records with other keys join it.
        var batch = ChangeRecord(store: store)
        batch.updated = [id(4), id(5)]
        batch.keysOfEveryUpdate = ["salary"]
        var started = ChangeRecord()
        started.append(batch)
        #expect(started.keysOfEveryUpdate == ["salary"] && started.changedKeys.isEmpty, "a total started from one record keeps it as it is")
        started.append(first)
        #expect(started.keysOfEveryUpdate == nil)
        #expect(started.keys(changedBy: id(4)) == ["salary"] && started.keys(changedBy: id(3)) == ["name", "salary"])
    }
}
