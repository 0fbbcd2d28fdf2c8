import ArborStore
import Foundation

/// One model version a store has been at: an entry of its model history (docs/migration.md,
/// "What the store records"), oldest first.
public struct StoreModelVersion: Sendable, Equatable {
    /// The version's place in the history, from 1 (the model the store was made with).
    public let version: Int
    /// When the store reached this version (made or migrated); nil when the history was derived
    /// in memory for a store that does not record one yet (opened read-only).
    public let recorded: Date?
    /// Whether the entry was recorded after the fact, for a store made before stores kept a
    /// history: its date is when a build that keeps one first opened the store, not when the
    /// store reached the version.
    public let synthesized: Bool
    /// How the store reached the version: nil for the model it was made with, else the kind of
    /// migration (`lightweight`, `staged`, `custom`).
    public let migration: String?
    /// The model's version hash (``ManagedObjectModel/versionHash``), in hexadecimal.
    public let versionHash: String
    /// Each entity's version hash, in hexadecimal, by entity name.
    public let entityHashes: [String: String]
    /// The model's structure as the store keeps it (nil when the store was made before stores
    /// kept their model's schema).
    let schema: ModelSchema?

    /// The model of this version, as the store keeps it (its entities, attributes,
    /// relationships, constraints and indexes; not validation rules — kept in words only —, defaults or classes).
    ///
    /// - Throws: ``ArborError/Code/storeOpen`` when the store did not keep the version's schema
    ///   (made before stores kept one), ``ArborError/Code/invalidModel`` when it is inconsistent.
    public func model() throws -> ManagedObjectModel {
        guard let schema else {
            throw ArborError(.storeOpen, "version \(version) of the store's model was recorded before stores kept their model's schema")
        }
        return try schema.model()
    }

    /// What differs from the previous version `earlier` to this one (nil when either lacks its
    /// schema).
    public func difference(from earlier: StoreModelVersion) -> ModelDifference? {
        guard let old = earlier.schema, let new = schema else { return nil }
        return ModelDifference(from: old, to: new)
    }
}

extension StoreModelVersion: Codable {
    enum CodingKeys: String, CodingKey {
        case version, recorded, synthesized, migration, versionHash = "hash", entityHashes = "hashes", schema
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        version = try container.decode(Int.self, forKey: .version)
        // Read and written by hand: a Foundation formatter costs more to make than the rest of an open.
        recorded = try container.decodeIfPresent(String.self, forKey: .recorded).flatMap { try? ISO8601Date.date(from: $0) }
        synthesized = try container.decodeIfPresent(Bool.self, forKey: .synthesized) ?? false
        migration = try container.decodeIfPresent(String.self, forKey: .migration)
        versionHash = try container.decode(String.self, forKey: .versionHash)
        entityHashes = try container.decode([String: String].self, forKey: .entityHashes)
        schema = try container.decodeIfPresent(ModelSchema.self, forKey: .schema)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
        try container.encodeIfPresent(recorded.map(ISO8601Date.string(from:)), forKey: .recorded)
        if synthesized { try container.encode(true, forKey: .synthesized) }
        try container.encodeIfPresent(migration, forKey: .migration)
        try container.encode(versionHash, forKey: .versionHash)
        try container.encode(entityHashes, forKey: .entityHashes)
        try container.encodeIfPresent(schema, forKey: .schema)
    }
}

extension StoreModelVersion {
    /// The first version of a store made (or first recorded) with `model`.
    init(first model: ManagedObjectModel, recorded: Date?, synthesized: Bool) {
        self.init(version: 1, recorded: recorded, synthesized: synthesized, migration: nil,
                  versionHash: model.versionHashString, entityHashes: Self.entityHashes(of: model), schema: ModelSchema(model))
    }

    /// Whether `model` is this version's model (its entities' hashes are this version's).
    func isVersion(of model: ManagedObjectModel) -> Bool { entityHashes == Self.entityHashes(of: model) }

    /// `model`'s entity hashes as a version records them: hexadecimal, by entity name.
    static func entityHashes(of model: ManagedObjectModel) -> [String: String] {
        model.entityVersionHashes.mapValues(VersionHash.hex)
    }
}

extension NativeStore {
    /// The metadata key of the model history.
    static let historyKey = MetadataKey.modelHistory

    static func historyBytes(_ history: [StoreModelVersion]) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(history))
    }

    /// The recorded history of a store's metadata: nil when it records none; a typed error when
    /// the record is unreadable.
    static func recordedHistory(_ metadata: Tree, path: String) throws -> [StoreModelVersion]? {
        guard let bytes = try metadata.get(historyKey) else { return nil }
        guard let history = try? JSONDecoder().decode([StoreModelVersion].self, from: Data(bytes)), !history.isEmpty else {
            throw ArborError(.storeOpen, "the Arbor metadata of \(path) is damaged: its model history is unreadable")
        }
        return history
    }

    /// Records the history of a store made before stores kept one (its recorded metadata showed
    /// none; checked again under the write lock, in case another connection recorded it): one
    /// synthesized version, the model the store is at (which this model is: its hashes were
    /// checked).
    func recordMissingHistory() throws {
        try Self.storeError("record the model history of \(path ?? "memory")", code: .storeOpen) {
            try database.write { transaction in
                let metadata = try NativeStore.metadata(creatingIn: transaction)
                guard try metadata.get(Self.historyKey) == nil else { return }
                try metadata.put(Self.historyKey, try Self.historyBytes([StoreModelVersion(first: model, recorded: Date(), synthesized: true)]))
            }
        }
    }

    /// The model versions the store at `path` has been at, oldest first, read without the
    /// application's model and without writing to the file. A store that records no history
    /// yet (made before stores kept one; it records it on its next writable open) gives one
    /// version derived from the model it records, with no date.
    ///
    /// - Throws: ``ArborError/Code/storeOpen`` when the file cannot be read, is not an Arbor
    ///   store, or its metadata is damaged.
    public static func modelHistory(at path: String, options: DatabaseOptions = DatabaseOptions()) throws -> [StoreModelVersion] {
        try readingMetadata(at: path, options: options, "read the model history of \(path)") { metadata in
            if let history = try recordedHistory(metadata, path: path) { return history }
            guard let hashes = try recordedEntityHashes(metadata) else {
                throw ArborError(.storeOpen, "the Arbor metadata of \(path) is damaged: its model hashes are missing or unreadable")
            }
            let schema = try metadata.get(MetadataKey.schema).flatMap { try? JSONDecoder().decode(ModelSchema.self, from: Data($0)) }
            if let model = try? schema?.model() {
                return [StoreModelVersion(first: model, recorded: nil, synthesized: true)]
            }
            // Made before stores kept their schema: the model hash from the entities' hashes.
            let modelHash = VersionHash.of(hashes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: "\n"))
            return [StoreModelVersion(version: 1, recorded: nil, synthesized: true, migration: nil,
                                      versionHash: VersionHash.hex(modelHash), entityHashes: hashes, schema: nil)]
        }
    }

    /// Runs `body` on the metadata of the store at `path`, opened read-only (nothing written, no
    /// model needed): what tools read a store's model and history with.
    ///
    /// - Throws: ``ArborError/Code/storeOpen`` when the file cannot be read or is not an Arbor
    ///   store; `body`'s errors.
    static func readingMetadata<R>(at path: String, options: DatabaseOptions, _ what: @autoclosure () -> String,
                                   _ body: (Tree) throws -> R) throws -> R {
        var options = options
        options.readOnly = true
        options.create = false
        let database: Database
        do {
            database = try Database(path: path, options: options)
        } catch let error as StoreError {
            throw ArborError(.storeOpen, "\(path) could not be opened: \(error.message)", storeError: error)
        }
        defer { database.close() }
        return try storeError(what(), code: .storeOpen) {
            try database.read { transaction -> R in
                guard let metadata = try NativeStore.metadata(in: transaction) else {
                    throw ArborError(.storeOpen, "\(path) is not an Arbor store: it has no arbor.metadata tree")
                }
                return try body(metadata)
            }
        }
    }
}
