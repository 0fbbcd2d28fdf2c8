import Observation

// Safety: The context is read unretained through the object's link, which names it only while it is
// alive, on its queue (the only place the object is used).

/// Managed objects are observable with Swift's Observation framework (docs/observation.md):
/// `withObservationTracking` (and SwiftUI) sees the properties a closure read — through
/// ``ManagedObject/value(forKey:)`` or the typed property wrappers — and is told when one of
/// them changes through a setter, an undo or a redo, a refresh, or a merge of another context's
/// or process's save.
///
/// Objects of a context whose ``ManagedObjectContext/isObservationEnabled`` is set (a
/// main-queue context's, by default) report their reads. Each has its own
/// `ObservationRegistrar`, made the first time one of its properties is read (objects only
/// written — an import's — never make one), kept with the object's rare fields
/// (``ObjectExtras``). Changes are reported by every object that has a registrar.
extension ManagedObject: Observable {
    /// The key path that names property `slot` of the object's entity to Observation: one
    /// subscript, its argument the slot (each entity keeps its key paths, made once).
    subscript(observedSlot slot: Int) -> Int { slot }

    /// Tells Observation that property `slot` was read.
    @inline(__always)
    func observationAccess(_ slot: Int) {
        guard let context = link?.contextReference, context._withUnsafeGuaranteedRef({ $0.observationEnabled }),
              slot < entity.observationKeyPaths.count else { return }
        registrar.access(self, keyPath: entity.observationKeyPaths[slot])
    }

    /// The object's registrar, made at its first read.
    private var registrar: ObservationRegistrar {
        if let registrar = observationRegistrar { return registrar }
        let registrar = ObservationRegistrar()
        observationRegistrar = registrar
        return registrar
    }

    /// Runs `change` (a change of property `slot`) between Observation's will-set and did-set,
    /// when anyone may be observing the object (it has been read).
    @inline(__always)
    func observingChange<R>(of slot: Int, _ change: () throws -> R) rethrows -> R {
        guard let registrar = observationRegistrar, slot < entity.observationKeyPaths.count else { return try change() }
        let keyPath = entity.observationKeyPaths[slot]
        registrar.willSet(self, keyPath: keyPath)
        defer { registrar.didSet(self, keyPath: keyPath) }
        return try change()
    }

    /// Runs `change` — one that may change any property (a refresh, a merge) — between
    /// Observation's will-set and did-set of every property, when anyone may be observing.
    func observingChangeOfEveryProperty<R>(_ change: () throws -> R) rethrows -> R {
        guard let registrar = observationRegistrar else { return try change() }
        let keyPaths = entity.observationKeyPaths
        for keyPath in keyPaths { registrar.willSet(self, keyPath: keyPath) }
        defer { for keyPath in keyPaths { registrar.didSet(self, keyPath: keyPath) } }
        return try change()
    }
}
