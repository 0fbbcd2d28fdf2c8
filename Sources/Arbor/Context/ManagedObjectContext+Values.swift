import Foundation

// Safety: A `ValueReader` serves one fetch on its context's queue, the only place its unchecked
// fields are used; entities, attributes and relationships are held unretained (`Unmanaged`,
// `unowned(unsafe)`) because the model owns them and outlives the fetch; layout and entity
// addresses are only compared, never dereferenced.

/// Fetches of `Decodable` values (``FetchResultType/values``, issue 26, item 5): the rows a fetch
/// matches decoded straight into the caller's type, by coding key, with no managed object and no
/// row-cache snapshot; the values are plain Swift values that may leave the context's queue.
extension ManagedObjectContext {
    /// The values of a request whose `Result` is `Value`.
    ///
    /// From the store's rows when they answer the request alone (no unsaved changes in the
    /// context, no part of the predicate left for objects, one store, not a child context); else
    /// from the objects a fetch gives, so unsaved changes count exactly as they do for objects.
    func fetchValues<Value: Decodable, Result>(_ request: FetchRequest<Result>, as _: Value.Type) throws -> [Value] {
        let plan = try plan(request)
        let reader = ValueReader(coordinator: plan.coordinator, properties: request.propertiesToFetch?.map(\.name))
        do {
            if plan.decodesRows {
                let rows = try plan.coordinator.fetch(plan.storeFetch, in: plan.stores)
                var values: [Value] = []
                values.reserveCapacity(rows.count)
                for (position, (id, row)) in rows.enumerated() {
                    values.append(try Value(from: RowValueDecoder(reader: reader, source: try reader.source(id, row), codingPath: [])))
                    // The first value tells which to-one relationships are followed: their
                    // destinations are read for every row at once.
                    if position == 0 { try reader.loadDestinations(of: rows) }
                }
                return values
            }
            let objects = try fetchObjects(request, plan: plan)
            return try objects.map { try Value(from: RowValueDecoder(reader: reader, source: ValueReader.source($0), codingPath: [])) }
        } catch let error as DecodingError {
            throw ArborError(decoding: error, of: Value.self, entity: request.entityName)
        }
    }
}

extension ArborError {
    /// A value that could not be decoded from a row, as a typed error naming the key path and why.
    init<Value>(decoding error: DecodingError, of _: Value.Type, entity: String) {
        let (path, reason): ([any CodingKey], String)
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            (path, reason) = (context.codingPath, context.debugDescription)
        case .keyNotFound(let key, let context):
            (path, reason) = (context.codingPath + [key], context.debugDescription)
        @unknown default:
            (path, reason) = ([], "\(error)")
        }
        let keyPath = path.map(\.stringValue).joined(separator: ".")
        self.init(.wrongValueType, "a fetch of \(entity) cannot decode \(Value.self)\(keyPath.isEmpty ? "" : " at \(keyPath)"): \(reason)",
                  entity: entity, key: keyPath.isEmpty ? nil : keyPath)
    }
}

/// Reads the properties decoded values ask for, from saved rows or from objects, and keeps the
/// destination rows it has read for the rest of the fetch. Used by one fetch, on its context's
/// queue: its state is read and written without dynamic exclusivity checks.
final class ValueReader {
    /// Where an object's values come from: a saved row of the store, or an object of the
    /// context (its in-memory state). The entity is held unretained, as ``ManagedObjectID`` holds
    /// its space: the model outlives the fetch, and an entity (which weak references point at)
    /// costs the runtime's slow path each time it is counted.
    struct Source {
        /// A row's values (nil for an object).
        var values: PropertyStorage?
        var object: ManagedObject?
        let id: ManagedObjectID
        let entityReference: Unmanaged<EntityDescription>

        init(row: StoreRow?, object: ManagedObject?, id: ManagedObjectID, entity: Unmanaged<EntityDescription>) {
            values = row?.values
            self.object = object
            self.id = id
            entityReference = entity
        }

        var entity: EntityDescription { entityReference.takeUnretainedValue() }
    }

    /// What a key path reaches.
    enum Reached {
        case missing
        case attribute(AttributeValue, AttributeType)
        case toOne(Source)
        case toMany([Source])
    }

    /// One hop of a compiled key path (descriptions unretained, as above).
    struct Step {
        enum Kind { case attribute, toOne, toMany }
        let kind: Kind
        let name: String
        unowned(unsafe) let attribute: AttributeDescription?
        unowned(unsafe) let relationship: RelationshipDescription?
    }

    /// A key path's cache entry: by entity (its address) and key.
    struct PathKey: Hashable {
        let entity: UnsafeMutableRawPointer
        let key: String
    }

    /// A compiled key path, and where each hop's value was found in the last row's layout
    /// (rows of one entity share a layout: a slot read, no lookup by name).
    final class Path {
        let steps: [Step]
        // Read and written once per value decoded, by one fetch on the context's queue: no
        // dynamic exclusivity check (as the engine's per-row state).
        @exclusivity(unchecked) var layouts: [UnsafeMutableRawPointer?]
        @exclusivity(unchecked) var slots: [Int]

        init(_ steps: [Step]) {
            self.steps = steps
            layouts = Array(repeating: nil, count: steps.count)
            slots = Array(repeating: 0, count: steps.count)
        }

        /// The value of hop `index` in `values`.
        @inline(__always)
        func value(_ index: Int, in values: PropertyStorage) -> PropertyValue? {
            let layout = Unmanaged.passUnretained(values.layout).toOpaque()
            if layouts[index] != layout {
                guard let slot = values.layout.index[steps[index].name] else { return nil }
                layouts[index] = layout
                slots[index] = slot
            }
            return values[slot: slots[index]]
        }
    }

    let coordinator: PersistentStoreCoordinator
    /// The request's `propertiesToFetch` names: the keys of a keyed container's `allKeys`, and the
    /// one key a single-value result reads.
    let properties: [String]?
    /// Destinations read so far, as sources (nil: the row is gone): a destination met again
    /// (many rows name one department) is one lookup, with no entity to find.
    @exclusivity(unchecked) private var rows: [ManagedObjectID: Source?] = [:]
    /// Compiled key paths (nil: the key names nothing).
    @exclusivity(unchecked) private var paths: [PathKey: Path?] = [:]
    /// The last paths used, searched first: a value type's keys are few and their strings are
    /// the same literals each time, so comparing them is cheaper than hashing.
    @exclusivity(unchecked) private var recent: [(entity: UnsafeMutableRawPointer, key: String, path: Path?)] = []
    /// The entities of the rows met, by name (a few: the fetched entity and the destinations).
    @exclusivity(unchecked) private var entities: [(name: String, entity: Unmanaged<EntityDescription>)] = []
    /// To-one relationships of the fetched rows that decoding followed (read for all rows at
    /// once after the first value): their compiled paths, whose first hop is the relationship.
    @exclusivity(unchecked) private var followed: [Path] = []
    @exclusivity(unchecked) private var decodingFirst = true

    init(coordinator: PersistentStoreCoordinator, properties: [String]?) {
        self.coordinator = coordinator
        self.properties = properties
    }

    /// The source for a fetched row.
    func source(_ id: ManagedObjectID, _ row: StoreRow) throws -> Source {
        for known in entities where known.name == row.entityName {
            return Source(row: row, object: nil, id: id, entity: known.entity)
        }
        guard let entity = coordinator.managedObjectModel.entity(named: row.entityName) else {
            throw ArborError(.store, "a row of \(row.entityName) names an entity the model does not have", entity: row.entityName)
        }
        entities.append((row.entityName, Unmanaged.passUnretained(entity)))
        return Source(row: row, object: nil, id: id, entity: Unmanaged.passUnretained(entity))
    }

    /// The source for an object.
    static func source(_ object: ManagedObject) -> Source {
        Source(row: nil, object: object, id: object.objectID, entity: Unmanaged.passUnretained(object.entity))
    }

    /// Reads the destinations of the followed to-one relationships of `rows` in one batch.
    func loadDestinations(of fetched: [(ManagedObjectID, StoreRow)]) throws {
        decodingFirst = false
        guard !followed.isEmpty else { return }
        var wanted: [ManagedObjectID] = []
        for index in fetched.indices.dropFirst() {
            let values = fetched[index].1.values
            for path in followed {
                // Marked as wanted in the map itself (`.some(nil)`), then read in one batch.
                if case .object(let id)? = path.value(0, in: values), rows[id] == nil {
                    rows[id] = .some(nil)
                    wanted.append(id)
                }
            }
        }
        try remember(wanted)
    }

    /// Reads the rows of `ids` (none of them read before) in one batch.
    private func remember(_ ids: [ManagedObjectID]) throws {
        guard !ids.isEmpty else { return }
        for (id, row) in zip(ids, try coordinator.rows(for: ids)) { rows[id] = .some(try row.map { try source(id, $0) }) }
    }

    /// The row of `id`, read once.
    private func row(_ id: ManagedObjectID) throws -> Source? {
        if let known = rows[id] { return known }
        try remember([id])
        return rows[id] ?? nil
    }

    /// `keyPath` from `entity` as hops: to-one relationships, then any property; nil when it
    /// names nothing (or goes on past a to-many relationship or an attribute).
    func path(_ keyPath: String, from entity: Unmanaged<EntityDescription>) -> Path? {
        let address = entity.toOpaque()
        for index in recent.indices where recent[index].entity == address && recent[index].key == keyPath { return recent[index].path }
        let cacheKey = PathKey(entity: address, key: keyPath)
        let result: Path?
        if let known = paths[cacheKey] {
            result = known
        } else {
            result = entity._withUnsafeGuaranteedRef { Self.compile(keyPath, from: $0) }.map(Path.init)
            paths[cacheKey] = .some(result)
        }
        if recent.count < 32 { recent.append((address, keyPath, result)) }
        return result
    }

    /// `keyPath`'s hops from `entity` (see ``steps(_:from:)``).
    private static func compile(_ keyPath: String, from entity: EntityDescription) -> [Step]? {
        let path = ModelKeyPath(KeyPathEvaluator.components(of: keyPath), from: entity)
        guard path.throughToOne else { return nil }
        var steps = path.hops.map { Step(kind: .toOne, name: $0.name, attribute: nil, relationship: $0) }
        switch path.end {
        case .attribute(let attribute):
            steps.append(Step(kind: .attribute, name: attribute.name, attribute: attribute, relationship: nil))
        case .relationship(let relationship):
            steps.append(Step(kind: relationship.isToMany ? .toMany : .toOne, name: relationship.name, attribute: nil, relationship: relationship))
        default:
            return nil
        }
        return steps
    }

    /// Whether `keyPath` names a property along a path of to-one relationships of `entity`.
    func names(_ keyPath: String, in entity: Unmanaged<EntityDescription>) -> Bool { path(keyPath, from: entity) != nil }

    /// The keys a keyed container lists: the properties to fetch, else the entity's attributes
    /// and to-one relationships.
    func keys(of entity: EntityDescription) -> [String] {
        if let properties { return properties }
        return entity.attributesByName.keys.sorted() + entity.relationshipsByName.values.filter { !$0.isToMany }.map(\.name).sorted()
    }

    /// What `keyPath` (keys separated by dots; to-one hops, then any property) reaches from
    /// `source`. An unknown key is `keyNotFound`.
    func reach(_ keyPath: String, from source: Source, codingPath: [any CodingKey]) throws -> Reached {
        guard let path = path(keyPath, from: source.entityReference) else {
            throw DecodingError.keyNotFound(ValueCodingKey(keyPath), .init(codingPath: codingPath,
                debugDescription: "\(source.entity.name) has no property or to-one key path \"\(keyPath)\""))
        }
        let last = path.steps.count - 1
        let step = path.steps[last]
        guard let current = try lastSource(of: path, from: source) else { return .missing }
        switch step.kind {
        case .attribute:
            return try attributeValue(path, last, of: current).map { .attribute($0, step.attribute!.type) } ?? .missing
        case .toMany:
            return .toMany(try destinations(step.relationship!, of: current))
        case .toOne:
            return try destination(path, last, of: current).map(Reached.toOne) ?? .missing
        }
    }

    /// The source `path`'s last hop reads: `source` for a path of one hop, else the destination
    /// its to-one hops lead to (nil when one of them holds nil).
    private func lastSource(of path: Path, from source: Source) throws -> Source? {
        var current = source
        for position in 0..<(path.steps.count - 1) {
            guard let destination = try destination(path, position, of: current) else { return nil }
            current = destination
        }
        return current
    }

    /// What a key path holds, for the containers' typed fast paths: the attribute's value as
    /// stored, nil, or something else (a relationship, an unknown key), which the generic way
    /// decodes or reports.
    enum Stored {
        case value(AttributeValue)
        case missing
        case other
    }

    /// The attribute `keyPath` reaches from `source`, without building a ``Reached`` (no
    /// attribute type copied per value).
    @inline(__always)
    func stored(_ keyPath: String, from source: Source) throws -> Stored {
        guard let path = path(keyPath, from: source.entityReference) else { return .other }
        let last = path.steps.count - 1
        guard path.steps[last].kind == .attribute else { return .other }
        // One hop (the common case) reads `source` itself, not a copy.
        if last == 0 { return try attributeValue(path, 0, of: source).map(Stored.value) ?? .missing }
        guard let current = try lastSource(of: path, from: source) else { return .missing }
        return try attributeValue(path, last, of: current).map(Stored.value) ?? .missing
    }

    private func attributeValue(_ path: Path, _ position: Int, of source: Source) throws -> AttributeValue? {
        if let values = source.values {
            if case .attribute(let value)? = path.value(position, in: values) { return value }
            return nil
        }
        guard let object = source.object else { return nil }
        let step = path.steps[position]
        if !step.attribute!.isTransient { try object.fireFault() }
        if case .attribute(let value)? = object.values[step.name] { return value }
        return nil
    }

    private func destination(_ path: Path, _ position: Int, of source: Source) throws -> Source? {
        let name = path.steps[position].name
        if let values = source.values {
            guard case .object(let id)? = path.value(position, in: values) else { return nil }
            if position == 0 && decodingFirst && !followed.contains(where: { $0 === path }) { followed.append(path) }
            return try self.row(id)
        }
        return (try source.object?.value(forKey: name) as? ManagedObject).map(Self.source)
    }

    private func destinations(_ relationship: RelationshipDescription, of source: Source) throws -> [Source] {
        if let values = source.values {
            let ids: [ManagedObjectID]
            if case .objects(let ordered)? = values[relationship.name] {
                ids = Array(ordered)
            } else {
                ids = try coordinator.relatedObjectIDs(of: source.id, relationship: relationship)
            }
            try remember(ids.filter { rows[$0] == nil })
            return try ids.compactMap { try self.row($0) }
        }
        switch try source.object?.value(forKey: relationship.name) {
        case let list as [ManagedObject]: return list.map(Self.source)
        // Unordered: by primary key, as the store's relationship trees give them.
        case let set as Set<ManagedObject>: return set.sorted { $0.objectID.key < $1.objectID.key }.map(Self.source)
        default: return []
        }
    }
}
