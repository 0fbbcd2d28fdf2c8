import Foundation
import Arbor
import ArborStore
import CommitWorkloads
import GraphWorkloads

/// The relational workload on Arbor, written as an application would: a model with
/// relationships, fetch requests with predicates through key paths, `value(forKeyPath:)`,
/// dictionary fetches with grouping and aggregates, objects changed and deleted in a context and
/// saved. No shortcut a user would not take: what these steps cost is what a user meets today.
public final class ArborRelational: RelationalWorkload {
    /// "Arbor".
    public let engine = "Arbor"
    /// See ``RelationalWorkload/directory``.
    public let directory: ScratchDirectory
    /// See ``RelationalWorkload/databaseFileName``.
    public let databaseFileName = "relational.arbor"
    let shape: RelationalShape
    let model: ManagedObjectModel
    var coordinator: PersistentStoreCoordinator!
    var store: NativeStore!
    /// The current step's context.
    var context: ManagedObjectContext
    /// Each employee's primary key, by employee number (after the import).
    var employeeKeys: [Int64] = []

    /// The model: departments, employees, timesheets, projects, clients.
    public static func makeModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Department") {
                Attribute("name", .string).required().indexed()
                Relationship("employees", to: "Employee", inverse: "department").toMany().deleteRule(.cascade)
            }
            Entity("Employee") {
                Attribute("firstName", .string).required()
                Attribute("lastName", .string).required().indexed()
                Attribute("email", .string).required()
                Attribute("salary", .integer64)
                Relationship("department", to: "Department", inverse: "employees")
                Relationship("manager", to: "Employee", inverse: "reports")
                Relationship("reports", to: "Employee", inverse: "manager").toMany()
                Relationship("timesheets", to: "Timesheet", inverse: "employee").toMany().deleteRule(.cascade)
                Relationship("projects", to: "Project", inverse: "members").toMany()
                Unique("email")
            }
            Entity("Timesheet") {
                Attribute("week", .integer16)
                Attribute("hours", .integer16)
                Relationship("employee", to: "Employee", inverse: "timesheets")
            }
            Entity("Project") {
                Attribute("name", .string).required()
                Relationship("members", to: "Employee", inverse: "projects").toMany()
                Relationship("client", to: "Client", inverse: "projects")
            }
            Entity("Client") {
                Attribute("name", .string).required()
                Attribute("country", .string).required()
                Relationship("projects", to: "Project", inverse: "client").toMany()
            }
        }
    }

    /// Whether the store records persistent history: `RELATIONAL_HISTORY=1` measures what
    /// recording costs (docs/performance.md, "Persistent history").
    static let history: PersistentHistoryTracking = ProcessInfo.processInfo.environment["RELATIONAL_HISTORY"] == "1" ? .on : .off

    /// A native store in a new scratch directory, with the page cache `CacheBudget` says.
    public init(shape: RelationalShape) throws {
        self.shape = shape
        directory = try ScratchDirectory(prefix: "arbor-relational")
        model = try Self.makeModel()
        coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        store = try coordinator.addNativeStore(at: directory.path + "/" + databaseFileName, options: CacheBudget.arborOptions, history: Self.history)
        context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    }

    /// See ``RelationalWorkload/beginStep()``.
    public func beginStep() throws {
        context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    }

    /// A new object of `entity` in the step's context.
    func insert(_ entity: String) -> ManagedObject {
        ManagedObject(entity: model.entity(named: entity)!, insertInto: context)
    }

    /// See ``RelationalWorkload/importAll()``: every object inserted and its relationships set
    /// (`mutableSetValue(forKey:)` for the projects), one save.
    public func importAll() throws -> Checksum {
        let clients = try (0..<shape.clients).map { c in
            let client = insert("Client")
            try client.setValue(shape.clientName(c), forKey: "name")
            try client.setValue(shape.country(ofClient: c), forKey: "country")
            return client
        }
        let projects = try (0..<shape.projects).map { p in
            let project = insert("Project")
            try project.setValue(shape.projectName(p), forKey: "name")
            try project.setValue(clients[shape.client(ofProject: p)], forKey: "client")
            return project
        }
        let departments = try (0..<shape.departments).map { d in
            let department = insert("Department")
            try department.setValue(shape.departmentName(d), forKey: "name")
            return department
        }
        var employees: [ManagedObject] = []
        employees.reserveCapacity(shape.employees)
        for i in 0..<shape.employees {
            let employee = insert("Employee")
            try employee.setValue(shape.firstName(ofEmployee: i), forKey: "firstName")
            try employee.setValue(shape.lastName(ofEmployee: i), forKey: "lastName")
            try employee.setValue(shape.email(ofEmployee: i), forKey: "email")
            try employee.setValue(shape.salary(ofEmployee: i), forKey: "salary")
            try employee.setValue(departments[shape.department(ofEmployee: i)], forKey: "department")
            if let manager = shape.manager(ofEmployee: i) { try employee.setValue(employees[manager], forKey: "manager") }
            let memberships = try employee.mutableSetValue(forKey: "projects")
            for p in shape.projects(ofEmployee: i) { try memberships.insert(projects[p]) }
            for k in 0..<RelationalShape.timesheetsPerEmployee {
                let sheet = shape.timesheet(k, ofEmployee: i)
                let timesheet = insert("Timesheet")
                try timesheet.setValue(sheet.week, forKey: "week")
                try timesheet.setValue(sheet.hours, forKey: "hours")
                try timesheet.setValue(employee, forKey: "employee")
            }
            employees.append(employee)
        }
        try context.save()
        employeeKeys = employees.map { $0.objectID.primaryKey! }
        return Checksum(count: Int64(shape.objects))
    }

    /// See ``RelationalWorkload/state()``: counts and aggregate fetches.
    public func state() throws -> [Int64] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        func total(_ entity: String, _ key: String) throws -> Int64 {
            var request = Arbor.FetchRequest<[String: any Sendable]>(entityName: entity)
            request.propertiesToFetch = [.aggregate(.sum, of: key, as: "total")]
            return try context.fetch(request).first?["total"] as? Int64 ?? -1
        }
        return [
            Int64(try context.count(for: Arbor.FetchRequest<ManagedObject>(entityName: "Employee"))),
            Int64(try context.count(for: Arbor.FetchRequest<ManagedObject>(entityName: "Timesheet"))),
            try total("Employee", "salary"),
            Int64(try context.count(for: try Arbor.FetchRequest<ManagedObject>(entityName: "Employee", format: "manager == nil"))),
            try total("Timesheet", "hours"),
        ]
    }

    // MARK: Queries

    /// The employees a request finds, their salaries added.
    func salaries(_ request: Arbor.FetchRequest<ManagedObject>) throws -> Checksum {
        let employees = try context.fetch(request)
        var sum: Int64 = 0
        for employee in employees { sum &+= try employee.value(forKey: "salary") as? Int64 ?? 0 }
        return Checksum(count: Int64(employees.count), sum: sum)
    }

    /// The departments a request finds, their numbers (plus one) added.
    func departmentNumbers(_ request: Arbor.FetchRequest<ManagedObject>) throws -> Checksum {
        let departments = try context.fetch(request)
        var sum: Int64 = 0
        for department in departments { sum += RelationalShape.departmentNumber(try department.value(forKey: "name") as? String ?? "") + 1 }
        return Checksum(count: Int64(departments.count), sum: sum)
    }

    func employees(_ format: String, _ arguments: Any?...) throws -> Checksum {
        var request = Arbor.FetchRequest<ManagedObject>(entityName: "Employee")
        request.predicate = try ObjectPredicate(format: format, argumentArray: arguments)
        return try salaries(request)
    }

    /// See ``RelationalWorkload/employees(inDepartmentNamed:)``.
    public func employees(inDepartmentNamed name: String) throws -> Checksum {
        try employees("department.name == %@", name)
    }

    /// See ``RelationalWorkload/employees(ofDepartmentLookedUp:)``.
    public func employees(ofDepartmentLookedUp name: String) throws -> Checksum {
        let department = try context.fetch(try Arbor.FetchRequest<ManagedObject>(entityName: "Department", format: "name == %@", name)).first
        return try employees("department == %@", department)
    }

    /// See ``RelationalWorkload/employees(withManagerDepartmentPrefix:)``.
    public func employees(withManagerDepartmentPrefix prefix: String) throws -> Checksum {
        try employees("manager.department.name BEGINSWITH %@", prefix)
    }

    /// See ``RelationalWorkload/walkDepartments()``: each department's `employees` set.
    public func walkDepartments() throws -> Checksum {
        var checksum = Checksum()
        for department in try context.fetch(Arbor.FetchRequest<ManagedObject>(entityName: "Department")) {
            for employee in try department.value(forKey: "employees") as? Set<ManagedObject> ?? [] {
                checksum += Checksum(count: 1, sum: try employee.value(forKey: "salary") as? Int64 ?? 0)
            }
        }
        return checksum
    }

    /// See ``RelationalWorkload/departmentSalarySums()``: `value(forKeyPath:
    /// "employees.@sum.salary")` on each department.
    public func departmentSalarySums() throws -> Checksum {
        var checksum = Checksum()
        for department in try context.fetch(Arbor.FetchRequest<ManagedObject>(entityName: "Department")) {
            let total = try department.value(forKeyPath: "employees.@sum.salary") as? Int64 ?? -1
            let number = RelationalShape.departmentNumber(try department.value(forKey: "name") as? String ?? "")
            checksum += Checksum(count: 1, sum: total &* (number + 1))
        }
        return checksum
    }

    /// See ``RelationalWorkload/groupedSalarySums()``: a dictionary fetch grouped by
    /// `department.name` with a sum of salaries.
    public func groupedSalarySums() throws -> Checksum {
        var request = Arbor.FetchRequest<[String: any Sendable]>(entityName: "Employee")
        request.propertiesToFetch = [.key("department.name"), .aggregate(.sum, of: "salary", as: "total")]
        request.propertiesToGroupBy = ["department.name"]
        var checksum = Checksum()
        for group in try context.fetch(request) {
            let number = RelationalShape.departmentNumber(group["department.name"] as? String ?? "")
            checksum += Checksum(count: 1, sum: (group["total"] as? Int64 ?? -1) &* (number + 1))
        }
        return checksum
    }

    /// See ``RelationalWorkload/employees(withTimesheetOver:)``.
    public func employees(withTimesheetOver hours: Int64) throws -> Checksum {
        try employees("ANY timesheets.hours > %@", hours)
    }

    /// See ``RelationalWorkload/departments(withMoreEmployeesThan:)``.
    public func departments(withMoreEmployeesThan count: Int64) throws -> Checksum {
        try departmentNumbers(try Arbor.FetchRequest<ManagedObject>(entityName: "Department", format: "employees.@count > %@", count))
    }

    /// See ``RelationalWorkload/employees(withTwoTimesheetsOver:before:)``.
    public func employees(withTwoTimesheetsOver hours: Int64, before week: Int64) throws -> Checksum {
        try employees("SUBQUERY(timesheets, $t, $t.hours > %@ AND $t.week < %@).@count >= 2", hours, week)
    }

    /// See ``RelationalWorkload/employees(onProjectsIn:)``.
    public func employees(onProjectsIn country: String) throws -> Checksum {
        try employees("ANY projects.client.country == %@", country)
    }

    /// See ``RelationalWorkload/employees(lastNamePrefix:folded:)``.
    public func employees(lastNamePrefix prefix: String, folded: Bool) throws -> Checksum {
        try employees(folded ? "lastName BEGINSWITH[cd] %@" : "lastName BEGINSWITH[c] %@", prefix)
    }

    /// See ``RelationalWorkload/employees(emailContaining:caseInsensitive:)``.
    public func employees(emailContaining needle: String, caseInsensitive: Bool) throws -> Checksum {
        try employees(caseInsensitive ? "email CONTAINS[c] %@" : "email CONTAINS %@", needle)
    }

    /// An employee as a plain value (step 16).
    struct EmployeeValue: Decodable, Sendable {
        let lastName: String
        let email: String
        let salary: Int64
        let departmentName: String?
        enum CodingKeys: String, CodingKey { case lastName, email, salary, departmentName = "department.name" }
    }

    /// See ``RelationalWorkload/employeeValues(earningAtLeast:asObjects:)``.
    public func employeeValues(earningAtLeast bound: Int64, asObjects: Bool) throws -> Checksum {
        var checksum = Checksum()
        func add(_ lastName: String, _ email: String, _ salary: Int64, _ department: String?) {
            checksum += Checksum(count: 1, sum: salary &+ Int64(lastName.utf8.count + email.utf8.count + (department?.utf8.count ?? 0)))
        }
        if asObjects {
            for employee in try context.fetch(try Arbor.FetchRequest<ManagedObject>(entityName: "Employee", format: "salary >= %@", bound)) {
                add(try employee.value(forKey: "lastName") as? String ?? "", try employee.value(forKey: "email") as? String ?? "",
                    try employee.value(forKey: "salary") as? Int64 ?? 0, try employee.value(forKeyPath: "department.name") as? String)
            }
        } else {
            for value in try context.fetch(try Arbor.FetchRequest<EmployeeValue>(entityName: "Employee", format: "salary >= %@", bound)) {
                add(value.lastName, value.email, value.salary, value.departmentName)
            }
        }
        return checksum
    }

    // MARK: Changes

    /// See ``RelationalWorkload/raiseSalaries(below:)``.
    public func raiseSalaries(below bound: Int64) throws -> Checksum {
        var checksum = Checksum()
        for employee in try context.fetch(try Arbor.FetchRequest<ManagedObject>(entityName: "Employee", format: "salary < %@", bound)) {
            let salary = try employee.value(forKey: "salary") as? Int64 ?? 0
            try employee.setValue(salary + salary / 10, forKey: "salary")
            checksum += Checksum(count: 1, sum: salary + salary / 10)
        }
        try context.save()
        return checksum
    }

    /// See ``RelationalWorkload/batchRaiseSalaries(below:)``.
    public func batchRaiseSalaries(below bound: Int64) throws -> Checksum {
        var raise = BatchUpdateRequest(entityName: "Employee")
        raise.predicate = try ObjectPredicate(format: "salary < %@", bound)
        raise.propertiesToUpdate = ["salary": try ObjectExpression(format: "salary + salary / 10")]
        raise.resultType = .count
        return Checksum(count: Int64(try context.execute(raise).count ?? 0))
    }

    /// See ``RelationalWorkload/batchInsertTimesheets(_:)``.
    public func batchInsertTimesheets(_ count: Int) throws -> Checksum {
        let employees = employeeKeys.map { store.objectID(entityName: "Employee", primaryKey: $0) }
        nonisolated(unsafe) var i = 0
        var request = BatchInsertRequest(entityName: "Timesheet") { values in
            guard i < count else { return true }
            values["week"] = Int16(60)
            values["hours"] = Int16(i % 8)
            values["employee"] = employees[i % employees.count]
            i += 1
            return false
        }
        request.resultType = .count
        let inserted = try context.execute(request).count ?? 0
        return Checksum(count: Int64(inserted), sum: (0..<inserted).reduce(Int64(0)) { $0 + Int64($1 % 8) })
    }

    /// See ``RelationalWorkload/smallSave(employee:)``.
    public func smallSave(employee i: Int) throws {
        let employee = try context.existingObject(with: store.objectID(entityName: "Employee", primaryKey: employeeKeys[i]))
        try employee.setValue((try employee.value(forKey: "salary") as? Int64 ?? 0) + 1, forKey: "salary")
        let timesheet = insert("Timesheet")
        try timesheet.setValue(Int16(52), forKey: "week")
        try timesheet.setValue(Int16(1), forKey: "hours")
        try timesheet.setValue(employee, forKey: "employee")
        try context.save()
    }

    /// See ``RelationalWorkload/deleteDepartments(_:)``: the departments fetched by name, each
    /// deleted (the delete rules cascade), one save.
    public func deleteDepartments(_ departments: [Int]) throws -> Checksum {
        let names = departments.map { shape.departmentName($0) }
        var checksum = Checksum()
        for department in try context.fetch(try Arbor.FetchRequest<ManagedObject>(entityName: "Department", format: "name IN %@", names)) {
            checksum += Checksum(count: 1, sum: RelationalShape.departmentNumber(try department.value(forKey: "name") as? String ?? "") + 1)
            context.delete(department)
        }
        try context.save()
        return checksum
    }

    /// See ``RelationalWorkload/batchDeleteDepartments(_:)``: the departments' names read (for
    /// the checksum, as GRDB reads its rows), then one `BatchDeleteRequest` with the same
    /// predicate.
    public func batchDeleteDepartments(_ departments: [Int]) throws -> Checksum {
        let names = departments.map { shape.departmentName($0) }
        let request = try Arbor.FetchRequest<ManagedObject>(entityName: "Department", format: "name IN %@", names)
        var checksum = Checksum()
        for department in try context.fetch(request) {
            checksum += Checksum(count: 1, sum: RelationalShape.departmentNumber(try department.value(forKey: "name") as? String ?? "") + 1)
        }
        _ = try context.execute(BatchDeleteRequest(fetchRequest: request))
        return checksum
    }

    /// See ``RelationalWorkload/reopen()``: a new coordinator on the same file (the old one,
    /// its contexts and its store are let go first, which closes the file).
    public func reopen() throws {
        close()
        coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        store = try coordinator.addNativeStore(at: directory.path + "/" + databaseFileName, options: CacheBudget.arborOptions, history: Self.history)
        context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    }

    /// See ``RelationalWorkload/keyedFetch(employee:)``: `existingObject(with:)`.
    public func keyedFetch(employee i: Int) throws -> Checksum {
        let employee = try context.existingObject(with: store.objectID(entityName: "Employee", primaryKey: employeeKeys[i]))
        return Checksum(count: 1, sum: try employee.value(forKey: "salary") as? Int64 ?? 0)
    }

    /// See ``RelationalWorkload/close()``: the context, the coordinator and the store let go.
    public func close() {
        context = ManagedObjectContext(persistentStoreCoordinator: nil)
        store = nil
        coordinator = nil
    }
}
