// The object graph against GRDB records (issue 4, item 11), in package-benchmark form: Arbor's
// managed objects in a context on a native store, and GRDB 7 records on the system SQLite, the
// same rows, both with a rollback journal and full syncs, in the same run.
//
//   cd Benchmarks && swift package --allow-writing-to-package-directory benchmark --target ObjectGraph
//
// What one iteration is:
// - `…InsertAndSave10k`: 10,000 new objects (records) inserted and saved in one save (one write
//   transaction) into a fresh store (its creation is not measured).
// - `…KeyedFetches`: 1,000 random objects fetched one at a time by key, each read on its own
//   (Arbor: `existingObject(with:)` in a fresh context; GRDB: `fetchOne(db, key:)` in its own
//   `read`); figures are per fetch.
// - `…FetchAll20k`: one fetch of all 20,000 stored objects, each one's salary read (Arbor: a
//   fetch request in a fresh context; GRDB: `fetchAll` in one `read`).
// - `…DurableSaves`: 10 saves of one new object each, each synced (figures per save).
// - `ArborFaultFires`: 1,000 faults fired from the row cache (another context holds every
//   snapshot); figures per fire.
// ObjectGraphReport runs the same workloads at 100,000 and 1,000,000 objects for
// docs/performance.md; wall-clock figures are noisy here: compare Arbor with GRDB in one run.

import ArborTestSupport
import Benchmark
import CommitWorkloads
import GraphWorkloads

let objects = 10_000
let stored = 20_000

/// The engines, by the prefix of their benchmarks' names.
let engines: [(name: String, make: @Sendable () throws -> any GraphWorkload)] = [
    ("Arbor", { try ArborGraph() }),
    ("GRDB", { try GRDBGraph() }),
]

/// Holds a read benchmark's store (and its keys) from setup to teardown.
final class GraphSlot: @unchecked Sendable {
    var engine: (any GraphWorkload)?
    var keys: [Int64] = []
    var next = 0
    var generator = SplitMix64(seed: 0x6EAF)

    /// `count` keys drawn at random from the stored ones.
    func sample(_ count: Int) -> [Int64] { sampleKeys(keys, count: count, generator: &generator) }
}

func readBenchmark(_ name: String, scalingFactor: BenchmarkScalingFactor, make: @escaping @Sendable () throws -> any GraphWorkload,
                   _ body: @escaping (Benchmark, any GraphWorkload, GraphSlot, Int) throws -> Void) {
    let slot = GraphSlot()
    let configuration = Benchmark.Configuration(
        metrics: [.throughput, .wallClock, .mallocCountTotal, .peakMemoryResident],
        timeUnits: .microseconds,
        warmupIterations: 2,
        scalingFactor: scalingFactor,
        maxDuration: .seconds(3),
        maxIterations: 500
    )
    Benchmark(name, configuration: configuration) { benchmark in
        guard let engine = slot.engine else { return }
        do {
            try body(benchmark, engine, slot, benchmark.scaledIterations.count)
        } catch {
            benchmark.error("\(name): \(error)")
        }
    } setup: {
        let engine = try make()
        slot.engine = engine
        slot.keys = try engine.insertAndSave(count: stored, from: 0)
        slot.next = stored
    } teardown: {
        slot.engine?.remove()
        slot.engine = nil
    }
}

let benchmarks: @Sendable () -> Void = {
    for (name, make) in engines {
        Benchmark("\(name)InsertAndSave10k", configuration: .init(
            metrics: [.throughput, .wallClock, .mallocCountTotal, .peakMemoryResident],
            timeUnits: .milliseconds, warmupIterations: 1, scalingFactor: .one, maxDuration: .seconds(6), maxIterations: 20
        )) { benchmark in
            do {
                let engine = try make()
                defer { engine.remove() }
                benchmark.startMeasurement()
                let keys = try engine.insertAndSave(count: objects, from: 0)
                benchmark.stopMeasurement()
                guard keys.count == objects else { throw WorkloadError("\(name): \(keys.count) keys for \(objects) objects") }
            } catch {
                benchmark.error("\(name)InsertAndSave10k: \(error)")
            }
        }

        readBenchmark("\(name)KeyedFetches", scalingFactor: .kilo, make: make) { _, engine, slot, count in
            try engine.keyedFetches(slot.sample(count))
        }

        readBenchmark("\(name)FetchAll20k", scalingFactor: .one, make: make) { _, engine, slot, count in
            for _ in 0..<count {
                let fetched = try engine.fetchAll()
                guard fetched == slot.keys.count else { throw WorkloadError("\(name): fetched \(fetched) of \(slot.keys.count)") }
            }
        }

        readBenchmark("\(name)DurableSaves", scalingFactor: .one, make: make) { _, engine, slot, count in
            try engine.durableSaves(count: count * 10, from: slot.next)
            slot.next += count * 10
        }
    }

    // Only the fires are measured (not the other context loading every snapshot first).
    readBenchmark("ArborFaultFires", scalingFactor: .kilo, make: { try ArborGraph() }) { benchmark, engine, slot, count in
        guard let arbor = engine as? ArborGraph else { return }
        let keys = slot.sample(count)
        try arbor.faultFires(keys) {
            benchmark.startMeasurement()
        } finished: {
            benchmark.stopMeasurement()
        }
    }
}
