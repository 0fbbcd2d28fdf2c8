import ArborStore
import Foundation
import InMemoryLogging
import Logging
import MetricsTestKit
import Testing
@testable import Arbor

/// Issue 25, item 6: the object graph's log (`arbor.graph`) and metrics (docs/observability.md),
/// seen through an in-memory log handler and a test metrics factory.
@Suite("Object-graph observability")
struct GraphObservabilityTests {
    struct Observed {
        let handler = InMemoryLogHandler()
        let metrics = TestMetrics()
        let stack: Stack

        init(slowFetchThreshold: Duration? = .milliseconds(250), path: String? = nil) throws {
            var observability = ObjectGraphObservability()
            observability.logger = Logger(label: "arbor.graph") { [handler] _ in handler }
            observability.logger.logLevel = .trace
            observability.metricsFactory = metrics
            observability.slowFetchThreshold = slowFetchThreshold
            let model = try employeeModel()
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model, observability: observability)
            if let path { try coordinator.addNativeStore(at: path) } else { try coordinator.addInMemoryStore() }
            stack = Stack(model: model, coordinator: coordinator)
        }

        func entries(_ level: Logger.Level) -> [InMemoryLogHandler.Entry] { handler.entries.filter { $0.level == level } }
    }

    @Test("a fetch over the slow-fetch threshold is a warning carrying its entity, duration, result count and plan, and is counted; every fetch is timed")
    func slowFetches() throws {
        let observed = try Observed(slowFetchThreshold: .zero)
        let context = observed.stack.context()
        for name in ["Research", "Sales"] { _ = try observed.stack.insert("Department", in: context, ["name": name]) }
        try context.save()
        _ = try context.fetch(FetchRequest<ManagedObject>(entityName: "Department", format: "name == %@", "Sales"))
        let warning = try #require(observed.entries(.warning).first)
        #expect("\(warning.message)".hasPrefix("a fetch of Department took"))
        #expect(warning.metadata["arbor.entity"] == "Department" && warning.metadata["arbor.results"] == "1")
        #expect("\(warning.metadata["arbor.plan"] ?? "")".contains("Department"), "the plan")
        #expect(observed.metrics.counterTotal(label: "arbor_slow_fetches") == 1)
        #expect(try observed.metrics.expectTimer("arbor_fetch_duration").values.count == 1)

        // (A threshold no stall of a loaded machine reaches.)
        let quiet = try Observed(slowFetchThreshold: .seconds(60))
        let other = quiet.stack.context()
        _ = try other.fetch(FetchRequest<ManagedObject>(entityName: "Department"))
        #expect(quiet.entries(.warning).isEmpty && quiet.metrics.counterTotal(label: "arbor_slow_fetches") == 0, "a quick fetch is not logged")
    }

    @Test("failed saves are counted and logged at debug, whatever their kind (the caller receives them); saves are counted and timed")
    func failedSaves() throws {
        let observed = try Observed()
        let context = observed.stack.context()
        _ = try observed.stack.insert("Department", in: context, [:])            // name is required
        #expect(throws: ArborError.self) { try context.save() }
        let validation = try #require(observed.entries(.debug).first { "\($0.message)".hasPrefix("a save failed") })
        #expect("\(validation.metadata["arbor.error"] ?? "")".contains("validationMissingMandatoryProperty"))
        context.rollback()

        let department = try observed.stack.insert("Department", in: context, ["name": "Research"])
        try context.save()
        #expect(observed.metrics.counterTotal(label: "arbor_saves") == 1)
        #expect(try observed.metrics.expectTimer("arbor_save_duration").values.count == 1)
        // A conflict: another context changes the row first.
        let other = observed.stack.context()
        try other.existingObject(with: department.objectID).setValue("Other", forKey: "name")
        try other.save()
        try department.setValue("Mine", forKey: "name")
        #expect(throws: ArborError.self) { try context.save() }
        #expect(observed.entries(.debug).contains { "\($0.metadata["arbor.error"] ?? "")".contains("mergeConflict") })
        #expect(!observed.handler.entries.contains { $0.level > .debug }, "the caller has every error: nothing above debug")
        #expect(observed.metrics.counterTotal(label: "arbor_save_failures") == 2)
        #expect(observed.entries(.error).isEmpty)
        #expect(!observed.handler.entries.contains { $0.level == .info }, "nothing at info")
    }

    @Test("a store that fails to open is a debug line naming the file (the caller receives the error); a store added is a debug line")
    func storeOpening() throws {
        let observed = try Observed()
        #expect(observed.entries(.debug).contains { "\($0.message)".hasPrefix("added") && $0.metadata["arbor.path"] == "memory" })
        let directory = try temporaryDirectory()
        let path = directory + "/not-a-store.arbor"
        FileManager.default.createFile(atPath: path, contents: Data(repeating: 7, count: 8192))
        #expect(throws: ArborError.self) { try observed.stack.coordinator.addNativeStore(at: path) }
        let error = try #require(observed.entries(.debug).first { "\($0.message)".contains("could not open the store") })
        #expect(error.metadata["arbor.path"] == "\(path)")
        #expect(!observed.handler.entries.contains { $0.level > .debug }, "the caller has the error: nothing above debug")
    }

    @Test("row-cache hits, misses and snapshots are reported at each save, as increments of the cache's own counters")
    func rowCacheMetrics() throws {
        let observed = try Observed()
        let writer = observed.stack.context()
        for name in ["A", "B", "C"] { _ = try observed.stack.insert("Department", in: writer, ["name": name]) }
        try writer.save()
        let reader = observed.stack.context()
        reader.stalenessInterval = 0                                 // every fire reads the store
        let ids = try reader.fetch(FetchRequest<ManagedObjectID>(entityName: "Department"))
        for id in ids { _ = try reader.object(with: id).value(forKey: "name") }
        try writer.existingObject(with: ids[0]).setValue("A2", forKey: "name")
        try writer.save()
        // What the cache counted up to the save's end, reported there.
        let cache = observed.stack.coordinator.rowCacheStatistics
        let metrics = observed.metrics
        #expect(cache.misses + cache.staleReads >= 3, "the reader's fires read the store")
        #expect(metrics.counterTotal(label: "arbor_row_cache_misses") + metrics.counterTotal(label: "arbor_row_cache_stale_reads")
                == Int64(cache.misses + cache.staleReads))
        #expect(metrics.counterTotal(label: "arbor_row_cache_hits") == Int64(cache.hits))
        #expect(try metrics.expectGauge("arbor_row_cache_snapshots").lastValue == Double(observed.stack.coordinator.rowCacheStatistics.snapshots))
    }
}
