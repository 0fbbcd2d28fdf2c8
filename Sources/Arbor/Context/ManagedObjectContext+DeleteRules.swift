import Foundation

/// Delete rules (docs/object-graph.md, "Delete propagation"; docs/model.md): applied at the end
/// of an event and at every save to the deletions still pending, a wave at a time.
extension ManagedObjectContext {
    /// Applies the delete rules of every pending deletion: nullify unlinks the destinations,
    /// cascade deletes them (their own rules follow; cycles end because each object is deleted
    /// once), deny and no action do nothing here (deny fails the save's validation).
    ///
    /// An object whose rules cannot be applied — its row or a relationship could not be read (an
    /// I/O error, a busy store) — stays pending, and the error is kept in
    /// ``deletePropagationFailure``: the next end of event tries it again, and a save that still
    /// cannot apply them fails with that error instead of saving a deletion without its rules.
    func propagateDeletes() {
        // Taken in order through a cursor (removing from the front would make a large deletion
        // quadratic); rules append the deletions they cause, which the loop reaches in turn.
        var next = 0
        var failed: [ManagedObject] = []
        var failure: (any Error)?
        defer {
            pendingDeletes.removeFirst(min(next, pendingDeletes.count))
            pendingDeletes.insert(contentsOf: failed, at: 0)
            deletePropagationFailure = failure
        }
        // The rows of the deletions not yet loaded are read together, a wave at a time (a
        // cascade's deletions arrive in waves): one read each, not one per deleted fault. A
        // failure here is met again, and kept, when the object's own rules load it.
        var loadedThrough = 0
        // The objects read ahead for the waves, held until the propagation ends (the nullified
        // ones are changed, and the context keeps them anyway).
        var heldForRules: [[ManagedObject]] = []
        defer { withExtendedLifetime(heldForRules) {} }
        while next < pendingDeletes.count {
            if next >= loadedThrough {
                loadedThrough = pendingDeletes.count
                let wave = Array(pendingDeletes[next..<loadedThrough])
                try? loadRows(of: wave)
                heldForRules.append(readAhead(forRulesOf: wave))
            }
            let object = pendingDeletes[next]
            next += 1
            do {
                try applyDeleteRules(object)
            } catch {
                failure = failure ?? error
                failed.append(object)
            }
        }
    }

    /// Reads together what the rules of a wave of deletions read object by object: each
    /// object's to-many relationships (one read per relationship, not one per object), and for
    /// the relationships they nullify the destinations' rows and the inverse relationships the
    /// deleted objects leave (a deleted employee's reports lose their manager; its manager's
    /// reports lose it). Returns the destinations read, which the caller holds until the wave's
    /// rules have run (an unchanged object nothing holds would go away at once). A failure
    /// here is left for the rules themselves to meet, and keep.
    private func readAhead(forRulesOf wave: [ManagedObject]) -> [ManagedObject] {
        guard wave.count > 1, parent == nil, persistentStoreCoordinator != nil else { return [] }
        for object in wave where object.faulted { try? object.fireFault() }
        let loaded = wave.filter { !$0.faulted }
        try? loadRelationships(loaded.lazy.flatMap { object in object.entity.relationships.lazy.map { (object, $0) } })
        var destinations: [ManagedObject] = []
        var inverses: [(ManagedObject, RelationshipDescription)] = []
        var seen = Set<ObjectIdentifier>()
        for object in loaded {
            for relationship in object.entity.relationships where relationship.deleteRule == .nullify {
                guard let inverse = relationship.inverseRelationship else { continue }
                for id in object.values[relationship.name]?.objectIDs ?? [] {
                    guard let destination = resolve(id), !destination.deletedFlag else { continue }
                    if seen.insert(ObjectIdentifier(destination)).inserted { destinations.append(destination) }
                    inverses.append((destination, inverse))
                }
            }
        }
        guard !destinations.isEmpty else { return [] }
        try? loadRows(of: destinations)
        for destination in destinations where destination.faulted { try? destination.fireFault() }
        try? loadRelationships(inverses)
        return destinations
    }

    /// The delete rules of one deleted object (see ``propagateDeletes()``). What can fail to load
    /// is loaded first, so that a failure leaves the object as it was (and `prepareForDeletion`
    /// uncalled); rules applied again after a failure change nothing twice.
    private func applyDeleteRules(_ object: ManagedObject) throws {
        // A deleted fault is loaded: its version is checked at save, and its relationships carry
        // the rules on. A row already gone has nothing to load.
        do {
            try object.fireFault()
        } catch let error as ArborError where error.code == .objectNotFound {
        }
        for relationship in object.entity.relationships where !object.faulted {
            try object.loadRelationship(relationship.name)
        }
        object.prepareForDeletion()
        for relationship in object.entity.relationships {
            let ids = object.values[relationship.name]?.objectIDs ?? []
            let destinations = ids.compactMap { resolve($0) }
            switch relationship.deleteRule {
            case .nullify:
                for destination in destinations where !destination.deletedFlag {
                    if relationship.isToMany {
                        try object.remove(destination, from: relationship)
                    } else {
                        try object.setToOne(nil, relationship: relationship)
                    }
                }
            case .cascade:
                for destination in destinations where !destination.deletedFlag { delete(destination) }
            case .deny, .noAction:
                break
            }
        }
        if object.insertedFlag {
            // A new object deleted again: it leaves the context altogether.
            removeFromContext(object)
        }
    }
}
