import Foundation

// Safety: `load(_:)` copies the lent row bytes into the row's own array; no pointer is kept.

/// A stored row read in place by a scan's filter: its components are located once per row (into
/// buffers reused from row to row) and decoded only when the predicate reads them; only rows
/// that match are decoded whole.
final class RawRow {
    private(set) var bytes: [UInt8] = []
    /// The start of each component, then the end of the last.
    private var offsets: [Int] = []
    var id: ManagedObjectID
    /// The format of the row's entity.
    var format: RowFormat?
    let store: NativeStore

    init(store: NativeStore, placeholder: ManagedObjectID) {
        self.store = store
        id = placeholder
    }

    /// Takes a row's bytes (of ``format``'s entity); false when they are not a sequence of
    /// components (layouts 1 and 2: located once here; records are read column by column).
    func load(_ value: UnsafeRawBufferPointer) -> Bool {
        bytes.removeAll(keepingCapacity: true)
        bytes.append(contentsOf: value)
        if format?.layout == .records { return true }
        return RowFormat.locateComponents(value, into: &offsets)
    }

    func component(_ index: Int) throws -> KeyComponent {
        if let format, format.layout == .records {
            do {
                return try bytes.withUnsafeBytes { try format.component(index, of: $0) } ?? .null
            } catch let error as StoreError {
                throw ArborError(.store, "the row of \(id) is malformed: \(error.message)")
            }
        }
        guard index + 1 < offsets.count else {
            throw ArborError(.store, "the row of \(id) is malformed: too few values")
        }
        return try KeyEncoding.decodeComponent(bytes[offsets[index]..<offsets[index + 1]])
    }

    /// The value of the attribute `key` (nil when it holds nil, or the entity has no such stored
    /// attribute).
    func attributeValue(forKey key: String) throws -> AttributeValue? {
        guard case .attribute(let index, let type)? = format?.places[key] else { return nil }
        return NativeStore.attributeValue(try component(index), kind: type.kind)
    }

    /// The value of `key` (nil when the entity has no such stored property).
    func operand(forKey key: String) throws -> Operand? {
        guard let place = format?.places[key] else { return nil }
        switch place {
        case .attribute(let index, let type):
            return NativeStore.attributeValue(try component(index), kind: type.kind).map(Operand.init) ?? .null
        case .toOne(let index, let destination, let nameComponent):
            guard case .int(let key) = try component(index) else { return .null }
            guard NativeStore.isPrimaryKey(key) else {
                throw ArborError(.store, "a row's relationship holds \(key), which is not a primary key")
            }
            var name = destination
            if let nameComponent {
                switch try component(nameComponent) {
                case .string(let actual):
                    // A name read from the file: only the model's entities make IDs.
                    guard store.isModelEntity(actual) else {
                        throw ArborError(.store, "a row's relationship names \(actual), which is not an entity of the model")
                    }
                    name = actual
                case .int(let index):
                    // Records name it by its place in the store's entity list.
                    guard let actual = store.entityName(atIndex: index) else {
                        throw ArborError(.store, "a row's relationship names entity \(index), which the store does not record")
                    }
                    name = actual
                default: break
                }
            }
            return .objectID(store.objectID(name, key))
        }
    }
}

extension RawRow: EvaluatedRow {
    var objectID: ManagedObjectID? { id }
    var entityName: String? { format?.entity.name }
}
