import Foundation

/// An entity's stored columns after a row's entity name and version, in row order: each
/// persistent attribute, then each to-one relationship (preceded by its destination's entity
/// name when the destination entity has sub-entities). The one statement of the row layout that
/// decoding follows (``NativeStore/encode(_:entity:permanent:)`` writes it).
///
/// In stores of row layout 2 (``RowLayout/fixedFirst``, every store made since 2026-11-23) the
/// attributes of fixed size come first — integers, floating-point numbers, dates, booleans and
/// UUIDs, in the order the model declares them — then the others (strings, decimals, binary
/// data, URIs, transformables), so a scan's filter finds a fixed-size attribute at the same
/// offset in every row without skipping strings. Stores of layout 1 keep the model's order.
///
/// A class: made once per entity of the model and shared, so passing it to every row's decoder
/// retains one reference rather than copying its arrays.
final class RowColumns: @unchecked Sendable {
    enum Column: Sendable {
        /// A persistent attribute, and its slot in the entity's property layout.
        case attribute(slot: Int, type: AttributeType)
        /// A to-one relationship: its slot, its destination entity, and whether the row names
        /// the destination's entity before its key.
        case toOne(slot: Int, destination: String, named: Bool)
    }

    let columns: [Column]
    /// The slots of the attribute columns, in order (plain integers: the row encoder walks
    /// them for every row written).
    let attributeSlots: [Int]
    /// The to-one columns, in order: their slots, and whether each names its destination's entity.
    let toOneSlots: [(slot: Int, named: Bool)]
    /// The entity's name as a row's first component is encoded: a row whose bytes start with it
    /// is a row of this entity (components end unambiguously), told without decoding the name.
    let entityComponent: [UInt8]
    /// The columns as the decoder walks them: plain values (no payload to retain or release
    /// per column per row), a to-one's destination given by its place in `destinations`. In a
    /// buffer the columns own (never changed after `init`, so `@unchecked Sendable` holds):
    /// decoding a row reads it without counting a reference to an array.
    let stepBuffer: UnsafeMutableBufferPointer<DecodeStep>
    /// The to-one columns' destination entities, by the steps' `destination`.
    let destinations: [String]

    /// One column as the decoder reads it.
    struct DecodeStep {
        /// The slot in the entity's property layout.
        var slot: Int
        /// An attribute's kind; nil for a to-one relationship.
        var kind: AttributeType.Kind?
        /// A to-one's destination (an index into `destinations`).
        var destination: Int
        /// Whether a to-one's row names its destination's entity before its key.
        var named: Bool
    }

    /// The order of a store's row columns (recorded in its metadata as `rows`).
    enum RowLayout: UInt8, Sendable {
        /// The model's order (stores made before layout 2).
        case declared = 1
        /// Attributes of fixed size first.
        case fixedFirst = 2
    }

    /// The component a value of `kind` is stored as, when every one has the same size: the tags
    /// it may start with (a boolean's include nil's, which is one byte too) and its size. Nil for
    /// kinds of varying size.
    static func fixedComponent(_ kind: AttributeType.Kind) -> (tags: [UInt8], size: Int)? {
        switch kind {
        case .integer16, .integer32, .integer64: ([KeyEncoding.Tag.int], 9)
        case .double, .float: ([KeyEncoding.Tag.double], 9)
        case .date: ([KeyEncoding.Tag.date], 9)
        case .uuid: ([KeyEncoding.Tag.uuid], 17)
        case .boolean: ([KeyEncoding.Tag.null, KeyEncoding.Tag.falseValue, KeyEncoding.Tag.trueValue], 1)
        case .decimal, .string, .binaryData, .uri, .transformable: nil
        }
    }

    /// Whether every non-nil value of `kind` is stored as a component of one size.
    static func isFixedSize(_ kind: AttributeType.Kind) -> Bool { fixedComponent(kind) != nil }

    init(_ entity: EntityDescription, layout: RowLayout) {
        var columns: [Column] = []
        var attributeSlots: [Int] = []
        var toOneSlots: [(slot: Int, named: Bool)] = []
        var steps: [DecodeStep] = []
        var destinations: [String] = []
        var attributes = zip(entity.attributes, entity.attributeSlots).filter { !$0.0.isTransient }
        if layout == .fixedFirst {
            attributes = attributes.filter { Self.isFixedSize($0.0.type.kind) } + attributes.filter { !Self.isFixedSize($0.0.type.kind) }
        }
        for (attribute, slot) in attributes {
            columns.append(.attribute(slot: slot, type: attribute.type))
            attributeSlots.append(slot)
            steps.append(DecodeStep(slot: slot, kind: attribute.type.kind, destination: 0, named: false))
        }
        for (relationship, slot) in zip(entity.relationships, entity.relationshipSlots) where !relationship.isToMany {
            let named = relationship.destinationEntity.map { !$0.subentities.isEmpty } ?? false
            columns.append(.toOne(slot: slot, destination: relationship.destinationEntityName, named: named))
            toOneSlots.append((slot, named))
            steps.append(DecodeStep(slot: slot, kind: nil, destination: destinations.count, named: named))
            destinations.append(relationship.destinationEntityName)
        }
        stepBuffer = .allocate(capacity: steps.count)
        _ = stepBuffer.initialize(from: steps)
        self.destinations = destinations
        self.columns = columns
        self.attributeSlots = attributeSlots
        self.toOneSlots = toOneSlots
        entityComponent = KeyEncoding.encode([.string(entity.name)])
    }

    deinit {
        stepBuffer.deallocate()
    }

    /// Whether `row` is a row of this entity (its first component is the entity's name).
    @inline(__always)
    func names(_ row: UnsafeRawBufferPointer) -> Bool {
        entityComponent.withUnsafeBytes { Self.row(row, begins: $0) }
    }

    /// Whether `row` begins with `name`, an encoded entity name: a whole component, which ends
    /// unambiguously, so equal leading bytes are the same name (`memcmp`, not the keys' order).
    @inline(__always)
    static func row(_ row: UnsafeRawBufferPointer, begins name: UnsafeRawBufferPointer) -> Bool {
        row.count >= name.count && memcmp(row.baseAddress!, name.baseAddress!, name.count) == 0
    }
}

/// Where each property of an entity's rows sits among a row's encoded components (the layout
/// ``NativeStore/encode(_:entity:permanent:)`` writes, as ``RowColumns`` states it).
struct RawRowLayout {
    enum Slot {
        case attribute(Int, AttributeType)
        /// A to-one relationship: the component of the destination's key, and whether the one
        /// before it names the destination's entity.
        case toOne(Int, destination: String, named: Bool)
    }

    let entity: EntityDescription
    let slots: [String: Slot]

    init(_ entity: EntityDescription, columns: RowColumns) {
        self.entity = entity
        var slots: [String: Slot] = [:]
        var index = 2
        for column in columns.columns {
            switch column {
            case .attribute(let slot, let type):
                slots[entity.propertyLayout.names[slot]] = .attribute(index, type)
            case .toOne(let slot, let destination, let named):
                if named { index += 1 }
                slots[entity.propertyLayout.names[slot]] = .toOne(index, destination: destination, named: named)
            }
            index += 1
        }
        self.slots = slots
    }
}

/// A stored row read in place by a scan's filter: its components are located once per row (into
/// buffers reused from row to row) and decoded only when the predicate reads them; only rows
/// that match are decoded whole.
final class RawRow {
    private(set) var bytes: [UInt8] = []
    /// The start of each component, then the end of the last.
    private var offsets: [Int] = []
    var id: ManagedObjectID
    var layout: RawRowLayout?
    let store: NativeStore

    init(store: NativeStore, placeholder: ManagedObjectID) {
        self.store = store
        id = placeholder
    }

    /// Takes a row's bytes; false when they are not a sequence of components.
    func load(_ value: UnsafeRawBufferPointer) -> Bool {
        bytes.removeAll(keepingCapacity: true)
        bytes.append(contentsOf: value)
        offsets.removeAll(keepingCapacity: true)
        var position = 0
        while position < value.count {
            offsets.append(position)
            guard let end = KeyEncoding.componentEnd(value, from: position) else { return false }
            position = end
        }
        offsets.append(position)
        return offsets.count >= 3
    }

    func component(_ index: Int) throws -> KeyComponent {
        guard index + 1 < offsets.count else {
            throw ArborError(.store, "the row of \(id) is malformed: too few values")
        }
        return try KeyEncoding.decodeComponent(bytes[offsets[index]..<offsets[index + 1]])
    }

    /// The value of the attribute `key` (nil when it holds nil, or the entity has no such stored
    /// attribute).
    func attributeValue(forKey key: String) throws -> AttributeValue? {
        guard case .attribute(let index, let type)? = layout?.slots[key] else { return nil }
        return NativeStore.attributeValue(try component(index), kind: type.kind)
    }

    /// The value of `key` (nil when the entity has no such stored property).
    func operand(forKey key: String) throws -> Operand? {
        guard let slot = layout?.slots[key] else { return nil }
        switch slot {
        case .attribute(let index, let type):
            return NativeStore.attributeValue(try component(index), kind: type.kind).map(Operand.init) ?? .null
        case .toOne(let index, let destination, let named):
            guard case .int(let key) = try component(index) else { return .null }
            guard NativeStore.isPrimaryKey(key) else {
                throw ArborError(.store, "a row's relationship holds \(key), which is not a primary key")
            }
            var name = destination
            if named, case .string(let actual) = try component(index - 1) {
                // A name read from the file: only the model's entities make IDs.
                guard store.isModelEntity(actual) else {
                    throw ArborError(.store, "a row's relationship names \(actual), which is not an entity of the model")
                }
                name = actual
            }
            return .objectID(store.objectID(name, key))
        }
    }
}

extension RawRow: EvaluatedRow {
    var objectID: ManagedObjectID? { id }
    var entityName: String? { layout?.entity.name }
}

/// A decoded row as the predicate evaluator reads it (``EvaluatedRow``): one per fetch, given
/// each row in turn (``set(_:id:)``), so that evaluating a row allocates nothing.
final class DecodedRow: EvaluatedRow {
    private(set) var row = StoreRow.placeholder
    private(set) var objectID: ManagedObjectID?

    init() {}

    /// The row `row` of `id` (nil: not known), replacing the one before; the object itself, for
    /// an operand.
    @inline(__always)
    func set(_ row: StoreRow, id: ManagedObjectID?) -> DecodedRow {
        self.row = row
        objectID = id
        return self
    }

    var entityName: String? { row.entityName }

    func operand(forKey key: String) throws -> Operand? {
        guard let slot = row.values.layout.index[key] else { return nil }
        switch row.values[slot: slot] {
        case .attribute(let stored)?: return Operand(stored)
        case .object(let id)?: return .objectID(id)
        case .objects(let ids)?: return .collection(ids.map(Operand.objectID))
        case .none?, nil: return .null
        }
    }
}
