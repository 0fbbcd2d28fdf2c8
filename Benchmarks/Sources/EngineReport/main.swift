// Engine workloads, Arbor against SQLite (C API) in one process, as the markdown table in
// docs/performance.md ("Engine workloads against SQLite").
//
//   cd Benchmarks && swift run -c release EngineReport [rows]      (default 1000000)
//
// Options: --cache-mib N (both engines' cache budget, default 64), --commits N (durable commits
// per engine, default 300), --rounds N (rounds of every timed workload, default 3),
// --arbor-only (skip SQLite: for profiling Arbor).
//
// Both engines: page size 4096, the same cache budget, rollback journal (SQLite journal_mode
// DELETE), every commit synced (SQLite synchronous FULL), files on the file system the scratch
// directories are on (ARBOR_BENCH_DIR, TMPDIR or /tmp; the report prints which). Each phase
// opens its database afresh (cold page cache; the file itself stays in the OS cache) and closes
// it after. Every timed workload runs in `rounds` rounds, the engines alternating which goes
// first; the table shows each engine's best round (all rounds are printed under it). Arbor's
// peak resident memory (VmHWM) is reset before, and read after, each of its phases.

import CommitWorkloads
import EngineWorkloads

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

let usage = "usage: EngineReport [rows] [--cache-mib N] [--commits N] [--rounds N] [--arbor-only]   (rows default 1000000)"

struct Arguments {
    var rows = 1_000_000
    var settings = EngineSettings()
    var commits = 300
    var rounds = 3
    var arborOnly = false

    init(_ arguments: [String]) {
        var rest = arguments[...]
        func number(after flag: String) -> Int {
            guard let text = rest.popFirst(), let value = Int(text), value > 0 else {
                printError("EngineReport: \(flag) needs a positive number\n" + usage)
                exit(64)
            }
            return value
        }
        var positional: [String] = []
        while let argument = rest.popFirst() {
            switch argument {
            case "-h", "--help":
                print(usage)
                exit(0)
            case "--cache-mib": settings.cacheBytes = number(after: argument) << 20
            case "--commits": commits = number(after: argument)
            case "--rounds": rounds = number(after: argument)
            case "--arbor-only": arborOnly = true
            default: positional.append(argument)
            }
        }
        guard positional.count <= 1 else {
            printError(usage)
            exit(64)
        }
        if let text = positional.first {
            guard let value = Int(text), value >= 1000 else {
                printError("EngineReport: rows must be a number ≥ 1000\n" + usage)
                exit(64)
            }
            rows = value
        }
    }
}

let arguments = Arguments(Array(CommandLine.arguments.dropFirst()))


func mib(_ bytes: Int64) -> String { fixed(Double(bytes) / 1_048_576, 1) }

let clock = ContinuousClock()

/// What one engine measured in one workload: the operations of each round and their times, and
/// (Arbor) the peak resident size of its phases.
struct Measurement {
    var operations = 0
    var times: [Duration] = []
    /// For write phases: the part of each round's time its commit took.
    var commits: [Duration] = []
    var peak: Int?
    var startResident: Int?

    /// Operations per second in the best round.
    var bestRate: Double? {
        times.map { Double(operations) / $0.seconds }.max()
    }

    var roundRates: String {
        times.map { grouped(Int((Double(operations) / $0.seconds).rounded())) }.joined(separator: ", ")
    }

    /// Each round's rate with its total time and commit time.
    var roundRatesWithCommits: String {
        zip(times, commits).map { time, commit in
            "\(grouped(Int((Double(operations) / time.seconds).rounded()))) (\(fixed(time.seconds, 2)) s, commit \(fixed(commit.seconds, 2)) s)"
        }.joined(separator: ", ")
    }

    mutating func add(_ time: Duration, operations: Int, commit: Duration) {
        self.operations = operations
        times.append(time)
        commits.append(commit)
    }

    mutating func notePeak(_ peak: Int?, start: Int?) {
        guard let peak else { return }
        if self.peak == nil || peak > self.peak! {
            self.peak = peak
            self.startResident = start
        }
    }
}

/// Runs `body` on `engine` (opened before and closed after, outside the timing) and returns its
/// time. Arbor's phases are watched for peak resident memory.
func phase(_ engine: any EngineWorkload, _ measurement: inout Measurement, operations: Int,
           _ body: (any EngineWorkload) throws -> Void) throws {
    let watch = engine is ArborEngine
    var start: Int?
    if watch {
        MemoryUsage.releaseFreedMemory()
        MemoryUsage.resetPeak()
        start = MemoryUsage.residentBytes
    }
    try engine.open()
    defer { engine.close() }
    let began = clock.now
    try body(engine)
    let time = clock.now - began
    measurement.add(time, operations: operations, commit: engine.lastCommitTime)
    if watch { measurement.notePeak(MemoryUsage.peakBytes, start: start) }
}

/// A table row.
struct Row {
    enum Kind { case rate, size }
    var workload: String
    var kind: Kind
    var arbor: Double?
    var sqlite: Double?
    /// The goal on Arbor/SQLite: at least (rates) or at most (sizes) this.
    var goal: Double?
    var peak: (Int, Int?)?

    var ratio: Double? {
        guard let arbor, let sqlite, sqlite > 0 else { return nil }
        return arbor / sqlite
    }

    func format(_ value: Double?) -> String {
        guard let value else { return "—" }
        switch kind {
        case .rate: return grouped(Int(value.rounded()))
        case .size: return mib(Int64(value)) + " MiB"
        }
    }

    var goalText: String {
        guard let goal else { return "—" }
        return (kind == .rate ? "≥ " : "≤ ") + fixed(goal, goal == goal.rounded() ? 0 : 1) + "×"
    }

    var met: String {
        guard let goal, let ratio else { return "—" }
        return (kind == .rate ? ratio >= goal : ratio <= goal) ? "yes" : "**no**"
    }

    var peakText: String {
        guard let (peak, start) = peak else { return "—" }
        return "\(mib(Int64(peak))) MiB" + (start.map { " (from \(mib(Int64($0))))" } ?? "")
    }

    var line: String {
        "| \(workload) | \(format(arbor)) | \(format(sqlite)) | \(ratio.map { fixed($0, 2) } ?? "—") | \(goalText) | \(met) | \(peakText) |"
    }
}

func run() throws {
    let n = arguments.rows
    let settings = arguments.settings
    let rounds = arguments.rounds
    let transactionReads = max(1, n / 5)
    let textRows = max(1, n / 5)
    let includeSQLite = !arguments.arborOnly
    var rows: [Row] = []
    var notes: [String] = []
    var roundLines: [String] = []
    var sqliteName = "SQLite"

    /// Rounds of `body` on each engine, alternating which goes first.
    func measure(_ name: String, _ engines: [any EngineWorkload], operations: Int, rounds: Int = rounds,
                 _ body: (any EngineWorkload) throws -> Void) throws -> [Measurement] {
        var results = [Measurement](repeating: Measurement(), count: engines.count)
        for round in 0..<rounds {
            let order = round % 2 == 0 ? Array(engines.indices) : engines.indices.reversed()
            for index in order {
                try phase(engines[index], &results[index], operations: operations, body)
            }
        }
        roundLines.append("\(name): " + zip(engines, results).map { "\($0.engine) \($1.roundRates)" }.joined(separator: "; "))
        return results
    }

    /// Builds a fresh pair of databases per round with `body` (a write workload), keeping the
    /// last round's pair.
    func build(_ name: String, prefix: String, operations: Int,
               _ body: (any EngineWorkload) throws -> Void) throws -> ([any EngineWorkload], [Measurement]) {
        var results: [Measurement] = []
        var kept: [any EngineWorkload] = []
        for round in 0..<rounds {
            var engines: [any EngineWorkload] = [try ArborEngine(prefix: "arbor-" + prefix, settings: settings)]
            if includeSQLite { engines.append(try SQLiteEngine(prefix: "sqlite-" + prefix, settings: settings)) }
            for engine in engines { engine.close() }
            if results.isEmpty { results = [Measurement](repeating: Measurement(), count: engines.count) }
            let order = round % 2 == 0 ? Array(engines.indices) : engines.indices.reversed()
            do {
                for index in order {
                    try phase(engines[index], &results[index], operations: operations, body)
                }
            } catch {
                for engine in kept + engines { engine.remove() }
                throw error
            }
            for engine in kept { engine.remove() }
            kept = engines
        }
        roundLines.append("\(name): " + zip(kept, results).map { "\($0.engine) \($1.roundRatesWithCommits)" }.joined(separator: "; "))
        return (kept, results)
    }

    func row(_ workload: String, _ results: [Measurement], goal: Double?) -> Row {
        Row(workload: workload, kind: .rate, arbor: results[0].bestRate, sqlite: results.count > 1 ? results[1].bestRate : nil,
            goal: goal, peak: results[0].peak.map { ($0, results[0].startResident) })
    }

    // 1. Bulk insert.
    let (engines, insert) = try build("bulk insert", prefix: "engine", operations: n) { try $0.insertSequential(count: n) }
    defer { for engine in engines { engine.remove() } }
    if engines.count > 1 { sqliteName = engines[1].engine }
    rows.append(row("Bulk insert, \(grouped(n)) sequential rows, one transaction (rows/s)", insert, goal: 2))
    let sizesAfterInsert = engines.map { $0.fileSize }
    for engine in engines {
        try engine.open()
        notes.append("After (1), \(engine.engine): \(try engine.layout()).")
        engine.close()
    }

    // 2. Point reads, in one read transaction and one read transaction each.
    let reads = try measure("point reads in one transaction", engines, operations: n) {
        try $0.pointReads(count: n, rows: n, seed: 0x9E4D)
    }
    rows.append(row("Point reads, \(grouped(n)) random keys in one read transaction (reads/s)", reads, goal: 3))
    if let arbor = engines.first as? ArborEngine, let sqliteRate = reads.count > 1 ? reads[1].bestRate : nil {
        // What the cache misses alone cost: the floor under any point-read rate with this cache.
        let cache = arbor.lastPointReadCache
        try arbor.open()
        let missCost = try arbor.missPathCost(samples: 200_000)
        arbor.close()
        let missesPerRead = Double(cache.misses) / Double(n)
        let floor = missesPerRead * missCost.seconds
        notes.append("Point reads, Arbor: \(fixed(missesPerRead, 3)) page-cache misses per read (\(grouped(Int(cache.misses))) misses, \(grouped(Int(cache.hits))) hits); the miss path alone (pread of a 4 KiB page, checksum, validation, cache bookkeeping; measured over 200,000 random pages with a 16-page cache) costs \(fixed(missCost.seconds * 1e9, 0)) ns a page, so the misses alone cost \(fixed(floor * 1e9, 0)) ns a read: even with lookups free, at most \(grouped(Int(1 / floor))) reads/s, \(fixed(1 / floor / sqliteRate, 2))× SQLite's rate measured here.")
    }
    let oneReads = try measure("one-read transactions", engines, operations: transactionReads) {
        try $0.pointReadTransactions(count: transactionReads, rows: n, seed: 0x0E4D)
    }
    rows.append(row("Point reads, \(grouped(transactionReads)) one-read transactions (reads/s)", oneReads, goal: 3))

    // 3. Full scan.
    let scans = try measure("full scan", engines, operations: n, rounds: rounds + 1) { engine in
        let seen = try engine.scan()
        guard seen == n else { throw WorkloadError("\(engine.engine): the scan saw \(seen) rows, expected \(n)") }
    }
    rows.append(row("Full scan of \(grouped(n)) rows, keys and values (rows/s)", scans, goal: 1.5))

    // 4. Text-keyed table: built once (into the same file), then looked up.
    var textBuild = [Measurement](repeating: Measurement(), count: engines.count)
    for (index, engine) in engines.enumerated() {
        try phase(engine, &textBuild[index], operations: n) { try $0.insertTextKeys(count: n) }
    }
    roundLines.append("text-key build: " + zip(engines, textBuild).map { "\($0.engine) \($1.roundRatesWithCommits)" }.joined(separator: "; "))
    rows.append(row("Text-key table build, \(grouped(n)) rows in random key order, one transaction (rows/s)", textBuild, goal: nil))
    let lookups = try measure("text-key lookups", engines, operations: n) {
        try $0.textKeyLookups(count: n, rows: n, seed: 0x7E47)
    }
    rows.append(row("Text-key lookups, \(grouped(n)) random 12-byte keys in one read transaction (lookups/s)", lookups, goal: 2))
    let sizesAfterText = engines.map { $0.fileSize }
    for engine in engines {
        try engine.open()
        notes.append("After (4), \(engine.engine): \(try engine.layout()).")
        if engine.journalSize > 0 {
            notes.append("\(engine.engine) keeps its journal file between transactions: \(mib(engine.journalSize)) MiB after (4) (not counted in the sizes).")
        }
        engine.close()
    }

    // 5. Durable one-row commits: the existing pager-level workloads (CommitWorkloads), then
    // whole transactions through the public API on the table of (1).
    let commits = arguments.commits
    var pagerCommits: [any DurableCommitWorkload] = [try ArborOnePageCommits(pageSize: settings.pageSize)]
    if includeSQLite { pagerCommits.append(try SQLiteOneRowCommits(pageSize: settings.pageSize)) }
    defer { for workload in pagerCommits { workload.close() } }
    var commitTimes = [Duration](repeating: .zero, count: pagerCommits.count)
    for workload in pagerCommits { for _ in 0..<20 { try workload.commitOne() } }
    var done = 0
    while done < commits {
        let chunk = min(25, commits - done)
        let order = (done / 25) % 2 == 0 ? Array(pagerCommits.indices) : pagerCommits.indices.reversed()
        for index in order {
            let began = clock.now
            for _ in 0..<chunk { try pagerCommits[index].commitOne() }
            commitTimes[index] += clock.now - began
        }
        done += chunk
    }
    for workload in pagerCommits { try workload.verify() }
    let pagerRates = commitTimes.map { Double(commits) / $0.seconds }
    rows.append(Row(workload: "Durable 1-page/1-row commits, pager level (CommitWorkloads), \(commits) each (commits/s)", kind: .rate,
                    arbor: pagerRates[0], sqlite: pagerRates.count > 1 ? pagerRates[1] : nil, goal: nil))

    for engine in engines { try engine.open() }
    var updateTimes = [Duration](repeating: .zero, count: engines.count)
    var updateRows = RandomRows(rows: n, seed: 0x0DA7E)
    for engine in engines { for i in 0..<10 { try engine.updateOne(row: updateRows.next(), salt: UInt64(i + 1)) } }
    done = 0
    while done < commits {
        let chunk = min(25, commits - done)
        let order = (done / 25) % 2 == 0 ? Array(engines.indices) : engines.indices.reversed()
        let start = updateRows
        for index in order {
            updateRows = start
            let began = clock.now
            for i in 0..<chunk { try engines[index].updateOne(row: updateRows.next(), salt: UInt64(done + i + 100)) }
            updateTimes[index] += clock.now - began
        }
        done += chunk
    }
    for engine in engines { engine.close() }
    let updateRates = updateTimes.map { Double(commits) / $0.seconds }
    rows.append(Row(workload: "Durable 1-row update of a random row of (1) through the API (`write { put }` / autocommit `UPDATE`), \(commits) each (commits/s)", kind: .rate,
                    arbor: updateRates[0], sqlite: updateRates.count > 1 ? updateRates[1] : nil, goal: nil))

    // 6. File sizes.
    rows.append(Row(workload: "File size after (1)", kind: .size, arbor: Double(sizesAfterInsert[0]),
                    sqlite: sizesAfterInsert.count > 1 ? Double(sizesAfterInsert[1]) : nil, goal: 1))
    rows.append(Row(workload: "File size after (4) (tables of (1) and (4))", kind: .size, arbor: Double(sizesAfterText[0]),
                    sqlite: sizesAfterText.count > 1 ? Double(sizesAfterText[1]) : nil, goal: 1))

    // 7. Text-heavy data set, in databases of its own.
    let pool = TextPool()
    let (textEngines, textInsert) = try build("text-heavy insert", prefix: "text", operations: textRows) {
        try $0.insertTexts(count: textRows, pool: pool)
    }
    defer { for engine in textEngines { engine.remove() } }
    rows.append(row("Text-heavy insert, \(grouped(textRows)) rows of ~1 KB English-like text, one transaction (rows/s)", textInsert, goal: nil))
    let textSizes = textEngines.map { $0.fileSize }
    rows.append(Row(workload: "File size of the text-heavy set (values: \(grouped(textRows)) × \(fixed(pool.meanLength, 0)) B mean = \(mib(Int64(Double(textRows) * pool.meanLength))) MiB)", kind: .size,
                    arbor: Double(textSizes[0]), sqlite: textSizes.count > 1 ? Double(textSizes[1]) : nil, goal: 0.6))
    for engine in textEngines {
        try engine.open()
        try engine.verifyTexts(count: textRows, pool: pool, samples: 2000)
        notes.append("Text-heavy set, \(engine.engine): \(try engine.layout()).")
        engine.close()
    }

    // The report.
    let directory = engines[0].directory
    let parent = String(directory.path[..<(directory.path.lastIndex(of: "/") ?? directory.path.endIndex)])
    let arborPeaks = rows.compactMap { $0.peak?.0 }
    print("Engine workloads: \(grouped(n)) rows; page size \(settings.pageSize); cache \(settings.cacheMiB) MiB per connection (Arbor cacheSize = \(grouped(settings.cacheBytes)) B, SQLite cache_size=-\(settings.cacheBytes / 1024));")
    print("rollback journal, every commit synced (SQLite journal_mode=DELETE, synchronous=FULL); files on \(directory.fileSystemName) (\(parent)); \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) CPUs.")
    print("Rates: best of \(rounds) rounds (full scan: \(rounds + 1)), engines alternating which goes first; each phase opens its database cold.")
    if directory.fileSystemName == "tmpfs" {
        print("Warning: tmpfs ignores fsync: the commit figures say nothing about durability. Set ARBOR_BENCH_DIR.")
    }
    print("")
    print("| Workload | Arbor | \(sqliteName) | Arbor/SQLite | Goal | Met | Arbor peak RSS |")
    print("|---|---:|---:|---:|---|---|---:|")
    for row in rows { print(row.line) }
    print("")
    if let top = arborPeaks.max() {
        print("Arbor's peak resident size over all its phases: \(mib(Int64(top))) MiB, with a \(settings.cacheMiB) MiB page cache (\"from\": resident at the start of the phase, before the database was opened).")
    }
    print("")
    print("All rounds (ops/s):")
    for line in roundLines { print("- " + line) }
    print("")
    for note in notes { print("- " + note) }
}

do {
    try run()
} catch {
    printError("EngineReport: \(error)")
    exit(1)
}
