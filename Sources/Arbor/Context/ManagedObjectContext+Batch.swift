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
        let deletion: BatchDeletion
        switch request.target {
        case .fetch(let fetchRequest):
            let fetchRequest = try resolved(fetchRequest)
            let analysis = try FetchAnalysis(entityName: fetchRequest.entityName, predicate: fetchRequest.predicate,
                                             sortDescriptors: fetchRequest.sortDescriptors, model: coordinator.managedObjectModel)
            guard analysis.rowsAnswerWholeRequest else {
                let what = analysis.residual.map { "its predicate needs objects (\($0))" } ?? "its sort needs objects"
                throw ArborError(.invalidFetchRequest, "a batch delete of \(fetchRequest.entityName) runs in the store, and \(what)",
                                 entity: fetchRequest.entityName)
            }
            if fetchRequest.fetchLimit > 0 || fetchRequest.fetchOffset > 0, coordinator.stores(holding: analysis.entity).count > 1 {
                throw ArborError(.invalidFetchRequest, "a batch delete of \(fetchRequest.entityName) with a limit or an offset spans several stores",
                                 entity: fetchRequest.entityName)
            }
            deletion = try coordinator.batchDelete(entity: analysis.entity, fetch: StoreFetch(analysis, fetchRequest, window: true), objectIDs: [])
        case .objectIDs(let ids):
            deletion = try coordinator.batchDelete(entity: nil, fetch: nil, objectIDs: ids)
        }
        let updated = deletion.updated
        coordinator.logger.debug("a batch delete deleted \(deletion.deleted.count) objects and nullified \(updated.count)",
                                 metadata: name.map { ["arbor.context": .string($0)] } ?? [:])
        if request.mergesIntoContexts && !(deletion.deleted.isEmpty && updated.isEmpty) {
            var change = ContextChange(kind: .didSave)
            change.deletedObjectIDs = Set(deletion.deleted)
            change.updatedObjectIDs = Set(updated)
            for context in coordinator.liveContexts() {
                if context === self {
                    merge(change, fromOwnCoordinator: true)
                } else {
                    context.performAndWait { context.merge(change, fromOwnCoordinator: true) }
                }
            }
        }
        return BatchDeleteResult(resultType: request.resultType, deleted: deletion.deleted, updated: updated)
    }
}
