import Foundation
import Testing
@testable import Arbor

/// An employee that keeps its transient full name, and records fault transitions.
final class NamedEmployee: ManagedObject {
    var events: [String] = []
    override func awakeFromFetch() {
        super.awakeFromFetch()
        events.append("awakeFromFetch")
        // A transient set here is overwritten by the pre-refresh value on a merging refresh.
        try? setValue("set in awakeFromFetch", forKey: "fullName")
    }
    override func willTurnIntoFault() { events.append("willTurnIntoFault") }
    override func didTurnIntoFault() { events.append("didTurnIntoFault") }
}

@Suite("Refreshing objects")
struct RefreshTests {
    /// A saved employee {Sarit, Smith}; returns the stack, the employee's ID.
    func savedEmployee() throws -> (Stack, ManagedObjectID) {
        let stack = try Stack()
        let context = stack.context()
        let employee = try stack.insert("Employee", in: context, ["firstName": "Sarit", "lastName": "Smith"])
        try context.save()
        return (stack, employee.objectID)
    }

    /// Another context saves firstName = Fiona.
    func otherContextRenames(_ stack: Stack, _ id: ManagedObjectID) throws {
        let other = stack.context()
        try other.existingObject(with: id).setValue("Fiona", forKey: "firstName")
        try other.save()
    }

    /// The saved employee loaded in a context that always reads the store (staleness 0), edited
    /// there (lastName = Jones, transient fullName = Sarit Jones) while another context saved
    /// firstName = Fiona.
    func editedWhileRenamedElsewhere() throws -> (Stack, ManagedObjectID, ManagedObjectContext, NamedEmployee) {
        let (stack, id) = try savedEmployee()
        let context = stack.context()
        context.stalenessInterval = 0
        let employee = try loaded(context, id, stack: stack)
        try employee.setValue("Jones", forKey: "lastName")
        try employee.setValue("Sarit Jones", forKey: "fullName")
        try otherContextRenames(stack, id)
        return (stack, id, context, employee)
    }

    func loaded(_ context: ManagedObjectContext, _ id: ManagedObjectID, stack: Stack) throws -> NamedEmployee {
        let object = NamedEmployee(fault: id, entity: stack.model.entity(named: "Employee")!, context: context)
        context.register(object)
        try object.fireFault()
        return object
    }

    @Test("S002-35, S002-34, S000-56, S000-59: merging keeps local edits per property, takes the store's others, keeps transients")
    func mergingRefresh() throws {
        let (stack, id, context, employee) = try editedWhileRenamedElsewhere()
        employee.events.removeAll()
        context.refresh(employee, mergeChanges: true)
        #expect(try employee.value(forKey: "firstName") as? String == "Fiona", "not changed locally: the store's new value")
        #expect(try employee.value(forKey: "lastName") as? String == "Jones", "changed locally: the local value again")
        #expect(try employee.value(forKey: "fullName") as? String == "Sarit Jones", "transients keep their pre-refresh value, even over awakeFromFetch")
        #expect(employee.events == ["willTurnIntoFault", "didTurnIntoFault", "awakeFromFetch"], "S002-36")
        #expect(context.updatedObjects == [employee] && Set(employee.changedValues().keys) == ["lastName"])
        // S000-57: no conflict — the save after a merging refresh goes through.
        try context.save()
        let reader = stack.context()
        let stored = try reader.existingObject(with: id)
        #expect(try stored.value(forKey: "firstName") as? String == "Fiona" && (try stored.value(forKey: "lastName") as? String) == "Jones")
    }

    @Test("S000-55, S000-59, S000-60: without merging the object becomes a fault, loses its changes and transients, reloads when used")
    func faultingRefresh() throws {
        let (_, _, context, employee) = try editedWhileRenamedElsewhere()
        context.refresh(employee, mergeChanges: false)
        #expect(employee.isFault && !context.hasChanges && !employee.isUpdated)
        #expect(employee.values.isEmpty, "no values, no related objects held")
        #expect(try employee.value(forKey: "firstName") as? String == "Fiona")
        #expect(try employee.value(forKey: "lastName") as? String == "Smith", "the local change is lost")
        #expect(try employee.value(forKey: "fullName") as? String == "set in awakeFromFetch", "the transient was released")
    }

    @Test("S000-58: within the staleness interval a refresh reuses the cached snapshot; with 0 it reads the store")
    func stalenessOnRefresh() throws {
        let (stack, id) = try savedEmployee()
        let context = stack.context()
        let employee = try loaded(context, id, stack: stack)
        // Another context holds the row too, so its snapshot stays cached while this one
        // refreshes.
        let holder = stack.context()
        let held = try holder.existingObject(with: id)
        let before = stack.coordinator.rowCacheStatistics
        context.refresh(employee, mergeChanges: false)
        _ = try employee.value(forKey: "firstName")
        #expect(stack.coordinator.rowCacheStatistics.hits == before.hits + 1, "infinite staleness (-1): the snapshot is reused")
        context.stalenessInterval = 0
        context.refresh(employee, mergeChanges: false)
        _ = try employee.value(forKey: "firstName")
        #expect(stack.coordinator.rowCacheStatistics.staleReads == before.staleReads + 1, "0: the store is read")
        // Any interval is accepted, however large (no overflow converting it).
        context.stalenessInterval = .greatestFiniteMagnitude
        let large = stack.coordinator.rowCacheStatistics
        context.refresh(employee, mergeChanges: false)
        _ = try employee.value(forKey: "firstName")
        #expect(stack.coordinator.rowCacheStatistics.hits == large.hits + 1, "a huge interval: the snapshot is reused")
        #expect(try held.value(forKey: "firstName") as? String == "Sarit")
    }

    @Test("S001-22: refreshAllObjects refreshes every registered object, keeping pending changes")
    func refreshAll() throws {
        let (stack, id) = try savedEmployee()
        let context = stack.context()
        context.stalenessInterval = 0
        let employee = try loaded(context, id, stack: stack)
        try employee.setValue("Jones", forKey: "lastName")
        try otherContextRenames(stack, id)
        context.refreshAllObjects()
        #expect(try employee.value(forKey: "firstName") as? String == "Fiona")
        #expect(try employee.value(forKey: "lastName") as? String == "Jones" && employee.isUpdated)
    }

    @Test("S000-57/S004-09: refresh with mergeChanges of a changed object whose row another context deleted keeps its changes; the save meets the deletion and the merge policy decides")
    func mergeRefreshOfADeletedRow() throws {
        let stack = try Stack()
        let setup = stack.context()
        let sales = try stack.insert("Department", in: setup, ["name": "Sales"])
        try setup.save()
        let local = stack.context()
        let mine = try local.existingObject(with: sales.objectID)
        try mine.setValue("Local", forKey: "name")
        let other = stack.context()
        other.delete(try other.existingObject(with: sales.objectID))
        try other.save()

        local.refresh(mine, mergeChanges: true)
        #expect(!mine.isFault && mine.hasChanges && local.updatedObjects == [mine], "the changes were kept")
        #expect(try mine.value(forKey: "name") as? String == "Local")
        #expect {
            try local.save()
        } throws: { error in
            (error as? ArborError)?.code == .mergeConflict && (error as? ArborError)?.conflicts.first?.isDeletedInStore == true
        }
        local.mergePolicy = .overwrite
        try local.save()
        let reader = stack.context()
        #expect(try reader.existingObject(with: sales.objectID).value(forKey: "name") as? String == "Local")
    }
}
