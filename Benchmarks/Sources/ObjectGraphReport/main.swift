// Issue 4, item 11: the object graph against GRDB records, in one run, the same data, a rollback
// journal and full syncs for both. Prints a markdown table with ratios (docs/performance.md).
//
//   swift run -c release ObjectGraphReport [objects]     (default 100000; 1000000 for the big run)
//
// GRAPH_ROUNDS=N (default 5): N rounds, each in a fresh process (a round's insert of a million
// objects is cold: it takes its memory from the system, as a program's first save would), the
// engines taking turns at going first; the report gives each engine's median and the median of
// the rounds' ratios with their range. On this shared virtual machine one round's insert + save
// of 1,000,000 varied by a factor of 1.5 from the next, almost all of it in the kernel's time to
// hand out fresh pages (the same count of page faults took 0.5 s in one run and 1.4 s in another).
import ArborTestSupport
import CommitWorkloads
import Foundation
import GraphWorkloads

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 100_000 : 100_000
let keyed = min(count, 100_000)
let saves = 300
let clock = ContinuousClock()
func grouped(_ value: Double) -> String { grouped(Int(value.rounded())) }

/// One round's measurements: rates by engine and workload, the fault-fire rate, the file system.
struct Round: Codable {
    var rates: [String: [String: Double]] = [:]
    var faultRate = 0.0
    var fileSystem = ""
}

/// Runs one round in this process, the engines in `order`.
func runRound(order: [String]) throws -> Round {
    var round = Round()
    for name in order {
        let engine: GraphWorkload = name == "Arbor" ? try ArborGraph() : try GRDBGraph()
        defer { engine.remove() }
        var start = clock.now
        round.fileSystem = engine.fileSystemName
        let keys = try engine.insertAndSave(count: count, from: 0)
        round.rates[engine.engine, default: [:]]["insert"] = Double(count) / (clock.now - start).seconds
        var generator = SplitMix64(seed: 0x6EAF)
        let sample = sampleKeys(keys, count: keyed, generator: &generator)
        start = clock.now
        try engine.keyedFetches(sample)
        round.rates[engine.engine, default: [:]]["keyed"] = Double(keyed) / (clock.now - start).seconds
        start = clock.now
        let fetched = try engine.fetchAll()
        round.rates[engine.engine, default: [:]]["all"] = Double(fetched) / (clock.now - start).seconds
        guard fetched == count else { throw WorkloadError("\(engine.engine): fetched \(fetched) of \(count)") }
        start = clock.now
        try engine.durableSaves(count: saves, from: count)
        round.rates[engine.engine, default: [:]]["saves"] = Double(saves) / (clock.now - start).seconds
        if let arbor = engine as? ArborGraph {
            round.faultRate = Double(keyed) / (try arbor.faultFires(Array(keys.prefix(keyed)))).seconds
        }
    }
    return round
}

let environment = ProcessInfo.processInfo.environment
// A round's process: GRAPH_ROUND_ORDER names the engines in order; it prints its round as JSON.
if let order = environment["GRAPH_ROUND_ORDER"] {
    let round = try runRound(order: order.split(separator: ",").map(String.init))
    FileHandle.standardOutput.write(try JSONEncoder().encode(round))
    exit(0)
}

let roundCount = max(1, Int(environment["GRAPH_ROUNDS"] ?? "") ?? 5)
var collected: [Round] = []
for index in 0..<roundCount {
    let order = index % 2 == 0 ? "Arbor,GRDB" : "GRDB,Arbor"
    let data = try FreshProcess.run(adding: ["GRAPH_ROUND_ORDER": order], what: "round \(index + 1)")
    collected.append(try JSONDecoder().decode(Round.self, from: data))
}
let rounds = collected
let fileSystem = rounds.last?.fileSystem ?? ""
func rates(_ engine: String, _ key: String) -> [Double] { rounds.map { $0.rates[engine]?[key] ?? 0 } }
let faultRate = median(rounds.map(\.faultRate))

print("Object graph against GRDB records: \(grouped(Double(count))) objects; rollback journal, full syncs; \(CacheBudget.label); \(roundCount) rounds, each in a fresh process, the engines taking turns at going first; medians.")
print("Files on \(fileSystem).")
if fileSystem == "tmpfs" {
    print("Warning: tmpfs ignores fsync: the durable-save figures say nothing about durability. Set ARBOR_BENCH_DIR.")
}
print("")
print("| Workload | Arbor | GRDB | Arbor/GRDB (median; range) | Goal | Met |")
print("|---|---:|---:|---:|---|---|")
for (key, label, goal) in [("insert", "insert + save of \(grouped(Double(count))) objects in one save (objects/s)", 2.0),
                           ("all", "fetch of all \(grouped(Double(count))) objects in one fetch, each one's salary read (objects/s)", 2.0),
                           ("keyed", "keyed fetches, one object at a time by key, \(grouped(Double(keyed))) (fetches/s)", 10.0),
                           ("saves", "durable one-object saves, \(saves) (saves/s)", 0)] {
    let a = rates("Arbor", key), g = rates("GRDB", key)
    let ratios = zip(a, g).map { $0 / max($1, 1e-9) }
    let ratio = median(ratios)
    let goalText = goal > 0 ? "≥ \(Int(goal))×" : "—"
    let met = goal > 0 ? (ratio >= goal ? "yes" : "**no**") : "—"
    print("| \(label) | \(grouped(median(a))) | \(grouped(median(g))) | \(medianAndRange(ratios)) | \(goalText) | \(met) |")
}
print("| fault fires from the row cache, \(grouped(Double(keyed))) (fires/s) | \(grouped(faultRate)) | — | — | ≥ 1,000,000/s | \(faultRate >= 1_000_000 ? "yes" : "**no**") |")
