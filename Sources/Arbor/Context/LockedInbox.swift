import Foundation
import Synchronization

/// Items posted from any thread and taken on one (a context's queue): a lock around the list,
/// and an atomic count so that the taker skips the lock when nothing was posted — it looks on
/// every registry lookup.
final class LockedInbox<Element>: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [Element] = []
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
