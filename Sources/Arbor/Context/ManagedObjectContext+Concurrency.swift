import Dispatch
import Foundation

// Safety: A thread's `HeldQueues` is retained once when its thread-local slot is set
// (`passRetained`), read unretained while that reference lives, and released once by the key's
// destructor when the thread ends.

extension ManagedObjectContext {
    /// How a context is used from threads (docs/concurrency.md).
    public enum ConcurrencyType: Sendable, Hashable {
        /// The context owns a serial queue: work on it runs in ``perform(_:)``,
        /// ``performAndWait(_:)`` or ``perform(schedule:_:)``.
        case privateQueue
        /// The context belongs to the main queue: use it on the main thread directly, or from
        /// elsewhere through ``perform(_:)`` and ``performAndWait(_:)``.
        case mainQueue
        /// The context is used by one thread at a time of the caller's choosing (Core Data's
        /// deprecated confinement type): no queue and no checks; `perform` and `performAndWait`
        /// run their work at once on the calling thread. What `init(persistentStoreCoordinator:)`
        /// makes — scripts, tools and tests that use one thread.
        case confinement
    }

    /// Whether the calling thread may use the context now: on its queue (a private-queue
    /// context), on the main thread (a main-queue context), or anywhere (confinement).
    public var isOnContextQueue: Bool {
        switch concurrencyType {
        case .confinement: true
        // Blocks on the main queue may run on a thread other than the main thread (on Linux,
        // after `dispatch_main()`, or under the main actor of an async `main`): the main queue
        // carries a key of its own.
        case .mainQueue:
            Thread.isMainThread || DispatchQueue.getSpecific(key: ContextQueue.mainKey) != nil || HeldQueues.current.holdsMain
        case .privateQueue:
            // The innermost queue, else one an enclosing performAndWait holds (a child's block
            // calling its parent: `DispatchQueue.getSpecific` sees only the child's queue).
            DispatchQueue.getSpecific(key: ContextQueue.key) == ObjectIdentifier(self) || HeldQueues.current.holds(self)
        }
    }

    /// In debug builds with the `Checks` trait, stops the program when the calling thread may not use the context now,
    /// naming the context and the call: the check Core Data makes only with
    /// `-com.apple.CoreData.ConcurrencyDebug 1`. Release builds compile it away.
    @inline(__always)
    func checkQueue(_ call: StaticString = #function) {
        #if ARBOR_QUEUE_CHECKS
        if concurrencyType != .confinement && !isOnContextQueue {
            queueViolation(call)
        }
        #endif
    }

    func queueViolation(_ call: StaticString) -> Never {
        let kind = concurrencyType == .mainQueue ? "the main queue" : "its private queue"
        preconditionFailure("Arbor concurrency violation: \(call) called on context \(displayName) outside \(kind); use perform(_:) or performAndWait(_:)")
    }

    /// The context's name, or a description of it, for messages.
    var displayName: String {
        if let name { return "\"\(name)\"" }
        return "<\(concurrencyType) context \(UInt(bitPattern: ObjectIdentifier(self).hashValue))>"
    }

    // MARK: Performing work

    /// Schedules `body` on the context's queue and returns at once (a confinement context runs
    /// it now, on the calling thread). Each block is a body of work of its own: when it ends,
    /// other blocks may run; end it with `save()` when its changes should be kept. Changes
    /// other contexts posted to this one are merged before `body` runs.
    public func perform(_ body: @escaping @Sendable () -> Void) {
        guard let queue else {
            drainMerges()
            body()
            return processPendingChanges()
        }
        queue.async {
            self.drainMerges()
            body()
            self.processPendingChanges()
        }
    }

    /// Runs `body` on the context's queue and returns when it has run, with its value or its
    /// error. Reentrant: inside a block of this context (or on the main thread, for a main-queue
    /// context) it runs at once.
    public func performAndWait<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        try onQueue { () throws(E) -> T in
            drainMerges()
            defer { processPendingChanges() }
            return try body()
        }
    }

    /// Runs `body` on the context's queue and waits for it, without ending the event (the
    /// setters' way in).
    func onQueue<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        guard let queue, !isOnContextQueue else { return try body() }
        // `sync` runs the block on this thread: the queues this thread holds stay held inside it
        // (the main queue too, which a block of another queue cannot otherwise see).
        // (The block may run on another thread — the main queue's — while this one waits: it
        // inherits what this thread holds.)
        let caller = HeldQueues.current
        var inherited = caller.contexts
        inherited.append(ObjectIdentifier(self))
        let holdsMain = concurrencyType == .mainQueue || caller.holdsMain || Thread.isMainThread
            || DispatchQueue.getSpecific(key: ContextQueue.mainKey) != nil
        return try queue.sync {
            let executing = HeldQueues.current
            let saved = executing.replace(contexts: inherited, main: holdsMain)
            defer { executing.restore(saved) }
            return Result(catching: body)
        }.get()
    }

    /// When the async ``perform(schedule:_:)`` runs its block.
    public enum ScheduledTaskType: Sendable, Hashable {
        /// At once when the caller is already where the context may be used (the main actor, for
        /// a main-queue context), else on the context's queue.
        case immediate
        /// Always after the blocks already on the context's queue.
        case enqueued
    }

    /// Runs `body` on the context's queue without blocking the caller's thread, and returns its
    /// value or rethrows its error. The value crosses from the context's queue to the caller: it
    /// must be `Sendable` (object IDs, not objects). In asynchronous code `context.perform { … }`
    /// means this one (as in Core Data): `await` it.
    public func perform<T: Sendable, E: Error>(schedule: ScheduledTaskType = .immediate,
                                               _ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        guard let queue, !(schedule == .immediate && isOnContextQueue) else {
            drainMerges()
            defer { processPendingChanges() }
            return try body()
        }
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            queue.async {
                self.drainMerges()
                let result = Result(catching: body)
                self.processPendingChanges()
                continuation.resume(returning: result)
            }
        }
        return try result.get()
    }

    // MARK: Locking

    /// Waits until the context's lock is free, then takes it (Core Data's `lock()`): a recursive
    /// lock that marks a section of work on the context; the thread that takes it must keep the
    /// context alive until it calls ``unlock()``. Arbor's own work does not take it.
    public func lock() {
        contextLock.lock()
    }

    /// Gives back the lock taken with ``lock()`` or ``tryLock()``, on the same thread.
    public func unlock() {
        contextLock.unlock()
    }

    /// Takes the context's lock if it is free (or already held by this thread) and returns
    /// true; returns false at once otherwise.
    public func tryLock() -> Bool {
        contextLock.try()
    }
}

/// The queue key every context queue carries, with the context's identity as its value.
enum ContextQueue {
    static let key = DispatchSpecificKey<ObjectIdentifier>()
    /// Set on the main queue when the first main-queue context is made.
    static let mainKey: DispatchSpecificKey<Bool> = {
        let key = DispatchSpecificKey<Bool>()
        DispatchQueue.main.setSpecific(key: key, value: true)
        return key
    }()
}

/// The context queues the current thread holds through `performAndWait` (thread-local): inside
/// a block that `DispatchQueue.sync` runs on this thread, `DispatchQueue.getSpecific` sees only
/// the innermost queue, yet the outer ones are held too — a child context's block may call its
/// parent, whose queue an enclosing block already holds.
final class HeldQueues {
    private(set) var contexts: [ObjectIdentifier] = []
    private(set) var holdsMain = false

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            #if canImport(Darwin)
            Unmanaged<HeldQueues>.fromOpaque(pointer).release()
            #else
            if let pointer { Unmanaged<HeldQueues>.fromOpaque(pointer).release() }
            #endif
        }
        return key
    }()

    /// This thread's record.
    static var current: HeldQueues {
        if let pointer = pthread_getspecific(key) { return Unmanaged<HeldQueues>.fromOpaque(pointer).takeUnretainedValue() }
        let held = HeldQueues()
        pthread_setspecific(key, Unmanaged.passRetained(held).toOpaque())
        return held
    }

    func holds(_ context: ManagedObjectContext) -> Bool {
        contexts.contains(ObjectIdentifier(context))
    }

    /// Sets what the thread holds for a block; returns what to restore after it.
    func replace(contexts newContexts: [ObjectIdentifier], main: Bool) -> ([ObjectIdentifier], Bool) {
        defer {
            contexts = newContexts
            holdsMain = main
        }
        return (contexts, holdsMain)
    }

    func restore(_ saved: ([ObjectIdentifier], Bool)) {
        (contexts, holdsMain) = saved
    }
}
