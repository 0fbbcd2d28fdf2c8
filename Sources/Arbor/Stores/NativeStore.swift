import Foundation
import OrderedCollections

/// Arbor's store: rows in an ArborStore database (DESIGN §3 "Store mapping"; layout in
/// docs/object-graph.md, "The native store").
///
/// - one tree per entity hierarchy, `rows.<Root>`, keyed by the 64-bit primary key; a row holds
///   the entity, the version number, the persistent attributes, the to-one foreign keys and the
///   order of ordered to-many relationships; primary keys come from the tree's sequence;
/// - `fk.<Entity>.<relationship>`: for each to-one relationship whose inverse is an unordered
///   to-many, the pairs (foreign key, primary key), so the to-many side is a range scan;
/// - `join.<Entity>.<relationship>`: for each unordered many-to-many relationship, its pairs;
/// - `unique.<Root>.<keys>`: each uniqueness constraint's values → the primary key holding them;
/// - `arbor.metadata`: the store's identifier, the model's entity version hashes, its description
///   and schema, and the row layout (`rows`; see `RowColumns`).
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
    let rowLayout: RowColumns.RowLayout
    /// Each entity's stored columns, in row order (``RowColumns``), made once.
    let rowColumns: [ObjectIdentifier: RowColumns]
    /// Each entity's indexes, single-key uniqueness trees and foreign-key trees (the fetch
    /// planner's candidates), made once.
    let accessPaths: [ObjectIdentifier: [StoreIndex]]
    /// The object-ID space of each entity of the model in this store, by entity name (made once:
    /// an ID made for a row then costs no interning).
    private let idSpaces: [String: ObjectIDSpace]
    /// The same, by entity.
    private let entitySpaces: [ObjectIdentifier: ObjectIDSpace]

    /// Opens (creating when missing) the store at `path` for `model`.
    ///
    /// - Throws: ``ArborError/Code/incompatibleModel`` when the store was made with another model;
    ///   ``ArborError/Code/storeOpen`` when the engine cannot open the file.
    public convenience init(path: String, model: ManagedObjectModel, configuration: String? = nil,
                            options: DatabaseOptions = DatabaseOptions()) throws {
        try self.init(path: path, type: "native", model: model, configuration: configuration, options: options)
    }

    /// An in-memory store: the same engine over memory; nothing survives the process.
    public static func inMemory(model: ManagedObjectModel, configuration: String? = nil) throws -> NativeStore {
        var options = DatabaseOptions()
        options.fileSystem = MemoryFileSystem()
        options.lockTable = LockTable()
        return try NativeStore(path: "/memory.arbor", type: "memory", model: model, configuration: configuration, options: options)
    }

    /// - Parameter newRowLayout: the row layout of a store this call makes (tests make stores of
    ///   layout 1, as earlier builds did: their metadata then records no layout).
    init(path: String, type: String, model: ManagedObjectModel, configuration: String?, options: DatabaseOptions,
         newRowLayout: RowColumns.RowLayout = .fixedFirst) throws {
        self.type = type
        self.path = type == "memory" ? nil : path
        configurationName = configuration
        self.model = model
        accessPaths = Dictionary(uniqueKeysWithValues: model.entities.map { (ObjectIdentifier($0), Self.accessPaths(of: $0)) })
        let database: Database
        do {
            database = try Database(path: path, options: options)
        } catch let error as StoreError {
            throw ArborError(.storeOpen, "the store at \(path) could not be opened: \(error.message)", storeError: error)
        }
        self.database = database
        // An existing store is checked in a read transaction; only a new one is written to
        // (checked again under the write lock, in case another connection made it meanwhile).
        let (identifier, rowLayout) = try Self.storeError("open the store at \(path)", code: .storeOpen) {
            if let recorded = try database.read({ try Self.recordedIdentifier($0, model: model, path: path) }) { return recorded }
            return try database.write { transaction -> (UUID, RowColumns.RowLayout) in
                if let recorded = try Self.recordedIdentifier(transaction, model: model, path: path) { return recorded }
                let metadata = try transaction.tree(named: "arbor.metadata", create: true)!
                let uuid = UUID()
                try metadata.put(Array("uuid".utf8), withUnsafeBytes(of: uuid.uuid) { Array($0) })
                if newRowLayout != .declared { try metadata.put(Array("rows".utf8), [newRowLayout.rawValue]) }
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                var hashes = Dictionary(uniqueKeysWithValues: model.entities.map { ($0.name, $0.versionHashString) })
                // Builds before row layout 2 read only these hashes: an entry no model can have
                // makes them refuse the store (an entity only in the store) instead of reading
                // its rows in the wrong order.
                if newRowLayout != .declared { hashes[Self.rowLayoutHashKey] = String(format: "%02x", newRowLayout.rawValue) }
                try metadata.put(Array("hashes".utf8), Array(try encoder.encode(hashes)))
                try metadata.put(Array("model".utf8), Array(model.description.utf8))
                try metadata.put(Array("schema".utf8), try Self.schemaBytes(model))
                for root in model.entities where root.superentity == nil {
                    _ = try transaction.tree(named: Self.rowsTree(root), create: true)
                }
                return (uuid, newRowLayout)
            }
        }
        self.identifier = identifier
        self.rowLayout = rowLayout
        rowColumns = Dictionary(uniqueKeysWithValues: model.entities.map { (ObjectIdentifier($0), RowColumns($0, layout: rowLayout)) })
        let store = identifier
        let spaces = model.entities.map { (entity: $0, space: ObjectIDSpace.interned($0.name, store)) }
        idSpaces = Dictionary(spaces.map { ($0.entity.name, $0.space) }, uniquingKeysWith: { first, _ in first })
        entitySpaces = Dictionary(uniqueKeysWithValues: spaces.map { (ObjectIdentifier($0.entity), $0.space) })
        if !options.readOnly {
            try buildMissingIndexes()
            try recordMissingSchema()
        }
    }

    /// The model's schema as stored (``ModelSchema``): sorted-key JSON.
    static func schemaBytes(_ model: ManagedObjectModel) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(ModelSchema(model)))
    }

    /// Records the model's schema in a store made before stores kept it.
    func recordMissingSchema() throws {
        let present = try Self.storeError("open the store at \(path ?? "memory")", code: .storeOpen) {
            try database.read { try $0.tree(named: "arbor.metadata")?.get(Array("schema".utf8)) != nil }
        }
        guard !present else { return }
        try Self.storeError("record the schema of \(path ?? "memory")", code: .storeOpen) {
            try database.write { transaction in
                try transaction.tree(named: "arbor.metadata", create: true)!.put(Array("schema".utf8), try Self.schemaBytes(model))
            }
        }
    }

    /// Builds the index trees the model declares and the file lacks (a store written before
    /// Arbor kept indexes); a read-only store is planned without them instead.
    func buildMissingIndexes() throws {
        let wanted = model.entities.flatMap { entity in Self.indexes(of: entity).map { (entity, $0) } }
        guard !wanted.isEmpty else { return }
        let existing = try Self.storeError("open the store at \(path ?? "memory")", code: .storeOpen) {
            try database.read { transaction in Set(try transaction.trees().map(\.name)) }
        }
        let missing = Set(wanted.map(\.1.tree)).subtracting(existing)
        guard !missing.isEmpty else { return }
        try Self.storeError("build the indexes \(missing.sorted().joined(separator: ", "))", code: .storeOpen) {
            try database.write { transaction in
                for name in missing { _ = try transaction.tree(named: name, create: true) }
                for root in model.entities where root.superentity == nil {
                    guard let rows = try transaction.tree(named: Self.rowsTree(root)) else { continue }
                    var entries: [(String, [UInt8])] = []
                    try rows.forEach { key, value in
                        let primaryKey = try Self.lastKey(of: key, in: rows.name)
                        let row = try decode(Array(value), objectID: objectID(root.name, primaryKey))
                        guard let entity = model.entity(named: row.entityName) else { return true }
                        for index in Self.indexes(of: entity) where missing.contains(index.tree) {
                            entries.append((index.tree, try indexEntry(row, index, key: primaryKey)))
                        }
                        return true
                    }
                    for (tree, entry) in entries { try transaction.tree(named: tree, create: true)!.put(entry, []) }
                }
            }
        }
    }

    /// The identifier and row layout recorded in an Arbor store, after checking its model is
    /// `model`'s; nil for a new (empty) database. A store without a recorded layout was made
    /// before layout 2, in the model's order.
    ///
    /// - Throws: ``ArborError/Code/incompatibleModel``; ``ArborError/Code/storeOpen`` for a
    ///   database of something else (trees but no Arbor metadata), damaged metadata, or a row
    ///   layout this build does not know.
    static func recordedIdentifier(_ transaction: ReadTransaction, model: ManagedObjectModel, path: String) throws -> (UUID, RowColumns.RowLayout)? {
        guard let metadata = try transaction.tree(named: "arbor.metadata") else {
            let trees = try transaction.trees()
            guard trees.isEmpty else {
                throw ArborError(.storeOpen, "\(path) is a database but not an Arbor store: it has \(trees.count) trees and no arbor.metadata")
            }
            return nil
        }
        guard let stored = try metadata.get(Array("uuid".utf8)), stored.count == 16,
              let hashBytes = try metadata.get(Array("hashes".utf8)),
              let recorded = try? JSONDecoder().decode([String: String].self, from: Data(hashBytes)) else {
            throw ArborError(.storeOpen, "the Arbor metadata of \(path) is damaged: its identifier or model hashes are missing or unreadable")
        }
        var entityHashes = recorded
        entityHashes[rowLayoutHashKey] = nil
        try model.checkCompatible(withStoreHashes: entityHashes.compactMapValues { bytes(fromHex: $0) }, storeName: path)
        var layout = RowColumns.RowLayout.declared
        if let recordedLayout = try metadata.get(Array("rows".utf8)) {
            guard recordedLayout.count == 1, let known = RowColumns.RowLayout(rawValue: recordedLayout[0]) else {
                throw ArborError(.storeOpen, "\(path) stores its rows in layout \(recordedLayout.map(String.init).joined(separator: " ")), which this build of Arbor does not know (it reads layouts 1 and 2)")
            }
            layout = known
        }
        return (UUID(uuid: stored.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }), layout)
    }

    /// The entry of a layout-2 store's recorded hashes that names its row layout (a name no
    /// model's entity is expected to have: one named so could not be stored).
    static let rowLayoutHashKey = "(row layout)"

    static func bytes(fromHex hex: String) -> Data? {
        var data = Data()
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) ?? hex.endIndex
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            data.append(byte)
            index = next
        }
        return data
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

    /// A row's bytes: the entity name, the version, each persistent attribute (in the entity's
    /// order), each to-one foreign key, each ordered to-many relationship's keys.
    func encode(_ row: StoreRow, entity: EntityDescription, permanent: (ManagedObjectID) -> ManagedObjectID = { $0 }) throws -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        KeyEncoding.append(.string(row.entityName), to: &bytes)
        KeyEncoding.append(.int(row.version), to: &bytes)
        // The entity's stored columns, in the order the decoder follows (RowColumns). Rows Arbor
        // made are in the entity's layout: values by slot, no lookups by name.
        let columns = columns(of: entity)
        let sameLayout = row.values.layout === entity.propertyLayout
        func value(_ slot: Int) -> PropertyValue? {
            sameLayout ? row.values[slot: slot] : row.values[entity.propertyLayout.names[slot]]
        }
        for slot in columns.attributeSlots {
            if case .attribute(let stored)? = value(slot) {
                KeyEncoding.append(Self.component(stored), to: &bytes)
            } else {
                KeyEncoding.append(.null, to: &bytes)
            }
        }
        // A destination with sub-entities also records which entity the object is (`named`).
        for (slot, named) in columns.toOneSlots {
            if case .object(let id)? = value(slot) {
                if named { KeyEncoding.append(.string(id.entityName), to: &bytes) }
                KeyEncoding.append(.int(try primaryKey(of: permanent(id))), to: &bytes)
            } else {
                if named { KeyEncoding.append(.null, to: &bytes) }
                KeyEncoding.append(.null, to: &bytes)
            }
        }
        return bytes
    }

    func decode(_ bytes: [UInt8], objectID: ManagedObjectID) throws -> StoreRow {
        try bytes.withUnsafeBytes { try decode($0, objectID: objectID) }
    }

    /// The stored columns of `entity`'s rows (made once per entity of the model).
    func columns(of entity: EntityDescription) -> RowColumns {
        rowColumns[ObjectIdentifier(entity)] ?? RowColumns(entity, layout: rowLayout)
    }

    /// The scan filter's layout of `entity`'s rows, from its stored columns.
    func rawRowLayout(_ entity: EntityDescription) -> RawRowLayout {
        RawRowLayout(entity, columns: columns(of: entity))
    }

    /// The row stored under `objectID`'s primary key in `tree` (its hierarchy's rows tree), read
    /// in place and decoded; nil when there is none. The row may be of another entity of the
    /// hierarchy: callers that need the ID's own entity check it.
    func readRow(_ objectID: ManagedObjectID, in tree: Tree) throws -> StoreRow? {
        try KeyEncoding.withEncodedInteger(try primaryKey(of: objectID)) { key in
            try tree.withValue(forKey: key) { try decode($0, objectID: objectID) }
        }
    }

    /// Decodes a row in place (straight out of its page), component by component into the
    /// slots of its entity's layout. `entity`, when given, is the row's entity as the caller
    /// already read it (the name is then skipped, not decoded again), and `columns` that entity's
    /// stored columns when the caller has them at hand.
    func decode(_ bytes: UnsafeRawBufferPointer, objectID: ManagedObjectID, entity known: EntityDescription? = nil, columns knownColumns: RowColumns? = nil) throws -> StoreRow {
        if let known {
            if let knownColumns { return try decode(bytes, objectID: objectID, entity: known, columns: knownColumns) }
            guard let columns = rowColumns[ObjectIdentifier(known)] else {
                throw ArborError(.store, "the row of \(objectID) is malformed: its entity \(known.name) is not in the store's model", objectID: objectID)
            }
            return try decode(bytes, objectID: objectID, entity: known, columns: columns)
        }
        var reader = KeyReader(bytes)
        let first: KeyComponent?
        do {
            first = try reader.next()
        } catch let error as StoreError {
            throw ArborError(.store, "the row of \(objectID) is malformed: \(error.message)", objectID: objectID)
        }
        guard case .string(let name)? = first else {
            throw ArborError(.store, "the row of \(objectID) is malformed: no entity and version", objectID: objectID)
        }
        guard let entity = model.entity(named: name) else {
            throw ArborError(.store, "the row of \(objectID) is malformed: its entity \(name) is not in the model", objectID: objectID)
        }
        guard let columns = rowColumns[ObjectIdentifier(entity)] else {
            throw ArborError(.store, "the row of \(objectID) is malformed: its entity \(name) is not in the store's model", objectID: objectID)
        }
        return try decode(bytes, objectID: objectID, entity: entity, columns: columns)
    }

    /// Decodes a row of `entity` (whose stored columns are `columns`) in place. The entity and
    /// the columns are borrowed from the caller: nothing per row counts references to them.
    func decode(_ bytes: UnsafeRawBufferPointer, objectID: ManagedObjectID, entity: EntityDescription, columns: RowColumns,
                reading mask: UnsafeBufferPointer<Bool>? = nil) throws -> StoreRow {
        func corrupt(_ why: String) -> ArborError {
            ArborError(.store, "the row of \(objectID) is malformed: \(why)", objectID: objectID)
        }
        var reader = KeyReader(bytes)
        do {
            // The entity's name (the caller told the entity) is skipped, not decoded.
            try reader.skip()
            guard case .int(let version)? = try reader.next() else { throw corrupt("no entity and version") }
            // Versions start at 1, and a save adds one: the largest leaves room for that.
            guard version > 0, version < Int64.max else { throw corrupt("its version \(version) is out of range") }
            // Layouts are never freed: held unretained.
            let layoutReference = entity.layoutReference
            var slots = layoutReference._withUnsafeGuaranteedRef { $0.makeSlots() }
            for step in columns.stepBuffer {
                if let mask, !mask[step.slot] {
                    // A column the caller does not read: stepped over, nothing decoded.
                    try reader.skip()
                    if step.kind == nil && step.named { try reader.skip() }
                    continue
                }
                if let kind = step.kind {
                    guard let component = try reader.next() else { throw corrupt("too few values") }
                    slots[step.slot] = Self.attributeValue(component, kind: kind).map(PropertyValue.attribute) ?? PropertyValue.none
                    continue
                }
                var destinationName = columns.destinations[step.destination]
                if step.named {
                    guard let component = try reader.next() else { throw corrupt("too few values") }
                    if case .string(let name) = component {
                        // A name read from the file: only the model's entities make IDs.
                        guard isModelEntity(name) else { throw corrupt("a relationship names \(name), which is not an entity of the model") }
                        destinationName = name
                    }
                }
                guard let component = try reader.next() else { throw corrupt("too few values") }
                if case .int(let key) = component {
                    guard Self.isPrimaryKey(key) else { throw corrupt("a relationship holds \(key), which is not a primary key") }
                    slots[step.slot] = .object(self.objectID(destinationName, key))
                } else {
                    slots[step.slot] = PropertyValue.none
                }
            }
            return layoutReference._withUnsafeGuaranteedRef {
                StoreRow(entityName: entity.name, version: version, values: PropertyStorage(layout: $0, slots: slots))
            }
        } catch let error as StoreError {
            throw corrupt(error.message)
        }
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

    /// A to-many relationship's destinations, from the inverse's foreign-key, join or order tree.
    public func relatedObjectIDs(of objectID: ManagedObjectID, relationship: RelationshipDescription) throws -> [ManagedObjectID] {
        let key = try primaryKey(of: objectID)
        guard let inverse = relationship.inverseRelationship, let destination = relationship.destinationEntity else { return [] }
        return try Self.storeError("read \(objectID).\(relationship.name)") {
            try database.read { transaction in
                let treeName: String
                if Self.isJoined(relationship) {
                    treeName = Self.joinTree(relationship)
                } else if Self.isIndexedForeignKey(inverse) {
                    treeName = Self.foreignKeyTree(inverse)
                } else {
                    // Ordered: the order is kept in the owner's order tree.
                    treeName = Self.orderTree(relationship)
                }
                guard let tree = try transaction.tree(named: treeName) else { return [] }
                let prefix = Self.key(key)
                let rows = try transaction.tree(named: Self.rowsTree(destination))
                var keys: [Int64] = []
                try tree.forEach(from: prefix) { entryKey, _ in
                    guard entryKey.starts(with: prefix) else { return false }
                    keys.append(try Self.lastKey(of: entryKey, in: treeName))
                    return true
                }
                // Sub-entity rows: name each destination with its own entity.
                guard !destination.subentities.isEmpty, let rows else { return keys.map { self.objectID(destination.name, $0) } }
                return try keys.map { other in
                    let id = self.objectID(destination.name, other)
                    guard let bytes = try rows.get(Self.key(other)) else { return id }
                    return self.objectID(try decode(bytes, objectID: id).entityName, other)
                }
            }
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
            return try database.write { transaction in
                guard let tree = try transaction.tree(named: Self.rowsTree(entity), create: true) else { return [] }
                return try tree.nextSequence(reserving: count).map { try Self.primaryKey(fromSequence: $0, of: tree) }
            }
        }
    }

    /// The object whose row holds `row`'s values of the uniqueness constraint `constraint` of
    /// `row`'s entity (nil: none, or values that cannot be held: a relationship to a new object).
    public func objectID(holding constraint: [String], of row: StoreRow) throws -> ManagedObjectID? {
        let entity = try entity(row.entityName)
        guard let value = try? uniqueKey(row, constraint) else { return nil }
        return try Self.storeError("look up the holder of \(entity.rootEntity.name)(\(constraint.joined(separator: ", ")))") {
            try database.read { transaction -> ManagedObjectID? in
                guard let holder = try transaction.tree(named: Self.uniqueTree(entity, constraint))?.get(value),
                      let key = holder.withUnsafeBytes({ KeyEncoding.integer(exactly: $0) }), Self.isPrimaryKey(key) else { return nil }
                // The holder's own entity (a sub-entity's row names it first).
                let name = try transaction.tree(named: Self.rowsTree(entity))?.get(Self.key(key))
                    .flatMap { bytes in bytes.withUnsafeBytes { Self.entityName(ofRow: $0) } }
                return objectID(name ?? entity.rootEntity.name, key)
            }
        }
    }

    /// Writes one save's changes in one engine write transaction: rows, indexes, links,
    /// constraints; primary keys for rows that come with temporary IDs are allocated in it.
    public func save(_ changes: StoreChanges) throws -> StoreSaveResult {
        guard !changes.isEmpty else { return StoreSaveResult(insertedIDs: []) }
        // An ArborError (a conflict, a constraint) thrown inside the transaction rolls it back.
        return try Self.storeError("save to \(path ?? "memory")", code: .storeSave) {
            try database.write { transaction in
                let writer = RowWriter(store: self, transaction: transaction, changes: changes)
                try writer.allocateKeys()
                try writer.apply()
                return StoreSaveResult(insertedIDs: writer.insertedIDs, rebasedVersions: writer.rebasedVersions)
            }
        }
    }

}
