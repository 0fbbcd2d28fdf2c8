import Foundation
import OrderedCollections

/// Relationship maintenance: every change to one end of a relationship is mirrored on the other
/// (Core Data's inverse management). The primitives below are the only places relationship values
/// change.
extension ManagedObject {
    /// The inverse of `relationship` (the model guarantees there is one).
    private func inverse(of relationship: RelationshipDescription) -> RelationshipDescription {
        guard let inverse = relationship.inverseRelationship else {
            preconditionFailure("\(entity.name).\(relationship.name) has no resolved inverse")
        }
        return inverse
    }

    /// Sets a to-one relationship to `object` (or nil), updating the inverses of the old and the
    /// new destination.
    func setToOne(_ object: ManagedObject?, relationship: RelationshipDescription) throws {
        let key = relationship.name
        let old = values[key].flatMap { value -> ManagedObjectID? in
            if case .object(let id) = value { return id }
            return nil
        }
        guard old != object?.objectID else { return }
        let inverse = inverse(of: relationship)
        if let old, let previous = managedObjectContext?.resolve(old) {
            try previous.detach(self, from: inverse)
        }
        setPrimitive(object.map { .object($0.objectID) } ?? .none, forKey: key, persistent: true)
        guard let object else { return }
        try object.attach(self, to: inverse)
    }

    /// Adds `object` to the to-many relationship, updating its inverse.
    func add(_ object: ManagedObject, to relationship: RelationshipDescription, at index: Int? = nil) throws {
        guard try insertID(object.objectID, into: relationship.name, at: index) else { return }
        try object.attach(self, to: inverse(of: relationship))
    }

    /// Removes `object` from the to-many relationship, updating its inverse.
    func remove(_ object: ManagedObject, from relationship: RelationshipDescription) throws {
        guard try removeID(object.objectID, from: relationship.name) else { return }
        try object.detach(self, from: inverse(of: relationship))
    }

    /// Puts `id` into the to-many value `key` (at `index`, else at the end), recording the
    /// change; false when it was already there.
    private func insertID(_ id: ManagedObjectID, into key: String, at index: Int? = nil) throws -> Bool {
        try loadRelationship(key)
        // The key is looked up once: the slot serves every read and write below.
        guard let slot = entity.propertyLayout.index[key] else { return false }
        var ids = values[slot: slot]?.objectIDs ?? []
        guard !ids.contains(id) else { return false }
        managedObjectContext?.recordUndo(self, slot: slot)
        // The slot lets go of the set first, so that changing it does not copy it (adding n
        // objects one by one stays linear).
        values[slot: slot] = nil
        if let index { ids.insert(id, at: min(index, ids.count)) } else { ids.append(id) }
        setPrimitive(.objects(ids), slot: slot, persistent: true)
        return true
    }

    /// Takes `id` out of the to-many value `key`, recording the change; false when it was not
    /// there.
    private func removeID(_ id: ManagedObjectID, from key: String) throws -> Bool {
        try loadRelationship(key)
        guard let slot = entity.propertyLayout.index[key] else { return false }
        var ids = values[slot: slot]?.objectIDs ?? []
        guard ids.contains(id) else { return false }
        managedObjectContext?.recordUndo(self, slot: slot)
        values[slot: slot] = nil
        ids.remove(id)
        setPrimitive(.objects(ids), slot: slot, persistent: true)
        return true
    }

    /// The other end's half of a link: `source` now points at this object through the inverse of
    /// `relationship` (this object's side). For a to-one side, the object's previous partner
    /// loses it.
    private func attach(_ source: ManagedObject, to relationship: RelationshipDescription) throws {
        try fireFault()
        let key = relationship.name
        if relationship.isToMany {
            _ = try insertID(source.objectID, into: key)
            return
        }
        if case .object(let previousID) = values[key] ?? .none, previousID != source.objectID,
           let previous = managedObjectContext?.resolve(previousID) {
            // This object leaves its previous partner, whose side is `source`'s relationship.
            try previous.detach(self, from: inverse(of: relationship))
        }
        setPrimitive(.object(source.objectID), forKey: key, persistent: true)
    }

    /// The other end's half of an unlink: `source` no longer points at this object.
    private func detach(_ source: ManagedObject, from relationship: RelationshipDescription) throws {
        try fireFault()
        let key = relationship.name
        if relationship.isToMany {
            _ = try removeID(source.objectID, from: key)
        } else if case .object(let id) = values[key] ?? .none, id == source.objectID {
            setPrimitive(.none, forKey: key, persistent: true)
        }
    }
}

/// A live view of a to-many relationship that mutates it (Core Data's `mutableSetValue(forKey:)`
/// proxy): every insertion and removal keeps the inverse in step and is recorded as a change.
///
/// Valid while its object is in its context; it reads the relationship afresh on every call.
public final class RelationshipSet: Sequence {
    let owner: ManagedObject
    let relationship: RelationshipDescription

    init(owner: ManagedObject, relationship: RelationshipDescription) {
        self.owner = owner
        self.relationship = relationship
    }

    /// The IDs now in the relationship (loaded first when needed).
    func ids() throws -> OrderedSet<ManagedObjectID> {
        try owner.fireFault()
        try owner.loadRelationship(relationship.name)
        return owner.values[relationship.name]?.objectIDs ?? []
    }

    /// The objects now in the relationship.
    public var objects: [ManagedObject] {
        get throws {
            let ids = try ids()
            guard let context = owner.managedObjectContext else {
                if !ids.isEmpty, let cause = owner.inaccessibility { throw owner.inaccessible("the objects of \(relationship.name)", because: cause) }
                return []
            }
            return context.resolveDestinations(ids)
        }
    }

    /// How many objects the relationship holds (0 when its objects cannot be loaded).
    public var count: Int { (try? ids().count) ?? 0 }

    /// Whether `object` is in the relationship.
    public func contains(_ object: ManagedObject) -> Bool {
        (try? ids().contains(object.objectID)) ?? false
    }

    /// Adds `object` (and sets its inverse).
    public func insert(_ object: ManagedObject) throws {
        try insert(object, at: nil)
    }

    /// Adds `object` at `index` (at the end when nil), and sets its inverse.
    func insert(_ object: ManagedObject, at index: Int?) throws {
        if let failure = owner.inaccessibleFailure { throw failure }
        _ = try owner.destinations(object, for: relationship)
        try owner.fireFault()
        try owner.add(object, to: relationship, at: index)
    }

    /// Removes `object` (and clears its inverse).
    public func remove(_ object: ManagedObject) throws {
        if let failure = owner.inaccessibleFailure { throw failure }
        try owner.fireFault()
        try owner.remove(object, from: relationship)
    }

    /// Removes every object.
    public func removeAll() throws {
        for object in try objects { try remove(object) }
    }

    /// Iterates the objects (none when they cannot be loaded: use ``objects`` to see the error).
    public func makeIterator() -> IndexingIterator<[ManagedObject]> { ((try? objects) ?? []).makeIterator() }
}

/// A live view of an ordered to-many relationship that mutates it, keeping the order (Core
/// Data's `mutableOrderedSetValue(forKey:)` proxy).
public final class OrderedRelationshipSet: Sequence {
    let base: RelationshipSet

    init(owner: ManagedObject, relationship: RelationshipDescription) {
        base = RelationshipSet(owner: owner, relationship: relationship)
    }

    /// The objects in order.
    public var objects: [ManagedObject] {
        get throws { try base.objects }
    }
    /// How many objects the relationship holds.
    public var count: Int { base.count }
    /// Whether `object` is in the relationship.
    public func contains(_ object: ManagedObject) -> Bool { base.contains(object) }
    /// Appends `object` (when not already in).
    public func append(_ object: ManagedObject) throws { try base.insert(object) }
    /// Inserts `object` at `index` (when not already in).
    ///
    /// - Throws: ``ArborError/Code/misuse`` when `index` is outside `0...count`.
    public func insert(_ object: ManagedObject, at index: Int) throws {
        let count = try base.ids().count
        guard (0...count).contains(index) else {
            throw ArborError(.misuse, "index \(index) is outside 0...\(count) for \(base.relationship.name)")
        }
        try base.insert(object, at: index)
    }
    /// Removes `object`.
    public func remove(_ object: ManagedObject) throws { try base.remove(object) }
    /// Removes the object at `index`.
    public func remove(at index: Int) throws {
        let ids = try base.ids()
        guard ids.indices.contains(index) else {
            throw ArborError(.misuse, "index \(index) is outside the \(ids.count) objects of \(base.relationship.name)")
        }
        guard let object = base.owner.managedObjectContext?.resolve(ids[index]) else {
            throw ArborError(.misuse, "\(base.owner) is not in a context any more", objectID: base.owner.objectID)
        }
        try base.remove(object)
    }
    /// Iterates the objects in order (none when they cannot be loaded: use ``objects`` to see
    /// the error).
    public func makeIterator() -> IndexingIterator<[ManagedObject]> { ((try? objects) ?? []).makeIterator() }
}
