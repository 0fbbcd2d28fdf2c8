import Foundation
import Observation
import OrderedCollections

// Safety: The unchecked fields are changed only by Arbor's own code on the context's queue, which
// calls out to no hook, observer or subclass meanwhile; the snapshot and the link are used
// unretained only while the object holds them (in `deinit` too, just before its fields go);
// `hold(retained:)` takes over a reference its caller counted; the object's address is hashed,
// never dereferenced.

/// A property's value inside a managed object.
///
/// Relationships hold object IDs, not objects: objects never keep each other alive, the context
/// resolves IDs to its own (uniqued) instances when a relationship is read, and a temporary ID is
/// replaced by the permanent one everywhere when its object is saved.
enum PropertyValue: Equatable, Sendable {
    /// nil.
    case none
    /// An attribute's value.
    case attribute(AttributeValue)
    /// A to-one relationship's destination.
    case object(ManagedObjectID)
    /// A to-many relationship's destinations (in order, for an ordered relationship).
    case objects(OrderedSet<ManagedObjectID>)

    var objectIDs: OrderedSet<ManagedObjectID> {
        switch self {
        case .object(let id): [id]
        case .objects(let ids): ids
        default: []
        }
    }
}

/// An object of the graph: an instance of an entity, living in one context.
///
/// Read and write its properties by key (`value(forKey:)`, `setValue(_:forKey:)`,
/// `value(forKeyPath:)`), or through a typed subclass. A managed object belongs to the context it
/// was inserted into or fetched by, and to the thread of that context: it is not `Sendable` —
/// pass its ``objectID`` between contexts and threads instead.
///
/// A subclass's `deinit` must not use the object's context (its registry may still name the
/// ending object until it is next purged).
///
/// Subclasses override the lifecycle hooks (``awakeFromInsert()``, ``awakeFromFetch()``,
/// ``willSave()``, ``didSave()``, ``prepareForDeletion()``, ``willTurnIntoFault()``,
/// ``didTurnIntoFault()``) and validation (``validateForInsert()``, ``validateForUpdate()``,
/// ``validateForDelete()``), calling `super`.
open class ManagedObject: Hashable, CustomStringConvertible {
    /// The object's entity.
    public let entity: EntityDescription
    /// The object's identity; temporary until it is saved or given a permanent ID.
    public internal(set) var objectID: ManagedObjectID
    /// The context the object lives in (nil once it has been removed from it: after a rollback
    /// of its insertion, a reset, or its context's end). The object does not keep its context
    /// alive: keep the context while you use its objects, and let it end on its own queue or
    /// when none of its objects is in use on another thread.
    public internal(set) var managedObjectContext: ManagedObjectContext? {
        get { link?.context }
        set { link = newValue?.link }
    }

    // The link, the snapshot and its holder, and the unloaded relationships are read or changed
    // for every object a fetch makes or fires (or frees) — no dynamic exclusivity check either:
    // the same rule as for the values below holds for them.

    /// The link with the context (see ``ContextLink``): how the object reaches it, and where it
    /// reports its end. Held strongly; nil outside any context.
    @exclusivity(unchecked) var link: ContextLink?

    // The values, the committed values and the changed slots are changed in place on every
    // `setValue`: their storage has no dynamic exclusivity check, a runtime call per access.
    // Only Arbor's own code changes them, and none of it calls out — to hooks, observers or
    // subclasses — while it does.

    /// The values in memory: persistent and transient, as the application sees them.
    var values: PropertyStorage {
        _read { yield storedValues }
        set {
            detachCommitted()
            storedValues = newValue
        }
        _modify {
            detachCommitted()
            yield &storedValues
        }
    }
    /// The persistent values as last read from or saved to the store (nil: never saved).
    var committed: PropertyStorage? {
        get { committedIsValues ? storedValues : storedCommitted }
        set {
            committedIsValues = false
            storedCommitted = newValue
        }
        _modify {
            detachCommitted()
            yield &storedCommitted
        }
    }
    /// ``values`` as stored.
    @exclusivity(unchecked) private(set) var storedValues: PropertyStorage
    /// ``committed`` as stored, unless ``committedIsValues``.
    @exclusivity(unchecked) private var storedCommitted: PropertyStorage?
    /// Whether the committed values are the values themselves (an object filled from its row
    /// and not changed since): the object then counts one reference to their storage, not two
    /// — one count less when a fetch fills it, and one when it ends. The first change of the
    /// values gives the committed values their own reference first.
    @exclusivity(unchecked) private var committedIsValues = false
    // The flags follow one another: a class's fields are laid out in the order declared, and a
    // flag between two 8-byte fields takes 8 bytes, 7 of them padding.
    /// Whether the persistent values have not been loaded.
    var faulted = false
    var insertedFlag = false
    var deletedFlag = false
    /// How the context's current event reports the object so far (``EventMarks`` bits).
    var eventMarks: UInt8 = 0
    /// Whether the context holds it among the destinations to-one relationships handed out
    /// lately (``ManagedObjectContext/holdDestination(_:)``).
    var heldByContext = false
    /// Whether the object's row is known to be gone (a fault fired and found none, or the object
    /// names a temporary ID its context does not have): ``Inaccessibility/rowMissing``.
    var rowMissing = false
    // Two 32-bit numbers after the flags fill their word (an object's instance size, rounded up
    // to one of malloc's block sizes, decides an import's memory).
    /// The object's place in its context's inserted, updated or deleted ``ChangeList`` (-1: none).
    var changeSlot: Int32 = -1
    /// The last save (by the context's count of saves, ``ManagedObjectContext/saveCount``) whose
    /// `willSave` round included the object.
    var announcedInSave: UInt32 = 0

    /// Gives the committed values their own reference to the storage, before the values change.
    @inline(__always)
    private func detachCommitted() {
        if committedIsValues {
            storedCommitted = storedValues
            committedIsValues = false
        }
    }

    /// Replaces temporary IDs in every relationship value, each by the ID `newID` gives for it
    /// (IDs saved as permanent; `newID` is asked about temporary IDs only): in the values and the
    /// committed values, once when they are one (they stay one).
    func replaceObjectIDs(_ newID: (ManagedObjectID) -> ManagedObjectID?) {
        storedValues.replaceObjectIDs(newID)
        if !committedIsValues { storedCommitted?.replaceObjectIDs(newID) }
    }

    /// Sets the values and the committed values to `values` (held once).
    func setValuesAndCommitted(_ values: __owned PropertyStorage) {
        storedValues = consume values
        storedCommitted = nil
        committedIsValues = true
    }
    /// The persistent properties changed since the object was last saved or fetched (slots of
    /// the entity's property layout).
    @exclusivity(unchecked) var changedSlots = SlotSet()
    /// The names of the persistent properties changed since the object was last saved or fetched.
    var changedKeys: [String] { changedSlots.slots.map { entity.propertyLayout.names[$0] } }
    /// To-many relationships whose destinations have not been loaded yet.
    @exclusivity(unchecked) var unloadedRelationships: Set<String> = []
    /// The version of the row the committed values came from (0: never saved).
    var committedVersion: Int64 = 0
    /// The row-cache snapshot this object holds a reference to (released when the object goes
    /// away or turns into a fault). The snapshot knows its coordinator.
    @exclusivity(unchecked) private(set) var snapshot: RowSnapshot?
    /// The ``RowSnapshot/generation`` of ``snapshot`` whose values a fetch gave this fault
    /// (`UInt64.max`: none). While the snapshot is still at it, the fault fires without reading
    /// the snapshot again.
    @exclusivity(unchecked) var filledGeneration = UInt64.max
    /// What few objects have (``ObjectExtras``), out of line: nil for most.
    @exclusivity(unchecked) private var extras: ObjectExtras?

    /// Changes ``extras``, made when needed and dropped when empty again.
    private func changeExtras(_ change: (ObjectExtras) -> Void) {
        let box = extras ?? ObjectExtras()
        change(box)
        extras = box.isEmpty ? nil : box
    }

    /// The object's Observation registrar (``observationAccess(_:)``), made at its first read.
    var observationRegistrar: ObservationRegistrar? {
        get { extras?.observationRegistrar }
        set { changeExtras { $0.observationRegistrar = newValue } }
    }

    /// Destinations a fetch prefetched for this object (``FetchRequest/relationshipKeyPathsForPrefetching``),
    /// held until the object turns into a fault.
    var prefetchedDestinations: [ManagedObject] {
        get { extras?.prefetchedDestinations ?? [] }
        set {
            guard extras != nil || !newValue.isEmpty else { return }
            changeExtras { $0.prefetchedDestinations = newValue }
        }
    }
    /// The batch of faults a fetch returned this one in, whose rows load together when the first
    /// of them fires.
    var faultBatch: FaultBatch? {
        get { extras?.faultBatch }
        set {
            guard extras != nil || newValue != nil else { return }
            changeExtras { $0.faultBatch = newValue }
        }
    }
    /// Values a typed accessor's setter could not set (it cannot throw), by key: each fails the
    /// object's next validation, and so its save (nil: none, the usual case).
    var refusedValues: [String: ArborError]? {
        get { extras?.refusedValues }
        set {
            guard extras != nil || newValue != nil else { return }
            changeExtras { $0.refusedValues = newValue }
        }
    }

    /// The last failure of a typed property to read or write (``accessFailure``).
    var lastAccessFailure: ArborError? {
        get { extras?.accessFailure }
        set {
            guard extras != nil || newValue != nil else { return }
            changeExtras { $0.accessFailure = newValue }
        }
    }

    deinit {
        // Both used unretained: the object holds them until its fields go, just after.
        snapshotReference?._withUnsafeGuaranteedRef { $0.release() }
        if let link = link.map(Unmanaged.passUnretained) {
            link._withUnsafeGuaranteedRef { $0.objectDidEnd(objectID, ObjectIdentifier(self)) }
        }
    }

    /// ``snapshot``, unretained (for paths that use it while the object holds it).
    var snapshotReference: Unmanaged<RowSnapshot>? {
        snapshot.map { Unmanaged.passUnretained($0) }
    }

    /// Holds `snapshot` (a reference the caller counted; the one held before, if another, the
    /// caller released).
    func hold(_ snapshot: __owned RowSnapshot) {
        if self.snapshot !== snapshot {
            filledGeneration = .max
            self.snapshot = consume snapshot
        }
    }

    /// Holds the snapshot `reference` names, taking over the count the caller made for it (the
    /// object holds no other).
    func hold(retained reference: Unmanaged<RowSnapshot>) {
        filledGeneration = .max
        snapshot = reference.takeRetainedValue()
    }

    /// Releases the row-cache snapshot held, if any.
    func releaseSnapshot() {
        guard let snapshot else { return }
        snapshot.release()
        self.snapshot = nil
        filledGeneration = .max
    }

    /// Makes an object of `entity` and inserts it into `context` (when given), as Core Data's
    /// `init(entity:insertInto:)` does: attributes take their default values and
    /// ``awakeFromInsert()`` runs.
    ///
    /// - Precondition: `entity` is not abstract.
    public required init(entity: EntityDescription, insertInto context: ManagedObjectContext?) {
        precondition(!entity.isAbstract, "\(entity.name) is abstract: only its sub-entities have instances")
        self.entity = entity
        objectID = ManagedObjectID(temporaryIn: entity.temporaryIDSpace)
        storedValues = entity.initialValues
        context?.insert(self)
    }

    /// Makes an object of the entity whose class is this class (``EntityDescription/managedObjectClass``)
    /// and inserts it into `context`, as Core Data's `init(context:)`.
    ///
    /// - Precondition: the context's coordinator's model has an entity of this class.
    public convenience init(context: ManagedObjectContext) {
        guard let entity = context.persistentStoreCoordinator?.managedObjectModel.entity(for: Self.self) else {
            preconditionFailure("no entity of the context's model has the class \(Self.self): declare it with Entity(…, class: \(Self.self).self)")
        }
        self.init(entity: entity, insertInto: context)
    }

    /// Makes an object standing for an existing row, a fault until its values are loaded (the
    /// context calls it; subclasses that define initialisers must keep it).
    ///
    /// The context is an owned parameter, though the object keeps only its link: not `borrowing`.
    /// A subclass overriding this initialiser with an owned parameter is then called through the
    /// base's borrowing convention with no thunk, and releases the context once too often
    /// (Swift 6.3; found when the test suite crashed).
    public required init(fault objectID: ManagedObjectID, entity: EntityDescription, context: ManagedObjectContext) {
        self.entity = entity
        self.objectID = objectID
        storedValues = PropertyStorage(layout: entity.layoutReference.takeUnretainedValue())
        link = context.link
        faulted = true
    }

    // MARK: State

    /// In debug builds with the `Checks` trait, stops the program when the object's context may not be used on the
    /// calling thread (see ``ManagedObjectContext/isOnContextQueue``).
    @inline(__always)
    func checkQueue(_ call: StaticString = #function) {
        #if ARBOR_QUEUE_CHECKS
        managedObjectContext?.checkQueue(call)
        #endif
    }

    /// Whether the object was inserted into its context and not yet saved.
    public var isInserted: Bool { insertedFlag && !deletedFlag }
    /// Whether the object was deleted in its context and not yet saved.
    public var isDeleted: Bool { deletedFlag }
    /// Whether the object has unsaved changes to persistent properties (and is not new or
    /// deleted), or holds a value a typed property refused (see ``Managed``).
    public var isUpdated: Bool { !insertedFlag && !deletedFlag && (!changedSlots.isEmpty || refusedValues != nil) }
    /// Whether the object's persistent values have not been loaded yet.
    public var isFault: Bool { faulted }
    /// Whether the object is inserted, updated or deleted.
    public var hasChanges: Bool { insertedFlag || deletedFlag || !changedSlots.isEmpty || refusedValues != nil }

    /// Records that `key` could not be set (a typed accessor's setter, which cannot throw): the
    /// object counts as changed, and its next validation fails with `error`.
    func refuse(_ error: ArborError, forKey key: String) {
        var error = error
        if error.objectID == nil { error.objectID = objectID }
        if error.entityName == nil { error.entityName = entity.name }
        if error.key == nil { error.key = key }
        // Observers read the property again: it holds its old value, and says why.
        let change = { self.refusedValues = (self.refusedValues ?? [:]).merging([key: error]) { $1 } }
        if let slot = entity.propertyLayout.index[key] { observingChange(of: slot, change) } else { change() }
        managedObjectContext?.objectDidChange(self)
    }

    /// Forgets a refusal of `key` (set since with an accepted value), or all of them (nil: the
    /// changes were rolled back or refreshed away).
    func clearRefusals(_ key: String? = nil) {
        guard var refused = refusedValues else { return }
        if let key { refused[key] = nil } else { refused.removeAll() }
        refusedValues = refused.isEmpty ? nil : refused
        if refusedValues == nil { managedObjectContext?.objectDidChange(self, noting: false) }
    }

    /// The persistent properties changed since the last save or fetch, with their new values
    /// (nil for a property set to nil): relationships as objects.
    public func changedValues() -> [String: Any?] {
        checkQueue()
        var result: [String: Any?] = [:]
        for key in changedKeys { result[key] = presentable(values[key] ?? .none, key: key) }
        return result
    }

    /// The last committed values of `keys` (all persistent properties when nil): what the store
    /// held when the object was last fetched or saved. Empty for an object never saved.
    public func committedValues(forKeys keys: [String]?) -> [String: Any?] {
        checkQueue()
        guard let committed else { return [:] }
        var result: [String: Any?] = [:]
        for key in keys ?? Array(committed.keys) {
            guard let value = committed[key] else { continue }
            result[key] = presentable(value, key: key)
        }
        return result
    }

    /// The object a to-one relationship's `id` names, held for as long as this object holds the
    /// ID (nil when it is gone or this object left its context).
    func destination(_ id: ManagedObjectID) -> ManagedObject? {
        guard let context = managedObjectContext, let destination = context.resolve(id) else { return nil }
        context.holdDestination(destination)
        return destination
    }

    /// A stored value as the application sees it.
    func presentable(_ value: PropertyValue, key: String) -> Any? {
        switch value {
        case .none:
            return nil
        case .attribute(let stored):
            return entity.attributesByName[key]?.type.swiftValue(of: stored) ?? stored.anyValue
        case .object(let id):
            return destination(id)
        case .objects(let ids):
            let objects = managedObjectContext?.resolveDestinations(ids) ?? []
            if entity.relationshipsByName[key]?.isOrdered == true { return objects }
            return Set(objects)
        }
    }

    // MARK: Lifecycle hooks

    /// Called once, when the object is first inserted into a context. Set initial values here.
    open func awakeFromInsert() {}
    /// Called when the object's values are loaded from the store (a fault fired, or a fetch).
    open func awakeFromFetch() {}
    /// Called at the start of a save, for each object being inserted, updated or deleted.
    open func willSave() {}
    /// Called after a successful save, for each object that was saved.
    open func didSave() {}
    /// Called when the object is deleted, before its delete rules are applied.
    open func prepareForDeletion() {}
    /// Called before the object turns into a fault (refresh without merging, reset).
    open func willTurnIntoFault() {}
    /// Called after the object turned into a fault.
    open func didTurnIntoFault() {}

    // MARK: Validation at save (in the class body, so that subclasses can override it)

    /// Validates the object for insertion at save: every property. Override to add checks; call
    /// `super`. Several failures come back as one ``ArborError/Code/validationMultipleErrors``.
    open func validateForInsert() throws {
        if let error = ArborError.gathering(Validation.propertyErrors(of: self)) { throw error }
    }

    /// Validates the object for update at save: every property. Override to add checks; call
    /// `super`.
    open func validateForUpdate() throws {
        if let error = ArborError.gathering(Validation.propertyErrors(of: self)) { throw error }
    }

    /// Validates the object for deletion at save: no relationship with the deny rule may still
    /// point at an object. Override to add checks; call `super`.
    open func validateForDelete() throws {
        if let error = ArborError.gathering(Validation.denyErrors(of: self)) { throw error }
    }

    // MARK: Identity

    public static func == (a: ManagedObject, b: ManagedObject) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// The hash of the object's address, mixed with `seed` without a `Hasher` (a
    /// multiply–xor-shift mix, as ``ManagedObjectID`` does: sets of objects are built for every
    /// save and notification, and addresses are not attacker-chosen). Depends on the identity
    /// alone, as ``hash(into:)`` does.
    public func _rawHashValue(seed: Int) -> Int {
        mixedHash(UInt64(UInt(bitPattern: Unmanaged.passUnretained(self).toOpaque())), seed: seed)
    }

    open var description: String {
        let state = faulted ? "fault" : (isInserted ? "inserted" : isDeleted ? "deleted" : isUpdated ? "updated" : "saved")
        return "<\(entity.name) \(objectID.isTemporaryID ? "(temporary)" : objectID.description) \(state)>"
    }
}

/// The fields of a ``ManagedObject`` that few objects use — prefetched destinations, a fault
/// batch, refused values, an Observation registrar — kept in a box of their own, made when the
/// first is set: four fields less in every object.
final class ObjectExtras {
    var prefetchedDestinations: [ManagedObject] = []
    var faultBatch: FaultBatch?
    var refusedValues: [String: ArborError]?
    var observationRegistrar: ObservationRegistrar?
    var accessFailure: ArborError?

    /// Whether the box holds nothing (and can go).
    var isEmpty: Bool {
        prefetchedDestinations.isEmpty && faultBatch == nil && refusedValues == nil && observationRegistrar == nil && accessFailure == nil
    }
}
