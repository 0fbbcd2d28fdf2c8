import ArborStore
import CoreMetrics
import Foundation
import Logging

// Safety: The row bytes `rewrite` and `migratedRow` read are lent by the engine for the call and
// not kept.

/// Running a lightweight migration (``StoreMigration``; docs/migration.md): one engine write
/// transaction that checks the rows first and writes nothing when they do not allow the new model,
/// then moves the trees, rewrites the rows that need it, builds the new derived trees and records
/// the new model — its hashes, schema, column orders, fills and the history's new version — last.
///
/// The store (`self`) is already the new model's: its row formats are the ones the migration
/// leaves. Old rows are read through the old model's formats, one column at a time.
extension NativeStore {
    /// Rows read and written per step of a pass over a tree (the engine allows no writes during
    /// a scan).
    static let migrationChunk = 2048

    /// Runs `plan`, and reports and logs what it did.
    ///
    /// - Throws: ``ArborError/Code/incompatibleModel`` when rows do not allow the new model (nils
    ///   in attributes that become required without a default, duplicates under a new uniqueness
    ///   constraint, objects of an entity that can have none), naming them, the file untouched;
    ///   ``ArborError/Code/storeOpen`` when the engine fails.
    func migrate(_ plan: StoreMigration, started: ContinuousClock.Instant) throws -> MigrationReport {
        let logger = database.options.logger
        let factory = database.options.metricsFactory ?? MetricsSystem.factory
        let fromVersion = plan.fromVersion
        logger.info("migrating the store to a new model", metadata: [
            "arbor.path": "\(path ?? "memory")", "arbor.from": "\(fromVersion)", "arbor.to": "\(fromVersion + 1)",
            "arbor.changes": "\(plan.difference.changes.count)", "arbor.rewrites": "\(plan.rewritten.sorted().joined(separator: ","))",
        ])
        do {
            let report = try Self.storeError("migrate \(path ?? "memory") to the new model", code: .storeOpen) {
                try database.write { transaction in try MigrationRun(store: self, plan: plan, transaction: transaction).run(started: started) }
            }
            Counter(label: "arbor_migrations", factory: factory).increment()
            CoreMetrics.Timer(label: "arbor_migration_duration", factory: factory).recordNanoseconds(report.duration.wholeNanoseconds)
            logger.info("migrated the store", metadata: ["arbor.path": "\(path ?? "memory")", "arbor.report": "\(report)"])
            if report.invalidObjectCount > 0 {
                logger.warning("objects kept by the migration break the new model's validation rules", metadata: [
                    "arbor.path": "\(path ?? "memory")", "arbor.count": "\(report.invalidObjectCount)",
                    "arbor.objects": "\(report.invalidObjects.map(\.message).joined(separator: "; "))",
                ])
            }
            return report
        } catch {
            Counter(label: "arbor_migration_failures", factory: factory).increment()
            logger.debug("the store could not be migrated; it is as it was", metadata: ["arbor.path": "\(path ?? "memory")", "arbor.error": "\(error)"])
            throw error
        }
    }

    /// Builds derived trees (index, uniqueness and foreign-key trees, by name) from the rows of
    /// every hierarchy they belong to, in `transaction`: the one place such a tree is made from
    /// rows (a store written before it kept an index, a migration). Entries are gathered a chunk
    /// of rows at a time.
    ///
    /// - Throws: ``ArborError/Code/incompatibleModel`` when rows break a uniqueness constraint
    ///   being built (naming them).
    func buildDerivedTrees(_ names: Set<String>, in transaction: WriteTransaction) throws {
        guard !names.isEmpty else { return }
        for name in names { _ = try transaction.tree(named: name, create: true) }
        for root in model.entities where root.superentity == nil {
            let wanted = StoreMigration.derivedTrees(of: root).filter { names.contains($0.name) }
            guard !wanted.isEmpty, let rows = try transaction.tree(named: Self.rowsTree(root)) else { continue }
            // Each entity's trees among them (an index tree with its index), found once.
            var byEntity: [String: [(tree: StoreMigration.DerivedTree, index: StoreIndex?)]] = [:]
            for entity in root.hierarchy {
                let indexes = Self.indexes(of: entity)
                byEntity[entity.name] = wanted.filter { $0.entities.contains(entity.name) }.map { tree in
                    (tree, indexes.first { $0.tree == tree.name })
                }
            }
            try Self.forEachChunk(of: rows) { chunk in
                var entries: [(tree: String, key: [UInt8], value: [UInt8])] = []
                for (primaryKey, bytes) in chunk {
                    let row = try bytes.withUnsafeBytes { try decode($0, objectID: objectID(root.name, primaryKey)) }
                    for (tree, index) in byEntity[row.entityName] ?? [] {
                        switch tree.kind {
                        case .index:
                            guard let index else { continue }
                            entries.append((tree.name, try indexEntry(row, index, key: primaryKey), []))
                        case .unique:
                            guard let value = try uniqueKey(row, tree.keys) else { continue }
                            entries.append((tree.name, value, key(primaryKey)))
                        case .foreignKey:
                            guard let key = tree.keys.first, let destination = row.destination(key) else { continue }
                            entries.append((tree.name, pair(try self.primaryKey(of: destination), primaryKey), []))
                        }
                    }
                }
                for entry in entries {
                    guard let tree = try transaction.tree(named: entry.tree) else { continue }
                    if !entry.value.isEmpty, let holder = try tree.get(entry.key), holder != entry.value {
                        let first = holder.withUnsafeBytes { KeyEncoding.integer(exactly: $0) } ?? 0
                        let second = entry.value.withUnsafeBytes { KeyEncoding.integer(exactly: $0) } ?? 0
                        throw ArborError(.incompatibleModel, "the rows \(objectID(root.name, first)) and \(objectID(root.name, second)) break the uniqueness of \(entry.tree)")
                    }
                    try tree.put(entry.key, entry.value)
                }
            }
        }
    }

    /// Calls `body` with the rows of `tree` (primary key, bytes), ``migrationChunk`` at a time,
    /// in key order; `body` may write to the tree (the scan is over when it is called).
    static func forEachChunk(of tree: Tree, _ body: ([(Int64, [UInt8])]) throws -> Void) throws {
        var start: [UInt8]? = nil
        while true {
            var chunk: [(Int64, [UInt8])] = []
            chunk.reserveCapacity(migrationChunk)
            var lastKey: [UInt8] = []
            try tree.forEach(from: start) { key, value in
                chunk.append((try Self.lastKey(of: key, in: tree.name), Array(value)))
                guard chunk.count < migrationChunk else {
                    lastKey = Array(key)
                    return false
                }
                return true
            }
            guard !chunk.isEmpty else { return }
            try body(chunk)
            guard chunk.count == migrationChunk else { return }
            // The next key after the last one, whichever form the tree's keys are in.
            start = lastKey + [0]
        }
    }
}

/// One run of a ``StoreMigration`` in one write transaction.
private struct MigrationRun {
    let store: NativeStore
    let plan: StoreMigration
    let transaction: WriteTransaction

    /// What the rows showed: each problem, the rows of each old entity, and whether nils were
    /// filled (their rows are rewritten).
    struct Findings {
        var problems: [ArborError] = []
        /// Values that break a rule that changed: up to ten per attribute, and how many in all.
        var invalid: [ArborError] = []
        var invalidCount = 0
        var rows: [String: Int] = [:]
        var filled = Set<String>()
    }

    func run(started: ContinuousClock.Instant) throws -> MigrationReport {
        // Long: the five numbered steps of one lightweight migration in one write transaction, in
        // the order that keeps it all-or-nothing: check, trees, rows, derived trees, and the
        // metadata last.
        guard let metadata = try NativeStore.metadata(in: transaction), try metadata.get(MetadataKey.hashes) == plan.oldHashBytes else {
            throw ArborError(.storeOpen, "\(store.path ?? "memory") changed while it was being opened (another connection migrated it); open it again")
        }
        // 1. The rows allow the new model? Nothing is written before this is known.
        var findings = Findings()
        for (oldRoot, newRoot) in plan.hierarchies {
            guard let root = plan.new.entity(named: newRoot), let old = plan.old.entity(named: oldRoot), plan.checks(root),
                  let rows = try transaction.tree(named: NativeStore.rowsTree(old)) else { continue }
            try check(rows, oldRoot: old, into: &findings)
        }
        let losses = try plan.countLosses(in: transaction, store: store)
        try refuseUnallowed(losses)
        if plan.invalidObjects == .fail && findings.invalidCount > 0 {
            let count = findings.invalidCount
            throw ArborError(.migrationFailed,
                             "\(store.path ?? "memory") cannot be migrated to this model: \(count) value\(count == 1 ? "" : "s") of its objects break\(count == 1 ? "s" : "") its validation rules "
                                + "(\(findings.invalid.map(\.message).joined(separator: "; "))\(count > findings.invalid.count ? "; …" : "")); the store is as it was",
                             detailedErrors: findings.invalid)
        }
        guard findings.problems.isEmpty else {
            let count = findings.problems.count
            throw ArborError(.incompatibleModel,
                             "\(store.path ?? "memory") cannot be migrated to this model: its rows do not allow it (\(count) problem\(count == 1 ? "" : "s"): "
                                + "\(findings.problems.map(\.message).joined(separator: "; "))); the store is as it was",
                             detailedErrors: findings.problems)
        }

        // 2. Trees: dropped, then renamed (through temporary names, so that renames may swap).
        var dropped: [String] = []
        for name in plan.droppedTrees.sorted() where try transaction.dropTree(named: name) { dropped.append(name) }
        var renamed: [String: String] = [:]
        var staged: [(String, String)] = []
        for (from, to) in plan.renamedTrees.sorted(by: { $0.key < $1.key }) where try transaction.tree(named: from) != nil {
            let temporary = "migrating.\(staged.count)"
            try transaction.renameTree(named: from, to: temporary)
            staged.append((temporary, to))
            renamed[from] = to
        }
        for (temporary, to) in staged { try transaction.renameTree(named: temporary, to: to) }
        for root in plan.new.entities where root.superentity == nil {
            _ = try transaction.tree(named: NativeStore.rowsTree(root), create: true)
        }

        // 3. Rows rewritten in the new formats, into fresh pages (an old page is journaled only
        // when the new tree reuses it from the freelist).
        var rewritten: [String: Int] = [:]
        for (oldRoot, newRoot) in plan.hierarchies {
            guard let root = plan.new.entity(named: newRoot), let old = plan.old.entity(named: oldRoot),
                  plan.rewritten.contains(newRoot) || findings.filled.contains(newRoot),
                  let rows = try transaction.tree(named: NativeStore.rowsTree(root)) else { continue }
            var rewriter = RowRewriter(run: self, oldRoot: old, tree: rows.name)
            try transaction.rewriteValues(of: rows) { key, value, output in
                try rewriter.rewrite(try NativeStore.lastKey(of: key, in: rows.name), value, into: &output)
            }
            for (entity, count) in rewriter.rewrittenCounts { rewritten[entity, default: 0] += count }
        }

        // 4. Derived trees built from the rows (kept ones the file lacks included).
        var built = plan.builtTrees
        for name in plan.keptDerivedTrees where try transaction.tree(named: name) == nil { built.insert(name) }
        try store.buildDerivedTrees(built, in: transaction)

        // 5. The new model, recorded last.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try metadata.put(MetadataKey.rowLayout, [RowFormat.Layout.records.rawValue])
        try metadata.put(MetadataKey.entities, Array(try encoder.encode(plan.entities)))
        for entity in plan.old.entities where plan.new.entity(named: entity.name) == nil {
            _ = try metadata.delete(NativeStore.columnsKey(entity.name))
            _ = try metadata.delete(NativeStore.fillsKey(entity.name))
        }
        for entity in plan.new.entities {
            try metadata.put(NativeStore.columnsKey(entity.name), Array(try encoder.encode(plan.columns[entity.name] ?? [])))
            if let fills = plan.fills[entity.name], !fills.isEmpty {
                try metadata.put(NativeStore.fillsKey(entity.name), try NativeStore.fillsBytes(fills))
            } else {
                _ = try metadata.delete(NativeStore.fillsKey(entity.name))
            }
        }
        var hashes = StoreModelVersion.entityHashes(of: plan.new)
        hashes[NativeStore.rowLayoutHashKey] = String(format: "%02x", RowFormat.Layout.records.rawValue)
        if plan.fills.values.contains(where: { !$0.isEmpty }) { hashes[NativeStore.fillsHashKey] = "01" }
        if store.compactKeys { hashes[NativeStore.keyFormHashKey] = String(format: "%02x", store.keyForm.rawValue) }
        if try metadata.get(NativeStore.trackingKey) != nil { hashes[NativeStore.trackingHashKey] = "01" }
        try metadata.put(MetadataKey.hashes, Array(try encoder.encode(hashes)))
        try metadata.put(MetadataKey.modelDescription, Array(plan.new.description.utf8))
        try metadata.put(MetadataKey.schema, try NativeStore.schemaBytes(plan.new))
        let fromVersion = plan.fromVersion
        let version = StoreModelVersion(version: fromVersion + 1, recorded: Date(), synthesized: false, migration: "lightweight",
                                        versionHash: plan.new.versionHashString, entityHashes: StoreModelVersion.entityHashes(of: plan.new),
                                        schema: ModelSchema(plan.new))
        if !plan.rulesOnly { try metadata.put(NativeStore.historyKey, try NativeStore.historyBytes(plan.history + [version])) }
        let rules = NativeStore.rulesFingerprint(plan.new)
        if rules.isEmpty { _ = try metadata.delete(NativeStore.rulesKey) } else { try metadata.put(NativeStore.rulesKey, rules) }

        let entities = plan.new.entities.map { entity -> MigrationReport.EntityReport in
            let oldName = plan.difference.entityMatches[entity.name]
            let read = oldName.map { findings.rows[$0] != nil || rewritten[entity.name] != nil } ?? false
            return MigrationReport.EntityReport(entity: entity.name, renamedFrom: oldName == entity.name ? nil : oldName,
                                                rows: read ? (oldName.flatMap { findings.rows[$0] } ?? rewritten[entity.name] ?? 0) : (oldName == nil ? 0 : nil),
                                                rewrittenRows: rewritten[entity.name] ?? 0)
        }
        var report = MigrationReport(fromVersion: fromVersion, toVersion: plan.rulesOnly ? fromVersion : fromVersion + 1,
                                     kind: plan.rulesOnly ? "rules" : "lightweight", difference: plan.difference,
                                     entities: entities, treesBuilt: built.sorted(), treesDropped: dropped, treesRenamed: renamed,
                                     duration: ContinuousClock.now - started)
        report.invalidObjects = findings.invalid
        report.invalidObjectCount = findings.invalidCount
        report.losses = losses
        return report
    }

    /// Fails the migration, before anything is written, when it would drop data that no drop of
    /// the plan allows: naming each, with its amount, and how to keep or allow it.
    func refuseUnallowed(_ losses: [MigrationLoss]) throws {
        let refused = losses.filter { !$0.isAllowed }
        guard !refused.isEmpty else { return }
        let drops = refused.map(\.drop.spelled).joined(separator: ", ")
        var error = ArborError(.incompatibleModel,
                               "\(store.path ?? "memory") cannot be migrated to this model without dropping data it holds "
                                + "(\(refused.map(\.description).joined(separator: "; "))); the store is as it was. "
                                + "If they were renamed, give the new entity or property a renamingIdentifier naming the old one; "
                                + "to drop them, migrate through a MigrationPlan whose stage names them: "
                                + "MigrationPlan(startingAt: storeModel).lightweight(to: newModel, dropping: [\(drops)])",
                               detailedErrors: refused.map { loss in
                                   ArborError(.incompatibleModel, "\(loss) would be dropped", entity: loss.entity, key: loss.property)
                               })
        error.migrationLosses = losses
        throw error
    }

    // MARK: Checking

    /// Reads every row of the hierarchy of `oldRoot` as the new model has it, collecting what
    /// breaks it: nils that become required, duplicates under the uniqueness trees being built,
    /// rows of entities that can have none.
    func check(_ rows: Tree, oldRoot: EntityDescription, into findings: inout Findings) throws {
        // Long: one pass over the hierarchy's rows gathering nils, rule failures and duplicates,
        // then the problems written from what it gathered; the gathering maps live only for the
        // pass.
        var nils: [String: [ManagedObjectID]] = [:]
        var nilCounts: [String: Int] = [:]
        var holders: [String: [[UInt8]: Int64]] = [:]
        var duplicates: [String: (tree: StoreMigration.DerivedTree, pairs: [(Int64, Int64)])] = [:]
        var forbidden: [String: [ManagedObjectID]] = [:]
        let newRoot = plan.newEntityName[oldRoot.name].flatMap(plan.new.entity(named:))
        let uniqueTrees = newRoot.map { StoreMigration.derivedTrees(of: $0).filter { $0.kind == .unique && plan.builtTrees.contains($0.name) } } ?? []
        var problems = findings.problems
        var invalid = findings.invalid
        var invalidCount = findings.invalidCount
        var invalidByKey: [String: Int] = [:]
        var counts = findings.rows
        var filled = findings.filled
        try rows.forEach { key, value in
            let primaryKey = try NativeStore.lastKey(of: key, in: rows.name)
            let migrated = try migratedRow(value, key: primaryKey, oldRoot: oldRoot)
            counts[migrated.oldEntity.name, default: 0] += 1
            if plan.mustBeEmpty[migrated.oldEntity.name] != nil {
                forbidden[migrated.oldEntity.name, default: []].append(store.objectID(migrated.entity?.name ?? migrated.oldEntity.name, primaryKey))
            }
            for name in migrated.nils {
                nilCounts[name, default: 0] += 1
                if nils[name, default: []].count < 10, let entity = migrated.entity {
                    nils[name, default: []].append(store.objectID(entity.name, primaryKey))
                }
            }
            if migrated.filled, let root = newRoot { filled.insert(root.name) }
            guard let row = migrated.row, let entity = migrated.entity else { return true }
            for name in plan.ruleChecks[entity.name] ?? [] {
                guard case .attribute(let value)? = row.values[name], let attribute = entity.attributesByName[name] else { continue }
                do {
                    try Validation.check(value, attribute: attribute, entity: entity.name, objectID: store.objectID(entity.name, primaryKey))
                } catch let error as ArborError {
                    invalidCount += 1
                    invalidByKey["\(entity.name).\(name)", default: 0] += 1
                    if invalidByKey["\(entity.name).\(name)"]! <= 10 { invalid.append(error) }
                }
            }
            for tree in uniqueTrees where tree.entities.contains(entity.name) {
                guard let value = try store.uniqueKey(row, tree.keys) else { continue }
                if let holder = holders[tree.name]?[value] {
                    duplicates[tree.name, default: (tree, [])].pairs.append((holder, primaryKey))
                } else {
                    holders[tree.name, default: [:]][value] = primaryKey
                }
            }
            return true
        }
        for (entity, ids) in forbidden.sorted(by: { $0.key < $1.key }) {
            problems.append(ArborError(.incompatibleModel,
                                       "\(plan.mustBeEmpty[entity] ?? entity), and the store has \(ids.count) (\(ids.prefix(10).map(\.description).joined(separator: ", "))\(ids.count > 10 ? ", …" : ""))",
                                       entity: entity, objectID: ids.first))
        }
        for (name, ids) in nils.sorted(by: { $0.key < $1.key }) {
            let count = nilCounts[name] ?? ids.count
            problems.append(ArborError(.incompatibleModel,
                                       "\(name) becomes required and has no default, and \(count) object\(count == 1 ? " has" : "s have") none (\(ids.map(\.description).joined(separator: ", "))\(count > ids.count ? ", …" : ""))",
                                       entity: String(name.prefix { $0 != "." }), key: String(name.drop { $0 != "." }.dropFirst()), objectID: ids.first))
        }
        let rootName = newRoot?.name ?? oldRoot.name
        for (_, (tree, pairs)) in duplicates.sorted(by: { $0.key < $1.key }) {
            let named = pairs.prefix(10).map { "\(store.objectID(rootName, $0.0)) and \(store.objectID(rootName, $0.1))" }
            problems.append(ArborError(.incompatibleModel,
                                       "the new uniqueness constraint \(rootName)(\(tree.keys.joined(separator: ", "))) is broken by \(pairs.count) pair\(pairs.count == 1 ? "" : "s") of objects holding the same values (\(named.joined(separator: "; "))\(pairs.count > 10 ? "; …" : ""))",
                                       entity: rootName, key: tree.keys.joined(separator: ","),
                                       objectID: pairs.first.map { store.objectID(rootName, $0.1) }))
        }
        findings.problems = problems
        findings.invalid = invalid
        findings.invalidCount = invalidCount
        findings.rows = counts
        findings.filled = filled
    }

    // MARK: Rewriting

    /// Rewrites the rows of one old hierarchy in the new formats, one row at a time: records
    /// whose columns can be copied are transcoded (no values decoded, no allocation per row);
    /// the others are read as the new model has them and encoded. What to do with each old
    /// entity is worked out at its first row.
    struct RowRewriter {
        let run: MigrationRun
        let oldRoot: EntityDescription
        let tree: String
        /// Per old entity met: the new entity's name, and its format and columns' sources when
        /// its records are transcoded.
        private var entities: [(old: EntityDescription, new: String?, transcoding: (format: RowFormat, old: RowFormat, plan: RowFormat.Transcoding)?)] = []
        private var buffers = RowFormat.TranscodeBuffers()
        /// Rows met, by place in `entities`.
        private var counted: [Int] = []

        init(run: MigrationRun, oldRoot: EntityDescription, tree: String) {
            self.run = run
            self.oldRoot = oldRoot
            self.tree = tree
        }

        /// Appends the row `bytes` (primary key `key`) in its new format to `output`.
        mutating func rewrite(_ key: Int64, _ bytes: UnsafeRawBufferPointer, into output: inout [UInt8]) throws {
            let oldEntity = try run.plan.oldEntity(of: bytes, key: key, oldRoot: oldRoot)
            let index = try place(of: oldEntity)
            defer { counted[index] += 1 }
            if let transcoding = entities[index].transcoding {
                do {
                    try transcoding.format.transcode(bytes, from: transcoding.old, transcoding.plan, buffers: &buffers, into: &output)
                } catch let error as StoreError {
                    throw ArborError(.store, "the row \(key) of \(tree) is malformed: \(error.message)")
                }
                return
            }
            let migrated = try run.migratedRow(bytes, key: key, oldRoot: oldRoot)
            guard let row = migrated.row, let entity = migrated.entity else {
                // A row of a removed entity fails the check pass; were it here, it stays as it was.
                output.append(contentsOf: bytes)
                return
            }
            output += try run.store.encode(row, entity: entity)
        }

        /// Where `oldEntity`'s way of rewriting is kept (a hierarchy has few entities: a linear
        /// search by identity beats hashing a name per row).
        private mutating func place(of oldEntity: EntityDescription) throws -> Int {
            if let index = entities.firstIndex(where: { $0.old === oldEntity }) { return index }
            let newName = run.plan.newEntityName[oldEntity.name]
            var transcoding: (RowFormat, RowFormat, RowFormat.Transcoding)?
            if let (entity, plan) = run.transcoding(of: oldEntity), let old = run.plan.oldFormats[oldEntity.name] {
                transcoding = (run.store.format(of: entity), old, plan)
            }
            entities.append((oldEntity, newName, transcoding))
            counted.append(0)
            return entities.count - 1
        }

        /// Rows rewritten, by new entity (rows of removed entities, kept as they were, are not).
        var rewrittenCounts: [String: Int] {
            var result: [String: Int] = [:]
            for (index, entity) in entities.enumerated() {
                if let name = entity.new, counted[index] > 0 { result[name, default: 0] += counted[index] }
            }
            return result
        }
    }

    // MARK: One row

    /// A row of the old model as the new one has it.
    struct MigratedRow {
        let oldEntity: EntityDescription
        /// Nil for a row of a removed entity.
        let entity: EntityDescription?
        var row: StoreRow?
        /// `Entity.property` of each value that becomes required and has none.
        var nils: [String] = []
        /// Whether a nil got its attribute's default.
        var filled = false
    }

    /// How records of `oldEntity` are rewritten by copying columns (nil: they cannot be, or the
    /// entity is removed).
    func transcoding(of oldEntity: EntityDescription) -> (entity: EntityDescription, transcoding: RowFormat.Transcoding)? {
        guard let entity = plan.newEntityName[oldEntity.name].flatMap(plan.new.entity(named:)),
              let old = plan.oldFormats[oldEntity.name] else { return nil }
        let oldNames = plan.oldPropertyName[entity.name] ?? [:]
        let required = Dictionary((plan.newlyRequired[entity.name] ?? []).map { ($0.name, $0.fill) }, uniquingKeysWith: { first, _ in first })
        let transcoding = store.format(of: entity).transcoding(
            from: old, oldName: { oldNames[$0] }, newValue: { entity.attributesByName[$0]?.defaultValue },
            ifNil: { required[$0] ?? nil })
        return transcoding.map { (entity, $0) }
    }

    /// Reads the row `bytes` (primary key `key`) of the old hierarchy of `oldRoot` into the new
    /// model's entity: each stored property from the old column it continues (attributes read as
    /// their new type, which widens the old), new ones their default (or nil), to-ones pointing
    /// at the same primary key under the destination's new entity name.
    func migratedRow(_ bytes: UnsafeRawBufferPointer, key: Int64, oldRoot: EntityDescription) throws -> MigratedRow {
        // Long: one row read into the new model's layout: its attributes then its to-ones, both
        // read from the same old format and bytes into the same storage.
        func damaged(_ why: String) -> ArborError {
            ArborError(.store, "the row \(key) of \(NativeStore.rowsTree(oldRoot)) is malformed: \(why)")
        }
        let oldEntity = try plan.oldEntity(of: bytes, key: key, oldRoot: oldRoot)
        let oldName = oldEntity.name
        guard let format = plan.oldFormats[oldName] else { throw damaged("it names no entity of the store's model") }
        guard let entity = plan.newEntityName[oldName].flatMap(plan.new.entity(named:)) else {
            return MigratedRow(oldEntity: oldEntity, entity: nil, row: nil)
        }
        guard case .int(let version)? = try format.component(RowFormat.versionComponent, of: bytes), version > 0, version < Int64.max else {
            throw damaged("its version is missing or out of range")
        }
        var values = PropertyStorage(layout: entity.propertyLayout)
        var migrated = MigratedRow(oldEntity: oldEntity, entity: entity, row: nil)
        let oldNames = plan.oldPropertyName[entity.name] ?? [:]
        let required = Dictionary((plan.newlyRequired[entity.name] ?? []).map { ($0.name, $0.fill) }, uniquingKeysWith: { first, _ in first })
        for attribute in entity.attributes where !attribute.isTransient {
            var value: AttributeValue?
            if let oldName = oldNames[attribute.name], case .attribute(let component, _)? = format.places[oldName] {
                value = try format.attributeValue(atComponent: component, kind: attribute.type.kind, in: bytes)
            } else {
                value = attribute.defaultValue
            }
            if value == nil, let fill = required[attribute.name] {
                if let fill {
                    value = fill
                    migrated.filled = true
                } else {
                    migrated.nils.append("\(entity.name).\(attribute.name)")
                }
            }
            if let value { values[attribute.name] = .attribute(value) }
        }
        let requiredRelationships = Set(plan.newlyRequiredRelationships[entity.name] ?? [])
        for relationship in entity.relationships where !relationship.isToMany {
            var destination: ManagedObjectID?
            if let oldName = oldNames[relationship.name], case .toOne(let component, let declared, let nameComponent)? = format.places[oldName],
               case .int(let primaryKey)? = try format.component(component, of: bytes) {
                guard NativeStore.isPrimaryKey(primaryKey) else { throw damaged("\(oldName) holds \(primaryKey), which is not a primary key") }
                var oldDestination = declared
                if let nameComponent {
                    switch try format.component(nameComponent, of: bytes) {
                    case .string(let name)?: oldDestination = name
                    case .int(let index)? where index >= 0 && index < Int64(plan.oldEntities.count): oldDestination = plan.oldEntities[Int(index)]
                    case nil, .null?: break
                    default: throw damaged("\(oldName) names no entity")
                    }
                }
                guard let newDestination = plan.newEntityName[oldDestination] else {
                    throw damaged("\(oldName) points at an object of \(oldDestination), which the new model removes")
                }
                destination = store.objectID(newDestination, primaryKey)
            }
            if let destination {
                values[relationship.name] = .object(destination)
            } else if requiredRelationships.contains(relationship.name) {
                migrated.nils.append("\(entity.name).\(relationship.name)")
            }
        }
        migrated.row = StoreRow(entityName: entity.name, version: version, values: values)
        return migrated
    }
}
