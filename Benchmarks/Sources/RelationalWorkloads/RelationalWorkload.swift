import CommitWorkloads

/// What a step's queries found, added up over its queries: a count of results and a sum over
/// them (salaries, or figures weighed by department number). Both engines must give the same.
public struct Checksum: Codable, Equatable, Sendable, CustomStringConvertible {
    public var count: Int64
    public var sum: Int64

    public init(count: Int64 = 0, sum: Int64 = 0) {
        self.count = count
        self.sum = sum
    }

    public static func + (a: Checksum, b: Checksum) -> Checksum { Checksum(count: a.count + b.count, sum: a.sum &+ b.sum) }
    public static func += (a: inout Checksum, b: Checksum) { a = a + b }

    public var description: String { "\(count) results, sum \(sum)" }
}

/// The relational workload (issue 26, item 9) on one engine: Arbor's object graph on a native
/// store, or GRDB records with associations on SQLite. Each method is one query, one save or one
/// pass of a step (`RelationalSteps` times them); each returns what it found as a ``Checksum``.
///
/// Both stores hold ``RelationalShape``'s data: departments (name indexed), employees (email
/// unique, last name indexed, a department, a manager, timesheets, projects), timesheets,
/// projects and clients; deleting a department deletes its employees and their timesheets.
/// Both commit with a rollback journal and full syncs.
public protocol RelationalWorkload: AnyObject {
    /// `Arbor` or `GRDB`.
    var engine: String { get }
    /// The directory holding the engine's files.
    var directory: ScratchDirectory { get }
    /// The name of the database file in ``directory``.
    var databaseFileName: String { get }

    /// Called before each step, untimed: Arbor starts a fresh context, as a new task would.
    func beginStep() throws

    /// Step 1: inserts everything and saves it in one save (one transaction).
    func importAll() throws -> Checksum
    /// Figures of the whole store, untimed, compared between engines after the steps that
    /// change it: employees, timesheets, the sum of salaries, employees without a manager, the
    /// sum of timesheet hours.
    func state() throws -> [Int64]

    /// Step 2: `department.name == name`; the results' salaries.
    func employees(inDepartmentNamed name: String) throws -> Checksum
    /// Step 3: the department named `name` (through its index), then `department == it`.
    func employees(ofDepartmentLookedUp name: String) throws -> Checksum
    /// Step 4: `manager.department.name BEGINSWITH prefix`.
    func employees(withManagerDepartmentPrefix prefix: String) throws -> Checksum
    /// Step 5: every department's employees, as objects (records), salaries added.
    func walkDepartments() throws -> Checksum
    /// Step 6: each department's sum of salaries (Arbor: `employees.@sum.salary` on each).
    func departmentSalarySums() throws -> Checksum
    /// Step 7: sums of salaries grouped by department name, in one request.
    func groupedSalarySums() throws -> Checksum
    /// Step 8: `ANY timesheets.hours > hours`.
    func employees(withTimesheetOver hours: Int64) throws -> Checksum
    /// Step 8: departments with `employees.@count > count`.
    func departments(withMoreEmployeesThan count: Int64) throws -> Checksum
    /// Step 8: `SUBQUERY(timesheets, $t, $t.hours > hours AND $t.week < week).@count >= 2`.
    func employees(withTwoTimesheetsOver hours: Int64, before week: Int64) throws -> Checksum
    /// Step 9: `ANY projects.client.country == country`.
    func employees(onProjectsIn country: String) throws -> Checksum
    /// Step 10: `lastName BEGINSWITH[c] prefix`, or `[cd]` when `folded`.
    func employees(lastNamePrefix prefix: String, folded: Bool) throws -> Checksum
    /// Step 11: `email CONTAINS needle`, or `CONTAINS[c]`.
    func employees(emailContaining needle: String, caseInsensitive: Bool) throws -> Checksum
    /// Step 12: every employee earning less than `bound` gets 10% more (integer division), one save.
    func raiseSalaries(below bound: Int64) throws -> Checksum
    /// Step 12b: the same raise in one request to the store, with no objects: Arbor's
    /// `BatchUpdateRequest` (`salary + salary / 10`), GRDB's `updateAll` (one `UPDATE … WHERE`).
    /// The checksum counts the employees raised.
    func batchRaiseSalaries(below bound: Int64) throws -> Checksum
    /// Step 13: one small durable save: employee `i`'s salary + 1 and a new timesheet for them.
    func smallSave(employee i: Int) throws
    /// Step 13b: `count` new timesheets (week 60, hours `i % 8`, of employee `i`) inserted in
    /// one request with no objects: Arbor's `BatchInsertRequest` (a dictionary handler); GRDB
    /// inserts the records in one `write` (one prepared `INSERT`, run per row). The checksum
    /// counts the rows and sums their hours.
    func batchInsertTimesheets(_ count: Int) throws -> Checksum
    /// Step 14: deletes the departments numbered `departments` (cascading), one save.
    func deleteDepartments(_ departments: [Int]) throws -> Checksum
    /// Step 14b: deletes the departments numbered `departments` (cascading) in one request to
    /// the store, with no objects: Arbor's `BatchDeleteRequest` (its delete rules applied in the
    /// store); GRDB's `deleteAll`, as step 14.
    func batchDeleteDepartments(_ departments: [Int]) throws -> Checksum
    /// Step 16: employees earning at least `bound`, as plain values (last name, email, salary,
    /// `department.name`): Arbor decodes rows into a `Decodable` type, or (`asObjects`) fetches
    /// managed objects and reads the same; GRDB decodes `Decodable` records from a join.
    func employeeValues(earningAtLeast bound: Int64, asObjects: Bool) throws -> Checksum
    /// Step 15, untimed part: closes the store and opens it again.
    func reopen() throws
    /// Step 15: employee `i` read by key, in a read of its own.
    func keyedFetch(employee i: Int) throws -> Checksum

    /// Closes the engine's files (they stay on disk for their sizes).
    func close()
}
