import Foundation

// Safety: On the context's queue, the rows' and objects' buffers are used only inside their
// `withUnsafe…BufferPointer` closures, and `results` holds every object they point at; entities are
// used unretained because the model holds them (and the context's coordinator the model); each
// snapshot reference `holdSnapshots` counts (`passRetained`) is carried into one object, or
// released when the object holds that snapshot already.

/// Faults a fetch returned together (``FetchRequest/fetchBatchSize``): the first to fire loads the
/// rows of all.
final class FaultBatch {
    let ids: [ManagedObjectID]
    var loaded = false

    init(ids: [ManagedObjectID]) { self.ids = ids }
}

/// Fetching: the store's part (index or scan, docs/predicates.md), then the seeds' rules for
/// pending changes (S000-20…S000-25): new objects that match are included, changed ones are judged
/// by their in-memory values, deleted ones are left out, and registered objects keep their
/// in-memory state.
extension ManagedObjectContext {
    /// The objects (or IDs, dictionaries, count) a fetch request describes.
    ///
    /// - Throws: ``ArborError/Code/invalidFetchRequest`` for an unknown entity, a key the model
    ///   does not have, a constant of the wrong type, or results that are not `Result`s;
    ///   ``ArborError/Code/unknownKey``, ``ArborError/Code/wrongValueType`` from evaluating the
    ///   predicate; ``ArborError/Code/store`` when a store fails.
    public func fetch<Result>(_ request: FetchRequest<Result>) throws -> [Result] {
        checkQueue()
        drainMerges()
        let request = try resolved(request)
        let start = ContinuousClock.now
        let results = try fetchResults(request)
        if let coordinator = persistentStoreCoordinator {
            coordinator.observer.fetched(request, from: coordinator, results: results.count, duration: ContinuousClock.now - start) {
                try self.explain(request)
            }
        }
        return results
    }

    /// The results of a checked request (``fetch(_:)`` without its timing).
    private func fetchResults<Result>(_ request: FetchRequest<Result>) throws -> [Result] {
        let results: [Any]
        switch request.resultType {
        case .count:
            results = [try count(for: request)]
        case .managedObjectID:
            results = try fetchIDs(request)
        case .managedObject:
            let objects = try fetchObjects(request)
            // The same array, retyped: `as!` would go through the runtime's generic array cast
            // (a retain and a dynamic check per element).
            if Result.self == ManagedObject.self { return unsafeBitCast(objects, to: [Result].self) }
            results = objects
        case .dictionary:
            let rows = try fetchDictionaries(request)
            if Result.self == [String: any Sendable].self, let typed = rows as? [Result] { return typed }
            results = rows
        case .values:
            guard let type = Result.self as? any Decodable.Type else {
                throw ArborError(.invalidFetchRequest, "a values fetch of \(request.entityName) needs a Decodable result type, not \(Result.self)",
                                 entity: request.entityName)
            }
            func decoded<Value: Decodable>(_: Value.Type) throws -> [Result] {
                let values = try fetchValues(request, as: Value.self)
                // Value is Result (opened from it): the same array.
                return unsafeBitCast(values, to: [Result].self)
            }
            return try decoded(type)
        }
        return try results.map { element in
            guard let typed = element as? Result else {
                throw ArborError(.invalidFetchRequest, "the fetch of \(request.entityName) returns \(type(of: element)) results, not \(Result.self)",
                                 entity: request.entityName)
            }
            return typed
        }
    }

    /// The number of objects ``fetch(_:)`` would return for `request` (its window applied), pending
    /// changes included (S000-08).
    ///
    /// - Throws: as ``fetch(_:)``.
    public func count<Result>(for request: FetchRequest<Result>) throws -> Int {
        checkQueue()
        drainMerges()
        let request = try resolved(request)
        if request.resultType == .dictionary { return try fetchDictionaries(request).count }
        let plan = try plan(request)
        if let countFetch = plan.countFetch {
            let count = try plan.coordinator.count(countFetch, in: plan.stores)
            guard let again = try replanned(request, after: plan) else { return count }
            return try fetchIDs(request, plan: again).count
        }
        return try fetchIDs(request, plan: plan).count
    }

    // MARK: The parts

    /// Where every fetch starts: the event ends (pending deletions propagate) and the request is
    /// checked against the model (``plan(_:)`` then decides where each part runs).
    ///
    /// In a context pinned to a query generation, the plan rolls back (`rollingBack`, or objects
    /// of the request's entity, of a joined or of a sorted entity changed since the generation):
    /// sorts are kept for objects, and joins too when objects of a joined entity changed
    /// (`joinsInMemory`, or found so): the store answers on rows as they are now (docs/history.md,
    /// "Query generations").
    func prepare<Result>(_ request: FetchRequest<Result>, rollingBack: Bool = false, joinsInMemory: Bool = false) throws
        -> (PersistentStoreCoordinator, LogicalPlan, RequestPlan.Generation?) {
        let coordinator = try requireCoordinator("fetch \(request.entityName)")
        takePermanentIDs()
        processPendingChanges()
        var logical = try LogicalPlan(request, model: coordinator.managedObjectModel)
        var generation: RequestPlan.Generation?
        if parent == nil, let pinned = queryGeneration {
            try pinned.catchUp()
            let joined = joinsInMemory || pinned.touches(logical.joinedEntities)
            let rollsBack = rollingBack || joined || pinned.touchesFamily(of: logical.entity) || pinned.touches(logical.sortedEntities(request.sortDescriptors))
            generation = RequestPlan.Generation(version: pinned.version, rollsBack: rollsBack, joinsInMemory: joined)
        }
        let rollsBack = generation?.rollsBack == true
        // Joins stay in the store unless objects they reach changed since the generation: rows
        // of the entity changed since are left out of the store's answer and judged as they were.
        let pinnedJoins = generation?.joinsInMemory == true
        logical.keepJoins(inMemory: pinnedJoins || request.includesPendingChanges && hasPendingChanges(in: logical.joinedEntities),
                           because: pinnedJoins ? "objects it reaches changed since the context's query generation"
                               : "objects it reaches have unsaved changes, which the store's rows do not hold (save, or set includesPendingChanges to false)")
        logical.keepSorts(inMemory: rollsBack || request.includesPendingChanges && hasPendingChanges(in: logical.sortedEntities(request.sortDescriptors)))
        return (coordinator, logical, generation)
    }

    /// Called after the store's answer to `plan` was read, in a context pinned to a query
    /// generation: the overlay is brought up to date (it then covers the rows read), and when
    /// objects changed since the plan was made in a way it did not allow for, the plan to follow
    /// instead (the answer is read again): one that rolls back, when this one let the store
    /// answer; one with joins kept for objects, when objects a join reaches changed. Nil: the
    /// answer stands. (At most two plans more: the last keeps everything for objects.)
    func replanned<Result>(_ request: FetchRequest<Result>, after plan: RequestPlan) throws -> RequestPlan? {
        guard let planned = plan.generation, let pinned = queryGeneration else { return nil }
        try pinned.catchUp()
        guard pinned.version != planned.version else { return nil }
        if !planned.rollsBack { return try self.plan(request, rollingBack: true) }
        if !planned.joinsInMemory && pinned.touches(plan.logical.joinedEntities) {
            return try self.plan(request, rollingBack: true, joinsInMemory: true)
        }
        return nil
    }

    /// Whether objects of any of `entities` have unsaved changes here (inserted, changed or
    /// deleted).
    func hasPendingChanges(in entities: [EntityDescription]) -> Bool {
        guard hasChanges, !entities.isEmpty else { return false }
        let wanted = Set(entities.map(ObjectIdentifier.init))
        return [inserted.objects, updated.objects, deleted.objects].contains { objects in
            objects.contains { wanted.contains(ObjectIdentifier($0.entity)) }
        }
    }

    /// The request with its entity named as the model names it: a typed request made with
    /// ``FetchRequest/init()`` names its class, which the model may give another entity name.
    ///
    /// - Throws: ``ArborError/Code/invalidFetchRequest`` for a negative limit, offset or batch size.
    func resolved<Result>(_ request: FetchRequest<Result>) throws -> FetchRequest<Result> {
        for (name, value) in [("fetchLimit", request.fetchLimit), ("fetchOffset", request.fetchOffset), ("fetchBatchSize", request.fetchBatchSize)] where value < 0 {
            throw ArborError(.invalidFetchRequest, "the fetch of \(request.entityName) has \(name) \(value): it cannot be negative (0 means none)",
                             entity: request.entityName, key: name, value: "\(value)")
        }
        guard let model = persistentStoreCoordinator?.managedObjectModel, model.entity(named: request.entityName) == nil,
              let type = Result.self as? ManagedObject.Type, type != ManagedObject.self,
              let entity = model.entities.first(where: { $0.managedObjectClass == type }) else { return request }
        var copy = request
        copy.entityName = entity.name
        return copy
    }

    /// The objects of the request's entity with unsaved changes (inserted, updated, deleted),
    /// when the request includes pending changes.
    func pendingObjects<Result>(of entity: EntityDescription, _ request: FetchRequest<Result>) -> [ManagedObject] {
        guard request.includesPendingChanges, hasChanges else { return [] }
        let wanted: (ManagedObject) -> Bool = request.includesSubentities
            ? { $0.entity.isKind(of: entity) }
            : { $0.entity === entity }
        return (inserted.objects + updated.objects + deleted.objects).filter(wanted)
    }

    /// Object IDs: straight from the stores' rows when they answer, else through objects.
    func fetchIDs<Result>(_ request: FetchRequest<Result>, plan given: RequestPlan? = nil) throws -> [ManagedObjectID] {
        let plan = try given ?? plan(request)
        if case .stores(let stores) = plan.source, plan.rowsAnswer {
            // Only the IDs are read: no column needs decoding (the store orders before it hands
            // rows over, so a sorted fetch still reads its sort keys).
            var fetch = plan.storeFetch
            if fetch.sortDescriptors.isEmpty { fetch.decodedProperties = [] }
            let ids = try plan.coordinator.fetch(fetch, in: stores).map(\.0)
            guard let again = try replanned(request, after: plan) else { return ids }
            return try fetchObjects(request, plan: again).map(\.objectID)
        }
        return try fetchObjects(request, plan: plan).map(\.objectID)
    }

    /// Managed objects: the store's rows made into (or matched with) registered objects, then the
    /// pending changes, the residual predicate, the order and the window.
    func fetchObjects<Result>(_ request: FetchRequest<Result>, plan given: RequestPlan? = nil) throws -> [ManagedObject] {
        // Long: the fetch pipeline in its order (rows, objects, snapshots, residual, pending,
        // generation, sort, window): each step reads `results`, `fresh` and `freshRows` as the step
        // before left them.
        let plan = try given ?? plan(request)
        let (coordinator, logical, pending, pushdown) = (plan.coordinator, plan.logical, plan.pending, plan.rowsAnswer)
        var rows: [(ManagedObjectID, StoreRow)]
        switch plan.source {
        case .parent(let parent):
            // A child context's rows come from its parent, which runs the whole request over its
            // own state (S001-04); the window is the parent's to apply when nothing here changes
            // the result.
            var parentRequest = FetchRequest<ManagedObject>(entityName: request.entityName)
            parentRequest.predicate = request.predicate
            parentRequest.sortDescriptors = request.sortDescriptors
            parentRequest.includesSubentities = request.includesSubentities
            if pushdown {
                parentRequest.fetchLimit = request.fetchLimit
                parentRequest.fetchOffset = request.fetchOffset
            }
            rows = try parent.performAndWait { try parent.rowsForChild(parentRequest) }
        case .stores(let stores):
            // The store applies the order and the window when nothing is left to do in memory.
            rows = try coordinator.fetch(plan.storeFetch, in: stores)
            // Pinned to a query generation: objects changed since the rows were planned for in
            // a way the plan did not allow for: planned again, the store's answer read again.
            if let again = try replanned(request, after: plan) { return try fetchObjects(request, plan: again) }
        }
        // Rows of objects changed since the context's query generation are read as they were
        // then, after the rows (below); the store judged them as they are now.
        let rollingBack = plan.generation?.rollsBack == true ? queryGeneration : nil

        let evaluator = PredicateEvaluator(context: self)
        var results: [ManagedObject] = []
        results.reserveCapacity(rows.count)
        // The objects that take their rows, by their places in `results` (an array of the
        // objects themselves counted a reference to each twice), and the rows' places in `rows`
        // (read in place; a new snapshot takes its row away, unless the rows are wanted after).
        var fresh: [Int] = []
        var freshRows: [Int] = []
        fresh.reserveCapacity(rows.count)
        freshRows.reserveCapacity(rows.count)
        // The IDs are read in place (`rows[position].0` copies the whole row first, through a
        // generic copy of the tuple, for every row fetched).
        // The entity of the last new fault's ID space (rows come in runs of one entity): told
        // by the space's address, with no name compared.
        // (Held unretained: the model holds its entities.)
        var lastSpace: UnsafeMutableRawPointer?
        var lastEntity = Unmanaged.passUnretained(logical.entity)
        rows.withUnsafeBufferPointer { buffer in
            for position in buffer.indices {
                let id = buffer.baseAddress.unsafelyUnwrapped.advanced(by: position).pointer(to: \.0).unsafelyUnwrapped.pointee
                if let rollingBack, rollingBack.isTouched(id) { continue }
                if id.spaceAddress != lastSpace {
                    lastEntity = Unmanaged.passUnretained(id.entityName == logical.entity.name ? logical.entity : modelEntity(of: id) ?? logical.entity)
                    lastSpace = id.spaceAddress
                }
                let object = lastEntity._withUnsafeGuaranteedRef { registeredObjectOrFault(id, entity: $0) }
                // Objects with unsaved changes are judged below, on their in-memory values.
                if request.includesPendingChanges && object.hasChanges { continue }
                // New faults, and registered ones holding no row yet, take this one.
                if object.faulted && object.snapshot == nil {
                    fresh.append(results.count)
                    freshRows.append(position)
                }
                results.append(consume object)
            }
        }
        // A child's rows are in hand (no row cache would serve its faults): its objects take them.
        let realize = parent != nil || !request.returnsObjectsAsFaults || logical.residual != nil || (!pushdown && !request.sortDescriptors.isEmpty)
        // With a batch size, new faults are left without rows: the first of each batch to fire
        // loads the whole batch (below, once the order is final).
        let batched = request.fetchBatchSize > 0 && !realize
        if batched {
            fresh = []
            freshRows = []
        }
        // The fetched rows go to the row cache, one reference per object that now holds them: a
        // fault returned fires from the cache.
        // Unless the rows are wanted below (`realize`), the snapshots take them away.
        if parent == nil {
            rows.withUnsafeMutableBufferPointer { rows in
                results.withUnsafeBufferPointer { objects in
                    holdSnapshots(count: fresh.count, coordinator, fill: !realize && firesFromFilledValues, consuming: !realize) { index in
                        (Unmanaged.passUnretained(objects[fresh[index]]),
                         rows.baseAddress.unsafelyUnwrapped.advanced(by: freshRows[index]).pointer(to: \.1).unsafelyUnwrapped)
                    }
                }
            }
        }
        if realize {
            for (place, position) in zip(fresh, freshRows) {
                let object = results[place]
                object.fill(from: rows[position].1)
                object.awakeFromFetch()
            }
        }
        if let residual = logical.residual {
            results = try results.filter { try evaluator.evaluate(residual, on: .object($0)) }
        }
        if !pending.isEmpty {
            for object in pending where !object.deletedFlag {
                if try request.predicate.map({ try evaluator.evaluate($0, on: .object(object)) }) ?? true { results.append(object) }
            }
        }
        if let rollingBack {
            // The objects that existed at the generation and changed since, judged as they were
            // (their faults fire with their rows of then).
            var changed: [ManagedObject] = []
            for overlay in rollingBack.overlays.values where plan.stores.contains(where: { $0.identifier == overlay.store }) {
                for id in overlay.changedObjects(of: logical.entity, subentities: request.includesSubentities) {
                    guard let entity = modelEntity(of: id) else { continue }
                    let object = registeredObjectOrFault(id, entity: entity)
                    // Those with unsaved changes were judged above.
                    if request.includesPendingChanges && object.hasChanges { continue }
                    if object.deletedFlag { continue }
                    changed.append(object)
                }
            }
            // Their rows of now in one read (their faults then fire from the row cache, rolled back).
            if request.predicate != nil { try loadRows(of: changed) }
            for object in changed where try request.predicate.map({ try evaluator.evaluate($0, on: .object(object)) }) ?? true {
                results.append(object)
            }
        }
        if !pushdown {
            results = try ObjectSortDescriptor.sort(results, by: request.sortDescriptors, evaluator: evaluator) { .object($0) }
            results = results.window(offset: request.fetchOffset, limit: request.fetchLimit)
        }
        if batched { makeFaultBatches(of: results.filter { $0.faulted && $0.snapshot == nil }, size: request.fetchBatchSize) }
        try prefetch(request.relationshipKeyPathsForPrefetching, of: results)
        return results
    }

    /// Gives each of `count` objects a reference to the row-cache snapshot of its row (after a
    /// fetch, a batch load or a save), under one lock: `element(index)` gives the object and
    /// its row, in place (the object's ID is its row's). With `fill`, each object (a fault)
    /// also takes the snapshot's values, still a fault: its first fire then needs no lock while
    /// the snapshot stays as it was (``ManagedObject/fireFault()``; only where such fires are
    /// allowed, ``firesFromFilledValues``: elsewhere the fill would be done again at the fire).
    ///
    /// The objects come unretained (the caller holds them: nothing counts references per object).
    /// With `consuming`, new snapshots take their rows away (see
    /// ``PersistentStoreCoordinator/retainSnapshots(count:consuming:_:_:)``).
    func holdSnapshots(count: Int, _ coordinator: PersistentStoreCoordinator, fill: Bool = false, consuming: Bool,
                       _ element: (Int) -> (object: Unmanaged<ManagedObject>, row: UnsafeMutablePointer<StoreRow>)) {
        coordinator.retainSnapshots(count: count, consuming: consuming, { index in
            let (object, row) = element(index)
            return (object._withUnsafeGuaranteedRef { $0.objectID }, row)
        }, { index, snapshot in
            // The reference handed over, carried into the object as it is (no count of its own).
            let reference = Unmanaged.passRetained(consume snapshot)
            element(index).object._withUnsafeGuaranteedRef { object in
                // An object listed twice (rows naming one ID twice: a damaged index) was counted
                // twice: one reference goes back.
                if reference._withUnsafeGuaranteedRef({ object.snapshot === $0 }) {
                    coordinator.release(reference.takeRetainedValue())
                } else {
                    object.hold(retained: reference)
                }
                // Filled from the snapshot it holds, used unretained.
                if fill { reference._withUnsafeGuaranteedRef { object.fill(from: $0) } }
            }
        })
    }

    /// Loads the rows of a batch of faults (``FetchRequest/fetchBatchSize``) into the row cache,
    /// in one read, for those still faults: each then fires from the cache.
    func loadBatch(_ batch: FaultBatch) throws {
        guard !batch.loaded, let coordinator = persistentStoreCoordinator else { return }
        batch.loaded = true
        let faults = batch.ids.compactMap { registeredObject(for: $0) }.filter { $0.faulted && $0.snapshot == nil }
        let rows = try coordinator.rows(for: faults.map(\.objectID))
        var holders: [ManagedObject] = []
        var held: [StoreRow] = []
        for (object, row) in zip(faults, rows) {
            object.leaveFaultBatch()
            guard let row else { continue }
            holders.append(object)
            held.append(row)
        }
        held.withUnsafeBufferPointer { rows in
            holdSnapshots(count: holders.count, coordinator, fill: firesFromFilledValues, consuming: false) { (Unmanaged.passUnretained(holders[$0]), UnsafeMutablePointer(mutating: rows.baseAddress.unsafelyUnwrapped.advanced(by: $0))) }
        }
    }

    /// Gives `faults` (faults holding no row) fault batches of `size` in turn: the first of a
    /// batch to fire reads the rows of all (``loadBatch(_:)``). A last batch of one is left out.
    func makeFaultBatches(of faults: [ManagedObject], size: Int) {
        for start in stride(from: 0, to: faults.count, by: size) {
            let members = faults[start..<min(faults.count, start + size)]
            guard members.count > 1 else { return }
            let batch = FaultBatch(ids: members.map(\.objectID))
            for object in members { object.join(batch) }
        }
    }

    /// Reads the rows of the faults among `objects` that hold none yet, in one read per store,
    /// into the row cache: each then fires without reading the store. (A key path's collection
    /// operator over a to-many relationship's faults, prefetching.)
    func loadRows(of objects: [ManagedObject]) throws {
        guard parent == nil else { return }
        let uncached = objects.filter { $0.faulted && $0.snapshot == nil && $0.faultBatch == nil }
        if uncached.count > 1 { try loadBatch(FaultBatch(ids: uncached.map(\.objectID))) }
    }

    /// A collection operator (`@count`, `@sum`, `@avg`, `@min`, `@max`) over `attribute` of the
    /// destinations of `object`'s unloaded to-many `relationship`, from the store: the
    /// relationship's keys (its foreign-key or join tree) and, but for `@count`, the destinations'
    /// rows — no object made, the relationship left unloaded. The values go through the same
    /// aggregation as the objects' (``KeyPathEvaluator/aggregate(_:_:)``), so the answer is the
    /// one firing the relationship would give. Nil when objects must answer: the relationship is
    /// loaded or the owner new, the context has unsaved changes in the destination's hierarchy,
    /// one of the destinations is registered here (its in-memory state counts), the attribute is
    /// transient or not an attribute, the context has a parent, or it is pinned to a query
    /// generation.
    func aggregateFromRows(of object: ManagedObject, through relationship: RelationshipDescription, _ operation: CollectionOperator,
                           _ attribute: String?) throws -> Any?? {
        guard parent == nil, queryGeneration == nil, let coordinator = persistentStoreCoordinator, !object.objectID.isTemporaryID,
              object.faulted || object.unloadedRelationships.contains(relationship.name),
              let destination = relationship.destinationEntity else { return nil }
        let attributeDescription = attribute.flatMap { destination.attributesByName[$0] }
        if attribute != nil, attributeDescription == nil || attributeDescription?.isTransient == true { return nil }
        if hasPendingChanges(in: destination.rootEntity.selfAndDescendants) { return nil }
        let ids = try coordinator.relatedObjectIDs(of: object.objectID, relationship: relationship)
        if ids.contains(where: { registeredObject(for: $0) != nil }) { return nil }
        guard let attributeDescription else { return .some(ids.count) }
        var values: [AttributeValue] = []
        values.reserveCapacity(ids.count)
        for stored in try coordinator.attributeValues(attributeDescription.name, of: ids) {
            if let stored { values.append(stored) }
        }
        return .some(try KeyPathEvaluator.aggregate(operation, stored: values, of: attributeDescription.type))
    }

    /// Loads the destinations of the given relationship key paths for `objects`.
    func prefetch(_ keyPaths: [String], of objects: [ManagedObject]) throws {
        for keyPath in keyPaths {
            var level = objects
            for key in KeyPathEvaluator.components(of: keyPath) where !key.isEmpty {
                var next: [ManagedObject] = []
                var seen = Set<ObjectIdentifier>()
                // A to-many's destinations for every object of the level in one read (faults
                // fired first, their rows read together: reading the key fires them anyway, and
                // firing one later would unload what was read).
                let owners = level.compactMap { object in
                    object.entity.relationshipsByName[key].flatMap { $0.isToMany ? (object, $0) : nil }
                }
                try loadRows(of: owners.map(\.0))
                for (object, _) in owners where object.faulted { try object.fireFault() }
                try loadRelationships(owners)
                for object in level {
                    guard object.entity.relationshipsByName[key] != nil else {
                        throw ArborError(.invalidFetchRequest, "\(object.entity.name) has no relationship \"\(key)\" to prefetch", entity: object.entity.name, key: key)
                    }
                    let destinations: [ManagedObject] = switch try object.value(forKey: key) {
                    case let destination as ManagedObject: [destination]
                    case let set as Set<ManagedObject>: Array(set)
                    case let array as [ManagedObject]: array
                    default: []
                    }
                    // Each destination once, however many objects share it.
                    for destination in destinations where seen.insert(ObjectIdentifier(destination)).inserted { next.append(destination) }
                }
                // The faults' rows in one read (per store), then each fires from the row cache.
                try loadRows(of: next)
                for destination in next where destination.faulted { try? destination.fireFault() }
                // The objects hold what was prefetched for them (relationships hold IDs, and an
                // unchanged object nobody holds would go away at once).
                for object in level { object.holdPrefetched(next) }
                level = next
            }
        }
    }

    /// Dictionaries of the request's properties, grouped and aggregated as asked, in the order
    /// its sort descriptors give (docs/predicates.md, "Dictionaries"): the plan's
    /// ``DictionaryPlan`` says what is done to the objects and what to the dictionaries.
    func fetchDictionaries<Result>(_ request: FetchRequest<Result>) throws -> [[String: any Sendable]] {
        let plan = try plan(request)
        guard let dictionary = plan.logical.dictionary else {
            throw ArborError(.invalidFetchRequest, "the fetch of \(request.entityName) does not return dictionaries", entity: request.entityName)
        }
        let shape = dictionary.shape
        let evaluator = PredicateEvaluator(context: self)
        var rows: [DictionaryRow]
        if shape.collapses, let groups = try groupsInStore(request, plan: plan) {
            rows = groups.map { DictionaryRow(values: $0.values, object: nil, group: $0.groupValues) }
        } else {
            if shape.collapses && request.requiresStoreEvaluation {
                throw ArborError(.invalidFetchRequest, "the fetch of \(request.entityName) requires store evaluation, and its groups would be made of objects: "
                                    + "a child context, unsaved changes in the context, a property or group key the store does not read on rows, or several stores",
                                 entity: request.entityName)
            }
            rows = try dictionaryRows(of: fetchObjects(objectsRequest(for: request, plan.logical), plan: plan), groupBy: shape.groupBy,
                                      properties: shape.properties, aggregates: shape.aggregates, evaluator: evaluator)
        }
        if let having = dictionary.having {
            rows = try rows.filter { try having.evaluate(with: $0.values as [String: Any]) }
        }
        if !dictionary.sortsObjects {
            rows = try dictionary.order.sorted(rows, evaluator: evaluator)
        }
        if dictionary.distinct {
            var distinct: [DictionaryRow] = []
            func same(_ a: [String: any Sendable], _ b: [String: any Sendable]) -> Bool {
                a.count == b.count && a.allSatisfy { key, value in
                    b[key].map { PredicateEvaluator.equal(Operand.from(value), Operand.from($0), []) } ?? false
                }
            }
            for row in rows where !distinct.contains(where: { same($0.values, row.values) }) { distinct.append(row) }
            rows = distinct
        }
        if !dictionary.windowsObjects {
            rows = rows.window(offset: dictionary.offset, limit: dictionary.limit)
        }
        return rows.map(\.values)
    }

    /// The groups of a grouped or aggregated dictionary fetch, computed by the store in one pass
    /// over its rows (docs/relational-planning.md, "Aggregates in the store"); nil when objects
    /// are needed (``groupingRoute(_:plan:)`` says when).
    func groupsInStore<Result>(_ request: FetchRequest<Result>, plan given: RequestPlan? = nil) throws -> [StoreGroup]? {
        let plan = try given ?? plan(request)
        guard case .store(let grouping) = groupingRoute(request, plan: plan),
              let groups = try plan.coordinator.groups(grouping, in: plan.stores[0], entity: plan.logical.entity) else { return nil }
        // Objects changed since the pinned generation meanwhile: the objects answer.
        return try replanned(request, after: plan) != nil ? nil : groups
    }

    /// Where the groups of a grouped or aggregated dictionary fetch planned as `plan` are made:
    /// the one decision that the fetch follows and `explain` prints. Objects make them with a
    /// child context, unsaved changes (judged by their in-memory values), a predicate term the
    /// store cannot run, a query generation that rolls objects back, several stores, or a key
    /// path or expression the store does not read on rows.
    func groupingRoute<Result>(_ request: FetchRequest<Result>, plan: RequestPlan) -> GroupingRoute {
        guard let shape = plan.logical.dictionary?.shape, shape.collapses else { return .objects("the fetch makes no groups") }
        guard parent == nil else { return .objects("a child context's groups are made of its parent's objects") }
        if plan.logical.residual != nil { return .objects("a term of the predicate is judged on objects") }
        if request.includesPendingChanges && hasChanges { return .objects("the context has unsaved changes, judged by their in-memory values") }
        if plan.generation?.rollsBack == true { return .objects("objects changed since the query generation are judged as they were") }
        guard plan.stores.count == 1 else { return .objects("\(plan.stores.count) stores hold \(plan.logical.entity.name)") }
        var rows = plan.storeFetch
        (rows.offset, rows.limit) = (0, 0)
        let grouping = StoreGrouping(rows: rows, groupBy: shape.groupBy, properties: shape.properties)
        guard plan.coordinator.canGroup(grouping, in: plan.stores[0], entity: plan.logical.entity) else {
            return .objects("the store does not read every group key, property and expression on rows")
        }
        return .store(grouping)
    }

    /// The request whose objects a dictionary fetch reads: its predicate and scope, realised
    /// objects, and the order and window its plan (`logical`) applies to the objects.
    func objectsRequest<Result>(for request: FetchRequest<Result>, _ logical: LogicalPlan) -> FetchRequest<ManagedObject> {
        var objectRequest = FetchRequest<ManagedObject>(entityName: request.entityName)
        objectRequest.predicate = request.predicate
        objectRequest.includesPendingChanges = request.includesPendingChanges
        objectRequest.includesSubentities = request.includesSubentities
        objectRequest.requiresStoreEvaluation = request.requiresStoreEvaluation
        objectRequest.returnsObjectsAsFaults = false
        objectRequest.sortDescriptors = logical.sortDescriptors
        (objectRequest.fetchOffset, objectRequest.fetchLimit) = (logical.offset, logical.limit)
        return objectRequest
    }

    /// The dictionaries of `objects`: one per group of `groupBy` (groups by the evaluator's
    /// equality), one in all for aggregates without groups, else one per object.
    func dictionaryRows(of objects: [ManagedObject], groupBy groupKeys: [String], properties: [PropertyToFetch], aggregates: Bool,
                        evaluator: PredicateEvaluator) throws -> [DictionaryRow] {
        func plain(_ object: ManagedObject, _ keyPath: String) throws -> Operand {
            try evaluator.value(of: KeyPathEvaluator.components(of: keyPath)[...], on: .object(object))
        }
        func dictionary(_ members: [ManagedObject]) throws -> [String: any Sendable] {
            var result: [String: any Sendable] = [:]
            for property in properties {
                let value: Operand
                switch property.kind {
                case .key(let keyPath): value = try members.first.map { try plain($0, keyPath) } ?? .null
                case .expression(let expression): value = try members.first.map { try evaluator.value(of: expression, on: .object($0)) } ?? .null
                case .aggregate(let function, let keyPath):
                    let values = try members.map { try plain($0, keyPath) }
                    value = function == .count
                        ? .int(Int64(values.filter { !$0.isNull }.count))
                        : try evaluator.apply(function.collectionOperator, to: values.filter { !$0.isNull })
                }
                if let sendable = value.sendableValue { result[property.name] = sendable }
            }
            return result
        }
        if !groupKeys.isEmpty {
            var table = GroupTable()
            var members: [[ManagedObject]] = []
            for object in objects {
                let (index, isNew) = table.group(of: try groupKeys.map { try plain(object, $0) })
                if isNew { members.append([]) }
                members[index].append(object)
            }
            return try zip(table.keys, members).map { key, members in
                DictionaryRow(values: try dictionary(members), object: nil, group: Dictionary(zip(groupKeys, key)) { first, _ in first })
            }
        }
        if aggregates { return [DictionaryRow(values: try dictionary(objects), object: nil, group: [:])] }
        return try objects.map { DictionaryRow(values: try dictionary([$0]), object: $0, group: [:]) }
    }
}

/// Where a grouped or aggregated dictionary fetch makes its groups
/// (``ManagedObjectContext/groupingRoute(_:plan:)``).
enum GroupingRoute {
    /// In the store, in one pass over the rows the plan's fetch selects.
    case store(StoreGrouping)
    /// From objects, for the reason given.
    case objects(String)
}
