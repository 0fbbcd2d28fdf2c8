import Foundation

/// How a context runs one fetch request: decided once, by ``ManagedObjectContext/plan(_:)``,
/// and followed by every way of running it — objects, object IDs, values, counts, the rows a
/// grouping reads — and by `explain`, which prints this value: what `explain` says is what runs
/// (docs/predicates.md, "One plan").
struct RequestPlan {
    /// Where the rows come from.
    enum Source {
        /// The stores holding the entity, through the coordinator.
        case stores([any PersistentStore])
        /// The parent context, which runs the request over its own state (S001-04).
        case parent(ManagedObjectContext)
    }

    let coordinator: PersistentStoreCoordinator
    /// The request checked against the model and split into the stores' part and the objects'.
    let logical: LogicalPlan
    let source: Source
    /// The objects of the request's entity with unsaved changes, judged on their in-memory
    /// values after the rows (none when the request leaves pending changes out).
    let pending: [ManagedObject]
    /// Whether the rows are the answer: the source applied the predicate, the order and the
    /// window, and nothing is left for objects (no term on objects, no pending objects, one
    /// store — or the parent, when nothing here is pending).
    let rowsAnswer: Bool
    /// What the stores are asked: the window only when ``rowsAnswer``; with several stores and
    /// nothing else left for objects, each store's first offset + limit rows.
    let storeFetch: StoreFetch
    /// What the stores count for `count(for:)` (nil: the count is of the fetched IDs): the whole
    /// request, window included and order left out, when no term needs objects, nothing is
    /// pending, and one store (or none) holds the entity — or several, for a request without a
    /// window (their counts add up).
    let countFetch: StoreFetch?
    /// Whether a values fetch decodes the rows (else the objects a fetch gives): the rows answer,
    /// and the context has no unsaved changes at all (a value may read key paths into any
    /// entity).
    let decodesRows: Bool

    /// The stores the rows come from (none from a parent).
    var stores: [any PersistentStore] {
        if case .stores(let stores) = source { stores } else { [] }
    }

    /// What the context does after the source's rows, in order: `explain`'s last lines.
    var stepsOnObjects: [String] {
        var steps: [String] = []
        for (term, reason) in logical.onObjects { steps.append("check each object: \(term.predicateFormat) — on objects: \(reason)") }
        if !pending.isEmpty { steps.append("merge \(pending.count) objects with unsaved changes") }
        if generation?.rollsBack == true { steps.append("roll back the objects changed since the query generation, judged as they were") }
        if !rowsAnswer && !logical.sortDescriptors.isEmpty {
            steps.append("sort: \(logical.sortDescriptors.map(\.description).joined(separator: ", "))")
        }
        if !rowsAnswer, let window = Self.windowStep(offset: logical.offset, limit: logical.limit) { steps.append(window) }
        return steps
    }

    /// The window's line of `explain` (nil: no window).
    static func windowStep(offset: Int, limit: Int) -> String? {
        offset > 0 || limit > 0 ? "offset \(offset), limit \(limit)" : nil
    }

    /// A plan of a context pinned to a query generation: the generation's version when the plan
    /// was made (a run finding it moved may plan again:
    /// ``ManagedObjectContext/replanned(_:after:)``), whether the plan rolls back objects changed
    /// since the generation (the store's rows of those are left out, and the objects are judged
    /// as they were at the generation, with sorts and the window kept for objects), and whether
    /// it keeps joins for objects too (objects a join reaches changed).
    struct Generation {
        let version: Int
        let rollsBack: Bool
        let joinsInMemory: Bool
    }

    /// Set in a context pinned to a query generation.
    let generation: Generation?
}

extension ManagedObjectContext {
    /// The plan of `request` (already resolved): the event ends first (pending deletions
    /// propagate), the request is checked against the model, and where each part runs is
    /// decided, once.
    ///
    /// `rollingBack`: in a context pinned to a query generation, plan for objects changed since
    /// it even if none of the request's entities had changed when it was last looked at.
    func plan<Result>(_ request: FetchRequest<Result>, rollingBack: Bool = false, joinsInMemory: Bool = false) throws -> RequestPlan {
        let (coordinator, logical, generation) = try prepare(request, rollingBack: rollingBack, joinsInMemory: joinsInMemory)
        try Self.requireStoreEvaluation(request, logical)
        let rollsBack = generation?.rollsBack == true
        let pending = pendingObjects(of: logical.entity, request)
        if let parent {
            if request.requiresStoreEvaluation {
                throw ArborError(.invalidFetchRequest, "the fetch of \(request.entityName) requires store evaluation, and a child context's fetches are answered by its parent's objects",
                                 entity: request.entityName)
            }
            return RequestPlan(coordinator: coordinator, logical: logical, source: .parent(parent), pending: pending,
                               rowsAnswer: pending.isEmpty, storeFetch: StoreFetch(logical, window: false),
                               countFetch: nil, decodesRows: false, generation: nil)
        }
        let stores = coordinator.stores(holding: logical.entity)
        let rowsAnswer = logical.rowsAnswerWholeRequest && pending.isEmpty && stores.count <= 1 && !rollsBack
        var storeFetch = StoreFetch(logical, window: rowsAnswer)
        if !rowsAnswer, logical.rowsAnswerWholeRequest, pending.isEmpty, !rollsBack, logical.limit > 0 {
            // Several stores: each gives its first offset + limit rows.
            storeFetch.limit = Array<Int>.windowEnd(offset: logical.offset, limit: logical.limit)
        }
        var countFetch: StoreFetch?
        // Several stores' counts add up, unless a window spans them.
        if logical.residual == nil, pending.isEmpty, !rollsBack, stores.count <= 1 || (logical.limit == 0 && logical.offset == 0) {
            var fetch = StoreFetch(logical, window: true)
            fetch.sortDescriptors = []
            countFetch = fetch
        }
        return RequestPlan(coordinator: coordinator, logical: logical, source: .stores(stores), pending: pending,
                           rowsAnswer: rowsAnswer, storeFetch: storeFetch, countFetch: countFetch,
                           decodesRows: rowsAnswer && generation == nil && !(request.includesPendingChanges && hasChanges), generation: generation)
    }

    /// Refuses a request that requires store evaluation (``FetchRequest/requiresStoreEvaluation``)
    /// when a term of its predicate would be judged on objects, naming the first and why.
    ///
    /// - Throws: ``ArborError/Code/invalidFetchRequest``.
    static func requireStoreEvaluation<Result>(_ request: FetchRequest<Result>, _ logical: LogicalPlan) throws {
        guard request.requiresStoreEvaluation, let (term, reason) = logical.onObjects.first else { return }
        throw ArborError(.invalidFetchRequest,
                         "the fetch of \(request.entityName) requires store evaluation, and \(term.predicateFormat) would be judged on objects: \(reason)",
                         entity: request.entityName, value: term.predicateFormat)
    }

    /// The plan a fetch follows, as text: each store's (``QueryPlan``) for what the request
    /// runs — its count, for a count; its rows, otherwise — then what the context does after it.
    func explain<Result>(_ request: FetchRequest<Result>) throws -> String {
        let request = try resolved(request)
        if let grouped = try explainGroups(request) { return grouped }
        let plan = try plan(request)
        guard case .stores(let stores) = plan.source else {
            return "served by the parent context (its own plan, over its unsaved state)"
        }
        let counts = request.resultType == .count
        var plans: [String] = []
        for store in stores {
            var storePlan = try plan.coordinator.explain(counts ? plan.countFetch ?? plan.storeFetch : plan.storeFetch, in: store)
            if counts, plan.countFetch != nil {
                storePlan.inMemory.append("count in the store")
            } else {
                storePlan.inMemory.append(contentsOf: plan.stepsOnObjects)
                if counts { storePlan.inMemory.append("count the objects") }
                if request.resultType == .values {
                    storePlan.inMemory.append(plan.decodesRows ? "decode each row into a value" : "decode each object into a value")
                }
                if let dictionary = plan.logical.dictionary {
                    storePlan.inMemory.append("make a dictionary of each object")
                    storePlan.inMemory.append(contentsOf: dictionary.steps)
                }
            }
            plans.append(storePlan.description)
        }
        return plans.joined(separator: "\n")
    }

    /// The plan of a grouped or aggregated dictionary fetch, where the route its fetch follows
    /// (``groupingRoute(_:plan:)``) makes the groups; nil for other fetches.
    private func explainGroups<Result>(_ request: FetchRequest<Result>) throws -> String? {
        guard request.resultType == .dictionary else { return nil }
        let plan = try plan(request)
        guard let dictionary = plan.logical.dictionary, dictionary.shape.collapses else { return nil }
        let shape = dictionary.shape
        let keys = shape.groupBy.isEmpty ? "one group of every row" : "by \(shape.groupBy.joined(separator: ", "))"
        switch groupingRoute(request, plan: plan) {
        case .store(let grouping):
            let rows = try plan.coordinator.explain(grouping.rows, in: plan.stores[0])
            return rows.description + "\n  group in the store, \(keys)" + Self.lines(dictionary.steps)
        case .objects(let reason):
            let objects = try explain(objectsRequest(for: request, plan.logical))
            return objects + "\n  then in memory: group the objects, \(keys) — on objects: \(reason)" + Self.lines(dictionary.steps)
        }
    }

    /// Steps done in memory, as `explain`'s lines after a store's plan.
    private static func lines(_ steps: [String]) -> String {
        steps.map { "\n  then in memory: " + $0 }.joined()
    }
}
