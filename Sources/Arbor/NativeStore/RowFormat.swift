import ArborStore
import Foundation

// Safety: `stepBuffer` and each fill's payload are allocated when the format is made, never
// changed, and freed in `deinit`; row bytes are lent for the call, and the slices returned of them
// are used by the callers within the same lending; layouts are used unretained because they are
// never freed.

/// The one statement of an entity's stored row in a store (docs/row-format.md; the bytes in
/// docs/file-format.md, "Rows"): the header, the column order, where each property's value sits
/// among a row's components, encoding, decoding, the lookup of one component, and the fixed
/// offsets a scan's filter may read. Everything else that reads or writes a row's bytes asks it.
///
/// A row's value is a sequence of key-encoding components (docs/file-format.md, "Key
/// encoding"): the **header** — the entity's name (a string; a row whose bytes start with it is a
/// row of that entity, told without decoding the name) and the version (an integer) — then one
/// **column** per persistent attribute, then per to-one relationship the destination's primary
/// key (an integer, or nil), preceded by the destination's entity name when the destination
/// entity has sub-entities.
///
/// The columns' order is the one the store records (`columns.<Entity>` in its metadata, written
/// when the store is made, or when a build that records it first opens an older store for
/// writing), so reordering a model's properties never misreads a row. Before a store records it,
/// the order is derived from its ``Layout``: stores made since 2026-11-23 (layout 2,
/// ``Layout/fixedFirst``) put the attributes of fixed size first — integers, floating-point
/// numbers, dates, booleans and UUIDs, in the order the model declares them — then the others
/// (strings, decimals, binary data, URIs, transformables), so a scan's filter finds a fixed-size
/// attribute at the same offset in every row without skipping strings. Stores of layout 1 keep
/// the model's order.
///
/// A class: made once per entity of the store's model and shared, so passing it to every row's
/// decoder retains one reference rather than copying its arrays.
final class RowFormat: @unchecked Sendable {
    /// The order of a store's row columns (recorded in its metadata as `rows`).
    enum Layout: UInt8, Sendable, CaseIterable {
        /// The model's order (stores made before layout 2).
        case declared = 1
        /// Attributes of fixed size first.
        case fixedFirst = 2
        /// Records: a header of serial types, then the payloads (``RowFormat`` + Records).
        case records = 3
    }

    /// One stored column, in row order.
    enum Column: Sendable {
        /// A persistent attribute, and its slot in the entity's property layout.
        case attribute(slot: Int, type: AttributeType)
        /// A to-one relationship: its slot, its destination entity, and whether the row names
        /// the destination's entity before its key.
        case toOne(slot: Int, destination: String, named: Bool)
    }

    /// Where a property's value sits among a row's components.
    enum Place {
        /// An attribute: its component and type.
        case attribute(component: Int, type: AttributeType)
        /// A to-one relationship: the component of the destination's key, its declared
        /// destination, and the component naming the destination's entity when the row names it.
        case toOne(component: Int, destination: String, nameComponent: Int?)
    }

    /// The header's components: the entity's name, then the version.
    static let nameComponent = 0
    static let versionComponent = 1
    /// The first column's component.
    static let firstColumnComponent = 2

    /// The entity whose rows this describes.
    let entity: EntityDescription
    let layout: Layout
    let columns: [Column]
    /// Each stored property's place, by name.
    let places: [String: Place]
    /// Each stored component after the header: its attribute kind, nil for a to-one's entity
    /// name or key.
    let columnKinds: [AttributeType.Kind?]
    /// The bytes every row of this entity starts with, and no row of another entity of its
    /// hierarchy: in layouts 1 and 2 the entity's name as a component; in layout 3 its entity
    /// index as a varint, or nothing when the hierarchy has no sub-entities.
    let entityPrefix: [UInt8]
    /// The columns as the decoder walks them: plain values (no payload to retain or release
    /// per column per row), a to-one's destination given by its place in `destinations`. In a
    /// buffer the format owns (never changed after `init`, so `@unchecked Sendable` holds):
    /// decoding a row reads it without counting a reference to an array.
    let stepBuffer: UnsafeMutableBufferPointer<DecodeStep>
    /// The to-one columns' destination entities, by the steps' `destination`.
    let destinations: [String]
    /// Their ID spaces in the store the format was made for (empty when it was made for none):
    /// a destination's ID is then made without hashing its entity's name, row after row.
    let destinationSpaces: [ObjectIDSpace]
    /// Layout 3: what a record shorter than its columns holds in each missing column that is
    /// not nil — the default of an attribute a migration appended without rewriting the rows
    /// (recorded as `fills.<Entity>`; docs/row-format.md, "The column order is recorded in the
    /// store"). By record column.
    let fills: [Int: Fill]
    /// The fills' values, by decode step (empty when there are none).
    let stepFills: [PropertyValue?]

    /// A missing trailing column's value, in each form a reader asks for.
    struct Fill {
        /// The value.
        let value: AttributeValue
        /// Its serial type and payload (the column as a record stores it).
        let type: UInt64
        let payload: UnsafeRawBufferPointer
        /// Its key-encoding component (what the scan filter's byte tests compare).
        let component: [UInt8]
    }

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

    /// The format of `entity`'s rows in a store of `layout`, with `columns` in row order (nil:
    /// the order `layout` derives from the model, ``derivedOrder(_:layout:)``). `entityIndex` is
    /// the entity's place in a layout-3 store's recorded entity list (its rows' prefix when its
    /// hierarchy has sub-entities).
    /// `fills`: the non-nil values of missing trailing attribute columns, by property name
    /// (layout 3).
    /// `store`: the identifier of the store whose rows these are (the destinations' ID spaces are
    /// then found once, here).
    init(_ entity: EntityDescription, layout: Layout, columns ordered: [Column]? = nil, entityIndex: Int = 0,
         fills fillValues: [String: AttributeValue] = [:], store: UUID? = nil) {
        self.entity = entity
        self.layout = layout
        let ordered = ordered ?? Self.derivedOrder(entity, layout: layout)
        var places: [String: Place] = [:]
        var steps: [DecodeStep] = []
        var destinations: [String] = []
        var component = Self.firstColumnComponent
        var columnKinds: [AttributeType.Kind?] = []
        var fills: [Int: Fill] = [:]
        var stepFills: [PropertyValue?] = []
        for column in ordered {
            let name = Self.name(of: column, in: entity)
            switch column {
            case .attribute(let slot, let type):
                let fill = layout == .records ? fillValues[name] : nil
                if let fill {
                    let column = Self.column(of: fill)
                    var position = 0
                    let serialType = column.withUnsafeBytes { RecordEncoding.readVarint($0, &position) } ?? 0
                    let payload = UnsafeMutableRawBufferPointer.allocate(byteCount: column.count - position, alignment: 8)
                    column.withUnsafeBytes { payload.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[position..<$0.count])) }
                    fills[component - Self.firstColumnComponent] = Fill(value: fill, type: serialType, payload: UnsafeRawBufferPointer(payload),
                                                                        component: KeyEncoding.encode([NativeStore.component(fill)]))
                }
                stepFills.append(fill.map(PropertyValue.attribute))
                places[name] = .attribute(component: component, type: type)
                component += 1
                columnKinds.append(type.kind)
                steps.append(DecodeStep(slot: slot, kind: type.kind, destination: 0, named: false))
            case .toOne(let slot, let destination, let named):
                let nameComponent: Int? = named ? component : nil
                if named { component += 1 }
                places[name] = .toOne(component: component, destination: destination, nameComponent: nameComponent)
                component += 1
                columnKinds += named ? [nil, nil] : [nil]
                stepFills.append(nil)
                steps.append(DecodeStep(slot: slot, kind: nil, destination: destinations.count, named: named))
                destinations.append(destination)
            }
        }
        stepBuffer = .allocate(capacity: steps.count)
        _ = stepBuffer.initialize(from: steps)
        self.destinations = destinations
        destinationSpaces = store.map { store in destinations.map { ObjectIDSpace.interned($0, store) } } ?? []
        self.fills = fills
        // Empty when there is no fill: the decoder then never looks.
        self.stepFills = fills.isEmpty ? [] : stepFills
        columns = ordered
        self.columnKinds = columnKinds
        self.places = places
        if layout != .records {
            entityPrefix = KeyEncoding.encode([.string(entity.name)])
        } else {
            entityPrefix = entity.rootEntity.subentities.isEmpty ? [] : RecordEncoding.varint(UInt64(entityIndex))
        }
    }

    /// The format of `entity`'s rows in a store of `layout` that records their column order as
    /// `order` (property names; ``derivedColumnNames(_:layout:)``).
    ///
    /// - Throws: ``ArborError/Code/incompatibleModel`` when `order` does not name exactly the
    ///   entity's stored properties, each once.
    static func recorded(_ entity: EntityDescription, layout: Layout, order: [String], entityIndex: Int = 0,
                         fills: [String: AttributeValue] = [:], store: UUID? = nil) throws -> RowFormat {
        let derived = derivedOrder(entity, layout: layout)
        let names = derived.map { name(of: $0, in: entity) }
        let byName = Dictionary(uniqueKeysWithValues: zip(names, derived))
        guard order.count == names.count, Set(order) == Set(names) else {
            var differences: [String] = []
            let missing = Set(names).subtracting(order).sorted(), extra = Set(order).subtracting(names).sorted()
            if !missing.isEmpty { differences.append("the store has no column for \(missing.joined(separator: ", "))") }
            if !extra.isEmpty { differences.append("the model has no property \(extra.joined(separator: ", "))") }
            if differences.isEmpty { differences.append("a column is recorded twice") }
            throw ArborError(.incompatibleModel, "the store records the columns of \(entity.name)'s rows as (\(order.joined(separator: ", "))), "
                             + "which do not fit the model: \(differences.joined(separator: "; "))", entity: entity.name)
        }
        return RowFormat(entity, layout: layout, columns: order.compactMap { byName[$0] }, entityIndex: entityIndex, fills: fills, store: store)
    }

    /// The columns `layout` puts `entity`'s stored properties in: the persistent attributes (in
    /// layout 2 those of fixed size first), then the to-one relationships, each group in the
    /// model's order.
    static func derivedOrder(_ entity: EntityDescription, layout: Layout) -> [Column] {
        var attributes = zip(entity.attributes, entity.attributeSlots).filter { !$0.0.isTransient }
        if layout == .fixedFirst {
            attributes = attributes.filter { isFixedSize($0.0.type.kind) } + attributes.filter { !isFixedSize($0.0.type.kind) }
        }
        let toOnes = zip(entity.relationships, entity.relationshipSlots).filter { !$0.0.isToMany }
        return attributes.map { Column.attribute(slot: $0.1, type: $0.0.type) }
            + toOnes.map { relationship, slot in
                Column.toOne(slot: slot, destination: relationship.destinationEntityName,
                             named: relationship.destinationEntity.map { !$0.subentities.isEmpty } ?? false)
            }
    }

    /// The property a column stores.
    static func name(of column: Column, in entity: EntityDescription) -> String {
        switch column {
        case .attribute(let slot, _), .toOne(let slot, _, _): entity.propertyLayout.names[slot]
        }
    }

    /// The column order `layout` derives for `entity`, as a store records it
    /// (`columns.<Entity>` in `arbor.metadata`): the stored properties' names, in row order.
    static func derivedColumnNames(_ entity: EntityDescription, layout: Layout) -> [String] {
        derivedOrder(entity, layout: layout).map { name(of: $0, in: entity) }
    }

    deinit {
        stepBuffer.deallocate()
        for fill in fills.values { fill.payload.deallocate() }
    }

    // MARK: The header

    /// Whether `row` is a row of this entity (it starts with ``entityPrefix``).
    @inline(__always)
    func owns(_ row: UnsafeRawBufferPointer) -> Bool {
        entityPrefix.withUnsafeBytes { Self.row(row, begins: $0) }
    }

    /// Whether `row` begins with `prefix`, an entity prefix: a whole component or varint, which
    /// ends unambiguously, so equal leading bytes are the same entity (`memcmp`).
    @inline(__always)
    static func row(_ row: UnsafeRawBufferPointer, begins prefix: UnsafeRawBufferPointer) -> Bool {
        guard prefix.count > 0 else { return true }
        return row.count >= prefix.count && memcmp(row.baseAddress!, prefix.baseAddress!, prefix.count) == 0
    }

    /// The entity name at the start of a row's bytes in layouts 1 and 2 (nil when malformed).
    static func entityName(of row: UnsafeRawBufferPointer) -> String? {
        var reader = KeyReader(row)
        guard case .string(let name)? = try? reader.next() else { return nil }
        return name
    }

    // MARK: Components

    /// Where the component starting at `start` ends (nil when the bytes there are not one).
    @inline(__always)
    static func componentEnd(_ row: UnsafeRawBufferPointer, from start: Int) -> Int? {
        KeyEncoding.componentEnd(row, from: start)
    }

    /// Where component `index` of a row lies (nil when the row has fewer components or is not a
    /// sequence of components).
    static func range(ofComponent index: Int, in row: UnsafeRawBufferPointer) -> Range<Int>? {
        var start = 0
        for position in 0...index {
            guard start < row.count, let end = componentEnd(row, from: start) else { return nil }
            if position == index { return start..<end }
            start = end
        }
        return nil
    }

    /// The start of each of `row`'s components, then the end of the last, into `offsets`
    /// (emptied first); false when the bytes are not a sequence of components or hold no
    /// whole header.
    static func locateComponents(_ row: UnsafeRawBufferPointer, into offsets: inout [Int]) -> Bool {
        offsets.removeAll(keepingCapacity: true)
        var position = 0
        while position < row.count {
            offsets.append(position)
            guard let end = componentEnd(row, from: position) else { return false }
            position = end
        }
        offsets.append(position)
        return offsets.count > firstColumnComponent
    }

    /// The attribute value the component at `range` of `row` stores, read as `kind` (nil for nil
    /// or a component of another kind).
    static func attributeValue(in row: UnsafeRawBufferPointer, at range: Range<Int>, kind: AttributeType.Kind) throws -> AttributeValue? {
        var reader = KeyReader(UnsafeRawBufferPointer(rebasing: row[range]))
        guard let stored = try reader.next() else { return nil }
        return NativeStore.attributeValue(stored, kind: kind)
    }

    /// The value of the attribute at `component` (of kind `kind`) in `row`, read alone.
    ///
    /// - Throws: `StoreError` when the row is malformed up to there.
    func attributeValue(atComponent component: Int, kind: AttributeType.Kind, in row: UnsafeRawBufferPointer) throws -> AttributeValue? {
        if layout == .records {
            guard let column = try recordColumn(component - Self.firstColumnComponent, of: row) else { return nil }
            return Self.attributeValue(column.type, column.payload, kind: kind)
        }
        guard let range = Self.range(ofComponent: component, in: row) else { throw StoreError(.corrupt, "too few values") }
        return try Self.attributeValue(in: row, at: range, kind: kind)
    }

    /// Component `index` of `row` as layouts 1 and 2 store it (0: the entity's name, 1: the
    /// version, then the columns); for records, the same value made from its column (`kinds`:
    /// the column's attribute kind; nil for a to-one's integer). Nil past the row's last column.
    ///
    /// - Throws: `StoreError` when the row is malformed up to there.
    func component(_ index: Int, of row: UnsafeRawBufferPointer) throws -> KeyComponent? {
        guard layout == .records else {
            guard let range = Self.range(ofComponent: index, in: row) else { return nil }
            var reader = KeyReader(UnsafeRawBufferPointer(rebasing: row[range]))
            return try reader.next()
        }
        switch index {
        case Self.nameComponent: return .string(entity.name)
        case Self.versionComponent:
            guard let record = RecordEncoding.head(of: row, from: entityPrefix.count) else { throw StoreError(.corrupt, "a malformed record header") }
            return .int(Int64(truncatingIfNeeded: record.leading))
        default:
            guard let column = try recordColumn(index - Self.firstColumnComponent, of: row) else { return .null }
            if column.type == 0 { return .null }
            if let kind = columnKinds[index - Self.firstColumnComponent] {
                return Self.attributeValue(column.type, column.payload, kind: kind).map(NativeStore.component) ?? .null
            }
            return RecordEncoding.integer(column.type, column.payload, at: 0).map(KeyComponent.int) ?? .null
        }
    }

    // MARK: The fixed head

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

    /// The rows' *fixed head*, no further than component `last` needs: the leading components
    /// whose sizes the format fixes (the name, the version, then attributes of fixed size up to
    /// the first of another kind). `starts[k]` is where component `k` starts, for `k` up to
    /// the first component after the head; `guards[k - 1]` is the tags component `k` (after the
    /// name) must have there. A row whose head holds those tags has its head components at
    /// those offsets (a nil integer would be one byte, so it fails its guard).
    func fixedHead(through last: Int) -> (starts: [Int], guards: [ValuePrefilter.Guard]) {
        // Records have no fixed offsets: a head of the entity prefix alone.
        guard layout != .records else { return ([0, entityPrefix.count], []) }
        let nameCount = entityPrefix.count
        var starts = [0, nameCount, nameCount + 9]
        var guards = [ValuePrefilter.Guard(offset: nameCount, allowed: [KeyEncoding.Tag.int])]
        var component = Self.firstColumnComponent
        for column in columns {
            guard component <= last, case .attribute(_, let type) = column, let fixed = Self.fixedComponent(type.kind) else { break }
            let start = starts[component]
            guards.append(ValuePrefilter.Guard(offset: start, allowed: fixed.tags))
            starts.append(start + fixed.size)
            component += 1
        }
        return (starts, guards)
    }

    // MARK: Encoding and decoding

    /// A row's bytes: the header, each attribute column, each to-one's destination (its entity
    /// when named, its primary key from `primaryKey`).
    func encode(_ row: StoreRow, primaryKey: (ManagedObjectID) throws -> Int64, entityIndex: (String) -> Int64? = { _ in nil }) throws -> [UInt8] {
        // Rows Arbor made are in the entity's layout: values by slot, no lookups by name.
        let sameLayout = row.values.layout === entity.propertyLayout
        func value(_ slot: Int) -> PropertyValue? {
            sameLayout ? row.values[slot: slot] : row.values[entity.propertyLayout.names[slot]]
        }
        if layout == .records { return try encodeRecord(row, value: value, primaryKey: primaryKey, entityIndex: entityIndex) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        KeyEncoding.append(.string(row.entityName), to: &bytes)
        KeyEncoding.append(.int(row.version), to: &bytes)
        for step in stepBuffer {
            if step.kind != nil {
                if case .attribute(let stored)? = value(step.slot) {
                    KeyEncoding.append(NativeStore.component(stored), to: &bytes)
                } else {
                    KeyEncoding.append(.null, to: &bytes)
                }
            } else if case .object(let id)? = value(step.slot) {
                if step.named { KeyEncoding.append(.string(id.entityName), to: &bytes) }
                KeyEncoding.append(.int(try primaryKey(id)), to: &bytes)
            } else {
                if step.named { KeyEncoding.append(.null, to: &bytes) }
                KeyEncoding.append(.null, to: &bytes)
            }
        }
        return bytes
    }

    /// The ID of a to-one's destination row `key`: in the destination's space when the row did
    /// not name another entity (`name` is the step's own destination) and the format knows it.
    @inline(__always)
    func destinationID(_ step: DecodeStep, _ name: String, _ key: Int64, store: NativeStore) -> ManagedObjectID {
        if !destinationSpaces.isEmpty, !step.named || name == destinations[step.destination] {
            return ManagedObjectID(space: destinationSpaces[step.destination], key: key)
        }
        return store.objectID(name, key)
    }

    /// Decodes a row of this entity in place (straight out of its page), component by component
    /// into the slots of the entity's layout; `store` makes the IDs of its to-one destinations.
    /// With `mask`, only the slots it flags are decoded (the others are stepped over).
    ///
    /// - Throws: ``ArborError/Code/store`` for a malformed row, naming `objectID`.
    func decode(_ bytes: UnsafeRawBufferPointer, objectID: ManagedObjectID, store: NativeStore,
                reading mask: UnsafeBufferPointer<Bool>? = nil) throws -> StoreRow {
        if layout == .records { return try decodeRecord(bytes, objectID: objectID, store: store, reading: mask) }
        func corrupt(_ why: String) -> ArborError {
            ArborError(.store, "the row of \(objectID) is malformed: \(why)", objectID: objectID)
        }
        var reader = KeyReader(bytes)
        do {
            // The entity's name (the caller told the entity) is skipped, not decoded.
            try reader.skip()
            guard case .int(let version)? = try reader.next() else { throw corrupt("no entity and version") }
            // Versions start at 1, and a save adds one: the largest leaves room for that.
            guard version > 0, version < Int64.max else { throw corrupt("its version \(version) is out of range") }
            // Layouts are never freed: held unretained.
            let layoutReference = entity.layoutReference
            var slots = layoutReference._withUnsafeGuaranteedRef { $0.makeSlots() }
            for step in stepBuffer {
                if let mask, !mask[step.slot] {
                    // A column the caller does not read: stepped over, nothing decoded.
                    try reader.skip()
                    if step.kind == nil && step.named { try reader.skip() }
                    continue
                }
                if let kind = step.kind {
                    guard let component = try reader.next() else { throw corrupt("too few values") }
                    slots[step.slot] = NativeStore.attributeValue(component, kind: kind).map(PropertyValue.attribute) ?? PropertyValue.none
                    continue
                }
                var destinationName = destinations[step.destination]
                if step.named {
                    guard let component = try reader.next() else { throw corrupt("too few values") }
                    if case .string(let name) = component {
                        // A name read from the file: only the model's entities make IDs.
                        guard store.isModelEntity(name) else { throw corrupt("a relationship names \(name), which is not an entity of the model") }
                        destinationName = name
                    }
                }
                guard let component = try reader.next() else { throw corrupt("too few values") }
                if case .int(let key) = component {
                    guard NativeStore.isPrimaryKey(key) else { throw corrupt("a relationship holds \(key), which is not a primary key") }
                    slots[step.slot] = .object(destinationID(step, destinationName, key, store: store))
                } else {
                    slots[step.slot] = PropertyValue.none
                }
            }
            return layoutReference._withUnsafeGuaranteedRef {
                StoreRow(entityName: entity.name, version: version, values: PropertyStorage(layout: $0, slots: slots))
            }
        } catch let error as StoreError {
            throw corrupt(error.message)
        }
    }
}
