// Engine workloads at a tenth of EngineReport's scale: Arbor against SQLite (C API) in the same run.
//
//   cd Benchmarks && swift package --allow-writing-to-package-directory benchmark --target Engine
//
// Data and cache are both scaled down ten times from the report (100,000 rows; a 6.4 MiB cache for
// both engines instead of 64 MiB), so the main table is again about 1.7 times the cache. Page size
// 4096, rollback journal, synced commits, files in a scratch directory (see ScratchDirectory).
//
// What one iteration is:
// - `…BulkInsert100k`, `…TextHeavyInsert20k`: a whole insert transaction into a fresh database
//   (its creation is not measured); the custom metric `fileKiB` is the file's size after it.
// - `…PointReads`, `…TextKeyLookups`: 1,000 random lookups in one read transaction (the figures
//   are scaled per lookup).
// - `…PointReadTransactions`: 1,000 lookups, each its own read transaction (scaled per lookup).
// - `…Scan100k`: a full scan of the 100,000 rows.
// Read benchmarks keep their database open across iterations (warm cache, as in an application).
// Wall-clock figures are noisy here: compare Arbor with SQLite, not with an earlier run.

import Benchmark
import CommitWorkloads
import EngineWorkloads

let rows = 100_000
let textRows = 20_000

/// Both engines' settings: the report's cache budget divided by ten (whole KiB, as SQLite takes it).
let settings: EngineSettings = {
    var settings = EngineSettings()
    settings.cacheBytes = (64 << 20) / 10 / 1024 * 1024
    return settings
}()

/// The file size after a write benchmark, in KiB.
let fileKiB = BenchmarkMetric.custom("fileKiB", polarity: .prefersSmaller, useScalingFactor: false)

/// The engines, by the prefix of their benchmarks' names.
let engines: [(name: String, make: @Sendable (String) throws -> any EngineWorkload)] = [
    ("Arbor", { try ArborEngine(prefix: "arbor-" + $0, settings: settings) }),
    ("SQLite", { try SQLiteEngine(prefix: "sqlite-" + $0, settings: settings) }),
]

/// Holds a read benchmark's database from setup to teardown.
final class EngineSlot {
    var engine: (any EngineWorkload)?
    var seed: UInt64 = 1
}

/// A benchmark whose iterations each build a fresh database with `body`.
func writeBenchmark(_ name: String, make: @escaping (String) throws -> any EngineWorkload,
                    _ body: @escaping (any EngineWorkload) throws -> Void) {
    let configuration = Benchmark.Configuration(
        metrics: [.throughput, .wallClock, .mallocCountTotal, .peakMemoryResident, fileKiB],
        timeUnits: .milliseconds,
        warmupIterations: 1,
        scalingFactor: .one,
        maxDuration: .seconds(6),
        maxIterations: 8
    )
    Benchmark(name, configuration: configuration) { benchmark in
        do {
            let engine = try make("bench")
            defer { engine.remove() }
            benchmark.startMeasurement()
            try body(engine)
            benchmark.stopMeasurement()
            benchmark.measurement(fileKiB, Int(engine.fileSize / 1024))
        } catch {
            benchmark.error("\(name): \(error)")
        }
    }
}

/// A benchmark reading a database that `prepare` fills once, in setup.
func readBenchmark(_ name: String, scalingFactor: BenchmarkScalingFactor,
                   make: @escaping (String) throws -> any EngineWorkload,
                   prepare: @escaping (any EngineWorkload) throws -> Void,
                   _ body: @escaping (any EngineWorkload, Int, UInt64) throws -> Void) {
    let slot = EngineSlot()
    let configuration = Benchmark.Configuration(
        metrics: [.throughput, .wallClock, .mallocCountTotal, .peakMemoryResident],
        timeUnits: scalingFactor == .one ? .milliseconds : .nanoseconds,
        warmupIterations: 3,
        scalingFactor: scalingFactor,
        maxDuration: .seconds(3),
        maxIterations: 2_000
    )
    Benchmark(name, configuration: configuration) { benchmark in
        guard let engine = slot.engine else { return }
        do {
            slot.seed &+= 1
            try body(engine, benchmark.scaledIterations.count, slot.seed)
        } catch {
            benchmark.error("\(name): \(error)")
        }
    } setup: {
        let engine = try make("read")
        slot.engine = engine
        try prepare(engine)
    } teardown: {
        slot.engine?.remove()
        slot.engine = nil
    }
}

let benchmarks: @Sendable () -> Void = {
    let pool = TextPool()
    for (name, make) in engines {
        writeBenchmark("\(name)BulkInsert100k", make: make) { try $0.insertSequential(count: rows) }

        readBenchmark("\(name)PointReads", scalingFactor: .kilo, make: make,
                      prepare: { try $0.insertSequential(count: rows) }) { engine, count, seed in
            try engine.pointReads(count: count, rows: rows, seed: seed)
        }

        readBenchmark("\(name)PointReadTransactions", scalingFactor: .kilo, make: make,
                      prepare: { try $0.insertSequential(count: rows) }) { engine, count, seed in
            try engine.pointReadTransactions(count: count, rows: rows, seed: seed)
        }

        readBenchmark("\(name)Scan100k", scalingFactor: .one, make: make,
                      prepare: { try $0.insertSequential(count: rows) }) { engine, _, _ in
            let seen = try engine.scan()
            guard seen == rows else { throw WorkloadError("the scan saw \(seen) rows, expected \(rows)") }
        }

        readBenchmark("\(name)TextKeyLookups", scalingFactor: .kilo, make: make,
                      prepare: { try $0.insertTextKeys(count: rows) }) { engine, count, seed in
            try engine.textKeyLookups(count: count, rows: rows, seed: seed)
        }

        writeBenchmark("\(name)TextHeavyInsert20k", make: make) { engine in
            try engine.insertTexts(count: textRows, pool: pool)
        }
    }
}
