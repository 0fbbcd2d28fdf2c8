import Foundation
import OrderedCollections

/// What the context does with its coordinator to save: permanent IDs, store assignment, and the
/// save itself (faulting is in ManagedObjectContext+Faults.swift, refreshing in
/// ManagedObjectContext+Refresh.swift).
extension ManagedObjectContext {
    /// Gives permanent IDs to the objects among `objects` that have temporary ones; they stay
    /// inserted until saved (S000-44…S000-47).
    ///
    /// - Throws: when the store cannot allocate keys (no object changes then).
    public func obtainPermanentIDs(for objects: [ManagedObject]) throws {
        checkQueue()
        let coordinator = try requireCoordinator("obtain permanent IDs")
        takePermanentIDs()
        var seen = Set<ObjectIdentifier>()
        var temporary = objects.filter {
            $0.objectID.isTemporaryID && $0.managedObjectContext === self && seen.insert(ObjectIdentifier($0)).inserted
        }
        // In a child, objects its parent already has (an earlier save of this context pushed
        // them) get their IDs there — up to the root, which saves them — and the new IDs come
        // back down to every descendant: the object keeps one identity in every context.
        if let parent, !temporary.isEmpty {
            let ids = temporary.map(\.objectID)
            try parent.performAndWait { try parent.obtainPermanentIDs(for: ids.compactMap { parent.objectForChild($0) }) }
            takePermanentIDs()
            temporary = temporary.filter { $0.objectID.isTemporaryID }
        }
        var byEntity: [ObjectIdentifier: [ManagedObject]] = [:]
        for object in temporary { byEntity[ObjectIdentifier(object.entity), default: []].append(object) }
        var mapping: [(ManagedObject, ManagedObjectID)] = []
        for group in byEntity.values {
            for (store, members) in groupedByStore(group) {
                let ids = try coordinator.allocateObjectIDs(for: members[0].entity, count: members.count, in: store)
                mapping += zip(members, ids).map { ($0, $1) }
            }
        }
        let changes = Dictionary(uniqueKeysWithValues: mapping.map { ($0.0.objectID, $0.1) })
        changeIDs(changes)
        for id in changes.keys { assignments[id] = nil }
    }

    /// Assigns a new object to `store`: it will be saved there instead of the first store that
    /// takes its entity (Core Data's `assign(_:to:)`).
    ///
    /// - Throws: ``ArborError/Code/misuse`` when the object is not new, belongs to another
    ///   context, or its entity is not in the store's configuration.
    public func assign(_ object: ManagedObject, to store: any PersistentStore) throws {
        checkQueue()
        guard object.managedObjectContext === self, object.objectID.isTemporaryID else {
            throw ArborError(.misuse, "only new objects of this context can be assigned to a store", objectID: object.objectID)
        }
        let coordinator = try requireCoordinator("assign objects to stores")
        guard coordinator.persistentStores.contains(where: { $0 === store }),
              coordinator.managedObjectModel.configuration(store.configurationName, includes: object.entity) else {
            throw ArborError(.misuse, "the store \(store.identifier) does not take \(object.entity.name) objects", objectID: object.objectID)
        }
        assignments[object.objectID] = store
    }

    /// Objects grouped by the store they go to: their assignment, else nil (the default store).
    func groupedByStore(_ objects: [ManagedObject]) -> [(store: (any PersistentStore)?, objects: [ManagedObject])] {
        var groups: [(store: (any PersistentStore)?, objects: [ManagedObject])] = []
        for object in objects {
            let store = assignments[object.objectID]
            if let index = groups.firstIndex(where: { $0.store === store }) {
                groups[index].objects.append(object)
            } else {
                groups.append((store, [object]))
            }
        }
        return groups
    }

    /// Gives objects new IDs (old → new) everywhere the context knows them: the registry, the
    /// change sets, the objects, and every relationship value that mentions them — then in the
    /// child contexts, which may know the objects by their old IDs.
    func changeIDs(_ mapping: [ManagedObjectID: ManagedObjectID]) {
        guard !mapping.isEmpty else { return }
        for (oldID, newID) in mapping {
            guard let object = registeredObject(for: oldID) else {
                // Not registered here, but a child may still name it by its old ID.
                rememberReplacement(of: oldID, by: newID)
                continue
            }
            reregister(from: oldID, to: newID)
            object.takePermanentID(newID)
        }
        if parent == nil {
            replaceInChangedObjects { mapping[$0] }
        } else {
            // In a child, unchanged objects may point at new ones too: its saves made values
            // holding temporary IDs committed.
            for object in allRegistered() where !object.entity.relationships.isEmpty { object.replaceObjectIDs { mapping[$0] } }
        }
        sendPermanentIDs(mapping)
    }

    /// Replaces the old IDs of `mapping` by the new ones in the relationships of the changed
    /// objects. Only they can point at a new object: pointing at one is a change (an unchanged
    /// object's values are its committed ones, which hold saved IDs only).
    func replaceInChangedObjects(_ newID: (ManagedObjectID) -> ManagedObjectID?) {
        for list in [inserted, updated, deleted] {
            for object in list where !object.entity.relationships.isEmpty { object.replaceObjectIDs(newID) }
        }
    }

    /// The row of an object's persistent values: its values (sharing their storage) minus
    /// transients and the to-many relationships a row does not carry (unordered ones, and ordered
    /// ones never loaded).
    func persistentRow(of object: ManagedObject, version: Int64) -> StoreRow {
        let entity = object.entity
        var values = object.values
        // Index loops, not `zip`: a debug build does not specialise `zip`'s generic iterator,
        // and this runs for every saved object.
        let attributes = entity.attributes, attributeSlots = entity.attributeSlots
        for index in 0..<attributes.count {
            let attribute = attributes[index], slot = attributeSlots[index]
            if attribute.isTransient {
                if values[slot: slot] != nil { values[slot: slot] = nil }
            } else if values[slot: slot] == nil {
                values[slot: slot] = PropertyValue.none
            }
        }
        let relationships = entity.relationships, relationshipSlots = entity.relationshipSlots
        for index in 0..<relationships.count {
            let relationship = relationships[index], slot = relationshipSlots[index]
            if !relationship.isToMany {
                if values[slot: slot] == nil { values[slot: slot] = PropertyValue.none }
            } else if !relationship.isOrdered || object.unloadedRelationships.contains(relationship.name) {
                if values[slot: slot] != nil { values[slot: slot] = nil }
            } else if values[slot: slot] == nil {
                values[slot: slot] = .objects([])
            }
        }
        return StoreRow(entityName: entity.name, version: version, values: values)
    }

    // MARK: Save

    /// Counts a save begun (``saveCount``). Objects record the count of the last save that
    /// announced them in 32 bits; when it wraps, every object forgets, so that none seems
    /// announced in a save that has not asked it.
    func beginSaveRound() {
        if saveCount == .max {
            for object in allRegistered() { object.markAnnounced(inSave: 0) }
            saveCount = 0
        }
        saveCount += 1
    }

    /// Commits the unsaved changes to the stores: delete rules are applied, `willSave` runs,
    /// every inserted, updated and deleted object is validated (all failures gathered into one
    /// error), new objects get permanent IDs, and each store writes its part in one transaction.
    /// On failure the context keeps its changes, and nothing is written (S000-66, S002-08). With
    /// several native stores, each writes its part inside the previous one's transaction, so a
    /// conflict or a failure before the commits leaves every store as it was; only a commit
    /// failing after a later store committed (or a store of another kind, which commits on its
    /// own, followed by a failing one) leaves part of the save written — those objects are saved
    /// in the context too, and the rest of the changes stay pending, so saving again after
    /// fixing the cause completes it (docs/object-graph-internals.md, "Several stores").
    ///
    /// - Throws: validation errors (``ArborError/Code/validationMultipleErrors`` for several),
    ///   ``ArborError/Code/mergeConflict`` when another context changed or deleted a row since it
    ///   was read, ``ArborError/Code/constraintConflict`` for a uniqueness violation, store errors.
    public func save() throws {
        checkQueue()
        drainMerges()
        let start = ContinuousClock.now
        let wrote: Bool
        do {
            // What other contexts post meanwhile waits until the save is done (its phases, its
            // conflict resolution and its hooks see one state).
            wrote = try holdingMerges { try saveChanges() }
        } catch {
            persistentStoreCoordinator?.observer.saveFailed(error, context: name)
            throw error
        }
        if wrote, let coordinator = persistentStoreCoordinator { coordinator.observer.saved(duration: ContinuousClock.now - start, coordinator) }
    }

    /// The work of ``save()``, in its phases (docs/object-graph-internals.md, "Saving, step by step"):
    /// prepare (``prepareSave()``), then for a child context the push to the parent, for a root
    /// context the batch (``buildBatch(_:_:)``), the coordinator's save of it with the merge
    /// policy settling conflicts (``writeToStores(_:_:)``), and the finish
    /// (``finishRootSave(_:)``). Returns whether it wrote to the stores.
    private func saveChanges() throws -> Bool {
        guard let lists = try prepareSave() else { return false }
        if let parent {
            try saveToParent(parent, lists.inserted, lists.updated, lists.deleted)
            return false
        }
        let coordinator = try requireCoordinator("save to")
        guard let written = try writeToStores(lists, coordinator) else { return true }
        try finishRootSave(written)
        return true
    }

    /// The objects a save writes: the change lists as it read them, and the lists' generations
    /// then (unchanged at the end, the saved objects are all of them).
    struct SaveLists {
        var inserted: [ManagedObject]
        var updated: [ManagedObject]
        var deleted: [ManagedObject]
        var readAt: (Int, Int, Int)
    }

    /// The lists as they are now.
    func currentSaveLists() -> SaveLists {
        SaveLists(inserted: inserted.objects, updated: updated.objects, deleted: deleted.objects,
                  readAt: (inserted.generation, updated.generation, deleted.generation))
    }

    /// The first phase of a save: the event ends (delete rules apply), will-save is posted,
    /// `willSave` runs once per object (what it changes is announced in turn), deny rules load
    /// what they guard, and every object is validated (all failures in one error). Returns the
    /// objects to save, or nil when there is nothing to save.
    private func prepareSave() throws -> SaveLists? {
        // Long: the save's first phase in the order it must run: the event, the willSave rounds
        // until none announces a new object, the deny rules' loads, then every validation, on the
        // same change lists.
        takePermanentIDs()
        // Only this save's own event may hand its set of new objects to its did-save.
        lastInsertedSet = nil
        // The event ends (delete rules apply now even when they wait for the save).
        endEvent(propagatingDeletes: true)
        guard hasChanges else { return nil }
        _ = try requireCoordinator("save to")
        postWillSave()
        // willSave once per object; what it changes (and the deletions that propagates) is saved
        // too, its objects announced in turn.
        beginSaveRound()
        var rounds = 0
        while true {
            // Each round announces the objects not announced yet, walking the lists as they were
            // when it began (a willSave that changes them changes the context's copies; what it
            // adds is announced by the next round). No array of the objects is made: a large
            // save's transient memory is page faults.
            var announced = false
            for list in [inserted, updated, deleted] {
                for object in list where object.announcedInSave != saveCount {
                    if !announced {
                        rounds += 1
                        guard rounds <= 100 else {
                            throw ArborError(.misuse, "willSave kept changing new objects for 100 rounds; the save was not attempted")
                        }
                        announced = true
                    }
                    object.markAnnounced(inSave: saveCount)
                    object.willSave()
                }
            }
            guard announced else { break }
            propagateDeletes()
        }
        // What willSave changed is an event of its own.
        endEvent(propagatingDeletes: true)
        // Delete rules that could not be applied (a relationship that could not be read) fail the
        // save: a deletion is never saved without its rules.
        if let failure = deletePropagationFailure { throw failure }
        let lists = currentSaveLists()
        // Deny rules need the relationships they guard loaded.
        for object in lists.deleted {
            for relationship in object.entity.relationships where relationship.deleteRule == .deny {
                try object.loadRelationship(relationship.name)
            }
        }
        var failures: [ArborError] = []
        func collect(_ body: () throws -> Void) {
            do {
                try body()
            } catch let error as ArborError {
                failures += error.code == .validationMultipleErrors ? error.detailedErrors : [error]
            } catch {
                failures.append(ArborError(.managedObjectValidation, "\(error)"))
            }
        }
        for object in lists.inserted { collect { try object.validateForInsert() } }
        for object in lists.updated { collect { try object.validateForUpdate() } }
        for object in lists.deleted { collect { try object.validateForDelete() } }
        if let error = ArborError.gathering(failures) { throw error }
        return lists
    }

    /// One save's batch: each store's part, and the part of each new object (in the inserted
    /// objects' order: each part's inserted rows are in that order too). Indices, not arrays of
    /// objects: holding 100,000 objects in one more array costs a reference count up and down
    /// on each.
    struct SaveBatch {
        var parts: [(store: UUID, changes: StoreChanges)] = []
        var newParts = NewObjectParts()
    }

    /// The second phase of a root context's save: the rows to write, store by store. New
    /// objects go with their temporary IDs: each store allocates their keys inside the save's
    /// transaction, and the context takes the permanent IDs once the save succeeded. A part's new
    /// rows, and their links, are made when its store writes them, one at a time: a large save
    /// never holds them all (nor their copies of the objects' values: an import's largest
    /// arrays).
    private func buildBatch(_ lists: SaveLists, _ coordinator: PersistentStoreCoordinator) throws -> SaveBatch {
        // Long: the nested `part(…)` helpers share the batch and the cache of each entity's store;
        // every list of the save (inserted, updated, deleted, links, lock checks) is placed into
        // the same parts.
        var batch = SaveBatch()
        func part(_ store: UUID) -> Int {
            if let index = batch.parts.firstIndex(where: { $0.store == store }) { return index }
            var changes = StoreChanges()
            changes.origin = transactionOrigin(.save)
            batch.parts.append((store, changes))
            return batch.parts.count - 1
        }
        func part(of id: ManagedObjectID) throws -> Int {
            guard let store = id.storeIdentifier else { throw ArborError(.misuse, "\(id) has no store", objectID: id) }
            return part(store)
        }
        var defaultStores: [ObjectIdentifier: Int] = [:]
        func part(ofNew object: ManagedObject) throws -> Int {
            if !object.objectID.isTemporaryID { return try part(of: object.objectID) }
            if !assignments.isEmpty, let store = assignments[object.objectID] { return part(store.identifier) }
            if let index = defaultStores[ObjectIdentifier(object.entity)] { return index }
            let index = part(try coordinator.store(for: object.entity).identifier)
            defaultStores[ObjectIdentifier(object.entity)] = index
            return index
        }
        for object in lists.inserted { batch.newParts.append(try part(ofNew: object)) }
        for object in lists.updated {
            let newRow = persistentRow(of: object, version: object.committedVersion + 1)
            batch.parts[try part(of: object.objectID)].changes.updated.append((object.objectID, newRow, lockExpectation(of: object)))
        }
        for object in lists.deleted where !object.objectID.isTemporaryID {
            batch.parts[try part(of: object.objectID)].changes.deleted.append((object.objectID, lockExpectation(of: object)))
        }
        let newObjects = lists.inserted
        let saveCount = saveCount
        func onDemand(_ count: Int, _ object: @escaping (Int) -> ManagedObject) -> RowsOnDemand {
            RowsOnDemand(count: count, id: { object($0).objectID }, row: { self.persistentRow(of: object($0), version: 1) },
                         links: { position, body in
                             let new = object(position)
                             self.forEachLink(of: new, saveCount: saveCount) { body(new.objectID, $0, $1, $2) }
                         })
        }
        if let only = batch.newParts.only {
            batch.parts[only].changes.insertedOnDemand = onDemand(newObjects.count) { newObjects[$0] }
        } else {
            for index in batch.parts.indices {
                let positions = (0..<batch.newParts.count).filter { batch.newParts[$0] == index }
                guard !positions.isEmpty else { continue }
                batch.parts[index].changes.insertedOnDemand = onDemand(positions.count) { newObjects[positions[$0]] }
            }
        }
        for object in lists.updated where object.entity.hasToManyRelationships {
            let index = try part(of: object.objectID)
            forEachLink(of: object, saveCount: saveCount) { name, other, added in
                if added {
                    batch.parts[index].changes.linked.append((object.objectID, name, other))
                } else {
                    batch.parts[index].changes.unlinked.append((object.objectID, name, other))
                }
            }
        }
        for object in lockChecks() {
            batch.parts[try part(of: object.objectID)].changes.checked.append((object.objectID, lockExpectation(of: object)))
        }
        return batch
    }

    /// Calls `body` with each many-to-many link `object` adds and removes (relationship,
    /// destination, added), on the side that records it: the difference between committed and
    /// current destinations (only entities with to-many relationships can have any).
    ///
    /// A link made between two objects of the save, both sides loaded, is a change of both: it
    /// is recorded from one side (the relationship whose name, then entity name, sorts first;
    /// the store writes both directions of it) — unless the other side does not show it (a
    /// primitive setter changes one side only), or will not be saved now (not announced in the
    /// save `saveCount`).
    private func forEachLink(of object: ManagedObject, saveCount: UInt32, _ body: (String, ManagedObjectID, Bool) -> Void) {
        guard object.entity.hasToManyRelationships else { return }
        func isSecondary(_ relationship: RelationshipDescription, _ inverse: RelationshipDescription) -> Bool {
            inverse !== relationship && (inverse.name, inverse.entity?.name ?? "") < (relationship.name, relationship.entity?.name ?? "")
        }
        func recordedByOtherSide(_ id: ManagedObjectID, _ key: String, _ mine: ManagedObjectID, added: Bool) -> Bool {
            guard let other = registeredObject(for: id), !other.deletedFlag, other.announcedInSave == saveCount,
                  !other.unloadedRelationships.contains(key) else { return false }
            let now: Bool = other.values[key]?.objectIDs.contains(mine) ?? false
            let before: Bool = other.committed?[key]?.objectIDs.contains(mine) ?? false
            return now != before && now == added
        }
        for relationship in object.entity.relationships where relationship.isManyToMany && !object.unloadedRelationships.contains(relationship.name) {
            let now = object.values[relationship.name]?.objectIDs ?? []
            let before = object.committed?[relationship.name]?.objectIDs ?? []
            let inverse = relationship.inverseRelationship
            let secondary = inverse.map { isSecondary(relationship, $0) } ?? false
            let inverseName = inverse?.name ?? ""
            for other in now where !before.contains(other) {
                if secondary && recordedByOtherSide(other, inverseName, object.objectID, added: true) { continue }
                body(relationship.name, other, true)
            }
            for other in before where !now.contains(other) {
                if secondary && recordedByOtherSide(other, inverseName, object.objectID, added: false) { continue }
                body(relationship.name, other, false)
            }
        }
    }

    /// What the stores did with a save: the objects saved (fewer than the lists when a later
    /// store failed after others saved), each part's new IDs, versions written other than asked,
    /// the stores' change record, and the failure of a partial save.
    struct StoresWritten {
        var lists: SaveLists
        var newParts: NewObjectParts
        var assigned: [[ManagedObjectID]]
        var rebasedVersions: [ManagedObjectID: Int64]
        var record: ChangeRecord
        var partialFailure: (any Error)?
    }

    /// The third phase of a root context's save: the batch goes to the coordinator
    /// (``PersistentStoreCoordinator/save(_:)``), whose stores return every conflict in one
    /// pass; the merge policy settles them (changing objects) and the batch is built and written
    /// again — a few times at most, since another writer may slip in between. Returns nil when
    /// settling the conflicts left nothing to save.
    private func writeToStores(_ prepared: SaveLists, _ coordinator: PersistentStoreCoordinator) throws -> StoresWritten? {
        var lists = prepared
        var attempts = 0
        while true {
            // Read again after a merge policy settled conflicts (it changes the lists); the
            // first time round they are as validated.
            if attempts > 0 { lists = currentSaveLists() }
            let batch = try buildBatch(lists, coordinator)
            do {
                let saved = try coordinator.save(batch.parts)
                return StoresWritten(lists: lists, newParts: batch.newParts, assigned: saved.results.map(\.insertedIDs),
                                     rebasedVersions: saved.results.reduce(into: [:]) { $0.merge($1.rebasedVersions) { $1 } },
                                     record: saved.record, partialFailure: nil)
            } catch let partial as PartialSave {
                return savedPart(of: lists, batch, partial)
            } catch let error as ArborError where error.code == .mergeConflict || error.code == .constraintConflict {
                attempts += 1
                guard attempts <= 5 else { throw error }
                try resolveConflicts(error)
                guard hasChanges else { return nil }
            }
        }
    }

    /// What a partial save saved: the objects of the parts its stores committed (their new
    /// objects with the IDs assigned), the rest staying pending.
    private func savedPart(of lists: SaveLists, _ batch: SaveBatch, _ partial: PartialSave) -> StoresWritten {
        // The parts saved, renumbered in order.
        let savedParts = partial.saved.keys.sorted()
        var renumbered: [Int: Int] = [:]
        for (new, old) in savedParts.enumerated() { renumbered[old] = new }
        let stores = Set(savedParts.map { batch.parts[$0].store })
        var saved = lists
        saved.inserted = []
        var newParts = NewObjectParts()
        for (position, object) in lists.inserted.enumerated() {
            guard let index = renumbered[batch.newParts[position]] else { continue }
            saved.inserted.append(object)
            newParts.append(index)
        }
        let newObjects = Set(saved.inserted.map(ObjectIdentifier.init))
        func inSavedPart(_ object: ManagedObject) -> Bool {
            newObjects.contains(ObjectIdentifier(object)) || object.objectID.storeIdentifier.map(stores.contains) == true
        }
        saved.updated = lists.updated.filter(inSavedPart)
        saved.deleted = lists.deleted.filter(inSavedPart)
        return StoresWritten(lists: saved, newParts: newParts, assigned: savedParts.map { partial.saved[$0]!.insertedIDs },
                             rebasedVersions: savedParts.reduce(into: [:]) { $0.merge(partial.saved[$1]!.rebasedVersions) { $1 } },
                             record: partial.record, partialFailure: partial.failure)
    }

    /// The last phase of a root context's save: the objects and the context are brought up to
    /// date — new objects take their permanent IDs, saved objects their committed values and
    /// versions, deleted ones leave — and did-save is posted. A partial save's failure is thrown
    /// at the end.
    private func finishRootSave(_ written: StoresWritten) throws {
        // Long: the permanent-ID mapping (and whether it is a run) is made, applied to the saved
        // objects and the rest of the changed ones, sent to descendants and dropped, all in one
        // scope.
        let (insertedObjects, updatedObjects, deletedObjects) = (written.lists.inserted, written.lists.updated, written.lists.deleted)
        let (assigned, newParts, rebasedVersions) = (written.assigned, written.newParts, written.rebasedVersions)
        // New objects take their permanent IDs (in the registry too), also in the changed
        // objects' relationships — the mapping is made only when some changed object has
        // relationships.
        let descendants = !children.all.isEmpty
        let mapsRelationships = descendants || [insertedObjects, updatedObjects, deletedObjects].contains { objects in
            objects.contains { !$0.entity.relationships.isEmpty }
        }
        // New objects made one after another and saved to one store have temporary IDs in one
        // run of serial numbers: the mapping is that run, no table.
        let run: Bool = {
            guard mapsRelationships, let only = newParts.only, only < assigned.count, assigned[only].count == insertedObjects.count,
                  let first = insertedObjects.first?.objectID, first.isTemporaryID else { return false }
            for (position, object) in insertedObjects.enumerated() {
                let id = object.objectID
                guard id.isTemporaryID, id.key == first.key - Int64(position), id.namespace == first.namespace else { return false }
            }
            return true
        }()
        var permanent = if run, let first = insertedObjects.first, let only = newParts.only {
            IDMapping(run: first.objectID, new: assigned[only])
        } else {
            IDMapping(capacity: mapsRelationships ? insertedObjects.count : 0)
        }
        // Each part's IDs come in the order of its new objects.
        var nextID = [Int](repeating: 0, count: assigned.count)
        for (position, object) in insertedObjects.enumerated() {
            let index = newParts[position]
            guard index < assigned.count, nextID[index] < assigned[index].count else { continue }
            let newID = assigned[index][nextID[index]]
            nextID[index] += 1
            guard newID != object.objectID else { continue }
            if mapsRelationships && !run { permanent.add(object.objectID, newID) }
            if !assignments.isEmpty { assignments[object.objectID] = nil }
            reregister(from: object.objectID, to: newID)
            object.takePermanentID(newID)
        }
        // Each saved object takes the permanent IDs in its relationships (in place: nothing else
        // shares its values now) and is saved at the version written. The row cache took the
        // saved values of the snapshots it holds; a saved object without one (a new object) is
        // given none: its values are the row, and a snapshot is made when a context reads it.
        func settle(_ object: ManagedObject, version: Int64) {
            if !permanent.isEmpty && !object.entity.relationships.isEmpty { object.replaceObjectIDs { permanent[$0] } }
            object.becomeSaved(at: rebasedVersions.isEmpty ? version : rebasedVersions[object.objectID] ?? version)
        }
        for object in insertedObjects { settle(object, version: 1) }
        for object in updatedObjects { settle(object, version: object.committedVersion + 1) }
        // The rest of the changed objects (deleted ones; and what a validation method or a
        // partial save left in the lists) may point at new objects too.
        let partial = written.partialFailure != nil
        let readAt = written.lists.readAt
        if !permanent.isEmpty {
            if !partial && readAt == (inserted.generation, updated.generation, deleted.generation) {
                for object in deletedObjects where !object.entity.relationships.isEmpty { object.replaceObjectIDs { permanent[$0] } }
            } else {
                replaceInChangedObjects { permanent[$0] }
            }
        }
        if descendants { sendPermanentIDs(permanent.dictionary) }
        permanent = IDMapping()
        finishSave(inserted: insertedObjects, updated: updatedObjects, deleted: deletedObjects, partial: partial, listsReadAt: partial ? nil : readAt,
                   record: written.record)
        if let partialFailure = written.partialFailure {
            var error = partialFailure as? ArborError ?? ArborError(.storeSave, "\(partialFailure)")
            error.message += " (the objects of the stores that saved their parts are saved in this context too; the rest of the changes are still pending)"
            throw error
        }
    }
}

extension ManagedObjectContext {
    /// A child context's save: the changes go to the parent as its own unsaved changes, and the
    /// objects here are saved as far as this context knows (their IDs stay temporary until the
    /// root saves).
    func saveToParent(_ parent: ManagedObjectContext, _ insertedObjects: [ManagedObject], _ updatedObjects: [ManagedObject],
                      _ deletedObjects: [ManagedObject]) throws {
        try pushToParent(parent, inserted: insertedObjects, updated: updatedObjects, deleted: deletedObjects)
        for object in insertedObjects + updatedObjects { object.becomeSaved() }
        finishSave(inserted: insertedObjects, updated: updatedObjects, deleted: deletedObjects, partial: false, listsReadAt: nil, record: nil)
    }


    /// The end of every save, root or child: deleted objects leave the context, the saved
    /// objects leave the change sets, `didSave` runs, and did-save is posted. `listsReadAt` holds
    /// the change lists' generations when the save read them (nil: not known); `record`, the
    /// stores' record of a root save (nil: a child's save, which no store wrote).
    func finishSave(inserted insertedObjects: [ManagedObject], updated updatedObjects: [ManagedObject], deleted deletedObjects: [ManagedObject],
                    partial: Bool, listsReadAt: (Int, Int, Int)?, record: ChangeRecord?) {
        // Read before the deleted objects leave the context (which takes them off the lists).
        let unchanged = listsReadAt.map { $0 == (inserted.generation, updated.generation, deleted.generation) } ?? false
        for object in deletedObjects { removeFromContext(object) }
        // The saved objects leave the change lists. Anything else in them — what a validation
        // method inserted, changed or deleted after the save read the lists, or the stores a
        // partial save did not reach — stays pending for the next save.
        if unchanged {
            inserted.removeAll()
            updated.removeAll()
            deleted.removeAll()
        } else {
            for object in insertedObjects { inserted.remove(object) }
            for object in updatedObjects { updated.remove(object) }
            for object in deletedObjects { deleted.remove(object) }
        }
        if !partial { conflictChecked.removeAll() }
        checkInvariants()
        for objects in [insertedObjects, updatedObjects, deletedObjects] {
            for object in objects { object.didSave() }
        }
        postDidSave(inserted: insertedObjects, updated: updatedObjects, deleted: deletedObjects, record: record)
    }
}

/// The part of a save (its store's index among the save's parts) each new object goes to, by
/// the object's position: one number while they all go to the same part — a save to one store,
/// the usual case, keeps no number per object.
struct NewObjectParts {
    /// The part of every object so far, while there is one.
    private var uniform: Int?
    /// Each object's part, once two differ.
    private var each: [Int32] = []
    /// The number of objects.
    private(set) var count = 0

    /// The part every object goes to, when there is one (nil for none, or several).
    var only: Int? { each.isEmpty ? uniform : nil }

    mutating func append(_ part: Int) {
        defer { count += 1 }
        if each.isEmpty {
            if uniform == nil || uniform == part {
                uniform = part
                return
            }
            each = [Int32](repeating: Int32(uniform ?? 0), count: count)
        }
        each.append(Int32(part))
    }

    subscript(position: Int) -> Int { each.isEmpty ? uniform ?? 0 : Int(each[position]) }
}
