import Foundation
import Synchronization

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
    /// The name of the object's entity.
    public let entityName: String
    /// The store's identifier; for a temporary ID, the namespace of the process that made it.
    let namespace: UUID
    /// The row's primary key (positive); for a temporary ID, minus its serial number.
    let key: Int64

    /// The namespace of this process's temporary IDs (random, so that a temporary ID of another
    /// process never equals one of ours).
    static let temporaryNamespace = UUID()

    /// A permanent ID: row `key` of the entity's tree in the store `store`.
    init(entityName: String, store: UUID, key: Int64) {
        self.entityName = entityName
        namespace = store
        self.key = key
    }

    /// A new temporary ID: the next serial number of the process (a counter, not a random UUID:
    /// making one costs an atomic increment, not a system call).
    init(temporaryFor entityName: String) {
        self.entityName = entityName
        namespace = Self.temporaryNamespace
        key = -temporarySerial.wrappingAdd(1, ordering: .relaxed).newValue
    }

    /// A temporary ID parsed from a URI (its namespace and serial number).
    private init(entityName: String, temporaryNamespace: UUID, serial: Int64) {
        self.entityName = entityName
        namespace = temporaryNamespace
        key = -serial
    }

    /// IDs are equal when they name the same row of the same store (or are the same temporary
    /// ID) of the same entity.
    public static func == (a: ManagedObjectID, b: ManagedObjectID) -> Bool {
        a.key == b.key && a.namespace == b.namespace && a.entityName == b.entityName
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

    /// Parses a URI made by ``uriRepresentation()``; nil when it is not one.
    init?(uri: URL) {
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
            self.init(entityName: entity, temporaryNamespace: namespace, serial: serial)
        } else {
            guard tag == "p", let store = UUID(uuidString: host), let key = Int64(rest), key > 0 else { return nil }
            self.init(entityName: entity, store: store, key: key)
        }
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
