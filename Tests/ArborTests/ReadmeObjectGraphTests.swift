import Foundation
import Testing
import Arbor

// The README's object-graph example (classes renamed to keep them apart from other tests'),
// so that a change that breaks it fails the suite.

final class ReadmeDepartment: ManagedObject {
    @Managed("name") var name: String                     // required: non-optional
    @ManagedSet("employees") var employees: Set<ReadmeEmployee>
}

final class ReadmeEmployee: ManagedObject {
    @Managed("firstName") var firstName: String
    @Managed("lastName") var lastName: String
    @Managed("salary") var salary: Decimal?               // optional, with a default
    @Managed("department") var department: ReadmeDepartment?
}


@Suite("README object-graph example")
struct ReadmeObjectGraphTests {
    @Test("the README's object-graph example runs and prints what the README says")
    func example() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-readme-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/employees.arbor"
        var printed: [String] = []
        let model = try ManagedObjectModel {
            Entity("Department", class: ReadmeDepartment.self) {
                Attribute("name", .string).required()
                Relationship("employees", to: "Employee", inverse: "department").toMany().deleteRule(.cascade)
                Unique("name")
            }
            Entity("Employee", class: ReadmeEmployee.self) {
                Attribute("firstName", .string).required()
                Attribute("lastName", .string).required()
                Attribute("salary", .decimal).defaultValue(Decimal(50_000)).minimum(Decimal(0))
                Relationship("department", to: "Department", inverse: "employees")
            }
        }
        let container = PersistentContainer(name: "Employees", managedObjectModel: model)
        container.persistentStoreDescriptions = [PersistentStoreDescription(url: URL(fileURLWithPath: path))]
        try container.loadPersistentStores()

        let id = try await container.performBackgroundTask { context in
            let engineering = ReadmeDepartment(context: context)
            engineering.name = "Engineering"
            let ada = ReadmeEmployee(context: context)
            ada.firstName = "Ada"
            ada.lastName = "Lovelace"
            ada.department = engineering
            try context.save()
            return engineering.objectID
        }

        let view = container.viewContext
        let lines = try await view.perform {
            let fault = view.object(with: id) as! ReadmeDepartment
            return ["\(fault.name) \(fault.employees.map(\.lastName))",
                    "\(try fault.value(forKeyPath: "employees.@sum.salary") ?? 0)"]
        }
        printed = lines
        #expect(printed == ["Engineering [\"Lovelace\"]", "50000"])
    }
}
