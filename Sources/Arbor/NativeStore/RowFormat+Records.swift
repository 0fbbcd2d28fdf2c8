import ArborStore
import Foundation

// Safety: Row bytes are lent for the call, and `RecordColumns` and the payload slices it returns
// are used within it; a transcoding's constants are lent from its own array, inside
// `withUnsafeBytes`; layouts are used unretained because they are never freed.

/// Row layout 3, records (docs/row-format.md, "Layout 3: records"; bytes in docs/file-format.md,
/// "Rows"): a row is
///
/// ```
/// varint   entity index     only when the hierarchy has sub-entities (the recorded entity list)
/// varint   version
/// varint   header size      the serial types' bytes, this varint included
/// varint*  serial types     one per column, in the recorded column order
/// bytes*   payloads         in the same order
/// ```
///
/// Serial types (after SQLite's record format): 0 nil; 1–6 a big-endian two's-complement integer
/// of 1, 2, 3, 4, 6 or 8 bytes; 7 a 64-bit IEEE double (floats widened, dates as seconds since
/// 2001); 8 and 9 the integers 0 and 1 (false and true); 10 a UUID's 16 bytes; even N ≥ 12 bytes
/// of length (N − 12) / 2 (binary data, transformables); odd N ≥ 13 UTF-8 text of length
/// (N − 13) / 2 (strings, decimals and URLs in their text). A to-one is an integer column (the
/// destination's primary key), preceded by an integer column of the destination's entity index
/// when the destination has sub-entities.
extension RowFormat {
    // MARK: Columns

    /// Appends a column of bytes (`text`: UTF-8 text) of `bytes`.
    @inline(__always)
    static func appendBytes<C: Collection>(_ bytes: C, text: Bool, header: inout [UInt8], payload: inout [UInt8]) where C.Element == UInt8 {
        RecordEncoding.appendVarint(UInt64(bytes.count) * 2 + (text ? 13 : 12), to: &header)
        payload.append(contentsOf: bytes)
    }

    /// Appends an attribute's value as a column.
    static func appendColumn(_ value: AttributeValue?, header: inout [UInt8], payload: inout [UInt8]) {
        func double(_ value: Double) {
            header.append(7)
            withUnsafeBytes(of: value.bitPattern.bigEndian) { payload.append(contentsOf: $0) }
        }
        switch value {
        case nil: header.append(0)
        case .integer(let v)?: RecordEncoding.appendInteger(v, header: &header, payload: &payload)
        case .boolean(let v)?: header.append(v ? 9 : 8)
        case .double(let v)?: double(v)
        case .float(let v)?: double(Double(v))
        case .date(let v)?: double(v.timeIntervalSinceReferenceDate)
        case .string(let v)?: appendBytes(v.utf8, text: true, header: &header, payload: &payload)
        case .decimal(let v)?: appendBytes(v.description.utf8, text: true, header: &header, payload: &payload)
        case .uri(let v)?: appendBytes(v.absoluteString.utf8, text: true, header: &header, payload: &payload)
        case .data(let v)?: appendBytes(v, text: false, header: &header, payload: &payload)
        case .transformable(let v)?: appendBytes(v, text: false, header: &header, payload: &payload)
        case .uuid(let v)?:
            header.append(10)
            withUnsafeBytes(of: v.uuid) { payload.append(contentsOf: $0) }
        }
    }

    /// The value of an attribute of `kind` in a column of serial type `type` whose payload is
    /// `payload`; nil for nil, or for a column that does not hold a `kind` (as a component of
    /// another kind reads as nil in layouts 1 and 2).
    static func attributeValue(_ type: UInt64, _ payload: UnsafeRawBufferPointer, kind: AttributeType.Kind) -> AttributeValue? {
        func text() -> String? { KeyReader.string(validating: payload.assumingMemoryBound(to: UInt8.self)) }
        func double() -> Double? {
            guard type == 7 else { return nil }
            return Double(bitPattern: UInt64(bigEndian: payload.loadUnaligned(as: UInt64.self)))
        }
        let isText = type >= 13 && type % 2 == 1, isBytes = type >= 12 && type % 2 == 0
        switch kind {
        case .integer16, .integer32, .integer64: return RecordEncoding.integer(type, payload, at: 0).map(AttributeValue.integer)
        case .boolean: return type == 8 ? .boolean(false) : type == 9 ? .boolean(true) : nil
        case .double: return double().map(AttributeValue.double)
        case .float: return double().map { .float(Float($0)) }
        case .date: return double().map { .date(Date(timeIntervalSinceReferenceDate: $0)) }
        case .string: return isText ? text().map(AttributeValue.string) : nil
        case .decimal: return isText ? text().flatMap { Decimal(string: $0) }.map(AttributeValue.decimal) : nil
        case .uri: return isText ? text().flatMap { URL(string: $0) }.map(AttributeValue.uri) : nil
        case .binaryData: return isBytes ? .data(Data(payload)) : nil
        case .transformable: return isBytes ? .transformable(Data(payload)) : nil
        case .uuid:
            guard type == 10 else { return nil }
            return .uuid(UUID(uuid: payload.loadUnaligned(as: uuid_t.self)))
        }
    }

    /// One value as a column of its own: its serial type's varint, then its payload (how a
    /// store records a fill).
    static func column(of value: AttributeValue) -> [UInt8] {
        var header: [UInt8] = [], payload: [UInt8] = []
        appendColumn(value, header: &header, payload: &payload)
        return header + payload
    }

    /// `value` as a store's metadata writes it (a fill, a schema's default value): its column,
    /// in hexadecimal.
    static func columnText(of value: AttributeValue) -> String {
        VersionHash.hex(Data(column(of: value)))
    }

    /// The value of `text` (``columnText(of:)``) as an attribute of `kind` reads it; nil when it
    /// is not one.
    static func attributeValue(ofColumnText text: String, kind: AttributeType.Kind) -> AttributeValue? {
        NativeStore.bytes(fromHex: text).flatMap { attributeValue(ofColumn: Array($0), kind: kind) }
    }

    /// The value of a column of its own (``column(of:)``) read as `kind`; nil when the bytes are
    /// not one column, or it holds nil or no `kind`.
    static func attributeValue(ofColumn column: [UInt8], kind: AttributeType.Kind) -> AttributeValue? {
        column.withUnsafeBytes { raw in
            var position = 0
            guard let type = RecordEncoding.readVarint(raw, &position), RecordEncoding.payloadSize(type) == raw.count - position else { return nil }
            return attributeValue(type, UnsafeRawBufferPointer(rebasing: raw[position..<raw.count]), kind: kind)
        }
    }

    // MARK: Reading a record

    /// Column `column`'s serial type and payload in a record (past the record's last column: the
    /// column's fill, or nil, reading as nil; throws for a malformed record).
    func recordColumn(_ column: Int, of row: UnsafeRawBufferPointer) throws -> (type: UInt64, payload: UnsafeRawBufferPointer)? {
        guard let record = RecordEncoding.head(of: row, from: entityPrefix.count) else { throw StoreError(.corrupt, "a malformed record header") }
        var typePosition = record.typesStart
        var payloadStart = record.headerEnd
        var index = 0
        while typePosition < record.headerEnd {
            guard let type = RecordEncoding.readVarint(row, &typePosition), let size = RecordEncoding.payloadSize(type),
                  typePosition <= record.headerEnd, size <= row.count - payloadStart else {
                throw StoreError(.corrupt, "a malformed record column")
            }
            if index == column { return (type, UnsafeRawBufferPointer(rebasing: row[payloadStart..<(payloadStart + size)])) }
            payloadStart += size
            index += 1
        }
        return fills[column].map { ($0.type, $0.payload) }
    }

    /// Encodes a row as a record.
    func encodeRecord(_ row: StoreRow, value: (Int) -> PropertyValue?, primaryKey: (ManagedObjectID) throws -> Int64,
                      entityIndex: (String) -> Int64?) throws -> [UInt8] {
        var header: [UInt8] = []
        var payload: [UInt8] = []
        header.reserveCapacity(stepBuffer.count + 2)
        payload.reserveCapacity(48)
        for step in stepBuffer {
            if step.kind != nil {
                if case .attribute(let stored)? = value(step.slot) {
                    Self.appendColumn(stored, header: &header, payload: &payload)
                } else {
                    header.append(0)
                }
            } else if case .object(let id)? = value(step.slot) {
                if step.named {
                    guard let index = entityIndex(id.entityName) else {
                        throw ArborError(.store, "\(id.entityName) is not an entity of the store", objectID: id)
                    }
                    RecordEncoding.appendInteger(index, header: &header, payload: &payload)
                }
                RecordEncoding.appendInteger(try primaryKey(id), header: &header, payload: &payload)
            } else {
                if step.named { header.append(0) }
                header.append(0)
            }
        }
        guard row.version > 0 else { throw ArborError(.store, "a row's version \(row.version) is out of range") }
        return assembleRecord(version: UInt64(row.version), header: header, payload: payload)
    }

    /// A record of this entity: its prefix, `version`, the header size, `header` (the serial
    /// types) and `payload`.
    func assembleRecord(version: UInt64, header: [UInt8], payload: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(entityPrefix.count + 12 + header.count + payload.count)
        appendRecord(version: version, header: header, payload: payload, to: &bytes)
        return bytes
    }

    /// The bytes of `value` as a varint (7 bits a byte).
    static func varintLength(_ value: UInt64) -> Int {
        var length = 1
        var rest = value >> 7
        while rest != 0 {
            length += 1
            rest >>= 7
        }
        return length
    }

    /// Appends the record ``assembleRecord(version:header:payload:)`` makes to `bytes`.
    func appendRecord(version: UInt64, header: [UInt8], payload: [UInt8], to bytes: inout [UInt8]) {
        bytes += entityPrefix
        RecordEncoding.appendVarint(version, to: &bytes)
        // The header size counts its own varint (one byte up to 127, two up to 16,383, …).
        var size = header.count + 1
        while Self.varintLength(UInt64(size)) != size - header.count { size += 1 }
        RecordEncoding.appendVarint(UInt64(size), to: &bytes)
        bytes += header
        bytes += payload
    }

    // MARK: Transcoding (migration)

    /// How records of one format are rewritten in another by copying their columns: for each
    /// new column, the old column copied and the column written instead when that one is nil
    /// (or past the record's end with no fill), compiled once per entity so that a row is
    /// rewritten with no value decoded, no dictionary looked up and no reference counted.
    struct Transcoding {
        /// A column written as it is: a serial type and its payload (`count` bytes of
        /// `constants` from `start`).
        struct Constant {
            var type: UInt64
            var start: Int
            var count: Int
        }

        /// One new column.
        struct Step {
            /// The old record's column copied (-1: none, the column is always `fallback`).
            var column: Int
            /// Written when the copied column is nil, or past the old record's end with no fill.
            var fallback: Constant
            /// The old format's fill for `column` (a column a migration appended to the old
            /// records without rewriting them), used past the old record's end.
            var fill: Constant?
        }

        let steps: [Step]
        /// The constants' payloads, one after the other.
        let constants: [UInt8]
    }

    /// How to rewrite records of `old` (layout 3) in this format by copying their columns: each
    /// stored property's source, `oldName` giving the old property a new one continues (nil: a
    /// new property, `newValue` says its value) and `ifNil` the value a nil becomes. Nil when
    /// copying cannot do it: another layout, another entity prefix, or a to-one whose rows start
    /// or stop naming their destination's entity.
    func transcoding(from old: RowFormat, oldName: (String) -> String?, newValue: (String) -> AttributeValue?,
                     ifNil: (String) -> AttributeValue?) -> Transcoding? {
        guard layout == .records, old.layout == .records, old.entityPrefix == entityPrefix else { return nil }
        var steps: [Transcoding.Step] = []
        var constants: [UInt8] = []
        func constant(_ value: AttributeValue?) -> Transcoding.Constant {
            var header: [UInt8] = []
            let start = constants.count
            Self.appendColumn(value, header: &header, payload: &constants)
            var position = 0
            let type = header.withUnsafeBytes { RecordEncoding.readVarint($0, &position) } ?? 0
            return Transcoding.Constant(type: type, start: start, count: constants.count - start)
        }
        func copy(_ component: Int, ifNil: AttributeValue?) {
            let column = component - Self.firstColumnComponent
            let fill = old.fills[column].map { fill -> Transcoding.Constant in
                let start = constants.count
                constants.append(contentsOf: fill.payload)
                return Transcoding.Constant(type: fill.type, start: start, count: fill.payload.count)
            }
            steps.append(Transcoding.Step(column: column, fallback: constant(ifNil), fill: fill))
        }
        for column in columns {
            let name = Self.name(of: column, in: entity)
            let previous = oldName(name).flatMap { old.places[$0] }
            switch (column, previous) {
            case (.attribute, .attribute(let component, _)?):
                copy(component, ifNil: ifNil(name))
            case (.attribute, nil):
                steps.append(Transcoding.Step(column: -1, fallback: constant(newValue(name)), fill: nil))
            case (.toOne(_, _, let named), .toOne(let component, _, let nameComponent)?):
                guard named == (nameComponent != nil) else { return nil }
                if let nameComponent { copy(nameComponent, ifNil: nil) }
                copy(component, ifNil: nil)
            case (.toOne(_, _, let named), nil):
                if named { steps.append(Transcoding.Step(column: -1, fallback: constant(nil), fill: nil)) }
                steps.append(Transcoding.Step(column: -1, fallback: constant(nil), fill: nil))
            default:
                return nil
            }
        }
        return Transcoding(steps: steps, constants: constants)
    }

    /// The buffers ``transcode(_:from:_:buffers:into:)`` reuses from one row to the next.
    struct TranscodeBuffers {
        var located: [(type: UInt64, start: Int, size: Int)] = []
        var header: [UInt8] = []
        var payload: [UInt8] = []
    }

    /// Appends `row`, a record of `old`, rewritten in this format as `transcoding` says
    /// (``transcoding(from:oldName:newValue:ifNil:)``), to `output`: its version and copied
    /// columns.
    ///
    /// - Throws: `StoreError` for a malformed record.
    func transcode(_ row: UnsafeRawBufferPointer, from old: RowFormat, _ transcoding: Transcoding,
                   buffers: inout TranscodeBuffers, into output: inout [UInt8]) throws {
        guard let record = RecordEncoding.head(of: row, from: old.entityPrefix.count), record.leading > 0 else {
            throw StoreError(.corrupt, "a malformed record header")
        }
        buffers.located.removeAll(keepingCapacity: true)
        buffers.header.removeAll(keepingCapacity: true)
        buffers.payload.removeAll(keepingCapacity: true)
        var typePosition = record.typesStart
        var payloadStart = record.headerEnd
        while typePosition < record.headerEnd {
            guard let type = RecordEncoding.readVarint(row, &typePosition), let size = RecordEncoding.payloadSize(type),
                  typePosition <= record.headerEnd, size <= row.count - payloadStart else {
                throw StoreError(.corrupt, "a malformed record column")
            }
            buffers.located.append((type, payloadStart, size))
            payloadStart += size
        }
        transcoding.constants.withUnsafeBytes { constants in
            func append(_ constant: Transcoding.Constant) {
                RecordEncoding.appendVarint(constant.type, to: &buffers.header)
                if constant.count > 0 {
                    buffers.payload.append(contentsOf: UnsafeRawBufferPointer(rebasing: constants[constant.start..<(constant.start + constant.count)]))
                }
            }
            for step in transcoding.steps {
                if step.column >= 0, step.column < buffers.located.count {
                    let column = buffers.located[step.column]
                    if column.type != 0 {
                        RecordEncoding.appendVarint(column.type, to: &buffers.header)
                        buffers.payload.append(contentsOf: UnsafeRawBufferPointer(rebasing: row[column.start..<(column.start + column.size)]))
                        continue
                    }
                } else if let fill = step.fill {
                    append(fill)
                    continue
                }
                append(step.fallback)
            }
        }
        appendRecord(version: record.leading, header: buffers.header, payload: buffers.payload, to: &output)
    }

    /// Decodes a record of this entity (see ``decode(_:objectID:store:reading:)``).
    func decodeRecord(_ bytes: UnsafeRawBufferPointer, objectID: ManagedObjectID, store: NativeStore,
                      reading mask: UnsafeBufferPointer<Bool>?) throws -> StoreRow {
        func corrupt(_ why: String) -> ArborError {
            ArborError(.store, "the row of \(objectID) is malformed: \(why)", objectID: objectID)
        }
        guard let record = RecordEncoding.head(of: bytes, from: entityPrefix.count) else { throw corrupt("no version and header") }
        guard record.leading > 0, record.leading < UInt64(Int64.max) else { throw corrupt("its version \(record.leading) is out of range") }
        let layoutReference = entity.layoutReference
        var slots = layoutReference._withUnsafeGuaranteedRef { $0.makeSlots() }
        var columns = RecordColumns(bytes: bytes, headerEnd: record.headerEnd, typePosition: record.typesStart, objectID: objectID)
        for stepIndex in 0..<stepBuffer.count {
            let step = stepBuffer[stepIndex]
            if let mask, !mask[step.slot] {
                _ = try columns.next()
                if step.kind == nil && step.named { _ = try columns.next() }
                continue
            }
            if let kind = step.kind {
                if let column = try columns.next() {
                    slots[step.slot] = Self.attributeValue(column.type, column.payload, kind: kind).map(PropertyValue.attribute) ?? PropertyValue.none
                } else {
                    // Past the record's end: nil, or a column a migration appended with its fill.
                    slots[step.slot] = stepFills.isEmpty ? PropertyValue.none : stepFills[stepIndex] ?? PropertyValue.none
                }
                continue
            }
            var destinationName = destinations[step.destination]
            if step.named, let column = try columns.next(), let index = RecordEncoding.integer(column.type, column.payload, at: 0) {
                guard let name = store.entityName(atIndex: index) else { throw corrupt("a relationship names entity \(index), which the store does not record") }
                destinationName = name
            }
            if let column = try columns.next(), let key = RecordEncoding.integer(column.type, column.payload, at: 0) {
                guard NativeStore.isPrimaryKey(key) else { throw corrupt("a relationship holds \(key), which is not a primary key") }
                slots[step.slot] = .object(destinationID(step, destinationName, key, store: store))
            } else {
                slots[step.slot] = PropertyValue.none
            }
        }
        return layoutReference._withUnsafeGuaranteedRef {
            StoreRow(entityName: entity.name, version: Int64(record.leading), values: PropertyStorage(layout: $0, slots: slots))
        }
    }
}

/// The columns of a record read in turn: each one's serial type and payload (see
/// ``RowFormat/decodeRecord(_:objectID:store:reading:)``). A value the decoder keeps in a local
/// variable: a nested function that captured the two positions paid a dynamic exclusivity
/// check per column.
struct RecordColumns {
    let bytes: UnsafeRawBufferPointer
    let headerEnd: Int
    var typePosition: Int
    var payloadStart: Int
    /// The row's ID, for the errors.
    let objectID: ManagedObjectID

    init(bytes: UnsafeRawBufferPointer, headerEnd: Int, typePosition: Int, objectID: ManagedObjectID) {
        self.bytes = bytes
        self.headerEnd = headerEnd
        self.typePosition = typePosition
        payloadStart = headerEnd
        self.objectID = objectID
    }

    /// The next column's serial type and payload; nil past the last (a missing trailing column
    /// reads as nil).
    ///
    /// - Throws: ``ArborError/Code/store`` for a malformed serial type or a size past the row.
    @inline(__always)
    mutating func next() throws -> (type: UInt64, payload: UnsafeRawBufferPointer)? {
        guard typePosition < headerEnd else { return nil }
        // (`readVarint` reads a one-byte type, nearly every one, without its loop.)
        guard let type = RecordEncoding.readVarint(bytes, &typePosition) else { throw corrupt("a column's serial type is malformed") }
        guard typePosition <= headerEnd, let size = RecordEncoding.payloadSize(type), size <= bytes.count - payloadStart else {
            throw corrupt("a column's serial type or size is out of range")
        }
        let payload = UnsafeRawBufferPointer(rebasing: bytes[payloadStart..<(payloadStart + size)])
        payloadStart += size
        return (type, payload)
    }

    private func corrupt(_ why: String) -> ArborError {
        ArborError(.store, "the row of \(objectID) is malformed: \(why)", objectID: objectID)
    }
}
