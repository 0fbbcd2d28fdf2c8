// Issue 6, item 10: saves per second with 1, 2 and 4 contexts saving small changes concurrently
// on one coordinator, next to SQLite with as many connections (and with one shared connection),
// in the same run. Prints a markdown table with ratios (docs/performance.md).
//
//   swift run -c release ContextSaveReport [saves] [rounds]
//
// `saves` (default 2000) is the number of saves of each measurement, split evenly over its
// writers; `rounds` (default 3) measurements of every cell, the engines taking turns to go first;
// the table shows each cell's median. CONTEXT_WRITERS=1,2,4 (the default) chooses the writer counts.
import CommitWorkloads
import ContextSaveWorkloads
import Foundation

let arguments = CommandLine.arguments
let saves = arguments.count > 1 ? max(1, Int(arguments[1]) ?? 2000) : 2000
let rounds = arguments.count > 2 ? max(1, Int(arguments[2]) ?? 3) : 3
let writerCounts = (ProcessInfo.processInfo.environment["CONTEXT_WRITERS"] ?? "1,2,4")
    .split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 }

/// The three ways of saving, in the table's order.
enum Kind: Int, CaseIterable {
    case arbor, connections, shared

    func make(writers: Int) throws -> any ConcurrentSaveWorkload {
        switch self {
        case .arbor: try ArborContextSaves(writers: writers)
        case .connections: try SQLiteConnectionSaves(writers: writers, sharing: .connectionPerWriter)
        case .shared: try SQLiteConnectionSaves(writers: writers, sharing: .oneConnection)
        }
    }
}

struct Measurement {
    var run: ConcurrentSaveRun
    var retries: Int
}

var measured: [Int: [Kind: [Measurement]]] = [:]
var fileSystem = "unknown"
var sqliteName = "SQLite"
for round in 0..<rounds {
    for writers in writerCounts {
        let perWriter = max(1, saves / writers)
        // The engines take turns to go first, round by round.
        let order = Kind.allCases.indices.map { Kind.allCases[($0 + round) % Kind.allCases.count] }
        for kind in order {
            let workload = try kind.make(writers: writers)
            defer { workload.remove() }
            fileSystem = workload.fileSystemName
            if kind == .connections { sqliteName = String(workload.engine.prefix { $0 != "," }) }
            let run = try runConcurrently(workload, savesPerWriter: perWriter)
            try workload.verify(savesPerWriter: perWriter)
            measured[writers, default: [:]][kind, default: []].append(Measurement(run: run, retries: workload.retries))
        }
    }
}

@MainActor func rate(_ writers: Int, _ kind: Kind) -> Double { median((measured[writers]?[kind] ?? []).map(\.run.rate)) }
func rateText(_ value: Double) -> String { grouped(Int(value.rounded())) }

print("Concurrent durable saves, each writer changing its own row: \(grouped(saves)) saves per measurement, split evenly over the writers;")
print("median of \(rounds) round\(rounds == 1 ? "" : "s"), the engines taking turns to go first. Rollback journal, every save synced (SQLite journal_mode=DELETE,")
print("synchronous=FULL, busy_timeout=\(SQLiteConnectionSaves.busyTimeout) ms); files on \(fileSystem); \(ProcessInfo.processInfo.activeProcessorCount) CPUs; \(sqliteName).")
if fileSystem == "tmpfs" {
    print("Warning: tmpfs ignores fsync: these figures say nothing about durable saves. Set ARBOR_BENCH_DIR.")
}
print("")
print("| Contexts / connections | Arbor (saves/s) | \(sqliteName), N connections (saves/s) | Arbor/SQLite | \(sqliteName), one shared connection (saves/s) | Arbor/shared |")
print("|---:|---:|---:|---:|---:|---:|")
for writers in writerCounts {
    let a = rate(writers, .arbor), c = rate(writers, .connections), s = rate(writers, .shared)
    print("| \(writers) | \(rateText(a)) | \(rateText(c)) | \(fixed(c > 0 ? a / c : 0)) | \(rateText(s)) | \(fixed(s > 0 ? a / s : 0)) |")
}
print("")
print("Against one writer (medians): " + Kind.allCases.map { kind in
    let base = rate(writerCounts.first ?? 1, kind)
    let name = ["Arbor", "SQLite, N connections", "SQLite, one connection"][kind.rawValue]
    return "\(name) " + writerCounts.map { "\(fixed(base > 0 ? rate($0, kind) / base : 0))×" }.joined(separator: ", ")
}.joined(separator: "; ") + " (writers \(writerCounts.map(String.init).joined(separator: ", "))).")
print("")
print("All rounds (saves/s; in brackets: the last writer's time over the first writer's; SQLite's retries after SQLITE_BUSY):")
for writers in writerCounts {
    for kind in Kind.allCases {
        let runs = measured[writers]?[kind] ?? []
        let name = ["Arbor", "SQLite, \(writers) connection\(writers == 1 ? "" : "s")", "SQLite, one connection"][kind.rawValue]
        let items = runs.map { m in
            "\(rateText(m.run.rate)) (\(fixed(m.run.spread))\(m.retries > 0 ? ", \(m.retries) retries" : ""))"
        }
        print("- \(writers) writer\(writers == 1 ? "" : "s"), \(name): " + items.joined(separator: ", "))
    }
}
