// Durable small commits on a real file: Arbor's pager against SQLite in the same run.
//
//   cd Benchmarks && swift package --allow-writing-to-package-directory benchmark
//
// Each iteration is one durable commit. Besides throughput and wall clock, every benchmark reports
// `syncsPerCommit` (fsync/fdatasync calls per commit: Arbor from `Pager.statistics`, SQLite from
// the counting VFS) and prints the breakdown once, at teardown. Wall-clock figures are noisy on
// shared machines: compare the ratio to SQLite, not absolute numbers.

import Benchmark
import CommitWorkloads

/// Syncs per commit (one commit per iteration, so no scaling).
let syncsPerCommit = BenchmarkMetric.custom("syncsPerCommit", polarity: .prefersSmaller, useScalingFactor: false)

/// Holds a benchmark's workload from setup to teardown.
final class WorkloadSlot {
    var workload: (any DurableCommitWorkload)?
    var start = SyncCounts()
    var commits: UInt64 = 0
}

/// Registers a benchmark running `make()`'s workload, one commit per iteration.
func durableCommitBenchmark(_ name: String, configuration: Benchmark.Configuration,
                            make: @escaping () throws -> any DurableCommitWorkload) {
    let slot = WorkloadSlot()
    Benchmark(name, configuration: configuration) { benchmark in
        guard let workload = slot.workload else { return }
        do {
            let before = workload.syncs.total
            for _ in benchmark.scaledIterations {
                try workload.commitOne()
            }
            let iterations = UInt64(benchmark.scaledIterations.count)
            slot.commits += iterations
            benchmark.measurement(syncsPerCommit, Int((workload.syncs.total - before) / iterations))
        } catch {
            benchmark.error("\(name): \(error)")
        }
    } setup: {
        let workload = try make()
        slot.workload = workload
        slot.start = workload.syncs
        slot.commits = 0
    } teardown: {
        guard let workload = slot.workload else { return }
        defer {
            workload.close()
            slot.workload = nil
        }
        try workload.verify()
        let made = workload.syncs - slot.start
        print("\(name): syncs per commit \(describeSyncs(made, commits: slot.commits)) over \(slot.commits) commits")
    }
}

let benchmarks: @Sendable () -> Void = {
    // One commit per iteration; each takes a few syncs (around a millisecond here), so a few
    // seconds per benchmark give thousands of samples and keep the whole run under a minute.
    // CPU time is left out: the kernel reports it in 10 ms ticks, longer than a commit.
    // Allocation counts are deterministic: the metric to put thresholds on.
    let configuration = Benchmark.Configuration(
        metrics: [.throughput, .wallClock, .mallocCountTotal, syncsPerCommit],
        timeUnits: .microseconds,
        warmupIterations: 20,
        scalingFactor: .one,
        maxDuration: .seconds(8),
        maxIterations: 5_000
    )

    durableCommitBenchmark("ArborDurableOnePageCommit", configuration: configuration) {
        try ArborOnePageCommits(pageSize: 4096)
    }

    durableCommitBenchmark("SQLiteDurableOneRowCommit", configuration: configuration) {
        try SQLiteOneRowCommits(pageSize: 4096)
    }
}
