import Logging

/// Objects that can no longer load what they do not hold (docs/object-graph.md, "Objects that
/// cannot load"), and what a typed property does when it cannot read or write.
extension ManagedObject {
    /// Why an object can no longer load what it does not hold.
    public enum Inaccessibility: Sendable, Hashable, CustomStringConvertible {
        /// Its context was reset (``ManagedObjectContext/reset()``): the context forgot it.
        case contextReset
        /// Its context has ended: the object outlived it.
        case contextEnded
        /// Its row is gone: a fault fired and found no row (another context deleted it), or the
        /// object names a temporary ID of an object its context does not have (an insertion
        /// rolled back). See ``ManagedObjectContext/shouldDeleteInaccessibleFaults``.
        case rowMissing

        /// `its context was reset`.
        public var description: String {
            switch self {
            case .contextReset: "its context was reset"
            case .contextEnded: "its context has ended"
            case .rowMissing: "its row is gone from the store"
            }
        }
    }

    /// Why the object cannot load what it does not hold, or nil while it can. Reading it loads
    /// nothing and never reads the store: a fault whose row another context deleted is found
    /// out only when it fires (``ManagedObjectContext/existingObject(with:)`` finds out at once).
    ///
    /// An object whose context was reset or has ended still reads the values it holds, as it last
    /// held them (the values it loaded or a fetch gave it, with its unsaved changes). It cannot
    /// load what it does not hold — a fault's values, the objects its relationships name — and it
    /// cannot be changed: ``value(forKey:)`` and ``setValue(_:forKey:)`` throw
    /// ``ArborError/Code/objectInaccessible``, and a typed property (``Managed``, ``ManagedSet``,
    /// ``ManagedList``) records the failure in ``accessFailure`` and logs it (`error`, once per
    /// object) — and, in builds with Arbor's checks on, stops the program. Keep the object's
    /// ``objectID`` instead, and get the object again from a live context.
    public var inaccessibility: Inaccessibility? {
        if rowMissing { return .rowMissing }
        guard let link else { return nil }
        if link.afterReset { return .contextReset }
        return link.contextReference == nil ? .contextEnded : nil
    }

    /// Whether the object can no longer load what it does not hold (``inaccessibility`` says
    /// why).
    public var isInaccessible: Bool { inaccessibility != nil }

    /// The last failure of a typed property of the object to read or write (typed properties
    /// cannot throw): the object could not load its values (``Inaccessibility``), its row was
    /// gone with ``ManagedObjectContext/shouldDeleteInaccessibleFaults`` off, or the store
    /// failed. The property read nil, or its type's zero value when it is not optional. Nil when
    /// none failed.
    public var accessFailure: ArborError? { lastAccessFailure }

    /// The value a typed property's setter could not set on `key`, and why (typed setters cannot
    /// throw): the property keeps its old value, and the object's next validation and save fail
    /// with this error, until the key is set to a value the model accepts. Nil when none was
    /// refused.
    public func refusal(forKey key: String) -> ArborError? { refusedValues?[key] }

    /// Every value typed setters refused (``refusal(forKey:)``), by key.
    public var refusals: [String: ArborError] { refusedValues ?? [:] }

    // MARK: Reporting

    /// The failure of loading `what` (`its values`, `the objects of books`) in an object that
    /// cannot load: ``ArborError/Code/objectInaccessible`` naming the object and the cause.
    func inaccessible(_ what: String, because cause: Inaccessibility?) -> ArborError {
        let why = cause.map(\.description) ?? "it is in no context"
        return ArborError(.objectInaccessible, "\(objectID) cannot load \(what): \(why). Keep its objectID and get the object again from a live context",
                          entity: entity.name, objectID: objectID)
    }

    /// The failure of loading something into the object while it cannot: its cause, or nil
    /// while it can.
    var inaccessibleFailure: ArborError? {
        guard let cause = inaccessibility, cause != .rowMissing else { return nil }
        return inaccessible("or change its values", because: cause)
    }

    /// Records that a typed property's read or write of `key` failed with `error` (the property
    /// reads nil or zero, or keeps its value): kept in ``accessFailure``, logged once per object
    /// at `error` — no caller sees it — and, for an inaccessible object in a build with Arbor's
    /// checks, the program stops (as Core Data's `NSObjectInaccessibleException` does).
    func recordFailedAccess(_ error: ArborError, key: String, writing: Bool) {
        var error = error
        if error.key == nil { error.key = key }
        if error.entityName == nil { error.entityName = entity.name }
        let first = lastAccessFailure == nil
        lastAccessFailure = error
        #if ARBOR_QUEUE_CHECKS
        if error.code == .objectInaccessible && Self.stopsOnInaccessibleAccess {
            preconditionFailure("Arbor: \(writing ? "setting" : "reading") \(entity.name).\(key): \(error.message)")
        }
        #endif
        guard first else { return }
        let logger = link?.logger ?? managedObjectContext?.persistentStoreCoordinator?.logger
        logger?.error("a typed property could not \(writing ? "set" : "read") its value", metadata: [
            "arbor.object": "\(objectID)", "arbor.key": "\(key)", "arbor.error": "\(error)",
        ])
    }

    /// Whether a build with Arbor's checks stops the program when a typed property of an
    /// inaccessible object fails (tests turn it off to see what release builds do).
    @TaskLocal static var stopsOnInaccessibleAccess = true
}
