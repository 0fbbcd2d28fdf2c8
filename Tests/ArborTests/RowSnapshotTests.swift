import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// The row cache's snapshots as the objects hold them (docs/object-graph.md, "The row cache"):
/// a fetched fault keeps the snapshot the fetch made and fires from it without a lookup; a
/// snapshot whose row goes away leaves the cache while objects still hold it.
@Suite("Row-cache snapshots held by objects")
struct RowSnapshotTests {
    /// A file-backed stack with `count` departments saved; returns their IDs.
    func departments(_ stack: Stack, _ count: Int) throws -> [ManagedObjectID] {
        let setup = stack.context()
        let objects = try (0..<count).map { try stack.insert("Department", in: setup, ["name": "D\($0)"]) }
        try setup.save()
        return objects.map(\.objectID)
    }

    @Test("item 6: a fetch's faults hold its snapshots and fire from them (hits, no misses); dropping them empties the cache")
    func fetchedFaultsFireFromTheirSnapshots() throws {
        let stack = try Stack()
        _ = try departments(stack, 20)
        #expect(stack.coordinator.rowCacheStatistics.snapshots == 0)
        do {
            let context = stack.context()
            let fetched = try context.fetch(FetchRequest<ManagedObject>(entityName: "Department"))
            let before = stack.coordinator.rowCacheStatistics
            #expect(fetched.count == 20 && fetched.allSatisfy(\.isFault) && before.snapshots == 20)
            for object in fetched { _ = try object.value(forKey: "name") }
            let after = stack.coordinator.rowCacheStatistics
            #expect(after.hits == before.hits + 20 && after.misses == before.misses && after.snapshots == 20)
            // A second context fetching the same rows shares the snapshots (one per row).
            let other = stack.context()
            let again = try other.fetch(FetchRequest<ManagedObject>(entityName: "Department"))
            #expect(again.count == 20 && stack.coordinator.rowCacheStatistics.snapshots == 20)
            withExtendedLifetime((fetched, again)) {}
        }
        #expect(stack.coordinator.rowCacheStatistics.snapshots == 0, "released at zero references")
    }

    @Test("S000-42: a held snapshot whose row another context deleted leaves the cache; the fault then fails, or is marked deleted")
    func heldSnapshotOfADeletedRow() throws {
        let stack = try Stack()
        let ids = try departments(stack, 3)
        let reader = stack.context()
        reader.shouldDeleteInaccessibleFaults = false
        let faults = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Department"))
        #expect(stack.coordinator.rowCacheStatistics.snapshots == 3)
        let gone = try #require(faults.first { $0.objectID == ids[1] })
        let writer = stack.context()
        writer.delete(try writer.existingObject(with: ids[1]))
        try writer.save()
        #expect(stack.coordinator.rowCacheStatistics.snapshots == 2, "the deleted row's snapshot left the cache, though the reader's fault still holds it")
        #expect(throws: ArborError.self) { try gone.value(forKey: "name") }
        // The others still fire from their snapshots; the lenient context marks the lost one deleted.
        for object in faults where object !== gone { #expect(try object.value(forKey: "name") is String) }
        let lenient = stack.context()
        #expect(lenient.shouldDeleteInaccessibleFaults, "true by default")
        let fault = lenient.object(with: ids[1])
        _ = try fault.value(forKey: "name")
        #expect(fault.isDeleted)
        withExtendedLifetime(faults) {}
    }

    @Test("item 6: a fetched fault fires with the row another context of the coordinator saved after the fetch (its snapshot changed in place), not with the values the fetch gave it")
    func filledFaultFiresWithTheNewerSnapshot() throws {
        let stack = try Stack()
        let ids = try departments(stack, 2)
        let reader = stack.context()
        let faults = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Department"))
        #expect(faults.count == 2 && faults.allSatisfy(\.isFault))
        let changed = try #require(faults.first { $0.objectID == ids[0] })
        let untouched = try #require(faults.first { $0.objectID == ids[1] })
        let writer = stack.context()
        try writer.existingObject(with: ids[0]).setValue("Renamed", forKey: "name")
        try writer.save()
        let before = stack.coordinator.rowCacheStatistics
        #expect(try changed.value(forKey: "name") as? String == "Renamed", "the fire reads the snapshot the save updated")
        #expect(try untouched.value(forKey: "name") as? String == "D1")
        let after = stack.coordinator.rowCacheStatistics
        #expect(after.hits == before.hits + 2 && after.misses == before.misses, "both fires are cache hits")
        #expect(!changed.isFault && !untouched.isFault && changed.committedValues(forKeys: ["name"])["name"] as? String == "Renamed")
    }

    @Test("S000-71: a fetched fault in a context with staleness 0 reads its row again when it fires, though the fetch gave it the values")
    func filledFaultHonoursStalenessZero() throws {
        let stack = try Stack()
        _ = try departments(stack, 1)
        let reader = stack.context()
        reader.stalenessInterval = 0
        let fault = try #require(try reader.fetch(FetchRequest<ManagedObject>(entityName: "Department")).first)
        let before = stack.coordinator.rowCacheStatistics
        #expect(try fault.value(forKey: "name") as? String == "D0")
        let after = stack.coordinator.rowCacheStatistics
        #expect(after.staleReads == before.staleReads + 1 && after.hits == before.hits)
    }

    @Test("item 6: snapshots counted down on many threads at once end at zero references and leave the cache")
    func concurrentReleasesDropSnapshots() async throws {
        let stack = try Stack()
        _ = try departments(stack, 200)
        let coordinator = stack.coordinator
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    for _ in 0..<20 {
                        let context = ManagedObjectContext(concurrencyType: .privateQueue)
                        context.persistentStoreCoordinator = coordinator
                        context.performAndWait {
                            let objects = (try? context.fetch(FetchRequest<ManagedObject>(entityName: "Department"))) ?? []
                            for object in objects.prefix(50) { _ = try? object.value(forKey: "name") }
                        }
                    }
                }
            }
        }
        #expect(coordinator.rowCacheStatistics.snapshots == 0, "every snapshot was released and dropped")
    }

    @Test("S000-71/S000-74: a held snapshot older than the staleness interval is read again, in place, from the other coordinator's save")
    func heldSnapshotIsReadAgainWhenStale() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/stale.arbor"
        let stack = try Stack(path: path)
        let ids = try departments(stack, 1)
        let reader = stack.context()
        reader.stalenessInterval = 0
        let fault = try #require(try reader.fetch(FetchRequest<ManagedObject>(entityName: "Department")).first)
        // Another coordinator (another stack on the file) renames the department.
        let otherStack = try Stack(path: path)
        let writer = otherStack.context()
        try writer.existingObject(with: ids[0]).setValue("Renamed", forKey: "name")
        try writer.save()
        let before = stack.coordinator.rowCacheStatistics
        #expect(try fault.value(forKey: "name") as? String == "Renamed", "staleness 0: the fetched snapshot is not trusted")
        let after = stack.coordinator.rowCacheStatistics
        #expect(after.staleReads == before.staleReads + 1 && after.snapshots == 1)
        // With an infinite interval the (now updated) snapshot serves the next fault without a read.
        let relaxed = stack.context()
        #expect(try relaxed.object(with: ids[0]).value(forKey: "name") as? String == "Renamed")
        #expect(stack.coordinator.rowCacheStatistics.hits == after.hits + 1)
    }

    @Test("a row read before another context's save never replaces the newer snapshot that save left")
    func olderRowsDoNotReplaceNewerSnapshots() throws {
        let stack = try Stack()
        let ids = try departments(stack, 1)
        let coordinator = stack.coordinator
        let newer = try #require(try coordinator.rows(for: ids).first ?? nil)
        var older = newer
        older.version = newer.version - 1
        older.values["name"] = .attribute(.string("old"))
        var newest = newer
        newest.version = newer.version + 1
        let kept = coordinator.retainSnapshots([(ids[0], newest)])
        _ = coordinator.retainSnapshots([(ids[0], older)])
        #expect(coordinator.cachedRow(for: ids[0])?.version == newest.version, "the older row was ignored")
        _ = coordinator.retainSnapshots([(ids[0], newest)])
        for _ in 0..<3 { coordinator.release(kept[0]) }
        #expect(coordinator.rowCacheStatistics.snapshots == 0)
    }

    @Test("S000-55: refresh without merging releases the snapshot; the next fire takes it again")
    func refreshReleasesAndRetakes() throws {
        let stack = try Stack()
        let ids = try departments(stack, 1)
        let context = stack.context()
        let object = try context.existingObject(with: ids[0])
        #expect(stack.coordinator.rowCacheStatistics.snapshots == 1)
        context.refresh(object, mergeChanges: false)
        #expect(object.isFault && stack.coordinator.rowCacheStatistics.snapshots == 0)
        #expect(try object.value(forKey: "name") as? String == "D0")
        #expect(stack.coordinator.rowCacheStatistics.snapshots == 1)
    }
}
