import ArborStore
import CoreMetrics
import Foundation
import Logging

/// Running a ``MigrationPlan`` (docs/migration.md, "Staged and custom migration").
///
/// A store one lightweight stage behind migrates in place, as an automatic migration does.
/// Otherwise the stages run on a *working copy* (`<store>.migration-a` / `-b`, next to the store):
/// the store's trees are copied into it, each lightweight stage migrates it in place, each custom
/// stage copies it into the other working file through two contexts; then, in **one write
/// transaction of the store**, its trees are replaced by the working copy's (the rollback journal
/// makes that atomic, as any save). The write lock is taken first and held for the whole run, so
/// no other connection writes meanwhile and a second run waits; nothing is written to the store
/// before that last step, so a failing stage, an error or a power cut anywhere leaves it at its
/// old version.
extension NativeStore {
    /// What opening a store with a plan needs before the ordinary open.
    enum StagedOutcome {
        /// Nothing: the store is new, at the plan's last version, or at no version of it (the
        /// ordinary open then infers or refuses).
        case notNeeded
        /// One lightweight stage: the ordinary open migrates in place, inferring, allowed the
        /// stage's drops.
        case inPlace(drops: Set<MigrationDrop>)
        /// The stages ran; the store is at the last version.
        case migrated(MigrationReport)
    }

    /// What opening the store at `path` (of `type`) with `migration` does before the ordinary
    /// open: the stages of the options' plan that the store needs, run on a working copy that
    /// replaces the store's contents in one transaction — except a single lightweight stage,
    /// which the ordinary open runs (the options returned then infer it, with its drops).
    /// Returns the options for the ordinary open, and the report of the stages that ran.
    static func runStagesFirst(_ migration: MigrationOptions, path: String, type: String, model: ManagedObjectModel,
                               configuration: String?, options: DatabaseOptions) throws -> (MigrationOptions, MigrationReport?) {
        guard let plan = migration.plan, migration.shouldMigrateStoreAutomatically, !options.readOnly, type != "memory" else {
            return (migration, nil)
        }
        var migration = migration
        switch try runStaged(plan, path: path, model: model, configuration: configuration, options: options,
                             invalidObjects: migration.invalidObjects) {
        case .notNeeded: return (migration, nil)
        case .inPlace(let drops):
            migration.shouldInferMappingModelAutomatically = true
            migration.drops = drops
            return (migration, nil)
        case .migrated(let report): return (migration, report)
        }
    }

    /// Runs the stages of `plan` that the store at `path` needs to reach `model` (the plan's last
    /// version), except a single lightweight one (``StagedOutcome/inPlace``).
    ///
    /// - Throws: ``ArborError/Code/misuse`` when `model` is not the plan's last version;
    ///   ``ArborError/Code/migrationFailed`` when a custom stage fails; the errors of a
    ///   lightweight migration; ``ArborError/Code/storeOpen`` when the engine fails or the store
    ///   changed meanwhile. The store is as it was whenever this throws.
    static func runStaged(_ plan: MigrationPlan, path: String, model: ManagedObjectModel, configuration: String?,
                          options: DatabaseOptions, invalidObjects: MigrationOptions.InvalidObjects) throws -> StagedOutcome {
        guard let last = plan.versions.last, last.versionHash == model.versionHash else {
            throw ArborError(.misuse, "the store at \(path) is opened with a model that is not the last version of its migration plan")
        }
        guard try options.fileSystem.exists(path) else { return .notNeeded }
        // Adjacent versions with the same entity hashes could not be told apart in a store.
        for index in plan.versions.indices.dropLast() where plan.versions[index].entityVersionHashes == plan.versions[index + 1].entityVersionHashes {
            throw ArborError(.misuse, "versions \(index + 1) and \(index + 2) of the migration plan have the same entities (the same version hashes): a store cannot record which of them it is at; merge them into one version")
        }
        // The version the store is at (its recorded entity hashes), read through a writable
        // connection, which first rolls back a journal left by an interrupted write (a read-only
        // one would refuse the file, and the plan would be skipped).
        let database: Database
        do {
            database = try Database(path: path, options: options)
        } catch let error as StoreError {
            throw ArborError(.storeOpen, "the store at \(path) could not be opened: \(error.message)", storeError: error)
        }
        defer { database.close() }
        let recorded = try storeError("read the model of \(path)", code: .storeOpen) {
            try database.read { transaction -> [String: String]? in
                // Not an Arbor store (yet): the ordinary open makes it, or says why it cannot.
                try NativeStore.metadata(in: transaction).flatMap(recordedEntityHashes)
            }
        }
        guard let recorded, let start = plan.version(withEntityHashes: recorded), start < plan.versions.count - 1 else { return .notNeeded }
        if start == plan.versions.count - 2, case .lightweight = plan.stages[start] { return .inPlace(drops: plan.drops[start]) }
        return .migrated(try StagedMigration(plan: plan, start: start, path: path, configuration: configuration, options: options,
                                                   invalidObjects: invalidObjects).run())
    }

    /// Closes the store's file (the store must not be used afterwards): what
    /// ``PersistentStoreCoordinator/remove(_:)`` does, and a migration with the working stores
    /// it opens.
    public func close() { database.close() }
}

/// One run of the stages of a plan from `start` on, over a working copy.
private struct StagedMigration {
    let plan: MigrationPlan
    let start: Int
    let path: String
    let configuration: String?
    let options: DatabaseOptions
    let invalidObjects: MigrationOptions.InvalidObjects
    var stageCount: Int { plan.versions.count - 1 - start }

    var logger: Logger { options.logger }
    var factory: any MetricsFactory { options.metricsFactory ?? MetricsSystem.factory }

    func report(_ stage: Int, _ phase: String, _ completed: Int, _ total: Int) {
        plan.progress?(MigrationProgress(stage: stage, stages: stageCount, phase: phase, completed: completed, total: total))
    }

    /// The options of the working files: the store's file system and locks, writable.
    func workingOptions(pageSize: Int) -> DatabaseOptions {
        var working = options
        working.readOnly = false
        working.create = true
        working.pageSize = pageSize
        return working
    }

    /// Deletes a working file and its journal, when there.
    func remove(_ file: String) throws {
        for name in [file, file + "-journal"] where try options.fileSystem.exists(name) { try options.fileSystem.delete(name) }
    }

    func run() throws -> MigrationReport {
        let started = ContinuousClock.now
        let workFiles = [path + ".migration-a", path + ".migration-b"]
        logger.info("migrating the store through a plan", metadata: [
            "arbor.path": "\(path)", "arbor.from": "\(start + 1)", "arbor.to": "\(plan.versions.count)",
            "arbor.stages": "\(plan.stages[start...].map(\.kind).joined(separator: ","))",
        ])
        defer { for file in workFiles { try? remove(file) } }
        do {
            let report = try NativeStore.storeError("migrate \(path) through its plan", code: .storeOpen) { try migrate(workFiles, started: started) }
            Counter(label: "arbor_migrations", factory: factory).increment()
            CoreMetrics.Timer(label: "arbor_migration_duration", factory: factory).recordNanoseconds(report.duration.wholeNanoseconds)
            logger.info("migrated the store", metadata: ["arbor.path": "\(path)", "arbor.report": "\(report)"])
            return report
        } catch {
            Counter(label: "arbor_migration_failures", factory: factory).increment()
            logger.debug("the store could not be migrated; it is as it was", metadata: ["arbor.path": "\(path)", "arbor.error": "\(error)"])
            throw error
        }
    }

    private func migrate(_ workFiles: [String], started: ContinuousClock.Instant) throws -> MigrationReport {
        let original = try Database(path: path, options: options)
        defer { original.close() }
        // The whole run holds the store's write lock: no other connection writes meanwhile (they
        // wait, then get `busy`), and a second run waits for this one before it touches the
        // working files. Nothing is written to the store before step 3.
        return try original.write { store in try migrate(store, workFiles, started: started) }
    }

    private func migrate(_ store: WriteTransaction, _ workFiles: [String], started: ContinuousClock.Instant) throws -> MigrationReport {
        // Long: the run's three numbered steps (copy, stages, replace) under the one write
        // transaction the caller holds; the working file's name passes from step to step.
        for file in workFiles { try remove(file) }
        // The store was read at a version of the plan before the lock was taken: checked again.
        guard let metadata = try NativeStore.metadata(in: store), let hashes = try NativeStore.recordedEntityHashes(metadata) else {
            throw ArborError(.storeOpen, "the Arbor metadata of \(path) is missing or damaged")
        }
        guard plan.version(withEntityHashes: hashes) == start else {
            throw ArborError(.storeOpen, "\(path) changed while it was being opened (another connection migrated it); open it again")
        }
        let oldHistory = try NativeStore.recordedHistory(metadata, path: path) ?? []
        let pageSize = store.header.pageSize
        // 1. The store's trees, copied into the first working file.
        report(1, "copying the store", 0, 1)
        var working = workFiles[0]
        do {
            let copy = try Database(path: working, options: workingOptions(pageSize: pageSize))
            defer { copy.close() }
            try copy.write { to in
                try to.copyTrees(of: store)
            }
        }
        report(1, "copying the store", 1, 1)
        // 2. Each stage, on the working copy.
        var stageReports: [MigrationReport] = []
        for index in start..<(plan.versions.count - 1) {
            let stage = index - start + 1
            let (old, new) = (plan.versions[index], plan.versions[index + 1])
            switch plan.stages[index] {
            case .lightweight:
                report(stage, "lightweight", 0, 1)
                var inferring = MigrationOptions()
                inferring.invalidObjects = invalidObjects
                inferring.drops = plan.drops[index]
                let migrated = try NativeStore(path: working, type: "native", model: new, configuration: configuration,
                                               options: workingOptions(pageSize: pageSize), migration: inferring, suspendsHistory: true)
                migrated.close()
                if let done = migrated.migration { stageReports.append(done) }
                report(stage, "lightweight", 1, 1)
            case .custom(let migrate):
                let target = workFiles.first { $0 != working }!
                stageReports.append(try CustomStage(stage: stage, migrate: migrate, old: old, new: new, source: working, destination: target,
                                                    options: workingOptions(pageSize: pageSize), configuration: configuration,
                                                    report: { report(stage, $0, $1, $2) }).run())
                try remove(working)
                working = target
            }
        }
        // 3. The result replaces the store's trees, in this one transaction of the store, after
        //    checking it is at the plan's last version.
        report(stageCount, "replacing the store", 0, 1)
        let result = try Database(path: working, options: workingOptions(pageSize: pageSize))
        defer { result.close() }
        try result.read { from in
            guard let hashes = try NativeStore.metadata(in: from).flatMap(NativeStore.recordedEntityHashes) else {
                throw ArborError(.storeOpen, "the migrated copy of \(path) has no Arbor metadata; the store is as it was")
            }
            guard hashes == StoreModelVersion.entityHashes(of: plan.versions.last!) else {
                throw ArborError(.storeOpen, "the migrated copy of \(path) is not at the plan's last version; the store is as it was")
            }
            for tree in try store.trees() { try store.dropTree(named: tree.name) }
            try store.copyTrees(of: from)
        }
        report(stageCount, "replacing the store", 1, 1)
        let first = stageReports.first
        let fromVersion = first?.fromVersion ?? (oldHistory.last?.version ?? 1)
        let difference = ModelDifference(from: ModelSchema(plan.versions[start]), to: ModelSchema(plan.versions.last!))
        var staged = MigrationReport(fromVersion: fromVersion, toVersion: stageReports.last?.toVersion ?? fromVersion, kind: "staged",
                                     difference: difference, entities: stageReports.last?.entities ?? [],
                                     treesBuilt: stageReports.flatMap(\.treesBuilt), treesDropped: stageReports.flatMap(\.treesDropped),
                                     treesRenamed: stageReports.reduce(into: [:]) { $0.merge($1.treesRenamed) { $1 } },
                                     duration: ContinuousClock.now - started)
        staged.stages = stageReports
        staged.invalidObjects = stageReports.flatMap(\.invalidObjects)
        staged.invalidObjectCount = stageReports.reduce(0) { $0 + $1.invalidObjectCount }
        staged.losses = stageReports.flatMap(\.losses)
        return staged
    }
}

/// A custom stage: the source working file (old model) is read through one context, the
/// destination (new model, made empty) written through another; what can be inferred is copied
/// first, then the plan's code runs, then the destination is saved once and given the source's
/// identifier and history (plus the new version).
private struct CustomStage {
    let stage: Int
    let migrate: @Sendable (MigrationContext) throws -> Void
    let old: ManagedObjectModel
    let new: ManagedObjectModel
    let source: String
    let destination: String
    let options: DatabaseOptions
    let configuration: String?
    let report: (String, Int, Int) -> Void

    func run() throws -> MigrationReport {
        // Long: the stage's order is its argument: open both stores, copy and run the stage's code,
        // save, count, then write the source's identity and history last.
        let started = ContinuousClock.now
        var readOnly = options
        readOnly.readOnly = true
        let sourceStore = try NativeStore(path: source, type: "native", model: old, configuration: configuration, options: readOnly,
                                          migration: .never)
        defer { sourceStore.close() }
        let (identifier, history) = try sourceStore.identityAndModelHistory()
        let destinationStore = try NativeStore(path: destination, type: "native", model: new, configuration: configuration, options: options,
                                               migration: .never, suspendsHistory: true)
        var closed = false
        defer { if !closed { destinationStore.close() } }
        let oldCoordinator = PersistentStoreCoordinator(managedObjectModel: old)
        oldCoordinator.addPersistentStore(sourceStore)
        let newCoordinator = PersistentStoreCoordinator(managedObjectModel: new)
        newCoordinator.addPersistentStore(destinationStore)
        let context = MigrationContext(source: ManagedObjectContext(persistentStoreCoordinator: oldCoordinator),
                                       destination: ManagedObjectContext(persistentStoreCoordinator: newCoordinator), report: report)
        let difference = ModelDifference(from: ModelSchema(old), to: ModelSchema(new))
        let fromVersion = history.last?.version ?? 1
        do {
            try copyInferred(context, difference)
            report("custom", 0, 1)
            try migrate(context)
            report("custom", 1, 1)
            report("saving", 0, 1)
            try context.destination.save()
            report("saving", 1, 1)
        } catch {
            let arborError = error as? ArborError
            throw ArborError(.migrationFailed, "the custom stage from version \(fromVersion) to \(fromVersion + 1) of the store's model failed: "
                                + "\(arborError?.message ?? "\(error)")", detailedErrors: arborError.map { [$0] } ?? [])
        }
        // Counts for the report.
        var counts: [String: Int] = [:]
        for entity in new.entities where !entity.isAbstract {
            var request = FetchRequest<Int>(entityName: entity.name)
            request.includesSubentities = false
            counts[entity.name] = try context.destination.count(for: request)
        }
        context.destination.reset()
        context.source.reset()
        // The source's identity and history, written last.
        let version = StoreModelVersion(version: fromVersion + 1, recorded: Date(), synthesized: false, migration: "custom",
                                        versionHash: new.versionHashString, entityHashes: StoreModelVersion.entityHashes(of: new),
                                        schema: ModelSchema(new))
        try destinationStore.finishStage(identity: identifier, from: sourceStore, history: history + [version])
        destinationStore.close()
        closed = true
        let entities = new.entities.map { entity in
            let oldName = difference.entityMatches[entity.name]
            return MigrationReport.EntityReport(entity: entity.name, renamedFrom: oldName == entity.name ? nil : oldName,
                                                rows: counts[entity.name] ?? 0, rewrittenRows: counts[entity.name] ?? 0)
        }
        return MigrationReport(fromVersion: fromVersion, toVersion: fromVersion + 1, kind: "custom", difference: difference, entities: entities,
                               treesBuilt: [], treesDropped: [], treesRenamed: [:], duration: ContinuousClock.now - started)
    }

    /// Copies every object whose entity the new model keeps, with the attributes whose type is
    /// the same or wider, then the relationships between copies.
    private func copyInferred(_ context: MigrationContext, _ difference: ModelDifference) throws {
        // Long: a plan per entity, then the copies, then the relationships between them: the second
        // and third passes read the plans and source IDs the first one made.
        let destination = context.destination
        // Each new concrete entity continuing an old one, with the attributes copied (new name,
        // old name, widened to) and the relationships (new name, old name).
        var plans: [(entity: EntityDescription, oldName: String, attributes: [(String, String, AttributeType.Kind?)],
                     relationships: [(String, String)])] = []
        for entity in new.entities where !entity.isAbstract {
            guard let oldName = difference.entityMatches[entity.name], let oldEntity = old.entity(named: oldName), !oldEntity.isAbstract else { continue }
            let matches = difference.propertyMatches[entity.name] ?? [:]
            var attributes: [(String, String, AttributeType.Kind?)] = []
            for attribute in entity.attributes where !attribute.isTransient {
                guard let previous = oldEntity.attributesByName[matches[attribute.name] ?? attribute.name], !previous.isTransient else { continue }
                if previous.type.kind == attribute.type.kind, previous.type == attribute.type {
                    attributes.append((attribute.name, previous.name, nil))
                } else if StoreMigration.widens(previous.type.kind, to: attribute.type.kind) {
                    attributes.append((attribute.name, previous.name, attribute.type.kind))
                }
            }
            // A relationship is copied when a lightweight migration would keep it: the same
            // destination and inverse (through renames), cardinality and ordering, both ways.
            var relationships: [(String, String)] = []
            for relationship in entity.relationships {
                guard let previous = oldEntity.relationshipsByName[matches[relationship.name] ?? relationship.name],
                      previous.isToMany == relationship.isToMany, previous.isOrdered == relationship.isOrdered,
                      difference.entityMatches[relationship.destinationEntityName] == previous.destinationEntityName,
                      let inverse = relationship.inverseRelationship, let oldInverse = previous.inverseRelationship,
                      (difference.propertyMatches[inverse.entity?.name ?? ""]?[inverse.name] ?? inverse.name) == oldInverse.name,
                      inverse.isToMany == oldInverse.isToMany, inverse.isOrdered == oldInverse.isOrdered else { continue }
                relationships.append((relationship.name, previous.name))
            }
            plans.append((entity, oldName, attributes, relationships))
        }
        // Each entity's old objects, read once: copied, then related.
        var sourceIDs: [String: [ManagedObjectID]] = [:]
        for plan in plans {
            let ids = try context.sourceIDs(of: plan.oldName, includingSubentities: false)
            sourceIDs[plan.entity.name] = ids
            try context.walk(ids, phase: "copying \(plan.entity.name)") { object in
                let copy = plan.entity.managedObjectClass.init(entity: plan.entity, insertInto: destination)
                for (name, oldName, widened) in plan.attributes {
                    guard var value = try object.value(forKey: oldName) else {
                        // Nil stays nil (not the new object's default), unless now required.
                        if plan.entity.attributesByName[name]?.isOptional == true { try copy.setValue(nil, forKey: name) }
                        continue
                    }
                    if widened == .double, let float = value as? Float { value = Double(float) }
                    if widened != nil, let integer = value as? any BinaryInteger { value = Int64(integer) }
                    try copy.setValue(value, forKey: name)
                }
                context.copies[object.objectID] = copy
            }
        }
        for plan in plans where !plan.relationships.isEmpty {
            try context.walk(sourceIDs[plan.entity.name] ?? [], phase: "relating \(plan.entity.name)") { object in
                guard let copy = context.copies[object.objectID] else { return }
                for (name, oldName) in plan.relationships {
                    let value = try object.value(forKey: oldName)
                    if let related = value as? ManagedObject {
                        try copy.setValue(context.copies[related.objectID], forKey: name)
                    } else if let related = value as? [ManagedObject] {
                        try copy.setValue(related.compactMap { context.copies[$0.objectID] }, forKey: name)
                    } else if let related = value as? Set<ManagedObject> {
                        try copy.setValue(Set(related.compactMap { context.copies[$0.objectID] }), forKey: name)
                    }
                }
            }
        }
    }
}
