extension ManagedObjectContext {
    /// What is wrong with the context's change lists now, one sentence per broken rule (empty:
    /// nothing). The rules, which every change of an object's state keeps:
    ///
    /// 1. Each list's bookkeeping holds: its count is its number of members, and every member's
    ///    `changeSlot` is its place in the list (so no object is in two lists at one place).
    /// 2. Every member belongs to this context.
    /// 3. An inserted object is flagged inserted and not deleted; an updated one neither
    ///    inserted nor deleted, and it has a change (a changed property or a refused value); a
    ///    deleted one deleted and not inserted. The three are exclusive, so no object is in two
    ///    lists.
    ///
    /// - Complexity: O(*n*) in the number of changed objects.
    func invariantViolations() -> [String] {
        var problems: [String] = []
        inserted.checkBookkeeping("inserted", into: &problems) { object in
            belongsHere(object) ?? (!object.insertedFlag || object.deletedFlag ? "is not flagged inserted (and not deleted)" : nil)
        }
        updated.checkBookkeeping("updated", into: &problems) { object in
            if let problem = belongsHere(object) { return problem }
            if object.insertedFlag || object.deletedFlag { return "is flagged inserted or deleted" }
            return object.changedSlots.isEmpty && object.refusedValues == nil ? "has no change" : nil
        }
        deleted.checkBookkeeping("deleted", into: &problems) { object in
            belongsHere(object) ?? (!object.deletedFlag || object.insertedFlag ? "is not flagged deleted (and not inserted)" : nil)
        }
        return problems
    }

    /// Why `object` may not be in this context's change lists (nil: it may).
    private func belongsHere(_ object: ManagedObject) -> String? {
        object.managedObjectContext === self ? nil : "belongs to another context, or to none"
    }

    /// In builds with Arbor's checks (`ARBOR_INVARIANTS`), stops the program when the change
    /// lists break a rule of ``invariantViolations()``, naming the rule and the object; other
    /// builds compile it away. Called at the end of every event with changes and of every save.
    @inline(__always)
    func checkInvariants() {
        #if ARBOR_INVARIANTS
        let problems = invariantViolations()
        if !problems.isEmpty {
            preconditionFailure("Arbor invariant broken in context \(displayName): \(problems.joined(separator: "; "))")
        }
        #endif
    }
}
