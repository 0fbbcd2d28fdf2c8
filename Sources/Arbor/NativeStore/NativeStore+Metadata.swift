import ArborStore
import Foundation

/// Every key of a native store's `arbor.metadata` tree (docs/object-graph-internals.md, "The
/// native store's trees"): the one list of what the tree may hold, so that no file spells a key
/// of its own. Values are described where they are read and written.
enum MetadataKey {
    /// The store's identifier: its UUID's 16 bytes.
    static let identifier = Array("uuid".utf8)
    /// The row layout (``RowFormat/Layout``'s raw value; absent: the declared layout).
    static let rowLayout = Array("rows".utf8)
    /// The entity version hashes (JSON, hexadecimal by entity name), with the markers of what
    /// older builds must not open (``NativeStore/entityHashes(_:)``).
    static let hashes = Array("hashes".utf8)
    /// The model's description, for people reading the file.
    static let modelDescription = Array("model".utf8)
    /// The model's schema (``ModelSchema``, JSON).
    static let schema = Array("schema".utf8)
    /// The entity list with each entity's column order and fills (JSON).
    static let entities = Array("entities".utf8)
    /// The key form (``KeyForm``; absent: standard).
    static let keyForm = Array("keys".utf8)
    /// The fingerprint of the value rules the objects were checked against.
    static let rules = Array("rules".utf8)
    /// Present (value 1) in a store that records persistent history.
    static let historyTracking = Array("tracking".utf8)
    /// The number of the last history transaction deleted (8 bytes, big-endian; absent: none).
    static let historyTrimmed = Array("historyTrimmed".utf8)
    /// The model history (``StoreModelVersion``s, JSON).
    static let modelHistory = Array("history".utf8)
}

/// What a native store records about itself in `arbor.metadata` (docs/object-graph-internals.md, "The
/// native store's trees"; docs/migration.md): reading and checking it when the store opens — identifier,
/// model hashes, row layout, column orders, fills, the entity list, the rules' fingerprint — and
/// recording what an older store lacks.
extension NativeStore {
    /// The name of the tree that holds a native store's metadata; only this file names it.
    private static let metadataTreeName = "arbor.metadata"

    /// The metadata tree in `transaction` (nil: the file records none, as an empty one).
    static func metadata(in transaction: ReadTransaction) throws -> Tree? {
        try transaction.tree(named: metadataTreeName)
    }

    /// The metadata tree in `transaction`, which a store that is being written must have.
    ///
    /// - Throws: ``ArborError/Code/store`` when the file records none.
    static func requiredMetadata(in transaction: ReadTransaction) throws -> Tree {
        guard let tree = try metadata(in: transaction) else {
            throw ArborError(.store, "the store file records no \(metadataTreeName) tree: it is not an Arbor store, or it is damaged")
        }
        return tree
    }

    /// The metadata tree in `transaction`, made when missing.
    static func metadata(creatingIn transaction: WriteTransaction) throws -> Tree {
        guard let tree = try transaction.tree(named: metadataTreeName, create: true) else {
            throw ArborError(.storeSave, "the store's \(metadataTreeName) tree could not be made")
        }
        return tree
    }
}

extension NativeStore {
    /// The entity version hashes (hexadecimal, by entity name) in a store's recorded `hashes`:
    /// the row-layout and fills markers left out.
    static func entityHashes(_ recorded: [String: String]) -> [String: String] {
        var hashes = recorded
        hashes[rowLayoutHashKey] = nil
        hashes[fillsHashKey] = nil
        hashes[keyFormHashKey] = nil
        hashes[trackingHashKey] = nil
        return hashes
    }

    /// The entity version hashes a store's metadata records (``entityHashes(_:)``); nil when
    /// it records none or they are unreadable.
    static func recordedEntityHashes(_ metadata: Tree) throws -> [String: String]? {
        guard let bytes = try metadata.get(MetadataKey.hashes),
              let recorded = try? JSONDecoder().decode([String: String].self, from: Data(bytes)) else { return nil }
        return entityHashes(recorded)
    }

    /// What an Arbor store records about itself (`arbor.metadata`).
    struct Recorded {
        var identifier: UUID
        var layout: RowFormat.Layout
        /// The column order of each entity's rows, by entity name (stores made before it was
        /// recorded have none).
        var columns: [String: [String]]
        /// The schema of the model that made the store (``ModelSchema`` as JSON), when recorded.
        var schema: [UInt8]?
        /// A layout-3 store's entity list (empty for the others).
        var entities: [String]
        /// Whether the store records its model history (stores made before it do not).
        var hasHistory: Bool
        /// Layout 3: the fills of columns migrations appended, by entity and property.
        var fills: [String: [String: AttributeValue]]
        /// The migration to run before the store is used (its recorded state is then the one
        /// the migration leaves).
        var migration: StoreMigration?
        /// How the store writes primary keys in its trees' keys (`keys`; standard when absent).
        var keyForm: KeyForm = .standard
        /// Whether the store records persistent history (`tracking`).
        var tracksHistory = false
    }

    /// Makes a new store's metadata and rows trees in `transaction`: its identifier, its row
    /// `layout` and key form, the model's hashes, description, schema and history, its rules'
    /// fingerprint, each entity's column order and the entity list; `tracksHistory`: it records
    /// persistent history. Returns what the store now records.
    static func recordNewStore(in transaction: WriteTransaction, model: ManagedObjectModel, layout: RowFormat.Layout,
                               tracksHistory: Bool) throws -> Recorded {
        let metadata = try NativeStore.metadata(creatingIn: transaction)
        let uuid = UUID()
        try metadata.put(MetadataKey.identifier, withUnsafeBytes(of: uuid.uuid) { Array($0) })
        if layout != .declared { try metadata.put(MetadataKey.rowLayout, [layout.rawValue]) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var hashes = Dictionary(uniqueKeysWithValues: model.entities.map { ($0.name, $0.versionHashString) })
        // Builds before row layout 2 read only these hashes: an entry no model can have
        // makes them refuse the store (an entity only in the store) instead of reading
        // its rows in the wrong order.
        if layout != .declared { hashes[Self.rowLayoutHashKey] = String(format: "%02x", layout.rawValue) }
        // Stores of records write their keys compactly (stores of layouts 1 and 2, made
        // only by tests now, keep the standard form older builds wrote with them).
        let keyForm: KeyForm = layout == .records ? .compact : .standard
        if keyForm == .compact {
            try metadata.put(Self.keyFormKey, [keyForm.rawValue])
            hashes[Self.keyFormHashKey] = String(format: "%02x", keyForm.rawValue)
        }
        if tracksHistory {
            try metadata.put(Self.trackingKey, [1])
            hashes[Self.trackingHashKey] = "01"
        }
        try metadata.put(MetadataKey.hashes, Array(try encoder.encode(hashes)))
        try metadata.put(MetadataKey.modelDescription, Array(model.description.utf8))
        let schema = try Self.schemaBytes(model)
        try metadata.put(MetadataKey.schema, schema)
        try metadata.put(Self.historyKey, try Self.historyBytes([StoreModelVersion(first: model, recorded: Date(), synthesized: false)]))
        let rules = Self.rulesFingerprint(model)
        if !rules.isEmpty { try metadata.put(Self.rulesKey, rules) }
        var columns: [String: [String]] = [:]
        // Stores of layout 1 are made only by tests, as builds before layout 2 made
        // them: with no column order recorded.
        if layout != .declared {
            for entity in model.entities {
                columns[entity.name] = RowFormat.derivedColumnNames(entity, layout: layout)
                try metadata.put(Self.columnsKey(entity.name), Array(try encoder.encode(columns[entity.name])))
            }
        }
        var entities: [String] = []
        if layout == .records {
            entities = model.entities.map(\.name)
            try metadata.put(MetadataKey.entities, Array(try encoder.encode(entities)))
        }
        for root in model.entities where root.superentity == nil {
            _ = try transaction.tree(named: Self.rowsTree(root), create: true)
        }
        return Recorded(identifier: uuid, layout: layout, columns: columns, schema: schema, entities: entities, hasHistory: true,
                        fills: [:], migration: nil, keyForm: keyForm, tracksHistory: tracksHistory)
    }

    /// The row format of each of `model`'s entities, as the store records them: each entity's
    /// column order as recorded; else as the layout derives it from the model that made the
    /// store (its recorded schema: the application's model may list the properties in another
    /// order); else from this model. Also returns the orders that were not recorded, to be
    /// recorded now. (The schema is decoded only for a store that lacks a recorded order.)
    static func rowFormats(of model: ManagedObjectModel, recorded: Recorded, entityIndex recordedEntityIndex: [String: Int],
                           path: String) throws -> (formats: [ObjectIdentifier: RowFormat], unrecorded: [String: [String]]) {
        let recordsEveryOrder = model.entities.allSatisfy { recorded.columns[$0.name] != nil }
        let writer = recordsEveryOrder ? nil : recorded.schema.flatMap { try? JSONDecoder().decode(ModelSchema.self, from: Data($0)).model() }
        var formats: [ObjectIdentifier: RowFormat] = [:]
        var unrecorded: [String: [String]] = [:]
        for entity in model.entities {
            var entityIndex = 0
            if recorded.layout == .records {
                guard let index = recordedEntityIndex[entity.name] else {
                    throw ArborError(.storeOpen, "the Arbor metadata of \(path) is damaged: its entity list does not name \(entity.name)")
                }
                entityIndex = index
            }
            let order = recorded.columns[entity.name] ?? {
                let derivedFrom = writer?.entity(named: entity.name) ?? entity
                let derived = RowFormat.derivedColumnNames(derivedFrom, layout: recorded.layout)
                unrecorded[entity.name] = derived
                return derived
            }()
            formats[ObjectIdentifier(entity)] = try RowFormat.recorded(entity, layout: recorded.layout, order: order, entityIndex: entityIndex,
                                                                       fills: recorded.fills[entity.name] ?? [:], store: recorded.identifier)
        }
        return (formats, unrecorded)
    }

    /// The metadata key of the store's key form (``KeyForm``; absent: standard).
    static let keyFormKey = MetadataKey.keyForm

    /// The entry of the recorded hashes of a store whose keys are compact: builds that read only
    /// standard keys refuse it (an entity only in the store) instead of misreading its trees.
    static let keyFormHashKey = "(key form)"

    /// A store's recorded key form.
    ///
    /// - Throws: ``ArborError/Code/storeOpen`` for a form this build does not know.
    static func recordedKeyForm(_ metadata: Tree, path: String) throws -> KeyForm {
        guard let recorded = try metadata.get(keyFormKey) else { return .standard }
        guard recorded.count == 1, let form = KeyForm(rawValue: recorded[0]) else {
            throw ArborError(.storeOpen, "\(path) writes its keys in form \(recorded.map(String.init).joined(separator: " ")), which this build of Arbor does not know (it reads forms 1 and 2)")
        }
        return form
    }

    /// The metadata key of an entity's recorded column order.
    static func columnsKey(_ entity: String) -> [UInt8] { Array("columns.\(entity)".utf8) }

    /// Records the column order of entities whose store did not record it (stores made before
    /// it was recorded), in one transaction: the order this store reads them in.
    func recordColumns(_ orders: [String: [String]]) throws {
        guard !orders.isEmpty else { return }
        try Self.storeError("record the column order of \(path ?? "memory")", code: .storeOpen) {
            try database.write { transaction in
                let metadata = try NativeStore.metadata(creatingIn: transaction)
                for (entity, order) in orders where try metadata.get(Self.columnsKey(entity)) == nil {
                    try metadata.put(Self.columnsKey(entity), Array(try JSONEncoder().encode(order)))
                }
            }
        }
    }

    /// The metadata key of the fingerprint of the value rules the store's objects were checked
    /// against (``rulesFingerprint(_:)``).
    static let rulesKey = MetadataKey.rules

    /// A fingerprint of `model`'s value rules (minimum, maximum, length, pattern of every
    /// attribute), which entity version hashes leave out as Core Data's do: a store records the
    /// fingerprint of the rules its values were checked against, and one opened with other rules
    /// checks its values again (docs/migration.md). Empty when the model has no such rules.
    static func rulesFingerprint(_ model: ManagedObjectModel) -> [UInt8] {
        // Not the default values: a model may compute one as it is built (`Date()`), and a
        // store must not take each launch's for a change of its rules.
        let lines = model.entities.flatMap { entity in
            entity.ownAttributes.compactMap { attribute in Validation.rulesDescription(attribute).map { "\(entity.name).\(attribute.name) \($0)" } }
        }
        return lines.isEmpty ? [] : Array(VersionHash.of(lines.sorted().joined(separator: "\n")))
    }

    /// The model's schema as stored (``ModelSchema``): sorted-key JSON.
    static func schemaBytes(_ model: ManagedObjectModel) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(ModelSchema(model)))
    }

    /// Records the model's schema in a store made before stores kept it (its recorded metadata
    /// showed none; this model is the store's: its hashes were checked).
    func recordMissingSchema() throws {
        try Self.storeError("record the schema of \(path ?? "memory")", code: .storeOpen) {
            try database.write { transaction in
                try NativeStore.metadata(creatingIn: transaction).put(MetadataKey.schema, try Self.schemaBytes(model))
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
            try database.write { transaction in try buildDerivedTrees(missing, in: transaction) }
        }
    }

    /// The identifier and row layout recorded in an Arbor store, after checking its model is
    /// `model`'s; nil for a new (empty) database. A store without a recorded layout was made
    /// before layout 2, in the model's order.
    ///
    /// - Throws: ``ArborError/Code/incompatibleModel``; ``ArborError/Code/storeOpen`` for a
    ///   database of something else (trees but no Arbor metadata), damaged metadata, or a row
    ///   layout this build does not know.
    static func recordedIdentifier(_ transaction: ReadTransaction, model: ManagedObjectModel, path: String,
                                   migration options: MigrationOptions = .never) throws -> Recorded? {
        // Long: what opening finds, decided in order (not an Arbor store, damaged, a model to
        // migrate from, a change of rules only, as recorded), each branch making its `Recorded`
        // from the same metadata reads.
        guard let metadata = try NativeStore.metadata(in: transaction) else {
            let trees = try transaction.trees()
            guard trees.isEmpty else {
                throw ArborError(.storeOpen, "\(path) is a database but not an Arbor store: it has \(trees.count) trees and no arbor.metadata")
            }
            return nil
        }
        guard let stored = try metadata.get(MetadataKey.identifier), stored.count == 16,
              let hashBytes = try metadata.get(MetadataKey.hashes),
              let recorded = try? JSONDecoder().decode([String: String].self, from: Data(hashBytes)) else {
            throw ArborError(.storeOpen, "the Arbor metadata of \(path) is damaged: its identifier or model hashes are missing or unreadable")
        }
        let entityHashes = entityHashes(recorded)
        let storeHashes = entityHashes.compactMapValues { bytes(fromHex: $0) }
        if storeHashes != model.entityVersionHashes {
            // A model the store was at before a migration: refused as older, the file untouched.
            let recordedHistory = try recordedHistory(metadata, path: path)
            let history = recordedHistory ?? []
            if let earlier = history.dropLast().last(where: { $0.isVersion(of: model) }), let newest = history.last {
                let when = { (version: StoreModelVersion) in version.recorded.map { ", recorded \(ISO8601Date.string(from: $0))" } ?? "" }
                throw ArborError(.incompatibleModel,
                                 "\(path) was migrated to a newer model (version \(newest.version) of its history\(when(newest))); "
                                    + "this model is its version \(earlier.version)\(when(earlier)). An older model never opens a newer store")
            }
            // The store's model, to name each difference (an unreadable schema names entities only).
            let schema = try metadata.get(MetadataKey.schema).flatMap { try? JSONDecoder().decode(ModelSchema.self, from: Data($0)) }
            if options.plan?.version(withEntityHashes: entityHashes) == nil {
                try refuseUnrelated(model, storeEntities: Set(entityHashes.keys).union(schema?.entities.map(\.name) ?? [])
                                        .union(history.flatMap { $0.schema?.entities.map(\.name) ?? [] }), path: path)
            }
            guard options.shouldMigrateStoreAutomatically, options.shouldInferMappingModelAutomatically, let schema else {
                let why = !options.shouldMigrateStoreAutomatically ? "automatic migration is off (MigrationOptions; a read-only store never migrates)"
                    : !options.shouldInferMappingModelAutomatically ? "inferring the migration is off and no migration plan is given"
                    : "it was made before stores kept their model, so it cannot be migrated: open it once with the model that made it"
                try model.checkCompatible(withStoreHashes: storeHashes, storeSchema: schema, storeName: path, unless: why)
                return nil
            }
            let layout = try recordedLayout(metadata, path: path)
            var plan = try StoreMigration.plan(metadata: metadata, path: path, layout: layout, schema: schema, hashBytes: hashBytes,
                                               history: recordedHistory, to: model)
            plan.invalidObjects = options.invalidObjects
            plan.allowedDrops = options.drops
            return Recorded(identifier: UUID(uuid: stored.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }), layout: .records,
                            columns: plan.columns, schema: try schemaBytes(model), entities: plan.entities, hasHistory: true,
                            fills: plan.fills, migration: plan, keyForm: try recordedKeyForm(metadata, path: path), tracksHistory: try metadata.get(trackingKey) != nil)
        }
        let layout = try recordedLayout(metadata, path: path)
        // The same model with other value rules: a check of the values that meet changed rules,
        // recorded as no new version (the hashes are the same).
        if options.shouldMigrateStoreAutomatically, layout == .records, (try metadata.get(rulesKey) ?? []) != rulesFingerprint(model),
           let schema = try metadata.get(MetadataKey.schema).flatMap({ try? JSONDecoder().decode(ModelSchema.self, from: Data($0)) }) {
            var plan = try StoreMigration.plan(metadata: metadata, path: path, layout: layout, schema: schema, hashBytes: hashBytes,
                                               history: try recordedHistory(metadata, path: path), to: model, rulesOnly: true)
            plan.invalidObjects = options.invalidObjects
            plan.rulesOnly = true
            return Recorded(identifier: UUID(uuid: stored.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }), layout: .records,
                            columns: plan.columns, schema: try schemaBytes(model), entities: plan.entities, hasHistory: true,
                            fills: plan.fills, migration: plan, keyForm: try recordedKeyForm(metadata, path: path), tracksHistory: try metadata.get(trackingKey) != nil)
        }
        var columns: [String: [String]] = [:]
        var fills: [String: [String: AttributeValue]] = [:]
        for entity in model.entities {
            if let order = try recordedColumns(metadata, entity: entity.name, path: path) { columns[entity.name] = order }
            if layout == .records {
                let entityFills = try recordedFills(metadata, entity: entity, path: path)
                if !entityFills.isEmpty { fills[entity.name] = entityFills }
            }
        }
        var entities: [String] = []
        if layout == .records {
            guard let bytes = try metadata.get(MetadataKey.entities), let list = try? JSONDecoder().decode([String].self, from: Data(bytes)) else {
                throw ArborError(.storeOpen, "the Arbor metadata of \(path) is damaged: its entity list is missing or unreadable")
            }
            entities = list
        }
        return Recorded(identifier: UUID(uuid: stored.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }), layout: layout,
                        columns: columns, schema: try metadata.get(MetadataKey.schema), entities: entities,
                        hasHistory: try metadata.get(historyKey) != nil, fills: fills, migration: nil,
                        keyForm: try recordedKeyForm(metadata, path: path), tracksHistory: try metadata.get(trackingKey) != nil)
    }

    /// Refuses a store that holds another model's data, whatever the migration options: none of
    /// `model`'s entities (by name or renaming identifier) is one the store has had
    /// (`storeEntities`, every version of its history). Migrating would drop everything, and the
    /// store is more likely another program's (two programs with the same container name share a
    /// file in the default directory) than a model that kept nothing.
    ///
    /// A migration plan that names the store's model is exempt: it says the store is the
    /// application's own.
    ///
    /// - Throws: ``ArborError/Code/incompatibleModel``.
    static func refuseUnrelated(_ model: ManagedObjectModel, storeEntities: Set<String>, path: String) throws {
        let names = Set(model.entities.flatMap { [$0.name] + ($0.renamingIdentifier.map { [$0] } ?? []) })
        guard !storeEntities.isEmpty, names.isDisjoint(with: storeEntities) else { return }
        throw ArborError(.incompatibleModel,
                         "\(path) holds the data of another model: none of its entities (\(storeEntities.sorted().joined(separator: ", "))) "
                            + "is in this model (\(model.entities.map(\.name).sorted().joined(separator: ", "))), so it is not opened and "
                            + "nothing in it was changed. Check the store's location: two programs that use the same container name "
                            + "share one file in the default directory")
    }

    /// A store's recorded row layout (layout 1 when it records none).
    ///
    /// - Throws: ``ArborError/Code/storeOpen`` for a layout this build does not know.
    static func recordedLayout(_ metadata: Tree, path: String) throws -> RowFormat.Layout {
        guard let recordedLayout = try metadata.get(MetadataKey.rowLayout) else { return .declared }
        guard recordedLayout.count == 1, let known = RowFormat.Layout(rawValue: recordedLayout[0]) else {
            throw ArborError(.storeOpen, "\(path) stores its rows in layout \(recordedLayout.map(String.init).joined(separator: " ")), which this build of Arbor does not know (it reads layouts 1, 2 and 3)")
        }
        return known
    }

    /// The column order a store records for `entity` (nil: none recorded).
    ///
    /// - Throws: ``ArborError/Code/storeOpen`` when it is unreadable.
    static func recordedColumns(_ metadata: Tree, entity: String, path: String) throws -> [String]? {
        guard let bytes = try metadata.get(columnsKey(entity)) else { return nil }
        guard let order = try? JSONDecoder().decode([String].self, from: Data(bytes)) else {
            throw ArborError(.storeOpen, "the Arbor metadata of \(path) is damaged: the column order of \(entity) is unreadable")
        }
        return order
    }

    /// The metadata key of an entity's fills (layout 3: the values of columns a migration
    /// appended, for rows written before).
    static func fillsKey(_ entity: String) -> [UInt8] { Array("fills.\(entity)".utf8) }

    /// An entity's recorded fills: JSON, property name → the column as a record stores it (its
    /// serial type's varint, then its payload), in hexadecimal.
    ///
    /// - Throws: ``ArborError/Code/storeOpen`` when they are unreadable or do not fit the entity.
    static func recordedFills(_ metadata: Tree, entity: EntityDescription, path: String) throws -> [String: AttributeValue] {
        guard let stored = try metadata.get(fillsKey(entity.name)) else { return [:] }
        let damaged = ArborError(.storeOpen, "the Arbor metadata of \(path) is damaged: the fills of \(entity.name) are unreadable")
        guard let encoded = try? JSONDecoder().decode([String: String].self, from: Data(stored)) else { throw damaged }
        var fills: [String: AttributeValue] = [:]
        for (name, hex) in encoded {
            guard let attribute = entity.attributesByName[name],
                  let value = RowFormat.attributeValue(ofColumnText: hex, kind: attribute.type.kind) else { throw damaged }
            fills[name] = value
        }
        return fills
    }

    /// For each entity of the store at `path` (by name), what the store records of its own
    /// attributes besides what ``ManagedObjectModel/stored(in:options:)`` makes of them: their
    /// validation rules in words, their default values and their fills. Only attributes with
    /// any of these are listed. A default is what the model gave new objects when the store
    /// last recorded its schema (made, migrated, or opened with changed rules); a fill is the default an attribute was added with, kept for
    /// the rows written before, and does not follow later changes of the default. Read-only,
    /// without the application's model: what `arbor model` prints.
    ///
    /// - Throws: ``ArborError/Code/storeOpen`` when the file cannot be read, is not an Arbor
    ///   store, or its metadata is damaged.
    package static func recordedAttributes(at path: String, options: DatabaseOptions = DatabaseOptions()) throws -> [String: [String: RecordedAttribute]] {
        try readingMetadata(at: path, options: options, "read the schema of \(path)") { metadata in
            guard let bytes = try metadata.get(MetadataKey.schema),
                  let schema = try? JSONDecoder().decode(ModelSchema.self, from: Data(bytes)) else { return [:] }
            let model = try schema.model()
            var fills: [String: [String: AttributeValue]] = [:]
            for entity in model.entities { fills[entity.name] = try recordedFills(metadata, entity: entity, path: path) }
            var recorded: [String: [String: RecordedAttribute]] = [:]
            for entity in schema.entities {
                guard let described = model.entity(named: entity.name) else { continue }
                for attribute in entity.attributes {
                    // Fills are recorded by the entities whose rows hold the attribute: its own,
                    // or (an abstract entity has no rows) its sub-entities'.
                    let fill = described.selfAndDescendants.lazy.compactMap { fills[$0.name]?[attribute.name] }.first
                    let defaultValue = described.attributesByName[attribute.name]?.defaultValue
                    guard attribute.rules != nil || fill != nil || defaultValue != nil else { continue }
                    recorded[entity.name, default: [:]][attribute.name] = RecordedAttribute(rules: attribute.rules, fill: fill, defaultValue: defaultValue)
                }
            }
            return recorded
        }
    }

    /// `fills` as a store records them (see ``recordedFills(_:entity:path:)``).
    static func fillsBytes(_ fills: [String: AttributeValue]) throws -> [UInt8] {
        var encoded: [String: String] = [:]
        for (name, value) in fills { encoded[name] = RowFormat.columnText(of: value) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(encoded))
    }

    /// The entry of a layout-2 store's recorded hashes that names its row layout (a name no
    /// model's entity is expected to have: one named so could not be stored).
    static let rowLayoutHashKey = "(row layout)"

    /// The entry of the recorded hashes of a store that records fills (columns a migration
    /// appended without rewriting rows): builds that do not read fills refuse such a store (an
    /// entity only in the store) instead of reading those columns as nil.
    static let fillsHashKey = "(column fills)"

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
}


/// What a store records of an attribute besides its type and options
/// (``NativeStore/recordedAttributes(at:options:)``).
package struct RecordedAttribute: Equatable, Sendable {
    /// The value rules (minimum, maximum, length, pattern) in words, as the store keeps them for
    /// migrations to compare (`minimum 0, length ≤ 40`); nil when the attribute has none.
    package var rules: String?
    /// The value the rows written before the attribute was added read for it: the default value
    /// a migration added it with, without rewriting those rows. Nil when there is none.
    package var fill: AttributeValue?
    /// The default value a new object gets, as the model declared it when the store last
    /// recorded its schema (nil: none, or recorded before stores kept defaults).
    package var defaultValue: AttributeValue? = nil
}
