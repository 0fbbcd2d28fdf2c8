import Arbor
import ArborTestSupport
import Foundation

/// The planner against the evaluator (issue 26, item 7; docs/relational-planning.md,
/// "Differential testing"): a small fixed graph in an in-memory store (built once), and a fetch
/// the input chooses, whose answer must be the one in-memory evaluation gives over the same
/// objects. A disagreement stops the process with the request and both answers.
///
/// Input: a mode byte, then the rest (as `ByteDrivenGenerator` choices, or text):
///
///     mode % 8   0–3  the rest drives RelationalGrammar: an entity, a predicate, sorts, a
///                     window, IDs or objects; fetched and counted in a context without
///                     changes, against filtering, sorting and windowing the oracle's objects
///                4    the same after a few unsaved edits, inserts and deletes (chosen by the
///                     bytes) in a fresh context: against that context's objects
///                5    a grouped dictionary fetch of the grammar: the store's groups against the
///                     objects' (a context with an unsaved note answers with objects)
///                6–7  text: the next byte chooses the entity, sorts and window; the rest,
///                     as UTF-8, is the predicate format (`department.name == 'Sales'`); parse
///                     and analysis errors are expected (ArborError), any other error is a bug
///
/// Errors thrown by a fetch of a grammar request are bugs (the grammar only writes well-typed
/// requests); a text predicate whose in-memory evaluation throws is skipped (the store may judge
/// fewer objects).
/// Builds the graph before the first input, with LeakSanitizer off: it does not follow Swift's
/// references with spare bits in use (a `Data` in an enum, a weak reference's side table), and
/// would take what the graph holds for leaks of the first input.
@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> CInt {
    lsanDisable()
    defer { lsanEnable() }
    _ = Fixture.shared
    return 0
}

@_silgen_name("__lsan_disable") func lsanDisable()
@_silgen_name("__lsan_enable") func lsanEnable()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1, size <= 4096 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let fixture = Fixture.shared
    var random = ByteDrivenGenerator(bytes.dropFirst())
    switch bytes[0] % 8 {
    case 0...3:
        let request = Request(&random)
        let context = fixture.context()
        check(label: "\(request)") {
            try compare(request, in: context, all: fixture.oracle.objects(of: request.entity), lookup: fixture.oracle.byID)
        }
    case 4:
        let context = fixture.context()
        let state = fixture.loaded(context)
        let edits = fixture.edit(state, &random)
        let request = Request(&random)
        check(label: "\(request) after \(edits)") {
            try compare(request, in: context, all: state.objects(of: request.entity), lookup: state.byID)
        }
    case 5:
        let entity = ["Person", "Employee", "Department", "Project"][Int.random(in: 0..<4, using: &random)]
        let format: String? = Bool.random(using: &random) ? RelationalGrammar.predicate(for: entity, &random) : nil
        let grouping = RelationalGrammar.grouping(for: entity, &random)
        let window = RelationalGrammar.window(&random)
        let label = "\(entity) where \(format ?? "-") grouped \(grouping) window \(window)"
        do {
            let request = try groupedRequest(entity, format, grouping, window)
            let store = try fixture.context().fetch(request).map(RelationalGrammar.text)
            let objects = try fixture.noting.fetch(request).map(RelationalGrammar.text)
            if store != objects { fail(label, "the store's dictionaries differ from the objects'\n  store:   \(store)\n  objects: \(objects)") }
        } catch {
            fail(label, "\(error)")
        }
    default:
        guard bytes.count >= 2 else { return 0 }
        var choices = ByteDrivenGenerator([bytes[1]])
        let entity = RelationalGrammar.fetchedEntities.randomElement(using: &choices)!
        let format = String(decoding: bytes[2...], as: UTF8.self)
        // Regular expressions with long subjects, and nested subqueries, cost more than they
        // find.
        if format.utf8.count > 300 || (format.localizedCaseInsensitiveContains("MATCHES") && format.utf8.count > 64)
            || format.components(separatedBy: "SUBQUERY").count > 3 { return 0 }
        let request: Request
        do {
            request = try Request(entity: entity, format: format, &choices)
        } catch is ArborError {
            return 0
        } catch {
            fatalError("untyped error from ObjectPredicate(format:): \(error) for \(format.debugDescription)")
        }
        let context = fixture.context()
        // The evaluator first: a predicate it cannot evaluate on every object (a type error on
        // some) may still fetch (the store judges fewer objects); nothing to compare.
        do {
            _ = try fixture.oracle.objects(of: entity).filter { try request.predicate.evaluate(with: $0) }
            _ = try context.fetch(request.fetch(ManagedObjectID.self))
        } catch is ArborError {
            return 0
        } catch {
            fatalError("untyped error fetching \(request): \(error)")
        }
        check(label: "\(request) (text)") {
            try compare(request, in: context, all: fixture.oracle.objects(of: request.entity), lookup: fixture.oracle.byID)
        }
    }
    return 0
}

/// Runs `body`: a disagreement (its message) or an error stops the process.
func check(label: @autoclosure () -> String, _ body: () throws -> String?) {
    do {
        if let message = try body() { fail(label(), message) }
    } catch {
        fail(label(), "\(error)")
    }
}

func fail(_ label: String, _ message: String) -> Never {
    fatalError("FuzzPlanner: the store and in-memory evaluation disagree\n  request: \(label)\n  \(message)")
}

// MARK: - Requests

/// A fetch of objects or IDs: entity, predicate, sorts, window.
struct Request: CustomStringConvertible {
    let entity: String
    let format: String
    let predicate: ObjectPredicate
    let sorts: [ObjectSortDescriptor]
    let offset: Int
    let limit: Int
    let asIDs: Bool

    /// A request of the grammar.
    init<R: RandomNumberGenerator>(_ random: inout R) {
        let entity = RelationalGrammar.fetchedEntities.randomElement(using: &random)!
        let format = RelationalGrammar.predicate(for: entity, &random)
        do {
            try self.init(entity: entity, format: format, &random)
        } catch {
            fatalError("the grammar wrote a predicate that does not parse: \(format.debugDescription): \(error)")
        }
    }

    /// A request of `format`, with the grammar's sorts and window.
    init<R: RandomNumberGenerator>(entity: String, format: String, _ random: inout R) throws {
        self.entity = entity
        self.format = format
        predicate = try ObjectPredicate(format: format)
        sorts = RelationalGrammar.sorts(for: entity, &random).map(descriptor)
        (offset, limit) = RelationalGrammar.window(&random)
        asIDs = Bool.random(using: &random)
    }

    func fetch<Result>(_: Result.Type) -> FetchRequest<Result> {
        var request = FetchRequest<Result>(entityName: entity)
        request.predicate = predicate
        request.sortDescriptors = sorts
        request.fetchOffset = offset
        request.fetchLimit = limit
        return request
    }

    var description: String {
        "\(entity) where \(format)" + (sorts.isEmpty ? "" : " sorted by \(sorts.map(\.description).joined(separator: ", "))")
            + (offset > 0 ? " offset \(offset)" : "") + (limit > 0 ? " limit \(limit)" : "") + (asIDs ? " (IDs)" : " (objects)")
    }
}

func descriptor(_ sort: RelationalGrammar.Sort) -> ObjectSortDescriptor {
    var options: ComparisonPredicate.Options = []
    if sort.caseInsensitive { options.insert(.caseInsensitive) }
    if sort.diacriticInsensitive { options.insert(.diacriticInsensitive) }
    return ObjectSortDescriptor(key: sort.key, ascending: sort.ascending, options: options)
}

/// The fetch and the count against `all` filtered, sorted and windowed in memory; ties of the
/// sort may come in any order (each fetched object must tie with the one expected at its
/// place). Nil when they agree. (Tests/ArborTests/DifferentialTests.swift checks the same.)
func compare(_ random: Request, in context: ManagedObjectContext, all: [ManagedObject], lookup: [ManagedObjectID: ManagedObject]) throws -> String? {
    let request = random.fetch(ManagedObjectID.self)
    let fetched = random.asIDs ? try context.fetch(request) : try context.fetch(random.fetch(ManagedObject.self)).map(\.objectID)
    let counted = try context.count(for: request)
    let matching = try all.filter { try random.predicate.evaluate(with: $0) }
    var ordered = random.sorts.isEmpty ? matching : try matching.sorted(by: random.sorts)
    if random.offset > 0 { ordered = Array(ordered.dropFirst(random.offset)) }
    let expected = random.limit > 0 ? Array(ordered.prefix(random.limit)) : ordered
    let matchingIDs = Set(matching.map(\.objectID))
    func names(_ ids: some Sequence<ManagedObjectID>) -> String { ids.map(short).sorted().joined(separator: " ") }
    if counted != expected.count { return "count \(counted), expected \(expected.count)" }
    if fetched.count != expected.count || Set(fetched).count != fetched.count {
        return "fetched \(names(fetched)), expected \(names(expected.map(\.objectID)))"
    }
    if random.offset == 0 && random.limit == 0 || expected.count == matching.count {
        if Set(fetched) != matchingIDs { return "fetched \(names(fetched)), expected \(names(matchingIDs))" }
    } else if let stray = fetched.first(where: { !matchingIDs.contains($0) }) {
        return "\(names([stray])) does not match"
    }
    for (position, (id, wanted)) in zip(fetched, expected).enumerated() where !random.sorts.isEmpty {
        guard let object = lookup[id] else { return "fetched \(names([id])), which the context does not hold" }
        for descriptor in random.sorts where try descriptor.compare(object, wanted) != 0 {
            return "out of order at \(position) by \(descriptor): fetched \(fetched.map(short)), expected \(expected.map { short($0.objectID) })"
        }
    }
    return nil
}

/// An object ID for messages: its entity and the last part of its URI.
func short(_ id: ManagedObjectID) -> String { "\(id.entityName)/\(id.uriRepresentation().lastPathComponent)" }

func groupedRequest(_ entity: String, _ format: String?, _ grouping: RelationalGrammar.Grouping,
                    _ window: (offset: Int, limit: Int)) throws -> FetchRequest<[String: any Sendable]> {
    var request = FetchRequest<[String: any Sendable]>(entityName: entity)
    request.predicate = try format.map { try ObjectPredicate(format: $0) }
    request.propertiesToGroupBy = grouping.groupBy.isEmpty ? nil : grouping.groupBy
    request.propertiesToFetch = grouping.groupBy.map { .key($0) } + grouping.aggregates.map {
        .aggregate(PropertyToFetch.Function(rawValue: $0.function)!, of: $0.keyPath, as: $0.alias)
    }
    request.havingPredicate = try grouping.having.map { try ObjectPredicate(format: $0) }
    request.sortDescriptors = grouping.sorts.map(descriptor)
    request.returnsDistinctResults = grouping.distinct
    request.fetchOffset = window.offset
    request.fetchLimit = window.limit
    return request
}

// MARK: - The graph

/// Every object of a context, to-many relationships loaded, by ID and by entity.
final class Objects {
    let context: ManagedObjectContext
    var all: [ManagedObject]
    private(set) var byID: [ManagedObjectID: ManagedObject] = [:]
    private var byEntity: [String: [ManagedObject]] = [:]
    let model: ManagedObjectModel

    init(_ context: ManagedObjectContext, model: ManagedObjectModel) throws {
        self.context = context
        all = try Fixture.everything(in: context)
        self.model = model
        index()
    }

    func index() {
        all.removeAll { $0.isDeleted }
        byID = Dictionary(all.map { ($0.objectID, $0) }) { first, _ in first }
        byEntity = [:]
        for entity in model.entities { byEntity[entity.name] = all.filter { $0.entity.isKind(of: entity) } }
    }

    func objects(of entity: String) -> [ManagedObject] { byEntity[entity] ?? [] }
    func alive(_ entity: String) -> [ManagedObject] { objects(of: entity).filter { !$0.isDeleted } }
}

/// The graph, built once: 3 divisions, 6 departments, 3 clients, 5 projects, 48 people (a third
/// contractors), with the grammar's names, ratings (NaN, nil), badges and agencies, and the
/// oracle: every object in one context, relationships loaded.
final class Fixture {
    nonisolated(unsafe) static let shared: Fixture = {
        do {
            return try Fixture()
        } catch {
            fatalError("the graph could not be built: \(error)")
        }
    }()

    let model: ManagedObjectModel
    let coordinator: PersistentStoreCoordinator
    let oracle: Objects
    /// A context with an unsaved note: dictionary fetches are answered with objects there.
    let noting: ManagedObjectContext

    init() throws {
        let model = try RelationalGrammar.model()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        self.model = model
        self.coordinator = coordinator
        _ = try coordinator.addInMemoryStore()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var random = SplitMix64(seed: 0xF022_91A7)
        func insert(_ entity: String, _ values: [String: Any?]) throws -> ManagedObject {
            let object = ManagedObject(entity: model.entity(named: entity)!, insertInto: context)
            for (key, value) in values { try object.setValue(value, forKey: key) }
            return object
        }
        let divisions = try RelationalGrammar.divisionTitles.map { try insert("Division", ["title": $0]) }
        var departments: [ManagedObject] = []
        for (index, name) in RelationalGrammar.departmentNames.enumerated() {
            departments.append(try insert("Department", ["name": index == 5 ? nil : name, "budget": Int64(index % 4) * 2000,
                                                         "division": index == 4 ? nil : divisions[index % 3]]))
        }
        let clients = try RelationalGrammar.countries.map { try insert("Client", ["country": $0]) }
        var projects: [ManagedObject] = []
        for (index, title) in RelationalGrammar.projectTitles.enumerated() {
            projects.append(try insert("Project", ["title": index == 4 ? nil : title, "client": index == 3 ? nil : clients[index % 3]]))
        }
        var people: [ManagedObject] = []
        for index in 0..<48 {
            let contractor = index % 3 == 0
            let person = try insert(contractor ? "Contractor" : "Employee", [
                "name": RelationalGrammar.personNames.randomElement(using: &random)!,
                "salary": Int64.random(in: 0...20, using: &random) * 500,
                "rating": RelationalGrammar.ratings.randomElement(using: &random)!,
                "department": Int.random(in: 0..<5, using: &random) == 0 ? nil : departments.randomElement(using: &random),
                "manager": people.isEmpty || Int.random(in: 0..<4, using: &random) == 0 ? nil : people.randomElement(using: &random),
            ])
            if contractor {
                try person.setValue(RelationalGrammar.agencies.randomElement(using: &random)!, forKey: "agency")
            } else if Int.random(in: 0..<5, using: &random) > 0 {
                try person.setValue(Int32.random(in: 0...40, using: &random), forKey: "badge")
            }
            try person.setValue(Set((0..<Int.random(in: 0...2, using: &random)).map { _ in projects.randomElement(using: &random)! }), forKey: "projects")
            people.append(person)
        }
        try context.save()
        oracle = try Objects(ManagedObjectContext(persistentStoreCoordinator: coordinator), model: model)
        noting = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        _ = ManagedObject(entity: model.entity(named: "Note")!, insertInto: noting)
    }

    func context() -> ManagedObjectContext { ManagedObjectContext(persistentStoreCoordinator: coordinator) }

    /// Every object of the model's root entities in `context`, to-many relationships loaded.
    static func everything(in context: ManagedObjectContext) throws -> [ManagedObject] {
        var all: [ManagedObject] = []
        for root in ["Division", "Department", "Person", "Project", "Client"] {
            for object in try context.fetch(FetchRequest<ManagedObject>(entityName: root)) {
                for relationship in object.entity.relationshipsByName.values where relationship.isToMany {
                    _ = try object.value(forKey: relationship.name)
                }
                all.append(object)
            }
        }
        return all
    }

    func loaded(_ context: ManagedObjectContext) -> Objects {
        do {
            return try Objects(context, model: model)
        } catch {
            fatalError("the graph could not be read: \(error)")
        }
    }

    /// One to eight unsaved changes the bytes choose: edits, inserts, deletes. Returns them.
    func edit<R: RandomNumberGenerator>(_ state: Objects, _ random: inout R) -> String {
        var done: [String] = []
        func pick(_ entity: String) -> ManagedObject? { state.alive(entity).randomElement(using: &random) }
        do {
            for _ in 0..<Int.random(in: 1...8, using: &random) {
                switch Int.random(in: 0..<10, using: &random) {
                case 0:
                    guard let person = pick("Person") else { continue }
                    try person.setValue(Int64.random(in: 0...20, using: &random) * 500, forKey: "salary")
                    done.append("salary of \(short(person.objectID))")
                case 1:
                    guard let person = pick("Person") else { continue }
                    try person.setValue(RelationalGrammar.personNames.randomElement(using: &random)!, forKey: "name")
                    try person.setValue(RelationalGrammar.ratings.randomElement(using: &random)!, forKey: "rating")
                    done.append("name of \(short(person.objectID))")
                case 2:
                    guard let person = pick("Person") else { continue }
                    try person.setValue(Bool.random(using: &random) ? nil : pick("Department"), forKey: "department")
                    done.append("department of \(short(person.objectID))")
                case 3:
                    guard let person = pick("Person") else { continue }
                    let manager = Bool.random(using: &random) ? nil : pick("Person")
                    try person.setValue(manager === person ? nil : manager, forKey: "manager")
                    done.append("manager of \(short(person.objectID))")
                case 4:
                    guard let person = pick("Person"), let project = pick("Project") else { continue }
                    let projects = try person.mutableSetValue(forKey: "projects")
                    if projects.contains(project) { try projects.remove(project) } else { try projects.insert(project) }
                    done.append("projects of \(short(person.objectID))")
                case 5:
                    let person = ManagedObject(entity: model.entity(named: Bool.random(using: &random) ? "Employee" : "Contractor")!,
                                               insertInto: state.context)
                    try person.setValue(RelationalGrammar.personNames.randomElement(using: &random)!, forKey: "name")
                    try person.setValue(Int64.random(in: 0...20, using: &random) * 500, forKey: "salary")
                    try person.setValue(pick("Department"), forKey: "department")
                    try person.setValue(pick("Person"), forKey: "manager")
                    state.all.append(person)
                    done.append("a new person")
                case 6:
                    guard let person = pick("Person") else { continue }
                    state.context.delete(person)
                    done.append("deleted \(short(person.objectID))")
                case 7:
                    guard let department = pick("Department") else { continue }
                    try department.setValue(["Sales", "Nouveau", "sales", nil].randomElement(using: &random)!, forKey: "name")
                    try department.setValue(Bool.random(using: &random) ? nil : pick("Division"), forKey: "division")
                    done.append("department \(short(department.objectID))")
                case 8:
                    guard let project = pick("Project") else { continue }
                    try project.setValue(Bool.random(using: &random) ? nil : pick("Client"), forKey: "client")
                    done.append("client of project \(short(project.objectID))")
                default:
                    guard let victim = pick(["Department", "Project", "Client"].randomElement(using: &random)!) else { continue }
                    state.context.delete(victim)
                    done.append("deleted \(victim.entity.name) \(short(victim.objectID))")
                }
            }
        } catch {
            fatalError("an edit failed: \(error)")
        }
        state.context.processPendingChanges()
        state.index()
        return done.joined(separator: ", ")
    }
}
