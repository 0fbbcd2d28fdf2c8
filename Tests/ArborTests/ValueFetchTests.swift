import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// Fetches of `Decodable` values (issue 26, item 5): rows decoded by coding key into plain
/// values — attributes, to-one key paths, nested to-one values, to-many lists — without managed
/// objects when the rows answer the request, with the typed accessors' conversion rules, and
/// typed errors for everything that does not fit.
@Suite("Value fetches")
struct ValueFetchTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Department") {
                Attribute("name", .string).required()
                Attribute("budget", .integer32)
                Attribute("tier", .string)
                Relationship("employees", to: "Employee", inverse: "department").toMany()
            }
            Entity("Employee") {
                Attribute("lastName", .string).required()
                Attribute("salary", .integer64)
                Attribute("rating", .double)
                Attribute("startDate", .date)
                Attribute("badge", .uuid)
                Relationship("department", to: "Department", inverse: "employees")
                Relationship("manager", to: "Employee", inverse: "reports")
                Relationship("reports", to: "Employee", inverse: "manager").toMany(ordered: true)
                Indexed("salary")
            }
        }
    }

    struct EmployeeRow: Decodable, Sendable, Equatable {
        let lastName: String
        let salary: Int?
        let rating: Double?
        let startDate: Date?
        let badge: UUID?
        let departmentName: String?
        let managerDepartmentName: String?

        enum CodingKeys: String, CodingKey {
            case lastName, salary, rating, startDate, badge
            case departmentName = "department.name"
            case managerDepartmentName = "manager.department.name"
        }
    }

    enum Tier: String, Decodable, Sendable { case gold, silver }

    struct DepartmentRow: Decodable, Sendable, Equatable {
        let name: String
        let budget: Int32?
        let tier: Tier?
    }

    struct EmployeeWithDepartment: Decodable, Sendable {
        let lastName: String
        let department: DepartmentRow?
        let managerName: String?
        enum CodingKeys: String, CodingKey { case lastName, department, managerName = "manager.lastName" }
    }

    struct DepartmentWithStaff: Decodable, Sendable {
        struct Member: Decodable, Sendable { let lastName: String }
        let name: String
        let employees: [Member]
    }

    /// Three departments, 40 employees with managers and some nils.
    static func fill(_ context: ManagedObjectContext, model: ManagedObjectModel) throws -> [ManagedObject] {
        let departments = try (0..<3).map { index in
            let department = ManagedObject(entity: try #require(model.entity(named: "Department")), insertInto: context)
            try department.setValue("D\(index)", forKey: "name")
            if index != 2 { try department.setValue(Int32(1000 * (index + 1)), forKey: "budget") }
            if index == 0 { try department.setValue("gold", forKey: "tier") }
            return department
        }
        var employees: [ManagedObject] = []
        for index in 0..<40 {
            let employee = ManagedObject(entity: try #require(model.entity(named: "Employee")), insertInto: context)
            try employee.setValue("Name\(index)", forKey: "lastName")
            if index % 7 != 3 { try employee.setValue(Int64(index * 100), forKey: "salary") }
            if index % 2 == 0 { try employee.setValue(Double(index) / 4, forKey: "rating") }
            try employee.setValue(Date(timeIntervalSinceReferenceDate: Double(index) * 86_400), forKey: "startDate")
            if index % 3 == 0 { try employee.setValue(UUID(), forKey: "badge") }
            if index % 9 != 8 { try employee.setValue(departments[index % 3], forKey: "department") }
            if index >= 5 { try employee.setValue(employees[index % 5], forKey: "manager") }
            employees.append(employee)
        }
        try context.save()
        return employees
    }

    /// What the objects say, for comparison.
    static func expected(_ employee: ManagedObject) throws -> EmployeeRow {
        let department = try employee.value(forKey: "department") as? ManagedObject
        let manager = try employee.value(forKey: "manager") as? ManagedObject
        let managerDepartment = try manager?.value(forKey: "department") as? ManagedObject
        return EmployeeRow(lastName: try #require(employee.value(forKey: "lastName") as? String),
                           salary: (try employee.value(forKey: "salary") as? Int64).map(Int.init),
                           rating: try employee.value(forKey: "rating") as? Double,
                           startDate: try employee.value(forKey: "startDate") as? Date,
                           badge: try employee.value(forKey: "badge") as? UUID,
                           departmentName: try department?.value(forKey: "name") as? String,
                           managerDepartmentName: try managerDepartment?.value(forKey: "name") as? String)
    }

    @Test("rows decode into values equal to what the objects hold, through to-one key paths, with the request's predicate, order and window, and no object is made")
    func decodesRows() throws {
        let model = try Self.model()
        let stack = try Stack(model: model)
        _ = try Self.fill(stack.context(), model: model)
        let context = stack.context()
        var request = try FetchRequest<EmployeeRow>(entityName: "Employee", format: "salary >= %@ OR salary == nil", 1000)
        #expect(request.resultType == .values)
        request.sortDescriptors = [ObjectSortDescriptor(key: "lastName", ascending: false)]
        request.fetchOffset = 2
        request.fetchLimit = 25
        let values = try context.fetch(request)
        #expect(context.registeredObjects.isEmpty, "no managed object was made")
        // Nor a snapshot: the row cache holds none of the rows (the objects that saved them are gone).
        let ids = try context.fetch(FetchRequest<ManagedObjectID>(entityName: "Employee"))
        #expect(ids.count == 40 && ids.allSatisfy { stack.coordinator.cachedRow(for: $0) == nil })
        // The same request for objects, in another context.
        let objectContext = stack.context()
        var objectRequest = FetchRequest<ManagedObject>(entityName: "Employee")
        objectRequest.predicate = request.predicate
        objectRequest.sortDescriptors = request.sortDescriptors
        objectRequest.fetchOffset = 2
        objectRequest.fetchLimit = 25
        let objects = try objectContext.fetch(objectRequest)
        #expect(values.count == 25)
        #expect(values == (try objects.map(Self.expected)))
        #expect(values.contains { $0.salary == nil } && values.contains { $0.departmentName == nil } && values.contains { $0.managerDepartmentName != nil })
    }

    @Test("nested to-one values, object IDs, raw-value enums, to-many lists and single values")
    func shapes() throws {
        let model = try Self.model()
        let stack = try Stack(model: model)
        let employees = try Self.fill(stack.context(), model: model)
        let context = stack.context()
        var request = FetchRequest<EmployeeWithDepartment>(entityName: "Employee")
        request.sortDescriptors = [ObjectSortDescriptor(key: "salary")]
        request.predicate = try ObjectPredicate(format: "salary != nil")
        let nested = try context.fetch(request)
        #expect(nested.count == employees.count { (try? $0.value(forKey: "salary")) as? Int64 != nil })
        let first = try #require(nested.first { $0.lastName == "Name0" })
        #expect(first.department == DepartmentRow(name: "D0", budget: 1000, tier: .gold))
        #expect(first.managerName == nil)
        let sixth = try #require(nested.first { $0.lastName == "Name6" })
        #expect(sixth.managerName == "Name1")
        #expect(nested.first { $0.lastName == "Name2" }?.department == DepartmentRow(name: "D2", budget: nil, tier: nil))
        #expect(nested.first { $0.lastName == "Name8" }?.department == nil)

        // To-many relationships as lists.
        var staff = FetchRequest<DepartmentWithStaff>(entityName: "Department")
        staff.sortDescriptors = [ObjectSortDescriptor(key: "name")]
        let departments = try context.fetch(staff)
        #expect(departments.map(\.name) == ["D0", "D1", "D2"])
        for department in departments {
            let index = Int(department.name.dropFirst())!
            let expected = (0..<40).filter { $0 % 3 == index && $0 % 9 != 8 }.map { "Name\($0)" }
            #expect(department.employees.map(\.lastName).sorted() == expected.sorted())
        }
        #expect(context.registeredObjects.isEmpty)

        // One property: single values, in order.
        var names = FetchRequest<String>(entityName: "Employee")
        names.propertiesToFetch = [.key("lastName")]
        names.sortDescriptors = [ObjectSortDescriptor(key: "lastName")]
        names.fetchLimit = 3
        #expect(try context.fetch(names) == ["Name0", "Name1", "Name10"])
        var budgets = FetchRequest<Int?>(entityName: "Department")
        budgets.propertiesToFetch = [.key("budget")]
        budgets.sortDescriptors = [ObjectSortDescriptor(key: "name")]
        #expect(budgets.resultType == .values)
        #expect(try context.fetch(budgets) == [1000, 2000, nil])
        var departmentNames = FetchRequest<String?>(entityName: "Employee")
        departmentNames.propertiesToFetch = [.key("department.name")]
        departmentNames.predicate = try ObjectPredicate(format: "lastName IN {'Name1', 'Name8'}")
        departmentNames.sortDescriptors = [ObjectSortDescriptor(key: "lastName")]
        #expect(try context.fetch(departmentNames) == ["D1", nil])
    }

    @Test("values leave the context's queue: fetched in a background task and returned")
    func crossQueues() async throws {
        let model = try Self.model()
        let container = PersistentContainer(name: "values", managedObjectModel: model)
        container.persistentStoreDescriptions = [PersistentStoreDescription(type: .inMemory)]
        try container.loadPersistentStores()
        try container.viewContext.performAndWait { _ = try Self.fill(container.viewContext, model: model) }
        let rows = try await container.performBackgroundTask { context in
            var request = FetchRequest<EmployeeRow>(entityName: "Employee")
            request.sortDescriptors = [ObjectSortDescriptor(key: "lastName")]
            return try context.fetch(request)
        }
        #expect(rows.count == 40)
        #expect(rows.first?.lastName == "Name0" && rows.first?.departmentName == "D0")
    }

    @Test("unsaved changes count: values are decoded from the context's objects then")
    func pendingChanges() throws {
        let model = try Self.model()
        let stack = try Stack(model: model)
        let context = stack.context()
        let employees = try Self.fill(context, model: model)
        try employees[0].setValue(Int64(123_456), forKey: "salary")
        let department = try #require(employees[0].value(forKey: "department") as? ManagedObject)
        try department.setValue("Renamed", forKey: "name")
        let added = ManagedObject(entity: try #require(model.entity(named: "Employee")), insertInto: context)
        try added.setValue("Zed", forKey: "lastName")
        try added.setValue(Int64(999_999), forKey: "salary")
        let request = try FetchRequest<EmployeeRow>(entityName: "Employee", format: "salary > %@", 100_000)
        let values = try context.fetch(request).sorted { $0.lastName < $1.lastName }
        #expect(values.map(\.lastName) == ["Name0", "Zed"])
        #expect(values[0].salary == 123_456 && values[0].departmentName == "Renamed")
        // Without pending changes counted: the saved rows.
        var saved = request
        saved.includesPendingChanges = false
        #expect(try context.fetch(saved).isEmpty)
    }

    @Test("a value that does not fit is a typed error naming the key: wrong type, too narrow, nil for a non-optional, an unknown key")
    func typedErrors() throws {
        struct SalaryAsString: Decodable { let salary: String }
        struct NarrowSalary: Decodable { let salary: Int8 }
        struct RequiredSalary: Decodable { let salary: Int }
        struct Unknown: Decodable { let nickname: String }
        struct ThroughToMany: Decodable {
            let name: String
            enum CodingKeys: String, CodingKey { case name = "reports.lastName" }
        }
        struct RatingAsFloat: Decodable { let rating: Float }
        let model = try Self.model()
        let stack = try Stack(model: model)
        _ = try Self.fill(stack.context(), model: model)
        let context = stack.context()
        func failure<Value>(_ request: FetchRequest<Value>) -> ArborError? {
            // Any error but an ArborError is recorded as an issue.
            do {
                _ = try context.fetch(request)
                return nil
            } catch {
                guard let error = error as? ArborError else {
                    Issue.record("not an ArborError: \(error)")
                    return nil
                }
                return error
            }
        }
        let wrongType = try #require(failure(try FetchRequest<SalaryAsString>(entityName: "Employee", format: "salary != nil")))
        #expect(wrongType.code == .wrongValueType && wrongType.key == "salary", "\(wrongType)")
        #expect(wrongType.localizedDescription.contains("SalaryAsString"))
        let narrow = try #require(failure(try FetchRequest<NarrowSalary>(entityName: "Employee", format: "salary > 200")))
        #expect(narrow.code == .wrongValueType && narrow.key == "salary", "300 does not fit an Int8: \(narrow)")
        let missing = try #require(failure(try FetchRequest<RequiredSalary>(entityName: "Employee", format: "salary == nil")))
        #expect(missing.code == .wrongValueType && missing.message.contains("nil"), "\(missing)")
        let unknown = try #require(failure(FetchRequest<Unknown>(entityName: "Employee")))
        #expect(unknown.code == .wrongValueType && unknown.key == "nickname", "\(unknown)")
        let toMany = try #require(failure(FetchRequest<ThroughToMany>(entityName: "Employee")))
        #expect(toMany.code == .wrongValueType, "a key path through a to-many is not a value: \(toMany)")
        let float = try #require(failure(try FetchRequest<RatingAsFloat>(entityName: "Employee", format: "rating != nil")))
        #expect(float.code == .wrongValueType, "a double is not narrowed to a Float: \(float)")
        var twoProperties = FetchRequest<String>(entityName: "Employee")
        twoProperties.propertiesToFetch = [.key("lastName"), .key("salary")]
        #expect(failure(twoProperties)?.code == .wrongValueType)
        // A value that fits where it is asked for: an Int8 salary below 128.
        #expect(try context.fetch(try FetchRequest<NarrowSalary>(entityName: "Employee", format: "salary == 100")).map(\.salary) == [100])
    }
}
