import Foundation

/// The versions an application's model has been through, oldest first, and how a store moves
/// from each to the next: a lightweight stage (inferred, as an automatic migration is) or a
/// custom one (your code, with the old and the new objects side by side). A store opened with a
/// plan (``MigrationOptions/plan``, ``PersistentStoreDescription/migrationPlan``) runs every stage
/// from the version it is at to the last, which must be the model it is opened with
/// (docs/migration.md, "Staged and custom migration").
///
/// ```swift
/// let plan = MigrationPlan(startingAt: version1)
///     .lightweight(to: version2)                 // a rename through renamingIdentifier
///     .custom(to: version3) { migration in       // price: String → Double
///         try migration.forEachObject(ofEntity: "Book") { old, new in
///             try new?.setValue(Double(old.value(forKey: "price") as? String ?? ""), forKey: "price")
///         }
///     }
/// var options = MigrationOptions()
/// options.plan = plan
/// let store = try NativeStore(path: path, model: version3, migration: options)
/// ```
///
/// Consecutive lightweight stages run one after the other (each inferred between its two
/// versions, so a chain of renames keeps its objects where one inference from the first version to
/// the last could not). A store one lightweight stage behind migrates in place; otherwise the
/// stages run on a working copy next to the store, under the store's write lock, and the result
/// replaces the store's contents in one engine transaction: a failing stage, an error or a power
/// cut leaves the store as it was. Adjacent versions must differ in their entities' version hashes
/// (a store records which version it is at by them).
public struct MigrationPlan: Sendable {
    /// How a store moves from one version to the next.
    public enum Stage: Sendable {
        /// Inferred from the two versions (the changes a lightweight migration accepts).
        case lightweight
        /// Your code: a ``MigrationContext`` whose source context holds the old version's objects
        /// and whose destination context holds the new version's, already copied wherever the
        /// change can be inferred; the closure finishes the job (converts values, splits or merges
        /// entities, fills new required properties).
        case custom(@Sendable (MigrationContext) throws -> Void)

        var kind: String {
            switch self {
            case .lightweight: "lightweight"
            case .custom: "custom"
            }
        }
    }

    /// The model versions, oldest first.
    public let versions: [ManagedObjectModel]
    /// The stage from each version to the next (one fewer than ``versions``).
    public let stages: [Stage]
    /// The data each stage may drop (``lightweight(to:dropping:)``; empty for custom stages,
    /// whose code decides what it copies).
    public let drops: [Set<MigrationDrop>]
    /// Called as the stages progress (on the thread that opens the store).
    public var progress: (@Sendable (MigrationProgress) -> Void)?

    /// A plan whose first version is `model` (a store made with it needs no stage).
    public init(startingAt model: ManagedObjectModel) {
        versions = [model]
        stages = []
        drops = []
    }

    private init(versions: [ManagedObjectModel], stages: [Stage], drops: [Set<MigrationDrop>], progress: (@Sendable (MigrationProgress) -> Void)?) {
        self.versions = versions
        self.stages = stages
        self.drops = drops
        self.progress = progress
    }

    /// The plan with `model` as its next version, reached by a lightweight (inferred) stage.
    ///
    /// The stage drops no data the store holds unless `dropping` names it: an entity the new
    /// version removes, with its objects and their links (`.entity("Draft")`), or an attribute's
    /// values or a relationship's links (`.property("legacyCode", of: "Book")`), in the old
    /// version's names. Otherwise a store that holds such data is refused, naming what would be
    /// dropped and how much (``ArborError/migrationLosses``); ``NativeStore/verifyMigration(at:to:migration:options:copyAt:)``
    /// reports the same without touching the store.
    public func lightweight(to model: ManagedObjectModel, dropping: Set<MigrationDrop> = []) -> MigrationPlan {
        MigrationPlan(versions: versions + [model], stages: stages + [.lightweight], drops: drops + [dropping], progress: progress)
    }

    /// The plan with `model` as its next version, reached by a custom stage running `migrate`.
    public func custom(to model: ManagedObjectModel, _ migrate: @escaping @Sendable (MigrationContext) throws -> Void) -> MigrationPlan {
        MigrationPlan(versions: versions + [model], stages: stages + [.custom(migrate)], drops: drops + [[]], progress: progress)
    }

    /// The plan, reporting its progress to `handler`.
    public func reportingProgress(_ handler: @escaping @Sendable (MigrationProgress) -> Void) -> MigrationPlan {
        MigrationPlan(versions: versions, stages: stages, drops: drops, progress: handler)
    }

    /// The place in ``versions`` of the version whose entity hashes are `hashes` (the last such),
    /// nil when none is.
    func version(withEntityHashes hashes: [String: String]) -> Int? {
        versions.lastIndex { StoreModelVersion.entityHashes(of: $0) == hashes }
    }

    /// Whether two plans have the same versions and kinds of stages (custom stages' code cannot be
    /// compared).
    func isAlike(_ other: MigrationPlan) -> Bool {
        versions.map(\.versionHash) == other.versions.map(\.versionHash) && stages.map(\.kind) == other.stages.map(\.kind)
            && drops == other.drops
    }
}

/// Where a staged migration is (``MigrationPlan/progress``).
public struct MigrationProgress: Sendable, CustomStringConvertible {
    /// The stage running, from 1, and how many the store needs.
    public let stage: Int
    public let stages: Int
    /// What is being done: `copying the store`, `lightweight`, `copying Book` (a custom
    /// stage's inferred copy), `relating Book`, `custom` (its code; see
    /// ``MigrationContext/forEachObject(ofEntity:_:)``), `saving`, `replacing the store`.
    public let phase: String
    /// Units done and to do in the phase (objects, or 0 of 1 and 1 of 1 around a step that
    /// cannot be counted).
    public let completed: Int
    public let total: Int

    /// One line.
    public var description: String { "stage \(stage) of \(stages): \(phase) \(completed)/\(total)" }
}

/// What a custom stage's code works with: the store's objects in the old model (``source``) and
/// in the new one (``destination``), side by side in one pass.
///
/// Before the code runs, every object whose entity the new model keeps (by name or
/// `renamingIdentifier`) has been copied into ``destination``: each attribute whose type is the
/// same or wider (a nil stays nil), each relationship a lightweight migration would keep (same
/// destination, inverse, cardinality and ordering, through renames) between copied objects. What cannot be inferred is the
/// code's job — values of changed types, new required properties, objects of entities split,
/// merged or removed. The destination is saved once, after the code returns: an invalid object
/// fails the stage (``ArborError/Code/migrationFailed``) and the store is left as it was. Objects
/// copied by a custom stage get new object IDs (a lightweight stage keeps them).
///
/// Not `Sendable`: use it, and its contexts (confinement contexts), only inside the stage's code,
/// which must not open the store being migrated itself (the migration holds its write lock).
public final class MigrationContext {
    /// The store as it is before the stage, in the stage's old model (fetch from it; saving it
    /// is refused).
    public let source: ManagedObjectContext
    /// The store being made, in the stage's new model.
    public let destination: ManagedObjectContext
    /// Each source object's copy, by source object ID.
    var copies: [ManagedObjectID: ManagedObject] = [:]
    let report: (_ phase: String, _ completed: Int, _ total: Int) -> Void

    init(source: ManagedObjectContext, destination: ManagedObjectContext, report: @escaping (String, Int, Int) -> Void) {
        self.source = source
        self.destination = destination
        self.report = report
    }

    /// The old version's model.
    public var sourceModel: ManagedObjectModel { source.persistentStoreCoordinator!.managedObjectModel }
    /// The new version's model.
    public var destinationModel: ManagedObjectModel { destination.persistentStoreCoordinator!.managedObjectModel }

    /// The copy in ``destination`` of a source object (nil: its entity is not kept, or the copy
    /// was deleted).
    public func destinationObject(for sourceObject: ManagedObject) -> ManagedObject? {
        destinationObject(for: sourceObject.objectID)
    }

    /// The copy in ``destination`` of the source object `objectID` names.
    public func destinationObject(for objectID: ManagedObjectID) -> ManagedObject? {
        guard let copy = copies[objectID], !copy.isDeleted else { return nil }
        return copy
    }

    /// Records `object` (inserted in ``destination``) as the copy of `sourceObject`: what
    /// ``destinationObject(for:)-(ManagedObject)`` then returns (the object of a new entity made from an old one,
    /// for the relationships your code sets later).
    public func setDestinationObject(_ object: ManagedObject, for sourceObject: ManagedObject) {
        copies[sourceObject.objectID] = object
    }

    /// Calls `body` with every object of the old model's entity `entityName` (its sub-entities'
    /// included) and its copy (nil when there is none), reporting progress; source objects are
    /// turned back into faults as it goes, so reading a large store does not hold every old row.
    ///
    /// - Throws: ``ArborError/Code/invalidFetchRequest`` for an entity the old model lacks; what
    ///   `body` throws.
    public func forEachObject(ofEntity entityName: String, _ body: (_ source: ManagedObject, _ destination: ManagedObject?) throws -> Void) throws {
        try walk(try sourceIDs(of: entityName, includingSubentities: true), phase: "custom \(entityName)") { object in
            try body(object, destinationObject(for: object.objectID))
        }
    }

    /// The IDs of the source objects of `entityName`.
    func sourceIDs(of entityName: String, includingSubentities: Bool) throws -> [ManagedObjectID] {
        var request = FetchRequest<ManagedObjectID>(entityName: entityName)
        request.includesSubentities = includingSubentities
        return try source.fetch(request)
    }

    /// Calls `body` with the source object of each of `ids`, reporting progress in `phase` and
    /// turning the source's objects back into faults every 1,024, so that walking a large store
    /// does not hold every old row.
    func walk(_ ids: [ManagedObjectID], phase: String, _ body: (ManagedObject) throws -> Void) throws {
        for (done, id) in ids.enumerated() {
            if done % 1024 == 0 {
                report(phase, done, ids.count)
                if done > 0 { source.refreshAllObjects() }
            }
            try body(source.object(with: id))
        }
        report(phase, ids.count, ids.count)
        source.refreshAllObjects()
    }

    /// Reports progress of your own steps (``MigrationPlan/progress``).
    public func reportProgress(_ phase: String, completed: Int, of total: Int) {
        report(phase, completed, total)
    }
}
