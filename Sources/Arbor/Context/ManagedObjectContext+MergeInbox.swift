import Foundation
import Synchronization

/// How changes made elsewhere reach a context without anyone waiting for its queue
/// (docs/concurrency.md, "Merges never wait").
///
/// 1. A source — a batch request of another context, another context's save, a remote change, a
///    call of `mergeChanges(fromRemoteContextSave:into:)` — *posts* the change to the context's
///    inbox: one lock around a list, taken by nothing else, so posting never waits for anything.
/// 2. When the posting thread may use the context now (the context's own queue, a queue the
///    thread holds through `performAndWait`, the main thread for a main-queue context, or any
///    thread for a confinement context), the inbox is drained at once. Otherwise one block is
///    queued on the context's queue to drain it, and the poster goes on.
/// 3. The context drains its inbox, in the order the changes were posted, at the start of every
///    block (`perform`, `performAndWait`, the async `perform`), and at the start of every fetch,
///    count, `existingObject(with:)`, save and batch request: a change posted before one of those
///    begins is merged before it reads the store.
///
/// Nothing in the object graph waits synchronously on another context's queue to merge, so two
/// contexts that merge into each other cannot deadlock.
struct PendingMerge: Sendable {
    /// Where the change comes from, which decides whether the context takes it.
    enum Source: Sendable {
        /// A batch request of another context: merged unless the context is pinned to a query
        /// generation (it goes on reading its generation).
        case batchRequest
        /// A save of a context this one merges automatically (its parent's, a sibling's), or a
        /// remote change: merged while ``ManagedObjectContext/automaticallyMergesChangesFromParent``.
        case automatic
        /// `mergeChanges(fromRemoteContextSave:into:)`: always merged.
        case requested
    }

    /// What changed (by ID; with the rows written when the change went through the context's
    /// own coordinator).
    let record: ChangeRecord
    /// The change went through the context's own coordinator (whose row cache holds its rows).
    let fromOwnCoordinator: Bool
    let source: Source
}

/// A context's changes waiting to be merged (``ManagedObjectContext/drainMerges()``).
final class MergeInbox: @unchecked Sendable {
    /// Posted from any thread, taken on the context's queue.
    let pending = LockedInbox<PendingMerge>()
    /// Whether a block that drains the inbox is queued on the context's queue.
    let drainScheduled = Atomic<Bool>(false)
    /// Whether a drain is running (read and written on the context's queue only).
    var draining = false
    /// Operations during which a drain waits (a save: its phases must see one state), counted
    /// on the context's queue.
    var held = 0
    /// Whether the context merges automatically (``ManagedObjectContext/automaticallyMergesChangesFromParent``),
    /// readable from any thread: remote changes are posted only to such contexts.
    let takesAutomaticMerges = Atomic<Bool>(false)
}

extension ManagedObjectContext {
    /// Adds `merge` to the context's inbox without delivering it (``deliverMerges(_:)`` does):
    /// a source that posts to several contexts posts to all first, in one critical section,
    /// so that every inbox holds its changes in the same order.
    func postMerge(_ merge: PendingMerge) {
        merges.pending.post(merge)
    }

    /// When a posted change may be merged on the posting thread.
    enum Delivery {
        /// At once when the thread may use the context now (where `performAndWait` would have
        /// run inline): a batch request, `mergeChanges(fromRemoteContextSave:into:)`.
        case whereWaitingWould
        /// At once only for a confinement context (where `perform` would have run inline):
        /// another context's save, which every queued context takes on its own queue.
        case wherePerformWould
        /// Never on the posting thread: a remote change, found on a thread of no context (a
        /// confinement context takes it at its next fetch or block).
        case later
    }

    /// Delivers what the inbox holds: drained at once where `delivery` allows it, else by a
    /// block queued on the context's queue (one at a time). Never waits for the queue.
    func deliverMerges(_ delivery: Delivery) {
        let now = switch delivery {
        case .whereWaitingWould: isOnContextQueue
        case .wherePerformWould: concurrencyType == .confinement
        case .later: false
        }
        if now {
            drainMerges()
        } else {
            scheduleMergeDrain()
        }
    }

    /// Queues one block on the context's queue that drains the inbox (none while one is queued
    /// already; none for a confinement context, which has no queue). The block holds the context
    /// weakly: a context that ends first drops its inbox.
    private func scheduleMergeDrain() {
        guard let queue, !merges.drainScheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let context = WeakContext(context: self)
        queue.async {
            guard let context = context.context else { return }
            context.merges.drainScheduled.store(false, ordering: .releasing)
            context.drainMerges()
        }
    }

    /// Merges every change the inbox holds, in the order posted (on the context's queue). Does
    /// nothing inside a drain already running (a merge's own fetches and lookups do not start
    /// another), or inside a save (``holdingMerges(_:)``: its conflict resolution and hooks fetch).
    
    func drainMerges() {
        guard !merges.pending.isEmpty, !merges.draining, merges.held == 0 else { return }
        merges.draining = true
        defer { merges.draining = false }
        while !merges.pending.isEmpty {
            for pending in merges.pending.take() { apply(pending) }
        }
    }

    /// Runs `body` with drains held off: what is posted meanwhile waits for the next drain point.
    func holdingMerges<R>(_ body: () throws -> R) rethrows -> R {
        merges.held += 1
        defer {
            merges.held -= 1
            // Posted during the body: delivered now, or by a block queued for it.
            if merges.held == 0 && !merges.pending.isEmpty { scheduleMergeDrain() }
        }
        return try body()
    }

    /// Merges one change, when the context still takes changes from its source.
    private func apply(_ pending: PendingMerge) {
        switch pending.source {
        case .batchRequest:
            guard queryGeneration == nil else { return }
        case .automatic:
            guard automaticallyMergesChangesFromParent else { return }
        case .requested:
            break
        }
        merge(pending.record, fromOwnCoordinator: pending.fromOwnCoordinator)
    }
}
