// Issue 4, item 11: the object graph against GRDB records, in one run, the same data, a rollback
// journal and full syncs for both. Prints a markdown table with ratios (docs/performance.md).
//
//   swift run -c release ObjectGraphReport [objects]     (default 100000; 1000000 for the big run)
import CommitWorkloads
import Foundation
import GraphWorkloads

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 100_000 : 100_000
let keyed = min(count, 100_000)
let saves = 300
let clock = ContinuousClock()
func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) * 1e-18 }
func grouped(_ value: Double) -> String {
    let formatter = NumberFormatter()
    formatter.numberStyle = .decimal
    formatter.maximumFractionDigits = 0
    return formatter.string(from: NSNumber(value: value)) ?? "\(Int(value))"
}

var rates: [String: [String: Double]] = [:]
var faultRate = 0.0
for make in [{ try ArborGraph() as GraphWorkload }, { try GRDBGraph() as GraphWorkload }] {
    let engine = try make()
    defer { engine.remove() }
    var start = clock.now
    let keys = try engine.insertAndSave(count: count, from: 0)
    rates[engine.engine, default: [:]]["insert"] = Double(count) / seconds(clock.now - start)
    var generator = SplitMixGenerator(seed: 0x6EAF)
    let sample = (0..<keyed).map { _ in keys[Int(generator.next() % UInt64(keys.count))] }
    start = clock.now
    try engine.keyedFetches(sample)
    rates[engine.engine, default: [:]]["keyed"] = Double(keyed) / seconds(clock.now - start)
    start = clock.now
    try engine.durableSaves(count: saves, from: count)
    rates[engine.engine, default: [:]]["saves"] = Double(saves) / seconds(clock.now - start)
    if let arbor = engine as? ArborGraph {
        faultRate = Double(keyed) / seconds(try arbor.faultFires(Array(keys.prefix(keyed))))
    }
}

struct SplitMixGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

print("Object graph against GRDB records: \(grouped(Double(count))) objects; rollback journal, full syncs; one run.")
print("")
print("| Workload | Arbor | GRDB | Arbor/GRDB | Goal | Met |")
print("|---|---:|---:|---:|---|---|")
for (key, label, goal) in [("insert", "insert + save of \(grouped(Double(count))) objects in one save (objects/s)", 2.0),
                           ("keyed", "keyed fetches, one object at a time by key, \(grouped(Double(keyed))) (fetches/s)", 10.0),
                           ("saves", "durable one-object saves, \(saves) (saves/s)", 0)] {
    let a = rates["Arbor"]?[key] ?? 0, g = rates["GRDB"]?[key] ?? 0
    let ratio = g > 0 ? a / g : 0
    let goalText = goal > 0 ? "≥ \(Int(goal))×" : "—"
    let met = goal > 0 ? (ratio >= goal ? "yes" : "**no**") : "—"
    print("| \(label) | \(grouped(a)) | \(grouped(g)) | \(String(format: "%.2f", ratio)) | \(goalText) | \(met) |")
}
print("| fault fires from the row cache, \(grouped(Double(keyed))) (fires/s) | \(grouped(faultRate)) | — | — | ≥ 1,000,000/s | \(faultRate >= 1_000_000 ? "yes" : "**no**") |")
