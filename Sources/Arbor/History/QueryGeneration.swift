import Foundation
import OrderedCollections

/// A query generation: the state of the stores a context reads (Core Data's
/// `NSQueryGenerationToken`; docs/history.md, "Query generations").
///
/// ``current`` asks for the stores as they are now; a token a pinned context gives
/// (``ManagedObjectContext/queryGenerationToken``) names, for each store, the last persistent
/// history transaction its generation includes, and pins another context of the same stores to
/// that generation. Tokens are values: `Sendable`, `Codable` (they name transactions of stores,
/// which outlive a launch while their history is kept).
public struct QueryGenerationToken: Sendable, Hashable, Codable, CustomStringConvertible {
    /// For each store (by identifier), the last history transaction of the generation; nil for
    /// ``current``.
    public let transactionNumbers: [UUID: Int64]?

    /// The generation of the stores as they are when the context is pinned: a context pinned
    /// to it reads them as they were then, until it is moved on.
    public static let current = QueryGenerationToken(transactionNumbers: nil)

    init(transactionNumbers: [UUID: Int64]?) {
        self.transactionNumbers = transactionNumbers
    }

    public var description: String {
        guard let transactionNumbers else { return "QueryGenerationToken(current)" }
        let numbers = transactionNumbers.sorted { $0.key.uuidString < $1.key.uuidString }.map { "\($0.key): \($0.value)" }
        return "QueryGenerationToken(" + numbers.joined(separator: ", ") + ")"
    }
}

/// What an object was at a generation, as the history after it says (``GenerationOverlay``).
enum PastState {
    /// The object was inserted after the generation: it did not exist.
    case absent
    /// The object was updated after the generation: these properties held these values (the
    /// old values of the first change after the generation that changed each); the others held
    /// what they hold now.
    case changed([String: PersistentHistoryValue])
    /// The object was deleted after the generation: it held these values (nil for the others).
    case deleted([String: PersistentHistoryValue])
}

/// A row as a pinned context reads it.
enum PastRow {
    /// The row is as it was at the generation.
    case unchanged
    /// The object did not exist at the generation.
    case absent
    /// The row at the generation.
    case row(StoreRow)
}

/// The objects of one store changed since a generation, and what they were at it, kept up to
/// date from the store's persistent history (docs/history.md, "Query generations"). A pinned
/// context reads the store as it is and rolls back, through this, what changed since.
///
/// Confined to its context's queue.
final class GenerationOverlay {
    /// The store's identifier; its history is read through the coordinator.
    let store: UUID
    let coordinator: PersistentStoreCoordinator
    let model: ManagedObjectModel
    /// The last transaction of the generation.
    let generation: Int64
    /// The last transaction read into the overlay.
    private(set) var covered: Int64
    /// The store's change counter when the overlay was last brought up to date (nil: never).
    private var counter: UInt64?
    /// The objects changed since the generation.
    private(set) var past: [ManagedObjectID: PastState] = [:]
    /// How many changes were rolled into the overlay (a plan made before more were is made
    /// again).
    private(set) var changesNoted = 0
    /// The entities of the objects changed since the generation (and of the objects whose
    /// many-to-many links changed).
    private(set) var touchedEntities: Set<String> = []
    /// Many-to-many links changed since the generation, by object and relationship: for each
    /// other object, whether the link was there at the generation (the opposite of what the
    /// first change after it did).
    private var links: [LinkKey: [ManagedObjectID: Bool]] = [:]

    struct LinkKey: Hashable {
        let id: ManagedObjectID
        let relationship: String
    }

    init(store: UUID, coordinator: PersistentStoreCoordinator, generation: Int64) {
        self.store = store
        self.coordinator = coordinator
        model = coordinator.managedObjectModel
        self.generation = generation
        covered = generation
    }

    /// Reads the history written since the overlay was last brought up to date — only when the
    /// store's change counter moved (no I/O otherwise). Called after the rows a read uses were
    /// read: the overlay then covers at least what they hold.
    ///
    /// - Throws: ``ArborError/Code/persistentHistoryTokenExpired`` when history after the
    ///   generation was deleted (by another process: this one keeps what its pins need).
    func catchUp() throws {
        let found: (counter: UInt64, transactions: [PersistentHistoryTransaction])
        do {
            guard let history = try coordinator.history(ofStore: store, after: covered, unlessCounterIs: counter) else { return }
            found = history
        } catch let error as ArborError where error.code == .persistentHistoryTokenExpired {
            throw ArborError(.persistentHistoryTokenExpired,
                             "the persistent history the query generation of this context reads from (after transaction \(covered) of store "
                                + "\(store)) was deleted by another process: move the context on with setQueryGenerationFrom(.current)")
        }
        for transaction in found.transactions {
            for change in transaction.changes ?? [] { note(change) }
            covered = transaction.transactionNumber
        }
        counter = found.counter
    }

    /// Rolls one change (after the generation, oldest first) into the overlay.
    private func note(_ change: PersistentHistoryChange) {
        changesNoted += 1
        let id = change.changedObjectID
        touchedEntities.insert(id.entityName)
        switch change.changeType {
        case .insert:
            if past[id] == nil { past[id] = .absent }
        case .update:
            var old: [String: PersistentHistoryValue] = [:]
            for (key, value) in change.newValues {
                if case .links(let added, let removed) = value {
                    noteLinks(id, key, added: added, removed: removed)
                } else {
                    old[key] = change.oldValues[key] ?? .null
                }
            }
            switch past[id] {
            case nil: past[id] = .changed(old)
            case .changed(var earlier)?:
                // The first change after the generation holds the value at it.
                for (key, value) in old where earlier[key] == nil { earlier[key] = value }
                past[id] = .changed(earlier)
            case .absent?, .deleted?: break
            }
        case .delete:
            var tombstone: [String: PersistentHistoryValue] = [:]
            for (key, value) in change.oldValues {
                if case .links(_, let removed) = value {
                    noteLinks(id, key, added: [], removed: removed)
                } else {
                    tombstone[key] = value
                }
            }
            switch past[id] {
            case nil: past[id] = .deleted(tombstone)
            case .changed(let earlier)?: past[id] = .deleted(tombstone.merging(earlier) { _, first in first })
            case .absent?, .deleted?: break
            }
        }
    }

    /// Notes links of `id`'s relationship `key` added and removed by one change, on both sides.
    private func noteLinks(_ id: ManagedObjectID, _ key: String, added: [ManagedObjectID], removed: [ManagedObjectID]) {
        let inverse = model.entity(named: id.entityName)?.relationshipsByName[key]?.inverseRelationship?.name
        for (others, adding) in [(added, true), (removed, false)] {
            for other in others {
                toggle(LinkKey(id: id, relationship: key), other, added: adding)
                if let inverse { toggle(LinkKey(id: other, relationship: inverse), id, added: adding) }
                // Both sides' relationships changed: both are read again in memory.
                for side in [id, other] where past[side] == nil {
                    past[side] = .changed([:])
                    touchedEntities.insert(side.entityName)
                }
            }
        }
    }

    private func toggle(_ key: LinkKey, _ other: ManagedObjectID, added: Bool) {
        if links[key, default: [:]][other] == nil { links[key, default: [:]][other] = !added }
    }

    /// Whether `id` changed since the generation (its row now is not its row then).
    func isTouched(_ id: ManagedObjectID) -> Bool { past[id] != nil }

    /// The objects of `entity` (and its sub-entities, when `subentities`) that existed at the
    /// generation and changed since.
    func changedObjects(of entity: EntityDescription, subentities: Bool) -> [ManagedObjectID] {
        past.compactMap { id, state in
            if case .absent = state { return nil }
            guard let kind = model.entity(named: id.entityName) else { return nil }
            return (subentities ? kind.isKind(of: entity) : kind === entity) ? id : nil
        }
    }

    /// The row of `id` at the generation, given its row now (nil: none).
    func row(of id: ManagedObjectID, entity: EntityDescription, now current: StoreRow?) -> PastRow {
        guard let state = past[id] else { return .unchanged }
        switch state {
        case .absent:
            return .absent
        case .changed(let old):
            guard let current else { return .absent }
            if old.isEmpty { return .unchanged }
            var row = Self.inLayout(current, of: entity)
            for (key, value) in old { row.values[key] = value.propertyValue }
            // A version the store no longer has: a save of what was read here is checked
            // against the row as it is (a conflict, settled by the merge policy).
            row.version = max(0, current.version - 1)
            return .row(row)
        case .deleted(let old):
            var row = StoreRow(entityName: id.entityName, version: 0, values: PropertyStorage(layout: entity.propertyLayout))
            for (key, value) in old { row.values[key] = value.propertyValue }
            return .row(row)
        }
    }

    /// `row` with its values in `entity`'s layout (rows Arbor reads are; others are copied).
    private static func inLayout(_ row: StoreRow, of entity: EntityDescription) -> StoreRow {
        guard row.values.layout !== entity.propertyLayout else { return row }
        var values = PropertyStorage(layout: entity.propertyLayout)
        for attribute in entity.attributes where !attribute.isTransient { values[attribute.name] = row.attributeValue(attribute.name) }
        for relationship in entity.relationships {
            if !relationship.isToMany {
                values[relationship.name] = row.toOneValue(relationship.name)
            } else if let list = row.orderedDestinations(relationship.name) {
                values[relationship.name] = .objects(list)
            }
        }
        return StoreRow(entityName: row.entityName, version: row.version, values: values)
    }

    /// The destinations of `owner`'s to-many `relationship` at the generation, given those it
    /// has now.
    func related(_ now: [ManagedObjectID], of owner: ManagedObjectID, relationship: RelationshipDescription) -> [ManagedObjectID] {
        if relationship.isOrdered {
            switch past[owner] {
            case .changed(let old)?, .deleted(let old)?:
                if case .orderedObjects(let list)? = old[relationship.name] { return list }
                if case .deleted = past[owner] { return [] }
                return now
            default:
                return now
            }
        }
        if relationship.isUnorderedManyToMany {
            guard let then = links[LinkKey(id: owner, relationship: relationship.name)] else { return now }
            let present = Set(now)
            return now.filter { then[$0] ?? true } + then.compactMap { other, was in was && !present.contains(other) ? other : nil }
        }
        // One-to-many: the members are the objects whose to-one inverse names the owner.
        guard let inverse = relationship.inverseRelationship, !inverse.isToMany, let destination = relationship.destinationEntity else { return now }
        var members = now.filter { id in
            guard let state = past[id] else { return true }
            if case .changed(let old) = state, old[inverse.name] == nil { return true }
            return false
        }
        for (id, state) in past {
            let before: PersistentHistoryValue?
            switch state {
            case .absent: continue
            case .changed(let old), .deleted(let old): before = old[inverse.name]
            }
            guard case .object(let target)? = before, target == owner,
                  model.entity(named: id.entityName)?.isKind(of: destination) == true else { continue }
            members.append(id)
        }
        return members
    }
}

extension PersistentHistoryValue {
    /// The value as a row holds it (links are not in rows: none).
    var propertyValue: PropertyValue {
        switch self {
        case .null, .links: .none
        case .attribute(let value): .attribute(value)
        case .object(let id): .object(id)
        case .orderedObjects(let ids): .objects(OrderedSet(ids))
        }
    }
}

/// A context's pin to a query generation: an overlay per store that records history.
final class QueryGeneration {
    /// The generation (each store's last transaction in it).
    let token: QueryGenerationToken
    /// The overlays, by store.
    let overlays: [UUID: GenerationOverlay]

    init(token: QueryGenerationToken, overlays: [UUID: GenerationOverlay]) {
        self.token = token
        self.overlays = overlays
    }

    /// Grows with every change rolled into an overlay.
    var version: Int { overlays.values.reduce(0) { $0 + $1.changesNoted } }

    /// Brings every overlay up to date (a read of each file's history only when it changed).
    func catchUp() throws {
        for overlay in overlays.values { try overlay.catchUp() }
    }

    /// `now` (read from the store first), rolled back by `rollBack` once the overlays cover it.
    func catchingUp<Value>(_ now: Value, _ rollBack: (Value) -> Value) throws -> Value {
        try catchUp()
        return rollBack(now)
    }

    /// The overlay of the store holding `id`.
    func overlay(of id: ManagedObjectID) -> GenerationOverlay? {
        id.storeIdentifier.flatMap { overlays[$0] }
    }

    /// Whether any object of `entities` (or of their sub-entities) changed since the generation.
    func touches(_ entities: [EntityDescription]) -> Bool {
        entities.contains { touchesFamily(of: $0) }
    }

    /// Whether any object of `entity` (or its sub-entities) changed since the generation.
    func touchesFamily(of entity: EntityDescription) -> Bool {
        overlays.values.contains { overlay in
            overlay.touchedEntities.contains { name in overlay.model.entity(named: name)?.isKind(of: entity) == true }
        }
    }

    /// Whether `id` changed since the generation.
    func isTouched(_ id: ManagedObjectID) -> Bool {
        overlay(of: id)?.isTouched(id) ?? false
    }
}
