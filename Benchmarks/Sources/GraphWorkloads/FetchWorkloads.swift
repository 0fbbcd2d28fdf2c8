import Arbor
import ArborTestSupport
import CommitWorkloads
import Foundation
import GRDB

/// The fetch workloads of issue 5, item 8, on one engine: Arbor's fetch requests (a context on a
/// native store) or GRDB's record requests (on the system SQLite), over the same people:
///
/// - `team`: `i % (count / 10)`, indexed (about 10 people per team);
/// - `salary`: `(i * 7919) % 100_000 + 30_000`, indexed;
/// - `age`: `20 + i % 45`, not indexed; `name`: `"Person <i>"`, not indexed.
///
/// Every query's results are used: each object's (record's) salary is read.
public protocol FetchWorkload: AnyObject {
    /// `Arbor` or `GRDB`.
    var engine: String { get }
    /// Inserts `count` people in one save.
    func fill(count: Int) throws
    /// `team == t` for each of `teams`; returns the number of results.
    func indexedEquality(_ teams: [Int64]) throws -> Int
    /// `salary >= s AND salary < s + 2000`, sorted by salary, first 20, for each of `starts`.
    func rangeSortLimit(_ starts: [Int64]) throws -> Int
    /// `age == a AND name ENDSWITH '7'` (no index: every row is read) for each of `ages`.
    func unindexed(_ ages: [Int64]) throws -> Int
    /// `count(salary < s)` for each of `bounds`; returns the sum of the counts.
    func count(_ bounds: [Int64]) throws -> Int
    /// Closes and removes the files.
    func remove()
}

/// The people's values, the same for both engines.
public enum PersonRows {
    /// Person `i`'s team, for a table of `count` people.
    public static func team(_ i: Int, count: Int) -> Int64 { Int64(i % max(1, count / 10)) }
    /// Person `i`'s salary.
    public static func salary(_ i: Int) -> Int64 { Int64((i * 7919) % 100_000 + 30_000) }
    /// Person `i`'s age.
    public static func age(_ i: Int) -> Int64 { Int64(20 + i % 45) }
    /// Person `i`'s name.
    public static func name(_ i: Int) -> String { "Person \(i)" }
}

/// The fetch workloads on Arbor.
public final class ArborFetches: FetchWorkload {
    /// "Arbor".
    public let engine = "Arbor"
    let directory: ScratchDirectory
    let coordinator: PersistentStoreCoordinator
    let entity: EntityDescription
    let context: ManagedObjectContext

    /// A native store in a new scratch directory.
    public init() throws {
        directory = try ScratchDirectory(prefix: "arbor-fetch")
        let model = try ManagedObjectModel {
            Entity("Person") {
                Attribute("name", .string).required()
                Attribute("team", .integer64).indexed()
                Attribute("salary", .integer64).indexed()
                Attribute("age", .integer64)
            }
        }
        entity = model.entity(named: "Person")!
        coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addNativeStore(at: directory.path + "/fetch.arbor", options: CacheBudget.arborOptions)
        context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    }

    /// See ``FetchWorkload/fill(count:)``.
    public func fill(count: Int) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for i in 0..<count {
            let object = ManagedObject(entity: entity, insertInto: context)
            try object.setValue(PersonRows.name(i), forKey: "name")
            try object.setValue(PersonRows.team(i, count: count), forKey: "team")
            try object.setValue(PersonRows.salary(i), forKey: "salary")
            try object.setValue(PersonRows.age(i), forKey: "age")
        }
        try context.save()
    }

    func run(_ request: Arbor.FetchRequest<ManagedObject>) throws -> Int {
        let objects = try context.fetch(request)
        for object in objects {
            guard try object.value(forKey: "salary") is Int64 else { throw WorkloadError("Arbor: a result has no salary") }
        }
        return objects.count
    }

    /// See ``FetchWorkload/indexedEquality(_:)``.
    public func indexedEquality(_ teams: [Int64]) throws -> Int {
        var total = 0
        for team in teams { total += try run(try Arbor.FetchRequest<ManagedObject>(entityName: "Person", format: "team == %@", team)) }
        return total
    }

    /// See ``FetchWorkload/rangeSortLimit(_:)``.
    public func rangeSortLimit(_ starts: [Int64]) throws -> Int {
        var total = 0
        for start in starts {
            var request = try Arbor.FetchRequest<ManagedObject>(entityName: "Person", format: "salary >= %@ AND salary < %@", start, start + 2000)
            request.sortDescriptors = [ObjectSortDescriptor(key: "salary")]
            request.fetchLimit = 20
            total += try run(request)
        }
        return total
    }

    /// See ``FetchWorkload/unindexed(_:)``.
    public func unindexed(_ ages: [Int64]) throws -> Int {
        var total = 0
        for age in ages { total += try run(try Arbor.FetchRequest<ManagedObject>(entityName: "Person", format: "age == %@ AND name ENDSWITH '7'", age)) }
        return total
    }

    /// The number of people a fetch request with `format` returns (each object made and
    /// dropped; nothing read from it): for probes of one predicate.
    public func fetchCount(_ format: String) throws -> Int {
        try context.fetch(try Arbor.FetchRequest<ManagedObject>(entityName: "Person", format: format)).count
    }

    /// See ``FetchWorkload/count(_:)``.
    public func count(_ bounds: [Int64]) throws -> Int {
        var total = 0
        for bound in bounds { total += try context.count(for: try Arbor.FetchRequest<ManagedObject>(entityName: "Person", format: "salary < %@", bound)) }
        return total
    }

    /// See ``FetchWorkload/remove()``.
    public func remove() { directory.remove() }
}

struct PersonRecord: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "person"
    var id: Int64?
    var name: String
    var team: Int64
    var salary: Int64
    var age: Int64
}

/// The fetch workloads on GRDB records.
public final class GRDBFetches: FetchWorkload {
    /// "GRDB".
    public let engine = "GRDB"
    let directory: ScratchDirectory
    let queue: DatabaseQueue

    /// A database with a person table and its two indexes (DELETE journal, FULL syncs).
    public init() throws {
        directory = try ScratchDirectory(prefix: "grdb-fetch")
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = DELETE; PRAGMA synchronous = FULL")
            try CacheBudget.apply(to: db)
        }
        queue = try DatabaseQueue(path: directory.path + "/fetch.sqlite", configuration: configuration)
        try queue.write { db in
            try db.create(table: "person") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("name", .text).notNull()
                table.column("team", .integer).indexed()
                table.column("salary", .integer).indexed()
                table.column("age", .integer)
            }
        }
    }

    /// See ``FetchWorkload/fill(count:)``.
    public func fill(count: Int) throws {
        try queue.write { db in
            for i in 0..<count {
                try PersonRecord(id: nil, name: PersonRows.name(i), team: PersonRows.team(i, count: count),
                                 salary: PersonRows.salary(i), age: PersonRows.age(i)).insert(db)
            }
        }
    }

    func run(_ request: QueryInterfaceRequest<PersonRecord>) throws -> Int {
        let records = try queue.read { db in try request.fetchAll(db) }
        var sum: Int64 = 0
        for record in records { sum &+= record.salary }
        return sum == -1 ? 0 : records.count
    }

    /// See ``FetchWorkload/indexedEquality(_:)``.
    public func indexedEquality(_ teams: [Int64]) throws -> Int {
        var total = 0
        for team in teams { total += try run(PersonRecord.filter(Column("team") == team)) }
        return total
    }

    /// See ``FetchWorkload/rangeSortLimit(_:)``.
    public func rangeSortLimit(_ starts: [Int64]) throws -> Int {
        var total = 0
        for start in starts {
            total += try run(PersonRecord.filter(Column("salary") >= start && Column("salary") < start + 2000).order(Column("salary")).limit(20))
        }
        return total
    }

    /// See ``FetchWorkload/unindexed(_:)``.
    public func unindexed(_ ages: [Int64]) throws -> Int {
        var total = 0
        for age in ages { total += try run(PersonRecord.filter(Column("age") == age && Column("name").like("%7"))) }
        return total
    }

    /// See ``FetchWorkload/count(_:)``.
    public func count(_ bounds: [Int64]) throws -> Int {
        var total = 0
        for bound in bounds { total += try queue.read { db in try PersonRecord.filter(Column("salary") < bound).fetchCount(db) } }
        return total
    }

    /// See ``FetchWorkload/remove()``.
    public func remove() { directory.remove() }
}
