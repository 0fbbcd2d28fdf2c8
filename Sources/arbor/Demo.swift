import ArgumentParser
import Arbor
import Foundation

/// The seeds' Employee/Department example as typed subclasses.
final class DemoDepartment: ManagedObject {
    @Managed("name") var name: String?
    @ManagedSet("employees") var employees: Set<DemoEmployee>
}

final class DemoEmployee: ManagedObject {
    @Managed("firstName") var firstName: String?
    @Managed("lastName") var lastName: String?
    @Managed("salary") var salary: Decimal?
    @Managed("department") var department: DemoDepartment?
    @Managed("manager") var manager: DemoEmployee?
    @ManagedSet("reports") var reports: Set<DemoEmployee>

    var fullName: String { "\(firstName ?? "?") \(lastName ?? "?")" }
}

/// The model of the demonstration (and of the README's example).
func demoModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Department", class: DemoDepartment.self) {
            Attribute("name", .string).required().length(1...60)
            Relationship("employees", to: "Employee", inverse: "department").toMany().deleteRule(.cascade)
            Unique("name")
        }
        Entity("Employee", class: DemoEmployee.self) {
            Attribute("firstName", .string).required()
            Attribute("lastName", .string).required()
            Attribute("salary", .decimal).defaultValue(Decimal(50_000)).minimum(Decimal(0))
            Relationship("department", to: "Department", inverse: "employees")
            Relationship("manager", to: "Employee", inverse: "reports")
            Relationship("reports", to: "Employee", inverse: "manager").toMany()
            Indexed("lastName", caseInsensitive: true)
        }
    }
}

struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Walk through the object graph on a store file: the seeds' Employee/Department example.",
        discussion: """
            Builds the model, inserts and saves departments and employees, reads them back in a new \
            context (faults, uniquing), moves an employee between departments, cascade-deletes a \
            department, and shows a validation failure, printing each step. The store file stays \
            for `arbor info`, `arbor model`, `arbor query` and `arbor check`.
            """
    )

    @Argument(help: "The store file (created or replaced).")
    var file = "employees.arbor"

    @Option(help: .hidden)
    var moreEmployees = 0

    func run() throws {
        try reportingErrors {
            try demonstrate()
            if moreEmployees > 0 { try hireMany(moreEmployees) }
        }
    }

    /// `--more-employees N` (hidden): N more employees in Engineering, for measuring `arbor
    /// query` on a big store (docs/performance.md). Saved 10,000 at a time, each batch in a
    /// fresh context.
    func hireMany(_ count: Int) throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try demoModel())
        try coordinator.addNativeStore(at: file)
        let department = try ManagedObjectContext(persistentStoreCoordinator: coordinator)
            .fetch(FetchRequest<DemoDepartment>(entityName: "Department", format: "name == 'Engineering'"))[0].objectID
        var hired = 0
        while hired < count {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            let engineering = context.object(with: department) as! DemoDepartment
            for _ in 0..<min(10_000, count - hired) {
                let employee = DemoEmployee(context: context)
                employee.firstName = "Employee"
                employee.lastName = "Number \(hired)"
                employee.salary = Decimal(40_000 + hired % 100_000)
                employee.department = engineering
                hired += 1
            }
            try context.save()
        }
        print("\nhired \(count) more employees")
    }

    func step(_ title: String) { print("\n== \(title)") }

    func demonstrate() throws {
        // Long: a script: the demonstration's steps in the order `arbor demo` prints them, a few
        // lines under each `step` title, reading the objects earlier steps made.
        for suffix in ["", "-journal"] { try? FileManager.default.removeItem(atPath: file + suffix) }
        let model = try demoModel()
        step("The model (version hash \(model.versionHashString))")
        print(model)

        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let native = try coordinator.addNativeStore(at: file)
        step("A native store at \(file) (identifier \(native.identifier))")

        step("Insert two departments and four employees, then save")
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let engineering = DemoDepartment(context: context)
        engineering.name = "Engineering"
        let sales = DemoDepartment(context: context)
        sales.name = "Sales"
        func hire(_ first: String, _ last: String, _ salary: Int, _ department: DemoDepartment) -> DemoEmployee {
            let employee = DemoEmployee(context: context)
            employee.firstName = first
            employee.lastName = last
            employee.salary = Decimal(salary)
            employee.department = department
            return employee
        }
        let ada = hire("Ada", "Lovelace", 120_000, engineering)
        let grace = hire("Grace", "Hopper", 130_000, engineering)
        let alan = hire("Alan", "Turing", 110_000, sales)
        let katherine = hire("Katherine", "Johnson", 95_000, sales)
        grace.reports = [ada]
        print("before saving: \(context.insertedObjects.count) inserted objects; Ada's ID is temporary: \(ada.objectID.isTemporaryID)")
        try context.save()
        print("saved: Ada is now \(ada.objectID.uriRepresentation())")
        let ids = (ada: ada.objectID, grace: grace.objectID, alan: alan.objectID, katherine: katherine.objectID,
                   engineering: engineering.objectID, sales: sales.objectID)

        step("Read back in a new context: faults, fired when used")
        let reader = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let department = reader.object(with: ids.engineering) as! DemoDepartment
        print("Engineering is a fault: \(department.isFault)")
        print("its name: \(department.name ?? "?") (now a fault: \(department.isFault))")
        let staff = department.employees.sorted { ($0.lastName ?? "") < ($1.lastName ?? "") }
        print("its employees: \(staff.map(\.fullName).joined(separator: ", "))")
        print("payroll: \(try department.value(forKeyPath: "employees.@sum.salary") ?? 0)")
        let gracesReports = (reader.object(with: ids.grace) as! DemoEmployee).reports.map(\.fullName)
        print("Grace manages: \(gracesReports.joined(separator: ", "))")

        step("Fetch: employees earning over 100 000, by last name (the store plans with its indexes)")
        var wellPaid = FetchRequest<DemoEmployee>()
        wellPaid.predicate = try ObjectPredicate(format: "salary > %@", Decimal(100_000))
        wellPaid.sortDescriptors = [ObjectSortDescriptor(key: "lastName")]
        print(try reader.fetch(wellPaid).map { "\($0.fullName) (\($0.salary ?? 0))" }.joined(separator: ", "))
        var byName = FetchRequest<DemoEmployee>()
        byName.predicate = try ObjectPredicate(format: "lastName BEGINSWITH[cd] %@", "LOVE")
        print("lastName BEGINSWITH[cd] \"LOVE\": \(try reader.fetch(byName).map(\.fullName))")
        print(try byName.explain(in: reader))
        print("employees per department: \(try reader.count(for: FetchRequest<DemoEmployee>(entityName: "Employee", format: "department.name == 'Engineering'"))) in Engineering")

        step("Uniquing: one instance per object ID in a context, another in each other context")
        let once = reader.object(with: ids.ada), twice = reader.object(with: ids.ada)
        print("same instance in the reader: \(once === twice); the first context's Ada is another instance: \(once !== ada)")

        step("Move Alan from Sales to Engineering: the inverse follows")
        let alanHere = reader.object(with: ids.alan) as! DemoEmployee
        let salesHere = reader.object(with: ids.sales) as! DemoDepartment
        alanHere.department = department
        print("Sales: \(salesHere.employees.map(\.fullName).sorted()); Engineering: \(department.employees.map(\.fullName).sorted())")
        try reader.save()
        print("saved (updated objects are versioned: optimistic locking compares versions)")

        step("Delete Sales: the cascade rule deletes its employees")
        reader.delete(salesHere)
        reader.processPendingChanges()
        print("deleted objects: \(reader.deletedObjects.compactMap { ($0 as? DemoEmployee)?.fullName ?? ($0 as? DemoDepartment)?.name }.sorted())")
        try reader.save()
        let check = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        do {
            _ = try check.existingObject(with: ids.katherine)
            print("Katherine is still there (unexpected)")
        } catch let error as ArborError {
            print("Katherine's row is gone: \(error.code)")
        }

        step("A validation failure: every problem is reported, nothing is saved")
        let intern = DemoEmployee(context: check)
        intern.firstName = "Nameless"
        intern.salary = -1
        do {
            try check.save()
        } catch let error as ArborError {
            print("save failed: \(error.code)")
            for detail in error.detailedErrors { print("  - \(detail.message) [\(detail.code)]") }
        }
        check.rollback()
        print("rolled back: \(check.hasChanges ? "changes remain" : "no changes left")")

        let cache = coordinator.rowCacheStatistics
        step("Row cache: \(cache.snapshots) snapshots held, \(cache.hits) hits, \(cache.misses) misses")
        print("\nThe store stays at \(file): try `arbor info \(file)`, `arbor model \(file)` and `arbor check \(file)`.")
    }
}
