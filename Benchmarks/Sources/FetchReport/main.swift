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

struct Measured {
    var rate: Double
    var results: Int
}

var figures: [String: [String: Measured]] = [:]
for make in [{ try ArborFetches() as FetchWorkload }, { try GRDBFetches() as FetchWorkload }] {
    let engine = try make()
    defer { engine.remove() }
    try engine.fill(count: count)
    func measure(_ key: String, _ queries: Int, _ body: () throws -> Int) throws {
        // FETCH_ONLY=unindexed (comma-separated keys) runs only those workloads, for profiling.
        if let only = ProcessInfo.processInfo.environment["FETCH_ONLY"], !only.split(separator: ",").contains(Substring(key)) { return }
        let start = clock.now
        let results = try body()
        figures[engine.engine, default: [:]][key] = Measured(rate: Double(queries) / (clock.now - start).seconds, results: results)
    }
    // FETCH_REPEAT=N runs each workload's queries N times (profiles of the queries, not the fill).
    let repeats = Int(ProcessInfo.processInfo.environment["FETCH_REPEAT"] ?? "") ?? 1
    func repeated<T>(_ values: [T]) -> [T] { Array([[T]](repeating: values, count: max(1, repeats)).joined()) }
    try measure("equality", teams.count * repeats) { try engine.indexedEquality(repeated(teams)) / repeats }
    try measure("range", starts.count * repeats) { try engine.rangeSortLimit(repeated(starts)) / repeats }
    try measure("unindexed", ages.count * repeats) { try engine.unindexed(repeated(ages)) / repeats }
    try measure("count", bounds.count * repeats) { try engine.count(repeated(bounds)) / repeats }
}

print("Fetch requests against GRDB record requests: \(grouped(count)) people; one run.")
print("")
print("| Workload | Arbor (queries/s) | GRDB (queries/s) | Arbor/GRDB | Goal | Met |")
print("|---|---:|---:|---:|---|---|")
for (key, label) in [("equality", "indexed equality, `team == t` (~10 results), \(teams.count) queries"),
                     ("range", "range, sort and limit, `salary` in [s, s+2000) by salary, first 20, \(starts.count) queries"),
                     ("unindexed", "unindexed, `age == a AND name ENDSWITH '7'` (a full scan), \(ages.count) queries"),
                     ("count", "count, `salary < s`, \(bounds.count) queries")] {
    let a = figures["Arbor"]?[key], g = figures["GRDB"]?[key]
    let ratio = (a?.rate ?? 0) / max(g?.rate ?? 1, 1e-9)
    let same = a?.results == g?.results ? "" : " (results differ: \(a?.results ?? -1) against \(g?.results ?? -1))"
    print("| \(label)\(same) | \(grouped(Int((a?.rate ?? 0).rounded()))) | \(grouped(Int((g?.rate ?? 0).rounded()))) | \(fixed(ratio)) | ≥ 2× | \(ratio >= 2 ? "yes" : "**no**") |")
}
