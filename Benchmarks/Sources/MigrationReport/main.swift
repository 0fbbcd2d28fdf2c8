// Schema migration against SQLite (issue 27, item 7): the table in docs/performance.md.
//
//   swift run -c release MigrationReport [rows] [rounds]      (make bench-migration)
//
// One table `Item` (a name with an index, a 32-bit count, a price) of `rows` rows (default
// 1,000,000), then two migrations, each engine with its default settings (Arbor: a native store,
// its 8 MiB cache; SQLite: DELETE journal, synchronous FULL, its default cache):
//
// 1. add an optional attribute. Arbor: open the store with the model that adds it (a lightweight
//    migration; no row rewritten). SQLite: `ALTER TABLE item ADD COLUMN note TEXT`.
// 2. a rewrite: `name` renamed `title`, `count` widened to 64 bits, `price` removed. Arbor: open
//    with that model (the rename and widening are free; the removal rewrites every row). SQLite:
//    the way GRDB's migrator recommends for changes ALTER TABLE cannot make — in one transaction,
//    create the new table, copy the rows, drop the old one, rename the new one, recreate the index.
//
// Each timed from opening the file to a durable commit. Rounds alternate which engine goes
// first; every round starts from freshly made files. Ratios are SQLite's time over Arbor's
// (above 1: Arbor is faster), median with range. Memory: the peak resident size during the
// migration above the resident size before it (both engines in this process, measured one at a
// time; `rows` at a quarter shows whether it grows with the rows).

import Arbor
import ArborStore
import CSQLite
import CommitWorkloads
import EngineWorkloads
import Foundation

let arguments = CommandLine.arguments
let rowCount = arguments.count > 1 ? max(1000, Int(arguments[1]) ?? 1_000_000) : 1_000_000
let rounds = arguments.count > 2 ? max(1, Int(arguments[2]) ?? 3) : 3

func model(_ version: Int) throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Item") {
            if version >= 3 {
                Attribute("title", .string).required().renamingIdentifier("name")
                Attribute("count", .integer64)
            } else {
                Attribute("name", .string).required()
                Attribute("count", .integer32)
                Attribute("price", .double)
            }
            if version >= 2 {
                Attribute("note", .string)
            }
            Indexed(version >= 3 ? "title" : "name")
        }
    }
}

func name(_ i: Int) -> String { "item \(i * 7919 % rowCount)" }

/// What one migration cost.
struct Measured {
    var duration: Duration
    var memory: Int
}

/// Runs `body`, timing it and measuring the peak resident size above the size before.
func measure(_ body: () throws -> Void) rethrows -> Measured {
    MemoryUsage.releaseFreedMemory()
    MemoryUsage.resetPeak()
    let before = MemoryUsage.residentBytes ?? 0
    let clock = ContinuousClock()
    let start = clock.now
    try body()
    let duration = clock.now - start
    return Measured(duration: duration, memory: max(0, (MemoryUsage.peakBytes ?? before) - before))
}

// MARK: Arbor

func makeArborStore(at path: String, rows: Int) throws {
    let v1 = try model(1)
    let coordinator = PersistentStoreCoordinator(managedObjectModel: v1)
    try coordinator.addNativeStore(at: path)
    let entity = v1.entity(named: "Item")!
    var done = 0
    while done < rows {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for i in done..<min(rows, done + 100_000) {
            let item = ManagedObject(entity: entity, insertInto: context)
            try item.setValue(name(i), forKey: "name")
            try item.setValue(Int32(i % 1000), forKey: "count")
            try item.setValue(Double(i) / 4, forKey: "price")
        }
        try context.save()
        done = min(rows, done + 100_000)
    }
}

func arborMigration(at path: String, to version: Int, rows: Int) throws -> Measured {
    let expectRewritten = version == 2 ? 0 : rows
    var report: MigrationReport?
    let measured = try measure {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model(version))
        report = try coordinator.addNativeStore(at: path).migration
    }
    guard let report, report.entities.first?.rewrittenRows == expectRewritten else {
        throw WorkloadError("Arbor's migration to version \(version) rewrote \(report?.entities.first?.rewrittenRows ?? -1) rows, not \(expectRewritten)")
    }
    // Checked after the timing: the rows read through the new model.
    let coordinator = PersistentStoreCoordinator(managedObjectModel: try model(version))
    try coordinator.addNativeStore(at: path)
    let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    let count = try context.count(for: FetchRequest<ManagedObject>(entityName: "Item"))
    var request = FetchRequest<ManagedObject>(entityName: "Item")
    request.predicate = try ObjectPredicate(format: "\(version >= 3 ? "title" : "name") == %@", name(7))
    let found = try context.fetch(request)
    guard count == rows, found.count == 1, try found[0].value(forKey: "count") != nil else {
        throw WorkloadError("Arbor after the migration to version \(version): \(count) rows, \(found.count) found")
    }
    return measured
}

// MARK: SQLite

func openSQLite(_ path: String) throws -> OpaquePointer? {
    var db: OpaquePointer?
    try SQLite.check(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil), db, "open \(path)")
    return db
}

func makeSQLiteStore(at path: String, rows: Int) throws {
    let db = try openSQLite(path)
    defer { sqlite3_close(db) }
    try SQLite.execute(db, "CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT NOT NULL, count INTEGER, price REAL); CREATE INDEX item_name ON item(name)")
    try SQLite.execute(db, "BEGIN")
    var statement: OpaquePointer?
    try SQLite.check(sqlite3_prepare_v2(db, "INSERT INTO item(name, count, price) VALUES (?, ?, ?)", -1, &statement, nil), db, "prepare")
    defer { sqlite3_finalize(statement) }
    let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
    for i in 0..<rows {
        sqlite3_bind_text(statement, 1, name(i), -1, transient)
        sqlite3_bind_int64(statement, 2, Int64(i % 1000))
        sqlite3_bind_double(statement, 3, Double(i) / 4)
        guard sqlite3_step(statement) == SQLITE_DONE else { throw SQLite.failure(sqlite3_errcode(db), db, "insert") }
        sqlite3_reset(statement)
    }
    try SQLite.execute(db, "COMMIT")
}

func sqliteMigration(at path: String, _ sql: String, check column: String, rows: Int) throws -> Measured {
    let measured = try measure {
        let db = try openSQLite(path)
        defer { sqlite3_close(db) }
        try SQLite.execute(db, "BEGIN IMMEDIATE; \(sql); COMMIT")
    }
    let db = try openSQLite(path)
    defer { sqlite3_close(db) }
    let count = try SQLite.single(db, "SELECT count(*) FROM item") { sqlite3_column_int64($0, 0) }
    let found = try SQLite.single(db, "SELECT count(*) FROM item WHERE \(column) = '\(name(7))'") { sqlite3_column_int64($0, 0) }
    guard count == rows, found == 1 else { throw WorkloadError("SQLite after the migration: \(count) rows, \(found) found") }
    return measured
}

let addColumn = "ALTER TABLE item ADD COLUMN note TEXT"
let rewrite = """
    CREATE TABLE new_item(id INTEGER PRIMARY KEY, title TEXT NOT NULL, count INTEGER, note TEXT); \
    INSERT INTO new_item(id, title, count, note) SELECT id, name, count, note FROM item; \
    DROP TABLE item; ALTER TABLE new_item RENAME TO item; CREATE INDEX item_title ON item(title)
    """

// MARK: The rounds

struct Round {
    var arbor: [Measured] = []
    var sqlite: [Measured] = []
    var files: [String: Int] = [:]
}

func round(_ index: Int, rows: Int) throws -> Round {
    let directory = try ScratchDirectory(prefix: "arbor-migration")
    defer { directory.remove() }
    let arborPath = directory.path + "/items.arbor", sqlitePath = directory.path + "/items.sqlite"
    try makeArborStore(at: arborPath, rows: rows)
    try makeSQLiteStore(at: sqlitePath, rows: rows)
    var result = Round()
    let arborFirst = index % 2 == 0
    for step in 0..<2 {
        for engine in arborFirst ? ["Arbor", "SQLite"] : ["SQLite", "Arbor"] {
            if engine == "Arbor" {
                result.arbor.append(try arborMigration(at: arborPath, to: step + 2, rows: rows))
            } else {
                result.sqlite.append(try sqliteMigration(at: sqlitePath, step == 0 ? addColumn : rewrite, check: step == 0 ? "name" : "title", rows: rows))
            }
        }
    }
    result.files = directory.fileSizes
    return result
}

print("Schema migration against SQLite \(String(cString: sqlite3_libversion())): \(grouped(rowCount)) rows of Item (name indexed, count, price),")
print("each engine's defaults; \(rounds) rounds alternating which goes first; files on \((try? ScratchDirectory(prefix: "probe")).map { probe in defer { probe.remove() }; return probe.fileSystemName } ?? "?").")
print("")
var all: [Round] = []
for index in 0..<rounds { all.append(try round(index, rows: rowCount)) }
let quarter = try round(0, rows: rowCount / 4)

func milliseconds(_ duration: Duration) -> Double { Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15 }
func mib(_ bytes: Int) -> String { fixed(Double(bytes) / 1_048_576, 1) }

print("| migration | Arbor | SQLite | SQLite / Arbor | Arbor memory (peak above start) | SQLite memory | Arbor memory at \(grouped(rowCount / 4)) rows |")
print("|---|---:|---:|---:|---:|---:|---:|")
for (step, label) in ["add an optional attribute (SQLite: ALTER TABLE ADD COLUMN)", "rename + widen + remove a column: every row rewritten (SQLite: create, copy, drop, rename, index)"].enumerated() {
    let arbor = all.map { milliseconds($0.arbor[step].duration) }, sqlite = all.map { milliseconds($0.sqlite[step].duration) }
    let ratios = zip(sqlite, arbor).map { $0 / max($1, 0.001) }
    print("| \(label) | \(fixed(median(arbor), 1)) ms | \(fixed(median(sqlite), 1)) ms | \(medianAndRange(ratios)) | \(mib(Int(median(all.map { Double($0.arbor[step].memory) })))) MiB | \(mib(Int(median(all.map { Double($0.sqlite[step].memory) })))) MiB | \(mib(quarter.arbor[step].memory)) MiB |")
}
print("")
print("Files after both migrations (last round): " + (all.last?.files ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key) \(grouped($0.value)) B" }.joined(separator: ", "))
print("")
print("All rounds (ms, Arbor / SQLite): " + all.map { round in
    zip(round.arbor, round.sqlite).map { "\(fixed(milliseconds($0.duration), 1))/\(fixed(milliseconds($1.duration), 1))" }.joined(separator: " ")
}.joined(separator: "; "))
