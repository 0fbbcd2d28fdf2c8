import Foundation
import Synchronization

// Safety: An ID holds its space unretained because spaces are interned and never freed, so the
// reference stays valid, and their addresses tell spaces apart.

/// The serial numbers of temporary IDs (the last one given).
private let temporarySerial = Atomic<Int64>(0)

/// The identity of a managed object: its entity and its row in a store — or, until the object is
/// saved (or ``ManagedObjectContext/obtainPermanentIDs(for:)`` is called), a temporary identity.
///
/// IDs are values: `Sendable`, hashable, and safe to pass between contexts and threads (managed
/// objects are not). The same row has equal IDs in every context of a coordinator. A temporary ID
/// is unique among all IDs ever made in the process but means nothing to a store, and once its
/// object is saved the object has a new, permanent ID: do not archive temporary IDs.
///
/// ``uriRepresentation()`` is a URL that names the object durably:
/// `x-arbor://<store UUID>/<Entity>/p<N>` for a permanent ID (N is the row's primary key), and
/// `x-arbor://temporary/<Entity>/t<namespace>-<N>` for a temporary one (the namespace is a UUID
/// drawn once per process; N is the ID's serial number).
/// `PersistentStoreCoordinator.managedObjectID(forURIRepresentation:)` turns it back into an ID.
public struct ManagedObjectID: Hashable, Sendable, CustomStringConvertible {
    /// The ID's entity and store (or temporary namespace), interned: never freed, so the ID holds
    /// it unretained. An ID is 16 bytes, copying one touches no reference count, and two IDs
    /// compare their spaces by address.
    private let spaceReference: Unmanaged<ObjectIDSpace>
    /// The row's primary key (positive); for a temporary ID, minus its serial number.
    let key: Int64

    /// The entity and store (or namespace) of the ID.
    var space: ObjectIDSpace { spaceReference.takeUnretainedValue() }
    /// The address of ``space``: equal for IDs of one entity and store (tables keyed by it touch
    /// no reference count).
    var spaceAddress: UnsafeMutableRawPointer { spaceReference.toOpaque() }
    /// The name of the object's entity.
    public var entityName: String { space.entityName }
    /// The store's identifier; for a temporary ID, the namespace of the process that made it.
    var namespace: UUID { space.namespace }

    /// The namespace of this process's temporary IDs (random, so that a temporary ID of another
    /// process never equals one of ours).
    static let temporaryNamespace = UUID()

    /// The ID of `key` in `space`, which must come from the process's table
    /// (``ObjectIDSpace/interned(_:_:)``): the ID does not keep it alive.
    init(space: ObjectIDSpace, key: Int64) {
        spaceReference = Unmanaged.passUnretained(space)
        self.key = key
    }

    /// A permanent ID: row `key` of the entity's tree in the store `store`.
    init(entityName: String, store: UUID, key: Int64) {
        self.init(space: ObjectIDSpace.interned(entityName, store), key: key)
    }

    /// A new temporary ID in `space` (an entity's ``EntityDescription/temporaryIDSpace``): the
    /// next serial number of the process (a counter, not a random UUID: making one costs an
    /// atomic increment, not a system call).
    init(temporaryIn space: ObjectIDSpace) {
        self.init(space: space, key: -temporarySerial.wrappingAdd(1, ordering: .relaxed).newValue)
    }

    /// A new temporary ID for an object of `entityName`.
    init(temporaryFor entityName: String) {
        self.init(temporaryIn: ObjectIDSpace.interned(entityName, Self.temporaryNamespace))
    }

    /// IDs are equal when they name the same row of the same store (or are the same temporary
    /// ID) of the same entity: spaces are interned, so equal entity and store means one space.
    public static func == (a: ManagedObjectID, b: ManagedObjectID) -> Bool {
        a.key == b.key && a.spaceReference.toOpaque() == b.spaceReference.toOpaque()
    }

    /// Equal IDs have equal keys; the key alone is hashed (the registry, the row cache and the
    /// change sets look IDs up constantly, and a key is all but unique among the IDs they hold).
    public func hash(into hasher: inout Hasher) { hasher.combine(key) }

    /// The hash of the key, mixed with `seed` without a `Hasher` (a multiply–xor-shift mix: IDs
    /// are not attacker-chosen, and this is several times cheaper than SipHash). Consistent with
    /// ``hash(into:)``: both depend on the key alone.
    public func _rawHashValue(seed: Int) -> Int {
        mixedHash(UInt64(bitPattern: key), seed: seed)
    }

    /// Whether the ID is temporary (the object has not been saved, nor given a permanent ID).
    public var isTemporaryID: Bool { key < 0 }

    /// The identifier of the store holding the row (nil for a temporary ID).
    public var storeIdentifier: UUID? { key < 0 ? nil : namespace }

    /// The row's primary key in its store (nil for a temporary ID).
    public var primaryKey: Int64? { key < 0 ? nil : key }

    /// The URI scheme of object IDs.
    public static let uriScheme = "x-arbor"

    /// A URL naming the object: `x-arbor://<store UUID>/<Entity>/p<N>`, or
    /// `x-arbor://temporary/<Entity>/t<namespace>-<N>` for a temporary ID.
    public func uriRepresentation() -> URL {
        var components = URLComponents()
        components.scheme = Self.uriScheme
        let entity = entityName.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? entityName
        if key < 0 {
            components.host = "temporary"
            components.percentEncodedPath = "/\(entity)/t\(namespace.uuidString)-\(-key)"
        } else {
            components.host = namespace.uuidString
            components.percentEncodedPath = "/\(entity)/p\(key)"
        }
        return components.url!
    }

    /// Parses a URI made by ``uriRepresentation()``; nil when it is not one (or names yet
    /// another entity and store once 1,024 such pairs are kept).
    init?(uri: URL) {
        guard let (entity, namespace, key) = Self.components(ofURI: uri),
              let space = ObjectIDSpace.interned(entity, namespace, untrusted: true) else { return nil }
        self.init(space: space, key: key)
    }

    /// The entity name, namespace and key a URI made by ``uriRepresentation()`` names; nil when
    /// it is not one.
    static func components(ofURI uri: URL) -> (entity: String, namespace: UUID, key: Int64)? {
        guard let components = URLComponents(url: uri, resolvingAgainstBaseURL: false),
              components.scheme == Self.uriScheme, let host = components.host else { return nil }
        let parts = components.percentEncodedPath.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].isEmpty, let entity = parts[1].removingPercentEncoding, !entity.isEmpty,
              let tag = parts[2].first else { return nil }
        let rest = String(parts[2].dropFirst())
        if host == "temporary" {
            // t<namespace UUID>-<serial>
            guard tag == "t", rest.count > 37, let namespace = UUID(uuidString: String(rest.prefix(36))),
                  rest.dropFirst(36).first == "-", let serial = Int64(rest.dropFirst(37)), serial > 0 else { return nil }
            return (entity, namespace, -serial)
        }
        guard tag == "p", let store = UUID(uuidString: host), let key = Int64(rest), key > 0 else { return nil }
        return (entity, store, key)
    }

    public var description: String { uriRepresentation().absoluteString }
}

/// `value` mixed with `seed` by a multiply–xor-shift (SplitMix64's finalizer): the hash of object
/// IDs and managed objects, whose keys and addresses are not attacker-chosen, at a fraction of
/// SipHash's cost.
@inline(__always)
func mixedHash(_ value: UInt64, seed: Int) -> Int {
    var x = value ^ UInt64(UInt(bitPattern: seed))
    x = (x ^ (x >> 30)) &* 0xbf58_476d_1ce4_e5b9
    x = (x ^ (x >> 27)) &* 0x94d0_49bb_1331_11eb
    return Int(bitPattern: UInt(truncatingIfNeeded: x ^ (x >> 31)))
}

/// An entity name and a store identifier (or a temporary namespace): the part that IDs share.
/// Interned for the life of the process — each pair has one instance — so IDs refer to it
/// unretained and compare it by address.
///
/// Pairs a store or a model makes are few (entities × stores). Pairs read from URIs (object-ID
/// URIs given to the coordinator or written in predicates) are untrusted: at most 1,024 of them
/// are kept, and a URI naming yet another pair is refused (no ID), so that input cannot grow the
/// table without bound.
final class ObjectIDSpace: Sendable {
    let entityName: String
    let namespace: UUID

    private init(entityName: String, namespace: UUID) {
        self.entityName = entityName
        self.namespace = namespace
    }

    private struct Key: Hashable {
        let entityName: String
        let namespace: UUID
    }

    /// A table of interned spaces (the process has one; tests make their own).
    struct Interner {
        private var spaces: [Key: ObjectIDSpace] = [:]
        private var untrusted = 0
        /// The most pairs kept that only untrusted input named.
        let maximumUntrusted: Int

        init(maximumUntrusted: Int) {
            self.maximumUntrusted = maximumUntrusted
        }

        /// The number of spaces kept.
        var count: Int { spaces.count }

        /// The space of `entityName` and `namespace`: the one already made, or a new one. With
        /// `untrusted` (a pair read from input), nil once `maximumUntrusted` such pairs are kept.
        mutating func intern(_ entityName: String, _ namespace: UUID, untrusted isUntrusted: Bool) -> ObjectIDSpace? {
            let key = Key(entityName: entityName, namespace: namespace)
            if let known = spaces[key] { return known }
            if isUntrusted {
                guard untrusted < maximumUntrusted else { return nil }
                untrusted += 1
            }
            let made = ObjectIDSpace(entityName: entityName, namespace: namespace)
            spaces[key] = made
            return made
        }
    }

    private static let table = LockedValue(Interner(maximumUntrusted: 1024))

    /// The process's space of `entityName` and `namespace`. With `untrusted` (a pair read from
    /// a URI), nil once 1,024 pairs that only URIs named are kept.
    static func interned(_ entityName: String, _ namespace: UUID, untrusted: Bool) -> ObjectIDSpace? {
        table.withLock { $0.intern(entityName, namespace, untrusted: untrusted) }
    }

    /// The space of `entityName` and `namespace`, for a pair a store or a model names.
    static func interned(_ entityName: String, _ namespace: UUID) -> ObjectIDSpace {
        interned(entityName, namespace, untrusted: false)!
    }
}
