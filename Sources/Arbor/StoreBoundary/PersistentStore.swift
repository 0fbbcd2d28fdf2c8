import Foundation
import OrderedCollections

/// A row as a store holds it: an object's entity, its version number (incremented by every save
/// that changes it: optimistic locking compares it), and its persistent values — attributes,
/// to-one relationships (the destination's ID) and the order of ordered to-many relationships.
/// Unordered to-many relationships are not in rows: they come from the inverse's foreign key
/// (``PersistentStore/relatedObjectIDs(of:relationship:)``).
///
/// The values sit in property slots (the entity's layout when Arbor makes the row), so a saved
/// object's row, its row-cache snapshot and the committed values of the objects made from it
/// share one array of values.
public struct StoreRow: Sendable, Equatable {
    /// The entity of the row's object (a sub-entity of the tree's root, or the root).
    public var entityName: String
    /// The row's version number: 1 when first saved.
    public var version: Int64
    /// The values: `.attribute` or `.none` for attributes, `.object` or `.none` for to-one
    /// relationships, `.objects` for ordered to-many relationships whose order the row carries;
    /// no value (nil) for anything else.
    var values: PropertyStorage

    /// A row of nothing, left where a row was taken away (its values are the runtime's shared
    /// empty array: copying and dropping it counts nothing).
    static let placeholder = StoreRow(entityName: "", version: 0, values: PropertyStorage(layout: PropertyLayout.named([])))

    /// A row of `values` (in a layout of the entity's, or any layout naming the properties).
    init(entityName: String, version: Int64, values: PropertyStorage) {
        self.entityName = entityName
        self.version = version
        self.values = values
    }

    /// Creates a row from values by key (absent attributes and to-one relationships are nil;
    /// an ordered to-many relationship absent from `ordered` keeps its stored order).
    public init(entityName: String, version: Int64, attributes: [String: AttributeValue], toOne: [String: ManagedObjectID],
                ordered: [String: [ManagedObjectID]] = [:]) {
        let names = Array(Set(attributes.keys).union(toOne.keys).union(ordered.keys)).sorted()
        var values = PropertyStorage(layout: PropertyLayout.named(names))
        for (key, value) in attributes { values[key] = .attribute(value) }
        for (key, id) in toOne { values[key] = .object(id) }
        for (key, ids) in ordered { values[key] = .objects(OrderedSet(ids)) }
        self.init(entityName: entityName, version: version, values: values)
    }

    /// Attribute values (absent: nil) by key.
    public var attributes: [String: AttributeValue] {
        var result: [String: AttributeValue] = [:]
        for (key, value) in values { if case .attribute(let stored) = value { result[key] = stored } }
        return result
    }

    /// To-one destinations (absent: nil) by key.
    public var toOne: [String: ManagedObjectID] {
        var result: [String: ManagedObjectID] = [:]
        for (key, value) in values { if case .object(let id) = value { result[key] = id } }
        return result
    }

    /// The destinations of the ordered to-many relationships whose order the row carries, by key.
    public var ordered: [String: [ManagedObjectID]] {
        var result: [String: [ManagedObjectID]] = [:]
        for (key, value) in values { if case .objects(let ids) = value { result[key] = Array(ids) } }
        return result
    }

    /// The attribute value of `key` (nil: none).
    func attribute(_ key: String) -> AttributeValue? {
        if case .attribute(let value)? = values[key] { return value }
        return nil
    }

    /// The to-one destination of `key` (nil: none).
    func destination(_ key: String) -> ManagedObjectID? {
        if case .object(let id)? = values[key] { return id }
        return nil
    }

    /// The attribute value of `key` as a property value (`.none`: none).
    func attributeValue(_ key: String) -> PropertyValue {
        attribute(key).map(PropertyValue.attribute) ?? PropertyValue.none
    }

    /// The to-one destination of `key` as a property value (`.none`: none).
    func toOneValue(_ key: String) -> PropertyValue {
        destination(key).map(PropertyValue.object) ?? PropertyValue.none
    }

    /// The destinations of the ordered relationship `key`, when the row carries its order.
    func orderedDestinations(_ key: String) -> OrderedSet<ManagedObjectID>? {
        if case .objects(let ids)? = values[key] { return ids }
        return nil
    }

    /// Rows are equal when their entity, version and values are (whatever their layouts).
    public static func == (a: StoreRow, b: StoreRow) -> Bool {
        guard a.entityName == b.entityName, a.version == b.version else { return false }
        if a.values.layout === b.values.layout { return a.values == b.values }
        return a.attributes == b.attributes && a.toOne == b.toOne && a.ordered == b.ordered
    }

    /// The row with the temporary IDs of `mapping` replaced by their permanent ones.
    func translated(_ mapping: IDMapping) -> StoreRow {
        var row = self
        row.values.replaceObjectIDs { mapping[$0] }
        return row
    }
}

/// What one save changes in one store, handed to ``PersistentStore/save(_:)`` as one unit: the
/// store applies all of it in one transaction, or none of it.
public struct StoreChanges: Sendable {
    /// New rows, with their permanent IDs — or temporary ones, for which the store allocates
    /// primary keys in the same transaction (references to them in other rows of the same save
    /// are translated too).
    public var inserted: [(ManagedObjectID, StoreRow)] = []
    /// Changed rows: the new row (its version the expected one plus one) and what the saving
    /// context's copy was read as (the store refuses the save when the row has moved on since
    /// and its values are no longer the snapshot's: ``RowExpectation``).
    public var updated: [(ManagedObjectID, StoreRow, expected: RowExpectation)] = []
    /// Deleted rows, with what the saving context's copy was read as.
    public var deleted: [(ManagedObjectID, expected: RowExpectation)] = []
    /// Rows that must still be as read, though this save does not change them (objects marked
    /// with ``ManagedObjectContext/detectConflicts(for:)``).
    public var checked: [(ManagedObjectID, expected: RowExpectation)] = []
    /// Many-to-many links added: (object, relationship name, destination).
    public var linked: [(ManagedObjectID, String, ManagedObjectID)] = []
    /// Many-to-many links removed: (object, relationship name, destination).
    public var unlinked: [(ManagedObjectID, String, ManagedObjectID)] = []
    /// New rows made one at a time when the store writes them, in place of ``inserted`` (a
    /// context's save: a large save then never holds all its new rows at once). Native stores
    /// read them here; other stores are given ``materialized()``.
    var insertedOnDemand: RowsOnDemand?
    /// Who writes these changes, and with what, for persistent history.
    var origin = TransactionOrigin()
    /// Saved objects the new rows name, each with the property that names it: checked in the
    /// save's own transaction (a batch insert's destinations: another connection may delete one
    /// at any time before), the save refused (``ArborError/Code/misuse``) when one is gone.
    var requiredRows: [ManagedObjectID: String] = [:]

    /// Creates an empty set of changes.
    public init() {}

    /// The number of new rows.
    var insertedCount: Int { insertedOnDemand?.count ?? inserted.count }

    /// The ID of new row `position`.
    func insertedID(at position: Int) -> ManagedObjectID {
        insertedOnDemand.map { $0.id(position) } ?? inserted[position].0
    }

    /// New row `position`: made now when the rows are made on demand (each call makes it again).
    func insertedRow(at position: Int) -> StoreRow {
        insertedOnDemand.map { $0.row(position) } ?? inserted[position].1
    }

    /// These changes with every new row in ``inserted``, and its links in ``linked`` and
    /// ``unlinked``.
    func materialized() -> StoreChanges {
        guard let rows = insertedOnDemand else { return self }
        var changes = self
        changes.insertedOnDemand = nil
        changes.inserted = (0..<rows.count).map { (rows.id($0), rows.row($0)) }
        for position in 0..<rows.count {
            rows.links(position) { id, name, other, added in
                if added { changes.linked.append((id, name, other)) } else { changes.unlinked.append((id, name, other)) }
            }
        }
        return changes
    }

    /// Temporary → permanent IDs, from `assigned` (what ``PersistentStore/save(_:)`` returned
    /// for these changes).
    func permanentIDs(_ assigned: [ManagedObjectID]) -> IDMapping {
        let mapping = IDMapping(capacity: insertedCount)
        for (position, new) in assigned.prefix(insertedCount).enumerated() {
            let old = insertedID(at: position)
            if old.isTemporaryID { mapping.add(old, new) }
        }
        return mapping
    }

    /// Whether there is nothing to write.
    public var isEmpty: Bool {
        insertedCount == 0 && updated.isEmpty && deleted.isEmpty && linked.isEmpty && unlinked.isEmpty && checked.isEmpty
    }
}

/// Who wrote a transaction, and with what, as persistent history records it.
struct TransactionOrigin: Sendable {
    /// The writing context's ``ManagedObjectContext/transactionAuthor``.
    var author: String?
    /// The writing context's ``ManagedObjectContext/name``.
    var contextName: String?
    /// What wrote it.
    var kind: PersistentHistoryTransactionKind = .save
}

/// New rows made when a store asks for them (``StoreChanges/insertedOnDemand``): by a saving
/// context, from its new objects, inside the save.
///
/// Unchecked `Sendable`: the functions read the saving context's objects, and are called only
/// during the save that made them — by the store, synchronously, on the thread of the context's
/// queue that is saving — and dropped with the changes when the save returns.
final class RowsOnDemand: @unchecked Sendable {
    /// The number of rows.
    let count: Int
    /// The ID of a row, by position.
    let id: (Int) -> ManagedObjectID
    /// A row, made anew on each call, by position.
    let row: (Int) -> StoreRow
    /// The many-to-many links a row's object adds or removes, by position: each given to the
    /// function as (object, relationship, destination, added). A new object's links are all
    /// additions; the store writes them after the links of ``StoreChanges/unlinked`` and
    /// ``StoreChanges/linked``.
    let links: (Int, (ManagedObjectID, String, ManagedObjectID, Bool) -> Void) -> Void

    init(count: Int, id: @escaping (Int) -> ManagedObjectID, row: @escaping (Int) -> StoreRow,
         links: @escaping (Int, (ManagedObjectID, String, ManagedObjectID, Bool) -> Void) -> Void = { _, _ in }) {
        self.count = count
        self.id = id
        self.row = row
        self.links = links
    }
}

/// What a save expects of a stored row it changes, deletes or checks: Core Data's optimistic
/// locking (seed 004, "Conflict Detection and Optimistic Locking"). The one owner of the rule:
/// stores apply it inside their write transaction, and contexts apply it when they build the
/// conflict records of a save that was refused.
///
/// The row is as expected when its version is the one the object was read at (the fast path:
/// nothing else is compared), or — its version having moved on, as another context's save moves
/// it — when its persisted values are still those of the object's snapshot: "If the values are
/// the same, the store has not been changed since the object was fetched, so the save proceeds
/// normally." The persisted values are a row's attributes, its to-one destinations and the order
/// of its ordered to-many relationships (where both rows carry it); unordered to-many
/// relationships live in other rows and join trees, not in the snapshot.
public struct RowExpectation: Sendable {
    /// The version of the row the object was read at.
    public var version: Int64
    /// The object's persisted values as read (nil: compare versions only).
    public var snapshot: StoreRow?

    /// An expectation of the row at `version`, holding `snapshot`'s values.
    public init(version: Int64, snapshot: StoreRow? = nil) {
        self.version = version
        self.snapshot = snapshot
    }

    /// Whether `stored` (the row in the store now, of `entity`) is still what the save expects.
    public func isMet(by stored: StoreRow, entity: EntityDescription) -> Bool {
        if stored.version == version { return true }
        guard let snapshot else { return false }
        return stored.hasPersistedValues(of: snapshot, entity: entity)
    }
}

extension StoreRow {
    /// Whether this row's persisted values (attributes, to-one destinations, and the order of
    /// ordered to-many relationships both rows carry) are `other`'s; versions are not compared.
    func hasPersistedValues(of other: StoreRow, entity: EntityDescription) -> Bool {
        for attribute in entity.attributes where !attribute.isTransient {
            if attributeValue(attribute.name) != other.attributeValue(attribute.name) { return false }
        }
        for relationship in entity.relationships {
            if !relationship.isToMany {
                if toOneValue(relationship.name) != other.toOneValue(relationship.name) { return false }
            } else if relationship.isOrdered, let mine = orderedDestinations(relationship.name),
                      let theirs = other.orderedDestinations(relationship.name), mine != theirs {
                return false
            }
        }
        return true
    }
}

/// What a store's save did, beyond writing the changes: the IDs of the rows it inserted, and the
/// versions of updated rows it wrote at another version than their new row carried.
public struct StoreSaveResult: Sendable {
    /// The IDs of the inserted rows, in the order of ``StoreChanges/inserted``: the permanent ID
    /// given to each row that came with a temporary one, the row's own ID for the others.
    public var insertedIDs: [ManagedObjectID]
    /// Updated rows written at a version other than their new row's: the row had moved on since
    /// it was read, with its values unchanged (``RowExpectation``), so it was written at the
    /// stored version plus one. Empty for most saves.
    public var rebasedVersions: [ManagedObjectID: Int64]

    /// A result listing the inserted rows' IDs and the rebased versions.
    public init(insertedIDs: [ManagedObjectID], rebasedVersions: [ManagedObjectID: Int64] = [:]) {
        self.insertedIDs = insertedIDs
        self.rebasedVersions = rebasedVersions
    }
}

/// A store of rows: what a ``PersistentStoreCoordinator`` reads objects from and saves them to.
///
/// Arbor's stores are ``NativeStore`` (a file) and the in-memory store (the same engine over
/// memory); other kinds of store implement this protocol. All calls come from the coordinator,
/// which serialises them.
public protocol PersistentStore: AnyObject, Sendable {
    /// The store's identifier: the host part of its objects' URIs. Kept in the store itself.
    var identifier: UUID { get }
    /// The kind of store (`"native"`, `"memory"`, …).
    var type: String { get }
    /// The store's file, if it has one.
    var path: String? { get }
    /// The model configuration whose entities it holds (nil: every entity).
    var configurationName: String? { get }
    /// Closes the store's file, if it has one: what
    /// ``PersistentStoreCoordinator/remove(_:)`` does after taking the store out. The store must
    /// not be used afterwards.
    func close()

    /// The row of `objectID`, or nil when there is none.
    func row(for objectID: ManagedObjectID) throws -> StoreRow?
    /// The IDs of the objects a to-many relationship of `objectID` holds (in their saved order
    /// for an ordered relationship).
    func relatedObjectIDs(of objectID: ManagedObjectID, relationship: RelationshipDescription) throws -> [ManagedObjectID]
    /// `count` new primary keys for objects of `entity` (never handed out again).
    func allocatePrimaryKeys(for entity: EntityDescription, count: Int) throws -> [Int64]
    /// Applies `changes` in one transaction: all of it, or — throwing — none of it. Returns the
    /// IDs of the inserted rows (and the versions of rows written at another version than
    /// asked: ``StoreSaveResult``).
    ///
    /// - Throws: ``ArborError/Code/mergeConflict`` when rows are not as expected
    ///   (``RowExpectation``: moved on and changed, or gone), listing each in
    ///   ``ArborError/conflicts``; ``ArborError/Code/constraintConflict`` for uniqueness
    ///   violations, listing each in ``ArborError/constraintConflicts``;
    ///   ``ArborError/Code/storeSave`` for an engine failure. A context settles the conflicts
    ///   listed with its merge policy; a conflict error that lists none fails the save as it is.
    func save(_ changes: StoreChanges) throws -> StoreSaveResult
    /// The ID of row `primaryKey` of `entityName` in this store.
    func objectID(entityName: String, primaryKey: Int64) -> ManagedObjectID
    /// The rows matching a fetch, in its order and window (docs/predicates.md, "Execution in the
    /// store").
    ///
    /// - Throws: ``ArborError/Code/store`` for an engine failure or a damaged row or index.
    func fetch(_ request: StoreFetch) throws -> [(ManagedObjectID, StoreRow)]
    /// Hands the rows ``fetch(_:)`` would return to `body` one at a time, in the same order,
    /// until `body` returns false: a store that can read its rows as it hands them over keeps
    /// none of them (``NativeStore/forEachRow(_:_:)`` says when it can, and what it locks
    /// meanwhile). The default implementation calls ``fetch(_:)`` and hands its rows over.
    ///
    /// - Throws: as ``fetch(_:)``, and what `body` throws.
    func forEachRow(_ request: StoreFetch, _ body: (ManagedObjectID, StoreRow) throws -> Bool) throws
    /// The number of rows ``fetch(_:)`` would return.
    func count(_ request: StoreFetch) throws -> Int
    /// How the store would run a fetch.
    func explain(_ request: StoreFetch) throws -> QueryPlan
    /// The rows of several objects (nil for those that have none).
    func rows(for objectIDs: [ManagedObjectID]) throws -> [StoreRow?]
    /// The value of the attribute `name` in the rows of several objects (nil where the row is
    /// gone or holds nil): what ``rows(for:)`` would give for that attribute, without the rest.
    func attributeValues(_ name: String, of objectIDs: [ManagedObjectID]) throws -> [AttributeValue?]
    /// The destinations of the to-many `relationship` of several objects, in `objectIDs`' order:
    /// what ``relatedObjectIDs(of:relationship:)`` gives for each, read together.
    func relatedObjectIDs(ofEach objectIDs: [ManagedObjectID], relationship: RelationshipDescription) throws -> [[ManagedObjectID]]
}

extension PersistentStore {
    /// Nothing to close (a store without a file of its own).
    public func close() {}

    /// The rows of ``fetch(_:)``, fetched at once, then handed to `body` one at a time until it
    /// returns false: memory proportional to the rows, as the fetch.
    public func forEachRow(_ request: StoreFetch, _ body: (ManagedObjectID, StoreRow) throws -> Bool) throws {
        for (id, row) in try fetch(request) where try !body(id, row) { return }
    }

    /// The attribute's values, from ``rows(for:)``.
    public func attributeValues(_ name: String, of objectIDs: [ManagedObjectID]) throws -> [AttributeValue?] {
        try rows(for: objectIDs).map { row in
            if case .attribute(let value)? = row?.values[name] { return value }
            return nil
        }
    }

    /// The rows of several objects, one ``row(for:)`` at a time.
    public func rows(for objectIDs: [ManagedObjectID]) throws -> [StoreRow?] {
        try objectIDs.map { try row(for: $0) }
    }

    /// The destinations of several objects' to-many relationship, one
    /// ``relatedObjectIDs(of:relationship:)`` at a time.
    public func relatedObjectIDs(ofEach objectIDs: [ManagedObjectID], relationship: RelationshipDescription) throws -> [[ManagedObjectID]] {
        try objectIDs.map { try relatedObjectIDs(of: $0, relationship: relationship) }
    }
}
