import Foundation
import Testing
@testable import Arbor

/// The seeds' Employee/Department example, with a parent entity, as docs/model.md shows it.
func employeeModel(salaryType: AttributeType = .decimal, salaryDefault: any Sendable = Decimal(0),
                   departmentDeleteRule: DeleteRule = .cascade) throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Department") {
            Attribute("name", .string).required().length(1...80)
            Attribute("budget", .integer32).minimum(0)
            Relationship("employees", to: "Employee", inverse: "department").toMany().deleteRule(departmentDeleteRule)
            Unique("name")
        }
        Entity("Person", abstract: true) {
            Attribute("firstName", .string).required()
            Attribute("lastName", .string).required().pattern("[A-Z][a-z]+")
            Attribute("fullName", .string).transient()
            Indexed("lastName", caseInsensitive: true)
        }
        Entity("Employee", parent: "Person") {
            Attribute("salary", salaryType).defaultValue(salaryDefault).minimum(0)
            Attribute("startDate", .date).indexed()
            Attribute("badge", .uuid)
            Relationship("department", to: "Department", inverse: "employees")
            Relationship("manager", to: "Employee", inverse: "reports")
            Relationship("reports", to: "Employee", inverse: "manager").toMany(ordered: true).count(0...50)
            Unique("firstName", "lastName")
        }
    }
}

@Suite("Managed object model")
struct ModelTests {
    @Test("item 8: a save checks exactly the properties that have a rule (required, bounds, lengths, a pattern, a to-many count)")
    func validatedProperties() throws {
        let model = try employeeModel()
        let employee = try #require(model.entity(named: "Employee"))
        // firstName and lastName are required (lastName has a pattern), salary has a minimum;
        // startDate, badge and the transient fullName have no rule.
        #expect(Set(employee.validatedAttributes.map(\.attribute.name)) == ["firstName", "lastName", "salary"])
        #expect(employee.validatedAttributes.allSatisfy { employee.propertyLayout.index[$0.attribute.name] == $0.slot })
        // reports has a count (0...50); department and manager are optional to-ones.
        #expect(employee.validatedRelationships.map(\.relationship.name) == ["reports"])
        let department = try #require(model.entity(named: "Department"))
        #expect(department.validatedAttributes.map(\.attribute.name).contains("name"))
    }

    @Test("entities, inheritance, properties and resolved relationships")
    func structure() throws {
        let model = try employeeModel()
        #expect(model.entities.map(\.name) == ["Department", "Employee", "Person"])
        let employee = try #require(model.entity(named: "Employee"))
        let person = try #require(model.entity(named: "Person"))
        let department = try #require(model.entity(named: "Department"))
        #expect(person.isAbstract && !employee.isAbstract)
        #expect(employee.superentity === person)
        #expect(person.subentities == [employee])
        #expect(employee.rootEntity === person && person.rootEntity === person)
        #expect(employee.isKind(of: person) && !person.isKind(of: employee))
        // Inherited properties first, then the entity's own.
        #expect(employee.attributes.map(\.name) == ["firstName", "lastName", "fullName", "salary", "startDate", "badge"])
        #expect(employee.attributesByName["fullName"]?.isTransient == true)
        #expect(employee.attributesByName["firstName"]?.isOptional == false)
        #expect(employee.attributesByName["salary"]?.defaultValue == .decimal(0))
        #expect(employee.uniquenessConstraints == [["firstName", "lastName"]])
        #expect(employee.indexes.map(\.keys) == [["lastName"], ["startDate"]])
        #expect(employee.indexes.first?.caseAndDiacriticInsensitive == true)
        // Relationships point at their destinations and at each other.
        let employees = try #require(department.relationshipsByName["employees"])
        let departmentOfEmployee = try #require(employee.relationshipsByName["department"])
        #expect(employees.isToMany && !employees.isOrdered && employees.deleteRule == .cascade)
        #expect(employees.destinationEntity === employee && employees.entity === department)
        #expect(employees.inverseRelationship === departmentOfEmployee)
        #expect(departmentOfEmployee.inverseRelationship === employees)
        #expect(departmentOfEmployee.deleteRule == .nullify, "nullify is the default delete rule")
        let reports = try #require(employee.relationshipsByName["reports"])
        #expect(reports.isOrdered && reports.maximumCount == 50)
        #expect(reports.inverseRelationship?.name == "manager")
    }

    @Test("an inconsistent model does not build, and the error lists every problem")
    func invalidModel() throws {
        do {
            _ = try ManagedObjectModel {
                Entity("A") {
                    Attribute("x", .integer16).defaultValue("not a number")
                    Attribute("x", .string)
                    Attribute("when", .date).length(1...3)
                    Attribute("code", .string).pattern("([")
                    Attribute("note", .string).transient()
                    Attribute("size", .integer32).minimum(5).maximum(3)
                    Attribute("tag", .string).length(5...).length(...3)
                    Relationship("many", to: "A", inverse: "many").toMany().count(-1...2)
                    Relationship("b", to: "B", inverse: "missing")
                    Relationship("c", to: "C", inverse: "a")
                    Relationship("one", to: "A", inverse: "one").toMany(ordered: true)
                    Unique("nothing")
                    Indexed("note")
                }
                Entity("A") {}
                Entity("B", parent: "Nowhere") {}
                Entity("D", parent: "E") {}
                Entity("E", parent: "D") {}
            }
            Issue.record("the model built")
        } catch let error as ArborError {
            #expect(error.code == .invalidModel)
            for fragment in ["\"A\" is used twice", "default value is not valid", "\"x\" is used twice", "has no length",
                             "is not a regular expression", "\"missing\" is not a relationship of B",
                             "\"C\" does not exist", "\"Nowhere\" does not exist", "lead back to itself",
                             "names \"nothing\"", "transient attribute \"note\"", "the minimum 5 is above the maximum 3",
                             "the length range 5...3 is empty", "a count cannot be negative"] {
                #expect(error.message.contains(fragment), "missing: \(fragment) in \(error.message)")
            }
        }
    }

    @Test("an ordered to-one relationship and a one-sided inverse are refused")
    func relationshipRules() throws {
        #expect(throws: ArborError.self) {
            _ = try ManagedObjectModel {
                Entity("A") { Relationship("b", to: "B", inverse: "a").toMany(ordered: true).count(3...5) }
                Entity("B") { Relationship("a", to: "A", inverse: "other") }
            }
        }
        #expect(throws: ArborError.self) {
            _ = try ManagedObjectModel {
                Entity("A") { Relationship("b", to: "B", inverse: "a").count(1...2) }
                Entity("B") { Relationship("a", to: "A", inverse: "b") }
            }
        }
    }

    @Test("version hashes: stable, changed by what changes storage, not by defaults, validation or delete rules")
    func versionHashes() throws {
        let model = try employeeModel()
        let again = try employeeModel()
        #expect(model.versionHash.count == 16)
        #expect(model.versionHash == again.versionHash)
        #expect(model.entityVersionHashes == again.entityVersionHashes)
        // Defaults, validation and delete rules are behaviour, not storage.
        let behaviour = try employeeModel(salaryDefault: Decimal(5), departmentDeleteRule: .deny)
        #expect(behaviour.versionHash == model.versionHash)
        // A changed attribute type changes its entity (and sub-entities) and the model.
        let changed = try employeeModel(salaryType: .double, salaryDefault: 0.0)
        #expect(changed.versionHash != model.versionHash)
        #expect(changed.entity(named: "Employee")!.versionHash != model.entity(named: "Employee")!.versionHash)
        #expect(changed.entity(named: "Department")!.versionHash == model.entity(named: "Department")!.versionHash)
        let (added, removed, differing) = changed.differences(fromStoreHashes: model.entityVersionHashes)
        #expect(added.isEmpty && removed.isEmpty && differing == ["Employee"])
        #expect(throws: Never.self) { try model.checkCompatible(withStoreHashes: again.entityVersionHashes, storeName: "store") }
        var stored = model.entityVersionHashes
        stored["Gone"] = Data(repeating: 1, count: 16)
        stored["Department"] = nil
        do {
            try changed.checkCompatible(withStoreHashes: stored, storeName: "employees.arbor")
            Issue.record("an incompatible store was accepted")
        } catch let error as ArborError {
            #expect(error.code == .incompatibleModel && error.code.number == 134100)
            #expect(error.message.contains("not in the store: Department"))
            #expect(error.message.contains("only in the store: Gone"))
            #expect(error.message.contains("changed since the store was made: Employee"))
        }
    }
}

struct Address: Codable, Sendable, Equatable {
    var street: String
    var number: Int
}

@Suite("Attribute types")
struct AttributeTypeTests {
    func store(_ type: AttributeType, _ value: Any) throws -> AttributeValue {
        try type.storedValue(from: value, entity: "E", key: "k")
    }

    @Test("each type takes its Swift values and gives them back")
    func roundTrips() throws {
        let date = Date(timeIntervalSince1970: 1_000_000)
        let uuid = UUID()
        let url = URL(string: "https://example.com/a")!
        let cases: [(AttributeType, Any, Any)] = [
            (.integer16, 12, Int16(12)), (.integer32, Int8(-3), Int32(-3)), (.integer64, UInt32(7), Int64(7)),
            (.decimal, Decimal(string: "1.25")!, Decimal(string: "1.25")!), (.decimal, 3, Decimal(3)),
            (.double, Float(1.5), 1.5), (.double, 2, 2.0), (.float, 2.5, Float(2.5)),
            (.string, "text", "text"), (.string, "sub text".dropFirst(4), "text"), (.boolean, true, true),
            (.date, date, date), (.binaryData, [UInt8]([1, 2]), Data([1, 2])), (.uuid, uuid, uuid), (.uri, url, url),
        ]
        for (type, input, expected) in cases {
            let stored = try store(type, input)
            let back = type.swiftValue(of: stored)
            #expect("\(back)" == "\(expected)" && Swift.type(of: back) == Swift.type(of: expected), "\(type): \(back) vs \(expected)")
        }
        let address = Address(street: "Main", number: 4)
        let transformable = AttributeType.transformable(Address.self)
        let stored = try store(transformable, address)
        #expect(transformable.swiftValue(of: stored) as? Address == address)
        #expect(transformable.description.contains("Address"))
    }

    @Test("a wrong value type is a typed error naming the key, never a crash; integers that do not fit are validation errors")
    func wrongTypes() throws {
        let wrong: [(AttributeType, Any)] = [(.integer32, "1"), (.string, 1), (.boolean, 1), (.date, "2020"),
                                             (.uuid, "x"), (.decimal, 1.5), (.transformable(Address.self), "street")]
        for (type, value) in wrong {
            do {
                _ = try store(type, value)
                Issue.record("\(type) took \(value)")
            } catch let error as ArborError {
                #expect(error.code == .wrongValueType && error.key == "k" && error.message.contains(type.valueTypeName))
            }
        }
        #expect(throws: ArborError.self) { _ = try store(.integer16, 40_000) }
        do {
            _ = try store(.integer16, -40_000)
        } catch let error as ArborError {
            #expect(error.code == .validationNumberTooSmall)
        }
    }
}

@Suite("Object IDs")
struct ObjectIDTests {
    @Test("URIs round-trip for permanent and temporary IDs; temporary ones are distinguishable")
    func uris() throws {
        let store = UUID()
        let permanent = ManagedObjectID(entityName: "Employee", store: store, key: 42)
        #expect(permanent.uriRepresentation().absoluteString == "x-arbor://\(store.uuidString)/Employee/p42")
        #expect(ManagedObjectID(uri: permanent.uriRepresentation()) == permanent)
        #expect(!permanent.isTemporaryID && permanent.primaryKey == 42 && permanent.storeIdentifier == store)
        let temporary = ManagedObjectID(temporaryFor: "Employee")
        #expect(temporary.isTemporaryID && temporary.primaryKey == nil)
        #expect(temporary.uriRepresentation().host == "temporary")
        #expect(ManagedObjectID(uri: temporary.uriRepresentation()) == temporary)
        #expect(ManagedObjectID(temporaryFor: "Employee") != temporary)
        let odd = ManagedObjectID(entityName: "Ünïcode Entity/1", store: store, key: 1)
        #expect(ManagedObjectID(uri: odd.uriRepresentation()) == odd)
        for bad in ["https://x/Employee/p1", "x-arbor://\(store.uuidString)/Employee/t1", "x-arbor://\(store.uuidString)/Employee/p0",
                    "x-arbor://nope/Employee/p1", "x-arbor://\(store.uuidString)/p1", "x-arbor://temporary/E/tnot-a-uuid"] {
            #expect(ManagedObjectID(uri: URL(string: bad)!) == nil, "\(bad)")
        }
        let set: Set<ManagedObjectID> = [permanent, temporary, ManagedObjectID(entityName: "Employee", store: store, key: 42)]
        #expect(set.count == 2)
    }

    @Test("item 3: an ID is 16 bytes: IDs of one entity and store share one interned space; the same key in another entity or store is another ID")
    func internedSpaces() throws {
        #expect(MemoryLayout<ManagedObjectID>.size == 16)
        let store = UUID(), other = UUID()
        let a = ManagedObjectID(entityName: "Employee", store: store, key: 7)
        let b = try #require(ManagedObjectID(uri: a.uriRepresentation()))
        #expect(a == b && a.space === b.space && b.entityName == "Employee" && b.storeIdentifier == store)
        #expect(a != ManagedObjectID(entityName: "Department", store: store, key: 7))
        #expect(a != ManagedObjectID(entityName: "Employee", store: other, key: 7))
        #expect(ManagedObjectID(temporaryFor: "Employee").space !== a.space, "temporary IDs have a namespace of their own")
        // An entity's temporary IDs come from the space it made once.
        let model = try ManagedObjectModel { Entity("Employee") { Attribute("name", .string) } }
        let entity = try #require(model.entity(named: "Employee"))
        let object = ManagedObject(entity: entity, insertInto: nil)
        #expect(object.objectID.space === entity.temporaryIDSpace && object.objectID.isTemporaryID)
    }

    @Test("pairs named only by URIs are bounded: past the limit a URI naming a new entity and store gives no ID, known pairs still do")
    func untrustedSpacesAreBounded() {
        var interner = ObjectIDSpace.Interner(maximumUntrusted: 3)
        let trusted = interner.intern("Employee", UUID(), untrusted: false)
        #expect(trusted != nil)
        let named = (0..<3).map { _ in interner.intern("Employee", UUID(), untrusted: true) }
        #expect(named.allSatisfy { $0 != nil } && interner.count == 4)
        #expect(interner.intern("Employee", UUID(), untrusted: true) == nil, "a fourth untrusted pair is refused")
        #expect(interner.intern("Other", UUID(), untrusted: false) != nil, "stores and models are never refused")
        #expect(interner.intern(named[0]!.entityName, named[0]!.namespace, untrusted: true) === named[0], "a known pair is found again")
        #expect(interner.count == 5)
    }
}

@Suite("Errors")
struct ErrorTests {
    @Test("several failures gather into one validationMultipleErrors carrying each; codes carry Core Data's numbers")
    func gathering() throws {
        let one = ArborError(.validationMissingMandatoryProperty, "Employee.firstName is required", entity: "Employee", key: "firstName")
        let two = ArborError(.validationStringTooLong, "Department.name is too long", entity: "Department", key: "name")
        #expect(ArborError.gathering([]) == nil)
        #expect(ArborError.gathering([one])?.code == .validationMissingMandatoryProperty)
        let both = try #require(ArborError.gathering([one, two]))
        #expect(both.code == .validationMultipleErrors && both.code.number == 1560 && both.code.isValidation)
        #expect(both.detailedErrors.map(\.key) == ["firstName", "name"])
        #expect(one.code.number == 1570 && ArborError.Code.objectNotFound.number == 133000)
        #expect(!ArborError.Code.incompatibleModel.isValidation)
    }
}
