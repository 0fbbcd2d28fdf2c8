import Foundation
import OrderedCollections

// Safety: Attributes are used unretained through the entity's `attributeInSlot` (the object holds
// its entity, the entity its attributes); the snapshot is used unretained while the object holds
// it, and the context through the link while the context is alive, on its queue.

/// Key-value coding: properties by name, key paths with collection operators, and to-many
/// relationships mutated through proxies. Setting either end of a relationship updates the other.
extension ManagedObject {
    // MARK: Reading

    /// The value of the property `key`: an attribute's Swift value, a to-one relationship's
    /// object, a to-many relationship's objects (a `Set`, or an `Array` when ordered); nil when
    /// unset. Reading a persistent property of a fault fires it.
    ///
    /// - Throws: ``ArborError/Code/unknownKey`` when the entity has no such property;
    ///   ``ArborError/Code/objectNotFound`` when a fault fires for a row that is gone.
    public func value(forKey key: String) throws -> Any? {
        checkQueue()
        // One lookup by name: the slot tells attribute from relationship.
        guard let slot = entity.propertyLayout.index[key] else { throw unknownKey(key) }
        observationAccess(slot)
        if let attribute = entity.attributeInSlot[slot] {
            return try attribute._withUnsafeGuaranteedRef { attribute in
                if !attribute.isTransient { try fireFault() }
                guard case .attribute(let stored)? = values[slot: slot] else { return nil }
                return attribute.type.swiftValue(of: stored)
            }
        }
        // Not an attribute: a relationship.
        switch try relationshipValue(slot: slot, key: key) {
        case .toOne(let destination): return destination
        case .other(let value): return value
        }
    }

    /// A relationship's value as a key path reads it: a to-one's destination as the object
    /// itself (not boxed as ``value(forKey:)`` gives it, so that key paths follow to-one hops
    /// without casting it back), anything else as ``value(forKey:)`` gives it.
    enum RelationshipValue {
        case toOne(ManagedObject?)
        case other(Any?)
    }

    /// The value of the relationship `key`, read as ``value(forKey:)`` reads it; nil when `key`
    /// names no relationship (nothing is read then).
    func relationshipValue(forKey key: String) throws -> RelationshipValue? {
        guard let slot = entity.propertyLayout.index[key], entity.attributeInSlot[slot] == nil else { return nil }
        checkQueue()
        observationAccess(slot)
        return try relationshipValue(slot: slot, key: key)
    }

    /// The value of the relationship `key` in `slot`: the object fired and the relationship
    /// loaded first.
    private func relationshipValue(slot: Int, key: String) throws -> RelationshipValue {
        try fireFault()
        try loadRelationship(key)
        let value = values[slot: slot] ?? .none
        // The objects it names are found through the context: gone with it.
        if managedObjectContext == nil, let cause = inaccessibility, !value.objectIDs.isEmpty {
            throw inaccessible("the objects of \(key)", because: cause)
        }
        switch value {
        case .object(let id): return .toOne(destination(id))
        case .none: return .toOne(nil)
        case .attribute, .objects: return .other(presentable(value, key: key))
        }
    }

    /// The value at the end of `keyPath` (keys separated by dots), following relationships:
    /// through a to-many relationship the path continues on every object and gives the set (or,
    /// ordered, the array) of their values. The collection operators `@count`, `@sum`, `@avg`,
    /// `@min`, `@max` and `@distinctUnionOfObjects` apply to the collection on their left and to
    /// the key path on their right (`employees.@sum.salary`, `employees.@count`).
    ///
    /// - Throws: as ``value(forKey:)``; ``ArborError/Code/unknownKey`` for an unknown operator.
    public func value(forKeyPath keyPath: String) throws -> Any? {
        checkQueue()
        let keys: [String]
        if let last = managedObjectContext?.lastKeyPath, last.path == keyPath {
            keys = last.keys
        } else {
            keys = try KeyPathEvaluator.keys(of: keyPath)
            managedObjectContext?.lastKeyPath = (keyPath, keys)
        }
        return try KeyPathEvaluator.evaluate(keys[...], on: self)
    }

    /// Whether the relationship `key` has not been loaded: the object is a fault, or the
    /// to-many relationship's destinations have not been read yet (Core Data's
    /// `hasFaultForRelationshipNamed:`). Never loads anything.
    ///
    /// - Throws: ``ArborError/Code/unknownKey`` when `key` names no relationship.
    public func hasFault(forRelationshipNamed key: String) throws -> Bool {
        checkQueue()
        guard entity.relationshipsByName[key] != nil else {
            throw ArborError(.unknownKey, "\(entity.name) has no relationship \"\(key)\"", entity: entity.name, key: key, objectID: objectID)
        }
        return faulted || unloadedRelationships.contains(key)
    }

    // MARK: Writing

    /// Sets the property at the end of `keyPath` (keys separated by dots): the path up to the
    /// last key is followed through to-one relationships, and the last key is set on the object
    /// reached (`setValue(1000, forKeyPath: "manager.salary")`). Nothing happens when a
    /// relationship on the way is nil.
    ///
    /// - Throws: as ``setValue(_:forKey:)``; ``ArborError/Code/wrongValueType`` when the path
    ///   goes through a to-many relationship or an attribute.
    public func setValue(_ value: Any?, forKeyPath keyPath: String) throws {
        checkQueue()
        var keys = try KeyPathEvaluator.keys(of: keyPath)
        let last = keys.removeLast()
        var object: ManagedObject = self
        for key in keys {
            guard let relationship = object.entity.relationshipsByName[key] else {
                if object.entity.attributesByName[key] != nil {
                    throw ArborError(.wrongValueType, "\(keyPath): \(object.entity.name).\(key) is an attribute, not a relationship to follow",
                                     entity: object.entity.name, key: key, objectID: object.objectID)
                }
                throw ArborError(.unknownKey, "\(object.entity.name) has no property \"\(key)\" (in \(keyPath))", entity: object.entity.name, key: key,
                                 objectID: object.objectID)
            }
            guard !relationship.isToMany else {
                throw ArborError(.wrongValueType, "\(keyPath): \(object.entity.name).\(key) is to-many; a key path to set goes through to-one relationships",
                                 entity: object.entity.name, key: key, objectID: object.objectID)
            }
            guard let next = try object.value(forKey: key) as? ManagedObject else { return }
            object = next
        }
        try object.setValue(value, forKey: last)
    }

    /// Sets the property `key`: an attribute to a value of its type (or nil), a to-one
    /// relationship to an object of its destination entity (or nil), a to-many relationship to a
    /// collection of such objects. The inverse relationships of every object involved are kept in
    /// step, and the changes are recorded in the context.
    ///
    /// - Throws: ``ArborError/Code/unknownKey``; ``ArborError/Code/wrongValueType`` for a value of
    ///   the wrong type or entity (nothing changes); ``ArborError/Code/misuse`` for an object of
    ///   another context.
    public func setValue(_ value: Any?, forKey key: String) throws {
        checkQueue()
        if let failure = inaccessibleFailure { throw failure }
        // One lookup by name finds the slot, and the slot the attribute (as in value(forKey:)).
        if let slot = entity.propertyLayout.index[key], let attribute = entity.attributeInSlot[slot] {
            try attribute._withUnsafeGuaranteedRef { attribute in
                let stored: PropertyValue
                if let value, !isNull(value) {
                    stored = .attribute(try attribute.type.storedValue(from: value, entity: entity.name, key: key))
                } else {
                    stored = .none
                }
                if !attribute.isTransient { try fireFault() }
                setPrimitive(stored, slot: slot, persistent: !attribute.isTransient)
            }
            if refusedValues != nil { clearRefusals(key) }
            return
        }
        guard let relationship = entity.relationshipsByName[key] else { throw unknownKey(key) }
        try fireFault()
        if relationship.isToMany {
            let objects = try destinations(value, for: relationship)
            try loadRelationship(key)
            let current = values[key]?.objectIDs ?? []
            let wanted = OrderedSet(objects.map(\.objectID))
            for object in objects where !current.contains(object.objectID) {
                try add(object, to: relationship)
            }
            for id in current where !wanted.contains(id) {
                if let object = managedObjectContext?.resolve(id) { try remove(object, from: relationship) }
            }
            if relationship.isOrdered && values[key]?.objectIDs != wanted {
                setPrimitive(.objects(wanted), forKey: key, persistent: true)
            }
        } else {
            let object = try destinations(value, for: relationship).first
            try setToOne(object, relationship: relationship)
        }
        if refusedValues != nil { clearRefusals(key) }
    }

    /// A proxy for mutating the to-many relationship `key`: insertions and removals through it
    /// update the inverse and are recorded as changes (Core Data's `mutableSetValue(forKey:)`).
    public func mutableSetValue(forKey key: String) throws -> RelationshipSet {
        checkQueue()
        guard let relationship = entity.relationshipsByName[key], relationship.isToMany else { throw unknownKey(key, toMany: true) }
        return RelationshipSet(owner: self, relationship: relationship)
    }

    /// A proxy for mutating the ordered to-many relationship `key`, keeping the order.
    public func mutableOrderedSetValue(forKey key: String) throws -> OrderedRelationshipSet {
        checkQueue()
        guard let relationship = entity.relationshipsByName[key], relationship.isToMany, relationship.isOrdered else {
            throw unknownKey(key, toMany: true, ordered: true)
        }
        return OrderedRelationshipSet(owner: self, relationship: relationship)
    }

    // MARK: Validation

    /// Checks `value` against the constraints of the property `key` without setting it: type,
    /// required, minimum and maximum, length, pattern; for relationships, destination entity,
    /// required and counts.
    ///
    /// - Throws: the ``ArborError`` of the first rule broken.
    public func validateValue(_ value: Any?, forKey key: String) throws {
        checkQueue()
        if let attribute = entity.attributesByName[key] {
            let stored: AttributeValue?
            if let value, !isNull(value) {
                stored = try attribute.type.storedValue(from: value, entity: entity.name, key: key)
            } else {
                stored = nil
            }
            try Validation.check(stored, attribute: attribute, object: self)
            return
        }
        guard let relationship = entity.relationshipsByName[key] else { throw unknownKey(key) }
        let objects = try destinations(value, for: relationship)
        try Validation.check(count: objects.count, relationship: relationship, object: self)
    }

    // MARK: Primitives

    /// Whether `value` is `NSNull` (compared by type: an `is NSNull` cast tries to bridge every
    /// value to an object first).
    @inline(__always)
    func isNull(_ value: Any) -> Bool { ObjectIdentifier(type(of: value)) == ObjectIdentifier(NSNull.self) }

    /// The elements of any sequence (opens the existential).
    static func elements(of sequence: any Sequence) -> [Any] {
        func collect<S: Sequence>(_ sequence: S) -> [Any] { sequence.map { $0 as Any } }
        return collect(sequence)
    }

    func unknownKey(_ key: String, toMany: Bool = false, ordered: Bool = false) -> ArborError {
        let kind = ordered ? "ordered to-many relationship" : toMany ? "to-many relationship" : "property"
        return ArborError(.unknownKey, "\(entity.name) has no \(kind) \"\(key)\"", entity: entity.name, key: key, objectID: objectID)
    }

    /// Loads the persistent values when the object is a fault.
    func fireFault() throws {
        guard faulted else { return }
        // A fault a fetch filled from its snapshot fires from the values it holds while the
        // snapshot is as the fetch saw it (same row, still cached), when any age is accepted:
        // the same values a fire through the cache would give, without the coordinator's lock.
        // (The snapshot is used unretained: the object holds it. So is the context, which the
        // object's link names while the context is there.)
        if filledGeneration != .max, faultBatch == nil, let snapshot = snapshotReference,
           snapshot._withUnsafeGuaranteedRef({ filledGeneration == $0.generation.load(ordering: .acquiring) }),
           let context = link?.contextReference,
           context._withUnsafeGuaranteedRef({ $0.firesFromFilledValues && $0.permanentIDMailbox.isEmpty }) {
            snapshot._withUnsafeGuaranteedRef { $0.countFilledHit() }
            filledGeneration = .max
            faulted = false
            awakeFromFetch()
            return
        }
        guard let context = managedObjectContext else {
            // Its context was reset or has ended: a fault a fetch filled reads the values it
            // holds, as it last held them; one that holds none cannot load them.
            guard filledGeneration == .max else {
                filledGeneration = .max
                faulted = false
                return
            }
            throw inaccessible("its values", because: inaccessibility)
        }
        filledGeneration = .max
        if let batch = faultBatch {
            faultBatch = nil
            try context.loadBatch(batch)
        }
        try context.fulfillFault(self)
    }

    /// Loads a to-many relationship's destinations when they have not been read yet.
    func loadRelationship(_ key: String) throws {
        guard unloadedRelationships.contains(key) else { return }
        guard let context = managedObjectContext else {
            throw inaccessible("the objects of \(key)", because: inaccessibility)
        }
        try context.loadRelationship(key, of: self)
    }

    /// Sets a value, recording the change (for persistent properties) in the object and its
    /// context.
    func setPrimitive(_ value: PropertyValue, forKey key: String, persistent: Bool) {
        guard let slot = entity.propertyLayout.index[key] else { return }
        setPrimitive(value, slot: slot, persistent: persistent)
    }

    /// ``setPrimitive(_:forKey:persistent:)`` for the property in `slot` of the entity's layout.
    func setPrimitive(_ value: PropertyValue, slot: Int, persistent: Bool) {
        guard values[slot: slot] != value else { return }
        // The context is loaded once (each load retains it).
        let context = managedObjectContext
        context?.recordUndo(self, slot: slot)
        observingChange(of: slot) { values[slot: slot] = value }
        guard persistent else { return }
        if committed?[slot: slot] == value {
            changedSlots.remove(slot)
        } else {
            changedSlots.insert(slot)
        }
        context?.objectDidChange(self)
    }

    /// The objects `value` holds for `relationship`, checked: managed objects of the
    /// destination entity, in this object's context.
    func destinations(_ value: Any?, for relationship: RelationshipDescription) throws -> [ManagedObject] {
        guard let value, !isNull(value) else { return [] }
        var objects: [ManagedObject]
        // The common values first, by cheap casts: an object, a set or an array of objects.
        // Only other values pay for the casts to existentials (a conformance lookup each).
        if let object = value as? ManagedObject {
            objects = [object]
        } else if relationship.isToMany, let set = value as? Set<ManagedObject> {
            objects = Array(set)
        } else if relationship.isToMany, let array = value as? [ManagedObject] {
            objects = array
        } else if !(value is any StringProtocol), let many = value as? any Sequence {
            // A string is a plain value here, not a sequence of characters.
            guard relationship.isToMany else {
                throw ArborError(.wrongValueType, "\(entity.name).\(relationship.name) is to-one; a collection (\(type(of: many))) was given",
                                 entity: entity.name, key: relationship.name, objectID: objectID)
            }
            objects = []
            for element in Self.elements(of: many) {
                guard let object = element as? ManagedObject else {
                    throw ArborError(.wrongValueType, "\(entity.name).\(relationship.name) holds \(relationship.destinationEntityName) objects; \(type(of: element)) given",
                                     entity: entity.name, key: relationship.name, objectID: objectID)
                }
                objects.append(object)
            }
        } else {
            throw ArborError(.wrongValueType, "\(entity.name).\(relationship.name) holds \(relationship.destinationEntityName) objects; \(type(of: value)) given",
                             entity: entity.name, key: relationship.name, objectID: objectID)
        }
        for object in objects {
            guard let destination = relationship.destinationEntity, object.entity.isKind(of: destination) else {
                throw ArborError(.wrongValueType, "\(entity.name).\(relationship.name) holds \(relationship.destinationEntityName) objects; a \(object.entity.name) was given",
                                 entity: entity.name, key: relationship.name, objectID: objectID)
            }
            guard object.managedObjectContext === managedObjectContext else {
                throw ArborError(.misuse, "\(object) belongs to another context than \(self): relate objects of one context only",
                                 entity: entity.name, key: relationship.name, objectID: objectID)
            }
        }
        return objects
    }
}
