import ArborStore
import Foundation

/// The bytes of persistent history (docs/history.md, "Where it lives in the file"): the one
/// owner of how a transaction and a change are written and read. Records are sequences of key
/// components, integers in their compact form, values self-describing (each with its kind), not
/// in a row format: history outlives the model versions its rows were written in. Entity and
/// property names are written once per transaction, in its record, and changes name them by
/// their place there.
enum HistoryRecords {
    /// The tree of transactions: transaction number → transaction record.
    static let transactionsTree = "history.transactions"
    /// The tree of changes: (transaction number, change index) → change record.
    static let changesTree = "history.changes"
    /// The version of the records' layout, first in every transaction record.
    static let recordVersion: Int64 = 1

    static func transactionKey(_ number: Int64) -> [UInt8] { KeyEncoding.encode([.int(number)], compactIntegers: true) }
    static func changeKey(_ number: Int64, _ index: Int) -> [UInt8] {
        KeyEncoding.encode([.int(number), .int(Int64(index))], compactIntegers: true)
    }

    /// A transaction record: version, timestamp (nanoseconds since 1970), author, context
    /// name, process id, process name, kind, change count, then the number of names and the
    /// names its changes use.
    static func transactionRecord(timestamp: Date, origin: TransactionOrigin, processID: Int32, processName: String, changeCount: Int,
                                  names: [String]) -> [UInt8] {
        // Clamped: a clock past 2262 (or before 1678) must not trap the save.
        let nanoseconds = Int64(exactly: (timestamp.timeIntervalSince1970 * 1e9).rounded()) ?? (timestamp.timeIntervalSince1970 < 0 ? .min : .max)
        return KeyEncoding.encode([.int(recordVersion), .int(nanoseconds), origin.author.map(KeyComponent.string) ?? .null,
                                   origin.contextName.map(KeyComponent.string) ?? .null, .int(Int64(processID)), .string(processName),
                                   .string(origin.kind.rawValue), .int(Int64(changeCount)), .int(Int64(names.count))] + names.map(KeyComponent.string),
                                  compactIntegers: true)
    }

    /// The transaction recorded under `key` with `value`, its changes not read, and the names
    /// its changes use.
    static func transaction(key: [UInt8], value: [UInt8], store: UUID) throws -> (transaction: PersistentHistoryTransaction, names: [String]) {
        let damaged = ArborError(.store, "the persistent history of store \(store) holds a damaged transaction record")
        guard let keyParts = try? KeyEncoding.decode(key), keyParts.count == 1, case .int(let number) = keyParts[0],
              let parts = try? KeyEncoding.decode(value), parts.count >= 9,
              case .int(let version) = parts[0], version == recordVersion, case .int(let nanoseconds) = parts[1],
              case .int(let processID) = parts[4], let pid = Int32(exactly: processID), case .string(let processName) = parts[5],
              case .string(let kindName) = parts[6], let kind = PersistentHistoryTransactionKind(rawValue: kindName),
              case .int(let changeCount) = parts[7], let count = Int(exactly: changeCount), count >= 0,
              case .int(let nameCount) = parts[8], nameCount == parts.count - 9 else { throw damaged }
        func optionalString(_ component: KeyComponent) throws -> String? {
            switch component {
            case .null: return nil
            case .string(let string): return string
            default: throw damaged
            }
        }
        let names = try parts[9...].map { component -> String in
            guard case .string(let name) = component else { throw damaged }
            return name
        }
        let transaction = PersistentHistoryTransaction(transactionNumber: number, storeID: store, timestamp: Date(timeIntervalSince1970: Double(nanoseconds) / 1e9),
                                                       author: try optionalString(parts[2]), contextName: try optionalString(parts[3]), processID: pid,
                                                       processName: processName, kind: kind, changeCount: count, changes: nil)
        return (transaction, names)
    }

    /// The number of the transaction of a change key.
    static func transactionNumber(ofChangeKey key: [UInt8]) -> Int64? {
        guard let parts = try? KeyEncoding.decode(key), parts.count == 2, case .int(let number) = parts[0] else { return nil }
        return number
    }

    // MARK: Changes

    /// The kind of change a record starts with.
    static func kindCode(_ type: PersistentHistoryChangeType) -> Int64 { type == .insert ? 1 : type == .update ? 2 : 3 }

    /// Appends one value of a change record: a tag, then what it needs — 0 nil; 1–11 an
    /// attribute value of each kind; 20 an object (its entity's name place, its primary key); 21
    /// an ordered list (count, objects); 22 links (count and objects added, count and objects
    /// removed). `name` gives a name's place in the transaction's names.
    static func appendValue(_ value: PersistentHistoryValue, to bytes: inout [UInt8], name: (String) -> Int) {
        func add(_ component: KeyComponent) { KeyEncoding.append(component, to: &bytes, compactIntegers: true) }
        func object(_ id: ManagedObjectID) {
            add(.int(Int64(name(id.entityName))))
            add(.int(id.primaryKey ?? 0))
        }
        func objects(_ ids: [ManagedObjectID]) {
            add(.int(Int64(ids.count)))
            for id in ids { object(id) }
        }
        switch value {
        case .null: add(.int(0))
        case .attribute(let attribute):
            switch attribute {
            case .integer(let v): add(.int(1)); add(.int(v))
            case .decimal(let v): add(.int(2)); add(.string(v.description))
            case .double(let v): add(.int(3)); add(.double(v))
            case .float(let v): add(.int(4)); add(.double(Double(v)))
            case .string(let v): add(.int(5)); add(.string(v))
            case .boolean(let v): add(.int(6)); add(.bool(v))
            case .date(let v): add(.int(7)); add(.date(v))
            case .data(let v): add(.int(8)); add(.data(Array(v)))
            case .uuid(let v): add(.int(9)); add(.uuid(v))
            case .uri(let v): add(.int(10)); add(.string(v.absoluteString))
            case .transformable(let v): add(.int(11)); add(.data(Array(v)))
            }
        case .object(let id):
            add(.int(20))
            object(id)
        case .orderedObjects(let ids):
            add(.int(21))
            objects(ids)
        case .links(let added, let removed):
            add(.int(22))
            objects(added)
            objects(removed)
        }
    }

    /// The change recorded under `key` with `value`, its names in `names` (its transaction's);
    /// `objectID` makes a store's ID.
    ///
    /// A change record: kind (1 insert, 2 update, 3 delete), the entity's name place, the
    /// primary key, the number of properties, then for each its name place, its old value
    /// (updates and deletes) and its new value (inserts and updates).
    static func change(key: [UInt8], value: [UInt8], names: [String], objectID: (String, Int64) -> ManagedObjectID) throws -> PersistentHistoryChange {
        // Long: the change record's decoder: the nested readers share one cursor (`position`) over
        // the decoded parts, read in the record's order.
        let damaged = ArborError(.store, "the persistent history holds a damaged change record")
        guard let keyParts = try? KeyEncoding.decode(key), keyParts.count == 2, case .int(let number) = keyParts[0],
              case .int(let index) = keyParts[1], let changeID = Int(exactly: index),
              let parts = try? KeyEncoding.decode(value), parts.count >= 4, case .int(let kind) = parts[0], (1...3).contains(kind),
              case .int(let count) = parts[3], count >= 0 else { throw damaged }
        let type: PersistentHistoryChangeType = kind == 1 ? .insert : kind == 2 ? .update : .delete
        var position = 1
        func next() throws -> KeyComponent {
            guard position < parts.count else { throw damaged }
            defer { position += 1 }
            return parts[position]
        }
        func name() throws -> String {
            guard case .int(let place) = try next(), place >= 0, place < names.count else { throw damaged }
            return names[Int(place)]
        }
        func object() throws -> ManagedObjectID {
            let entity = try name()
            guard case .int(let key) = try next(), NativeStore.isPrimaryKey(key) else { throw damaged }
            return objectID(entity, key)
        }
        func objects() throws -> [ManagedObjectID] {
            guard case .int(let count) = try next(), count >= 0, count <= parts.count else { throw damaged }
            return try (0..<count).map { _ in try object() }
        }
        func readValue() throws -> PersistentHistoryValue {
            guard case .int(let tag) = try next() else { throw damaged }
            let attribute: AttributeValue?
            switch (tag, tag >= 1 && tag <= 11 ? try next() : .null) {
            case (0, _): return .null
            case (1, .int(let v)): attribute = .integer(v)
            case (2, .string(let v)): attribute = Decimal(string: v).map(AttributeValue.decimal)
            case (3, .double(let v)): attribute = .double(v)
            case (4, .double(let v)): attribute = .float(Float(v))
            case (5, .string(let v)): attribute = .string(v)
            case (6, .bool(let v)): attribute = .boolean(v)
            case (7, .date(let v)): attribute = .date(v)
            case (8, .data(let v)): attribute = .data(Data(v))
            case (9, .uuid(let v)): attribute = .uuid(v)
            case (10, .string(let v)): attribute = URL(string: v).map(AttributeValue.uri)
            case (11, .data(let v)): attribute = .transformable(Data(v))
            case (20, _): return .object(try object())
            case (21, _): return .orderedObjects(try objects())
            case (22, _): return .links(added: try objects(), removed: try objects())
            default: throw damaged
            }
            guard let attribute else { throw damaged }
            return .attribute(attribute)
        }
        let changed = try object()
        position = 4
        var old: [String: PersistentHistoryValue] = [:], new: [String: PersistentHistoryValue] = [:]
        for _ in 0..<count {
            let property = try name()
            if type != .insert { old[property] = try readValue() }
            if type != .delete { new[property] = try readValue() }
        }
        guard position == parts.count else { throw damaged }
        return PersistentHistoryChange(changeID: changeID, transactionNumber: number, changeType: type, changedObjectID: changed,
                                       updatedProperties: type == .update ? Set(old.keys) : nil, oldValues: old, newValues: new)
    }
}

/// Records one engine transaction's changes in persistent history as the store's write pass
/// (``RowWriter``) makes them (docs/history.md): a change record per row written, in the same
/// transaction, then the transaction record with the names the changes use. Made only for a
/// store that tracks history.
final class HistoryWriter {
    let store: NativeStore
    let transaction: WriteTransaction
    let origin: TransactionOrigin
    /// The transaction's number, taken at its first change.
    private var number: Int64?
    private var changes: Tree?
    private var count = 0
    /// The names the changes use (entities and properties), and their places.
    private var names: [String] = []
    private var places: [String: Int] = [:]
    /// What a change of each entity met records, worked out once.
    private var entities: [ObjectIdentifier: EntityProperties] = [:]
    /// The record being written (reused).
    private var bytes: [UInt8] = []
    /// Many-to-many links added and removed, by object and relationship, in the order met:
    /// recorded as one update change each when the transaction finishes.
    private var links: [LinkKey: (added: [ManagedObjectID], removed: [ManagedObjectID])] = [:]
    private var linkOrder: [LinkKey] = []
    private var finished = false

    private struct LinkKey: Hashable {
        let id: ManagedObjectID
        let relationship: String
    }

    /// The stored properties of an entity a change records, with their names' places:
    /// attributes, to-one relationships, ordered to-many relationships, many-to-many
    /// relationships kept in join trees.
    private struct EntityProperties {
        let entity: Int
        let attributes: [(name: String, place: Int)]
        let toOne: [(name: String, place: Int)]
        let ordered: [(relationship: RelationshipDescription, place: Int)]
        let joined: [(relationship: RelationshipDescription, place: Int)]
    }

    init(store: NativeStore, transaction: WriteTransaction, origin: TransactionOrigin) {
        self.store = store
        self.transaction = transaction
        self.origin = origin
    }

    /// The place of `name` among the transaction's names.
    private func place(_ name: String) -> Int {
        if let known = places[name] { return known }
        names.append(name)
        places[name] = names.count - 1
        return names.count - 1
    }

    private func properties(_ entity: EntityDescription) -> EntityProperties {
        if let known = entities[ObjectIdentifier(entity)] { return known }
        let made = EntityProperties(entity: place(entity.name),
                                    attributes: entity.attributes.filter { !$0.isTransient }.map { ($0.name, place($0.name)) },
                                    toOne: entity.relationships.filter { !$0.isToMany }.map { ($0.name, place($0.name)) },
                                    ordered: entity.relationships.filter { $0.isToMany && $0.isOrdered }.map { ($0, place($0.name)) },
                                    joined: entity.relationships.filter(NativeStore.isJoined).map { ($0, place($0.name)) })
        entities[ObjectIdentifier(entity)] = made
        return made
    }

    private func add(_ component: KeyComponent) { KeyEncoding.append(component, to: &bytes, compactIntegers: true) }
    private func add(_ value: PersistentHistoryValue) { HistoryRecords.appendValue(value, to: &bytes, name: place) }

    /// Starts a change record in ``bytes``: kind, entity, key, property count.
    private func start(_ type: PersistentHistoryChangeType, entity: Int, key: Int64, properties: Int) {
        bytes.removeAll(keepingCapacity: true)
        add(.int(HistoryRecords.kindCode(type)))
        add(.int(Int64(entity)))
        add(.int(key))
        add(.int(Int64(properties)))
    }

    /// Writes the record in ``bytes`` as the transaction's next change.
    private func append() throws {
        if number == nil {
            let transactions = try transaction.tree(named: HistoryRecords.transactionsTree, create: true)!
            number = try NativeStore.primaryKey(fromSequence: try transactions.nextSequence(), of: transactions)
            changes = try transaction.tree(named: HistoryRecords.changesTree, create: true)!
        }
        try changes!.put(HistoryRecords.changeKey(number!, count), bytes)
        count += 1
    }

    /// The stored order of `relationship` of `id` (read before the pass rewrites it).
    private func storedOrder(_ id: ManagedObjectID, _ relationship: RelationshipDescription) throws -> [ManagedObjectID] {
        try store.relatedObjectIDs(of: id, relationship: relationship, in: transaction)
    }

    /// Records the insertion of `row` as `id` (permanent): its values that are not nil.
    func inserted(_ id: ManagedObjectID, _ row: StoreRow, entity: EntityDescription, permanent: (ManagedObjectID) -> ManagedObjectID) throws {
        let properties = properties(entity)
        var present = 0
        for (name, _) in properties.attributes where row.attribute(name) != nil { present += 1 }
        for (name, _) in properties.toOne where row.destination(name) != nil { present += 1 }
        for (relationship, _) in properties.ordered where !(row.orderedDestinations(relationship.name)?.isEmpty ?? true) { present += 1 }
        start(.insert, entity: properties.entity, key: try store.primaryKey(of: id), properties: present)
        for (name, place) in properties.attributes {
            guard let value = row.attribute(name) else { continue }
            add(.int(Int64(place)))
            add(.attribute(value))
        }
        for (name, place) in properties.toOne {
            guard let destination = row.destination(name) else { continue }
            add(.int(Int64(place)))
            add(.object(permanent(destination)))
        }
        for (relationship, place) in properties.ordered {
            guard let list = row.orderedDestinations(relationship.name), !list.isEmpty else { continue }
            add(.int(Int64(place)))
            add(.orderedObjects(list.map(permanent)))
        }
        try append()
    }

    /// Records the update of `id` from `old` (its stored row) to `new`: the properties whose
    /// values differ, with both values. A row whose values are all the same records nothing.
    func updated(_ id: ManagedObjectID, old: StoreRow, new: StoreRow, entity: EntityDescription, permanent: (ManagedObjectID) -> ManagedObjectID) throws {
        let properties = properties(entity)
        var values: [(place: Int, old: PersistentHistoryValue, new: PersistentHistoryValue)] = []
        for (name, place) in properties.attributes {
            let before = old.attribute(name), after = new.attribute(name)
            if before != after { values.append((place, before.map(PersistentHistoryValue.attribute) ?? .null, after.map(PersistentHistoryValue.attribute) ?? .null)) }
        }
        for (name, place) in properties.toOne {
            let before = old.destination(name), after = new.destination(name).map(permanent)
            if before != after { values.append((place, before.map(PersistentHistoryValue.object) ?? .null, after.map(PersistentHistoryValue.object) ?? .null)) }
        }
        for (relationship, place) in properties.ordered {
            // A list the saving context never loaded is not in the row: it stays as it is.
            guard let list = new.orderedDestinations(relationship.name) else { continue }
            let after = list.map(permanent)
            let before = try old.orderedDestinations(relationship.name).map(Array.init) ?? storedOrder(id, relationship)
            if before != after { values.append((place, .orderedObjects(before), .orderedObjects(after))) }
        }
        guard !values.isEmpty else { return }
        start(.update, entity: properties.entity, key: try store.primaryKey(of: id), properties: values.count)
        for (place, before, after) in values {
            add(.int(Int64(place)))
            add(before)
            add(after)
        }
        try append()
    }

    /// Records the deletion of `id`, whose stored row was `old`: its values that were not nil
    /// (the tombstone), and the many-to-many links the deletion removes (as links removed), so
    /// that history's old values give back everything the deletion took. Called before the
    /// pass removes the row's lists and links.
    func deleted(_ id: ManagedObjectID, old: StoreRow, entity: EntityDescription) throws {
        let properties = properties(entity)
        var values: [(place: Int, value: PersistentHistoryValue)] = []
        for (name, place) in properties.attributes {
            if let value = old.attribute(name) { values.append((place, .attribute(value))) }
        }
        for (name, place) in properties.toOne {
            if let destination = old.destination(name) { values.append((place, .object(destination))) }
        }
        for (relationship, place) in properties.ordered {
            let list = try old.orderedDestinations(relationship.name).map(Array.init) ?? storedOrder(id, relationship)
            if !list.isEmpty { values.append((place, .orderedObjects(list))) }
        }
        for (relationship, place) in properties.joined {
            let linked = try storedOrder(id, relationship)
            if !linked.isEmpty { values.append((place, .links(added: [], removed: linked))) }
        }
        start(.delete, entity: properties.entity, key: try store.primaryKey(of: id), properties: values.count)
        for (place, value) in values {
            add(.int(Int64(place)))
            add(value)
        }
        try append()
    }

    /// Notes a many-to-many link of `id` (permanent) added or removed.
    func linked(_ id: ManagedObjectID, _ relationship: String, _ other: ManagedObjectID, added: Bool) {
        let key = LinkKey(id: id, relationship: relationship)
        if links[key] == nil {
            links[key] = ([], [])
            linkOrder.append(key)
        }
        if added { links[key]!.added.append(other) } else { links[key]!.removed.append(other) }
    }

    /// Records the links noted and the transaction record (when anything was recorded). Called
    /// once, after the pass, before the transaction commits.
    func finish() throws {
        guard !finished else { return }
        finished = true
        for key in linkOrder {
            let (added, removed) = links[key]!
            start(.update, entity: place(key.id.entityName), key: try store.primaryKey(of: key.id), properties: 1)
            add(.int(Int64(place(key.relationship))))
            add(PersistentHistoryValue.null)
            add(.links(added: added, removed: removed))
            try append()
        }
        guard let number else { return }
        store.noteRecording(number, in: transaction)
        let transactions = try transaction.tree(named: HistoryRecords.transactionsTree, create: true)!
        let process = ProcessInfo.processInfo
        try transactions.put(HistoryRecords.transactionKey(number),
                             HistoryRecords.transactionRecord(timestamp: Date(), origin: origin, processID: process.processIdentifier,
                                                              processName: process.processName, changeCount: count, names: names))
    }
}
