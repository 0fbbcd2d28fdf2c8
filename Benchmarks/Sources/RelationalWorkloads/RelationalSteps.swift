import CommitWorkloads
import EngineWorkloads

/// One step of the relational report: a number of queries (or passes, or saves) timed together.
public struct RelationalStep: Sendable {
    /// A short key (`departmentName`), for results and `RELATIONAL_ONLY`.
    public let key: String
    /// The report's label: the step's number, what it runs and how many times.
    public let label: String
    /// Whether the step changes the store: it always runs, whole, with no time budget, and the
    /// store's ``RelationalWorkload/state()`` is compared after it.
    public let changes: Bool
    /// How many queries (passes, saves) the step runs.
    public let count: Int
    /// Untimed, before the step (step 15 reopens the store).
    let prepare: @Sendable (RelationalWorkload) throws -> Void
    /// Query `index` of the step.
    let query: @Sendable (RelationalWorkload, Int) throws -> Checksum

    init(_ key: String, _ label: String, changes: Bool = false, count: Int,
         prepare: @escaping @Sendable (RelationalWorkload) throws -> Void = { _ in },
         query: @escaping @Sendable (RelationalWorkload, Int) throws -> Checksum) {
        self.key = key
        self.label = label
        self.changes = changes
        self.count = count
        self.prepare = prepare
        self.query = query
    }
}

/// A step's measurement on one engine.
public struct StepResult: Codable, Sendable {
    public var key: String
    /// The time of the queries run.
    public var seconds: Double
    /// How many of the step's queries ran (fewer than `count` when the budget ran out).
    public var done: Int
    public var count: Int
    /// What the queries found.
    public var checksum: Checksum
    /// What the step read and wrote through system calls (``IOUsage``; nil where unknown).
    public var io: IOUsage?

    /// Whether every query ran.
    public var finished: Bool { done == count }
}

/// One engine's run of every step, in its own process.
public struct EngineRun: Codable, Sendable {
    public var engine: String
    public var fileSystem: String
    /// The name of the database file among the files.
    public var databaseFile: String
    public var steps: [StepResult] = []
    /// ``RelationalWorkload/state()`` after each step that changes the store, by step key.
    public var states: [String: [Int64]] = [:]
    /// The engine's files (name: bytes) after the import, and after the run with the store closed.
    public var filesAfterImport: [String: Int] = [:]
    public var filesAfterRun: [String: Int] = [:]
    /// The process's peak resident size over the whole run (`VmHWM`).
    public var peakResident: Int?
}

/// One engine's import alone, at the memory goal's size, in a fresh process.
public struct ImportMemory: Codable, Sendable {
    public var engine: String
    /// The name of the database file among the files.
    public var databaseFile: String
    public var objects: Int
    public var seconds: Double
    /// Resident before the import, and the process's peak (`VmHWM`) after it.
    public var residentBefore: Int?
    public var peakResident: Int?
    public var filesAfterImport: [String: Int] = [:]
}

/// The report's steps, in order (issue 26, item 9): `repeats` passes of steps 5–7, `saves` small
/// saves, `keyed` keyed fetches.
public func relationalSteps(shape: RelationalShape, queries q: RelationalQueries, repeats: Int) -> [RelationalStep] {
    [
        RelationalStep("import", "1. import in one save: \(grouped(shape.objects)) objects with their relationships, unique email, two indexes",
                       changes: true, count: 1) { engine, _ in try engine.importAll() },
        RelationalStep("departmentName", "2. `department.name == %@` (to-one key path), \(q.departmentNames.count) queries",
                       count: q.departmentNames.count) { engine, i in try engine.employees(inDepartmentNamed: q.departmentNames[i]) },
        RelationalStep("departmentObject", "3. department fetched by name, then `department == %@`, \(q.lookedUpNames.count) queries",
                       count: q.lookedUpNames.count) { engine, i in try engine.employees(ofDepartmentLookedUp: q.lookedUpNames[i]) },
        RelationalStep("managerPrefix", "4. `manager.department.name BEGINSWITH %@` (two hops), \(q.managerDepartmentPrefixes.count) queries",
                       count: q.managerDepartmentPrefixes.count) { engine, i in try engine.employees(withManagerDepartmentPrefix: q.managerDepartmentPrefixes[i]) },
        RelationalStep("walk", "5. each department's `employees` walked, salaries added (objects), \(repeats) passes",
                       count: repeats) { engine, _ in try engine.walkDepartments() },
        RelationalStep("sumKeyPath", "6. `employees.@sum.salary` on each department (GRDB: SQL SUM), \(repeats) passes",
                       count: repeats) { engine, _ in try engine.departmentSalarySums() },
        RelationalStep("groupedSum", "7. sum of salaries grouped by `department.name`, one fetch (GRDB: GROUP BY with a join), \(repeats) passes",
                       count: repeats) { engine, _ in try engine.groupedSalarySums() },
        RelationalStep("anyTimesheet", "8a. `ANY timesheets.hours > %@`, \(q.timesheetHours.count) queries",
                       count: q.timesheetHours.count) { engine, i in try engine.employees(withTimesheetOver: q.timesheetHours[i]) },
        RelationalStep("employeeCount", "8b. `employees.@count > %@` (departments), \(q.employeeCounts.count) queries",
                       count: q.employeeCounts.count) { engine, i in try engine.departments(withMoreEmployeesThan: q.employeeCounts[i]) },
        RelationalStep("subquery", "8c. `SUBQUERY(timesheets, $t, $t.hours > %@ AND $t.week < %@).@count >= 2`, \(q.subqueryBounds.count) queries",
                       count: q.subqueryBounds.count) { engine, i in
            try engine.employees(withTwoTimesheetsOver: q.subqueryBounds[i].hours, before: q.subqueryBounds[i].week)
        },
        RelationalStep("projectCountry", "9. `ANY projects.client.country == %@` (many-to-many, then to-one), \(q.countries.count) queries",
                       count: q.countries.count) { engine, i in try engine.employees(onProjectsIn: q.countries[i]) },
        RelationalStep("prefixC", "10a. `lastName BEGINSWITH[c] %@`, \(q.lastNamePrefixes.count) queries",
                       count: q.lastNamePrefixes.count) { engine, i in try engine.employees(lastNamePrefix: q.lastNamePrefixes[i], folded: false) },
        RelationalStep("prefixCD", "10b. `lastName BEGINSWITH[cd] %@`, \(q.foldedLastNamePrefixes.count) queries",
                       count: q.foldedLastNamePrefixes.count) { engine, i in try engine.employees(lastNamePrefix: q.foldedLastNamePrefixes[i], folded: true) },
        RelationalStep("contains", "11a. `email CONTAINS %@`, \(q.emailNeedles.count) queries",
                       count: q.emailNeedles.count) { engine, i in try engine.employees(emailContaining: q.emailNeedles[i], caseInsensitive: false) },
        RelationalStep("containsC", "11b. `email CONTAINS[c] %@`, \(q.upperCaseEmailNeedles.count) queries",
                       count: q.upperCaseEmailNeedles.count) { engine, i in try engine.employees(emailContaining: q.upperCaseEmailNeedles[i], caseInsensitive: true) },
        RelationalStep("values", "16a. employees with `salary >= %@` as `Decodable` values with `department.name` (GRDB: Decodable records from a join), \(q.valueBounds.count) queries",
                       count: q.valueBounds.count) { engine, i in try engine.employeeValues(earningAtLeast: q.valueBounds[i], asObjects: false) },
        RelationalStep("valueObjects", "16b. the same as managed objects (Arbor; GRDB as in 16a), \(q.valueBounds.count) queries",
                       count: q.valueBounds.count) { engine, i in try engine.employeeValues(earningAtLeast: q.valueBounds[i], asObjects: true) },
        RelationalStep("raise", "12. a 10% raise for `salary < %@` (about a tenth), fetched, changed, one save",
                       changes: true, count: 1) { engine, _ in try engine.raiseSalaries(below: q.raiseBound) },
        RelationalStep("batchRaise", "12b. a 10% raise for `salary < %@` in one request (Arbor: `BatchUpdateRequest`; GRDB: `updateAll`)",
                       changes: true, count: 1) { engine, _ in try engine.batchRaiseSalaries(below: q.batchRaiseBound) },
        RelationalStep("smallSaves", "13. \(grouped(q.savedEmployees.count)) small durable saves (a salary and a new timesheet each)",
                       changes: true, count: q.savedEmployees.count) { engine, i in
            try engine.smallSave(employee: q.savedEmployees[i])
            return Checksum(count: 1)
        },
        RelationalStep("batchInsert", "13b. \(grouped(q.batchInsertedTimesheets)) timesheets inserted in one request (Arbor: `BatchInsertRequest`; GRDB: the records inserted in one transaction)",
                       changes: true, count: 1) { engine, _ in try engine.batchInsertTimesheets(q.batchInsertedTimesheets) },
        RelationalStep("cascade", "14. delete \(q.deletedDepartments.count) department\(q.deletedDepartments.count == 1 ? "" : "s"), cascading to employees and timesheets, one save",
                       changes: true, count: 1) { engine, _ in try engine.deleteDepartments(q.deletedDepartments) },
        RelationalStep("batchCascade", "14b. delete \(q.batchDeletedDepartments.count) other department\(q.batchDeletedDepartments.count == 1 ? "" : "s") in one request, cascading (Arbor: `BatchDeleteRequest`; GRDB as in 14)",
                       changes: true, count: 1) { engine, _ in try engine.batchDeleteDepartments(q.batchDeletedDepartments) },
        RelationalStep("keyed", "15. keyed fetches after reopening, \(grouped(q.keyedEmployees.count)), each in a read of its own",
                       count: q.keyedEmployees.count, prepare: { try $0.reopen() }) { engine, i in try engine.keyedFetch(employee: q.keyedEmployees[i]) },
    ]
}

/// Runs `steps` on `engine` in order, each in a fresh context (Arbor). A step that does not
/// change the store stops between two queries once it has run longer than `budget` (and is
/// reported as such); `only` (keys), when given, skips the other steps that change nothing.
public func runRelationalSteps(_ steps: [RelationalStep], on engine: RelationalWorkload, budget: Duration, only: Set<String>?) throws -> EngineRun {
    let clock = ContinuousClock()
    var run = EngineRun(engine: engine.engine, fileSystem: engine.directory.fileSystemName, databaseFile: engine.databaseFileName)
    for step in steps {
        if let only, !step.changes, !only.contains(step.key) { continue }
        try engine.beginStep()
        try step.prepare(engine)
        var checksum = Checksum()
        var done = 0
        let ioBefore = IOUsage.now
        let start = clock.now
        for index in 0..<step.count {
            checksum += try step.query(engine, index)
            done += 1
            if !step.changes && clock.now - start > budget { break }
        }
        let seconds = (clock.now - start).seconds
        var result = StepResult(key: step.key, seconds: seconds, done: done, count: step.count, checksum: checksum)
        if let ioBefore, let ioAfter = IOUsage.now { result.io = ioAfter.since(ioBefore) }
        run.steps.append(result)
        if step.key == "import" { run.filesAfterImport = engine.directory.fileSizes }
        if step.changes { run.states[step.key] = try engine.state() }
    }
    engine.close()
    run.filesAfterRun = engine.directory.fileSizes
    run.peakResident = MemoryUsage.peakBytes
    return run
}

/// The import alone (step 1) on `engine`, with the process's peak resident size: run it in a
/// fresh process, where nothing before the import raised the peak.
public func measureImportMemory(on engine: RelationalWorkload, objects: Int) throws -> ImportMemory {
    let clock = ContinuousClock()
    var result = ImportMemory(engine: engine.engine, databaseFile: engine.databaseFileName, objects: objects, seconds: 0)
    result.residentBefore = MemoryUsage.residentBytes
    let start = clock.now
    _ = try engine.importAll()
    result.seconds = (clock.now - start).seconds
    result.peakResident = MemoryUsage.peakBytes
    engine.close()
    result.filesAfterImport = engine.directory.fileSizes
    return result
}
