// One Arbor workload, repeated, for profilers (perf, callgrind): no SQLite, no report.
//
//   swift build -c release --product EngineProfile
//   perf record -g .build/release/EngineProfile WORKLOAD [rows] [repeats]
//
// WORKLOAD: insert, reads, readTransactions, scan, textBuild, textLookups, textHeavy.
// The tables a workload reads are built first (not repeated); only the workload repeats.

import CommitWorkloads
import EngineWorkloads

#if canImport(Glibc)
import Glibc
#endif

let arguments = Array(CommandLine.arguments.dropFirst())
guard let workload = arguments.first else {
    print("usage: EngineProfile insert|reads|readTransactions|scan|textBuild|textLookups|textHeavy [rows] [repeats]")
    exit(64)
}
let rows = arguments.count > 1 ? Int(arguments[1]) ?? 1_000_000 : 1_000_000
let repeats = arguments.count > 2 ? Int(arguments[2]) ?? 3 : 3
var settings = EngineSettings()
settings.cacheBytes = 64 << 20

let clock = ContinuousClock()
func timed(_ name: String, operations: Int, _ body: () throws -> Void) throws {
    let start = clock.now
    try body()
    let elapsed = clock.now - start
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
    print("\(name): \(Int(Double(operations) / seconds)) ops/s")
}

let engine = try ArborEngine(prefix: "arbor-profile", settings: settings)
defer { engine.remove() }
switch workload {
case "insert":
    for _ in 0..<repeats {
        engine.remove()
        let fresh = try ArborEngine(prefix: "arbor-profile", settings: settings)
        defer { fresh.remove() }
        try timed("insert", operations: rows) { try fresh.insertSequential(count: rows) }
    }
case "reads", "readTransactions", "scan":
    try engine.insertSequential(count: rows)
    for round in 0..<repeats {
        engine.close()
        try engine.open()
        switch workload {
        case "reads": try timed("reads", operations: rows) { try engine.pointReads(count: rows, rows: rows, seed: UInt64(round)) }
        case "readTransactions": try timed("readTransactions", operations: rows / 5) { try engine.pointReadTransactions(count: rows / 5, rows: rows, seed: UInt64(round)) }
        default: try timed("scan", operations: rows) { _ = try engine.scan() }
        }
    }
case "textBuild":
    for _ in 0..<repeats {
        let fresh = try ArborEngine(prefix: "arbor-profile", settings: settings)
        defer { fresh.remove() }
        try timed("textBuild", operations: rows) { try fresh.insertTextKeys(count: rows) }
    }
case "textLookups":
    try engine.insertTextKeys(count: rows)
    for round in 0..<repeats {
        engine.close()
        try engine.open()
        try timed("textLookups", operations: rows) { try engine.textKeyLookups(count: rows, rows: rows, seed: UInt64(round)) }
    }
case "textHeavy":
    let pool = TextPool()
    for _ in 0..<repeats {
        let fresh = try ArborEngine(prefix: "arbor-profile", settings: settings)
        defer { fresh.remove() }
        try timed("textHeavy", operations: rows / 5) { try fresh.insertTexts(count: rows / 5, pool: pool) }
    }
default:
    print("unknown workload \(workload)")
    exit(64)
}
