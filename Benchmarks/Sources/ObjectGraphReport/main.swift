// Issue 4, item 11: the object graph against GRDB records, in one run, the same data, a rollback
// journal and full syncs for both. Prints a markdown table with ratios (docs/performance.md).
//
//   swift run -c release ObjectGraphReport [objects]     (default 100000; 1000000 for the big run)
import ArborTestSupport
import CommitWorkloads
import Foundation
import GraphWorkloads

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 100_000 : 100_000
let keyed = min(count, 100_000)
let saves = 300
let clock = ContinuousClock()
func grouped(_ value: Double) -> String { grouped(Int(value.rounded())) }

var rates: [String: [String: Double]] = [:]
var faultRate = 0.0
var fileSystem = ""
for make in [{ try ArborGraph() as GraphWorkload }, { try GRDBGraph() as GraphWorkload }] {
    let engine = try make()
    defer { engine.remove() }
    var start = clock.now
    fileSystem = engine.fileSystemName
    let keys = try engine.insertAndSave(count: count, from: 0)
    rates[engine.engine, default: [:]]["insert"] = Double(count) / (clock.now - start).seconds
    var generator = SplitMix64(seed: 0x6EAF)
    let sample = sampleKeys(keys, count: keyed, generator: &generator)
    start = clock.now
    try engine.keyedFetches(sample)
    rates[engine.engine, default: [:]]["keyed"] = Double(keyed) / (clock.now - start).seconds
    start = clock.now
    let fetched = try engine.fetchAll()
    rates[engine.engine, default: [:]]["all"] = Double(fetched) / (clock.now - start).seconds
    guard fetched == count else { throw WorkloadError("\(engine.engine): fetched \(fetched) of \(count)") }
    start = clock.now
    try engine.durableSaves(count: saves, from: count)
    rates[engine.engine, default: [:]]["saves"] = Double(saves) / (clock.now - start).seconds
    if let arbor = engine as? ArborGraph {
        faultRate = Double(keyed) / (try arbor.faultFires(Array(keys.prefix(keyed)))).seconds
    }
}

print("Object graph against GRDB records: \(grouped(Double(count))) objects; rollback journal, full syncs; \(CacheBudget.label); one run.")
print("Files on \(fileSystem).")
if fileSystem == "tmpfs" {
    print("Warning: tmpfs ignores fsync: the durable-save figures say nothing about durability. Set ARBOR_BENCH_DIR.")
}
print("")
print("| Workload | Arbor | GRDB | Arbor/GRDB | Goal | Met |")
print("|---|---:|---:|---:|---|---|")
for (key, label, goal) in [("insert", "insert + save of \(grouped(Double(count))) objects in one save (objects/s)", 2.0),
                           ("all", "fetch of all \(grouped(Double(count))) objects in one fetch, each one's salary read (objects/s)", 2.0),
                           ("keyed", "keyed fetches, one object at a time by key, \(grouped(Double(keyed))) (fetches/s)", 10.0),
                           ("saves", "durable one-object saves, \(saves) (saves/s)", 0)] {
    let a = rates["Arbor"]?[key] ?? 0, g = rates["GRDB"]?[key] ?? 0
    let ratio = g > 0 ? a / g : 0
    let goalText = goal > 0 ? "≥ \(Int(goal))×" : "—"
    let met = goal > 0 ? (ratio >= goal ? "yes" : "**no**") : "—"
    print("| \(label) | \(grouped(a)) | \(grouped(g)) | \(fixed(ratio)) | \(goalText) | \(met) |")
}
print("| fault fires from the row cache, \(grouped(Double(keyed))) (fires/s) | \(grouped(faultRate)) | — | — | ≥ 1,000,000/s | \(faultRate >= 1_000_000 ? "yes" : "**no**") |")
