import Foundation
import OrderedCollections
import Logging

// Safety: `checkedSpace.address` is an ID space's address, only compared with other IDs' (spaces
// are interned and never freed); it is never dereferenced.

extension ManagedObjectContext {
    /// Runs a batch insert in the store (Core Data's `execute(_:)` with an
    /// `NSBatchInsertRequest`): one row per dictionary (or per call of the request's handler),
    /// written through the save's write pass in one transaction of the entity's store — keys,
    /// indexes, uniqueness entries, foreign keys and history follow — with no managed object in
    /// this context. Rows whose unique values another row holds are settled by this context's
    /// merge policy (``BatchInsertRequest``: an upsert, skipped, or an error). Unless the request
    /// says otherwise, every live context of the coordinator merges what it did. This context's
    /// unsaved changes are neither seen nor saved.
    ///
    /// - Returns: what the request's ``BatchInsertRequest/resultType`` asks for.
    /// - Throws: ``ArborError/Code/invalidFetchRequest`` for an unknown or abstract entity;
    ///   ``ArborError/Code/unknownKey`` for a key the entity does not have;
    ///   ``ArborError/Code/wrongValueType`` for a value of the wrong type, or a relationship that
    ///   cannot be set this way; ``ArborError/Code/misuse`` for a destination that is not a saved
    ///   object of the store; the validation codes for values the model refuses (with nothing
    ///   written); ``ArborError/Code/constraintConflict`` under the error merge policy;
    ///   ``ArborError/Code/storeSave`` for an engine failure.
    public func execute(_ request: BatchInsertRequest) throws -> BatchInsertResult {
        checkQueue()
        let coordinator = try requireCoordinator("run a batch insert in")
        guard let entity = coordinator.managedObjectModel.entity(named: request.entityName), !entity.isAbstract else {
            throw ArborError(.invalidFetchRequest, "a batch insert needs a concrete entity of the model; \(request.entityName) is not one", entity: request.entityName)
        }
        guard let store = coordinator.stores(holding: entity).first else {
            throw ArborError(.misuse, "no store of the coordinator holds \(entity.name)", entity: entity.name)
        }
        var builder = BatchInsertRows(entity: entity, model: coordinator.managedObjectModel, store: store, validates: request.validatesValues)
        switch request.source {
        case .objects(let objects):
            for values in objects { try builder.add(values) }
        case .dictionaryHandler(let handler):
            while true {
                var values: [String: Any] = [:]
                if try handler(&values) { break }
                try builder.add(values)
            }
        case .managedObjectHandler(let handler):
            while true {
                let object = entity.managedObjectClass.init(entity: entity, insertInto: nil)
                if try handler(object) { break }
                try builder.add(object)
            }
        }
        let policy = mergePolicy.mergeType
        let origin = transactionOrigin(.batchInsert)
        // The record names, as related, the destinations the rows name: they gained members in
        // their to-many inverses (and an upsert's old destinations lost some), so contexts that
        // loaded those read them again.
        let record = try writeBatch(coordinator, merging: request.mergesIntoContexts) {
            try builder.write(coordinator, policy: policy, origin: origin)
        }
        coordinator.logger.debug("a batch insert inserted \(record.inserted.count) objects and updated \(record.updated.count)",
                                 metadata: name.map { ["arbor.context": .string($0)] } ?? [:])
        return BatchInsertResult(resultType: request.resultType, inserted: Array(record.inserted), updated: Array(record.updated))
    }
}

/// The rows of one batch insert: each dictionary made into a row of the entity (defaults, type
/// conversion, validation), then written through the coordinator's save, conflicts over unique
/// values settled by the merge policy.
struct BatchInsertRows {
    let entity: EntityDescription
    let model: ManagedObjectModel
    let store: any PersistentStore
    let validates: Bool
    /// The new rows, by temporary ID, and the values each dictionary gave (an upsert writes
    /// those over the stored row).
    private(set) var rows: [(id: ManagedObjectID, row: StoreRow, given: [String: PropertyValue])] = []
    /// The destinations the rows name, with a key naming each: checked in the store all at
    /// once, in the write's own transaction (``StoreChanges/requiredRows``; before the write,
    /// ``checkDestinations(_:)``, for a store of another kind).
    private var destinations: [ManagedObjectID: String] = [:]
    /// The space of the rows' temporary IDs (interned once, not per row).
    private let temporarySpace: ObjectIDSpace
    /// The ID space and relationship of the last destination checked: the next of the same
    /// space (the common case: every row names the same entity) needs no check of its entity
    /// or store again.
    private var checkedSpace: (address: UnsafeMutableRawPointer, relationship: String)?

    /// What a key of the values names: a stored attribute, or a to-one a batch insert can set,
    /// with its slot in the entity's layout.
    private enum Property {
        case attribute(AttributeDescription, slot: Int)
        case toOne(RelationshipDescription, slot: Int)
    }
    /// The keys of the last dictionary, in its order, and what each names: the dictionaries of
    /// one request name the same keys in the same order, so each key is usually found by one
    /// comparison with the last dictionary's key at its place, not by looking it up.
    private var lastKeys: [(key: String, property: Property)] = []

    init(entity: EntityDescription, model: ManagedObjectModel, store: any PersistentStore, validates: Bool) {
        self.entity = entity
        self.model = model
        self.store = store
        self.validates = validates
        temporarySpace = ObjectIDSpace.interned(entity.name, ManagedObjectID.temporaryNamespace)
    }

    /// Adds the row of `values` (an attribute's value by its name, a to-one's destination ID).
    /// An upsert writes the values of `given` (nil: all of `values`) over the stored row.
    mutating func add(_ values: [String: Any], given givenKeys: Set<String>? = nil) throws {
        let id = ManagedObjectID(temporaryIn: temporarySpace)
        var row = StoreRow(entityName: entity.name, version: 1, values: entity.initialValues)
        // The values given are kept only where an upsert may need them.
        var given: [String: PropertyValue] = [:]
        let upserts = !entity.uniquenessConstraints.isEmpty
        for (place, (key, value)) in values.enumerated() {
            let property: Property
            if place < lastKeys.count, lastKeys[place].key == key {
                property = lastKeys[place].property
            } else {
                // Places are met in order, each known or learnt here: never past the end.
                property = try self.property(forKey: key)
                if place < lastKeys.count { lastKeys[place] = (key, property) } else { lastKeys.append((key, property)) }
            }
            let stored: PropertyValue
            let slot: Int
            switch property {
            case .attribute(let attribute, let at):
                stored = try storedValue(value, of: attribute)
                slot = at
            case .toOne(let relationship, let at):
                stored = try storedValue(value, of: relationship)
                slot = at
            }
            row.values[slot: slot] = stored
            if upserts && givenKeys?.contains(key) ?? true { given[key] = stored }
        }
        try check(row, id: id)
        rows.append((id, row, given))
    }

    /// Adds the row of the attributes and to-one relationships `object` holds (what its
    /// handler set: an object in no context holds nothing else). An upsert writes only the
    /// properties the handler changed: the others of the stored row stay.
    mutating func add(_ object: ManagedObject) throws {
        var values: [String: Any] = [:]
        for attribute in entity.attributes where !attribute.isTransient {
            values[attribute.name] = try object.value(forKey: attribute.name) ?? NSNull()
        }
        for relationship in entity.relationships where !relationship.isToMany {
            if let destination = try object.value(forKey: relationship.name) as? ManagedObject { values[relationship.name] = destination }
        }
        try add(values, given: Set(object.changedKeys))
    }

    /// `value` without the optional it may be wrapped in (nil for nil, NSNull or an empty
    /// optional): dictionaries of `Any` hold nil that way.
    private static func unwrapped(_ value: Any) -> Any? {
        if value is NSNull { return nil }
        let mirror = Mirror(reflecting: value)
        guard mirror.displayStyle == .optional else { return value }
        return mirror.children.first.flatMap { unwrapped($0.value) }
    }

    /// What `key` names in the entity, for a batch insert's row.
    ///
    /// - Throws: ``ArborError/Code/unknownKey`` for a key that is no stored attribute or
    ///   relationship; ``ArborError/Code/wrongValueType`` for a relationship a batch insert cannot
    ///   set (a to-many, or a to-one whose inverse is not an unordered to-many).
    private func property(forKey key: String) throws -> Property {
        if let attribute = entity.attributesByName[key], !attribute.isTransient, let slot = entity.propertyLayout.index[key] {
            return .attribute(attribute, slot: slot)
        }
        guard let relationship = entity.relationshipsByName[key], let slot = entity.propertyLayout.index[key] else {
            throw ArborError(.unknownKey, "\(entity.name) has no stored attribute or relationship \(key) for a batch insert to set", entity: entity.name, key: key)
        }
        // A to-one whose other side lives in no other row: the row's foreign key says it all.
        guard !relationship.isToMany, relationship.inverseRelationship.map({ $0.isToMany && !$0.isOrdered }) ?? true else {
            throw ArborError(.wrongValueType, "a batch insert sets to-one relationships whose inverse is an unordered to-many; \(entity.name).\(key) is not one",
                             entity: entity.name, key: key)
        }
        return .toOne(relationship, slot: slot)
    }

    /// `value` as the row's value of `attribute`.
    private func storedValue(_ value: Any, of attribute: AttributeDescription) throws -> PropertyValue {
        // The value as given first; an optional or NSNull only when that fails (no reflection
        // for the common case).
        do {
            return .attribute(try attribute.type.storedValue(from: value, entity: entity.name, key: attribute.name))
        } catch let error as ArborError where error.code == .wrongValueType {
            guard let inner = Self.unwrapped(value) else { return .none }
            return .attribute(try attribute.type.storedValue(from: inner, entity: entity.name, key: attribute.name))
        }
    }

    /// `value` as the row's value of the to-one `relationship`: a saved object's ID (its row
    /// checked in the write's transaction), or none.
    private mutating func storedValue(_ value: Any, of relationship: RelationshipDescription) throws -> PropertyValue {
        let key = relationship.name
        let id: ManagedObjectID
        if let given = value as? ManagedObjectID {
            id = given
        } else {
            guard let unwrapped = Self.unwrapped(value) else { return .none }
            if let given = unwrapped as? ManagedObjectID {
                id = given
            } else if let object = unwrapped as? ManagedObject {
                id = object.objectID
            } else {
                throw ArborError(.wrongValueType, "\(entity.name).\(key) takes a ManagedObjectID of a saved object; \(type(of: value)) is not one",
                                 entity: entity.name, key: key, value: "\(value)")
            }
        }
        if let checkedSpace, checkedSpace.address == id.spaceAddress, checkedSpace.relationship == key, !id.isTemporaryID {
            // Same entity and store as the last destination of this relationship.
        } else {
            guard let destination = relationship.destinationEntity, id.storeIdentifier == store.identifier, !id.isTemporaryID,
                  let named = model.entity(named: id.entityName), named.isKind(of: destination) else {
                throw ArborError(.misuse, "\(entity.name).\(key) of a batch insert must name a saved \(relationship.destinationEntity?.name ?? "object") of the store \(store.identifier); \(id) is not one",
                                 entity: entity.name, key: key, objectID: id)
            }
            checkedSpace = (id.spaceAddress, key)
        }
        destinations.updateValue(key, forKey: id)
        return .object(id)
    }

    /// Checks a new row as a save checks a new object's attributes: required ones set, and,
    /// when the request validates, every rule.
    private func check(_ row: StoreRow, id: ManagedObjectID) throws {
        for (attribute, slot) in zip(entity.attributes, entity.attributeSlots) where !attribute.isTransient {
            let value: AttributeValue? = if case .attribute(let stored)? = row.values[slot: slot] { stored } else { nil }
            if validates {
                try Validation.check(value, attribute: attribute, entity: entity.name, objectID: id)
            } else if value == nil && !attribute.isOptional {
                throw ArborError(.validationMissingMandatoryProperty, "\(entity.name).\(attribute.name) is required; a batch insert row leaves it nil",
                                 entity: entity.name, key: attribute.name, objectID: id)
            }
        }
        for (relationship, slot) in zip(entity.relationships, entity.relationshipSlots) where !relationship.isToMany && !relationship.isOptional {
            if case .object? = row.values[slot: slot] { continue }
            throw ArborError(.validationMissingMandatoryProperty, "\(entity.name).\(relationship.name) is required; a batch insert row leaves it nil",
                             entity: entity.name, key: relationship.name, objectID: id)
        }
    }

    /// Checks that every destination the rows name is a row of the store (of the ID's own
    /// entity), in one read when the store can.
    ///
    /// - Throws: ``ArborError/Code/misuse`` naming the first one missing.
    func checkDestinations(_ coordinator: PersistentStoreCoordinator) throws {
        guard !destinations.isEmpty else { return }
        let ids = Array(destinations.keys)
        let missing = try coordinator.missingRows(ids, in: store)
        if let id = missing.min(by: { ($0.primaryKey ?? 0) < ($1.primaryKey ?? 0) }), let key = destinations[id] {
            throw ArborError(.misuse, "\(entity.name).\(key) of a batch insert names \(id), which the store does not hold", entity: entity.name, key: key, objectID: id)
        }
    }

    /// `stored` in its entity's layout, so that any of its properties can be set.
    static func writable(_ stored: StoreRow, _ model: ManagedObjectModel) throws -> StoreRow {
        guard let entity = model.entity(named: stored.entityName) else {
            throw ArborError(.store, "a stored row names the entity \(stored.entityName), which the model lacks", entity: stored.entityName)
        }
        var row = StoreRow(entityName: stored.entityName, version: stored.version, values: PropertyStorage(layout: entity.propertyLayout))
        for (key, value) in stored.values { row.values[key] = value }
        return row
    }

    /// Writes the rows in one save of the store; returns the permanent IDs of the rows
    /// inserted, in order, and the IDs of the stored rows an upsert updated.
    ///
    /// A save refused for unique values is settled by `policy` and tried again (a few times:
    /// each settlement can only remove conflicts, but an upsert may meet a new one): rows in
    /// conflict among themselves keep one (the last under the object-trump policies, the first
    /// under the store-trump ones); a row in conflict with a stored row becomes an update of that
    /// row with its given values (object-trump, overwrite) or is dropped (store-trump, rollback).
    ///
    /// The third list is the objects whose to-many relationships the write changed: the
    /// destinations the rows written name, and those the upserted rows named before.
    func write(_ coordinator: PersistentStoreCoordinator, policy: MergePolicyType, origin: TransactionOrigin) throws -> ChangeRecord {
        // Long: one retry loop: each refused save's conflicts are settled into `dropped`, `upserts`
        // and `upsertOrder`, from which the next attempt's changes are built.
        // Non-native stores check the destinations first; a native store checks them in the
        // write's own transaction (`requiredRows`), in one read in key order.
        if !coordinator.checksRequiredRows(in: store) { try checkDestinations(coordinator) }
        var dropped: Set<ManagedObjectID> = []
        var upserts: [ManagedObjectID: (row: StoreRow, expected: RowExpectation)] = [:]
        var upsertOrder: [ManagedObjectID] = []
        // The destinations each upserted row named before.
        var formerDestinations: [ManagedObjectID: [ManagedObjectID]] = [:]
        // Each row's position by ID, made at the first conflict (a write without one needs none).
        var byID: [ManagedObjectID: Int] = [:]
        var attempts = 0
        while true {
            var changes = StoreChanges()
            changes.origin = origin
            // Checked in the write's own transaction: another connection may delete a
            // destination at any time before.
            changes.requiredRows = destinations
            changes.inserted = rows.compactMap { dropped.contains($0.id) ? nil : ($0.id, $0.row) }
            changes.updated = upsertOrder.map { ($0, upserts[$0]!.row, expected: upserts[$0]!.expected) }
            do {
                var record = try coordinator.save([(store.identifier, changes)]).record
                guard !record.isEmpty else { return record }
                // Every destination a row names (an upsert's new ones included) is one of the
                // request's; an upsert's old ones too.
                record.related = Set(destinations.keys)
                for holder in upsertOrder { record.related.formUnion(formerDestinations[holder] ?? []) }
                return record
            } catch let error as ArborError where error.code == .constraintConflict && !error.constraintConflicts.isEmpty {
                attempts += 1
                let objectTrump = policy == .mergeByPropertyObjectTrump || policy == .overwrite
                guard objectTrump || policy == .mergeByPropertyStoreTrump || policy == .rollback, attempts <= 5 else { throw error }
                if byID.isEmpty { byID = Dictionary(uniqueKeysWithValues: rows.enumerated().map { ($1.id, $0) }) }
                for conflict in error.constraintConflicts {
                    // A claimant that is not a new row (an upsert meeting another row): give up.
                    guard conflict.conflictingObjectIDs.allSatisfy({ byID[$0] != nil }) else { throw error }
                    // Rows another constraint's conflict settled already are left out (a row
                    // may meet the same stored row, or the same new rows, on several constraints).
                    let claimants = conflict.conflictingObjectIDs.filter { !dropped.contains($0) }
                    if let holder = conflict.databaseObjectID {
                        // Against a stored row: it keeps its values, or takes the last claimant's.
                        dropped.formUnion(claimants)
                        guard objectTrump, let winner = claimants.last else { continue }
                        // Only a row of the request's entity (or a sub-entity) takes the values:
                        // a uniqueness tree spans the hierarchy, and a sibling's row is not one
                        // to update.
                        guard let stored = conflict.databaseSnapshot, model.entity(named: stored.entityName)?.isKind(of: entity) == true else { throw error }
                        var row = try upserts[holder]?.row ?? Self.writable(stored, coordinator.managedObjectModel)
                        for (key, value) in rows[byID[winner]!].given { row.values[key] = value }
                        row.version = stored.version + 1
                        if upserts[holder] == nil {
                            upsertOrder.append(holder)
                            formerDestinations[holder] = Array(stored.toOne.values)
                        }
                        upserts[holder] = (row, RowExpectation(version: stored.version))
                    } else {
                        // Among new rows: one of them stays.
                        guard let keep = objectTrump ? claimants.last : claimants.first else { continue }
                        dropped.formUnion(claimants.filter { $0 != keep })
                    }
                }
            }
        }
    }
}
