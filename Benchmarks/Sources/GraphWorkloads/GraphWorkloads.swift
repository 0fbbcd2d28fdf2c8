import Arbor
import ArborStore
import ArborTestSupport
import CommitWorkloads
import Foundation
import GRDB

/// The page-cache budget both engines get in the object-graph and fetch workloads: the same on
/// both sides, as the engine workloads give both 64 MiB (`EngineSettings`). 128 MiB unless the
/// environment's `CACHE_MIB` says otherwise: enough to hold the 1,000,000-object databases, so
/// the reports measure the engines' paths rather than re-reading pages the operating system
/// already holds. `CACHE_MIB=default` leaves each engine its own default (Arbor 8 MiB, SQLite
/// 2 MB), as the reports before 2026-11-23 ran.
public enum CacheBudget {
    /// The budget in bytes, or nil for each engine's default.
    public static let bytes: Int? = {
        let setting = ProcessInfo.processInfo.environment["CACHE_MIB"] ?? "128"
        if setting == "default" { return nil }
        return (Int(setting) ?? 128) << 20
    }()

    /// How the budget reads in a report.
    public static var label: String {
        bytes.map { "both engines' page caches \($0 >> 20) MiB" } ?? "each engine's default page cache (Arbor 8 MiB, SQLite 2 MB)"
    }

    /// Native store options with the budget.
    public static var arborOptions: DatabaseOptions {
        var options = DatabaseOptions()
        if let bytes { options.cacheSize = bytes }
        return options
    }

    /// Sets the budget on a new SQLite connection (`PRAGMA cache_size` in KiB when negative).
    public static func apply(to db: GRDB.Database) throws {
        if let bytes { try db.execute(sql: "PRAGMA cache_size = -\(bytes >> 10)") }
    }
}

/// The object-graph workloads of issue 4, item 11, on one engine: Arbor's object graph
/// (managed objects, a context, a native store) or GRDB's records (on the system SQLite). Both
/// store the same rows: an employee with a name, a salary and a start date; both commit with a
/// rollback journal and full syncs (SQLite `journal_mode=DELETE`, `synchronous=FULL`).
public protocol GraphWorkload: AnyObject {
    /// The engine's name (`Arbor`, `GRDB`), the prefix of its figures.
    var engine: String { get }
    /// The kind of file system holding the files (`ext4`, `tmpfs`…): durable-save figures mean
    /// nothing on tmpfs.
    var fileSystemName: String { get }
    /// Inserts `count` employees and saves them in one save (one transaction); returns their keys.
    func insertAndSave(count: Int, from first: Int) throws -> [Int64]
    /// Reads each of `keys` by key, one at a time, each in a read of its own.
    func keyedFetches(_ keys: [Int64]) throws
    /// Fetches every employee in one fetch, reading each one's salary; returns how many.
    func fetchAll() throws -> Int
    /// `count` saves of one new employee each, each durable.
    func durableSaves(count: Int, from first: Int) throws
    /// Closes and removes the files.
    func remove()
}

/// Row `i`'s values, the same for both engines.
public enum EmployeeRows {
    /// Row `i`'s name.
    public static func name(_ i: Int) -> String { "Employee \(i)" }
    /// Row `i`'s salary.
    public static func salary(_ i: Int) -> Int64 { Int64(i % 1000) * 100 + 30_000 }
    /// Row `i`'s start date.
    public static func startDate(_ i: Int) -> Date { Date(timeIntervalSince1970: 1_600_000_000 + Double(i) * 60) }
}

/// `count` keys drawn at random (with repeats) from `keys`, by `generator`.
public func sampleKeys(_ keys: [Int64], count: Int, generator: inout SplitMix64) -> [Int64] {
    (0..<count).map { _ in keys[Int(generator.next() % UInt64(keys.count))] }
}

// MARK: Arbor

/// The workloads on Arbor: managed objects in contexts on a native store.
public final class ArborGraph: GraphWorkload {
    /// "Arbor".
    public let engine = "Arbor"
    let directory: ScratchDirectory
    let coordinator: PersistentStoreCoordinator
    let store: NativeStore
    let entity: EntityDescription

    /// A native store in a new scratch directory, for an employee model.
    public init() throws {
        directory = try ScratchDirectory(prefix: "arbor-graph")
        let model = try ManagedObjectModel {
            Entity("Employee") {
                Attribute("name", .string).required()
                Attribute("salary", .integer64)
                Attribute("startDate", .date)
            }
        }
        entity = model.entity(named: "Employee")!
        coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        store = try coordinator.addNativeStore(at: directory.path + "/graph.arbor", options: CacheBudget.arborOptions)
    }

    func insert(_ i: Int, into context: ManagedObjectContext) throws -> ManagedObject {
        let object = ManagedObject(entity: entity, insertInto: context)
        try object.setValue(EmployeeRows.name(i), forKey: "name")
        try object.setValue(EmployeeRows.salary(i), forKey: "salary")
        try object.setValue(EmployeeRows.startDate(i), forKey: "startDate")
        return object
    }

    /// See ``GraphWorkload/fileSystemName``.
    public var fileSystemName: String { directory.fileSystemName }

    /// See ``GraphWorkload/insertAndSave(count:from:)``.
    public func insertAndSave(count: Int, from first: Int) throws -> [Int64] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let objects = try (first..<(first + count)).map { try insert($0, into: context) }
        try context.save()
        return objects.map { $0.objectID.primaryKey! }
    }

    /// See ``GraphWorkload/keyedFetches(_:)``.
    public func keyedFetches(_ keys: [Int64]) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for key in keys {
            let object = try context.existingObject(with: id(key))
            guard try object.value(forKey: "salary") as? Int64 != nil else { throw WorkloadError("Arbor: row \(key) has no salary") }
        }
    }

    /// See ``GraphWorkload/fetchAll()``: a fetch request in a fresh context (objects come as
    /// faults whose rows the fetch put in the row cache; reading the salary fires each).
    public func fetchAll() throws -> Int {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let objects = try context.fetch(Arbor.FetchRequest<ManagedObject>(entityName: "Employee"))
        for object in objects {
            guard try object.value(forKey: "salary") is Int64 else { throw WorkloadError("Arbor: an employee has no salary") }
        }
        return objects.count
    }

    /// See ``GraphWorkload/durableSaves(count:from:)``.
    public func durableSaves(count: Int, from first: Int) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for i in first..<(first + count) {
            _ = try insert(i, into: context)
            try context.save()
        }
    }

    /// Fault fires from the row cache: a context holding every row's snapshot, then `keys` read
    /// as faults in another context. Returns the time of the second part (`starting` and
    /// `finished` run around it).
    @discardableResult
    public func faultFires(_ keys: [Int64], starting: () -> Void = {}, finished: () -> Void = {}) throws -> Duration {
        let holder = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        holder.retainsRegisteredObjects = true
        for key in keys { _ = try holder.existingObject(with: id(key)) }
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        context.retainsRegisteredObjects = true
        starting()
        let start = ContinuousClock.now
        for key in keys {
            guard try context.object(with: id(key)).value(forKey: "salary") != nil else { throw WorkloadError("Arbor: a fault of \(key) fired empty") }
        }
        let elapsed = ContinuousClock.now - start
        finished()
        return elapsed
    }

    func id(_ key: Int64) -> ManagedObjectID {
        store.objectID(entityName: "Employee", primaryKey: key)
    }

    /// See ``GraphWorkload/remove()``.
    public func remove() { directory.remove() }
}

// MARK: GRDB

struct EmployeeRecord: Codable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "employee"
    var id: Int64?
    var name: String
    var salary: Int64
    var startDate: Date

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// The workloads on GRDB records: a `DatabaseQueue` on the system SQLite.
public final class GRDBGraph: GraphWorkload {
    /// "GRDB".
    public let engine = "GRDB"
    let directory: ScratchDirectory
    let queue: DatabaseQueue

    /// A database with an employee table in a new scratch directory (DELETE journal, FULL syncs).
    public init() throws {
        directory = try ScratchDirectory(prefix: "grdb-graph")
        var configuration = Configuration()
        configuration.journalMode = .default
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = DELETE; PRAGMA synchronous = FULL")
            try CacheBudget.apply(to: db)
        }
        queue = try DatabaseQueue(path: directory.path + "/graph.sqlite", configuration: configuration)
        try queue.write { db in
            try db.create(table: "employee") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("name", .text).notNull()
                table.column("salary", .integer)
                table.column("startDate", .datetime)
            }
        }
    }

    /// See ``GraphWorkload/fileSystemName``.
    public var fileSystemName: String { directory.fileSystemName }

    /// See ``GraphWorkload/insertAndSave(count:from:)``.
    public func insertAndSave(count: Int, from first: Int) throws -> [Int64] {
        try queue.write { db in
            try (first..<(first + count)).map { i in
                var record = EmployeeRecord(id: nil, name: EmployeeRows.name(i), salary: EmployeeRows.salary(i), startDate: EmployeeRows.startDate(i))
                try record.insert(db)
                return record.id!
            }
        }
    }

    /// See ``GraphWorkload/keyedFetches(_:)``.
    public func keyedFetches(_ keys: [Int64]) throws {
        for key in keys {
            let record = try queue.read { db in try EmployeeRecord.fetchOne(db, key: key) }
            guard record != nil else { throw WorkloadError("GRDB: row \(key) is missing") }
        }
    }

    /// See ``GraphWorkload/fetchAll()``: `fetchAll` of every record in one `read`.
    public func fetchAll() throws -> Int {
        let records = try queue.read { db in try EmployeeRecord.fetchAll(db) }
        for record in records where record.salary < 0 { throw WorkloadError("GRDB: a negative salary") }
        return records.count
    }

    /// See ``GraphWorkload/durableSaves(count:from:)``.
    public func durableSaves(count: Int, from first: Int) throws {
        for i in first..<(first + count) {
            try queue.write { db in
                var record = EmployeeRecord(id: nil, name: EmployeeRows.name(i), salary: EmployeeRows.salary(i), startDate: EmployeeRows.startDate(i))
                try record.insert(db)
            }
        }
    }

    /// See ``GraphWorkload/remove()``.
    public func remove() { directory.remove() }
}
