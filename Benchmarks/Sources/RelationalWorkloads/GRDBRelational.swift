import CommitWorkloads
import Foundation
import GRDB
import GraphWorkloads

// GRDB records with associations, as GRDB's documentation writes them: `belongsTo`, `hasMany`
// and `hasMany(through:)` on foreign keys the schema declares (GRDB infers the columns), joins
// and association aggregates in the query interface, SQL where the query interface has no word.

struct DepartmentRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "department"
    static let employees = hasMany(EmployeeRow.self)
    var id: Int64
    var name: String
}

struct EmployeeRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "employee"
    static let department = belongsTo(DepartmentRow.self)
    static let manager = belongsTo(EmployeeRow.self, key: "manager", using: ForeignKey(["managerId"]))
    static let timesheets = hasMany(TimesheetRow.self)
    static let memberships = hasMany(MembershipRow.self)
    static let projects = hasMany(ProjectRow.self, through: memberships, using: MembershipRow.project)
    var id: Int64
    var firstName: String
    var lastName: String
    var email: String
    var salary: Int64
    var departmentId: Int64
    var managerId: Int64?
}

struct TimesheetRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "timesheet"
    var id: Int64?
    var employeeId: Int64
    var week: Int16
    var hours: Int16
}

/// An employee's membership of a project (the join table of the many-to-many relationship).
struct MembershipRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "membership"
    static let project = belongsTo(ProjectRow.self)
    var employeeId: Int64
    var projectId: Int64
}

struct ProjectRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "project"
    static let client = belongsTo(ClientRow.self)
    var id: Int64
    var name: String
    var clientId: Int64
}

struct ClientRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "client"
    var id: Int64
    var name: String
    var country: String
}

/// An employee's values with its department's name (step 16).
struct EmployeeValueRecord: Decodable, FetchableRecord {
    var lastName: String
    var email: String
    var salary: Int64
    var departmentName: String?
}

/// A department with its employees (`including(all:)`).
struct DepartmentWithEmployees: Decodable, FetchableRecord {
    var department: DepartmentRow
    var employees: [EmployeeRow]
}

/// The relational workload on GRDB 7 records: a `DatabaseQueue` on the system SQLite, DELETE
/// journal, FULL syncs, foreign keys on (GRDB's default) with `ON DELETE CASCADE` from
/// departments to employees, employees to timesheets and memberships, and `SET NULL` for
/// managers. Indexes: department name, employee last name, the unique email, and each foreign
/// key (GRDB's `belongsTo` columns make them).
public final class GRDBRelational: RelationalWorkload {
    /// "GRDB".
    public let engine = "GRDB"
    /// See ``RelationalWorkload/directory``.
    public let directory: ScratchDirectory
    /// See ``RelationalWorkload/databaseFileName``.
    public let databaseFileName = "relational.sqlite"
    let shape: RelationalShape
    var queue: DatabaseQueue?

    /// Case and diacritic folding as Arbor's `[cd]` does it (`lowercased()` of the
    /// diacritic-insensitive folding), an SQL function: SQLite has none.
    static let fold = DatabaseFunction("fold", argumentCount: 1, pure: true) { values in
        String.fromDatabaseValue(values[0]).map { $0.folding(options: .diacriticInsensitive, locale: nil).lowercased() }
    }

    /// A database with the workload's tables in a new scratch directory.
    public init(shape: RelationalShape) throws {
        self.shape = shape
        directory = try ScratchDirectory(prefix: "grdb-relational")
        let queue = try Self.open(directory.path + "/" + databaseFileName)
        self.queue = queue
        try queue.write { db in
            try db.create(table: "department") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("name", .text).notNull().indexed()
            }
            try db.create(table: "client") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("name", .text).notNull()
                table.column("country", .text).notNull()
            }
            try db.create(table: "project") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("name", .text).notNull()
                table.belongsTo("client", onDelete: .cascade).notNull()
            }
            try db.create(table: "employee") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("firstName", .text).notNull()
                table.column("lastName", .text).notNull().indexed()
                table.column("email", .text).notNull().unique()
                table.column("salary", .integer)
                table.belongsTo("department", onDelete: .cascade).notNull()
                table.belongsTo("manager", inTable: "employee", onDelete: .setNull)
            }
            try db.create(table: "timesheet") { table in
                table.autoIncrementedPrimaryKey("id")
                table.belongsTo("employee", onDelete: .cascade).notNull()
                table.column("week", .integer)
                table.column("hours", .integer)
            }
            try db.create(table: "membership") { table in
                table.primaryKey {
                    table.belongsTo("employee", onDelete: .cascade)
                    table.belongsTo("project", onDelete: .cascade)
                }
            }
        }
    }

    static func open(_ path: String) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.journalMode = .default
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = DELETE; PRAGMA synchronous = FULL")
            try CacheBudget.apply(to: db)
            db.add(function: fold)
        }
        return try DatabaseQueue(path: path, configuration: configuration)
    }

    var database: DatabaseQueue {
        get throws {
            guard let queue else { throw WorkloadError("GRDB: the database is closed") }
            return queue
        }
    }

    /// See ``RelationalWorkload/beginStep()``: nothing to do.
    public func beginStep() throws {}

    /// See ``RelationalWorkload/importAll()``: every record inserted in one `write`.
    public func importAll() throws -> Checksum {
        try database.write { db in
            for c in 0..<shape.clients {
                try ClientRow(id: Int64(c + 1), name: shape.clientName(c), country: shape.country(ofClient: c)).insert(db)
            }
            for p in 0..<shape.projects {
                try ProjectRow(id: Int64(p + 1), name: shape.projectName(p), clientId: Int64(shape.client(ofProject: p) + 1)).insert(db)
            }
            for d in 0..<shape.departments {
                try DepartmentRow(id: Int64(d + 1), name: shape.departmentName(d)).insert(db)
            }
            for i in 0..<shape.employees {
                let id = Int64(i + 1)
                try EmployeeRow(id: id, firstName: shape.firstName(ofEmployee: i), lastName: shape.lastName(ofEmployee: i),
                                email: shape.email(ofEmployee: i), salary: shape.salary(ofEmployee: i),
                                departmentId: Int64(shape.department(ofEmployee: i) + 1),
                                managerId: shape.manager(ofEmployee: i).map { Int64($0 + 1) }).insert(db)
                for p in shape.projects(ofEmployee: i) { try MembershipRow(employeeId: id, projectId: Int64(p + 1)).insert(db) }
                for k in 0..<RelationalShape.timesheetsPerEmployee {
                    let sheet = shape.timesheet(k, ofEmployee: i)
                    try TimesheetRow(id: nil, employeeId: id, week: sheet.week, hours: sheet.hours).insert(db)
                }
            }
        }
        return Checksum(count: Int64(shape.objects))
    }

    /// See ``RelationalWorkload/state()``.
    public func state() throws -> [Int64] {
        try database.read { db in
            try [
                "SELECT COUNT(*) FROM employee", "SELECT COUNT(*) FROM timesheet", "SELECT COALESCE(SUM(salary), 0) FROM employee",
                "SELECT COUNT(*) FROM employee WHERE managerId IS NULL", "SELECT COALESCE(SUM(hours), 0) FROM timesheet",
            ].map { try Int64.fetchOne(db, sql: $0) ?? -1 }
        }
    }

    // MARK: Queries

    /// The employees a request finds, their salaries added.
    func salaries(_ request: QueryInterfaceRequest<EmployeeRow>) throws -> Checksum {
        let employees = try database.read { db in try request.fetchAll(db) }
        return Checksum(count: Int64(employees.count), sum: employees.reduce(0) { $0 &+ $1.salary })
    }

    /// The departments a request finds, their numbers (plus one) added.
    func departmentNumbers(_ request: QueryInterfaceRequest<DepartmentRow>) throws -> Checksum {
        let departments = try database.read { db in try request.fetchAll(db) }
        return Checksum(count: Int64(departments.count), sum: departments.reduce(0) { $0 + RelationalShape.departmentNumber($1.name) + 1 })
    }

    /// See ``RelationalWorkload/employees(inDepartmentNamed:)``: a join on the department.
    public func employees(inDepartmentNamed name: String) throws -> Checksum {
        try salaries(EmployeeRow.joining(required: EmployeeRow.department.filter(Column("name") == name)))
    }

    /// See ``RelationalWorkload/employees(ofDepartmentLookedUp:)``: the department, then its
    /// `employees` association, in one read.
    public func employees(ofDepartmentLookedUp name: String) throws -> Checksum {
        let employees = try database.read { db -> [EmployeeRow] in
            guard let department = try DepartmentRow.filter(Column("name") == name).fetchOne(db) else { return [] }
            return try department.request(for: DepartmentRow.employees).fetchAll(db)
        }
        return Checksum(count: Int64(employees.count), sum: employees.reduce(0) { $0 &+ $1.salary })
    }

    /// See ``RelationalWorkload/employees(withManagerDepartmentPrefix:)``: two joins (GRDB
    /// aliases the employee table twice).
    public func employees(withManagerDepartmentPrefix prefix: String) throws -> Checksum {
        try salaries(EmployeeRow.joining(required: EmployeeRow.manager.joining(required: EmployeeRow.department.filter(Column("name").like(prefix + "%")))))
    }

    /// See ``RelationalWorkload/walkDepartments()``: `including(all:)` (two queries, no N+1).
    public func walkDepartments() throws -> Checksum {
        let departments = try database.read { db in
            try DepartmentRow.including(all: DepartmentRow.employees).asRequest(of: DepartmentWithEmployees.self).fetchAll(db)
        }
        var checksum = Checksum()
        for department in departments {
            for employee in department.employees { checksum += Checksum(count: 1, sum: employee.salary) }
        }
        return checksum
    }

    /// See ``RelationalWorkload/departmentSalarySums()``: the association aggregate
    /// `employees.sum(salary)` annotating each department (one query, `LEFT JOIN … GROUP BY`).
    public func departmentSalarySums() throws -> Checksum {
        let rows = try database.read { db in
            try DepartmentRow.annotated(with: DepartmentRow.employees.sum(Column("salary")).forKey("total")).asRequest(of: Row.self).fetchAll(db)
        }
        var checksum = Checksum()
        for row in rows {
            let total: Int64 = row["total"] ?? 0
            checksum += Checksum(count: 1, sum: total &* (RelationalShape.departmentNumber(row["name"]) + 1))
        }
        return checksum
    }

    /// See ``RelationalWorkload/groupedSalarySums()``: SQL, `GROUP BY` over a join.
    public func groupedSalarySums() throws -> Checksum {
        let rows = try database.read { db in
            try Row.fetchAll(db, sql: """
                SELECT department.name AS name, SUM(employee.salary) AS total
                FROM employee JOIN department ON department.id = employee.departmentId
                GROUP BY department.name
                """)
        }
        var checksum = Checksum()
        for row in rows {
            let total: Int64 = row["total"] ?? -1
            checksum += Checksum(count: 1, sum: total &* (RelationalShape.departmentNumber(row["name"]) + 1))
        }
        return checksum
    }

    /// See ``RelationalWorkload/employees(withTimesheetOver:)``: `having(… isEmpty == false)`.
    public func employees(withTimesheetOver hours: Int64) throws -> Checksum {
        try salaries(EmployeeRow.having(EmployeeRow.timesheets.filter(Column("hours") > hours).isEmpty == false))
    }

    /// See ``RelationalWorkload/departments(withMoreEmployeesThan:)``: `having(employees.count > n)`.
    public func departments(withMoreEmployeesThan count: Int64) throws -> Checksum {
        try departmentNumbers(DepartmentRow.having(DepartmentRow.employees.count > count))
    }

    /// See ``RelationalWorkload/employees(withTwoTimesheetsOver:before:)``: a filtered
    /// association's count.
    public func employees(withTwoTimesheetsOver hours: Int64, before week: Int64) throws -> Checksum {
        try salaries(EmployeeRow.having(EmployeeRow.timesheets.filter(Column("hours") > hours && Column("week") < week).count >= 2))
    }

    /// See ``RelationalWorkload/employees(onProjectsIn:)``: joins through the memberships to the
    /// projects and their clients, `DISTINCT` employees.
    public func employees(onProjectsIn country: String) throws -> Checksum {
        try salaries(EmployeeRow.joining(required: EmployeeRow.projects.joining(required: ProjectRow.client.filter(Column("country") == country))).distinct())
    }

    /// See ``RelationalWorkload/employees(lastNamePrefix:folded:)``: `LIKE 'p%'` (SQLite's LIKE
    /// folds ASCII case, which is all the data needs); folded: the `fold` function on both sides.
    public func employees(lastNamePrefix prefix: String, folded: Bool) throws -> Checksum {
        if folded {
            let pattern = prefix.folding(options: .diacriticInsensitive, locale: nil).lowercased() + "%"
            return try salaries(EmployeeRow.filter(Self.fold(Column("lastName")).like(pattern)))
        }
        return try salaries(EmployeeRow.filter(Column("lastName").like(prefix + "%")))
    }

    /// See ``RelationalWorkload/employees(emailContaining:caseInsensitive:)``: `instr` (case
    /// sensitive), or `LIKE '%n%'`.
    public func employees(emailContaining needle: String, caseInsensitive: Bool) throws -> Checksum {
        if caseInsensitive { return try salaries(EmployeeRow.filter(Column("email").like("%" + needle + "%"))) }
        return try salaries(EmployeeRow.filter(sql: "instr(email, ?) > 0", arguments: [needle]))
    }

    /// See ``RelationalWorkload/employeeValues(earningAtLeast:asObjects:)``: `Decodable`
    /// records of selected columns, the department's name annotated from the join (both forms).
    public func employeeValues(earningAtLeast bound: Int64, asObjects _: Bool) throws -> Checksum {
        let request = EmployeeRow
            .select(Column("lastName"), Column("email"), Column("salary"))
            .filter(Column("salary") >= bound)
            .annotated(withOptional: EmployeeRow.department.select(Column("name").forKey("departmentName")))
            .asRequest(of: EmployeeValueRecord.self)
        let values = try database.read { db in try request.fetchAll(db) }
        var checksum = Checksum()
        for value in values {
            checksum += Checksum(count: 1, sum: value.salary &+ Int64(value.lastName.utf8.count + value.email.utf8.count + (value.departmentName?.utf8.count ?? 0)))
        }
        return checksum
    }

    // MARK: Changes

    /// See ``RelationalWorkload/raiseSalaries(below:)``: the records fetched, changed and updated
    /// in one `write`.
    public func raiseSalaries(below bound: Int64) throws -> Checksum {
        try database.write { db in
            var checksum = Checksum()
            for var employee in try EmployeeRow.filter(Column("salary") < bound).fetchAll(db) {
                employee.salary += employee.salary / 10
                try employee.update(db, columns: ["salary"])
                checksum += Checksum(count: 1, sum: employee.salary)
            }
            return checksum
        }
    }

    /// See ``RelationalWorkload/batchRaiseSalaries(below:)``: `updateAll` (SQLite's integer
    /// division, as Arbor's truncation).
    public func batchRaiseSalaries(below bound: Int64) throws -> Checksum {
        try database.write { db in
            let count = try EmployeeRow.filter(Column("salary") < bound).updateAll(db, Column("salary").set(to: Column("salary") + Column("salary") / 10))
            return Checksum(count: Int64(count))
        }
    }

    /// See ``RelationalWorkload/batchInsertTimesheets(_:)``.
    public func batchInsertTimesheets(_ count: Int) throws -> Checksum {
        try database.write { db in
            var checksum = Checksum()
            for i in 0..<count {
                try TimesheetRow(id: nil, employeeId: Int64(i % shape.employees + 1), week: 60, hours: Int16(i % 8)).insert(db)
                checksum += Checksum(count: 1, sum: Int64(i % 8))
            }
            return checksum
        }
    }

    /// See ``RelationalWorkload/smallSave(employee:)``.
    public func smallSave(employee i: Int) throws {
        try database.write { db in
            guard var employee = try EmployeeRow.fetchOne(db, key: Int64(i + 1)) else { throw WorkloadError("GRDB: employee \(i) is missing") }
            employee.salary += 1
            try employee.update(db, columns: ["salary"])
            try TimesheetRow(id: nil, employeeId: employee.id, week: 52, hours: 1).insert(db)
        }
    }

    /// See ``RelationalWorkload/deleteDepartments(_:)``: `deleteAll` of the departments by name;
    /// the foreign keys cascade.
    public func deleteDepartments(_ departments: [Int]) throws -> Checksum {
        let names = departments.map { shape.departmentName($0) }
        return try database.write { db in
            let request = DepartmentRow.filter(names.contains(Column("name")))
            let deleted = try request.fetchAll(db)
            try request.deleteAll(db)
            return Checksum(count: Int64(deleted.count), sum: deleted.reduce(0) { $0 + RelationalShape.departmentNumber($1.name) + 1 })
        }
    }

    /// See ``RelationalWorkload/batchDeleteDepartments(_:)``: the same statement as step 14.
    public func batchDeleteDepartments(_ departments: [Int]) throws -> Checksum {
        try deleteDepartments(departments)
    }

    /// See ``RelationalWorkload/reopen()``.
    public func reopen() throws {
        try queue?.close()
        queue = try Self.open(directory.path + "/" + databaseFileName)
    }

    /// See ``RelationalWorkload/keyedFetch(employee:)``: `fetchOne(db, key:)` in a `read` of its own.
    public func keyedFetch(employee i: Int) throws -> Checksum {
        guard let employee = try database.read({ db in try EmployeeRow.fetchOne(db, key: Int64(i + 1)) }) else {
            throw WorkloadError("GRDB: employee \(i) is missing")
        }
        return Checksum(count: 1, sum: employee.salary)
    }

    /// See ``RelationalWorkload/close()``.
    public func close() {
        try? queue?.close()
        queue = nil
    }
}
