import Foundation
import Testing
import Arbor

// The Arbor side of docs/porting-from-core-data.md's example (classes renamed apart from other
// tests'), so that a change that breaks the guide fails the suite.
// Arbor

final class PortingDepartment: ManagedObject {
    @Managed("name") var name: String
    @ManagedSet("employees") var employees: Set<PortingEmployee>
}

final class PortingEmployee: ManagedObject {
    @Managed("firstName") var firstName: String
    @Managed("lastName") var lastName: String
    @Managed("salary") var salary: Decimal?
    @Managed("department") var department: PortingDepartment?
    @Managed("manager") var manager: PortingEmployee?
    @ManagedSet("directReports") var directReports: Set<PortingEmployee>
}

@Suite("Porting guide example")
struct PortingGuideExampleTests {
    @Test("the porting guide's Arbor example compiles and runs")
    func example() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/employees.arbor"
        // Arbor
        let model = try ManagedObjectModel {
            Entity("Department", class: PortingDepartment.self) {
                Attribute("name", .string).required()
                Relationship("employees", to: "Employee", inverse: "department").toMany().deleteRule(.cascade)
            }
            Entity("Employee", class: PortingEmployee.self) {
                Attribute("firstName", .string).required()
                Attribute("lastName", .string).required()
                Attribute("salary", .decimal).minimum(Decimal(0))        // 002: a salary cannot be negative
                Relationship("department", to: "Department", inverse: "employees")
                Relationship("manager", to: "Employee", inverse: "directReports")
                Relationship("directReports", to: "Employee", inverse: "manager").toMany()
            }
        }

        // Arbor
        let container = PersistentContainer(name: "Employees", managedObjectModel: model)
        container.persistentStoreDescriptions = [PersistentStoreDescription(url: URL(fileURLWithPath: path))]
        try container.loadPersistentStores()
        // viewContext.automaticallyMergesChangesFromParent is already true

        // Arbor
        let ids = try await container.performBackgroundTask { context in
            let engineering = PortingDepartment(context: context)
            engineering.name = "Engineering"
            let sales = PortingDepartment(context: context)
            sales.name = "Sales"
            func hire(_ first: String, _ last: String, _ salary: Decimal, _ department: PortingDepartment) -> PortingEmployee {
                let employee = PortingEmployee(context: context)
                employee.firstName = first
                employee.lastName = last
                employee.salary = salary
                employee.department = department        // department.employees now holds the employee
                return employee
            }
            let ada = hire("Ada", "Lovelace", 120_000, engineering)
            let grace = hire("Grace", "Hopper", 130_000, engineering)
            let alan = hire("Alan", "Turing", 110_000, sales)
            ada.manager = grace                         // grace.directReports == [ada]
            try context.save()                          // one transaction; the IDs become permanent
            return (engineering: engineering.objectID, ada: ada.objectID, grace: grace.objectID, alan: alan.objectID)
        }

        // Arbor
        let view = container.viewContext
        let (names, managerName, payroll) = try await view.perform {
            var request = FetchRequest<PortingEmployee>()
            request.predicate = try ObjectPredicate(format: "department.name == %@ AND salary > %@",
                                                    "Engineering", Decimal(100_000))
            request.sortDescriptors = [ObjectSortDescriptor(key: "lastName", ascending: true)]
            let names = try view.fetch(request).map(\.lastName)                     // ["Hopper", "Lovelace"]
            let ada = try view.existingObject(with: ids.ada) as! PortingEmployee
            let managerName = try ada.value(forKeyPath: "manager.lastName") as? String                 // "Hopper"
            let payroll = try ada.value(forKeyPath: "department.employees.@sum.salary") as? Decimal     // 250000
            return (names, managerName, payroll)
        }

        // Arbor
        try await view.perform {
            let engineering = view.object(with: ids.engineering) as! PortingDepartment
            let staff = try engineering.mutableSetValue(forKey: "employees")
            try staff.insert(view.object(with: ids.alan))     // Alan leaves Sales: both inverses follow
            try staff.remove(view.object(with: ids.grace))    // grace.department is nil
            try view.save()
        }

        // Arbor
        let restored = await view.perform {
            view.undoManager = ObjectUndoManager()           // none by default anywhere
            let grace = view.object(with: ids.grace) as! PortingEmployee
            grace.salary = 140_000
            view.processPendingChanges()                     // ends the event: one undo step
            view.undo()                                      // grace is unchanged again: not in updatedObjects
            return grace.salary                              // 130000
        }

        // Arbor
        let remaining = try await view.perform {
            view.delete(view.object(with: ids.engineering))
            view.processPendingChanges()                      // the cascade deletes Ada and Alan;
                                                              // Ada leaves Grace's directReports (nullify)
            try view.save()
            return try view.count(for: FetchRequest<PortingEmployee>())   // 1: Grace
        }

        // What the guide's comments say.
        #expect(names == ["Hopper", "Lovelace"])
        #expect(managerName == "Hopper")
        #expect(payroll == 250_000)
        #expect(restored == 130_000)
        #expect(remaining == 1)
    }
}
