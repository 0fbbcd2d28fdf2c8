import Foundation
import Synchronization

// Safety: `items` is read and changed only inside `lock` (`post`, `take`), and nothing is called
// while the lock is held, so its unchecked accesses never overlap.

/// Items posted from any thread and taken on one (a context's queue): a lock around the list,
/// and an atomic count so that the taker skips the lock when nothing was posted — it looks on
/// every registry lookup.
final class LockedInbox<Element>: @unchecked Sendable {
    private let lock = NSLock()
    /// Changed only under `lock` (no dynamic exclusivity check: nothing is called while it is).
    @exclusivity(unchecked) private var items: [Element] = []
    private let count = Atomic<Int>(0)

    /// Whether nothing was posted since the last ``take()``.
    @inline(__always)
    var isEmpty: Bool { count.load(ordering: .acquiring) == 0 }

    /// Adds `item` (any thread).
    func post(_ item: Element) {
        lock.withLock {
            items.append(item)
            count.add(1, ordering: .releasing)
        }
    }

    /// The items posted, in order, leaving none.
    func take() -> [Element] {
        lock.withLock {
            defer {
                items = []
                count.store(0, ordering: .releasing)
            }
            return items
        }
    }
}

/// A value behind an `NSLock`, for state shared by the whole process (interned object-ID spaces,
/// lexed format strings). `Synchronization.Mutex` would do, but on Linux it locks inside the
/// uninstrumented Synchronization library, so Thread Sanitizer reports every access to the
/// value as a race; `NSLock` goes through the pthread calls the sanitizer understands.
final class LockedValue<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with the value, under the lock.
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
