import Foundation
import Testing
@testable import Arbor

/// A key path is resolved against the model in one type, `ModelKeyPath` (its hops and its end),
/// and every walker derives its rule from that: sort keys, predicate checks, joins, grouping and
/// the value decoder (docs/relational-planning.md, "Key paths").
@Suite("Key paths resolved against the model")
struct ModelKeyPathTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Department") {
                Attribute("name", .string)
                Relationship("staff", to: "Employee", inverse: "department").toMany()
                Relationship("head", to: "Employee", inverse: "heads")
            }
            Entity("Employee") {
                Attribute("name", .string)
                Attribute("salary", .integer64).defaultValue(Int64(0))
                Attribute("nickname", .string).transient()
                Relationship("department", to: "Department", inverse: "staff")
                Relationship("heads", to: "Department", inverse: "head").toMany()
            }
            Entity("Manager", parent: "Employee") {
                Attribute("budget", .integer64).defaultValue(Int64(0))
            }
        }
    }

    /// The walk of `keyPath` from `entity` in `model` (which the caller keeps alive: a model's
    /// descriptions refer to each other weakly).
    static func walk(_ keyPath: String, from entity: String = "Employee", in model: ManagedObjectModel) throws -> ModelKeyPath {
         ModelKeyPath(KeyPathEvaluator.components(of: keyPath), from: try #require(model.entity(named: entity)))
    }

    @Test("a to-one chain to an attribute: its hops, its end, the entities it reaches with their sub-entities, and rows answer it")
    func toOneChain() throws {
        let model = try Self.model()
        let path = try Self.walk("department.head.salary", in: model)
        #expect(path.hops.map(\.name) == ["department", "head"])
        #expect(path.attribute?.name == "salary")
        #expect(path.lastEntity.name == "Employee")
        #expect(path.throughToOne && path.readsRows)
        #expect(path.reachedEntities.map(\.name).sorted() == ["Department", "Employee", "Manager"])
    }

    @Test("each way a walk stops: a to-many end, a transient attribute, a collection operator, an unknown key, a key after an attribute")
    func stops() throws {
        let model = try Self.model()
        let toMany = try Self.walk("department.staff", in: model)
        #expect(toMany.relationship?.name == "staff")
        #expect(toMany.relationship?.isToMany == true && !toMany.endsAtStoredValue && !toMany.readsRows)

        let transient = try Self.walk("department.head.nickname", in: model)
        #expect(transient.attribute?.isTransient == true && !transient.readsRows)

        let through = try Self.walk("department.staff.name", in: model)
        #expect(!through.throughToOne && through.endsAtStoredValue && !through.readsRows)

        guard case .collectionOperator("@count", offset: 2) = try Self.walk("department.staff.@count", in: model).end else {
            Issue.record("@count is not where the walk stopped")
            return
        }
        guard case .unknownKey("wage", offset: 1) = try Self.walk("department.wage", in: model).end else {
            Issue.record("the unknown key is not where the walk stopped")
            return
        }
        let past = try Self.walk("name.length", in: model)
        guard case .pastAttribute(let attribute, key: "length", offset: 1) = past.end else {
            Issue.record("the key after an attribute is not where the walk stopped")
            return
        }
        #expect(attribute.name == "name")
        #expect(past.hops.isEmpty && past.lastEntity.name == "Employee")
    }

    @Test("the logical plan derives its rules from the walk: a store sorts by a to-one chain, and a sort through a to-many hop is refused naming it")
    func analysisUsesTheWalk() throws {
        let model = try Self.model()
        let sorted = try LogicalPlan(entityName: "Employee", predicate: nil,
                                       sortDescriptors: [ObjectSortDescriptor(key: "department.head.name")], model: model)
        #expect(sorted.storeSorts)
        #expect(sorted.sortedEntities([ObjectSortDescriptor(key: "department.head.name")]).map(\.name).sorted() == ["Department", "Employee", "Manager"])
        let error = try #require(throws: ArborError.self) {
            try LogicalPlan(entityName: "Department", predicate: nil, sortDescriptors: [ObjectSortDescriptor(key: "staff.name")], model: model)
        }
        #expect(error.code == ArborError.Code.invalidFetchRequest)
        #expect(error.message.contains("to-many relationship Department.staff"))
        let unknown = try #require(throws: ArborError.self) {
            try LogicalPlan(entityName: "Employee", predicate: try ObjectPredicate(format: "department.wage > 3"), sortDescriptors: [], model: model)
        }
        #expect(unknown.code == ArborError.Code.unknownKey)
        #expect(unknown.message.contains("Department has no property \"wage\""))
        let past = try #require(throws: ArborError.self) {
            try LogicalPlan(entityName: "Employee", predicate: try ObjectPredicate(format: "department.name.length > 3"), sortDescriptors: [], model: model)
        }
        #expect(past.message.contains("\"length\" cannot follow the attribute name"))
        // Past a to-many hop the key path is a collection: an operator applies, and nothing
        // follows @count.
        _ = try LogicalPlan(entityName: "Department", predicate: try ObjectPredicate(format: "staff.@sum.salary > 3"), sortDescriptors: [], model: model)
        let afterCount = try #require(throws: ArborError.self) {
            try LogicalPlan(entityName: "Department", predicate: try ObjectPredicate(format: "staff.@count.name > 3"), sortDescriptors: [], model: model)
        }
        #expect(afterCount.message.contains("nothing can follow @count"))
    }

    @Test("joins and the store's grouping classify by the same walk: a to-one chain joins, a to-many chain joins only quantified")
    func joinsUseTheWalk() throws {
        let model = try Self.model()
        let employee = try #require(model.entity(named: "Employee"))
        let department = try #require(model.entity(named: "Department"))
        let direct = try #require(JoinTerm(try ObjectPredicate(format: "department.head.name == 'Ada'"), entity: employee))
        #expect(direct.hops.map(\.name) == ["department", "head"] && direct.destination.name == "Employee")
        #expect(JoinTerm(try ObjectPredicate(format: "staff.name == 'Ada'"), entity: department) == nil)
        #expect(JoinTerm(try ObjectPredicate(format: "ANY staff.name == 'Ada'"), entity: department)?.quantifier == .any)
        #expect(JoinTerm(try ObjectPredicate(format: "department.head.nickname == 'A'"), entity: employee) == nil)
        #expect(RowPathReader.reads([["department", "name"], ["department", "head"]], from: employee))
        #expect(!RowPathReader.reads([["department", "staff"]], from: employee))
        #expect(!RowPathReader.reads([["heads", "name"]], from: employee))
    }
}
