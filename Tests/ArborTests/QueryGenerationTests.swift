import ArborStore
import ArborTestSupport
import Foundation
import Synchronization
import Testing
@testable import Arbor

/// Issue 28, item 5: query generations (docs/history.md, "Query generations"). A context pinned
/// to a generation reads the stores as they were at it while others save, until it saves,
/// merges, refreshes all, resets or is moved on. Seed 001: "queryGenerationToken: Returns the
/// token associated with the query generation currently in use by this context";
/// "setQueryGenerationFrom: Sets the query generation this context should use";
/// "NSManagedObjectContextQueryGenerationKey: Constant used to reference the query generation
/// token".
@Suite("Query generations")
struct QueryGenerationTests {
    /// The answers of a set of requests through `context`, as text: IDs in order for ordered
    /// requests, sorted otherwise; counts; a grouped dictionary fetch.
    static func answers(_ context: ManagedObjectContext) throws -> [String] {
        func ids(_ objects: [ManagedObject], ordered: Bool = false) -> String {
            let keys = objects.map { "\($0.entity.name)#\($0.objectID.primaryKey ?? -1)" }
            return (ordered ? keys : keys.sorted()).joined(separator: ",")
        }
        var answers: [String] = []
        answers.append(ids(try context.fetch(FetchRequest<ManagedObject>(entityName: "Employee"))))
        var window = try FetchRequest<ManagedObject>(entityName: "Employee", format: "salary >= 5000")
        window.sortDescriptors = [ObjectSortDescriptor(key: "salary", ascending: false), ObjectSortDescriptor(key: "email")]
        window.fetchOffset = 2
        window.fetchLimit = 10
        answers.append(ids(try context.fetch(window), ordered: true))
        answers.append(ids(try context.fetch(FetchRequest<ManagedObject>(entityName: "Employee", format: "department.name == 'D1'"))))
        answers.append(ids(try context.fetch(FetchRequest<ManagedObject>(entityName: "Employee", format: "ANY projects.title == 'P2'"))))
        answers.append(ids(try context.fetch(FetchRequest<ManagedObject>(entityName: "Department", format: "employees.@count > 3"))))
        answers.append("\(try context.count(for: FetchRequest<ManagedObject>(entityName: "Employee", format: "salary < 3000")))")
        answers.append(ids(try context.fetch(FetchRequest<ManagedObjectID>(entityName: "Contractor")).map { try context.existingObject(with: $0) }))
        var sums = FetchRequest<[String: any Sendable]>(entityName: "Employee")
        sums.resultType = .dictionary
        sums.propertiesToGroupBy = ["department.name"]
        sums.propertiesToFetch = [.key("department.name"), .aggregate(.sum, of: "salary", as: "total")]
        sums.sortDescriptors = [ObjectSortDescriptor(key: "department.name")]
        answers.append(try context.fetch(sums).map { "\($0["department.name"] ?? "nil")=\($0["total"] ?? "nil")" }.joined(separator: ";"))
        return answers
    }

    /// Expects `found` to equal `expected`, naming each line that differs.
    static func expectSame(_ found: [String], _ expected: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(found.count == expected.count, sourceLocation: sourceLocation)
        for (index, (line, wanted)) in zip(found, expected).enumerated() where line != wanted {
            Issue.record("line \(index): found\n\(line)\nexpected\n\(wanted)", sourceLocation: sourceLocation)
        }
        let (a, b) = (Set(found), Set(expected))
        if found.count != expected.count { Issue.record("only found: \(a.subtracting(b).sorted()); only expected: \(b.subtracting(a).sorted())", sourceLocation: sourceLocation) }
    }

    /// Saves of another context: updates, relationship changes, many-to-many links, ordered
    /// lists, deletions with cascades, insertions; a batch update and a batch delete.
    static func edit(_ stack: Stack, seed: UInt64, rounds: Int = 4) throws {
        var random = SplitMix64(seed: seed)
        let context = stack.context()
        for round in 0..<rounds {
            try HistoryTests.randomEdits(stack, context, round: round, employees: 10, renaming: true, random: &random)
            try context.save()
            if round == 1 {
                var update = BatchUpdateRequest(entityName: "Employee")
                update.predicate = try ObjectPredicate(format: "salary >= 5000")
                update.propertiesToUpdate = ["salary": try ObjectExpression(format: "salary - 100")]
                _ = try context.execute(update)
            }
            if round == 2 {
                _ = try context.execute(BatchDeleteRequest(fetchRequest: try FetchRequest<ManagedObject>(entityName: "Department", format: "name == 'D2'")))
            }
        }
    }

    @Test("a pinned context reads the store as it was while another context saves: every object and relationship, predicates through key paths, windows, counts, groups (random graphs and edits, batch requests included)",
          arguments: [UInt64(0x5147_0101), 0x5147_0202, 0x5147_0303])
    func pinnedReadsStayPut(seed: UInt64) throws {
        let stack = try HistoryTests.tracking(try BatchDeleteTests.model())
        try BatchDeleteTests.fill(stack, seed: seed, employees: 60)
        let pinned = stack.context()
        try pinned.setQueryGenerationFrom(.current)
        let token = try #require(pinned.queryGenerationToken)
        #expect(token.transactionNumbers?.count == 1)
        let before = try Self.answers(pinned)
        let everything = try BatchDeleteTests.dump(stack)
        #expect(try BatchDeleteTests.dump(stack, through: pinned) == everything)

        try Self.edit(stack, seed: seed)
        #expect(try BatchDeleteTests.dump(stack) != everything, "the edits changed the store")

        // The context that read before, asked again; a new context pinned with its token, which
        // reads every object and relationship for the first time: both see the store as it was.
        Self.expectSame(try Self.answers(pinned), before)
        let late = stack.context()
        try late.setQueryGenerationFrom(token)
        #expect(late.queryGenerationToken == token)
        Self.expectSame(try Self.answers(late), before)
        Self.expectSame(try BatchDeleteTests.dump(stack, through: late), everything)

        // Unpinned, it reads the store as it is.
        try late.setQueryGenerationFrom(nil)
        #expect(late.queryGenerationToken == nil)
        #expect(try Self.answers(late) == Self.answers(stack.context()))
    }

    @Test("a pinned context moves on when it saves, merges, refreshes all its objects or resets; notifications carry the generation")
    func movingOn() throws {
        let stack = try HistoryTests.tracking(try BatchDeleteTests.model())
        let writer = stack.context()
        let department = try stack.insert("Department", in: writer, ["name": "Old"])
        try writer.save()
        let pinned = stack.context()
        try pinned.setQueryGenerationFrom(.current)
        let first = try #require(pinned.queryGenerationToken)
        func names() throws -> [String] {
            try pinned.fetch(FetchRequest<ManagedObject>(entityName: "Department")).compactMap { try $0.value(forKey: "name") as? String }.sorted()
        }
        #expect(try names() == ["Old"])
        try department.setValue("New", forKey: "name")
        _ = try stack.insert("Department", in: writer, ["name": "Other"])
        try writer.save()
        #expect(try names() == ["Old"])

        // A save moves it on; did-save carries the generation it moved to.
        let saved = Mutex<QueryGenerationToken?>(nil)
        let observer = NotificationCenter.default.addObserver(forName: ManagedObjectContext.didSaveObjectsNotification, object: pinned, queue: nil) { note in
            saved.withLock { $0 = note.userInfo?[ManagedObjectContext.queryGenerationKey] as? QueryGenerationToken }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        _ = try stack.insert("Department", in: pinned, ["name": "Mine"])
        try pinned.save()
        let second = try #require(pinned.queryGenerationToken)
        #expect(second != first && saved.withLock { $0 } == second)
        let current = try #require(try stack.coordinator.currentPersistentHistoryToken())
        #expect(second.transactionNumbers == current.transactionNumbers)
        pinned.refreshAllObjects()
        #expect(try names() == ["Mine", "New", "Other"])

        // Refreshing all moves on; so does a reset.
        try department.setValue("Newer", forKey: "name")
        try writer.save()
        #expect(try names() == ["Mine", "New", "Other"])
        pinned.refreshAllObjects()
        #expect(try names() == ["Mine", "Newer", "Other"])
        try department.setValue("Newest", forKey: "name")
        try writer.save()
        pinned.reset()
        #expect(try names() == ["Mine", "Newest", "Other"])
        #expect(pinned.queryGenerationToken != nil, "moved on, still pinned")

        // Objects-did-change of a pinned context carries its generation.
        let changed = Mutex<QueryGenerationToken?>(nil)
        let changes = NotificationCenter.default.addObserver(forName: ManagedObjectContext.didChangeObjectsNotification, object: pinned, queue: nil) { note in
            changed.withLock { $0 = note.userInfo?[ManagedObjectContext.queryGenerationKey] as? QueryGenerationToken }
        }
        defer { NotificationCenter.default.removeObserver(changes) }
        _ = try stack.insert("Department", in: pinned, ["name": "Draft"])
        pinned.processPendingChanges()
        #expect(changed.withLock { $0 } == pinned.queryGenerationToken)
    }

    @Test("a pinned context that ends takes its pin with it; a parent keeps no entry of children that ended")
    func endedContextsLeaveNoEntries() throws {
        let stack = try HistoryTests.tracking(try BatchDeleteTests.model())
        let writer = stack.context()
        _ = try stack.insert("Department", in: writer, ["name": "D"])
        try writer.save()
        func pins() -> Int { stack.coordinator.generationPins.withLock { $0.count } }
        do {
            let pinned = stack.context()
            try pinned.setQueryGenerationFrom(.current)
            #expect(pins() == 1)
        }
        #expect(pins() == 0, "the pin went with its context")
        let parent = privateContext(stack.coordinator, name: "parent")
        for index in 0..<50 { _ = privateContext(parent: parent, name: "child \(index)") }
        let kept = privateContext(parent: parent, name: "kept")
        #expect(parent.children.entryCount <= 2, "\(parent.children.entryCount) entries")
        #expect(parent.children.all.map(ObjectIdentifier.init) == [ObjectIdentifier(kept)])
    }

    @Test("a pinned context merging another's save moves on to the current generation")
    func mergingMovesOn() throws {
        let stack = try HistoryTests.tracking(try BatchDeleteTests.model())
        let writer = stack.context()
        let department = try stack.insert("Department", in: writer, ["name": "Old"])
        try writer.save()
        let pinned = stack.context()
        pinned.automaticallyMergesChangesFromParent = true
        try pinned.performAndWait { try pinned.setQueryGenerationFrom(.current) }
        let first = pinned.performAndWait { pinned.queryGenerationToken }
        let mine = try pinned.performAndWait { try pinned.existingObject(with: department.objectID) }
        try department.setValue("New", forKey: "name")
        try writer.save()
        let seen = try pinned.performAndWait { () -> String? in
            #expect(pinned.queryGenerationToken != first)
            return try mine.value(forKey: "name") as? String
        }
        #expect(seen == "New")
    }

    @Test("an object changed since the generation is read as it was; one inserted since is not found; one deleted since is; saving an edit of an object changed since is a conflict")
    func objectsAsTheyWere() throws {
        let stack = try HistoryTests.tracking(try BatchDeleteTests.model())
        let writer = stack.context()
        let sales = try stack.insert("Department", in: writer, ["name": "Sales"])
        let ann = try stack.insert("Employee", in: writer, ["name": "Ann", "email": "ann@x", "salary": Int64(1000), "department": sales])
        let bob = try stack.insert("Employee", in: writer, ["name": "Bob", "email": "bob@x", "salary": Int64(2000), "department": sales])
        try writer.save()
        let pinned = stack.context()
        try pinned.setQueryGenerationFrom(.current)

        try ann.setValue(Int64(5000), forKey: "salary")
        writer.delete(bob)
        let cid = try stack.insert("Employee", in: writer, ["name": "Cid", "email": "cid@x", "salary": Int64(3000), "department": sales])
        try writer.save()

        let annThen = try pinned.existingObject(with: ann.objectID)
        #expect(try annThen.value(forKey: "salary") as? Int64 == 1000)
        let bobThen = try pinned.existingObject(with: bob.objectID)
        #expect(try bobThen.value(forKey: "name") as? String == "Bob")
        #expect(try (bobThen.value(forKey: "department") as? ManagedObject)?.objectID == sales.objectID)
        #expect(throws: ArborError.self) { try pinned.existingObject(with: cid.objectID) }
        let salesThen = try pinned.existingObject(with: sales.objectID)
        let staff = try #require(try salesThen.value(forKey: "employees") as? Set<ManagedObject>)
        #expect(Set(staff.map(\.objectID)) == [ann.objectID, bob.objectID])
        #expect(try pinned.count(for: FetchRequest<ManagedObject>(entityName: "Employee", format: "salary > 1500")) == 1)

        // An edit made on values of then, of a row that changed since: the merge policy decides.
        try annThen.setValue(Int64(1100), forKey: "salary")
        let conflict = try #require(throws: ArborError.self) { try pinned.save() }
        #expect(conflict.code == .mergeConflict)
    }

    @Test("another coordinator's saves to the same file are rolled back too")
    func anotherCoordinator() throws {
        let path = try temporaryDirectory() + "/generations.arbor"
        let model = try BatchDeleteTests.model()
        func open() throws -> Stack {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addNativeStore(at: path, history: .on)
            return Stack(model: model, coordinator: coordinator)
        }
        let reader = try open()
        try BatchDeleteTests.fill(reader, seed: 7, employees: 30)
        let pinned = reader.context()
        try pinned.setQueryGenerationFrom(.current)
        let before = try Self.answers(pinned)
        let everything = try BatchDeleteTests.dump(reader)
        try Self.edit(try open(), seed: 7, rounds: 2)
        #expect(try Self.answers(pinned) == before)
        let late = reader.context()
        try late.setQueryGenerationFrom(pinned.queryGenerationToken)
        #expect(try BatchDeleteTests.dump(reader, through: late) == everything)
    }

    @Test("pinning needs history; tokens of other stores or of transactions not made are refused; deleting history keeps what a pin reads; a token round-trips through Codable")
    func refusalsAndHistory() throws {
        let plain = try Stack(model: try BatchDeleteTests.model())
        let refusal = try #require(throws: ArborError.self) { try plain.context().setQueryGenerationFrom(.current) }
        #expect(refusal.code == .misuse && refusal.message.contains("persistentHistoryTracking"))

        let stack = try HistoryTests.tracking(try BatchDeleteTests.model())
        let writer = stack.context()
        let department = try stack.insert("Department", in: writer, ["name": "A"])
        try writer.save()
        let pinned = stack.context()
        try pinned.setQueryGenerationFrom(.current)
        let token = try #require(pinned.queryGenerationToken)
        let decoded = try JSONDecoder().decode(QueryGenerationToken.self, from: JSONEncoder().encode(token))
        #expect(decoded == token)
        let store = try #require(stack.coordinator.persistentStores.first)
        let beyond = QueryGenerationToken(transactionNumbers: [store.identifier: 99])
        #expect(try #require(throws: ArborError.self) { try stack.context().setQueryGenerationFrom(beyond) }.code == .misuse)
        let foreign = QueryGenerationToken(transactionNumbers: [UUID(): 1])
        #expect(try #require(throws: ArborError.self) { try stack.context().setQueryGenerationFrom(foreign) }.code == .misuse)
        let root = ManagedObjectContext(concurrencyType: .privateQueue)
        root.persistentStoreCoordinator = stack.coordinator
        let child = ManagedObjectContext(concurrencyType: .privateQueue)
        child.parent = root
        #expect(try #require(throws: ArborError.self) { try child.performAndWait { try child.setQueryGenerationFrom(.current) } }.code == .misuse)

        for name in ["B", "C"] {
            try department.setValue(name, forKey: "name")
            try writer.save()
        }
        // Everything is asked to go; what the pin reads stays.
        var everything = PersistentHistoryChangeRequest.deleteHistory(before: nil as PersistentHistoryToken?)
        everything.resultType = .count
        #expect(try writer.execute(everything).count == 1)
        #expect(try HistoryTests.history(writer).count == 2)
        let late = stack.context()
        try late.setQueryGenerationFrom(token)
        #expect(try late.existingObject(with: department.objectID).value(forKey: "name") as? String == "A")
        // Unpinned, the pins go with it.
        try pinned.setQueryGenerationFrom(nil)
        try late.setQueryGenerationFrom(nil)
        #expect(try writer.execute(everything).count == 2)
        #expect(try #require(throws: ArborError.self) { try stack.context().setQueryGenerationFrom(token) }.code == .persistentHistoryTokenExpired)
    }
}

extension QueryGenerationTests {
    @Test("many-to-many links added and removed since the generation are rolled back on both sides")
    func linksAsTheyWere() throws {
        let stack = try HistoryTests.tracking(try BatchDeleteTests.model())
        let writer = stack.context()
        let ann = try stack.insert("Employee", in: writer, ["name": "Ann", "email": "ann@x", "salary": Int64(1000)])
        let apollo = try stack.insert("Project", in: writer, ["title": "Apollo"])
        let gemini = try stack.insert("Project", in: writer, ["title": "Gemini"])
        try ann.setValue(Set([apollo]), forKey: "projects")
        try writer.save()
        let pinned = stack.context()
        try pinned.setQueryGenerationFrom(.current)
        try ann.setValue(Set([gemini]), forKey: "projects")
        try writer.save()
        let history = try HistoryTests.history(writer)
        let annThen = try pinned.existingObject(with: ann.objectID)
        let projects = try #require(try annThen.value(forKey: "projects") as? Set<ManagedObject>)
        #expect(projects.map(\.objectID) == [apollo.objectID], "\(history.last?.changes ?? [])")
        let geminiThen = try pinned.existingObject(with: gemini.objectID)
        #expect(try (geminiThen.value(forKey: "members") as? Set<ManagedObject>)?.isEmpty == true)
        let apolloThen = try pinned.existingObject(with: apollo.objectID)
        #expect(try (apolloThen.value(forKey: "members") as? Set<ManagedObject>)?.map(\.objectID) == [ann.objectID])
    }
}
