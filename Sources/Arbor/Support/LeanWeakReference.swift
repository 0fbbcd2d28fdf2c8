import CSwiftRuntime

// Safety: The `unowned(safe)` field keeps the object's memory allocated while the reference lives,
// so its address stays valid for `swift_tryRetain`, which declines an object whose strong count
// reached zero; the reference a successful try-retain counts is taken over by `takeRetainedValue`.

/// A weak reference that gives its object no side table.
///
/// Swift's `weak` gives the object it names a side table the first time one is made, and from
/// then on every retain and release of the object takes the runtime's slow path. Contexts (held
/// weakly by their coordinator and parent) and model descriptions (an entity's superentity, a
/// relationship's entities and inverse) are retained and released for every object a save,
/// fetch or insert handles, so the runtime's slow path there would be paid per object.
///
/// This reference behaves like `weak` — ``object`` is nil once the object has ended, on any
/// thread, and never traps — without the side table: it holds an `unowned` reference, which
/// counts in the object's inline unowned count and keeps the object's memory (not the object:
/// its `deinit` runs and its fields go as usual) until the reference is dropped, and it loads the
/// object through the runtime's atomic `swift_tryRetain` (`CSwiftRuntime`), which declines an
/// object whose strong count has reached zero.
struct LeanWeakReference<Object: AnyObject> {
    /// Keeps the object's memory while the reference lives; never loaded (an `unowned` load
    /// traps once the object has begun to end).
    private unowned(safe) let memory: Object
    /// The object's address.
    private let address: UnsafeMutableRawPointer

    init(_ object: Object) {
        memory = object
        address = Unmanaged.passUnretained(object).toOpaque()
    }

    /// The object, or nil once it has ended or while it is ending (on any thread).
    var object: Object? {
        guard let retained = swift_tryRetain(address) else { return nil }
        return Unmanaged<Object>.fromOpaque(retained).takeRetainedValue()
    }

    /// Whether the reference was made to the object of `identity` (also after it has ended).
    func refers(to identity: ObjectIdentifier) -> Bool {
        UInt(bitPattern: identity) == UInt(bitPattern: address)
    }
}

extension LeanWeakReference: @unchecked Sendable where Object: Sendable {}
