import Foundation

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
/// `x-arbor://temporary/<Entity>/t<UUID>` for a temporary one.
/// `PersistentStoreCoordinator.managedObjectID(forURIRepresentation:)` turns it back into an ID.
public struct ManagedObjectID: Hashable, Sendable, CustomStringConvertible {
    /// Equal IDs have equal storage (a row of a store, or one temporary identity); hashing the
    /// storage alone spares hashing the entity name on every registry lookup.
    public func hash(into hasher: inout Hasher) { hasher.combine(storage) }

    /// Where the identity comes from.
    enum Storage: Hashable, Sendable {
        /// A row of a store: the store's identifier and the row's primary key.
        case permanent(store: UUID, key: Int64)
        /// Not yet in a store.
        case temporary(UUID)
    }

    /// The name of the object's entity.
    public let entityName: String
    let storage: Storage

    /// A permanent ID: row `key` of the entity's tree in the store `store`.
    init(entityName: String, store: UUID, key: Int64) {
        self.entityName = entityName
        storage = .permanent(store: store, key: key)
    }

    /// A new temporary ID.
    init(temporaryFor entityName: String) {
        self.entityName = entityName
        storage = .temporary(UUID())
    }

    /// Whether the ID is temporary (the object has not been saved, nor given a permanent ID).
    public var isTemporaryID: Bool {
        if case .temporary = storage { return true }
        return false
    }

    /// The identifier of the store holding the row (nil for a temporary ID).
    public var storeIdentifier: UUID? {
        if case .permanent(let store, _) = storage { return store }
        return nil
    }

    /// The row's primary key in its store (nil for a temporary ID).
    public var primaryKey: Int64? {
        if case .permanent(_, let key) = storage { return key }
        return nil
    }

    /// The URI scheme of object IDs.
    public static let uriScheme = "x-arbor"

    /// A URL naming the object: `x-arbor://<store UUID>/<Entity>/p<N>`, or
    /// `x-arbor://temporary/<Entity>/t<UUID>` for a temporary ID.
    public func uriRepresentation() -> URL {
        var components = URLComponents()
        components.scheme = Self.uriScheme
        let entity = entityName.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? entityName
        switch storage {
        case .permanent(let store, let key):
            components.host = store.uuidString
            components.percentEncodedPath = "/\(entity)/p\(key)"
        case .temporary(let uuid):
            components.host = "temporary"
            components.percentEncodedPath = "/\(entity)/t\(uuid.uuidString)"
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
            guard tag == "t", let uuid = UUID(uuidString: rest) else { return nil }
            self.entityName = entity
            storage = .temporary(uuid)
        } else {
            guard tag == "p", let store = UUID(uuidString: host), let key = Int64(rest), key > 0 else { return nil }
            self.entityName = entity
            storage = .permanent(store: store, key: key)
        }
    }

    public var description: String { uriRepresentation().absoluteString }
}
