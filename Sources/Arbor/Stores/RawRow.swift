import Foundation

/// Where each property of an entity's rows sits among a row's encoded components (the layout
/// ``NativeStore/encode(_:entity:permanent:)`` writes).
struct RawRowLayout {
    enum Slot {
        case attribute(Int, AttributeType)
        /// A to-one relationship: the component of the destination's key, and whether the one
        /// before it names the destination's entity.
        case toOne(Int, destination: String, named: Bool)
    }

    let entity: EntityDescription
    let slots: [String: Slot]

    init(_ entity: EntityDescription) {
        self.entity = entity
        var slots: [String: Slot] = [:]
        var index = 2
        for attribute in entity.attributes where !attribute.isTransient {
            slots[attribute.name] = .attribute(index, attribute.type)
            index += 1
        }
        for relationship in entity.relationships where !relationship.isToMany {
            let named = relationship.destinationEntity.map { !$0.subentities.isEmpty } ?? false
            if named { index += 1 }
            slots[relationship.name] = .toOne(index, destination: relationship.destinationEntityName, named: named)
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

    /// The value of `key` (nil when the entity has no such stored property).
    func value(forKey key: String) throws -> Operand? {
        guard let slot = layout?.slots[key] else { return nil }
        switch slot {
        case .attribute(let index, let type):
            return NativeStore.attributeValue(try component(index), type: type).map(Operand.init) ?? .null
        case .toOne(let index, let destination, let named):
            guard case .int(let key) = try component(index) else { return .null }
            var name = destination
            if named, case .string(let actual) = try component(index - 1) { name = actual }
            return .objectID(store.objectID(name, key))
        }
    }
}
