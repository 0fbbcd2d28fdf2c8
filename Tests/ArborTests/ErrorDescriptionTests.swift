import ArborStore
import Foundation
import Testing
@testable import Arbor

/// Issue 25, item 5: errors say what failed where Swift users look for it.
@Suite("Error descriptions")
struct ErrorDescriptionTests {
    @Test("localizedDescription is the message (it was 'The operation could not be completed. (Arbor.ArborError error 1.)'); description keeps the code and number")
    func localizedDescriptions() throws {
        let error = ArborError(.wrongValueType, "Book.price holds Decimal values; Double given (3.5)", entity: "Book", key: "price")
        #expect(error.localizedDescription == "Book.price holds Decimal values; Double given (3.5)")
        #expect((error as any Error).localizedDescription == error.message)
        #expect(error.description == "wrongValueType (134000): Book.price holds Decimal values; Double given (3.5)")
        let store = StoreError(.busy, "the database is locked by another connection", path: "/tmp/x.arbor")
        #expect((store as any Error).localizedDescription == "the database is locked by another connection [/tmp/x.arbor]")
        let wrapped = ArborError(.storeSave, "could not save to /tmp/x.arbor: the database is locked", storeError: store)
        #expect(wrapped.failureReason == store.description)
        // From a real failure: a save's validation error.
        let stack = try Stack()
        let context = stack.context()
        _ = try stack.insert("Department", in: context, [:])
        do {
            try context.save()
            Issue.record("saved a department without its required name")
        } catch {
            #expect(error.localizedDescription.contains("Department.name is required"))
        }
    }

    @Test("a deny-rule error names the first three denying objects and the count, not every URI")
    func denyListsAFew() throws {
        let stack = try Stack(model: try employeeModel(departmentDeleteRule: .deny))
        let context = stack.context()
        let department = try stack.insert("Department", in: context, ["name": "Research"])
        for index in 0..<100 {
            let employee = try stack.insert("Employee", in: context, ["firstName": "E\(index)", "lastName": "Worker"])
            try employee.setValue(department, forKey: "department")
        }
        try context.save()
        context.delete(department)
        let error = try #require(throws: ArborError.self) { try context.save() }
        #expect(error.code == .validationRelationshipDeniedDelete)
        #expect(error.message.contains("and 97 more objects (100 in all)"))
        #expect(error.message.components(separatedBy: "x-arbor://").count - 1 == 4, "the department and three employees")
    }
}
