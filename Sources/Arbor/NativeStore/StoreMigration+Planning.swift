import ArborStore
import Foundation

extension StoreMigration {
    /// The planning of a migration (``StoreMigration/plan(metadata:path:layout:schema:hashBytes:history:to:rulesOnly:)``),
    /// one step per method: the two models and the names that join them, which every step reads.
    struct Planning {
        /// The store's model (from its recorded schema) and the new one.
        let old: ManagedObjectModel
        let new: ManagedObjectModel
        /// The store's recorded schema, with the value rules it was made with.
        let schema: ModelSchema
        let difference: ModelDifference
        let layout: RowFormat.Layout
        let path: String
        /// The new entity's name for an old one (nil: removed).
        let newEntityName: [String: String]
        /// For each new entity, the old name of each of its stored properties that continues one.
        let oldPropertyName: [String: [String: String]]

        /// Step 1: reads the store's model from `schema` and matches its names with `model`'s,
        /// both ways.
        ///
        /// - Throws: ``ArborError/Code/storeOpen`` when the recorded model is unreadable.
        init(schema: ModelSchema, model: ManagedObjectModel, layout: RowFormat.Layout, path: String) throws {
            do {
                old = try schema.model()
            } catch {
                throw ArborError(.storeOpen, "the model recorded in \(path) is unreadable, so the store cannot be migrated: \(error)")
            }
            new = model
            self.schema = schema
            self.layout = layout
            self.path = path
            difference = ModelDifference(from: schema, to: ModelSchema(model))
            var newEntityName: [String: String] = [:]
            for (new, old) in difference.entityMatches { newEntityName[old] = new }
            self.newEntityName = newEntityName
            var oldPropertyName: [String: [String: String]] = [:]
            for entity in model.entities {
                guard let oldEntity = difference.entityMatches[entity.name].flatMap(old.entity(named:)) else { continue }
                oldPropertyName[entity.name] = Self.oldNames(of: entity, in: oldEntity, difference: difference)
            }
            self.oldPropertyName = oldPropertyName
        }

        /// The old name of each stored property of `entity` that continues one of `oldEntity`.
        private static func oldNames(of entity: EntityDescription, in oldEntity: EntityDescription, difference: ModelDifference) -> [String: String] {
            var names: [String: String] = [:]
            for property in entity.attributes.map(\.name) + entity.relationships.map(\.name) {
                // A property is matched where it is declared (inherited ones in their ancestor);
                // an attribute moved up or down the hierarchy keeps its values under its name.
                if let declaring = entity.declaringEntity(of: property), let oldName = difference.propertyMatches[declaring.name]?[property],
                   oldEntity.attributesByName[oldName] != nil || oldEntity.relationshipsByName[oldName] != nil {
                    names[property] = oldName
                } else if let attribute = entity.attributesByName[property], let was = oldEntity.attributesByName[property],
                          was.type.kind == attribute.type.kind || StoreMigration.widens(was.type.kind, to: attribute.type.kind) {
                    names[property] = property
                }
            }
            return names
        }

        /// The new name of the old property `oldName` in the new entity `entity` (nil: none
        /// continues it).
        func newName(ofProperty oldName: String, in entity: EntityDescription) -> String? {
            oldPropertyName[entity.name]?.first { $0.value == oldName }?.key
        }

        /// The old entity the new entity `entity` continues (nil: it is new).
        func oldEntity(of entity: EntityDescription) -> EntityDescription? {
            difference.entityMatches[entity.name].flatMap(old.entity(named:))
        }

        // MARK: Step 2: what the rows must allow

        /// What the new model asks of the store's rows, and the changes it makes that cannot be
        /// inferred.
        struct Requirements {
            var refused: [(ModelDifference.Change, String)] = []
            /// Old entities whose rows fail the migration: the reason, by old entity name.
            var mustBeEmpty: [String: String] = [:]
            /// Attributes that become required, by new entity, with the value a nil gets.
            var newlyRequired: [String: [(name: String, fill: AttributeValue?)]] = [:]
            /// To-one relationships that become required, by new entity.
            var newlyRequiredRelationships: [String: [String]] = [:]
            /// Attributes whose values are checked against changed value rules, by new entity.
            var ruleChecks: [String: [String]] = [:]
        }

        /// Step 2: what each change of the difference asks of the rows.
        ///
        /// - Throws: ``ArborError/Code/incompatibleModel`` naming every change that cannot be
        ///   inferred.
        func requirements(rulesOnly: Bool) throws -> Requirements {
            var found = Requirements()
            for change in difference.changes {
                let entity = new.entity(named: change.entity)
                switch change.kind {
                case .entityRemoved: noteRemoved(change, &found)
                case .entityChanged: noteEntityChanged(change, entity, &found)
                case .attributeChanged: noteAttributeChanged(change, entity, &found)
                case .attributeAdded: noteAttributeAdded(change, entity, &found)
                case .relationshipAdded: noteRelationshipAdded(change, entity, &found)
                case .relationshipChanged: noteRelationshipChanged(change, entity, rulesOnly: rulesOnly, &found)
                case .entityAdded, .entityRenamed, .attributeRemoved, .attributeRenamed, .relationshipRemoved, .relationshipRenamed,
                     .uniquenessAdded, .uniquenessRemoved, .indexAdded, .indexRemoved:
                    break
                }
            }
            // An old hierarchy whose root is removed while entities of it stay changes their
            // parent: refused above. One whose root stays keeps its tree.
            guard found.refused.isEmpty else { throw refusal(found.refused) }
            return found
        }

        /// The error naming every change that cannot be inferred, each with why.
        private func refusal(_ refused: [(ModelDifference.Change, String)]) -> ArborError {
            let details = refused.map { change, why in
                ArborError(.incompatibleModel, "\(change.description): \(why)", entity: change.entity, key: change.name)
            }
            return ArborError(.incompatibleModel,
                              "\(path) cannot be migrated to this model by inference (\(refused.count) change\(refused.count == 1 ? "" : "s") "
                                + "cannot be inferred: \(refused.map { "\($0.0.description): \($0.1)" }.joined(separator: "; ")))",
                              detailedErrors: details)
        }

        private func noteRemoved(_ change: ModelDifference.Change, _ found: inout Requirements) {
            guard let removed = old.entity(named: change.entity), removed.superentity != nil else { return }
            found.mustBeEmpty[removed.name] = "\(removed.name) is removed from the model and was a sub-entity: its objects cannot simply be dropped (a custom migration stage can move them)"
        }

        private func noteEntityChanged(_ change: ModelDifference.Change, _ entity: EntityDescription?, _ found: inout Requirements) {
            guard let entity, let oldEntity = oldEntity(of: entity) else { return }
            if oldEntity.superentityName.map({ newEntityName[$0] ?? $0 }) != entity.superentityName {
                found.refused.append((change, "moving an entity to another parent needs a custom migration stage (its rows change trees and keys)"))
            }
            if entity.isAbstract && !oldEntity.isAbstract {
                found.mustBeEmpty[oldEntity.name] = "\(entity.name) becomes abstract, so it can have no objects of its own"
            }
        }

        private func noteAttributeChanged(_ change: ModelDifference.Change, _ entity: EntityDescription?, _ found: inout Requirements) {
            guard let entity, let name = change.name, let attribute = entity.attributesByName[name],
                  let oldName = oldPropertyName[entity.name]?[name], let oldEntity = oldEntity(of: entity),
                  let oldAttribute = oldEntity.attributesByName[oldName] else {
                found.refused.append((change, "an attribute cannot become a relationship or back by inference (a custom migration stage can)"))
                return
            }
            if oldAttribute.type.kind != attribute.type.kind && !StoreMigration.widens(oldAttribute.type.kind, to: attribute.type.kind) {
                found.refused.append((change, "\(oldAttribute.type.kind) → \(attribute.type.kind) is not a widening (only integer16 → integer32 → integer64 and float → double are inferred)"))
            } else if attribute.type.kind == .transformable && oldAttribute.type.valueTypeName != attribute.type.valueTypeName {
                found.refused.append((change, "a transformable's values are encoded \(oldAttribute.type.valueTypeName) values; decoding them as \(attribute.type.valueTypeName) needs a custom migration stage"))
            }
            if (oldAttribute.isOptional || oldAttribute.isTransient) && !attribute.isOptional && !attribute.isTransient {
                // Sub-entities inherit it: their rows are checked too.
                for inheriting in entity.hierarchy { found.newlyRequired[inheriting.name, default: []].append((name, attribute.defaultValue)) }
            }
            // Value rules that changed (the store's schema records the rules it was made with):
            // existing values are checked against the new ones.
            let oldDeclaring = oldEntity.declaringEntity(of: oldName)?.name ?? oldEntity.name
            let oldRules = schema.entities.first { $0.name == oldDeclaring }?.attributes.first { $0.name == oldName }?.rules
            if !attribute.isTransient, let rules = Validation.rulesDescription(attribute), rules != oldRules {
                for inheriting in entity.hierarchy { found.ruleChecks[inheriting.name, default: []].append(name) }
            }
        }

        private func noteAttributeAdded(_ change: ModelDifference.Change, _ entity: EntityDescription?, _ found: inout Requirements) {
            guard let entity, let name = change.name, let attribute = entity.attributesByName[name] else { return }
            if !attribute.isOptional && !attribute.isTransient {
                for inheriting in entity.hierarchy { found.newlyRequired[inheriting.name, default: []].append((name, attribute.defaultValue)) }
            }
            // Existing objects read the default: it is checked against the rules too.
            if !attribute.isTransient, attribute.defaultValue != nil, Validation.rulesDescription(attribute) != nil {
                for inheriting in entity.hierarchy { found.ruleChecks[inheriting.name, default: []].append(name) }
            }
        }

        private func noteRelationshipAdded(_ change: ModelDifference.Change, _ entity: EntityDescription?, _ found: inout Requirements) {
            guard let entity, let name = change.name, let relationship = entity.relationshipsByName[name] else { return }
            if relationship.isToMany {
                // Existing objects have none: only entities without objects can gain it.
                guard !relationship.isOptional || relationship.minimumCount > 0 else { return }
                for inheriting in entity.hierarchy {
                    guard let oldName = difference.entityMatches[inheriting.name] else { continue }
                    found.mustBeEmpty[oldName] = "\(inheriting.name) gains the required to-many relationship \(name), which its existing objects cannot have"
                }
            } else if !relationship.isOptional {
                for inheriting in entity.hierarchy { found.newlyRequiredRelationships[inheriting.name, default: []].append(name) }
            }
        }

        private func noteRelationshipChanged(_ change: ModelDifference.Change, _ entity: EntityDescription?, rulesOnly: Bool,
                                             _ found: inout Requirements) {
            guard let entity, let name = change.name, let relationship = entity.relationshipsByName[name],
                  let oldName = oldPropertyName[entity.name]?[name],
                  let oldRelationship = oldEntity(of: entity)?.relationshipsByName[oldName] else { return }
            let sameDestination = newEntityName[oldRelationship.destinationEntityName] == relationship.destinationEntityName
            let sameInverse = relationship.destinationEntity.flatMap { destination in
                newName(ofProperty: oldRelationship.inverseName, in: destination)
            } == relationship.inverseName
            if !sameDestination || !sameInverse || oldRelationship.isToMany != relationship.isToMany
                || oldRelationship.isOrdered != relationship.isOrdered {
                found.refused.append((change, "a relationship's destination, inverse, cardinality or ordering is not changed by inference (a custom migration stage can)"))
            } else if relationship.isToMany && !rulesOnly && Self.narrows(oldRelationship, to: relationship) {
                found.refused.append((change, "a to-many relationship's existing objects are not counted against a higher minimum or a lower maximum by inference (a custom migration stage can check and fix them)"))
            } else if !relationship.isToMany && oldRelationship.isOptional && !relationship.isOptional {
                for inheriting in entity.hierarchy { found.newlyRequiredRelationships[inheriting.name, default: []].append(name) }
            }
        }

        /// Whether to-many `new` asks more of a count than `old` did: required where it was
        /// optional, a higher minimum, or a lower maximum.
        private static func narrows(_ old: RelationshipDescription, to new: RelationshipDescription) -> Bool {
            (old.isOptional && !new.isOptional) || new.minimumCount > old.minimumCount
                || (new.maximumCount > 0 && (old.maximumCount == 0 || new.maximumCount < old.maximumCount))
        }

        // MARK: Step 3: the recorded state

        /// What the store records of its rows before the migration.
        struct RecordedState {
            /// A layout-3 store's entity list (empty for layouts 1 and 2).
            let entities: [String]
            /// Each old entity's row format, column order and fills, by its name.
            var formats: [String: RowFormat] = [:]
            var columns: [String: [String]] = [:]
            var fills: [String: [String: AttributeValue]] = [:]
        }

        /// Step 3: the store's entity list, and each old entity's row format, column order and
        /// fills, read from `metadata`.
        ///
        /// - Throws: ``ArborError/Code/storeOpen`` for damaged metadata.
        func recordedState(in metadata: Tree) throws -> RecordedState {
            var entities: [String] = []
            if layout == .records {
                guard let bytes = try metadata.get(MetadataKey.entities), let list = try? JSONDecoder().decode([String].self, from: Data(bytes)) else {
                    throw ArborError(.storeOpen, "the Arbor metadata of \(path) is damaged: its entity list is missing or unreadable")
                }
                entities = list
            }
            var state = RecordedState(entities: entities)
            for entity in old.entities {
                let order = try NativeStore.recordedColumns(metadata, entity: entity.name, path: path)
                    ?? RowFormat.derivedColumnNames(entity, layout: layout)
                let fills = try NativeStore.recordedFills(metadata, entity: entity, path: path)
                let index = entities.firstIndex(of: entity.name) ?? 0
                state.formats[entity.name] = try RowFormat.recorded(entity, layout: layout, order: order, entityIndex: index, fills: fills)
                state.columns[entity.name] = order
                state.fills[entity.name] = fills
            }
            return state
        }

        // MARK: Step 4: hierarchies and the entity list

        /// Step 4: each hierarchy the store keeps (its old root's name and its new one's), and
        /// the new roots whose rows are rewritten whatever they hold (a store of layout 1 or 2,
        /// rows that gain or lose their entity prefix).
        func hierarchies() -> (pairs: [(old: String, new: String)], rewritten: Set<String>) {
            var pairs: [(old: String, new: String)] = []
            var rewritten = Set<String>()
            for root in new.entities where root.superentity == nil {
                guard let oldRoot = oldEntity(of: root), oldRoot.superentity == nil else { continue }
                pairs.append((oldRoot.name, root.name))
                if layout != .records || oldRoot.subentities.isEmpty != root.subentities.isEmpty { rewritten.insert(root.name) }
            }
            return (pairs, rewritten)
        }

        /// The entity list the store records after the migration: the old list in new names (a
        /// removed entity's place kept, marked with a leading "-"), then the new entities.
        func entityList(after recorded: RecordedState) -> [String] {
            var entities = layout == .records ? recorded.entities.map { name in newEntityName[name] ?? (name.hasPrefix("-") ? name : "-" + name) } : []
            for entity in new.entities where !entities.contains(entity.name) { entities.append(entity.name) }
            return entities
        }

        // MARK: Step 5: column orders and fills

        /// Step 5: each new entity's column order and fills. A kept hierarchy whose columns only
        /// gained some appends them (no row rewritten); otherwise the hierarchy is added to
        /// `rewritten` and takes the new model's order, with no fills.
        func columnOrders(_ recorded: RecordedState, rewritten: inout Set<String>)
            -> (columns: [String: [String]], fills: [String: [String: AttributeValue]]) {
            var columns: [String: [String]] = [:]
            var fills: [String: [String: AttributeValue]] = [:]
            for entity in new.entities {
                guard let oldEntity = oldEntity(of: entity), let oldOrder = recorded.columns[oldEntity.name],
                      !rewritten.contains(entity.rootEntity.name) else { continue }
                let stored = RowFormat.derivedColumnNames(entity, layout: .records)
                guard let kept = keptColumns(oldOrder, of: entity, was: oldEntity, stored: stored) else {
                    rewritten.insert(entity.rootEntity.name)
                    continue
                }
                let appended = stored.filter { !kept.contains($0) }
                columns[entity.name] = kept + appended
                let entityFills = self.fills(of: entity, old: recorded.fills[oldEntity.name] ?? [:], appended: appended)
                if !entityFills.isEmpty { fills[entity.name] = entityFills }
            }
            // Rewritten hierarchies (and new entities) take the new model's order, with no fills.
            for entity in new.entities where columns[entity.name] == nil || rewritten.contains(entity.rootEntity.name) {
                columns[entity.name] = RowFormat.derivedColumnNames(entity, layout: .records)
                fills[entity.name] = nil
            }
            return (columns, fills)
        }

        /// The old column order `oldOrder` of `oldEntity` in `entity`'s names, when every column
        /// continues one of `stored` with rows that read the same (nil: the rows are rewritten).
        private func keptColumns(_ oldOrder: [String], of entity: EntityDescription, was oldEntity: EntityDescription,
                                 stored: [String]) -> [String]? {
            var kept: [String] = []
            for column in oldOrder {
                guard let name = newName(ofProperty: column, in: entity), stored.contains(name) else { return nil }
                // A to-one whose rows name (or stop naming) the destination's entity.
                if let relationship = entity.relationshipsByName[name], let oldRelationship = oldEntity.relationshipsByName[column] {
                    let named = relationship.destinationEntity.map { !$0.subentities.isEmpty } ?? false
                    let wasNamed = oldRelationship.destinationEntity.map { !$0.subentities.isEmpty } ?? false
                    if named != wasNamed { return nil }
                }
                kept.append(name)
            }
            return kept
        }

        /// The fills of `entity` whose columns were kept: its old fills in new names and kinds,
        /// and the defaults of the columns `appended`.
        private func fills(of entity: EntityDescription, old: [String: AttributeValue], appended: [String]) -> [String: AttributeValue] {
            var fills: [String: AttributeValue] = [:]
            for (column, value) in old {
                // Read as the new kind (a float's fill, widened to a double, is a double).
                if let name = newName(ofProperty: column, in: entity), let kind = entity.attributesByName[name]?.type.kind {
                    fills[name] = StoreMigration.value(value, as: kind)
                }
            }
            for name in appended {
                if let value = entity.attributesByName[name]?.defaultValue { fills[name] = value }
            }
            return fills
        }

        // MARK: Step 6: trees

        /// What becomes of every tree of the store.
        struct Trees {
            /// Old trees renamed (old name → new name).
            var renamed: [String: String] = [:]
            var dropped = Set<String>()
            /// New derived trees built from rows.
            var built = Set<String>()
            /// Derived trees kept (or renamed) when they exist in the file, by new name.
            var kept = Set<String>()
        }

        /// Step 6: what becomes of every tree. Derived trees (index, uniqueness, foreign keys)
        /// are kept (or renamed) when the new model's has the same meaning as an old one; data
        /// trees (joins, orders) follow their relationship; rows trees their root.
        func trees(hierarchies: [(old: String, new: String)], newlyRequired: [String: [(name: String, fill: AttributeValue?)]]) -> Trees {
            var trees = Trees()
            matchDerivedTrees(&trees)
            followDataTrees(&trees)
            followRowsTrees(hierarchies, &trees)
            rebuildFilledTrees(newlyRequired, &trees)
            return trees
        }

        /// Keeps each old derived tree that means what a new one means (under its new name),
        /// builds the new ones no old tree matches, and drops the rest.
        private func matchDerivedTrees(_ trees: inout Trees) {
            let translate = { (tree: DerivedTree) -> DerivedTree? in
                tree.translated(entity: { newEntityName[$0] }, property: { name, entity in
                    new.entity(named: entity).flatMap { newName(ofProperty: name, in: $0) }
                })
            }
            var oldDerived: [DerivedTree] = []
            for root in old.entities where root.superentity == nil { oldDerived += StoreMigration.derivedTrees(of: root) }
            var newDerived: [DerivedTree] = []
            for root in new.entities where root.superentity == nil { newDerived += StoreMigration.derivedTrees(of: root) }
            var claimed = Set<String>()
            for tree in newDerived {
                if let match = oldDerived.first(where: { !claimed.contains($0.name) && translate($0) == tree }) {
                    claimed.insert(match.name)
                    if match.name != tree.name { trees.renamed[match.name] = tree.name }
                    trees.kept.insert(tree.name)
                } else {
                    trees.built.insert(tree.name)
                }
            }
            trees.dropped.formUnion(oldDerived.map(\.name).filter { !claimed.contains($0) })
        }

        /// Renames each join and order tree after its relationship, and drops those whose
        /// relationship is gone.
        private func followDataTrees(_ trees: inout Trees) {
            for entity in old.entities {
                for relationship in entity.ownRelationships where relationship.isToMany {
                    let tree = NativeStore.isJoined(relationship) ? NativeStore.joinTree(relationship)
                        : relationship.isOrdered ? NativeStore.orderTree(relationship) : nil
                    guard let tree else { continue }
                    guard let newEntity = newEntityName[entity.name].flatMap(new.entity(named:)),
                          let newRelationship = newName(ofProperty: relationship.name, in: newEntity).flatMap({ newEntity.relationshipsByName[$0] }),
                          newRelationship.entity === newEntity else {
                        trees.dropped.insert(tree)
                        continue
                    }
                    let newTree = NativeStore.isJoined(newRelationship) ? NativeStore.joinTree(newRelationship) : NativeStore.orderTree(newRelationship)
                    if newTree != tree { trees.renamed[tree] = newTree }
                }
            }
        }

        /// Renames each kept hierarchy's rows tree after its new root, and drops the others.
        private func followRowsTrees(_ hierarchies: [(old: String, new: String)], _ trees: inout Trees) {
            for root in old.entities where root.superentity == nil {
                if let pair = hierarchies.first(where: { $0.old == root.name }) {
                    if pair.old != pair.new { trees.renamed[NativeStore.rowsTree(root)] = NativeStore.rowsTree(root: pair.new) }
                } else {
                    trees.dropped.insert(NativeStore.rowsTree(root))
                }
            }
        }

        /// Rebuilds the derived trees of a hierarchy whose nils an attribute's default replaces:
        /// their entries change, so the rows are read again to build them.
        private func rebuildFilledTrees(_ newlyRequired: [String: [(name: String, fill: AttributeValue?)]], _ trees: inout Trees) {
            for root in new.entities where root.superentity == nil
                && root.hierarchy.contains(where: { entity in (newlyRequired[entity.name] ?? []).contains { $0.fill != nil } }) {
                for tree in StoreMigration.derivedTrees(of: root) where trees.kept.contains(tree.name) {
                    trees.kept.remove(tree.name)
                    trees.built.insert(tree.name)
                    if let old = trees.renamed.first(where: { $0.value == tree.name })?.key {
                        trees.renamed[old] = nil
                        trees.dropped.insert(old)
                    } else {
                        trees.dropped.insert(tree.name)
                    }
                }
            }
        }
    }
}
