import Foundation
import Testing
@testable import Arbor

final class Department: ManagedObject {
    @Managed("name") var name: String?
    @Managed("budget") var budget: Int32?
    @ManagedSet("employees") var employees: Set<Employee>
}

final class Employee: ManagedObject {
    @Managed("firstName") var firstName: String?
    @Managed("lastName") var lastName: String?
    @Managed("salary") var salary: Decimal?
    @Managed("department") var department: Department?
    @Managed("manager") var manager: Employee?
    @ManagedList("reports") var reports: [Employee]
}

func typedModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Department", class: Department.self) {
            Attribute("name", .string).required()
            Attribute("budget", .integer32)
            Relationship("employees", to: "Employee", inverse: "department").toMany().deleteRule(.cascade)
        }
        Entity("Employee", class: Employee.self) {
            Attribute("firstName", .string).required()
            Attribute("lastName", .string).required()
            Attribute("salary", .decimal).defaultValue(Decimal(100))
            Relationship("department", to: "Department", inverse: "employees")
            Relationship("manager", to: "Employee", inverse: "reports")
            Relationship("reports", to: "Employee", inverse: "manager").toMany(ordered: true)
        }
    }
}

/// A subclass whose insert validation changes the graph: it records an audit entry, and
/// deletes a scratch object it was given.
final class Audited: ManagedObject {
    @Managed("name") var name: String?
    nonisolated(unsafe) var scratch: ManagedObject?
    override func validateForInsert() throws {
        try super.validateForInsert()
        guard let context = managedObjectContext, let entity = context.persistentStoreCoordinator?.managedObjectModel.entity(named: "Entry") else { return }
        let entry = ManagedObject(entity: entity, insertInto: context)
        try entry.setValue("validated \(name ?? "?")", forKey: "text")
        if let scratch { context.delete(scratch) }
    }
}

/// A subclass with save-time checks of its own, on top of the model's.
final class Budget: ManagedObject {
    @Managed("amount") var amount: Int32?
    override func validateForInsert() throws {
        try super.validateForInsert()
        if let amount, amount % 2 != 0 { throw ArborError(.managedObjectValidation, "budgets are even", key: "amount", objectID: objectID) }
    }
    override func validateForDelete() throws {
        try super.validateForDelete()
        if amount != 0 { throw ArborError(.managedObjectValidation, "only an empty budget can be deleted", objectID: objectID) }
    }
}

/// A subclass whose fault initializer looks at its context (made while a fetch or a lookup
/// registers it).
final class Note: ManagedObject {
    @Managed("text") var text: String?
    private(set) var registeredWhenMade = -1

    required init(fault objectID: ManagedObjectID, entity: EntityDescription, context: ManagedObjectContext) {
        super.init(fault: objectID, entity: entity, context: context)
        registeredWhenMade = context.registeredObjects.count
        _ = context.registeredObject(for: objectID)
    }

    required init(entity: EntityDescription, insertInto context: ManagedObjectContext?) {
        super.init(entity: entity, insertInto: context)
    }
}

@Suite("Typed subclasses")
struct TypedObjectTests {
    @Test("a subclass's fault initializer may use its context (the registry is not being changed while it runs)")
    func faultInitializerUsesContext() throws {
        let model = try ManagedObjectModel {
            Entity("Note", class: Note.self) { Attribute("text", .string) }
        }
        let stack = try Stack(model: model)
        let writer = stack.context()
        for text in ["a", "b", "c"] { Note(context: writer).text = text }
        try writer.save()
        let reader = stack.context()
        let notes = try reader.fetch(FetchRequest<Note>(entityName: "Note"))
        #expect(notes.count == 3 && notes.allSatisfy { $0.registeredWhenMade >= 0 })
        let again = reader.object(with: notes[0].objectID)
        #expect(again === notes[0])
        let other = stack.context()
        #expect((other.object(with: notes[1].objectID) as? Note)?.text == "b")
    }

    @Test("property wrappers read and write through key-value coding, with inverses; faults are instances of the entity's class")
    func typedAccess() throws {
        let stack = try Stack(model: try typedModel())
        let context = stack.context()
        let sales = Department(context: context)
        sales.name = "Sales"
        sales.budget = 12
        let ada = Employee(context: context)
        ada.firstName = "Ada"
        ada.lastName = "Lovelace"
        #expect(ada.salary == 100, "defaults")
        ada.department = sales
        #expect(sales.employees == [ada], "the inverse follows")
        let grace = Employee(context: context)
        grace.firstName = "Grace"
        grace.lastName = "Hopper"
        sales.employees.insert(grace)
        #expect(grace.department === sales)
        ada.reports = [grace]
        #expect(grace.manager === ada)
        #expect(try ada.value(forKey: "firstName") as? String == "Ada", "the same state as key-value coding")
        try context.save()

        let other = stack.context()
        let fault = other.object(with: sales.objectID)
        let department = try #require(fault as? Department)
        #expect(department.isFault && department.name == "Sales" && department.budget == 12)
        let names = Set(department.employees.compactMap(\.firstName))
        #expect(names == ["Ada", "Grace"])
        let adaAgain = try #require(department.employees.first { $0.firstName == "Ada" })
        #expect(adaAgain.reports.map(\.firstName) == ["Grace"])
        adaAgain.department = nil
        #expect(!department.employees.contains(adaAgain))
        try other.save()
    }

    @Test("S000-32/S000-31: EntityDescription.insertNewObject(forEntityName:into:) returns an instance of the entity's class, registered with a temporary ID and inserted, with its defaults; saved by the next save")
    func insertNewObjectByName() throws {
        let stack = try Stack(model: try typedModel())
        let context = stack.context()
        let object = try EntityDescription.insertNewObject(forEntityName: "Employee", into: context)
        let employee = try #require(object as? Employee, "an instance of the entity's class: \(type(of: object))")
        #expect(employee.entity.name == "Employee" && employee.objectID.isTemporaryID && employee.isInserted)
        #expect(context.insertedObjects.contains(employee) && context.registeredObject(for: employee.objectID) === employee)
        #expect(employee.salary == 100, "the attribute's default value")
        employee.firstName = "Ada"
        employee.lastName = "Lovelace"
        try context.save()
        #expect(!employee.objectID.isTemporaryID && context.insertedObjects.isEmpty)
        let other = stack.context()
        #expect((other.object(with: employee.objectID) as? Employee)?.firstName == "Ada")

        // An entity declared without a class: a plain ManagedObject.
        let plain = try Stack(model: try ManagedObjectModel { Entity("Tag") { Attribute("name", .string) } })
        let tag = try EntityDescription.insertNewObject(forEntityName: "Tag", into: plain.context())
        #expect(type(of: tag) == ManagedObject.self && tag.isInserted)
    }

    @Test("insertNewObject(forEntityName:into:) throws for a name the model does not have, an abstract entity or a context without a coordinator (Core Data raises), and inserts nothing")
    func insertNewObjectRefusals() throws {
        let model = try ManagedObjectModel {
            Entity("Person", abstract: true) { Attribute("name", .string) }
            Entity("Author", parent: "Person") { Attribute("born", .date) }
        }
        let stack = try Stack(model: model)
        let context = stack.context()
        let unknown = try #require(throws: ArborError.self) { try EntityDescription.insertNewObject(forEntityName: "Book", into: context) }
        #expect(unknown.code == .unknownEntity && unknown.entityName == "Book")
        #expect(unknown.message.contains("no entity Book") && unknown.message.contains("Author, Person"), "\(unknown.message)")
        let abstract = try #require(throws: ArborError.self) { try EntityDescription.insertNewObject(forEntityName: "Person", into: context) }
        #expect(abstract.code == .abstractEntity)
        #expect(context.insertedObjects.isEmpty && context.registeredObjects.isEmpty)
        let author = try EntityDescription.insertNewObject(forEntityName: "Author", into: context)
        #expect(author.entity.superentity?.name == "Person")

        let detached = ManagedObjectContext()
        let misuse = try #require(throws: ArborError.self) { try EntityDescription.insertNewObject(forEntityName: "Author", into: detached) }
        #expect(misuse.code == .misuse)
    }

    @Test("S002-08: what a validation method inserts or deletes is not lost: it stays pending, and the next save writes it")
    func changesMadeDuringValidation() throws {
        let model = try ManagedObjectModel {
            Entity("Audited", class: Audited.self) { Attribute("name", .string) }
            Entity("Entry") { Attribute("text", .string) }
        }
        let stack = try Stack(model: model)
        let context = stack.context()
        let scratch = try stack.insert("Entry", in: context, ["text": "scratch"])
        try context.save()
        let audited = Audited(context: context)
        audited.name = "A"
        audited.scratch = scratch
        try context.save()
        // The save wrote the audited object; the entry and the deletion its validation made wait.
        #expect(!audited.isInserted && !audited.objectID.isTemporaryID)
        #expect(context.hasChanges)
        let entry = try #require(context.insertedObjects.first)
        #expect(try entry.value(forKey: "text") as? String == "validated A")
        #expect(context.deletedObjects.contains(scratch))
        try context.save()
        #expect(!context.hasChanges)
        let reader = stack.context()
        #expect(try reader.fetch(FetchRequest<ManagedObject>(entityName: "Entry")).compactMap { try $0.value(forKey: "text") as? String } == ["validated A"])
    }

    @Test("a subclass overrides validateForInsert and validateForDelete; save reports its errors and keeps the changes")
    func overriddenValidation() throws {
        let model = try ManagedObjectModel {
            Entity("Budget", class: Budget.self) { Attribute("amount", .integer32).required() }
        }
        let stack = try Stack(model: model)
        let context = stack.context()
        let budget = Budget(context: context)
        budget.amount = 3
        #expect(throws: ArborError.self) { try context.save() }
        do {
            try context.save()
        } catch let error as ArborError {
            #expect(error.code == .managedObjectValidation && error.key == "amount")
        }
        #expect(context.insertedObjects.contains(budget), "a failed save changes nothing")
        budget.amount = 4
        try context.save()
        context.delete(budget)
        do {
            try context.save()
            Issue.record("a budget with money in it was deleted")
        } catch let error as ArborError {
            #expect(error.code == .managedObjectValidation && error.message.contains("empty budget"))
        }
        #expect(context.deletedObjects.contains(budget))
        context.rollback()
        budget.amount = 0
        context.delete(budget)
        try context.save()
        #expect(throws: ArborError.self) { try stack.context().existingObject(with: budget.objectID) }
    }
}
