// Durable one-page commits, Arbor against SQLite, as the markdown table in docs/performance.md.
//
//   cd Benchmarks && swift run -c release CommitReport [commits]     (default 500 per engine)
//
// Both engines run in the same process on the same file system (see ScratchDirectory), in
// alternating chunks, so a change in background load (another build, another disk user) hits
// both alike. Each commit is timed on its own; syncs are counted over the timed commits only.

import CommitWorkloads

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a line to standard error.
func printError(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
}

let arguments = CommandLine.arguments.dropFirst()
if arguments.contains(where: { $0 == "-h" || $0 == "--help" }) {
    print("usage: CommitReport [commits]   durable one-page commits per engine (default 500)")
    exit(0)
}
guard arguments.count <= 1, let commits = Int(arguments.first ?? "500"), commits > 0 else {
    printError("usage: CommitReport [commits]   (a positive number of commits per engine; default 500)")
    exit(64)
}
let warmUp = 20
let chunk = 25

/// What one engine measured.
struct Measurement {
    var latencies: [Duration] = []
    var syncs = SyncCounts()

    var seconds: Double { latencies.reduce(0.0) { $0 + $1.seconds } }
    var commitsPerSecond: Double { Double(latencies.count) / seconds }

    func percentile(_ p: Double) -> Duration {
        let sorted = latencies.sorted()
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.down)))]
    }
}

extension Duration {
    var milliseconds: String { fixed(seconds * 1000, 2) + " ms" }
}

func run() throws {
    let arbor = try ArborOnePageCommits(pageSize: 4096)
    defer { arbor.close() }
    let sqlite = try SQLiteOneRowCommits(pageSize: 4096)
    defer { sqlite.close() }
    let workloads: [any DurableCommitWorkload] = [arbor, sqlite]
    var results = [Measurement](repeating: Measurement(), count: workloads.count)

    for workload in workloads {
        for _ in 0..<warmUp { try workload.commitOne() }
    }
    let clock = ContinuousClock()
    var done = 0
    var round = 0
    while done < commits {
        let n = min(chunk, commits - done)
        // Alternate which engine goes first, so neither always follows the other.
        let order = round % 2 == 0 ? Array(workloads.indices) : workloads.indices.reversed()
        for index in order {
            let workload = workloads[index]
            let before = workload.syncs
            for _ in 0..<n {
                let start = clock.now
                try workload.commitOne()
                results[index].latencies.append(clock.now - start)
            }
            results[index].syncs = results[index].syncs + (workload.syncs - before)
        }
        done += n
        round += 1
    }
    for workload in workloads { try workload.verify() }

    let directory = arbor.directory
    let parent = String(directory.path[..<(directory.path.lastIndex(of: "/") ?? directory.path.endIndex)])
    print("Durable one-page commits: \(commits) commits per engine after \(warmUp) warm-up commits, page size 4096,")
    print("files on \(directory.fileSystemName) (\(parent)), engines alternating every \(chunk) commits.")
    if !SQLiteOneRowCommits.countsDirectorySyncs {
        print("Warning: this SQLite does not expose its openDirectory system call: SQLite's directory syncs are not counted.")
    }
    if directory.fileSystemName == "tmpfs" {
        print("Warning: tmpfs ignores fsync: these figures say nothing about durable commits. Set ARBOR_BENCH_DIR.")
    }
    print("")
    print("| Engine | Commits/s | Median commit | p99 commit | Syncs per commit | Journal | Database | Directory |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for (workload, result) in zip(workloads, results) {
        let n = Double(result.latencies.count)
        func per(_ count: UInt64) -> String { fixed(Double(count) / n) }
        print("| \(workload.engine) | \(fixed(result.commitsPerSecond, 0)) | \(result.percentile(0.5).milliseconds) | \(result.percentile(0.99).milliseconds) | \(per(result.syncs.total)) | \(per(result.syncs.journal)) | \(per(result.syncs.database)) | \(per(result.syncs.directory)) |")
        if result.syncs.other != 0 {
            print("(\(workload.engine) also made \(per(result.syncs.other)) other syncs per commit.)")
        }
    }
    print("")
    print("Throughput ratio Arbor/SQLite: \(fixed(results[0].commitsPerSecond / results[1].commitsPerSecond, 2))")
    // Less sensitive than throughput to the rare stall (another process flushing the same disk).
    print("Median commit latency ratio SQLite/Arbor: \(fixed(results[1].percentile(0.5).seconds / results[0].percentile(0.5).seconds, 2))")
}

do {
    try run()
} catch {
    printError("CommitReport: \(error)")
    exit(1)
}
