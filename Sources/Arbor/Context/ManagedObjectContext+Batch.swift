import Foundation
import Logging

/// Batch requests: changes the store makes in one transaction without managed objects
/// (docs/batch-requests.md; issue 28, item 4).
extension ManagedObjectContext {
    /// Runs a batch delete in the stores (Core Data's `execute(_:)` with an
    /// `NSBatchDeleteRequest`): the rows the request names are deleted in one transaction per
    /// store, the model's delete rules applied to them in the store — cascade, nullify, deny —
    /// and, unless the request says otherwise, every live context of the coordinator merges what
    /// it did (deleted objects leave them, nullified ones are refreshed). This context's unsaved
    /// changes are neither seen nor saved.
    ///
    /// - Returns: what the request's ``BatchDeleteRequest/resultType`` asks for.
    /// - Throws: ``ArborError/Code/invalidFetchRequest`` for a fetch request the store cannot
    ///   answer whole (a predicate or order that needs objects, an unknown entity, a window over
    ///   several stores); ``ArborError/Code/validationRelationshipDeniedDelete`` (several in one
    ///   ``ArborError/Code/validationMultipleErrors``) when a deny rule refuses, with nothing
    ///   deleted; ``ArborError/Code/misuse`` for IDs that are not saved objects of the
    ///   coordinator's stores; ``ArborError/Code/storeSave`` for an engine failure.
    public func execute(_ request: BatchDeleteRequest) throws -> BatchDeleteResult {
        checkQueue()
        let coordinator = try requireCoordinator("run a batch delete in")
        let deletion: ChangeRecord
        switch request.target {
        case .fetch(let fetchRequest):
            let fetchRequest = try resolved(fetchRequest)
            let logical = try LogicalPlan(fetchRequest, model: coordinator.managedObjectModel)
            guard logical.rowsAnswerWholeRequest else {
                let what = logical.onObjects.first.map { "its predicate needs objects (\($0.term.predicateFormat): \($0.reason))" } ?? "its sort needs objects"
                throw ArborError(.invalidFetchRequest, "a batch delete of \(fetchRequest.entityName) runs in the store, and \(what)",
                                 entity: fetchRequest.entityName)
            }
            if fetchRequest.fetchLimit > 0 || fetchRequest.fetchOffset > 0, coordinator.stores(holding: logical.entity).count > 1 {
                throw ArborError(.invalidFetchRequest, "a batch delete of \(fetchRequest.entityName) with a limit or an offset spans several stores",
                                 entity: fetchRequest.entityName)
            }
            let fetch = StoreFetch(logical, window: true)
            deletion = try writeBatch(coordinator, merging: request.mergesIntoContexts) {
                try coordinator.batchDelete(entity: logical.entity, fetch: fetch, objectIDs: [], origin: transactionOrigin(.batchDelete))
            }
        case .objectIDs(let ids):
            deletion = try writeBatch(coordinator, merging: request.mergesIntoContexts) {
                try coordinator.batchDelete(entity: nil, fetch: nil, objectIDs: ids, origin: transactionOrigin(.batchDelete))
            }
        }
        coordinator.logger.debug("a batch delete deleted \(deletion.deleted.count) objects and nullified \(deletion.updated.count)",
                                 metadata: name.map { ["arbor.context": .string($0)] } ?? [:])
        return BatchDeleteResult(resultType: request.resultType, deleted: Array(deletion.deleted), updated: Array(deletion.updated))
    }
}

extension ManagedObjectContext {
    /// Runs a batch update in the stores (Core Data's `execute(_:)` with an
    /// `NSBatchUpdateRequest`): every row the request's predicate matches gets the new values of
    /// ``BatchUpdateRequest/propertiesToUpdate`` — each an expression evaluated on the row as it
    /// was — at its next version, in one transaction per store, with its indexes and uniqueness
    /// entries; no managed object is made. Uniqueness conflicts go to this context's merge
    /// policy: under ``MergePolicyType/mergeByPropertyStoreTrump`` and
    /// ``MergePolicyType/rollback`` the rows that would collide keep their stored values and the
    /// rest is updated; under the other policies the request fails with the conflicts and
    /// nothing is written (as a changed object colliding with a saved one fails a save). Unless
    /// the request says otherwise, every live context of the coordinator merges the updated
    /// objects (they are refreshed, their unsaved changes on top). This context's unsaved
    /// changes are neither seen nor saved.
    ///
    /// - Returns: what the request's ``BatchUpdateRequest/resultType`` asks for.
    /// - Throws: ``ArborError/Code/invalidFetchRequest`` for an unknown entity, a key that is
    ///   not a persistent attribute, or a predicate the store cannot answer whole;
    ///   ``ArborError/Code/wrongValueType`` and the validation codes for a value that does not
    ///   fit (with nothing written); ``ArborError/Code/constraintConflict`` listing the
    ///   conflicts; ``ArborError/Code/storeSave`` for an engine failure.
    public func execute(_ request: BatchUpdateRequest) throws -> BatchUpdateResult {
        // Long: one request from its checks to its write: the nested `change` reads the checked
        // updates and the evaluator, and the retry loop that leaves out colliding rows hands it to
        // every attempt.
        checkQueue()
        let coordinator = try requireCoordinator("run a batch update in")
        var fetchRequest = FetchRequest<ManagedObject>(entityName: request.entityName)
        fetchRequest.predicate = request.predicate
        fetchRequest.includesSubentities = request.includesSubentities
        fetchRequest = try resolved(fetchRequest)
        let logical = try LogicalPlan(fetchRequest, model: coordinator.managedObjectModel)
        let entity = logical.entity
        guard logical.rowsAnswerWholeRequest else {
            throw ArborError(.invalidFetchRequest, "a batch update of \(entity.name) runs in the store, and its predicate needs objects (\(logical.onObjects.map { "\($0.term.predicateFormat): \($0.reason)" }.joined(separator: "; ")))",
                             entity: entity.name)
        }
        // The attributes and their expressions, checked before anything is read.
        var updates: [(attribute: AttributeDescription, expression: ObjectExpression)] = []
        for (key, expression) in request.propertiesToUpdate.sorted(by: { $0.key < $1.key }) {
            guard let attribute = entity.attributesByName[key], !attribute.isTransient else {
                throw ArborError(.invalidFetchRequest, "a batch update sets the persistent attributes of \(entity.name); \(key) is not one", entity: entity.name, key: key)
            }
            updates.append((attribute, expression))
        }
        let evaluator = PredicateEvaluator()
        let subject = DecodedRow()
        func change(_ id: ManagedObjectID, _ row: StoreRow) throws -> StoreRow? {
            guard !updates.isEmpty else { return nil }
            var new = row
            let rowEntity = row.entityName == entity.name ? entity : try coordinator.managedObjectModel.entity(named: row.entityName).unwrap(row.entityName)
            for (attribute, expression) in updates {
                let value = try evaluator.value(of: expression, on: .row(subject.set(row, id: id)))
                let stored = try Self.storedValue(value, for: attribute, entity: rowEntity.name)
                if request.validatesValues {
                    try Validation.check(stored, attribute: attribute, entity: rowEntity.name, objectID: id)
                } else if stored == nil && !attribute.isOptional {
                    throw ArborError(.validationMissingMandatoryProperty, "\(rowEntity.name).\(attribute.name) is required; the batch update would set nil on \(id)",
                                     entity: rowEntity.name, key: attribute.name, objectID: id)
                }
                new.values[attribute.name] = stored.map(PropertyValue.attribute) ?? PropertyValue.none
            }
            return new
        }
        let mergePolicyType = mergePolicy.mergeType
        let origin = transactionOrigin(.batchUpdate)
        let record = try writeBatch(coordinator, merging: request.mergesIntoContexts) {
            var excluded: Set<ManagedObjectID> = []
            var attempts = 0
            while true {
                do {
                    return try coordinator.batchUpdate(entity: entity, fetch: StoreFetch(logical, window: false), excluding: excluded,
                                                       changing: Set(updates.map(\.attribute.name)), origin: origin, change)
                } catch let error as ArborError where error.code == .constraintConflict && !error.constraintConflicts.isEmpty {
                    // The rows that would collide keep their values, when the policy says the
                    // stored values win; else the request fails as a save would.
                    attempts += 1
                    guard mergePolicyType == .mergeByPropertyStoreTrump || mergePolicyType == .rollback, attempts <= 5 else { throw error }
                    for conflict in error.constraintConflicts { excluded.formUnion(conflict.conflictingObjectIDs) }
                }
            }
        }
        coordinator.logger.debug("a batch update updated \(record.updated.count) objects", metadata: name.map { ["arbor.context": .string($0)] } ?? [:])
        return BatchUpdateResult(resultType: request.resultType, updated: Array(record.updated))
    }

    /// Runs a batch request's `write` through `coordinator` and, when `merging`, hands the record
    /// of what it changed (empty: nothing), by ID, to every live context of the coordinator: this
    /// one merges it at once (a pinned one moves on, as after its own save); the others are
    /// posted it in the same critical section of the coordinator as the write, so that every
    /// context's inbox holds batch requests in the order they committed, and take it on their own
    /// queues without this one waiting for them (ManagedObjectContext+MergeInbox.swift) — except
    /// those pinned to a query generation, which go on reading their generation. Returns the
    /// whole record.
    func writeBatch(_ coordinator: PersistentStoreCoordinator, merging: Bool, _ write: () throws -> ChangeRecord) throws -> ChangeRecord {
        drainMerges()
        var posted: (record: ChangeRecord, to: [ManagedObjectContext])?
        let written = try coordinator.locked { () throws -> ChangeRecord in
            let written = try write()
            guard merging, !written.isEmpty else { return written }
            // The rows written went to the row cache with the write: merges read them there.
            let byID = written.byID
            let others = coordinator.liveContexts().filter { $0 !== self }
            for context in others { context.postMerge(PendingMerge(record: byID, fromOwnCoordinator: true, source: .batchRequest)) }
            posted = (byID, others)
            return written
        }
        if let posted {
            merge(posted.record, fromOwnCoordinator: true)
            for context in posted.to { context.deliverMerges(.whereWaitingWould) }
        }
        return written
    }

    /// A batch update's new value for `attribute`: `value` converted to the attribute's type (a
    /// number into an integer attribute truncated toward zero; nil stays nil).
    static func storedValue(_ value: Operand, for attribute: AttributeDescription, entity: String) throws -> AttributeValue? {
        if value.isNull { return nil }
        switch (attribute.type.kind, value) {
        case (.integer16, .double(let number)), (.integer32, .double(let number)), (.integer64, .double(let number)):
            guard number.isFinite, let whole = Int64(exactly: number.rounded(.towardZero)) else {
                throw ArborError(.wrongValueType, "\(entity).\(attribute.name) holds integers; \(number) does not fit", entity: entity, key: attribute.name, value: "\(number)")
            }
            return try attribute.type.storedValue(from: whole, entity: entity, key: attribute.name)
        case (.integer16, .decimal(let number)), (.integer32, .decimal(let number)), (.integer64, .decimal(let number)):
            var rounded = Decimal(), source = number
            NSDecimalRound(&rounded, &source, 0, number < 0 ? .up : .down)
            guard let whole = Int64(exactly: NSDecimalNumber(decimal: rounded).doubleValue) else {
                throw ArborError(.wrongValueType, "\(entity).\(attribute.name) holds integers; \(number) does not fit", entity: entity, key: attribute.name, value: "\(number)")
            }
            return try attribute.type.storedValue(from: whole, entity: entity, key: attribute.name)
        case (.decimal, .double(let number)):
            return .decimal(Decimal(number))
        default:
            guard let swift = value.swiftValue else { return nil }
            return try attribute.type.storedValue(from: swift, entity: entity, key: attribute.name)
        }
    }
}

private extension Optional where Wrapped == EntityDescription {
    func unwrap(_ name: String) throws -> EntityDescription {
        guard let self else { throw ArborError(.store, "a row names the entity \(name), which the model lacks") }
        return self
    }
}
