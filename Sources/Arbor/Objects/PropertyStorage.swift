import OrderedCollections

// Safety: A `NameIndex`'s buffers belong to a property layout and, like layouts, are never freed,
// which is why storage holds its layout `unowned(unsafe)`; `sharesSlots` only compares two arrays'
// addresses.

/// The order of an entity's properties (all of them, inherited ones included, sorted by name):
/// the slots of ``PropertyStorage``. One per list of names, shared by every entity and row with
/// those names, and kept for the life of the process (``named(_:)``): storage refers to its
/// layout without a reference count.
final class PropertyLayout: Sendable {
    let names: [String]
    let index: NameIndex
    /// The number of names (read without touching the array, which would count a reference).
    let count: Int

    /// Every layout made, by its names: never freed (a process has as many as the lists of
    /// property names its models and rows use).
    private static let made = LockedValue<[[String]: PropertyLayout]>([:])

    /// The layout of `names` (which must be distinct): the one made before for the same list,
    /// else a new one, kept from then on.
    static func named(_ names: [String]) -> PropertyLayout {
        made.withLock { made in
            if let layout = made[names] { return layout }
            let layout = PropertyLayout(names: names)
            made[names] = layout
            return layout
        }
    }

    private init(names: [String]) {
        self.names = names
        index = NameIndex(names)
        count = names.count
    }

    /// A new slot array holding nothing, in a buffer of its own, to be written (a copy of a
    /// shared array of nils copied its slots one by one through the values' generic copy).
    /// Reserved and appended to: that path is specialized here and finds the array's storage
    /// type through a cached accessor, where `init(unsafeUninitializedCapacity:)` and
    /// `init(repeating:count:)` look it up in the runtime's generic metadata table for every
    /// array.
    @inline(__always)
    func makeSlots() -> [PropertyValue?] {
        var slots: [PropertyValue?] = []
        slots.reserveCapacity(count)
        for _ in 0..<count { slots.append(nil) }
        return slots
    }
}

/// The slots of names, by name: an open-addressing table, each candidate compared with `==`.
/// Every `value(forKey:)` and `setValue(_:forKey:)` looks its key up here: a `[String: Int]`
/// would hash each key with SipHash, a keyed hash far costlier than these short names need;
/// ASCII names are hashed here over their bytes (FNV-1a).
///
/// Strings are equal when canonically equivalent, and some non-ASCII strings equal ASCII ones
/// (the Kelvin sign is "K"), so bytes hash only where that cannot matter: a table with a
/// non-ASCII name hashes every key with `String`'s own hash, and a non-ASCII key in a table of
/// ASCII names is compared with each name.
///
/// Made only by a ``PropertyLayout``, which is never freed: the names and buckets live in
/// buffers of their own, never freed either, so that a lookup counts no references (the arrays
/// they were in were retained and released around every lookup).
struct NameIndex: @unchecked Sendable {
    private let names: UnsafeBufferPointer<String>
    /// The slot of each bucket's name, or -1 for an empty bucket.
    private let buckets: UnsafeBufferPointer<Int32>
    private let mask: Int
    /// Whether every name is ASCII (hashed over bytes), else all hash with `hashValue`.
    private let ascii: Bool

    /// The index of `names`, which must be distinct: name `i` has slot `i`.
    fileprivate init(_ names: [String]) {
        var capacity = 8
        while capacity < 2 * names.count { capacity *= 2 }
        let ascii = names.allSatisfy { $0.utf8.allSatisfy { $0 < 0x80 } }
        let buckets = UnsafeMutableBufferPointer<Int32>.allocate(capacity: capacity)
        buckets.initialize(repeating: -1)
        for (slot, name) in names.enumerated() {
            var bucket = (ascii ? Self.byteHash(name)! : name.hashValue) & (capacity - 1)
            while buckets[bucket] >= 0 {
                precondition(names[Int(buckets[bucket])] != name, "the name \(name) is listed twice")
                bucket = (bucket + 1) & (capacity - 1)
            }
            buckets[bucket] = Int32(slot)
        }
        let stored = UnsafeMutableBufferPointer<String>.allocate(capacity: names.count)
        _ = stored.initialize(from: names)
        self.names = UnsafeBufferPointer(stored)
        self.buckets = UnsafeBufferPointer(buckets)
        self.ascii = ascii
        mask = capacity - 1
    }

    /// FNV-1a over an ASCII name's bytes; nil for a name that is not ASCII.
    @inline(__always)
    private static func byteHash(_ name: String) -> Int? {
        // Through the contiguous bytes (a small string's on the stack): iterating `utf8`
        // advances a `String.Index` per byte, undoing the gain over SipHash.
        var name = name
        return name.withUTF8 { bytes -> Int? in
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            var all: UInt8 = 0
            for index in 0..<bytes.count {
                let byte = bytes[index]
                hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
                all |= byte
            }
            return all < 0x80 ? Int(truncatingIfNeeded: hash ^ (hash >> 29)) : nil
        }
    }

    /// The slot of `name`, or nil.
    subscript(name: String) -> Int? {
        var bucket: Int
        if !ascii {
            bucket = name.hashValue & mask
        } else if let hash = Self.byteHash(name) {
            bucket = hash & mask
        } else {
            return names.firstIndex { $0 == name }
        }
        while true {
            let slot = buckets[bucket]
            if slot < 0 { return nil }
            if names[Int(slot)] == name { return Int(slot) }
            bucket = (bucket + 1) & mask
        }
    }
}

/// A managed object's property values (or committed values): one slot per property of its
/// entity, in the entity's layout, nil where no value is held. Looks like a dictionary by key;
/// copies share their slots until one of them changes, so an object's values and its committed
/// values cost one array between them until it is edited.
struct PropertyStorage: Equatable, Sequence, Sendable {
    /// The layout of the slots. Not counted: layouts are never freed (``PropertyLayout/named(_:)``),
    /// and storage is copied and dropped with every row and object, where counting the shared
    /// layout would add atomic operations to each copy and drop.
    unowned(unsafe) let layout: PropertyLayout
    /// One value per name of the layout — or none at all, for storage never written: the empty
    /// array is the runtime's shared one, whose reference counts cost nothing (a new fault's
    /// values; sharing one array of nils per layout instead took two atomic operations on it per
    /// fetched object). Reads treat missing slots as nil; the first write makes them.
    private(set) var slots: [PropertyValue?]

    init(layout: PropertyLayout) {
        self.layout = layout
        slots = []
    }

    /// Storage holding `slots` (one per name of `layout`).
    init(layout: PropertyLayout, slots: [PropertyValue?]) {
        assert(slots.count == layout.names.count)
        self.layout = layout
        self.slots = slots
    }

    static func == (a: PropertyStorage, b: PropertyStorage) -> Bool {
        guard a.layout === b.layout else { return false }
        // Storage never written holds nothing: equal to any that holds nothing.
        return a.slots.count == b.slots.count ? a.slots == b.slots : a.isEmpty && b.isEmpty
    }

    /// The value of `key` (nil: none held, or no such property).
    @inline(__always)
    subscript(key: String) -> PropertyValue? {
        get { layout.index[key].flatMap { self[slot: $0] } }
        set {
            guard let index = layout.index[key] else { return }
            self[slot: index] = newValue
        }
    }

    /// The value in slot `slot` (an index of the layout).
    @inline(__always)
    subscript(slot slot: Int) -> PropertyValue? {
        get { slot < slots.count ? slots[slot] : nil }
        set {
            if slots.isEmpty {
                // Nil into storage never written changes nothing (and makes no array).
                guard newValue != nil else { return }
                slots = layout.makeSlots()
            }
            slots[slot] = newValue
        }
    }

    /// Replaces temporary IDs in the relationship values held, each by the ID `newID` gives for
    /// it (nil: it stays); `newID` is asked about temporary IDs only. Slots that mention none of
    /// them are left alone (so storage shared with a copy stays shared).
    mutating func replaceObjectIDs(_ newID: (ManagedObjectID) -> ManagedObjectID?) {
        for slot in slots.indices {
            switch slots[slot] {
            case .object(let id)?:
                if id.isTemporaryID, let new = newID(id) { slots[slot] = .object(new) }
            case .objects(var ids)?:
                guard let first = ids.firstIndex(where: { $0.isTemporaryID && newID($0) != nil }) else { break }
                // The slot lets go of the set first, so that changing it does not copy it.
                slots[slot] = nil
                Self.replace(in: &ids, from: first, newID)
                slots[slot] = .objects(ids)
            default:
                break
            }
        }
    }

    /// Replaces the temporary IDs of `ids` from `first` on by the IDs `newID` gives for them.
    ///
    /// New objects join a to-many value at its end, so only the run from the first replaced ID
    /// on is taken off and appended again: a save's new objects cost their own number of
    /// hashings, not the whole set's; rebuilding it would ask `newID` about, and hash, every
    /// member on every save, work that grows with the set as an import fills it.
    private static func replace(in ids: inout OrderedSet<ManagedObjectID>, from first: Int,
                                _ newID: (ManagedObjectID) -> ManagedObjectID?) {
        let tail = Array(ids.elements[first..<ids.count])
        ids.removeSubrange(first..<ids.count)
        for id in tail { ids.append(id.isTemporaryID ? newID(id) ?? id : id) }
    }

    /// Whether this storage and `other` hold the very same slots (one array between them, as a
    /// copy shares until either changes).
    func sharesSlots(with other: PropertyStorage) -> Bool {
        slots.withUnsafeBufferPointer { mine in other.slots.withUnsafeBufferPointer { mine.baseAddress == $0.baseAddress } }
    }

    /// Whether no value is held.
    var isEmpty: Bool { !slots.contains { $0 != nil } }

    /// The keys that hold a value.
    var keys: [String] { slots.indices.filter { slots[$0] != nil }.map { layout.names[$0] } }

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

/// A set of slots of a ``PropertyLayout`` (a managed object's changed properties): bits, so that
/// recording a change costs no hashing and no allocation for entities of up to 64 properties.
struct SlotSet: Equatable {
    private var low: UInt64 = 0
    /// Slots 64 and up, 64 to a word.
    private var high: [UInt64] = []

    var isEmpty: Bool { low == 0 && !high.contains { $0 != 0 } }

    func contains(_ slot: Int) -> Bool {
        if slot < 64 { return low & (1 << UInt64(slot)) != 0 }
        let word = slot / 64 - 1
        return word < high.count && high[word] & (1 << UInt64(slot % 64)) != 0
    }

    mutating func insert(_ slot: Int) {
        if slot < 64 {
            low |= 1 << UInt64(slot)
            return
        }
        let word = slot / 64 - 1
        if word >= high.count { high += Array(repeating: 0, count: word - high.count + 1) }
        high[word] |= 1 << UInt64(slot % 64)
    }

    mutating func remove(_ slot: Int) {
        if slot < 64 {
            low &= ~(1 << UInt64(slot))
        } else if slot / 64 - 1 < high.count {
            high[slot / 64 - 1] &= ~(1 << UInt64(slot % 64))
        }
    }

    mutating func removeAll() {
        low = 0
        high = []
    }

    /// The slots, ascending.
    var slots: [Int] {
        var result: [Int] = []
        for (index, word) in ([low] + high).enumerated() where word != 0 {
            for bit in 0..<64 where word & (1 << UInt64(bit)) != 0 { result.append(index * 64 + bit) }
        }
        return result
    }
}
