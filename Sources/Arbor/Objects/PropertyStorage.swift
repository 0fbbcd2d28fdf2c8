/// The order of an entity's properties (attributes, then relationships, inherited ones first):
/// the slots of ``PropertyStorage``. Made once per entity, shared by all its objects.
final class PropertyLayout: Sendable {
    let names: [String]
    let index: [String: Int]

    init(names: [String]) {
        self.names = names
        index = Dictionary(uniqueKeysWithValues: names.enumerated().map { ($1, $0) })
    }
}

/// A managed object's property values (or committed values): one slot per property of its
/// entity, in the entity's layout, nil where no value is held. Looks like a dictionary by key;
/// copies share their slots until one of them changes, so an object's values and its committed
/// values cost one array between them until it is edited.
struct PropertyStorage: Equatable, Sequence {
    let layout: PropertyLayout
    private(set) var slots: [PropertyValue?]

    init(layout: PropertyLayout) {
        self.layout = layout
        slots = Array(repeating: nil, count: layout.names.count)
    }

    static func == (a: PropertyStorage, b: PropertyStorage) -> Bool { a.layout === b.layout && a.slots == b.slots }

    /// The value of `key` (nil: none held, or no such property).
    @inline(__always)
    subscript(key: String) -> PropertyValue? {
        get { layout.index[key].flatMap { slots[$0] } }
        set {
            guard let index = layout.index[key] else { return }
            slots[index] = newValue
        }
    }

    /// The value in slot `slot` (an index of the layout).
    @inline(__always)
    subscript(slot slot: Int) -> PropertyValue? {
        get { slots[slot] }
        set { slots[slot] = newValue }
    }

    /// Whether no value is held.
    var isEmpty: Bool { !slots.contains { $0 != nil } }

    /// The keys that hold a value.
    var keys: [String] { layout.names.indices.filter { slots[$0] != nil }.map { layout.names[$0] } }

    /// Drops every value.
    mutating func removeAll() {
        for index in slots.indices { slots[index] = nil }
    }

    /// The (key, value) pairs held, in layout order.
    func makeIterator() -> AnyIterator<(key: String, value: PropertyValue)> {
        var index = 0
        return AnyIterator {
            while index < slots.count {
                defer { index += 1 }
                if let value = slots[index] { return (layout.names[index], value) }
            }
            return nil
        }
    }
}
