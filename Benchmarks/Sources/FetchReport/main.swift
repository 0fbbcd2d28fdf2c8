// Issue 5, item 8: fetch requests against GRDB record requests, in one run, the same data:
// indexed equality, a range with sort and limit, an unindexed predicate (a full scan), and a
// count. Prints a markdown table with ratios (docs/performance.md).
//
//   swift run -c release FetchReport [objects]     (default 100000; 1000000 for the big run)
import ArborTestSupport
import CommitWorkloads
import Foundation
import GraphWorkloads

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 100_000 : 100_000
let clock = ContinuousClock()
var generator = SplitMix64(seed: 0xFE7C)
let teams = (0..<2000).map { _ in Int64(generator.next() % UInt64(max(1, count / 10))) }
let starts = (0..<2000).map { _ in Int64(30_000 + generator.next() % 98_000) }
let ages = (0..<20).map { _ in Int64(20 + generator.next() % 45) }
let bounds = (0..<200).map { _ in Int64(30_000 + generator.next() % 100_000) }

// FETCH_ROUNDS=N (default 5): each workload runs N times on each engine, the engines taking
// turns query set by query set, and the median of the N ratios is reported (one pass of each,
// Arbor's then GRDB's, moved a ratio by a tenth between runs on this shared machine).
let rounds = max(1, Int(ProcessInfo.processInfo.environment["FETCH_ROUNDS"] ?? "") ?? 5)
// FETCH_REPEAT=N runs each workload's queries N times (profiles of the queries, not the fill).
let repeats = Int(ProcessInfo.processInfo.environment["FETCH_REPEAT"] ?? "") ?? 1
func repeated<T>(_ values: [T]) -> [T] { Array([[T]](repeating: values, count: max(1, repeats)).joined()) }

let engines: [FetchWorkload] = [try ArborFetches(), try GRDBFetches()]
defer { for engine in engines { engine.remove() } }
for engine in engines { try engine.fill(count: count) }

/// Queries per second of each round, by engine and workload; and the results of the last.
var rates: [String: [String: [Double]]] = [:]
var results: [String: [String: Int]] = [:]
let workloads: [(key: String, queries: Int, run: (FetchWorkload) throws -> Int)] = [
    ("equality", teams.count * repeats, { try $0.indexedEquality(repeated(teams)) / repeats }),
    ("range", starts.count * repeats, { try $0.rangeSortLimit(repeated(starts)) / repeats }),
    ("unindexed", ages.count * repeats, { try $0.unindexed(repeated(ages)) / repeats }),
    ("count", bounds.count * repeats, { try $0.count(repeated(bounds)) / repeats }),
]
for _ in 0..<rounds {
    for workload in workloads {
        // FETCH_ONLY=unindexed (comma-separated keys) runs only those workloads, for profiling.
        if let only = ProcessInfo.processInfo.environment["FETCH_ONLY"], !only.split(separator: ",").contains(Substring(workload.key)) { continue }
        for engine in engines {
            // FETCH_ENGINE=Arbor (or GRDB) runs one engine's queries alone, for profiling.
            if let only = ProcessInfo.processInfo.environment["FETCH_ENGINE"], only != engine.engine { continue }
            let start = clock.now
            let found = try workload.run(engine)
            rates[engine.engine, default: [:]][workload.key, default: []].append(Double(workload.queries) / (clock.now - start).seconds)
            results[engine.engine, default: [:]][workload.key] = found
        }
    }
}

print("Fetch requests against GRDB record requests: \(grouped(count)) people; \(rounds) rounds, the engines taking turns; medians; \(CacheBudget.label).")
print("")
print("| Workload | Arbor (queries/s) | GRDB (queries/s) | Arbor/GRDB (median; range) | Goal | Met |")
print("|---|---:|---:|---:|---|---|")
for (key, label) in [("equality", "indexed equality, `team == t` (~10 results), \(teams.count) queries"),
                     ("range", "range, sort and limit, `salary` in [s, s+2000) by salary, first 20, \(starts.count) queries"),
                     ("unindexed", "unindexed, `age == a AND name ENDSWITH '7'` (a full scan), \(ages.count) queries"),
                     ("count", "count, `salary < s`, \(bounds.count) queries")] {
    let a = rates["Arbor"]?[key] ?? [], g = rates["GRDB"]?[key] ?? []
    let ratios = zip(a, g).map { $0 / max($1, 1e-9) }
    let ratio = median(ratios)
    let same = results["Arbor"]?[key] == results["GRDB"]?[key] ? "" : " (results differ: \(results["Arbor"]?[key] ?? -1) against \(results["GRDB"]?[key] ?? -1))"
    print("| \(label)\(same) | \(grouped(Int(median(a).rounded()))) | \(grouped(Int(median(g).rounded()))) | \(medianAndRange(ratios)) | ≥ 2× | \(ratio >= 2 ? "yes" : "**no**") |")
}
