// Durable saves from 1, 2 and 4 writers at once on one file (issue 6, item 10), in
// package-benchmark form: Arbor's private-queue contexts on one coordinator against SQLite with
// as many connections, in the same run.
//
//   cd Benchmarks && swift package --allow-writing-to-package-directory benchmark --target ContextSaves
//
// One iteration is 20 saves in all, split evenly over the writers (each on a thread of its own,
// each changing its own row; the threads start and stop every iteration), so the figures are per
// 20 saves. ContextSaveReport (`make bench-contexts`) runs the same workloads with more saves, and
// SQLite with one shared connection too, for docs/performance.md. Wall-clock figures are noisy
// here: compare Arbor with SQLite in one run.

import Benchmark
import CommitWorkloads
import ContextSaveWorkloads

/// Saves per iteration (divisible by every writer count).
let savesPerIteration = 20

/// Holds a benchmark's workload from setup to teardown.
final class SaveSlot: @unchecked Sendable {
    var workload: (any ConcurrentSaveWorkload)?
    var savesPerWriter = 0
}

func concurrentSaveBenchmark(_ name: String, make: @escaping @Sendable () throws -> any ConcurrentSaveWorkload) {
    let slot = SaveSlot()
    let configuration = Benchmark.Configuration(
        metrics: [.throughput, .wallClock, .mallocCountTotal],
        timeUnits: .milliseconds,
        warmupIterations: 2,
        scalingFactor: .one,
        maxDuration: .seconds(4),
        maxIterations: 200
    )
    Benchmark(name, configuration: configuration) { benchmark in
        guard let workload = slot.workload else { return }
        do {
            for _ in benchmark.scaledIterations {
                let perWriter = savesPerIteration / workload.writers
                _ = try runConcurrently(workload, savesPerWriter: perWriter)
                slot.savesPerWriter += perWriter
            }
        } catch {
            benchmark.error("\(name): \(error)")
        }
    } setup: {
        slot.workload = try make()
        slot.savesPerWriter = 0
    } teardown: {
        guard let workload = slot.workload else { return }
        defer {
            workload.remove()
            slot.workload = nil
        }
        try workload.verify(savesPerWriter: slot.savesPerWriter)
    }
}

let benchmarks: @Sendable () -> Void = {
    for writers in [1, 2, 4] {
        concurrentSaveBenchmark("ArborContextSaves\(writers)x") { try ArborContextSaves(writers: writers) }
        concurrentSaveBenchmark("SQLiteConnectionSaves\(writers)x") { try SQLiteConnectionSaves(writers: writers) }
    }
}
