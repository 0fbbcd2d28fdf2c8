import ArborStore
import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// Issue 28, item 2: persistent history (docs/history.md). Every save and batch request of a
/// store that tracks history records, in its own engine transaction, a transaction and a change
/// per row with the old and new values.
@Suite("Persistent history")
struct HistoryTests {
    /// A stack over an in-memory store that tracks history.
    static func tracking(_ model: ManagedObjectModel) throws -> Stack {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addInMemoryStore(history: .on)
        return Stack(model: model, coordinator: coordinator)
    }

    static func history(_ context: ManagedObjectContext, after token: PersistentHistoryToken? = nil) throws -> [PersistentHistoryTransaction] {
        try context.execute(.fetchHistory(after: token)).transactions ?? []
    }

    @Test("a save records its transaction (author, context name, process) and each change with its old and new values; a delete keeps a tombstone")
    func recordsSaves() throws {
        let stack = try Self.tracking(try BatchDeleteTests.model())
        let context = stack.context()
        // Seed 001: "The author for the context that is used as an identifier in persistent
        // history transactions."
        context.transactionAuthor = "importer"
        context.name = "import context"
        let department = try stack.insert("Department", in: context, ["name": "Research"])
        let ada = try stack.insert("Employee", in: context, ["name": "Ada", "email": "ada@x", "salary": Int64(5000), "department": department, "note": "transient"])
        let grace = try stack.insert("Employee", in: context, ["name": "Grace", "email": "grace@x", "salary": Int64(6000), "manager": ada])
        try context.save()

        context.transactionAuthor = "editor"
        context.name = nil
        try ada.setValue(Int64(5500), forKey: "salary")
        try grace.setValue(department, forKey: "department")
        try context.save()
        context.delete(grace)
        try context.save()

        let transactions = try Self.history(context)
        try #require(transactions.count == 3)
        let (insert, update, delete) = (transactions[0], transactions[1], transactions[2])
        #expect(transactions.map(\.transactionNumber) == [1, 2, 3])
        #expect(insert.author == "importer" && insert.contextName == "import context")
        #expect(update.author == "editor" && update.contextName == nil)
        #expect(insert.processID == ProcessInfo.processInfo.processIdentifier && insert.processName == ProcessInfo.processInfo.processName)
        #expect(transactions.allSatisfy { $0.kind == .save && $0.changeCount == $0.changes?.count })
        #expect(insert.timestamp <= update.timestamp && update.timestamp <= delete.timestamp)

        // The insertion: every stored property of each new object, under its permanent ID.
        let inserted = try #require(insert.changes)
        #expect(inserted.map(\.changeType) == [.insert, .insert, .insert])
        #expect(Set(inserted.map(\.changedObjectID)) == [department.objectID, ada.objectID, grace.objectID])
        #expect(inserted.allSatisfy { !$0.changedObjectID.isTemporaryID })
        let adaInserted = try #require(inserted.first { $0.changedObjectID == ada.objectID })
        #expect(adaInserted.newValues["salary"] == .attribute(.integer(5000)))
        #expect(adaInserted.newValues["department"] == .object(department.objectID))
        #expect(adaInserted.newValues["manager"] == nil, "an insert records the values that are not nil")
        #expect(adaInserted.newValues["note"] == nil, "a transient attribute is not stored, so not recorded")
        #expect(adaInserted.oldValues.isEmpty && adaInserted.updatedProperties == nil && adaInserted.tombstone == nil)

        // The update: only what changed, from what to what.
        let updated = try #require(update.changes)
        let adaUpdated = try #require(updated.first { $0.changedObjectID == ada.objectID })
        #expect(adaUpdated.changeType == .update)
        #expect(adaUpdated.updatedProperties == ["salary"])
        #expect(adaUpdated.oldValues == ["salary": .attribute(.integer(5000))] && adaUpdated.newValues == ["salary": .attribute(.integer(5500))])
        let graceUpdated = try #require(updated.first { $0.changedObjectID == grace.objectID })
        #expect(graceUpdated.updatedProperties == ["department"])
        #expect(graceUpdated.oldValues["department"] == .null && graceUpdated.newValues["department"] == .object(department.objectID))

        // The deletion: every stored value before it.
        let deleted = try #require(delete.changes?.first { $0.changedObjectID == grace.objectID })
        #expect(deleted.changeType == .delete && deleted.newValues.isEmpty)
        #expect(deleted.tombstone?["email"] == .string("grace@x") && deleted.tombstone?["salary"] == .integer(6000))
        #expect(deleted.oldValues["manager"] == .object(ada.objectID))
        // Grace's deletion changes no other row (the to-many sides are not stored in rows).
        #expect(delete.changes?.count == 1)
    }

    @Test("many-to-many links and ordered lists are recorded; a save that changes nothing stored records nothing")
    func recordsRelationships() throws {
        let stack = try Self.tracking(try BatchDeleteTests.model())
        let context = stack.context()
        let ada = try stack.insert("Employee", in: context, ["name": "Ada", "email": "ada@x", "salary": Int64(1)])
        let project = try stack.insert("Project", in: context, ["title": "P"])
        let first = try stack.insert("Milestone", in: context, ["title": "M1"])
        let second = try stack.insert("Milestone", in: context, ["title": "M2"])
        try project.setValue([first, second], forKey: "milestones")
        try ada.setValue(Set([project]), forKey: "projects")
        try context.save()
        let token = try #require(try stack.coordinator.currentPersistentHistoryToken())

        try project.setValue([second, first], forKey: "milestones")
        try ada.setValue(Set<ManagedObject>(), forKey: "projects")
        try context.save()
        try ada.setValue("transient only", forKey: "note")
        try context.save()

        let all = try Self.history(context)
        #expect(all.count == 2, "the third save changed no stored value")
        let created = try #require(all.first?.changes)
        let projectInserted = try #require(created.first { $0.changedObjectID == project.objectID })
        #expect(projectInserted.newValues["milestones"] == .orderedObjects([first.objectID, second.objectID]))
        let links = created.filter { $0.changeType == .update }
        #expect(links.count == 1)
        let link = try #require(links.first)
        let side = link.changedObjectID == ada.objectID ? (project.objectID, "projects") : (ada.objectID, "members")
        #expect(link.newValues[side.1] == .links(added: [side.0], removed: []))

        let later = try Self.history(context, after: token)
        try #require(later.count == 1)
        let changes = try #require(later[0].changes)
        let reordered = try #require(changes.first { $0.changedObjectID == project.objectID && $0.updatedProperties == ["milestones"] })
        #expect(reordered.oldValues["milestones"] == .orderedObjects([first.objectID, second.objectID]))
        #expect(reordered.newValues["milestones"] == .orderedObjects([second.objectID, first.objectID]))
        #expect(changes.contains { $0.newValues.values.contains(.links(added: [], removed: [side.0])) })
    }

    @Test("only links that change are recorded: a context removing a link a batch delete already removed records nothing for it")
    func recordsEffectiveLinks() throws {
        let stack = try Self.tracking(try BatchDeleteTests.model())
        let context = stack.context()
        let ann = try stack.insert("Employee", in: context, ["name": "Ann", "email": "ann@x", "salary": Int64(1)])
        let apollo = try stack.insert("Project", in: context, ["title": "Apollo"])
        try ann.setValue(Set([apollo]), forKey: "projects")
        try context.save()
        _ = try apollo.value(forKey: "members")
        _ = try context.execute(BatchDeleteRequest(objectIDs: [ann.objectID]))
        try apollo.setValue("Apollo 2", forKey: "title")
        try context.save()
        let last = try #require(try Self.history(context).last)
        #expect(last.changes?.map(\.changedObjectID) == [apollo.objectID])
        #expect(last.changes?.first?.updatedProperties == ["title"])
    }

    @Test("batch deletes (their cascades and nullified rows included) and batch updates are recorded as their kind")
    func recordsBatchRequests() throws {
        let stack = try Self.tracking(try BatchDeleteTests.model())
        try BatchDeleteTests.fill(stack, seed: 0x4157_0001, employees: 40)
        let context = stack.context()
        context.transactionAuthor = "cleanup"
        let token = try #require(try stack.coordinator.currentPersistentHistoryToken())

        var update = BatchUpdateRequest(entityName: "Employee")
        update.predicate = try ObjectPredicate(format: "salary < 5000")
        update.propertiesToUpdate = ["salary": try ObjectExpression(format: "salary + 1")]
        update.resultType = .objectIDs
        let raised = try #require(try context.execute(update).updatedObjectIDs)
        var delete = BatchDeleteRequest(fetchRequest: try FetchRequest<ManagedObject>(entityName: "Department", format: "name == 'D1'"))
        delete.resultType = .objectIDs
        let deletion = try context.execute(delete)

        let transactions = try Self.history(context, after: token)
        try #require(transactions.count == (raised.isEmpty ? 1 : 2))
        if !raised.isEmpty {
            #expect(transactions[0].kind == .batchUpdate && transactions[0].author == "cleanup")
            let changes = try #require(transactions[0].changes)
            #expect(Set(changes.map(\.changedObjectID)) == Set(raised))
            for change in changes {
                guard case .attribute(.integer(let old)) = change.oldValues["salary"], case .attribute(.integer(let new)) = change.newValues["salary"] else {
                    Issue.record("\(change)")
                    continue
                }
                #expect(new == old + 1 && change.updatedProperties == ["salary"])
            }
        }
        let recorded = try #require(transactions.last)
        #expect(recorded.kind == .batchDelete)
        let changes = try #require(recorded.changes)
        #expect(Set(changes.filter { $0.changeType == .delete }.map(\.changedObjectID)) == Set(deletion.deletedObjectIDs ?? []))
        #expect(Set(changes.filter { $0.changeType == .update }.map(\.changedObjectID)) == Set(deletion.updatedObjectIDs ?? []))
    }

    /// The values of every stored row, by object: attributes, to-ones and ordered lists
    /// (nil and empty left out), as history records them.
    typealias State = [ManagedObjectID: [String: PersistentHistoryValue]]

    /// The store's rows as a ``State``, and its many-to-many pairs (employee, project).
    static func state(_ stack: Stack) throws -> (rows: State, pairs: Set<[ManagedObjectID]>) {
        let store = try #require(stack.coordinator.persistentStores.first as? NativeStore)
        let context = stack.context()
        var rows: State = [:]
        var pairs: Set<[ManagedObjectID]> = []
        for entity in stack.model.entities {
            var request = FetchRequest<ManagedObject>(entityName: entity.name)
            request.includesSubentities = false
            for object in try context.fetch(request) {
                let row = try #require(try store.row(for: object.objectID))
                var values: [String: PersistentHistoryValue] = [:]
                for (key, value) in row.attributes { values[key] = .attribute(value) }
                for (key, id) in row.toOne { values[key] = .object(id) }
                for relationship in entity.relationships where relationship.isToMany && relationship.isOrdered {
                    let list = try store.relatedObjectIDs(of: object.objectID, relationship: relationship)
                    if !list.isEmpty { values[relationship.name] = .orderedObjects(list) }
                }
                rows[object.objectID] = values
                if entity.name == "Employee" || entity.name == "Contractor" {
                    for project in try store.relatedObjectIDs(of: object.objectID, relationship: entity.relationshipsByName["projects"]!) {
                        pairs.insert([object.objectID, project])
                    }
                }
            }
        }
        return (rows, pairs)
    }

    /// `values` with nils and empty lists left out.
    static func normalized(_ values: [String: PersistentHistoryValue]) -> [String: PersistentHistoryValue] {
        values.filter {
            if case .links = $0.value { return false }
            return $0.value != .null && $0.value != .orderedObjects([])
        }
    }

    /// The many-to-many pair of a link change on either side, employee first.
    static func pair(_ change: PersistentHistoryChange, _ other: ManagedObjectID, key: String) -> [ManagedObjectID] {
        key == "projects" ? [change.changedObjectID, other] : [other, change.changedObjectID]
    }

    /// Applies `transactions` forward to `state`: inserts, updates' new values, links, deletes.
    static func replay(_ transactions: [PersistentHistoryTransaction], onto state: inout (rows: State, pairs: Set<[ManagedObjectID]>)) {
        for change in transactions.flatMap({ $0.changes ?? [] }) {
            switch change.changeType {
            case .insert:
                state.rows[change.changedObjectID] = normalized(change.newValues)
            case .delete:
                state.rows[change.changedObjectID] = nil
                state.pairs = state.pairs.filter { !$0.contains(change.changedObjectID) }
            case .update:
                var values = state.rows[change.changedObjectID] ?? [:]
                for (key, value) in change.newValues {
                    if case .links(let added, let removed) = value {
                        for other in added { state.pairs.insert(pair(change, other, key: key)) }
                        for other in removed { state.pairs.remove(pair(change, other, key: key)) }
                    } else {
                        values[key] = value
                    }
                }
                state.rows[change.changedObjectID] = normalized(values)
            }
        }
    }

    /// Undoes `transactions`, newest first, from `state` with their old values.
    static func rollBack(_ transactions: [PersistentHistoryTransaction], from state: inout (rows: State, pairs: Set<[ManagedObjectID]>)) {
        for change in transactions.flatMap({ $0.changes ?? [] }).reversed() {
            switch change.changeType {
            case .insert:
                state.rows[change.changedObjectID] = nil
            case .delete:
                state.rows[change.changedObjectID] = normalized(change.oldValues)
                for (key, value) in change.oldValues {
                    if case .links(_, let removed) = value { for other in removed { state.pairs.insert(pair(change, other, key: key)) } }
                }
            case .update:
                var values = state.rows[change.changedObjectID] ?? [:]
                for (key, value) in change.newValues {
                    if case .links(let added, let removed) = value {
                        for other in added { state.pairs.remove(pair(change, other, key: key)) }
                        for other in removed { state.pairs.insert(pair(change, other, key: key)) }
                    } else {
                        values[key] = change.oldValues[key] ?? .null
                    }
                }
                state.rows[change.changedObjectID] = normalized(values)
            }
        }
    }

    /// One round of random edits in `context` (not saved): `employees` employees each get a new
    /// salary, department, projects or name, lose their manager or are deleted (cascading); a
    /// project's milestones are reordered with a new one; with `renaming`, a department is
    /// renamed; a new employee joins a department.
    static func randomEdits(_ stack: Stack, _ context: ManagedObjectContext, round: Int, employees count: Int, renaming: Bool = false,
                            random: inout SplitMix64) throws {
        let employees = try context.fetch(FetchRequest<ManagedObject>(entityName: "Employee"))
        let projects = try context.fetch(FetchRequest<ManagedObject>(entityName: "Project"))
        let departments = try context.fetch(FetchRequest<ManagedObject>(entityName: "Department"))
        for employee in employees.shuffled(using: &random).prefix(count) {
            switch Int.random(in: 0..<6, using: &random) {
            case 0: try employee.setValue(Int64.random(in: 1...20, using: &random) * 500, forKey: "salary")
            case 1: try employee.setValue(departments.randomElement(using: &random), forKey: "department")
            case 2: try employee.setValue(Set(projects.shuffled(using: &random).prefix(Int.random(in: 0...2, using: &random))), forKey: "projects")
            case 3: context.delete(employee)
            case 4: try employee.setValue(nil, forKey: "manager")
            default: try employee.setValue("E\(round)-\(Int.random(in: 0..<99, using: &random))", forKey: "name")
            }
        }
        if let project = projects.randomElement(using: &random), let milestones = try project.value(forKey: "milestones") as? [ManagedObject] {
            try project.setValue(milestones.shuffled(using: &random) + [try stack.insert("Milestone", in: context, ["title": "N\(round)"])], forKey: "milestones")
        }
        if renaming, let department = departments.randomElement(using: &random) { try department.setValue("R\(round)", forKey: "name") }
        _ = try stack.insert("Employee", in: context, ["name": "New\(round)", "email": "new\(round)@x", "salary": Int64(renaming ? 9000 : 1000),
                                                       "department": departments.randomElement(using: &random) as Any])
    }

    @Test("history alone rebuilds the store from nothing, and its old values roll the store back to any point (random graphs and edits, batch requests included)",
          arguments: [UInt64(0x4157_0101), 0x4157_0202, 0x4157_0303])
    func replayRebuildsTheStore(seed: UInt64) throws {
        let stack = try Self.tracking(try BatchDeleteTests.model())
        try BatchDeleteTests.fill(stack, seed: seed, employees: 50)
        let afterFill = try Self.state(stack)
        let token = try #require(try stack.coordinator.currentPersistentHistoryToken())
        var random = SplitMix64(seed: seed)
        let context = stack.context()
        for round in 0..<6 {
            try Self.randomEdits(stack, context, round: round, employees: 8, random: &random)
            try context.save()
            if round == 2 {
                var update = BatchUpdateRequest(entityName: "Employee")
                update.predicate = try ObjectPredicate(format: "salary >= 5000")
                update.propertiesToUpdate = ["salary": try ObjectExpression(format: "salary - 100")]
                _ = try context.execute(update)
            }
            if round == 4 {
                _ = try context.execute(BatchDeleteRequest(fetchRequest: try FetchRequest<ManagedObject>(entityName: "Department", format: "name == 'D2'")))
            }
        }
        let final = try Self.state(stack)
        let all = try Self.history(context)
        var rebuilt: (rows: State, pairs: Set<[ManagedObjectID]>) = ([:], [])
        Self.replay(all, onto: &rebuilt)
        #expect(rebuilt.rows == final.rows.mapValues(Self.normalized))
        #expect(rebuilt.pairs == final.pairs)

        var rolledBack = final
        rolledBack.rows = rolledBack.rows.mapValues(Self.normalized)
        Self.rollBack(try Self.history(context, after: token), from: &rolledBack)
        #expect(rolledBack.rows == afterFill.rows.mapValues(Self.normalized))
        #expect(rolledBack.pairs == afterFill.pairs)
    }

    @Test("tokens persist (Codable) and across launches; fetches after a token, a date or a transaction; predicates; deletion trims the oldest end")
    func tokensAndTrimming() throws {
        let path = try temporaryDirectory() + "/history.arbor"
        let model = try BatchDeleteTests.model()
        func open() throws -> Stack {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addNativeStore(at: path, history: .on)
            return Stack(model: model, coordinator: coordinator)
        }
        var saved = Data()
        var middle = Date.distantPast
        do {
            let stack = try open()
            let context = stack.context()
            for index in 0..<3 {
                context.transactionAuthor = index == 1 ? "sync" : "app"
                _ = try stack.insert("Department", in: context, ["name": "D\(index)"])
                try context.save()
                if index == 0 {
                    saved = try JSONEncoder().encode(try #require(try stack.coordinator.currentPersistentHistoryToken()))
                    Thread.sleep(forTimeInterval: 0.01)
                    middle = Date()
                }
            }
            #expect(try Self.history(context).count == 3)
        }
        let stack = try open()
        let context = stack.context()
        let token = try JSONDecoder().decode(PersistentHistoryToken.self, from: saved)
        let after = try Self.history(context, after: token)
        #expect(after.map(\.transactionNumber) == [2, 3])
        #expect(try context.execute(.fetchHistory(after: after[0])).transactions?.map(\.transactionNumber) == [3])
        #expect(try context.execute(.fetchHistory(after: middle)).transactions?.map(\.transactionNumber) == [2, 3])
        var bySync = PersistentHistoryChangeRequest.fetchHistory(after: nil)
        bySync.predicate = try ObjectPredicate(format: "author == %@", "sync")
        bySync.resultType = .transactionsOnly
        let sync = try #require(try context.execute(bySync).transactions)
        #expect(sync.map(\.transactionNumber) == [2] && sync[0].changes == nil)
        var unknown = PersistentHistoryChangeRequest.fetchHistory(after: nil)
        unknown.predicate = try ObjectPredicate(format: "nonsense == 1")
        #expect(try #require(throws: ArborError.self) { try context.execute(unknown) }.code == .unknownKey)

        // A new launch goes on numbering.
        _ = try stack.insert("Department", in: context, ["name": "D3"])
        try context.save()
        #expect(try Self.history(context, after: token).map(\.transactionNumber) == [2, 3, 4])

        // Deleting before a transaction keeps it and what follows.
        var deletion = PersistentHistoryChangeRequest.deleteHistory(before: after[1])
        deletion.resultType = .count
        #expect(try context.execute(deletion).count == 2)
        #expect(try Self.history(context).map(\.transactionNumber) == [3, 4])
        // A token whose next transactions were deleted has expired; one at the last deleted has not.
        let expired = try #require(throws: ArborError.self) { try Self.history(context, after: token) }
        #expect(expired.code == .persistentHistoryTokenExpired && expired.message.contains("from the start"))
        #expect(try context.execute(.fetchHistory(after: after[0])).transactions?.map(\.transactionNumber) == [3, 4])
        #expect(try context.execute(.deleteHistory(before: token)).status)
        #expect(try Self.history(context).map(\.transactionNumber) == [3, 4], "a token before what is left deletes nothing")
        var everything = PersistentHistoryChangeRequest.deleteHistory(before: nil as PersistentHistoryToken?)
        everything.resultType = .count
        #expect(try context.execute(everything).count == 2)
        #expect(try Self.history(context).isEmpty)
        #expect(try stack.coordinator.currentPersistentHistoryToken()?.transactionNumber(in: stack.coordinator.persistentStores[0].identifier) == 4,
                "the current token does not go back when the history is gone")
        // Numbers never go back, even with the history gone.
        _ = try stack.insert("Department", in: context, ["name": "D4"])
        try context.save()
        #expect(try Self.history(context).map(\.transactionNumber) == [5])
        #expect(try Database(path: path).checkIntegrity().problems.isEmpty)
    }

    @Test("history is opt-in: an untracked store has none; tracking starts with the next save; a tracking store refuses writers without it, opens read-only, and drops its history on request")
    func optIn() throws {
        let path = try temporaryDirectory() + "/optin.arbor"
        let model = try BatchDeleteTests.model()
        func stack(_ history: PersistentHistoryTracking, readOnly: Bool = false) throws -> Stack {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            var options = DatabaseOptions()
            options.readOnly = readOnly
            try coordinator.addNativeStore(at: path, options: options, history: history)
            return Stack(model: model, coordinator: coordinator)
        }
        func trees() throws -> Set<String> {
            let database = try Database(path: path)
            defer { database.close() }
            return try database.read { Set(try $0.trees().map(\.name)) }
        }
        func hashes() throws -> [String: String] {
            let database = try Database(path: path)
            defer { database.close() }
            let bytes = try database.read { try $0.tree(named: "arbor.metadata")?.get(Array("hashes".utf8)) }
            return try JSONDecoder().decode([String: String].self, from: Data(try #require(bytes)))
        }
        do {
            let plain = try stack(.off)
            let context = plain.context()
            _ = try plain.insert("Department", in: context, ["name": "Untracked"])
            try context.save()
            #expect(try Self.history(context).isEmpty)
            #expect(try plain.coordinator.currentPersistentHistoryToken() == nil)
        }
        #expect(try trees().isDisjoint(with: [HistoryRecords.transactionsTree, HistoryRecords.changesTree]))
        #expect(try hashes()[NativeStore.trackingHashKey] == nil)
        do {
            let tracked = try stack(.on)
            let context = tracked.context()
            #expect(try Self.history(context).isEmpty, "saves before tracking are not made up")
            _ = try tracked.insert("Department", in: context, ["name": "Tracked"])
            try context.save()
            #expect(try Self.history(context).map { $0.changes?.count } == [1])
        }
        // Builds that do not know history refuse the store: its hashes name something no model has.
        #expect(try hashes()[NativeStore.trackingHashKey] == "01")
        let refusal = #expect(throws: ArborError.self) { try stack(.off) }
        #expect(refusal?.code == .storeOpen)
        #expect(refusal?.message.contains("persistentHistoryTracking") == true)
        do {
            let reader = try stack(.off, readOnly: true)
            #expect(try Self.history(reader.context()).count == 1)
        }
        do {
            let dropped = try stack(.dropRecorded)
            let context = dropped.context()
            #expect(try Self.history(context).isEmpty)
            _ = try dropped.insert("Department", in: context, ["name": "After"])
            try context.save()
        }
        // The transactions tree stays, emptied, for its numbering.
        #expect(try !trees().contains(HistoryRecords.changesTree))
        #expect(try hashes()[NativeStore.trackingHashKey] == nil)
        do {
            let reopened = try stack(.off)
            #expect(try reopened.context().count(for: FetchRequest<ManagedObject>(entityName: "Department")) == 3)
        }
        // Tracking again, numbers go on from the dropped ones: a token of before the drop has expired.
        let again = try stack(.on)
        let context = again.context()
        _ = try again.insert("Department", in: context, ["name": "Again"])
        try context.save()
        #expect(try Self.history(context).map(\.transactionNumber) == [2])
        let old = PersistentHistoryToken(transactionNumbers: [again.coordinator.persistentStores[0].identifier: 0])
        #expect(try #require(throws: ArborError.self) { try Self.history(context, after: old) }.code == .persistentHistoryTokenExpired)
    }

    @Test("a store refuses to write when another process started recording history, or deleted it, after it opened: no hole, no history without its flag")
    func trackingChangedUnderTheStore() throws {
        let path = try temporaryDirectory() + "/changed.arbor"
        let model = try BatchDeleteTests.model()
        func stack(_ history: PersistentHistoryTracking) throws -> Stack {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addNativeStore(at: path, history: history)
            return Stack(model: model, coordinator: coordinator)
        }
        func count() throws -> Int {
            try stack(.on).context().count(for: FetchRequest<ManagedObject>(entityName: "Department"))
        }
        do {
            let untracked = try stack(.off)
            let context = untracked.context()
            _ = try untracked.insert("Department", in: context, ["name": "Before"])
            try context.save()
            _ = try stack(.on)
            _ = try untracked.insert("Department", in: context, ["name": "Hole"])
            let refusal = try #require(throws: ArborError.self) { try context.save() }
            #expect(refusal.code == .storeSave && refusal.message.contains("started recording"))
            #expect(context.hasChanges, "the refused save loses nothing")
        }
        #expect(try count() == 1)
        do {
            let tracked = try stack(.on)
            let context = tracked.context()
            _ = try tracked.insert("Department", in: context, ["name": "Recorded"])
            try context.save()
            _ = try stack(.dropRecorded)
            _ = try tracked.insert("Department", in: context, ["name": "Orphan"])
            let refusal = try #require(throws: ArborError.self) { try context.save() }
            #expect(refusal.code == .storeSave && refusal.message.contains("deleted the persistent history"))
        }
        #expect(try count() == 2)
        let database = try Database(path: path)
        defer { database.close() }
        #expect(try database.read { try $0.tree(named: HistoryRecords.changesTree) } == nil, "no history was written without the flag")
    }

    @Test("a power cut at any I/O operation of a tracked save or batch request leaves the rows and their history both as before or both as after")
    func powerCut() throws {
        let update = try BatchDeleteTests.checkPowerCuts(history: true) { context in
            var request = BatchUpdateRequest(entityName: "Employee")
            request.predicate = try ObjectPredicate(format: "salary < 6000")
            request.propertiesToUpdate = ["salary": try ObjectExpression(format: "salary * 2")]
            _ = try context.execute(request)
        }
        let save = try BatchDeleteTests.checkPowerCuts(history: true) { context in
            let employees = try context.fetch(try FetchRequest<ManagedObject>(entityName: "Employee", format: "salary > 5000"))
            for employee in employees { try employee.setValue("Renamed", forKey: "name") }
            if let first = employees.first { context.delete(first) }
            try context.save()
        }
        #expect(update.images > 0 && save.images > 0)
    }

    @Test("a lightweight migration keeps the history and its tracking; numbering goes on")
    func migrationKeepsHistory() throws {
        let path = try temporaryDirectory() + "/migrating.arbor"
        let old = try ManagedObjectModel { Entity("Note") { Attribute("text", .string) } }
        let new = try ManagedObjectModel {
            Entity("Note") {
                Attribute("text", .string)
                Attribute("pinned", .boolean).defaultValue(false)
            }
        }
        do {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: old)
            try coordinator.addNativeStore(at: path, history: .on)
            let stack = Stack(model: old, coordinator: coordinator)
            let context = stack.context()
            _ = try stack.insert("Note", in: context, ["text": "first"])
            try context.save()
        }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: new)
        let store = try coordinator.addNativeStore(at: path, history: .on)
        #expect(store.migration != nil && store.tracksHistory)
        let stack = Stack(model: new, coordinator: coordinator)
        let context = stack.context()
        _ = try stack.insert("Note", in: context, ["text": "second", "pinned": true])
        try context.save()
        let transactions = try Self.history(context)
        #expect(transactions.map(\.transactionNumber) == [1, 2])
        #expect(transactions.first?.changes?.first?.newValues["text"] == .attribute(.string("first")))
        #expect(transactions.last?.changes?.first?.newValues["pinned"] == .attribute(.boolean(true)))
        // Still refused by writers without tracking after the migration rewrote the hashes.
        #expect(throws: ArborError.self) { try NativeStore(path: path, model: new) }
    }

    @Test("a staged migration with a custom stage, which makes every object anew, keeps the history and its numbering (tokens stay valid); the stages' own writes are not recorded")
    func stagedMigrationKeepsHistory() throws {
        let (path, _) = try MigrationTests.makeStore()
        let models = try StagedMigrationTests.versions()
        do {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: models[0])
            try coordinator.addNativeStore(at: path, history: .on)
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            let book = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Book")).first)
            try book.setValue("Changed", forKey: "title")
            try context.save()
        }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: models[2])
        let store = try coordinator.addNativeStore(at: path, migration: StagedMigrationTests.options(StagedMigrationTests.plan(models)), history: .on)
        #expect(store.migration?.kind == "staged" && store.tracksHistory)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let before = try Self.history(context)
        #expect(before.map(\.transactionNumber) == [1])
        #expect(before.first?.changes?.first?.newValues["title"] == .attribute(.string("Changed")))
        let book = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Book")).first)
        try book.setValue("Again", forKey: "name")
        try context.save()
        #expect(try Self.history(context, after: before[0].token).map(\.transactionNumber) == [2])
        #expect(throws: ArborError.self) { try NativeStore(path: path, model: models[2]) }
    }

    @Test("damaged history records are a typed error, never a crash")
    func damagedRecords() throws {
        let stack = try Self.tracking(try BatchDeleteTests.model())
        let context = stack.context()
        _ = try stack.insert("Department", in: context, ["name": "D"])
        try context.save()
        let store = try #require(stack.coordinator.persistentStores.first as? NativeStore)
        for damage in [[UInt8](), [0xFF, 0x00], KeyEncoding.encode([.int(1), .string("Department"), .int(1), .int(5)])] {
            try store.database.write { transaction in
                try transaction.tree(named: HistoryRecords.changesTree)!.put(HistoryRecords.changeKey(1, 0), damage)
            }
            #expect(throws: ArborError.self) { try Self.history(context) }
        }
        try store.database.write { transaction in
            try transaction.tree(named: HistoryRecords.transactionsTree)!.put(HistoryRecords.transactionKey(1), [1, 2, 3])
        }
        #expect(throws: ArborError.self) { try context.execute(.fetchHistory(after: nil)) }
        // The current token is the numbering's, whatever the records hold.
        #expect(try stack.coordinator.currentPersistentHistoryToken()?.transactionNumber(in: store.identifier) == 1)
        // A record claiming more changes than memory holds reserves no more than it reads.
        let good = HistoryRecords.transactionRecord(timestamp: Date(), origin: TransactionOrigin(), processID: 1, processName: "p",
                                                    changeCount: Int(Int64.max), names: [])
        try store.database.write { transaction in
            try transaction.tree(named: HistoryRecords.transactionsTree)!.put(HistoryRecords.transactionKey(1), good)
            try transaction.tree(named: HistoryRecords.changesTree)!.put(HistoryRecords.changeKey(1, 0),
                                                                        KeyEncoding.encode([.int(0), .int(0), .int(1), .int(0)]))
        }
        #expect(throws: ArborError.self) { try context.execute(.fetchHistory(after: nil)) }
        // A hostile token asks for nothing past the last number instead of trapping.
        let hostile = PersistentHistoryToken(transactionNumbers: [store.identifier: .max])
        #expect(try context.execute(.fetchHistory(after: hostile)).transactions?.isEmpty == true)
    }
}
