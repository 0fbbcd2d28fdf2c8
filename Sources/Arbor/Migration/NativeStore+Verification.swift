import ArborStore
import Foundation

/// What migrating a copy of a store showed (``NativeStore/verifyMigration(at:to:migration:options:copyAt:)``).
public struct MigrationVerification: Sendable, CustomStringConvertible {
    /// The objects of each entity (its own, not its sub-entities') before, by the store's model's
    /// names (empty when the store's model could not be read: made before stores kept it).
    public let objectsBefore: [String: Int]
    /// The same after the migration, by the new model's names (empty when it failed).
    public let objectsAfter: [String: Int]
    /// What the migration did (nil when it failed, or there was nothing to do).
    public let migration: MigrationReport?
    /// Why the migration would fail (nil: it succeeded) — rows that do not allow the new model,
    /// a change that cannot be inferred, a failing custom stage — each naming what is wrong.
    public let failure: ArborError?
    /// How long the migration of the copy took.
    public let duration: Duration
    /// The data the migration drops, or would drop: each entity's objects, attribute's values and
    /// relationship's links that the new model removes, with their amounts. A loss no plan's
    /// stage allows (``MigrationLoss/isAllowed`` false) is why the migration fails.
    public let losses: [MigrationLoss]

    /// Whether the store would migrate.
    public var succeeded: Bool { failure == nil }

    /// Values of kept objects that break the new model's validation rules
    /// (``MigrationReport/invalidObjects``).
    public var invalidObjects: [ArborError] { migration?.invalidObjects ?? [] }

    /// Several lines: the outcome, then each entity's objects before → after (before only, when
    /// the migration fails), then what it drops or would drop.
    public var description: String {
        var lines = [failure.map { "the migration fails: \($0.message)" } ?? migration.map { "the migration succeeds: \($0)" } ?? "nothing to migrate"]
        if failure != nil {
            for (name, count) in objectsBefore.sorted(by: { $0.key < $1.key }) { lines.append("  \(name): \(count) object\(count == 1 ? "" : "s")") }
        } else {
            let renamed = Dictionary((migration?.entities ?? []).compactMap { entity in entity.renamedFrom.map { ($0, entity.entity) } },
                                     uniquingKeysWith: { first, _ in first })
            for name in Set(objectsBefore.keys.map { renamed[$0] ?? $0 }).union(objectsAfter.keys).sorted() {
                let was = renamed.first { $0.value == name }?.key ?? name
                let before = objectsBefore[was].map(String.init) ?? "new"
                let after = objectsAfter[name].map(String.init) ?? "removed"
                lines.append("  \(name): \(before) → \(after)")
            }
        }
        for loss in losses {
            lines.append("  \(failure == nil ? "drops" : loss.isAllowed ? "would drop (allowed)" : "would drop") \(loss)")
        }
        if let count = migration?.invalidObjectCount, count > 0 {
            lines.append("  \(count) value\(count == 1 ? "" : "s") break the new validation rules: "
                         + invalidObjects.map(\.message).joined(separator: "; "))
        }
        lines.append("  in \(duration)")
        return lines.joined(separator: "\n")
    }
}

extension NativeStore {
    /// Migrates a copy of the store at `path` to `model` (with `migration`'s flags and plan) and
    /// reports what happened — each entity's objects before and after, the values breaking the
    /// new validation rules, the failure if any, the time — without writing to the store: it is
    /// opened read-only, its trees copied into `copyAt` (a file that must not exist yet; a new
    /// file in the temporary directory when nil), and the copy deleted afterwards.
    ///
    /// Run it before shipping a new model version, on stores made by the earlier ones.
    ///
    /// - Throws: ``ArborError/Code/misuse`` when `copyAt` exists; ``ArborError/Code/storeOpen``
    ///   when the store cannot be read or copied; a failing
    ///   migration is not thrown but reported (``MigrationVerification/failure``).
    public static func verifyMigration(at path: String, to model: ManagedObjectModel, migration: MigrationOptions = MigrationOptions(),
                                       options: DatabaseOptions = DatabaseOptions(), copyAt: String? = nil) throws -> MigrationVerification {
        let copy = copyAt ?? (NSTemporaryDirectory() as NSString).appendingPathComponent("arbor-verify-\(UUID().uuidString).arbor")
        // The copy is deleted afterwards: never an existing file (the store itself least of all).
        guard copy != path, (try? options.fileSystem.exists(copy)) != true else {
            throw ArborError(.misuse, "the copy to verify \(path)'s migration on must be a new file; \(copy) exists")
        }
        var writable = options
        writable.readOnly = false
        writable.create = true
        func remove() {
            for file in [copy, copy + "-journal", copy + ".migration-a", copy + ".migration-b", copy + ".migration-a-journal",
                         copy + ".migration-b-journal"] where (try? options.fileSystem.exists(file)) == true {
                try? options.fileSystem.delete(file)
            }
        }
        remove()
        defer { remove() }
        // The copy: every tree, read in one transaction of the store opened read-only.
        var readOnly = options
        readOnly.readOnly = true
        readOnly.create = false
        try storeError("copy \(path) to verify its migration", code: .storeOpen) {
            let original = try Database(path: path, options: readOnly)
            defer { original.close() }
            try original.read { from in
                writable.pageSize = from.header.pageSize
                let target = try Database(path: copy, options: writable)
                defer { target.close() }
                try target.write { to in
                    try to.copyTrees(of: from)
                }
            }
        }
        // Before: the store's own model, from its history.
        var before: [String: Int] = [:]
        if let old = try? modelHistory(at: copy, options: readOnly).last?.model(),
           let store = try? NativeStore(path: copy, model: old, options: readOnly, migration: .never) {
            before = try objectCounts(store, model: old)
            store.close()
        }
        let started = ContinuousClock.now
        let migrated: NativeStore
        do {
            migrated = try NativeStore(path: copy, type: "native", model: model, configuration: nil, options: writable, migration: migration,
                                       suspendsHistory: true)
        } catch let error as ArborError {
            let failure = error.naming(copy, as: path)
            return MigrationVerification(objectsBefore: before, objectsAfter: [:], migration: nil, failure: failure,
                                         duration: ContinuousClock.now - started, losses: failure.migrationLosses)
        }
        let duration = ContinuousClock.now - started
        defer { migrated.close() }
        return MigrationVerification(objectsBefore: before, objectsAfter: try objectCounts(migrated, model: model), migration: migrated.migration,
                                     failure: nil, duration: duration, losses: migrated.migration?.losses ?? [])
    }

    /// The objects of each concrete entity of `model` in `store` (sub-entities counted apart).
    private static func objectCounts(_ store: NativeStore, model: ManagedObjectModel) throws -> [String: Int] {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        coordinator.addPersistentStore(store)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var counts: [String: Int] = [:]
        for entity in model.entities where !entity.isAbstract {
            var request = FetchRequest<Int>(entityName: entity.name)
            request.includesSubentities = false
            counts[entity.name] = try context.count(for: request)
        }
        return counts
    }
}

extension ArborError {
    /// The error with `copy`, a file Arbor made, named as `original` in its messages (a
    /// verification's failure names the store it was asked about, not its temporary copy).
    func naming(_ copy: String, as original: String) -> ArborError {
        var error = self
        error.message = message.replacingOccurrences(of: copy, with: original)
        error.detailedErrors = detailedErrors.map { $0.naming(copy, as: original) }
        return error
    }
}
