import ArborTestSupport
import Dispatch
import Foundation
import Synchronization
import Testing
@testable import Arbor

/// Issue 26, item 7: random graphs and random requests — predicates through to-one, to-many and
/// many-to-many key paths, counts and subqueries, sorts and windows, groupings with aggregates and
/// having — and the store's answers must equal in-memory evaluation over the same objects
/// (docs/relational-planning.md, "Differential testing"). The grammar is ArborTestSupport's
/// `RelationalGrammar`, shared with the planner's fuzz target (Fuzz/Sources/FuzzPlanner).
///
/// Each graph (`JoinTests.Graph`, varied) runs from a seed: a few fixed ones, and random ones new
/// every run. A failure names its seed and case; `ARBOR_DIFFERENTIAL_SEED=<seed>` runs that seed
/// alone (decimal or 0x-hexadecimal, several separated by commas), `ARBOR_DIFFERENTIAL_GRAPHS=<n>`
/// checks n graphs instead of 8.
@Suite("Differential: the store against in-memory evaluation")
struct DifferentialTests {
    static let fixedSeeds: [UInt64] = [0xD1FF_0001, 0xD1FF_0002, 0x2642_0007]
    /// Graphs checked per run (fixed seeds first, then random ones), on as many threads as cores.
    static let graphs = 8
    static let objectCases = 900
    static let groupingCases = 120
    static let pendingBatches = 5
    static let casesPerBatch = 50

    /// What one graph's checks found.
    struct Report: Sendable {
        var cases = 0
        /// Object cases whose plan ran a join in the store (explain names a "join ").
        var storeJoins = 0
        var objectCases = 0
        /// Dictionary cases the store grouped itself (no object made).
        var storeGroupings = 0
        var groupingCases = 0
        /// Cases with unsaved changes in the context, and those whose plan joined in the store
        /// and merged the changes after.
        var pendingCases = 0
        var pendingJoins = 0
        var failures: [String] = []

        mutating func add(_ other: Report) {
            cases += other.cases
            storeJoins += other.storeJoins
            objectCases += other.objectCases
            storeGroupings += other.storeGroupings
            groupingCases += other.groupingCases
            pendingCases += other.pendingCases
            pendingJoins += other.pendingJoins
            failures += other.failures
        }
    }

    static func seeds() -> [UInt64] {
        if let given = ProcessInfo.processInfo.environment["ARBOR_DIFFERENTIAL_SEED"], !given.isEmpty {
            return given.split(separator: ",").compactMap { text in
                let text = text.trimmingCharacters(in: .whitespaces)
                return text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
            }
        }
        // A longer campaign: ARBOR_DIFFERENTIAL_GRAPHS=64 checks 64 graphs.
        let count = ProcessInfo.processInfo.environment["ARBOR_DIFFERENTIAL_GRAPHS"].flatMap { Int($0) } ?? graphs
        return fixedSeeds + (fixedSeeds.count..<max(count, fixedSeeds.count)).map { _ in UInt64.random(in: 0...UInt64.max) }
    }

    @Test("random predicates, sorts, windows and groupings on random graphs: the store's answers are in-memory evaluation's, with and without unsaved changes (10,000 cases or more)")
    func storeEqualsMemory() throws {
        let seeds = Self.seeds()
        let reports = Mutex<[Report]>([])
        DispatchQueue.concurrentPerform(iterations: seeds.count) { index in
            var report: Report
            do {
                report = try Self.check(seed: seeds[index])
            } catch {
                report = Report(failures: ["seed \(hex(seeds[index])): \(error)"])
            }
            reports.withLock { $0.append(report) }
        }
        var total = Report()
        for report in reports.withLock({ $0 }) { total.add(report) }
        for failure in total.failures.prefix(25) { Issue.record(Comment(rawValue: failure)) }
        #expect(total.failures.isEmpty, "\(total.failures.count) disagreements (seeds \(seeds.map(hex)); rerun one with ARBOR_DIFFERENTIAL_SEED=<seed>)")
        let fullRun = ProcessInfo.processInfo.environment["ARBOR_DIFFERENTIAL_SEED"] == nil
        if fullRun { #expect(total.cases >= 10_000, "\(total.cases) cases") }
        // The plans exercise the store: joins, groupings in one pass, pending changes merged.
        #expect(total.storeJoins * 5 >= total.objectCases * 2, "\(total.storeJoins) of \(total.objectCases) object cases ran a join in the store")
        #expect(total.storeGroupings * 2 >= total.groupingCases, "\(total.storeGroupings) of \(total.groupingCases) dictionary cases grouped in the store")
        if fullRun {
            #expect(total.pendingJoins * 40 >= total.pendingCases, "\(total.pendingJoins) of \(total.pendingCases) cases with unsaved changes joined in the store, then merged the changes")
        }
        print("Differential: \(total.cases) cases on \(seeds.count) graphs (seeds \(seeds.map(hex).joined(separator: ", "))): \(total.objectCases) object fetches (\(total.storeJoins) with joins in the store), \(total.groupingCases) groupings (\(total.storeGroupings) in the store), \(total.pendingCases) with unsaved changes (\(total.pendingJoins) joined in the store and merged)")
    }

    // MARK: One graph

    /// Every check on the graph of `seed`.
    static func check(seed: UInt64) throws -> Report {
        var random = SplitMix64(seed: seed)
        let graph = try JoinTests.Graph(seed: seed, people: Int.random(in: 40...90, using: &random), varied: true)
        let oracle = try Oracle(graph.stack.context(), model: graph.stack.model)
        var report = Report()
        func fail(_ label: String, _ message: String) {
            report.failures.append("seed \(hex(seed)), \(label): \(message)")
        }

        // Object fetches and counts in contexts without changes (a fresh one now and then, so
        // that objects are faults, then registered and loaded).
        var reader = graph.stack.context()
        for index in 0..<objectCases {
            if index % 200 == 0 { reader = graph.stack.context() }
            let request = RandomRequest(&random)
            let label = "object case \(index): \(request)"
            do {
                let plan = try request.explain(in: reader)
                if plan.contains("join ") { report.storeJoins += 1 }
                // A count of a request with work left for objects is the fetch's (the same
                // objects, counted): checked one time in four.
                let counts = index % (plan.contains("then in memory") ? 4 : 2) == 0
                if let message = try compare(request, in: reader, all: oracle.objects(of: request.entity), lookup: oracle.byID, counts: counts) { fail(label, message) }
            } catch {
                fail(label, "\(error)")
            }
            report.cases += 1
            report.objectCases += 1
        }

        // Grouped dictionaries: the store's (a context without changes) against objects' (a
        // context with an unsaved note: the same plan, then objects grouped) and against grouping
        // in memory.
        let noting = graph.stack.context()
        let grouper = graph.stack.context()
        _ = try graph.stack.insert("Note", in: noting, ["text": "forces the object path"])
        for index in 0..<groupingCases {
            let request = RandomGrouping(&random)
            let label = "grouping case \(index): \(request)"
            do {
                if try request.groupsInStore(graph.stack.model) { report.storeGroupings += 1 }
                if let message = try compareGrouping(request, store: grouper, objects: noting, oracle: oracle) { fail(label, message) }
            } catch {
                fail(label, "\(error)")
            }
            report.cases += 1
            report.groupingCases += 1
        }

        // Unsaved changes: inserts, edits and deletes; the answers are those of the context's
        // current state.
        for batch in 0..<pendingBatches {
            let editing = graph.stack.context()
            let state = try Oracle(editing, model: graph.stack.model)
            let edits = try state.edit(&random, stack: graph.stack)
            for index in 0..<casesPerBatch {
                let request = RandomRequest(&random)
                let label = "pending batch \(batch) (\(edits)), case \(index): \(request)"
                do {
                    let plan = try request.explain(in: editing)
                    if plan.contains("join "), plan.contains("merge ") { report.pendingJoins += 1 }
                    if let message = try compare(request, in: editing, all: state.objects(of: request.entity), lookup: state.byID) { fail(label, message) }
                } catch {
                    fail(label, "\(error)")
                }
                report.cases += 1
                report.pendingCases += 1
            }
            for index in 0..<casesPerBatch / 5 {
                let request = RandomGrouping(&random)
                let label = "pending batch \(batch) (\(edits)), grouping \(index): \(request)"
                do {
                    if let message = try compareWithMemory(request, in: editing, oracle: state) { fail(label, message) }
                } catch {
                    fail(label, "\(error)")
                }
                report.cases += 1
                report.pendingCases += 1
            }
        }
        return report
    }

    // MARK: Object fetches

    /// A random fetch of objects (or IDs): entity, predicate, sorts, window.
    struct RandomRequest: CustomStringConvertible {
        let entity: String
        let format: String
        let sorts: [ObjectSortDescriptor]
        let offset: Int
        let limit: Int
        let asIDs: Bool

        init(_ random: inout SplitMix64) {
            entity = RelationalGrammar.fetchedEntities.randomElement(using: &random)!
            format = RelationalGrammar.predicate(for: entity, &random)
            sorts = RelationalGrammar.sorts(for: entity, &random).map(DifferentialTests.descriptor)
            (offset, limit) = RelationalGrammar.window(&random)
            asIDs = Bool.random(using: &random)
        }

        func request<Result>(_: Result.Type) throws -> FetchRequest<Result> {
            var request = try FetchRequest<Result>(entityName: entity, format: format)
            request.sortDescriptors = sorts
            request.fetchOffset = offset
            request.fetchLimit = limit
            return request
        }

        func explain(in context: ManagedObjectContext) throws -> String { try request(ManagedObjectID.self).explain(in: context) }

        var description: String {
            "\(entity) where \(format)" + (sorts.isEmpty ? "" : " sorted by \(sorts.map(\.description).joined(separator: ", "))")
                + (offset > 0 ? " offset \(offset)" : "") + (limit > 0 ? " limit \(limit)" : "") + (asIDs ? " (IDs)" : " (objects)")
        }
    }

    static func descriptor(_ sort: RelationalGrammar.Sort) -> ObjectSortDescriptor {
        var options: ComparisonPredicate.Options = []
        if sort.caseInsensitive { options.insert(.caseInsensitive) }
        if sort.diacriticInsensitive { options.insert(.diacriticInsensitive) }
        return ObjectSortDescriptor(key: sort.key, ascending: sort.ascending, options: options)
    }

    /// The fetch and the count of `request` in `context` against `all` (the entity's objects as
    /// the context holds them) filtered by the predicate, sorted and windowed in memory. Ties of
    /// the sort may come in any order: each fetched object must tie with the one expected at its
    /// place, match, and come once. Nil when they agree, else what differs.
    static func compare(_ random: RandomRequest, in context: ManagedObjectContext, all: [ManagedObject],
                        lookup: [ManagedObjectID: ManagedObject], counts: Bool = true) throws -> String? {
        let request = try random.request(ManagedObjectID.self)
        let fetched = random.asIDs ? try context.fetch(request) : try context.fetch(random.request(ManagedObject.self)).map(\.objectID)
        let counted = counts ? try context.count(for: request) : nil
        guard let predicate = request.predicate else { return "the format \(random.format) made no predicate" }
        let matching = try all.filter { try predicate.evaluate(with: $0) }
        let ordered = random.sorts.isEmpty ? matching : try matching.sorted(by: random.sorts)
        let expected = ordered.window(offset: random.offset, limit: random.limit)
        let matchingIDs = Set(matching.map(\.objectID))
        func names(_ ids: some Sequence<ManagedObjectID>) -> String { ids.map { "\($0.entityName)/\($0.key)" }.sorted().joined(separator: " ") }
        if let counted, counted != expected.count { return "count \(counted), expected \(expected.count)" }
        if fetched.count != expected.count || Set(fetched).count != fetched.count {
            return "fetched \(fetched.count) (\(Set(fetched).count) distinct), expected \(expected.count): fetched \(names(fetched)), expected \(names(expected.map(\.objectID)))"
        }
        if random.offset == 0 && random.limit == 0 || expected.count == matching.count {
            if Set(fetched) != matchingIDs {
                return "missing \(names(matchingIDs.subtracting(fetched))), unexpected \(names(Set(fetched).subtracting(matchingIDs)))"
            }
        } else if let stray = fetched.first(where: { !matchingIDs.contains($0) }) {
            return "\(names([stray])) does not match (window of \(names(expected.map(\.objectID))))"
        }
        guard !random.sorts.isEmpty else { return nil }
        for (position, (id, wanted)) in zip(fetched, expected).enumerated() {
            guard let object = lookup[id] else { return "fetched \(names([id])), which the context does not hold" }
            for descriptor in random.sorts where try descriptor.compare(object, wanted) != 0 {
                let value = { (object: ManagedObject) in String(describing: (try? object.value(forKeyPath: descriptor.key)) ?? nil) }
                return "out of order at \(position): \(names([id])) (\(descriptor.key) = \(value(object))) where \(names([wanted.objectID])) (\(value(wanted))) was expected; fetched \(fetched.map { "\($0.key)" }.joined(separator: " ")), expected \(expected.map { "\($0.objectID.key)" }.joined(separator: " "))"
            }
        }
        return nil
    }

    // MARK: Dictionaries

    /// A random grouped dictionary fetch.
    struct RandomGrouping: CustomStringConvertible {
        let entity: String
        let format: String?
        let grouping: RelationalGrammar.Grouping
        let offset: Int
        let limit: Int

        init(_ random: inout SplitMix64) {
            entity = ["Person", "Person", "Person", "Employee", "Department", "Project"].randomElement(using: &random)!
            format = Int.random(in: 0..<4, using: &random) == 0 ? nil : RelationalGrammar.predicate(for: entity, &random)
            grouping = RelationalGrammar.grouping(for: entity, &random)
            (offset, limit) = Int.random(in: 0..<3, using: &random) == 0 ? RelationalGrammar.window(&random) : (0, 0)
        }

        var properties: [PropertyToFetch] {
            grouping.groupBy.map { .key($0) } + grouping.aggregates.map {
                .aggregate(PropertyToFetch.Function(rawValue: $0.function)!, of: $0.keyPath, as: $0.alias)
            }
        }

        /// The request; `plain`: without its order, distinctness and window (every group, once).
        func request(plain: Bool = false) throws -> FetchRequest<[String: any Sendable]> {
            var request = FetchRequest<[String: any Sendable]>(entityName: entity)
            request.predicate = try format.map { try ObjectPredicate(format: $0) }
            request.propertiesToGroupBy = grouping.groupBy.isEmpty ? nil : grouping.groupBy
            request.propertiesToFetch = properties
            request.havingPredicate = try grouping.having.map { try ObjectPredicate(format: $0) }
            if !plain {
                request.sortDescriptors = grouping.sorts.map(DifferentialTests.descriptor)
                request.returnsDistinctResults = grouping.distinct
                request.fetchOffset = offset
                request.fetchLimit = limit
            }
            return request
        }

        /// Whether a context without changes groups in the store (no object made).
        func groupsInStore(_ model: ManagedObjectModel) throws -> Bool {
            let logical = try LogicalPlan(entityName: entity, predicate: try format.map { try ObjectPredicate(format: $0) }, sortDescriptors: [], model: model)
            return logical.residual == nil && NativeStore.canGroup(properties, by: grouping.groupBy, of: logical.entity)
        }

        var description: String {
            "\(entity) where \(format ?? "-") group by \(grouping.groupBy) fetch \(grouping.aggregates.map { "\($0.alias) = \($0.function)(\($0.keyPath))" })"
                + (grouping.having.map { " having \($0)" } ?? "") + (grouping.sorts.isEmpty ? "" : " sorted by \(grouping.sorts.map(DifferentialTests.descriptor).map(\.description))")
                + (grouping.distinct ? " distinct" : "") + (offset > 0 ? " offset \(offset)" : "") + (limit > 0 ? " limit \(limit)" : "")
        }
    }

    /// The store's dictionaries (`store` has no changes) against the objects' (`objects` has an
    /// unsaved note: the same rows, grouped as objects) — the same list — and the groups made in
    /// memory from the oracle's objects that match.
    static func compareGrouping(_ random: RandomGrouping, store: ManagedObjectContext, objects: ManagedObjectContext, oracle: Oracle) throws -> String? {
        let request = try random.request()
        let fromStore = try store.fetch(request).map(RelationalGrammar.text)
        let fromObjects = try objects.fetch(request).map(RelationalGrammar.text)
        if fromStore != fromObjects {
            return "the store's dictionaries differ from the objects'\n  store:   \(fromStore)\n  objects: \(fromObjects)"
        }
        return try compareWithMemory(random, in: store, oracle: oracle)
    }

    /// Every group of the request (no order, distinctness or window) as `context` fetches it,
    /// against the groups made in memory of `oracle`'s objects that match the predicate (in the
    /// order of the fetch's rows: a group's keys are its first row's).
    static func compareWithMemory(_ random: RandomGrouping, in context: ManagedObjectContext, oracle: Oracle) throws -> String? {
        let plain = try random.request(plain: true)
        let fetched = try context.fetch(plain).map(RelationalGrammar.text)
        var rowsRequest = FetchRequest<ManagedObjectID>(entityName: random.entity)
        rowsRequest.predicate = plain.predicate
        let order = Dictionary(try context.fetch(rowsRequest).enumerated().map { ($0.element, $0.offset) }) { first, _ in first }
        let all = oracle.objects(of: random.entity)
        let matching = try plain.predicate.map { predicate in try all.filter { try predicate.evaluate(with: $0) } } ?? all
        let ordered = matching.enumerated().sorted { (order[$0.element.objectID] ?? Int.max, $0.offset) < (order[$1.element.objectID] ?? Int.max, $1.offset) }.map(\.element)
        let collapsed = !random.grouping.groupBy.isEmpty || !random.grouping.aggregates.isEmpty
        var rows = try oracle.context.dictionaryRows(of: ordered, groupBy: random.grouping.groupBy, properties: random.properties, aggregates: collapsed,
                                                     evaluator: PredicateEvaluator(context: oracle.context))
        if let having = plain.havingPredicate { rows = try rows.filter { try having.evaluate(with: $0.values as [String: Any]) } }
        let expected = rows.map { RelationalGrammar.text($0.values) }
        if fetched.sorted() != expected.sorted() {
            return "the groups differ from those made in memory\n  fetched:  \(fetched.sorted())\n  expected: \(expected.sorted())"
        }
        return nil
    }

    // MARK: The objects in memory

    /// Every object of the graph in one context, its to-many relationships loaded (collection
    /// operators then read objects, not rows): what in-memory evaluation reads.
    final class Oracle {
        let context: ManagedObjectContext
        let model: ManagedObjectModel
        private(set) var all: [ManagedObject] = []
        private(set) var byID: [ManagedObjectID: ManagedObject] = [:]
        private var byEntity: [String: [ManagedObject]] = [:]

        init(_ context: ManagedObjectContext, model: ManagedObjectModel) throws {
            self.context = context
            self.model = model
            for root in ["Division", "Department", "Person", "Project", "Client"] {
                for object in try context.fetch(FetchRequest<ManagedObject>(entityName: root)) {
                    for relationship in object.entity.relationshipsByName.values where relationship.isToMany { _ = try object.value(forKey: relationship.name) }
                    all.append(object)
                }
            }
            index()
        }

        func index() {
            all.removeAll { $0.isDeleted }
            byID = Dictionary(all.map { ($0.objectID, $0) }) { first, _ in first }
            byEntity = [:]
            for entity in model.entities {
                byEntity[entity.name] = all.filter { $0.entity.isKind(of: entity) }
            }
        }

        func objects(of entity: String) -> [ManagedObject] { byEntity[entity] ?? [] }

        /// Random unsaved changes: edits of attributes and relationships, inserts and deletes —
        /// of people's attributes only (joins through other entities still run in the store,
        /// then the changed people are merged), of people, of the other entities only, or of
        /// all. Returns what was done.
        func edit(_ random: inout SplitMix64, stack: Stack) throws -> String {
            let focus = Int.random(in: 0..<4, using: &random)
            var done: [String: Int] = [:]
            func alive(_ entity: String) -> [ManagedObject] { all.filter { !$0.isDeleted && $0.entity.isKind(of: model.entity(named: entity)!) } }
            func pick(_ entity: String, _ random: inout SplitMix64) -> ManagedObject? { alive(entity).randomElement(using: &random) }
            func maybe(_ entity: String, _ random: inout SplitMix64) -> ManagedObject? { Int.random(in: 0..<4, using: &random) == 0 ? nil : pick(entity, &random) }
            for _ in 0..<Int.random(in: 2...14, using: &random) {
                let kind = switch focus {
                case 0: Int.random(in: 0..<2, using: &random)
                case 1: Int.random(in: 0..<7, using: &random)
                case 2: Int.random(in: 7..<14, using: &random)
                default: Int.random(in: 0..<14, using: &random)
                }
                var what = ""
                switch kind {
                case 0:
                    guard let person = pick("Person", &random) else { continue }
                    try person.setValue(Int64.random(in: 0...20, using: &random) * 500, forKey: "salary")
                    what = "salary"
                case 1:
                    guard let person = pick("Person", &random) else { continue }
                    try person.setValue(RelationalGrammar.personNames.randomElement(using: &random)!, forKey: "name")
                    try person.setValue(RelationalGrammar.ratings.randomElement(using: &random)!, forKey: "rating")
                    what = "name"
                case 2:
                    guard let person = pick("Person", &random) else { continue }
                    try person.setValue(maybe("Department", &random), forKey: "department")
                    what = "department"
                case 3:
                    guard let person = pick("Person", &random) else { continue }
                    let manager = maybe("Person", &random)
                    try person.setValue(manager === person ? nil : manager, forKey: "manager")
                    what = "manager"
                case 4:
                    guard let person = pick("Person", &random), let project = pick("Project", &random) else { continue }
                    let projects = try person.mutableSetValue(forKey: "projects")
                    if projects.contains(project) { try projects.remove(project) } else { try projects.insert(project) }
                    what = "projects"
                case 5:
                    let entity = Bool.random(using: &random) ? "Employee" : "Contractor"
                    let person = try stack.insert(entity, in: context, [
                        "salary": Int64.random(in: 0...20, using: &random) * 500,
                    ])
                    try person.setValue(RelationalGrammar.personNames.randomElement(using: &random)!, forKey: "name")
                    try person.setValue(RelationalGrammar.ratings.randomElement(using: &random)!, forKey: "rating")
                    try person.setValue(maybe("Department", &random), forKey: "department")
                    try person.setValue(maybe("Person", &random), forKey: "manager")
                    if let project = maybe("Project", &random) { try person.mutableSetValue(forKey: "projects").insert(project) }
                    if entity == "Employee" { try person.setValue(Int32.random(in: 0...40, using: &random), forKey: "badge") }
                    all.append(person)
                    what = "new person"
                case 6:
                    guard let person = pick("Person", &random) else { continue }
                    context.delete(person)
                    what = "deleted person"
                case 7:
                    guard let department = pick("Department", &random) else { continue }
                    let names = RelationalGrammar.departmentNames.map(Optional.some) + ["Nouveau", nil]
                    try department.setValue(names.randomElement(using: &random)!, forKey: "name")
                    what = "department name"
                case 8:
                    guard let department = pick("Department", &random) else { continue }
                    try department.setValue(Int64.random(in: 0...9, using: &random) * 1000, forKey: "budget")
                    try department.setValue(maybe("Division", &random), forKey: "division")
                    what = "department budget"
                case 9:
                    if let division = pick("Division", &random), Bool.random(using: &random) {
                        try division.setValue(["North", "South", "East", "West", nil].randomElement(using: &random)!, forKey: "title")
                        what = "division title"
                    } else if let client = pick("Client", &random) {
                        try client.setValue(["FR", "DE", "US", "fr", nil].randomElement(using: &random)!, forKey: "country")
                        what = "client country"
                    }
                case 10:
                    guard let project = pick("Project", &random) else { continue }
                    try project.setValue(maybe("Client", &random), forKey: "client")
                    try project.setValue((RelationalGrammar.projectTitles.map(Optional.some) + [nil]).randomElement(using: &random)!, forKey: "title")
                    what = "project"
                case 11:
                    let department = try stack.insert("Department", in: context, ["budget": Int64.random(in: 0...9, using: &random) * 1000])
                    try department.setValue(["Nouveau", "Sales", nil].randomElement(using: &random)!, forKey: "name")
                    try department.setValue(maybe("Division", &random), forKey: "division")
                    for _ in 0..<Int.random(in: 0...3, using: &random) {
                        if let person = pick("Person", &random) { try person.setValue(department, forKey: "department") }
                    }
                    all.append(department)
                    what = "new department"
                case 12:
                    let project = try stack.insert("Project", in: context, ["title": "Zephyr"])
                    try project.setValue(maybe("Client", &random), forKey: "client")
                    for _ in 0..<Int.random(in: 0...3, using: &random) {
                        if let person = pick("Person", &random) { try project.mutableSetValue(forKey: "members").insert(person) }
                    }
                    all.append(project)
                    what = "new project"
                default:
                    guard let victim = pick(["Department", "Project", "Division", "Client"].randomElement(using: &random)!, &random) else { continue }
                    context.delete(victim)
                    what = "deleted \(victim.entity.name)"
                }
                done[what, default: 0] += 1
            }
            context.processPendingChanges()
            index()
            return done.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        }
    }
}

private func hex(_ seed: UInt64) -> String { "0x" + String(seed, radix: 16) }
