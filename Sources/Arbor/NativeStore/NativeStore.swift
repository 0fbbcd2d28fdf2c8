import Foundation
import OrderedCollections
import Synchronization

// Safety: Row and entry bytes (`decode`, `entityName(ofRow:hierarchy:)`, `lastKey(of:in:)`) are
// lent by the engine for the call and not kept; a projection mask is the caller's, valid during the
// call.

/// Arbor's store: rows in an ArborStore database (the layout:
/// docs/object-graph-internals.md, "The native store's trees").
///
/// - one tree per entity hierarchy, `rows.<Root>`, keyed by the 64-bit primary key; a row holds
///   the entity, the version number, the persistent attributes, the to-one foreign keys and the
///   order of ordered to-many relationships; primary keys come from the tree's sequence;
/// - `fk.<Entity>.<relationship>`: for each to-one relationship whose inverse is an unordered
///   to-many, the pairs (foreign key, primary key), so the to-many side is a range scan;
/// - `join.<Entity>.<relationship>`: for each unordered many-to-many relationship, its pairs;
/// - `unique.<Root>.<keys>`: each uniqueness constraint's values → the primary key holding them;
/// - `arbor.metadata`: the store's identifier, the model's entity version hashes, its description
///   and schema, and the row layout and column order (`rows`, `columns.<Entity>`; see `RowFormat`).
///
/// Every save is one engine write transaction. The in-memory store is this class over a
/// `MemoryFileSystem` (ArborStore's in-memory file system).
public final class NativeStore: PersistentStore, @unchecked Sendable {
    /// The store's identifier, kept in its metadata tree.
    public let identifier: UUID
    /// `"native"`, or `"memory"` for the in-memory store.
    public let type: String
    /// The store's file (nil for the in-memory store).
    public let path: String?
    /// The configuration whose entities the store holds (nil: all).
    public let configurationName: String?
    let database: Database
    let model: ManagedObjectModel
    /// The order of the columns in this store's rows (recorded in its metadata).
    let rowLayout: RowFormat.Layout
    /// How the store writes primary keys in its trees' keys.
    let keyForm: KeyForm
    /// Each entity's row format in this store (``RowFormat``), made once.
    let rowFormats: [ObjectIdentifier: RowFormat]
    /// A layout-3 store's recorded entity list (`entities`): a row of a hierarchy with
    /// sub-entities, and a to-one into one, name their entity by its place here. Empty in
    /// layouts 1 and 2.
    let recordedEntities: [String]
    /// The places of ``recordedEntities``, by name.
    private let recordedEntityIndex: [String: Int]
    /// Each entity's indexes, single-key uniqueness trees and foreign-key trees (the fetch
    /// planner's candidates), made once.
    let accessPaths: [ObjectIdentifier: [StoreIndex]]
    /// The object-ID space of each entity of the model in this store, by entity name (made once:
    /// an ID made for a row then costs no interning).
    private let idSpaces: [String: ObjectIDSpace]
    /// The same, by entity.
    private let entitySpaces: [ObjectIdentifier: ObjectIDSpace]
    /// What the migration that ran when this store opened did (nil: the store was at the
    /// model already, or new).
    public private(set) var migration: MigrationReport?
    /// Whether the store records persistent history (docs/history.md): every save and batch
    /// request writes its transaction and changes with it.
    public let tracksHistory: Bool
    /// Whether the store was opened by Arbor itself with history suspended (a migration's
    /// working copy, a verification's copy): its writes are not held to the tracking flag.
    let historySuspended: Bool
    /// What the store knows of the commits to its file (``RemoteWatch``).
    let remoteWatch = Mutex(RemoteWatch())

    /// Opens (creating when missing) the store at `path` for `model`.
    ///
    /// - Throws: ``ArborError/Code/incompatibleModel`` when the store was made with another model
    ///   and cannot be migrated to this one (naming why);
    ///   ``ArborError/Code/storeOpen`` when the engine cannot open the file.
    /// A store made with another model migrates to `model` when `migration` allows it and the
    /// changes can be inferred (docs/migration.md); ``migration`` then says what was done.
    /// `history` says whether the store records persistent history (docs/history.md; off by
    /// default, as in Core Data).
    public convenience init(path: String, model: ManagedObjectModel, configuration: String? = nil,
                            options: DatabaseOptions = DatabaseOptions(), migration: MigrationOptions = MigrationOptions(),
                            history: PersistentHistoryTracking = .off) throws {
        try self.init(path: path, type: "native", model: model, configuration: configuration, options: options, migration: migration, history: history)
    }

    /// An in-memory store: the same engine over memory; nothing survives the process.
    public static func inMemory(model: ManagedObjectModel, configuration: String? = nil, history: PersistentHistoryTracking = .off) throws -> NativeStore {
        var options = DatabaseOptions()
        options.fileSystem = MemoryFileSystem()
        options.lockTable = LockTable()
        return try NativeStore(path: "/memory.arbor", type: "memory", model: model, configuration: configuration, options: options, history: history)
    }

    /// - Parameter newRowLayout: the row layout of a store this call makes (tests make stores of
    ///   layout 1, as earlier builds did: their metadata then records no layout). Nil: layout 3
    ///   (records, docs/row-format.md), or the layout the environment variable
    ///   `ARBOR_NEW_ROW_LAYOUT` names (`2` for fixed-size columns first; `make test` runs the
    ///   object-graph tests a second time over layout-2 stores that way).
    /// - Parameter suspendsHistory: the store is opened by Arbor itself (a migration's working
    ///   copy, a verification's copy): a store that records history opens and records nothing.
    init(path: String, type: String, model: ManagedObjectModel, configuration: String?, options: DatabaseOptions,
         newRowLayout requestedLayout: RowFormat.Layout? = nil, migration migrationOptions: MigrationOptions = MigrationOptions(),
         history: PersistentHistoryTracking = .off, suspendsHistory: Bool = false) throws {
        let opened = ContinuousClock.now
        // A plan's stages run first, except a single lightweight one, which the ordinary open
        // below runs.
        let (migrationOptions, staged) = try Self.runStagesFirst(migrationOptions, path: path, type: type, model: model,
                                                                 configuration: configuration, options: options)
        let newRowLayout = requestedLayout ?? ProcessInfo.processInfo.environment["ARBOR_NEW_ROW_LAYOUT"]
            .flatMap { UInt8($0) }.flatMap(RowFormat.Layout.init(rawValue:)) ?? .records
        self.type = type
        self.path = type == "memory" ? nil : path
        configurationName = configuration
        self.model = model
        accessPaths = Dictionary(uniqueKeysWithValues: model.entities.map { (ObjectIdentifier($0), Self.accessPaths(of: $0)) })
        let database = try Self.openDatabase(path: path, options: options)
        self.database = database
        // An existing store is checked in a read transaction; only a new one is written to
        // (checked again under the write lock, in case another connection made it meanwhile).
        let migrating = options.readOnly ? MigrationOptions.never : migrationOptions
        let recorded = try Self.storeError("open the store at \(path)", code: .storeOpen) {
            if let recorded = try database.read({ try Self.recordedIdentifier($0, model: model, path: path, migration: migrating) }) { return recorded }
            return try database.write { transaction -> Recorded in
                if let recorded = try Self.recordedIdentifier(transaction, model: model, path: path, migration: migrating) { return recorded }
                return try Self.recordNewStore(in: transaction, model: model, layout: newRowLayout,
                                               tracksHistory: history == .on && !suspendsHistory)
            }
        }
        identifier = recorded.identifier
        historySuspended = suspendsHistory
        tracksHistory = try Self.settleHistoryTracking(history, recorded: recorded.tracksHistory, suspended: suspendsHistory, database: database,
                                                       path: path, readOnly: options.readOnly)
        rowLayout = recorded.layout
        keyForm = recorded.keyForm
        recordedEntities = recorded.entities
        recordedEntityIndex = Dictionary(recorded.entities.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        let (formats, unrecorded) = try Self.rowFormats(of: model, recorded: recorded, entityIndex: recordedEntityIndex, path: path)
        rowFormats = formats
        let store = identifier
        let spaces = model.entities.map { (entity: $0, space: ObjectIDSpace.interned($0.name, store)) }
        idSpaces = Dictionary(spaces.map { ($0.entity.name, $0.space) }, uniquingKeysWith: { first, _ in first })
        entitySpaces = Dictionary(uniqueKeysWithValues: spaces.map { (ObjectIdentifier($0.entity), $0.space) })
        if let plan = recorded.migration {
            migration = try migrate(plan, started: opened)
        } else {
            migration = staged
        }
        if !options.readOnly {
            try buildMissingIndexes()
            if recorded.schema == nil { try recordMissingSchema() }
            if !recorded.hasHistory { try recordMissingHistory() }
            try recordColumns(unrecorded)
        }
        try startWatching()
    }

    /// The engine database at `path`, its failure to open a typed ``ArborError/Code/storeOpen``.
    static func openDatabase(path: String, options: DatabaseOptions) throws -> Database {
        do {
            return try Database(path: path, options: options)
        } catch let error as StoreError {
            throw ArborError(.storeOpen, "the store at \(path) could not be opened: \(error.message)", storeError: error)
        }
    }

    /// The place of entity `name` in a layout-3 store's entity list (nil: none there).
    func entityIndex(of name: String) -> Int64? { recordedEntityIndex[name].map(Int64.init) }

    /// The entity at `index` of a layout-3 store's entity list (nil: none there).
    func entityName(atIndex index: Int64) -> String? {
        guard index >= 0, index < recordedEntities.count else { return nil }
        let name = recordedEntities[Int(index)]
        return isModelEntity(name) ? name : nil
    }

    /// The entity of a row of `root`'s hierarchy (nil when its bytes do not say one).
    func entityName(ofRow row: UnsafeRawBufferPointer, hierarchy root: EntityDescription) -> String? {
        guard rowLayout == .records else { return RowFormat.entityName(of: row) }
        guard !root.rootEntity.subentities.isEmpty else { return root.rootEntity.name }
        var position = 0
        return RecordEncoding.readVarint(row, &position).flatMap { Int64(exactly: $0) }.flatMap(entityName(atIndex:))
    }

    /// Runs `body`, turning engine errors into ``ArborError``s.
    static func storeError<R>(_ what: @autoclosure () -> String, code: ArborError.Code = .store, _ body: () throws -> R) throws -> R {
        do {
            return try body()
        } catch let error as StoreError {
            throw ArborError(code, "could not \(what()): \(error.message)", storeError: error)
        }
    }

    func objectID(_ entityName: String, _ primaryKey: Int64) -> ManagedObjectID {
        if let space = idSpaces[entityName] { return ManagedObjectID(space: space, key: primaryKey) }
        return ManagedObjectID(entityName: entityName, store: identifier, key: primaryKey)
    }

    /// Whether `name` is an entity of the store's model.
    func isModelEntity(_ name: String) -> Bool { idSpaces[name] != nil }

    /// The IDs of rows `primaryKeys` of `entity` in this store (its space found once).
    func objectIDs(_ entity: EntityDescription, _ primaryKeys: [Int64]) -> [ManagedObjectID] {
        guard let space = entitySpaces[ObjectIdentifier(entity)] else { return primaryKeys.map { objectID(entity.name, $0) } }
        return primaryKeys.map { ManagedObjectID(space: space, key: $0) }
    }

    /// The ID of row `primaryKey` of `entity` in this store (its space found by the entity's
    /// identity: no string is hashed).
    func objectID(_ entity: EntityDescription, _ primaryKey: Int64) -> ManagedObjectID {
        if let space = entitySpaces[ObjectIdentifier(entity)] { return ManagedObjectID(space: space, key: primaryKey) }
        return objectID(entity.name, primaryKey)
    }

    /// The ID of row `primaryKey` of `entityName` in this store.
    public func objectID(entityName: String, primaryKey: Int64) -> ManagedObjectID {
        objectID(entityName, primaryKey)
    }

    func primaryKey(of id: ManagedObjectID) throws -> Int64 {
        guard let key = id.primaryKey, id.storeIdentifier == identifier else {
            throw ArborError(.invalidObjectID, "\(id) does not belong to the store \(identifier)", objectID: id)
        }
        return key
    }

    func entity(_ name: String) throws -> EntityDescription {
        guard let entity = model.entity(named: name) else {
            throw ArborError(.invalidObjectID, "the model has no entity \(name)", entity: name)
        }
        return entity
    }

    // MARK: Row encoding

    /// A row's bytes in `entity`'s format (``RowFormat/encode(_:primaryKey:)``); `permanent`
    /// gives a new destination's permanent ID.
    func encode(_ row: StoreRow, entity: EntityDescription, permanent: (ManagedObjectID) -> ManagedObjectID = { $0 }) throws -> [UInt8] {
        try format(of: entity).encode(row, primaryKey: { try primaryKey(of: permanent($0)) }, entityIndex: entityIndex(of:))
    }

    func decode(_ bytes: [UInt8], objectID: ManagedObjectID) throws -> StoreRow {
        try bytes.withUnsafeBytes { try decode($0, objectID: objectID) }
    }

    /// The format of `entity`'s rows in this store (made once per entity of the store's model).
    func format(of entity: EntityDescription) -> RowFormat {
        // Every entity of the model has one; another model's entity is read in the derived order.
        rowFormats[ObjectIdentifier(entity)] ?? RowFormat(entity, layout: rowLayout)
    }

    /// The row stored under `objectID`'s primary key in `tree` (its hierarchy's rows tree), read
    /// in place and decoded; nil when there is none. The row may be of another entity of the
    /// hierarchy: callers that need the ID's own entity check it.
    func readRow(_ objectID: ManagedObjectID, in tree: Tree) throws -> StoreRow? {
        try withKey(try primaryKey(of: objectID)) { key in
            try tree.withValue(forKey: key) { try decode($0, objectID: objectID) }
        }
    }

    /// Decodes a row in place (straight out of its page) in its entity's format. `entity`, when
    /// given, is the row's entity as the caller already read it (the name is then not decoded),
    /// and `format` that entity's format when the caller has it at hand.
    func decode(_ bytes: UnsafeRawBufferPointer, objectID: ManagedObjectID, entity known: EntityDescription? = nil, format knownFormat: RowFormat? = nil,
                reading mask: UnsafeBufferPointer<Bool>? = nil) throws -> StoreRow {
        if let knownFormat { return try knownFormat.decode(bytes, objectID: objectID, store: self, reading: mask) }
        let entity: EntityDescription
        if let known {
            entity = known
        } else {
            guard let name = entityName(ofRow: bytes, hierarchy: try self.entity(objectID.entityName)) else {
                throw ArborError(.store, "the row of \(objectID) is malformed: no entity and version", objectID: objectID)
            }
            guard let named = model.entity(named: name) else {
                throw ArborError(.store, "the row of \(objectID) is malformed: its entity \(name) is not in the model", objectID: objectID)
            }
            entity = named
        }
        guard let format = rowFormats[ObjectIdentifier(entity)] else {
            throw ArborError(.store, "the row of \(objectID) is malformed: its entity \(entity.name) is not in the store's model", objectID: objectID)
        }
        return try format.decode(bytes, objectID: objectID, store: self, reading: mask)
    }

    static func component(_ value: AttributeValue?) -> KeyComponent {
        switch value {
        case .none: .null
        case .integer(let v): .int(v)
        case .decimal(let v): .string(v.description)
        case .double(let v): .double(v)
        case .float(let v): .double(Double(v))
        case .string(let v): .string(v)
        case .boolean(let v): .bool(v)
        case .date(let v): .date(v)
        case .data(let v): .data(Array(v))
        case .uuid(let v): .uuid(v)
        case .uri(let v): .string(v.absoluteString)
        case .transformable(let v): .data(Array(v))
        }
    }

    /// The value of an attribute of `kind` that `component` stores; nil for nil, or for a
    /// component of another kind.
    static func attributeValue(_ component: KeyComponent, kind: AttributeType.Kind) -> AttributeValue? {
        switch (kind, component) {
        case (_, .null): nil
        case (.integer16, .int(let v)), (.integer32, .int(let v)), (.integer64, .int(let v)): .integer(v)
        case (.decimal, .string(let v)): Decimal(string: v).map(AttributeValue.decimal)
        case (.double, .double(let v)): .double(v)
        case (.float, .double(let v)): .float(Float(v))
        case (.string, .string(let v)): .string(v)
        case (.boolean, .bool(let v)): .boolean(v)
        case (.date, .date(let v)): .date(v)
        case (.binaryData, .data(let v)): .data(Data(v))
        case (.uuid, .uuid(let v)): .uuid(v)
        case (.uri, .string(let v)): URL(string: v).map(AttributeValue.uri)
        case (.transformable, .data(let v)): .transformable(Data(v))
        default: nil
        }
    }

    /// The key of a row's values for a uniqueness constraint (nil when any value is nil: nils
    /// never collide, as in SQL).
    func uniqueKey(_ row: StoreRow, _ keys: [String], permanent: (ManagedObjectID) -> ManagedObjectID = { $0 }) throws -> [UInt8]? {
        var components: [KeyComponent] = []
        for key in keys {
            if let value = row.attribute(key) {
                components.append(Self.component(value))
            } else if let id = row.destination(key) {
                components.append(.int(try primaryKey(of: permanent(id))))
            } else {
                return nil
            }
        }
        return KeyEncoding.encode(components)
    }

    // MARK: PersistentStore

    /// The row of `objectID` in its hierarchy's tree, or nil.
    public func row(for objectID: ManagedObjectID) throws -> StoreRow? {
        // An ID of another store is refused before anything is read.
        _ = try primaryKey(of: objectID)
        let entity = try entity(objectID.entityName)
        return try Self.storeError("read \(objectID)") {
            try database.read { transaction in
                guard let tree = try transaction.tree(named: Self.rowsTree(entity)),
                      let row = try readRow(objectID, in: tree) else { return nil }
                // A row of another entity of the hierarchy is not this object (an ID names its
                // object's own entity: one row, one ID, one instance per context).
                guard row.entityName == entity.name else { return nil }
                return row
            }
        }
    }

    /// The objects of `ids` that have no row of their own entity in the store, read in one
    /// transaction in key order (a batch insert's destinations).
    func missingRows(_ ids: [ManagedObjectID]) throws -> [ManagedObjectID] {
        try Self.storeError("read the rows of \(ids.count) objects") {
            try database.read { transaction in try missingRows(ids, in: transaction) }
        }
    }

    /// ``missingRows(_:)`` in `transaction`.
    func missingRows(_ ids: [ManagedObjectID], in transaction: ReadTransaction) throws -> [ManagedObjectID] {
        var missing: [ManagedObjectID] = []
        var trees: [ObjectIdentifier: Tree?] = [:]
        // IDs come in runs of one entity: the hierarchy and tree found for the last one's name
        // serve the next (equal names share their storage: the comparison rarely reads them).
        var last: (name: String, root: EntityDescription, tree: Tree?)?
        let keys = ids.map { $0.primaryKey ?? 0 }
        // In key order (a leaf read once for its rows), whatever their entities.
        for position in ids.indices.sorted(by: { keys[$0] < keys[$1] }) {
            let id = ids[position]
            if last?.name != id.entityName {
                let root = try entity(id.entityName).rootEntity
                if trees[ObjectIdentifier(root)] == nil { trees[ObjectIdentifier(root)] = try transaction.tree(named: Self.rowsTree(root)) }
                last = (id.entityName, root, trees[ObjectIdentifier(root)] ?? nil)
            }
            guard let root = last?.root, let tree = last?.tree,
                  let name = try withKey(try primaryKey(of: id), { key in try tree.withValue(forKey: key) { entityName(ofRow: $0, hierarchy: root) } }),
                  name == id.entityName else {
                missing.append(id)
                continue
            }
        }
        return missing
    }

    /// A to-many relationship's destinations, from the inverse's foreign-key, join or order tree.
    public func relatedObjectIDs(of objectID: ManagedObjectID, relationship: RelationshipDescription) throws -> [ManagedObjectID] {
        try Self.storeError("read \(objectID).\(relationship.name)") {
            try database.read { transaction in try relatedObjectIDs(of: objectID, relationship: relationship, in: transaction) }
        }
    }

    /// The destinations of the to-many `relationship` of several objects, in one read: the
    /// owners taken in key order (neighbouring ranges of the relationship's tree read together),
    /// the answers given back in `objectIDs`' order. A delete's rules and a prefetch load a
    /// relationship of many objects at once with it.
    public func relatedObjectIDs(ofEach objectIDs: [ManagedObjectID], relationship: RelationshipDescription) throws -> [[ManagedObjectID]] {
        try Self.storeError("read \(relationship.entity?.name ?? "?").\(relationship.name) of \(objectIDs.count) objects") {
            try database.read { transaction in
                guard let trees = try relationshipTrees(relationship, in: transaction) else { return objectIDs.map { _ in [] } }
                var result = [[ManagedObjectID]](repeating: [], count: objectIDs.count)
                let keys = try objectIDs.map { try primaryKey(of: $0) }
                for position in keys.indices.sorted(by: { keys[$0] < keys[$1] }) {
                    result[position] = try relatedObjectIDs(ofKey: keys[position], relationship: relationship, trees: trees)
                }
                return result
            }
        }
    }

    /// ``relatedObjectIDs(of:relationship:)`` in a transaction of the caller's.
    func relatedObjectIDs(of objectID: ManagedObjectID, relationship: RelationshipDescription, in transaction: ReadTransaction) throws -> [ManagedObjectID] {
        let key = try primaryKey(of: objectID)
        guard let trees = try relationshipTrees(relationship, in: transaction) else { return [] }
        return try relatedObjectIDs(ofKey: key, relationship: relationship, trees: trees)
    }

    /// The trees a to-many relationship's destinations are read from: the one keyed by the
    /// owner (the inverse's foreign-key tree, the join tree of a many-to-many, or the owner's
    /// order tree for an ordered one) and the destination's rows. Nil when the relationship has
    /// no inverse or destination, or its tree does not exist yet (no destination saved).
    func relationshipTrees(_ relationship: RelationshipDescription, in transaction: ReadTransaction) throws -> (keyed: Tree, rows: Tree?)? {
        guard let inverse = relationship.inverseRelationship, let destination = relationship.destinationEntity else { return nil }
        let treeName: String
        if Self.isJoined(relationship) {
            treeName = Self.joinTree(relationship)
        } else if Self.isIndexedForeignKey(inverse) {
            treeName = Self.foreignKeyTree(inverse)
        } else {
            // Ordered: the order is kept in the owner's order tree.
            treeName = Self.orderTree(relationship)
        }
        guard let tree = try transaction.tree(named: treeName) else { return nil }
        return (tree, try transaction.tree(named: Self.rowsTree(destination)))
    }

    /// The destinations of the object with primary key `key`, from ``relationshipTrees(_:in:)``.
    func relatedObjectIDs(ofKey key: Int64, relationship: RelationshipDescription,
                          trees: (keyed: Tree, rows: Tree?)) throws -> [ManagedObjectID] {
        guard let destination = relationship.destinationEntity else { return [] }
        let (tree, rows) = trees
        let prefix = self.key(key)
        var keys: [Int64] = []
        try tree.forEach(from: prefix) { entryKey, _ in
            guard entryKey.starts(with: prefix) else { return false }
            keys.append(try Self.lastKey(of: entryKey, in: tree.name))
            return true
        }
        // Sub-entity rows: name each destination with its own entity. (The destination's ID
        // space is found by the entity's identity, not by hashing its name per ID.)
        guard !destination.subentities.isEmpty, let rows else { return objectIDs(destination, keys) }
        return try keys.map { other in
            let id = self.objectID(destination, other)
            guard let bytes = try rows.get(self.key(other)) else { return id }
            return self.objectID(try decode(bytes, objectID: id).entityName, other)
        }
    }

    /// The primary key ending an entry key of a foreign-key, join or order tree.
    ///
    /// - Throws: ``ArborError/Code/store`` for an entry that is not such a key (a damaged tree).
    static func lastKey(of entryKey: UnsafeRawBufferPointer, in tree: String) throws -> Int64 {
        // Read in place: the components before it are skipped, not decoded.
        guard let key = KeyEncoding.lastInteger(entryKey), isPrimaryKey(key) else {
            throw ArborError(.store, "the tree \(tree) holds a malformed entry (its key does not end with a primary key)")
        }
        return key
    }

    /// A primary key from a rows tree's sequence (an unsigned counter in the catalog), refused
    /// past `Int64.max` — only a damaged or hostile catalog gets there.
    static func primaryKey(fromSequence value: UInt64, of tree: Tree) throws -> Int64 {
        guard let key = Int64(exactly: value) else {
            throw StoreError(.corrupt, "the sequence of \(tree.name) is at \(value), past the largest primary key: the catalog is damaged")
        }
        return key
    }

    /// Whether `key`, read from the file, can be a primary key: keys are allocated from 1 up
    /// (anything else, from a damaged or hostile file, would pass for a temporary ID).
    @inline(__always)
    static func isPrimaryKey(_ key: Int64) -> Bool { key > 0 }

    static func orderTree(_ relationship: RelationshipDescription) -> String {
        "order.\(relationship.entity?.name ?? "?").\(relationship.name)"
    }

    /// Reserves `count` primary keys from the hierarchy tree's sequence (one write transaction).
    public func allocatePrimaryKeys(for entity: EntityDescription, count: Int) throws -> [Int64] {
        try Self.storeError("allocate primary keys for \(entity.name)") {
            guard count > 0 else { return [] }
            return try ownWrite { transaction in
                guard let tree = try transaction.tree(named: Self.rowsTree(entity), create: true) else { return [] }
                return try tree.nextSequence(reserving: count).map { try Self.primaryKey(fromSequence: $0, of: tree) }
            }
        }
    }

    /// Writes one save's changes in one engine write transaction: rows, indexes, links,
    /// constraints; primary keys for rows that come with temporary IDs are allocated in it.
    public func save(_ changes: StoreChanges) throws -> StoreSaveResult {
        try save(changes, beforeCommit: { _ in })
    }

    /// Writes one save's changes in one engine write transaction, then calls `beforeCommit` in
    /// it: the transaction commits when `beforeCommit` returns, and rolls back when it throws.
    /// A conflict of either kind rolls the transaction back before `beforeCommit` is called,
    /// and the error lists every conflict of its kind the write met (docs/object-graph-internals.md,
    /// "Conflicts in one pass").
    public func save(_ changes: StoreChanges, beforeCommit: (StoreSaveResult) throws -> Void) throws -> StoreSaveResult {
        guard !changes.isEmpty else {
            let result = StoreSaveResult(insertedIDs: [])
            try beforeCommit(result)
            return result
        }
        // An error thrown inside the transaction (a conflict, or the caller's) rolls it back.
        return try Self.storeError("save to \(path ?? "memory")", code: .storeSave) {
            try ownWrite { transaction in
                if !changes.requiredRows.isEmpty, let gone = try missingRows(Array(changes.requiredRows.keys), in: transaction).first {
                    let key = changes.requiredRows[gone] ?? ""
                    throw ArborError(.misuse, "a new row's \(key) names \(gone), which the store does not hold", key: key, objectID: gone)
                }
                let writer = RowWriter(store: self, transaction: transaction, changes: changes, history: historyWriter(transaction, changes.origin))
                try writer.allocateKeys()
                try writer.apply()
                try writer.finishHistory()
                let result = StoreSaveResult(insertedIDs: writer.insertedIDs, rebasedVersions: writer.rebasedVersions)
                try beforeCommit(result)
                return result
            }
        }
    }

}
