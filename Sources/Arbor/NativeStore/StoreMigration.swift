import ArborStore
import Foundation

// Safety: The row bytes `oldEntity(of:key:oldRoot:)` reads are lent by the engine for the call and
// not kept.

/// How a store opened with a model other than its own may migrate (Core Data's
/// `NSMigratePersistentStoresAutomaticallyOption` and `NSInferMappingModelAutomaticallyOption`;
/// docs/migration.md).
public struct MigrationOptions: Sendable, Equatable {
    /// Whether a store whose model differs migrates to the new model when it opens (true, as in
    /// Core Data). When false, such a store is refused with ``ArborError/Code/incompatibleModel``.
    public var shouldMigrateStoreAutomatically = true
    /// Whether the migration may be inferred from the two models (a lightweight migration; true,
    /// as in Core Data). When false, a store needing a migration is refused: no migration plan
    /// names one yet.
    public var shouldInferMappingModelAutomatically = true
    /// The versions of the model and the stages between them (nil: none). A store at one of its
    /// versions runs every stage from there to the last, which must be the model the store is
    /// opened with; lightweight stages run even when ``shouldInferMappingModelAutomatically`` is
    /// false (the plan names them). A store at no version of the plan migrates as without one.
    public var plan: MigrationPlan?
    /// What becomes of existing objects whose values break a validation rule that changed
    /// (minimum, maximum, length, pattern): kept and reported (``MigrationReport/invalidObjects``,
    /// and a warning in the log), or the migration fails naming them. Either way they are never
    /// silently kept or dropped.
    public var invalidObjects = InvalidObjects.keep
    /// The data an inferred migration may drop: a plan's stage's (``MigrationPlan/lightweight(to:dropping:)``),
    /// set where the stage runs; empty for an automatic migration, which drops nothing.
    var drops: Set<MigrationDrop> = []

    /// What a migration does with objects that break the new model's validation rules.
    public enum InvalidObjects: Sendable, Equatable {
        /// Keep them, and report them (they fail validation when next saved changed).
        case keep
        /// Fail the migration (``ArborError/Code/migrationFailed``), naming them; the store is left
        /// as it was.
        case fail
    }

    /// The defaults: migrate automatically, inferring the migration.
    public init() {}

    /// Equal flags, and plans with the same versions and kinds of stages.
    public static func == (lhs: MigrationOptions, rhs: MigrationOptions) -> Bool {
        lhs.shouldMigrateStoreAutomatically == rhs.shouldMigrateStoreAutomatically
            && lhs.shouldInferMappingModelAutomatically == rhs.shouldInferMappingModelAutomatically && lhs.invalidObjects == rhs.invalidObjects
            && lhs.drops == rhs.drops && (lhs.plan == nil) == (rhs.plan == nil) && (lhs.plan.map { rhs.plan?.isAlike($0) ?? false } ?? true)
    }

    /// Migration turned off: a store opens only with its own model.
    public static var never: MigrationOptions {
        var options = MigrationOptions()
        options.shouldMigrateStoreAutomatically = false
        return options
    }
}

/// What a migration did to a store (``NativeStore/migration``), entity by entity.
public struct MigrationReport: Sendable, CustomStringConvertible {
    /// One entity of the new model.
    public struct EntityReport: Sendable, Equatable {
        /// The entity (its name in the new model).
        public let entity: String
        /// Its name in the store's model, when it was renamed (nil when it has the same name, or
        /// is new).
        public let renamedFrom: String?
        /// Its rows after the migration, when the migration read them (nil: its rows were not
        /// read — the changes needed neither a rewrite nor a check).
        public let rows: Int?
        /// How many of its rows were rewritten (0 when the change needed no rewrite).
        public let rewrittenRows: Int
    }

    /// The store's model version before and after (in its history).
    public let fromVersion: Int
    public let toVersion: Int
    /// `lightweight`, `custom` (a custom stage of a plan) or `staged` (a plan's stages, in
    /// ``stages``).
    public let kind: String
    /// What changed.
    public let difference: ModelDifference
    /// Each entity of the new model.
    public let entities: [EntityReport]
    /// The index, uniqueness and foreign-key trees built from the rows.
    public let treesBuilt: [String]
    /// The trees dropped.
    public let treesDropped: [String]
    /// The trees renamed, old name → new name.
    public let treesRenamed: [String: String]
    /// How long the migration took, planning included.
    public let duration: Duration
    /// Objects whose values break a validation rule that changed, kept
    /// (``MigrationOptions/InvalidObjects/keep``): up to ten per attribute, each error naming
    /// the object, the attribute, the value and the rule.
    public internal(set) var invalidObjects: [ArborError] = []
    /// How many values break such a rule, in all (an object breaking two rules counts twice).
    public internal(set) var invalidObjectCount = 0
    /// A migration through a plan (`staged`): each stage's report, in order (empty otherwise).
    public internal(set) var stages: [MigrationReport] = []
    /// The data the migration dropped, each allowed by the plan's stage
    /// (``MigrationPlan/lightweight(to:dropping:)``); a staged migration's are its stages'.
    public internal(set) var losses: [MigrationLoss] = []

    /// One line.
    public var description: String {
        let rewritten = entities.reduce(0) { $0 + $1.rewrittenRows }
        return "\(kind) migration from model version \(fromVersion) to \(toVersion): \(difference.changes.count) change"
            + "\(difference.changes.count == 1 ? "" : "s"), \(rewritten) row\(rewritten == 1 ? "" : "s") rewritten, "
            + "\(treesBuilt.count) tree\(treesBuilt.count == 1 ? "" : "s") built, \(treesDropped.count) dropped, "
            + "\(treesRenamed.count) renamed\(losses.isEmpty ? "" : ", dropping \(losses.map(\.description).joined(separator: "; "))"), in \(duration)"
    }
}

/// A lightweight migration of a store from the model it records to another, planned from the two
/// models and the store's metadata before anything is read or written (docs/migration.md,
/// "Lightweight migration (inferred)"): which changes can be inferred, the new recorded column
/// orders, fills and entity list, which hierarchies' rows are rewritten or checked, and what
/// becomes of every tree. ``NativeStore`` runs it (NativeStore+Migration.swift).
struct StoreMigration {
    /// The store's model (from its recorded schema) and the new one.
    let old: ManagedObjectModel
    let new: ManagedObjectModel
    let difference: ModelDifference
    /// The store's recorded `hashes` before the migration (checked again under the write lock).
    let oldHashBytes: [UInt8]
    /// The store's history (the new version is appended).
    let history: [StoreModelVersion]
    /// The store's model version before the migration (the history's newest).
    var fromVersion: Int { history.last?.version ?? 1 }
    let oldLayout: RowFormat.Layout
    /// A layout-3 store's entity list before (empty for layouts 1 and 2).
    let oldEntities: [String]
    /// Each old entity's row format, by its name.
    let oldFormats: [String: RowFormat]

    /// What the store records after it: the entity list, each entity's column order and fills.
    let entities: [String]
    let columns: [String: [String]]
    let fills: [String: [String: AttributeValue]]

    /// Each hierarchy the store keeps: its old root's name and its new one's.
    let hierarchies: [(old: String, new: String)]
    /// The new roots whose rows are rewritten whatever the rows hold (a column removed, a to-one
    /// whose destination gained or lost sub-entities, rows that gain or lose their entity
    /// prefix, a store of layout 1 or 2).
    let rewritten: Set<String>
    /// Attributes that become required (added, or optional → required), by new entity: the value
    /// a nil gets (their default), or nil when a nil fails the migration.
    let newlyRequired: [String: [(name: String, fill: AttributeValue?)]]
    /// Relationships that become required (added, or optional → required), by new entity.
    let newlyRequiredRelationships: [String: [String]]
    /// Attributes whose existing values are checked against value rules that changed (or a
    /// new attribute's default), by new entity.
    let ruleChecks: [String: [String]]
    /// What becomes of objects whose values break those rules.
    var invalidObjects = MigrationOptions.InvalidObjects.keep
    /// Whether only value rules changed (the model's hashes are the store's): the values are
    /// checked and the rules recorded, with no new version in the history.
    var rulesOnly = false
    /// Old entities whose rows fail the migration (removed sub-entities, entities made abstract,
    /// entities gaining a required relationship): the reason, by old entity name.
    let mustBeEmpty: [String: String]

    /// Old trees renamed (old name → new name), dropped, and new derived trees built from rows.
    let renamedTrees: [String: String]
    let droppedTrees: Set<String>
    let builtTrees: Set<String>
    /// Derived trees kept only when they exist in the file (built otherwise), by new name.
    let keptDerivedTrees: Set<String>

    /// What the migration removes (counted before anything is written), and the drops a plan's
    /// stage allows (``MigrationPlan/lightweight(to:dropping:)``).
    let losses: [PlannedLoss]
    var allowedDrops: Set<MigrationDrop> = []

    /// The new entity's name for an old one (nil: removed).
    let newEntityName: [String: String]
    /// For each new entity, the old name of each of its stored properties that continues one.
    let oldPropertyName: [String: [String: String]]

    /// Whether the hierarchy of new root `root` must be read (rewritten or checked).
    func reads(_ root: EntityDescription) -> Bool {
        rewritten.contains(root.name) || checks(root)
    }

    /// Whether the rows of the hierarchy of new root `root` are checked before anything is
    /// written: something in the new model may refuse them (a value made required, a rule, a
    /// derived tree built from them, an entity that can have no rows). A hierarchy that is only
    /// rewritten is not: copying its columns cannot fail on a sound row.
    func checks(_ root: EntityDescription) -> Bool {
        !builtTrees.isDisjoint(with: Self.derivedTrees(of: root).map(\.name))
            || root.hierarchy.contains { newlyRequired[$0.name] != nil || newlyRequiredRelationships[$0.name] != nil || ruleChecks[$0.name] != nil }
            || oldHierarchy(of: root).contains { mustBeEmpty[$0.name] != nil }
    }

    /// The old entities of the hierarchy whose new root is `root`.
    func oldHierarchy(of root: EntityDescription) -> [EntityDescription] {
        guard let pair = hierarchies.first(where: { $0.new == root.name }), let oldRoot = old.entity(named: pair.old) else { return [] }
        return oldRoot.hierarchy
    }

    /// The old entity of the row `bytes` (primary key `key`) of the old hierarchy of `oldRoot`,
    /// as the old layout names it.
    func oldEntity(of bytes: UnsafeRawBufferPointer, key: Int64, oldRoot: EntityDescription) throws -> EntityDescription {
        if oldLayout == .records && oldRoot.subentities.isEmpty { return oldRoot }
        let oldName: String?
        if oldLayout != .records {
            oldName = RowFormat.entityName(of: bytes)
        } else {
            var position = 0
            oldName = RecordEncoding.readVarint(bytes, &position).flatMap { index in
                index < UInt64(oldEntities.count) ? oldEntities[Int(index)] : nil
            }
        }
        guard let oldName, let oldEntity = old.entity(named: oldName), oldEntity.rootEntity === oldRoot else {
            throw ArborError(.store, "the row \(key) of \(NativeStore.rowsTree(oldRoot)) is malformed: it names no entity of the store's model")
        }
        return oldEntity
    }

    // MARK: Planning

    /// Plans the migration of a store whose metadata is `metadata` (recorded `layout`, schema
    /// `schema`, `hashes`) to `model`, in the steps of ``Planning``.
    ///
    /// - Throws: ``ArborError/Code/incompatibleModel`` naming every change that cannot be
    ///   inferred; ``ArborError/Code/storeOpen`` for damaged metadata.
    static func plan(metadata: Tree, path: String, layout: RowFormat.Layout, schema: ModelSchema, hashBytes: [UInt8],
                     history recorded: [StoreModelVersion]?, to model: ManagedObjectModel, rulesOnly: Bool = false) throws -> StoreMigration {
        // 1. The two models, and the names that join them both ways.
        let planning = try Planning(schema: schema, model: model, layout: layout, path: path)
        let old = planning.old
        // 2. What cannot be inferred (refused before anything is read), and what the rows must allow.
        let requirements = try planning.requirements(rulesOnly: rulesOnly)
        // 3. What the store records: its entity list, old formats, column orders and fills.
        let state = try planning.recordedState(in: metadata)
        // 4. The hierarchies kept, those rewritten whatever their rows hold, the new entity list.
        let kept = planning.hierarchies()
        var rewritten = kept.rewritten
        // 5. The new column orders and fills (a hierarchy whose columns do not fit is rewritten).
        let (columns, fills) = planning.columnOrders(state, rewritten: &rewritten)
        // 6. What becomes of every tree.
        let trees = planning.trees(hierarchies: kept.pairs, newlyRequired: requirements.newlyRequired)
        return StoreMigration(old: old, new: model, difference: planning.difference, oldHashBytes: hashBytes,
                              history: recorded ?? [StoreModelVersion(first: old, recorded: nil, synthesized: true)],
                              oldLayout: layout, oldEntities: state.entities, oldFormats: state.formats,
                              entities: planning.entityList(after: state), columns: columns, fills: fills,
                              hierarchies: kept.pairs, rewritten: rewritten, newlyRequired: requirements.newlyRequired,
                              newlyRequiredRelationships: requirements.newlyRequiredRelationships, ruleChecks: requirements.ruleChecks,
                              mustBeEmpty: requirements.mustBeEmpty, renamedTrees: trees.renamed, droppedTrees: trees.dropped,
                              builtTrees: trees.built, keptDerivedTrees: trees.kept,
                              losses: PlannedLoss.plan(old: old, new: model, newEntityName: planning.newEntityName,
                                                       oldPropertyName: planning.oldPropertyName),
                              newEntityName: planning.newEntityName, oldPropertyName: planning.oldPropertyName)
    }

    /// `value` as an attribute of `kind` reads it from a record (a widened kind's value).
    static func value(_ value: AttributeValue, as kind: AttributeType.Kind) -> AttributeValue {
        RowFormat.attributeValue(ofColumn: RowFormat.column(of: value), kind: kind) ?? value
    }

    /// Whether values of `old` read as `new` unchanged (records store integers as wide as they
    /// need, and every floating-point number as a double).
    static func widens(_ old: AttributeType.Kind, to new: AttributeType.Kind) -> Bool {
        switch (old, new) {
        case (.integer16, .integer32), (.integer16, .integer64), (.integer32, .integer64), (.float, .double): true
        default: false
        }
    }

    // MARK: Derived trees

    /// A tree built from a hierarchy's rows — an index, a uniqueness constraint's or a to-one's
    /// foreign keys — and what it holds: which entities' rows have entries, and of which keys.
    struct DerivedTree: Equatable {
        let name: String
        let kind: StoreIndex.Kind
        /// The hierarchy's root.
        let root: String
        /// The indexed properties (for a foreign-key tree, the relationship and its declaring
        /// entity).
        let keys: [String]
        let declaring: String?
        let folded: Bool
        /// The entities whose rows have entries, sorted.
        let entities: [String]

        /// The same tree in another model's names (nil when one of them has none there). The
        /// name is the one the new model gives such a tree.
        func translated(entity: (String) -> String?, property: (String, String) -> String?) -> DerivedTree? {
            guard let newRoot = entity(root) else { return nil }
            let newEntities = entities.compactMap(entity).sorted()
            // Keys are properties of the root's hierarchy: translated in the entity that has them.
            let keyEntity = declaring.flatMap(entity) ?? newEntities.first ?? newRoot
            let newKeys = keys.compactMap { property($0, keyEntity) }
            guard newKeys.count == keys.count else { return nil }
            let newDeclaring = declaring.flatMap(entity)
            if declaring != nil && newDeclaring == nil { return nil }
            let name: String = switch kind {
            case .index: NativeStore.indexTree(root: newRoot, keys: newKeys, folded: folded)
            case .unique: NativeStore.uniqueTree(root: newRoot, keys: newKeys)
            case .foreignKey: NativeStore.foreignKeyTree(entity: newDeclaring ?? "?", relationship: newKeys.first ?? "?")
            }
            return DerivedTree(name: name, kind: kind, root: newRoot, keys: newKeys, declaring: newDeclaring, folded: folded, entities: newEntities)
        }
    }

    /// The derived trees of the hierarchy of `root`, each once.
    static func derivedTrees(of root: EntityDescription) -> [DerivedTree] {
        var byName: [String: DerivedTree] = [:]
        var order: [String] = []
        func add(_ name: String, _ kind: StoreIndex.Kind, keys: [String], declaring: String?, folded: Bool, entity: String) {
            if let existing = byName[name] {
                byName[name] = DerivedTree(name: name, kind: kind, root: root.name, keys: keys, declaring: declaring, folded: folded,
                                           entities: (existing.entities + [entity]).sorted())
            } else {
                order.append(name)
                byName[name] = DerivedTree(name: name, kind: kind, root: root.name, keys: keys, declaring: declaring, folded: folded, entities: [entity])
            }
        }
        for entity in root.hierarchy {
            for index in NativeStore.indexes(of: entity) {
                add(index.tree, .index, keys: index.keys, declaring: nil, folded: index.folded, entity: entity.name)
            }
            for constraint in entity.uniquenessConstraints {
                add(NativeStore.uniqueTree(entity, constraint), .unique, keys: constraint, declaring: nil, folded: false, entity: entity.name)
            }
            for relationship in entity.relationships where NativeStore.isIndexedForeignKey(relationship) {
                add(NativeStore.foreignKeyTree(relationship), .foreignKey, keys: [relationship.name],
                    declaring: relationship.entity?.name, folded: false, entity: entity.name)
            }
        }
        return order.compactMap { byName[$0] }
    }
}

extension EntityDescription {
    /// The entity and every entity below it.
    var hierarchy: [EntityDescription] { [self] + subentities.flatMap(\.hierarchy) }

    /// The entity (itself or an ancestor) that declares property `name`.
    func declaringEntity(of name: String) -> EntityDescription? {
        var entity: EntityDescription? = self
        while let current = entity {
            if current.ownAttributes.contains(where: { $0.name == name }) || current.ownRelationships.contains(where: { $0.name == name }) {
                return current
            }
            entity = current.superentity
        }
        return nil
    }
}
