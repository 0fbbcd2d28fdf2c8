import Foundation
import Logging

/// Query generations (docs/history.md, "Query generations"; issue 28, item 5): a context pinned
/// to a generation reads the stores as they were at it — fetches, counts, faults, relationships
/// — while other contexts and processes save, until it saves, merges, refreshes all its objects,
/// resets, or is moved on. It reads the rows as they are and rolls back, from the stores'
/// persistent history, the objects changed since.
extension ManagedObjectContext {
    /// The user-info key of did-save and objects-did-change notifications of a pinned context:
    /// the ``QueryGenerationToken`` of its generation (after a save, the one it moved to). Core
    /// Data's `NSManagedObjectContextQueryGenerationKey`.
    public static let queryGenerationKey = "NSManagedObjectContextQueryGenerationKey"

    /// The token of the query generation the context is pinned to; nil when it reads the stores
    /// as they are (Core Data's `queryGenerationToken`). Another context of the same stores
    /// pinned with it reads the same generation.
    public var queryGenerationToken: QueryGenerationToken? {
        checkQueue()
        return queryGeneration?.token
    }

    /// Pins the context to a query generation (Core Data's `setQueryGenerationFrom(_:)`):
    /// ``QueryGenerationToken/current`` for the stores as they are now, a token of a pinned
    /// context for its generation, nil to read the stores as they are from now on.
    ///
    /// A pinned context reads every store as it was at the generation: objects inserted since
    /// are not found, objects deleted since are, and changed ones have their values of then —
    /// in fetches (predicates, key paths, sorts, windows, counts, dictionaries), faults and
    /// relationships. It moves on to the current generation when it saves, merges a save,
    /// refreshes all its objects, or resets. Its registered objects keep the values they have
    /// (pinning to an older generation turns those without changes back into faults, which
    /// fire as they were then).
    ///
    /// - Throws: ``ArborError/Code/misuse`` for a child context (pin its root), a coordinator
    ///   with a store that records no persistent history (the generation is read from it:
    ///   ``PersistentStoreDescription/persistentHistoryTracking``), or a token of other stores
    ///   or of a transaction they have not made; ``ArborError/Code/persistentHistoryTokenExpired``
    ///   when the history after the token's generation was deleted.
    public func setQueryGenerationFrom(_ token: QueryGenerationToken?) throws {
        checkQueue()
        guard let token else {
            unpinQueryGeneration()
            return
        }
        guard parent == nil else {
            throw ArborError(.misuse, "a child context reads its parent's objects: pin its root context to a query generation instead")
        }
        let coordinator = try requireCoordinator("pin to a query generation")
        let lasts = try coordinator.lastHistoryTransactions()
        var overlays: [UUID: GenerationOverlay] = [:]
        var numbers: [UUID: Int64] = [:]
        for (store, last) in lasts {
            var number = last
            if let wanted = token.transactionNumbers {
                guard let named = wanted[store], named >= 0, named <= last else {
                    throw ArborError(.misuse, "the query generation token \(token) does not name a transaction that store \(store) made "
                                        + "(its last is \(last)): a token comes from a context of the same stores")
                }
                number = named
            }
            numbers[store] = number
            overlays[store] = GenerationOverlay(store: store, coordinator: coordinator, generation: number)
        }
        let generation = QueryGeneration(token: QueryGenerationToken(transactionNumbers: numbers), overlays: overlays)
        // The history after the generation is read now: a token whose history is gone fails here.
        try generation.catchUp()
        queryGeneration = generation
        coordinator.generationPins.withLock { $0[ObjectIdentifier(self)] = (WeakContext(context: self), numbers) }
        if token.transactionNumbers != nil {
            for object in registeredObjects where !object.faulted && !object.hasChanges && !object.insertedFlag {
                refresh(object, mergeChanges: false)
            }
        }
        coordinator.logger.debug("context pinned to a query generation", metadata: ["arbor.generation": "\(generation.token)"])
    }

    /// Leaves the query generation: the stores are read as they are.
    func unpinQueryGeneration() {
        guard queryGeneration != nil else { return }
        queryGeneration = nil
        _ = persistentStoreCoordinator?.generationPins.withLock { $0.removeValue(forKey: ObjectIdentifier(self)) }
    }

    /// Moves a pinned context on to the current generation (a save, a merge, a refresh of every
    /// object, a reset); nothing for a context that is not pinned. When the stores can no
    /// longer be read for it, the context reads them as they are.
    func moveQueryGenerationOn() {
        guard queryGeneration != nil else { return }
        do {
            try setQueryGenerationFrom(.current)
        } catch {
            persistentStoreCoordinator?.logger.warning("a pinned context could not move on to the current query generation; it reads the stores as they are",
                                                       metadata: ["arbor.error": "\(error)"])
            unpinQueryGeneration()
        }
    }
}

extension PersistentStoreCoordinator {
    /// The oldest generation a live context of the coordinator is pinned to in `store` (nil:
    /// none): its history after it is kept.
    func oldestPinnedGeneration(in store: UUID) -> Int64? {
        generationPins.withLock { pins in
            pins = pins.filter { $0.value.context.context != nil }
            return pins.values.compactMap { $0.numbers[store] }.min()
        }
    }
}
