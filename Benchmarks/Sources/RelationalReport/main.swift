// Issue 26, item 9: a relational workload on Arbor's object graph against GRDB records with
// associations and SQL aggregates — to-one key paths, grouped aggregates through relationships,
// to-many aggregates and SUBQUERY, a many-to-many, case-insensitive prefix and substring
// search, an import with relationships, a bulk update, small saves, a cascading delete, keyed
// fetches. Prints markdown tables for docs/performance.md ("Relational workload against GRDB").
//
//   swift run -c release RelationalReport          (make bench-relational)
//
// Each engine runs every step in a process of its own, on its own file, once per round; the
// engines take turns at going first. Every step's results (counts and checksums) and the store's
// figures after each change must be equal on both sides, or the report stops with the difference.
//
// Environment:
//   RELATIONAL_SCALE=0.1       fraction of the full size (1: 1,000 departments, 100,000 employees,
//                              300,000 timesheets, 2,000 projects, 200 clients: 403,200 objects)
//   RELATIONAL_ROUNDS=3        rounds (each: one process per engine)
//   RELATIONAL_CACHES=default,128   page caches, one table each: `default` leaves each engine its
//                              own (Arbor 8 MiB, SQLite 2 MB), a number gives both that many MiB
//   RELATIONAL_BUDGET=60       seconds a step that changes nothing may run; past it the step
//                              stops between two queries and is reported as "> N s"
//   RELATIONAL_REPEATS=3       passes of steps 5–7
//   RELATIONAL_SAVES=1000      small durable saves (step 13)
//   RELATIONAL_KEYED=N         keyed fetches (step 15; default: one per employee, at most 100,000)
//   RELATIONAL_MEMORY_SCALE=1  scale of the import whose peak memory is measured, alone, in a
//                              fresh process per engine and cache (0: not measured)
//   RELATIONAL_ONLY=a,b        only these steps among those that change nothing (keys in the
//                              results: departmentName, walk, prefixC, …), for profiling
//   RELATIONAL_ENGINE=Arbor    one engine alone (no ratios), for profiling
import CommitWorkloads
import EngineWorkloads
import Foundation
import RelationalWorkloads

let environment = ProcessInfo.processInfo.environment
func setting(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
let scale = setting("RELATIONAL_SCALE").flatMap(Double.init) ?? 0.1
let shape = RelationalShape(scale: scale)
let repeats = max(1, setting("RELATIONAL_REPEATS").flatMap(Int.init) ?? 3)
let saves = max(0, setting("RELATIONAL_SAVES").flatMap(Int.init) ?? 1_000)
let keyed = max(0, setting("RELATIONAL_KEYED").flatMap(Int.init) ?? min(shape.employees, 100_000))
let budget = setting("RELATIONAL_BUDGET").flatMap(Double.init) ?? 60
let only = setting("RELATIONAL_ONLY").map { Set($0.split(separator: ",").map(String.init)) }

func makeEngine(_ name: String, _ shape: RelationalShape) throws -> RelationalWorkload {
    switch name {
    case "Arbor": try ArborRelational(shape: shape)
    case "GRDB": try GRDBRelational(shape: shape)
    default: throw WorkloadError("no engine \(name) (Arbor or GRDB)")
    }
}

// MARK: A child process: one engine's run, printed as JSON

if let engineName = setting("RELATIONAL_CHILD") {
    if setting("RELATIONAL_MODE") == "memory" {
        let memoryShape = RelationalShape(scale: setting("RELATIONAL_MEMORY_SCALE").flatMap(Double.init) ?? 1)
        let engine = try makeEngine(engineName, memoryShape)
        defer { engine.directory.remove() }
        FileHandle.standardOutput.write(try JSONEncoder().encode(try measureImportMemory(on: engine, objects: memoryShape.objects)))
    } else {
        let queries = RelationalQueries(shape: shape, saves: saves, keyed: keyed)
        let engine = try makeEngine(engineName, shape)
        defer { engine.directory.remove() }
        let run = try runRelationalSteps(relationalSteps(shape: shape, queries: queries, repeats: repeats), on: engine,
                                         budget: .milliseconds(Int64(budget * 1000)), only: only)
        FileHandle.standardOutput.write(try JSONEncoder().encode(run))
    }
    exit(0)
}

// MARK: The parent: rounds, comparisons, tables

let rounds = max(1, setting("RELATIONAL_ROUNDS").flatMap(Int.init) ?? 3)
let caches = (setting("RELATIONAL_CACHES") ?? "default,128").split(separator: ",").map(String.init)
let engines = setting("RELATIONAL_ENGINE").map { [$0] } ?? ["Arbor", "GRDB"]
let memoryScale = setting("RELATIONAL_MEMORY_SCALE").flatMap(Double.init) ?? 1
let steps = relationalSteps(shape: shape, queries: RelationalQueries(shape: shape, saves: saves, keyed: keyed), repeats: repeats)

func cacheLabel(_ cache: String) -> String {
    cache == "default" ? "each engine's default page cache (Arbor 8 MiB, SQLite 2 MB)" : "both engines' page caches \(cache) MiB"
}
func mib(_ bytes: Int?) -> String { bytes.map { fixed(Double($0) / 1_048_576, 1) + " MiB" } ?? "—" }
func duration(_ seconds: Double) -> String {
    seconds >= 10 ? fixed(seconds, 1) + " s" : seconds >= 1 ? fixed(seconds, 2) + " s" : fixed(seconds * 1000, seconds >= 0.01 ? 1 : 2) + " ms"
}

/// Stops the report: the engines disagree.
func differ(_ what: String) -> Never {
    FileHandle.standardError.write(Data("RelationalReport: the engines' results differ: \(what)\n".utf8))
    exit(1)
}

/// Runs the rounds with one cache setting; checks that both engines found the same.
func measure(cache: String) throws -> [[String: EngineRun]] {
    var collected: [[String: EngineRun]] = []
    for round in 0..<rounds {
        var runs: [String: EngineRun] = [:]
        for name in round % 2 == 0 ? engines : engines.reversed() {
            FileHandle.standardError.write(Data("RelationalReport: cache \(cache), round \(round + 1) of \(rounds), \(name)…\n".utf8))
            let data = try FreshProcess.run(adding: ["RELATIONAL_CHILD": name, "RELATIONAL_MODE": "steps", "CACHE_MIB": cache],
                                            what: "\(name), round \(round + 1), cache \(cache)")
            runs[name] = try JSONDecoder().decode(EngineRun.self, from: data)
        }
        if let arbor = runs["Arbor"], let grdb = runs["GRDB"] {
            for (a, g) in zip(arbor.steps, grdb.steps) where a.finished && g.finished && a.checksum != g.checksum {
                differ("step \(a.key), round \(round + 1), cache \(cache): Arbor \(a.checksum), GRDB \(g.checksum)")
            }
            for (key, state) in arbor.states where grdb.states[key] != state {
                differ("the store after step \(key), round \(round + 1), cache \(cache) (employees, timesheets, salaries, employees without a manager, hours): Arbor \(state), GRDB \(grdb.states[key] ?? [])")
            }
        }
        collected.append(runs)
    }
    return collected
}

/// The import's peak memory, each engine alone in a fresh process.
func measureMemory(cache: String) throws -> [String: ImportMemory] {
    var results: [String: ImportMemory] = [:]
    for name in engines {
        FileHandle.standardError.write(Data("RelationalReport: import memory, cache \(cache), \(name)…\n".utf8))
        let data = try FreshProcess.run(adding: ["RELATIONAL_CHILD": name, "RELATIONAL_MODE": "memory", "CACHE_MIB": cache,
                                                 "RELATIONAL_MEMORY_SCALE": String(memoryScale)],
                                        what: "\(name)'s import, cache \(cache)")
        results[name] = try JSONDecoder().decode(ImportMemory.self, from: data)
    }
    return results
}

var measured: [(cache: String, rounds: [[String: EngineRun]], memory: [String: ImportMemory])] = []
for cache in caches {
    let runs = try measure(cache: cache)
    measured.append((cache, runs, memoryScale > 0 ? try measureMemory(cache: cache) : [:]))
}

print("Relational workload against GRDB records (issue 26, item 9): scale \(scale) — \(grouped(shape.departments)) departments, "
      + "\(grouped(shape.employees)) employees, \(grouped(shape.timesheets)) timesheets, \(grouped(shape.projects)) projects, "
      + "\(grouped(shape.clients)) clients (\(grouped(shape.objects)) objects). \(rounds) rounds, each engine in a fresh process "
      + "per round, the engines taking turns at going first; medians. Rollback journal, full syncs. A step that changes nothing "
      + "stops after \(fixed(budget, 0)) s. Files on \(measured.first?.rounds.first?.values.first?.fileSystem ?? "?").")
for (cache, runs, memory) in measured {
    print("")
    print("**\(cacheLabel(cache)).** Ratio: GRDB's time ÷ Arbor's (above 1: Arbor is faster).")
    print("")
    print("| Step | Arbor | GRDB | GRDB/Arbor (median; range) | Goal ≥ 2× |")
    print("|---|---:|---:|---:|---|")
    for step in steps {
        let arbor = runs.compactMap { $0["Arbor"]?.steps.first { $0.key == step.key } }
        let grdb = runs.compactMap { $0["GRDB"]?.steps.first { $0.key == step.key } }
        guard !arbor.isEmpty || !grdb.isEmpty else { continue }
        func time(_ results: [StepResult]) -> String {
            guard !results.isEmpty else { return "—" }
            let text = duration(median(results.map(\.seconds)))
            guard let cut = results.first(where: { !$0.finished }) else { return text }
            return "> \(duration(cut.seconds)) (\(cut.done) of \(cut.count) in \(results.filter { !$0.finished }.count) of \(results.count) rounds)"
        }
        // GRDB ÷ Arbor per round, by the time per query: a round where an engine stopped at the
        // budget gives an estimate from the queries it ran (marked ≈).
        let ratios = zip(arbor, grdb).map { a, g in (g.seconds / Double(max(g.done, 1))) / max(a.seconds / Double(max(a.done, 1)), 1e-12) }
        let estimated = arbor.contains { !$0.finished } || grdb.contains { !$0.finished }
        let ratioText = ratios.isEmpty ? "—" : (estimated ? "≈ " : "") + medianAndRange(ratios)
        let met = ratios.isEmpty ? "—" : (median(ratios) >= 2 ? "yes" : "**no**")
        print("| \(step.label) | \(time(arbor)) | \(time(grdb)) | \(ratioText) | \(met) |")
    }
    print("")
    print("Files after the run (store closed), and the process's peak resident size over the run (median):")
    print("")
    print("| Engine | database file after the import | after the run | other files left (journal) | peak resident size of the run |")
    print("|---|---:|---:|---|---:|")
    for name in engines {
        let all = runs.compactMap { $0[name] }
        guard let last = all.last else { continue }
        let database = last.databaseFile
        let others = last.filesAfterRun.filter { $0.key != database }.sorted { $0.key < $1.key }.map { "\($0.key): \(grouped($0.value)) bytes" }
        let peak = median(all.compactMap { $0.peakResident.map(Double.init) })
        print("| \(name) | \(grouped(last.filesAfterImport[database] ?? 0)) bytes | \(grouped(last.filesAfterRun[database] ?? 0)) bytes | "
              + "\(others.isEmpty ? "none" : others.joined(separator: ", ")) | \(mib(Int(peak))) |")
    }
    print("")
    print("What each step read and wrote through system calls (median over the rounds; `/proc/self/io`: the bytes of every read and write "
          + "call, served from the system's cache or the disk; syncs are not counted; steps that moved under 64 KiB on both sides are left out):")
    print("")
    print("| Step | Arbor written | GRDB written | Arbor read | GRDB read |")
    print("|---|---:|---:|---:|---:|")
    for step in steps {
        func bytes(_ name: String, _ field: KeyPath<IOUsage, Int>) -> Double? {
            let values = runs.compactMap { $0[name]?.steps.first { $0.key == step.key }?.io?[keyPath: field] }
            return values.isEmpty ? nil : median(values.map(Double.init))
        }
        let cells = [bytes("Arbor", \.bytesWritten), bytes("GRDB", \.bytesWritten), bytes("Arbor", \.bytesRead), bytes("GRDB", \.bytesRead)]
        guard cells.contains(where: { ($0 ?? 0) >= 65_536 }) else { continue }
        print("| \(step.label) | " + cells.map { $0.map { mib(Int($0)) } ?? "—" }.joined(separator: " | ") + " |")
    }
    if !memory.isEmpty {
        print("")
        print("The import alone at scale \(memoryScale) (\(grouped(RelationalShape(scale: memoryScale).objects)) objects), each engine in a fresh process (goal: Arbor's peak under 250 MiB):")
        print("")
        print("| Engine | import | resident before | peak resident size (VmHWM) | database file |")
        print("|---|---:|---:|---:|---:|")
        for name in engines {
            guard let result = memory[name] else { continue }
            let database = result.filesAfterImport[result.databaseFile]
            print("| \(name) | \(duration(result.seconds)) | \(mib(result.residentBefore)) | \(mib(result.peakResident)) | \(database.map { grouped($0) + " bytes" } ?? "—") |")
        }
    }
}
