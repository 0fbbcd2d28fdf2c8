import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// Issue 26, item 3: grouped and aggregated dictionary fetches computed by the store in one pass
/// over its rows, with no managed objects — and the same dictionaries the object path gives.
@Suite("Aggregates in the store")
struct StoreAggregateTests {
    /// The dictionaries of `request` as the store computes them, and as objects give them (the
    /// object path runs while the context has an unsaved change elsewhere).
    static func bothWays(_ request: FetchRequest<[String: any Sendable]>, graph: JoinTests.Graph) throws
        -> (store: [[String: any Sendable]], objects: [[String: any Sendable]]) {
        let reader = graph.stack.context()
        #expect(try reader.groupsInStore(request) != nil, "the store groups")
        // explain follows the fetch's decision (docs/relational-planning.md, "Aggregates in the store").
        #expect(try request.explain(in: reader).contains("group in the store"))
        let store = try reader.fetch(request)
        let other = graph.stack.context()
        _ = try graph.stack.insert("Division", in: other, ["title": "unsaved"])
        #expect(try other.groupsInStore(request) == nil, "objects group")
        let onObjects = try request.explain(in: other)
        #expect(onObjects.contains("group the objects") && onObjects.contains("unsaved changes") && !onObjects.contains("group in the store"), "\(onObjects)")
        return (store, try other.fetch(request))
    }

    /// A dictionary as comparable text (numbers as doubles, IDs as their URIs).
    static func text(_ row: [String: any Sendable]) -> String {
        row.keys.sorted().map { key -> String in
            let value: String = switch row[key] {
            case let id as ManagedObjectID: id.uriRepresentation().absoluteString
            case let n as Int64: "\(Double(n))"
            case let n as Double: "\(n)"
            case let d as Decimal: "\(NSDecimalNumber(decimal: d).doubleValue)"
            case let other?: "\(other)"
            case nil: "nil"
            }
            return "\(key)=\(value)"
        }.joined(separator: ",")
    }

    @Test("grouped fetches by attributes and to-one key paths, with every aggregate, joins in the predicate, having, sorts and windows: the store's dictionaries are the objects'", arguments: Array(0..<4))
    func differential(round: Int) throws {
        let graph = try JoinTests.Graph(seed: UInt64(0xA66 + round * 31))
        let groupings: [[String]] = [["department.name"], ["name"], ["department"], ["department.division.title", "name"], ["manager.department.budget"], []]
        let predicates: [String?] = [nil, "salary > 2000", "department.name BEGINSWITH 'S'", "manager.salary < 5000 AND salary >= 0"]
        for (index, groupBy) in groupings.enumerated() {
            for format in predicates {
                var request = FetchRequest<[String: any Sendable]>(entityName: "Person")
                request.predicate = try format.map { try ObjectPredicate(format: $0) }
                request.propertiesToGroupBy = groupBy.isEmpty ? nil : groupBy
                request.propertiesToFetch = groupBy.map { .key($0) } + [
                    .aggregate(.sum, of: "salary", as: "total"), .aggregate(.count, of: "department", as: "staffed"),
                    .aggregate(.average, of: "salary", as: "mean"), .aggregate(.min, of: "manager.name", as: "firstBoss"),
                    .aggregate(.max, of: "department.budget", as: "richest"),
                ]
                if index % 2 == 0 { request.sortDescriptors = [ObjectSortDescriptor(key: "total", ascending: false), ObjectSortDescriptor(key: "staffed")] }
                if index == 2 { request.havingPredicate = try ObjectPredicate(format: "staffed > 1") }
                let (store, objects) = try Self.bothWays(request, graph: graph)
                let context = "round \(round), group by \(groupBy), where \(format ?? "nothing")"
                #expect(store.map(Self.text) == objects.map(Self.text), "\(context)")
                if groupBy.isEmpty { #expect(store.count == 1, "\(context): one dictionary in all") }
            }
        }
    }

    @Test("a dictionary fetch is one plan: the logical plan says what is done to the objects and what to the dictionaries, and explain prints it")
    func dictionaryFetchIsOnePlan() throws {
        let graph = try JoinTests.Graph(seed: 0xD1C7)
        let reader = graph.stack.context()
        let model = graph.stack.model
        // One dictionary per object, sorted by an expression's name: the dictionaries are sorted
        // and windowed; the objects are read in no order, unwindowed.
        var request = FetchRequest<[String: any Sendable]>(entityName: "Person")
        request.propertiesToFetch = [.key("name"), .expression(try ObjectExpression(format: "salary * 2"), as: "double")]
        request.sortDescriptors = [ObjectSortDescriptor(key: "double", ascending: false)]
        request.fetchLimit = 3
        var logical = try LogicalPlan(request, model: model)
        var dictionary = try #require(logical.dictionary)
        #expect(!dictionary.sortsObjects && !dictionary.windowsObjects && logical.sortDescriptors.isEmpty && logical.limit == 0)
        var explained = try request.explain(in: reader)
        #expect(explained.contains("make a dictionary of each object") && explained.contains("sort the dictionaries: double") && explained.contains("offset 0, limit 3"),
                "\(explained)")
        func number(_ value: Any?) -> Double? {
            switch value {
            case let integer as Int64: Double(integer)
            case let double as Double: double
            default: nil
            }
        }
        let doubled = try reader.fetch(request).map { try #require(number($0["double"])) }
        var everyone = FetchRequest<ManagedObject>(entityName: "Person")
        everyone.sortDescriptors = [ObjectSortDescriptor(key: "salary", ascending: false)]
        let salaries = try reader.fetch(everyone).prefix(3).map { try #require(number($0.value(forKey: "salary"))) * 2 }
        #expect(doubled == salaries)
        // Sorted by an attribute: the objects are sorted and windowed, by the store.
        request.sortDescriptors = [ObjectSortDescriptor(key: "salary", ascending: false)]
        logical = try LogicalPlan(request, model: model)
        dictionary = try #require(logical.dictionary)
        #expect(dictionary.sortsObjects && dictionary.windowsObjects && logical.sortDescriptors.map(\.key) == ["salary"] && logical.limit == 3)
        explained = try request.explain(in: reader)
        #expect(explained.contains("make a dictionary of each object") && !explained.contains("sort the dictionaries"), "\(explained)")
        #expect(try reader.fetch(request).map { try #require(number($0["double"])) } == salaries)
        // Distinct results: the objects are sorted, but the window is the dictionaries'.
        request.propertiesToFetch = [.key("department.name")]
        request.returnsDistinctResults = true
        request.sortDescriptors = []
        request.fetchLimit = 2
        logical = try LogicalPlan(request, model: model)
        dictionary = try #require(logical.dictionary)
        #expect(dictionary.sortsObjects && !dictionary.windowsObjects && logical.limit == 0)
        explained = try request.explain(in: reader)
        #expect(explained.contains("keep distinct dictionaries") && explained.contains("offset 0, limit 2"), "\(explained)")
        let names = try reader.fetch(request).map { $0["department.name"].map { "\($0)" } ?? "nil" }
        #expect(names.count == 2 && Set(names).count == 2, "\(names)")
        // Other fetches have no dictionary part.
        #expect(try LogicalPlan(FetchRequest<ManagedObject>(entityName: "Person"), model: model).dictionary == nil)
    }

    @Test("explain names where a grouped fetch's groups are made, with the fetch's own reasons, and what is done with the groups after")
    func explainGroupedFetch() throws {
        let graph = try JoinTests.Graph(seed: 0xE6)
        let reader = graph.stack.context()
        var request = FetchRequest<[String: any Sendable]>(entityName: "Person")
        request.predicate = try ObjectPredicate(format: "salary > 1000")
        request.propertiesToGroupBy = ["department.name"]
        request.propertiesToFetch = [.key("department.name"), .aggregate(.sum, of: "salary", as: "total")]
        request.havingPredicate = try ObjectPredicate(format: "total > 0")
        request.sortDescriptors = [ObjectSortDescriptor(key: "total", ascending: false)]
        request.fetchLimit = 2
        let inStore = try request.explain(in: reader)
        #expect(inStore.hasPrefix("Person: ") && inStore.contains("group in the store, by department.name"), "\(inStore)")
        #expect(inStore.contains("then in memory: keep the groups where total > 0") && inStore.contains("sort the groups: total") && inStore.contains("offset 0, limit 2"), "\(inStore)")
        // A predicate term judged on objects makes the groups of objects, and explain says why.
        request.predicate = try ObjectPredicate(format: "salary > manager.salary")
        let residual = try request.explain(in: reader)
        #expect(residual.contains("group the objects, by department.name — on objects: a term of the predicate is judged on objects"), "\(residual)")
        #expect(try reader.groupsInStore(request) == nil)
        // An aggregate without groups is one group of every row. Sorted by a name its
        // dictionaries no longer hold, explain refuses it as the fetch does.
        request.predicate = nil
        request.propertiesToGroupBy = nil
        request.propertiesToFetch = [.aggregate(.count, of: "salary", as: "n")]
        #expect(throws: ArborError.self) { try request.explain(in: reader) }
        #expect(throws: ArborError.self) { try reader.fetch(request) }
        request.sortDescriptors = []
        #expect(try request.explain(in: reader).contains("group in the store, one group of every row"))
        // Grouped with no properties named, the dictionaries hold the entity's stored attributes,
        // and explain judges that same shape: the store reads them all on rows.
        request.propertiesToGroupBy = ["name"]
        request.propertiesToFetch = nil
        let plain = try request.explain(in: reader)
        #expect(plain.contains("group in the store, by name"), "\(plain)")
        let person = try #require(graph.stack.model.entity(named: "Person"))
        #expect(DictionaryShape(request, entity: person).properties.count == person.attributes.filter { !$0.isTransient }.count)
        #expect(try reader.groupsInStore(request) != nil)
        // A child context's groups are its parent's objects.
        let child = privateContext(parent: privateContext(graph.stack.coordinator, name: "parent"), name: "child")
        let childPlan = try child.performAndWait { try request.explain(in: child) }
        #expect(childPlan.contains("served by the parent context") && childPlan.contains("on objects: a child context's groups are made of its parent's objects"), "\(childPlan)")
    }

    @Test("grouped by a to-one key path whose values are NaN, every row is a group of its own in the store too, as objects group (NaN equals nothing; found by DifferentialTests)")
    func nanGroupKeysThroughDestinations() throws {
        let graph = try JoinTests.Graph(seed: 4)
        for person in graph.people { try person.setValue(Double.nan, forKey: "rating") }
        try graph.context.save()
        var request = FetchRequest<[String: any Sendable]>(entityName: "Person")
        request.propertiesToGroupBy = ["manager.rating"]
        request.propertiesToFetch = [.key("manager.rating"), .aggregate(.count, of: "salary", as: "n")]
        let (store, objects) = try Self.bothWays(request, graph: graph)
        #expect(store.map(Self.text) == objects.map(Self.text))
        let managed = try graph.people.filter { try $0.value(forKey: "manager") != nil }.count
        #expect(store.count == managed + (managed < graph.people.count ? 1 : 0), "one group per person with a manager, one of those without")
    }

    @Test("an aggregate over no rows is one dictionary (count 0, sum 0, no average); grouping no rows gives none")
    func emptyInput() throws {
        let graph = try JoinTests.Graph(seed: 3)
        var request = try FetchRequest<[String: any Sendable]>(entityName: "Person", format: "salary < 0")
        request.propertiesToFetch = [.aggregate(.count, of: "salary", as: "n"), .aggregate(.sum, of: "salary", as: "total"),
                                     .aggregate(.average, of: "salary", as: "mean")]
        let (store, objects) = try Self.bothWays(request, graph: graph)
        #expect(store.count == 1 && store[0]["n"] as? Int64 == 0 && store[0]["total"] as? Int64 == 0 && store[0]["mean"] == nil)
        #expect(store.map(Self.text) == objects.map(Self.text))
        request.propertiesToGroupBy = ["name"]
        #expect(try graph.stack.context().fetch(request).isEmpty)
    }
}

@Suite("Collection operators over faults")
struct CollectionOperatorFaultTests {
    @Test("employees.@sum.salary on a department whose employees are not loaded is read from the store's rows: no object made, the answer the objects give (issue 26, item 3)")
    func sumOverFaultsReadsRows() throws {
        let stack = try Stack()
        let writer = stack.context()
        let department = try stack.insert("Department", in: writer, ["name": "Research"])
        var total = Decimal(0)
        var employees: [ManagedObject] = []
        for index in 0..<25 {
            let employee = try stack.insert("Employee", in: writer, ["firstName": "E\(index)", "lastName": "Worker", "salary": Decimal(1000 + index)])
            try employee.setValue(department, forKey: "department")
            total += Decimal(1000 + index)
            employees.append(employee)
        }
        try writer.save()
        let reader = stack.context()
        let fault = reader.object(with: department.objectID)
        let before = stack.coordinator.rowCacheStatistics
        #expect(try fault.value(forKeyPath: "employees.@sum.salary") as? Decimal == total)
        #expect(try fault.value(forKeyPath: "employees.@count") as? Int == 25)
        #expect(try fault.value(forKeyPath: "employees.@max.salary") as? Decimal == Decimal(1024))
        #expect(try fault.value(forKeyPath: "employees.@avg.salary") as? Decimal == total / 25)
        let after = stack.coordinator.rowCacheStatistics
        #expect(reader.registeredObjects.count == 1, "only the department is registered")
        #expect(try fault.hasFault(forRelationshipNamed: "employees"))
        #expect(after.hits == before.hits, "no employee's snapshot was read: \(before) → \(after)")
        // The same answers through the objects (the relationship loaded first).
        let loading = stack.context()
        let loaded = loading.object(with: department.objectID)
        _ = try loaded.value(forKey: "employees")
        #expect(try loaded.value(forKeyPath: "employees.@sum.salary") as? Decimal == total)
        #expect(try loaded.value(forKeyPath: "employees.@avg.salary") as? Decimal == total / 25)

        // An unsaved change of a destination counts: the objects answer then.
        let editing = stack.context()
        let editedDepartment = editing.object(with: department.objectID)
        try editing.object(with: employees[0].objectID).setValue(Decimal(0), forKey: "salary")
        #expect(try editedDepartment.value(forKeyPath: "employees.@sum.salary") as? Decimal == total - 1000)
        // So does a registered destination holding an older state than the store's.
        let holding = stack.context()
        let held = holding.object(with: employees[1].objectID)
        _ = try held.value(forKey: "salary")
        try employees[1].setValue(Decimal(5000), forKey: "salary")
        try writer.save()
        #expect(try holding.object(with: department.objectID).value(forKeyPath: "employees.@sum.salary") as? Decimal == total,
                "the registered employee keeps its in-memory salary, as firing the relationship gives")
        let fresh = stack.context()
        #expect(try fresh.object(with: department.objectID).value(forKeyPath: "employees.@sum.salary") as? Decimal == total - 1001 + 5000)
    }

    @Test("every collection operator over every attribute kind: the store's rows give what the loaded objects give, value and type, nils left out")
    func everyKindFromRowsAsFromObjects() throws {
        let model = try ManagedObjectModel {
            Entity("Box") {
                Attribute("name", .string)
                Relationship("items", to: "Item", inverse: "box").toMany()
            }
            Entity("Item") {
                Attribute("small", .integer16)
                Attribute("medium", .integer32)
                Attribute("large", .integer64)
                Attribute("money", .decimal)
                Attribute("ratio", .double)
                Attribute("weight", .float)
                Attribute("label", .string)
                Attribute("flag", .boolean)
                Attribute("when", .date)
                Attribute("bytes", .binaryData)
                Attribute("tag", .uuid)
                Attribute("link", .uri)
                Relationship("box", to: "Box", inverse: "items")
            }
        }
        let stack = try Stack(model: model)
        let writer = stack.context()
        let box = try stack.insert("Box", in: writer, ["name": "b"])
        for index in 0..<12 {
            // Every third item holds nils; values repeat so that distinct unions drop some.
            var values: [String: Any] = [:]
            if index % 3 != 0 {
                let n = index % 5
                values = ["small": Int16(n - 2), "medium": Int32(n * 1000), "large": Int64(n) << 40, "money": Decimal(n) / 4,
                          "ratio": Double(n) * 0.5, "weight": Float(n) / 8, "label": "L\(n)", "flag": n % 2 == 0,
                          "when": Date(timeIntervalSinceReferenceDate: Double(n) * 86_400), "bytes": Data([UInt8(n)]),
                          "tag": UUID(uuidString: "00000000-0000-0000-0000-00000000000\(n)")!, "link": URL(string: "https://example.com/\(n)")!]
            }
            let item = try stack.insert("Item", in: writer, values)
            try item.setValue(box, forKey: "box")
        }
        try writer.save()
        let keys = ["small", "medium", "large", "money", "ratio", "weight", "label", "flag", "when", "bytes", "tag", "link"]
        let operators = ["@count", "@sum", "@avg", "@min", "@max", "@distinctUnionOfObjects"]
        for key in keys {
            for operation in operators {
                let keyPath = "items.\(operation).\(key)"
                // From the rows: the relationship is not loaded and no item is registered.
                let fromRows = stack.context()
                let fault = fromRows.object(with: box.objectID)
                let rowsAnswer = Result { try fault.value(forKeyPath: keyPath) }
                #expect(fromRows.registeredObjects == [fault], "\(keyPath): no item was made")
                // From the objects: the relationship loaded first.
                let fromObjects = stack.context()
                let loaded = fromObjects.object(with: box.objectID)
                _ = try loaded.value(forKey: "items")
                let objectsAnswer = Result { try loaded.value(forKeyPath: keyPath) }
                switch (rowsAnswer, objectsAnswer) {
                case (.success(let a), .success(let b)):
                    #expect(Self.describe(a) == Self.describe(b), "\(keyPath)")
                case (.failure(let a), .failure(let b)):
                    #expect("\(a)" == "\(b)", "\(keyPath)")
                default:
                    Issue.record("\(keyPath): rows \(rowsAnswer), objects \(objectsAnswer)")
                }
            }
        }
    }

    /// A value with its type, lists in a canonical order (a distinct union is unordered).
    static func describe(_ value: Any?) -> String {
        guard let value else { return "nil" }
        if let list = value as? [Any] { return "[" + list.map { describe($0) }.sorted().joined(separator: ", ") + "]" }
        if let set = value as? Set<AnyHashable> { return "{" + set.map { describe($0.base) }.sorted().joined(separator: ", ") + "}" }
        return "\(type(of: value))(\(value))"
    }
}
