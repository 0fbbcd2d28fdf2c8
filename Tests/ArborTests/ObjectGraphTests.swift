import Foundation
import Testing
@testable import Arbor

/// A subclass that records its lifecycle calls.
final class TracedEmployee: ManagedObject {
    var calls: [String] = []
    override func awakeFromInsert() {
        super.awakeFromInsert()
        calls.append("awakeFromInsert")
        try? setValue("Unnamed", forKey: "firstName")
    }
    override func prepareForDeletion() {
        super.prepareForDeletion()
        calls.append("prepareForDeletion")
    }
}

/// Objects of the employee model in a context without a store (what can be checked before the
/// coordinator exists: insertion, values, relationships, deletion rules, validation, rollback).
struct Graph {
    let model: ManagedObjectModel
    let context = ManagedObjectContext()

    init(departmentDeleteRule: DeleteRule = .cascade) throws {
        model = try employeeModel(departmentDeleteRule: departmentDeleteRule)
    }

    func department(_ name: String) throws -> ManagedObject {
        let object = ManagedObject(entity: model.entity(named: "Department")!, insertInto: context)
        try object.setValue(name, forKey: "name")
        return object
    }

    func employee(_ first: String, _ last: String, salary: Decimal = 1000, in department: ManagedObject? = nil) throws -> ManagedObject {
        let object = ManagedObject(entity: model.entity(named: "Employee")!, insertInto: context)
        try object.setValue(first, forKey: "firstName")
        try object.setValue(last, forKey: "lastName")
        try object.setValue(salary, forKey: "salary")
        if let department { try object.setValue(department, forKey: "department") }
        return object
    }
}

func set(_ value: Any?) -> Set<ManagedObject> { value as? Set<ManagedObject> ?? [] }

@Suite("Managed objects and the context")
struct ObjectGraphTests {
    @Test("relationship values by key-value coding: an object, a set, an array or any sequence of objects, NSNull or nil; anything else (a collection for a to-one, a string, other elements, an object of another entity) is wrongValueType and changes nothing")
    func relationshipValueKinds() throws {
        let graph = try Graph()
        let sales = try graph.department("Sales"), support = try graph.department("Support")
        let ada = try graph.employee("Ada", "Lovelace"), alan = try graph.employee("Alan", "Turing")
        try ada.setValue(sales, forKey: "department")
        #expect(try ada.value(forKey: "department") as? ManagedObject === sales)
        try support.setValue(Set([ada, alan]), forKey: "employees")
        #expect(set(try support.value(forKey: "employees")) == [ada, alan])
        #expect(set(try sales.value(forKey: "employees")).isEmpty)
        try sales.setValue([alan], forKey: "employees")
        #expect(set(try sales.value(forKey: "employees")) == [alan])
        try sales.setValue(AnySequence([ada, alan]), forKey: "employees")
        #expect(set(try sales.value(forKey: "employees")) == [ada, alan])
        try alan.setValue([ada], forKey: "reports")
        #expect(try alan.value(forKey: "reports") as? [ManagedObject] == [ada])
        try ada.setValue(NSNull(), forKey: "department")
        #expect(try ada.value(forKey: "department") == nil)
        #expect(set(try sales.value(forKey: "employees")) == [alan])
        func code(_ value: Any?, _ key: String, on object: ManagedObject) -> ArborError.Code? {
            do {
                try object.setValue(value, forKey: key)
                return nil
            } catch let error as ArborError {
                return error.code
            } catch {
                return nil
            }
        }
        #expect(code(Set([sales]), "department", on: ada) == .wrongValueType, "a collection for a to-one")
        #expect(code([sales], "department", on: ada) == .wrongValueType)
        #expect(code("Sales", "department", on: ada) == .wrongValueType, "a string is not a sequence of objects")
        #expect(code("Ada", "employees", on: sales) == .wrongValueType)
        #expect(code([1, 2], "employees", on: sales) == .wrongValueType)
        #expect(code([ada, sales], "employees", on: support) == .wrongValueType, "an object of another entity in an array")
        #expect(code(Set([sales]), "employees", on: support) == .wrongValueType, "and in a set")
        #expect(code(sales, "manager", on: ada) == .wrongValueType, "an object of another entity for a to-one")
        #expect(set(try sales.value(forKey: "employees")) == [alan], "nothing changed")
        #expect(set(try support.value(forKey: "employees")).isEmpty)
    }

    @Test("S000-32/S002-11: an inserted object is registered at once with a temporary ID, takes its defaults and awakes from insert")
    func insertion() throws {
        let graph = try Graph()
        let employee = TracedEmployee(entity: graph.model.entity(named: "Employee")!, insertInto: graph.context)
        #expect(employee.objectID.isTemporaryID)
        #expect(graph.context.registeredObject(for: employee.objectID) === employee)
        #expect(graph.context.insertedObjects == [employee] && graph.context.hasChanges)
        #expect(employee.isInserted && !employee.isUpdated && !employee.isDeleted && !employee.isFault && employee.hasChanges)
        #expect(employee.calls == ["awakeFromInsert"])
        #expect(try employee.value(forKey: "firstName") as? String == "Unnamed", "awakeFromInsert may set initial values")
        #expect(try employee.value(forKey: "salary") as? Decimal == 0, "the default value")
        #expect(try employee.value(forKey: "startDate") == nil)
        #expect(employee.committedValues(forKeys: nil).isEmpty, "a new object has no committed values")
    }

    @Test("S002-02/S002-03: key-value coding reads and writes typed values; a wrong type or key is a typed error and changes nothing")
    func keyValueCoding() throws {
        let graph = try Graph()
        let employee = try graph.employee("Ada", "Lovelace")
        var name = "Grace"
        try employee.setValue(name, forKey: "firstName")
        name += " Hopper"
        #expect(try employee.value(forKey: "firstName") as? String == "Grace", "a value set is a copy")
        do {
            try employee.setValue(12, forKey: "firstName")
            Issue.record("an Int was accepted for a String attribute")
        } catch let error as ArborError {
            #expect(error.code == .wrongValueType && error.key == "firstName" && error.entityName == "Employee")
        }
        #expect(try employee.value(forKey: "firstName") as? String == "Grace")
        #expect(throws: ArborError.self) { try employee.setValue(1, forKey: "nickname") }
        #expect(throws: ArborError.self) { _ = try employee.value(forKey: "nickname") }
        try employee.setValue(NSNull(), forKey: "startDate")
        #expect(try employee.value(forKey: "startDate") == nil)
        try employee.setValue("Ada Lovelace", forKey: "fullName")
        #expect(try employee.value(forKey: "fullName") as? String == "Ada Lovelace", "transient attributes hold values too")
        #expect(Set(employee.changedValues().keys) == ["firstName", "lastName", "salary"], "transient changes are not persistent changes")
    }

    @Test("S002-01: setting either end of a relationship updates the other; moving an employee leaves the old department")
    func inverses() throws {
        let graph = try Graph()
        let sales = try graph.department("Sales"), research = try graph.department("Research")
        let ada = try graph.employee("Ada", "Lovelace", in: sales)
        #expect(set(try sales.value(forKey: "employees")) == [ada])
        try ada.setValue(research, forKey: "department")
        #expect(set(try sales.value(forKey: "employees")).isEmpty)
        #expect(set(try research.value(forKey: "employees")) == [ada])
        // S002-06: replacing a whole to-many relationship sets every inverse.
        let grace = try graph.employee("Grace", "Hopper")
        try sales.setValue(Set([ada, grace]), forKey: "employees")
        #expect(try ada.value(forKey: "department") as? ManagedObject === sales)
        #expect(try grace.value(forKey: "department") as? ManagedObject === sales)
        #expect(set(try research.value(forKey: "employees")).isEmpty)
        try sales.setValue(Set([grace]), forKey: "employees")
        #expect(try ada.value(forKey: "department") == nil)
    }

    @Test("S002-07: a mutable set proxy inserts and removes with inverses kept; an ordered one keeps its order")
    func proxies() throws {
        let graph = try Graph()
        let boss = try graph.employee("Boss", "Person"), a = try graph.employee("Amy", "Aa"), b = try graph.employee("Bob", "Bb")
        let reports = try boss.mutableOrderedSetValue(forKey: "reports")
        try reports.append(b)
        try reports.insert(a, at: 0)
        #expect(try reports.objects == [a, b])
        #expect(try boss.value(forKey: "reports") as? [ManagedObject] == [a, b])
        #expect(try a.value(forKey: "manager") as? ManagedObject === boss)
        try reports.remove(at: 0)
        #expect(try a.value(forKey: "manager") == nil && reports.count == 1)
        let department = try graph.department("Ops")
        let members = try department.mutableSetValue(forKey: "employees")
        try members.insert(a)
        #expect(members.contains(a))
        #expect(try a.value(forKey: "department") as? ManagedObject === department)
        try members.remove(a)
        #expect(try a.value(forKey: "department") == nil)
        #expect(throws: ArborError.self) { try members.insert(department) }
        #expect(throws: ArborError.self) { _ = try a.mutableSetValue(forKey: "department") }
    }

    @Test("relating objects of another entity or another context is a typed error")
    func relationshipChecks() throws {
        let graph = try Graph()
        let other = try Graph()
        let employee = try graph.employee("Ada", "Lovelace")
        #expect(throws: ArborError.self) { try employee.setValue(try graph.employee("X", "Yy"), forKey: "department") }
        #expect(throws: ArborError.self) { try employee.setValue(try other.department("Elsewhere"), forKey: "department") }
        #expect(throws: ArborError.self) { try employee.setValue([employee], forKey: "department") }
        #expect(try employee.value(forKey: "department") == nil)
    }

    @Test("S002-30: key paths follow relationships; collection operators aggregate")
    func keyPaths() throws {
        let graph = try Graph()
        let sales = try graph.department("Sales")
        let ada = try graph.employee("Ada", "Lovelace", salary: 3000, in: sales)
        _ = try graph.employee("Grace", "Hopper", salary: 5000, in: sales)
        _ = try graph.employee("Alan", "Lovelace", salary: 4000, in: sales)
        #expect(try ada.value(forKeyPath: "department.name") as? String == "Sales")
        #expect(try sales.value(forKeyPath: "employees.@count") as? Int == 3)
        #expect(try sales.value(forKeyPath: "employees.@sum.salary") as? Decimal == 12000)
        #expect(try sales.value(forKeyPath: "employees.@avg.salary") as? Decimal == 4000)
        #expect(try sales.value(forKeyPath: "employees.@max.salary") as? Decimal == 5000)
        #expect(try sales.value(forKeyPath: "employees.@min.firstName") as? String == "Ada")
        let lastNames = try sales.value(forKeyPath: "employees.@distinctUnionOfObjects.lastName") as? [Any]
        #expect(Set((lastNames ?? []).compactMap { $0 as? String }) == ["Lovelace", "Hopper"])
        #expect(try ada.value(forKeyPath: "department.employees.@count") as? Int == 3)
        #expect(throws: ArborError.self) { _ = try sales.value(forKeyPath: "employees.@median.salary") }
        // A key after a plain value names nothing: a typed error (it recursed forever before).
        for path in ["firstName.count", "department.name.length", "department.employees.firstName.x"] {
            let error = #expect(throws: ArborError.self, "\(path)") { _ = try ada.value(forKeyPath: path) }
            #expect(error?.code == .unknownKey)
        }
        #expect(try sales.value(forKeyPath: "name.@count") as? Int == 1, "@count of a single value is 1")
    }

    @Test("key paths through to-one hops give what value(forKey:) does key by key — nil on the way, through a to-many, other paths asked in turn on one context, paths built at run time")
    func toOneHops() throws {
        let graph = try Graph()
        let sales = try graph.department("Sales")
        let ada = try graph.employee("Ada", "Lovelace", salary: 3000, in: sales)
        let loner = try graph.employee("Lone", "Wolf")
        // Two paths in turn: the context remembers the last one split, never answers with it
        // for another.
        for round in 0..<3 {
            #expect(try ada.value(forKeyPath: "department.name") as? String == "Sales", "round \(round)")
            #expect(try ada.value(forKeyPath: "department.employees.@count") as? Int == 1, "round \(round)")
            #expect(try ada.value(forKeyPath: ["department", "name"].joined(separator: ".")) as? String == "Sales")
            #expect(try loner.value(forKeyPath: "department.name") == nil)
            #expect(try ada.value(forKeyPath: "firstName") as? String == "Ada")
        }
        // After a nil to-one the path gives nil, as key-value coding does on nil.
        #expect(try loner.value(forKeyPath: "department.employees.@count") == nil)
        #expect(try loner.value(forKeyPath: "department.employees") == nil)
        // A to-many on the way gives the values of its objects, each once.
        let names = try #require(try sales.value(forKeyPath: "employees.department.name") as? [Any])
        #expect(names.compactMap { $0 as? String } == ["Sales"])
        // Unknown keys after a to-one hop are typed errors, as before.
        let error = #expect(throws: ArborError.self) { _ = try ada.value(forKeyPath: "department.headcount") }
        #expect(error?.code == .unknownKey)
        #expect(throws: ArborError.self) { _ = try ada.value(forKeyPath: "department..name") }
    }

    @Test("key paths and predicates compute collection operators alike: strings by Unicode scalars, an Int64 overflow as the exact Decimal")
    func keyPathsAgreeWithPredicates() throws {
        let graph = try Graph()
        let sales = try graph.department("Sales")
        // "E" + combining acute sorts before "Z" by scalars (as the store orders keys); String's
        // own < would put it after "Z".
        _ = try graph.employee("Zoe", "Z", salary: 1, in: sales)
        _ = try graph.employee("E\u{301}va", "E", salary: 2, in: sales)
        #expect(try sales.value(forKeyPath: "employees.@max.firstName") as? String == "Zoe")
        #expect(try sales.value(forKeyPath: "employees.@min.firstName") as? String == "E\u{301}va")
        #expect(try ObjectPredicate(format: "employees.@max.firstName == 'Zoe'").evaluate(with: sales))
        #expect(try ObjectPredicate(format: "employees.@min.firstName == %@", "E\u{301}va").evaluate(with: sales))

        let model = try employeeModel(salaryType: .integer64, salaryDefault: Int64(0))
        let stack = try Stack(model: model)
        let context = stack.context()
        let payroll = try stack.insert("Department", in: context, ["name": "Payroll"])
        for name in ["Ada", "Grace"] {
            let employee = try stack.insert("Employee", in: context, ["firstName": name, "lastName": name, "salary": Int64.max])
            try employee.setValue(payroll, forKey: "department")
        }
        let exact = Decimal(Int64.max) * 2
        #expect(try payroll.value(forKeyPath: "employees.@sum.salary") as? Decimal == exact)
        #expect(try ObjectPredicate(format: "employees.@sum.salary == %@", exact).evaluate(with: payroll),
                "the predicate's @sum is the same exact Decimal (it was a Double, 2^64)")
        #expect(try !ObjectPredicate(format: "employees.@sum.salary == %@", exact + 1).evaluate(with: payroll))
        #expect(try payroll.value(forKeyPath: "employees.@avg.salary") as? Decimal == Decimal(Int64.max))
    }

    @Test("S000-10: an object inserted and deleted before a save is in neither insertedObjects nor deletedObjects")
    func insertedThenDeleted() throws {
        let graph = try Graph()
        let employee = try graph.employee("Ada", "Lovelace")
        graph.context.delete(employee)
        #expect(!graph.context.insertedObjects.contains(employee) && !graph.context.deletedObjects.contains(employee))
        #expect(employee.isDeleted)
        graph.context.processPendingChanges()
        #expect(graph.context.registeredObject(for: employee.objectID) == nil && employee.managedObjectContext == nil)
        #expect(!graph.context.hasChanges)
    }

    @Test("delete rules: cascade across levels and cycles, nullify updates the other side, prepareForDeletion runs")
    func deletePropagation() throws {
        let graph = try Graph()
        let sales = try graph.department("Sales")
        let boss = TracedEmployee(entity: graph.model.entity(named: "Employee")!, insertInto: graph.context)
        try boss.setValue("Bossy", forKey: "lastName")
        try boss.setValue(sales, forKey: "department")
        let worker = try graph.employee("Ada", "Lovelace", in: sales)
        try worker.setValue(boss, forKey: "manager")
        // A cycle: the boss manages the worker and the worker manages the boss.
        try boss.setValue(worker, forKey: "manager")
        let outsider = try graph.employee("Out", "Sider")
        try outsider.setValue(boss, forKey: "manager")
        graph.context.delete(sales)
        #expect(!worker.isDeleted, "rules are applied at the end of the event, not at once")
        graph.context.processPendingChanges()
        #expect(sales.managedObjectContext == nil && boss.managedObjectContext == nil && worker.managedObjectContext == nil,
                "cascaded through the department's employees (new objects, so they leave the context)")
        #expect(boss.calls.contains("prepareForDeletion"))
        #expect(try outsider.value(forKey: "manager") == nil, "nullify: the manager's reports lost the deleted boss")
        #expect(graph.context.insertedObjects == [outsider])
    }

    @Test("S000-51/S000-52: with propagatesDeletesAtEndOfEvent off, rules wait for the save")
    func deferredPropagation() throws {
        let graph = try Graph()
        #expect(graph.context.propagatesDeletesAtEndOfEvent, "the default is true")
        graph.context.propagatesDeletesAtEndOfEvent = false
        let sales = try graph.department("Sales")
        let worker = try graph.employee("Ada", "Lovelace", in: sales)
        graph.context.delete(sales)
        graph.context.processPendingChanges()
        #expect(!worker.isDeleted && worker.managedObjectContext != nil)
        graph.context.propagateDeletes()
        #expect(worker.isDeleted)
    }

    @Test("deny: deleting an object whose deny relationship still holds objects fails validation, naming them")
    func deny() throws {
        let graph = try Graph(departmentDeleteRule: .deny)
        let sales = try graph.department("Sales")
        let worker = try graph.employee("Ada", "Lovelace", in: sales)
        graph.context.delete(sales)
        #expect(!worker.isDeleted)
        do {
            try sales.validateForDelete()
            Issue.record("the deny rule let the delete through")
        } catch let error as ArborError {
            #expect(error.code == .validationRelationshipDeniedDelete && error.key == "employees")
            #expect(error.value?.contains(worker.objectID.description) == true)
        }
        graph.context.delete(worker)
        #expect(throws: Never.self) { try sales.validateForDelete() }
    }

    @Test("validation: each rule of the model, and several failures gathered into one error")
    func validation() throws {
        let graph = try Graph()
        let employee = ManagedObject(entity: graph.model.entity(named: "Employee")!, insertInto: graph.context)
        func code(_ value: Any?, _ key: String, on object: ManagedObject? = nil) -> ArborError.Code? {
            do {
                try (object ?? employee).validateValue(value, forKey: key)
                return nil
            } catch let error as ArborError {
                return error.code
            } catch {
                return nil
            }
        }
        #expect(code(nil, "firstName") == .validationMissingMandatoryProperty)
        #expect(code(Decimal(-1), "salary") == .validationNumberTooSmall)
        #expect(code("lovelace", "lastName") == .validationStringPatternMatching)
        #expect(code("Lovelace", "lastName") == nil)
        let department = try graph.department("Sales")
        #expect(code("", "name", on: department) == .validationStringTooShort)
        #expect(code(String(repeating: "x", count: 81), "name", on: department) == .validationStringTooLong)
        #expect(code(-5, "budget", on: department) == .validationNumberTooSmall)
        #expect(code(12, "name", on: department) == .wrongValueType)
        let many = (0..<51).map { _ in ManagedObject(entity: graph.model.entity(named: "Employee")!, insertInto: graph.context) }
        #expect(code(many, "reports") == .validationRelationshipExceedsMaximumCount)
        do {
            try employee.validateForInsert()
            Issue.record("an employee without names validated")
        } catch let error as ArborError {
            #expect(error.code == .validationMultipleErrors)
            #expect(Set(error.detailedErrors.compactMap(\.key)) == ["firstName", "lastName"])
            #expect(error.detailedErrors.allSatisfy { $0.objectID == employee.objectID })
        }
    }

    @Test("S000-64: rollback discards insertions; S000-62: reset forgets every object")
    func rollbackAndReset() throws {
        let graph = try Graph()
        let sales = try graph.department("Sales")
        _ = try graph.employee("Ada", "Lovelace", in: sales)
        graph.context.rollback()
        #expect(!graph.context.hasChanges && graph.context.registeredObjects.isEmpty)
        #expect(sales.managedObjectContext == nil)
        let research = try graph.department("Research")
        graph.context.reset()
        #expect(graph.context.registeredObjects.isEmpty && !graph.context.hasChanges)
        #expect(research.managedObjectContext == nil)
    }

    @Test("a key path through a to-one relationship fires each destination once: the context holds the last 1,024 destinations to-one relationships handed out, each once, lets go of the oldest first and of all at reset; objects never hold each other")
    func heldDestinations() throws {
        let model = try ManagedObjectModel {
            Entity("Node") {
                Attribute("name", .string)
                Relationship("next", to: "Node", inverse: "previous")
                Relationship("previous", to: "Node", inverse: "next")
                Relationship("group", to: "Group", inverse: "nodes")
            }
            Entity("Group") {
                Attribute("name", .string)
                Relationship("nodes", to: "Node", inverse: "group").toMany()
            }
        }
        let stack = try Stack(model: model)
        let writer = stack.context()
        let group = try stack.insert("Group", in: writer, ["name": "G"])
        let a = try stack.insert("Node", in: writer, ["name": "a", "group": group])
        let b = try stack.insert("Node", in: writer, ["name": "b", "group": group])
        try a.setValue(b, forKey: "next")
        try b.setValue(a, forKey: "next")
        // More groups than the context holds, one node each.
        let limit = ManagedObjectContext.heldDestinationLimit
        for index in 0..<(limit + 10) {
            try stack.insert("Node", in: writer, ["name": "n\(index)", "group": try stack.insert("Group", in: writer, ["name": "g\(index)"])])
        }
        try writer.save()
        let (aID, bID, groupID) = (a.objectID, b.objectID, group.objectID)

        // The group is read once through both nodes' key paths, and stays after they went.
        let context = stack.context()
        var nodes: [ManagedObject]? = try context.fetch(FetchRequest<ManagedObject>(entityName: "Node", format: "name IN %@", ["a", "b"]))
        let misses = stack.coordinator.rowCacheStatistics.misses
        for node in nodes! { #expect(try node.value(forKeyPath: "group.name") as? String == "G") }
        #expect(stack.coordinator.rowCacheStatistics.misses == misses + 1, "the group fired once")
        // a.next = b and b.next = a: held by the context, not by each other.
        for node in nodes! { _ = try node.value(forKey: "next") }
        weak var weakA = context.registeredObject(for: aID)
        nodes = nil
        #expect(context.registeredObject(for: groupID) != nil && weakA != nil && context.registeredObject(for: bID) != nil)
        context.reset()
        #expect(weakA == nil && context.registeredObject(for: bID) == nil && context.registeredObject(for: groupID) == nil)

        // Past the limit, the oldest are let go first.
        let others = try context.fetch(FetchRequest<ManagedObject>(entityName: "Node", format: "name BEGINSWITH 'n'"))
        var groups: [ManagedObjectID] = []
        for node in others.sorted(by: { $0.objectID.primaryKey! < $1.objectID.primaryKey! }) {
            let held = try #require(node.value(forKey: "group") as? ManagedObject)
            groups.append(held.objectID)
        }
        #expect(context.heldDestinations.count == limit)
        #expect(groups.prefix(10).allSatisfy { context.registeredObject(for: $0) == nil }, "the first ten went")
        #expect(groups.suffix(limit).allSatisfy { context.registeredObject(for: $0) != nil })
        // Reading a held one again does not hold it twice.
        _ = try others.last?.value(forKey: "group")
        #expect(Set(context.heldDestinations.map(ObjectIdentifier.init)).count == context.heldDestinations.count)
    }
}
