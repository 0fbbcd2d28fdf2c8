import Dispatch
import Foundation
import Logging
import Synchronization

/// How a coordinator looks for commits that other connections — other coordinators, other
/// processes — made to its stores' files (docs/history.md, "Remote changes").
final class RemoteChangeChecking: @unchecked Sendable {
    /// Whether each access compares the change counters its transactions saw.
    let onAccess = Atomic<Bool>(false)
    /// Whether a check is scheduled already.
    let scheduled = Atomic<Bool>(false)
    /// The poll, when one runs (under `lock`).
    private var timer: DispatchSourceTimer?
    private let lock = NSLock()
    /// Held while changes are found, announced and handed to contexts: one processing at a
    /// time, so that notifications and merges follow the order of the commits (recursive: an
    /// observer of the notification may look again).
    let processing = NSRecursiveLock()

    func startPolling(every interval: Duration, _ poll: @escaping @Sendable () -> Void) {
        let source = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "arbor.remote-changes"))
        // In whole milliseconds, at least one (no overflow for any interval).
        let milliseconds = interval.components.seconds >= Int64(Int.max / 1_000_000_000) ? Int.max / 1_000_000
            : max(1, Int(interval.components.seconds) * 1_000 + Int(interval.components.attoseconds / 1_000_000_000_000_000))
        let nanoseconds = milliseconds * 1_000_000
        source.schedule(deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds))
        source.setEventHandler(handler: poll)
        source.resume()
        lock.withLock {
            timer?.cancel()
            timer = source
        }
    }

    func stopPolling() {
        lock.withLock {
            timer?.cancel()
            timer = nil
        }
    }
}

extension PersistentStoreCoordinator {
    /// Posted, on no particular thread, when the coordinator finds that another connection — a
    /// coordinator of another process, or another coordinator of this one — committed changes
    /// to one of its native stores' files (Core Data's `NSPersistentStoreRemoteChange`). The
    /// object is the coordinator; `userInfo` holds the store's identifier under
    /// ``storeIdentifierKey`` and, for a store that records persistent history, the token of the
    /// last transaction found under ``historyTokenKey``. Root contexts of the coordinator that
    /// merge automatically (``ManagedObjectContext/automaticallyMergesChangesFromParent``)
    /// merge the objects those transactions inserted, updated and deleted, on their own queues.
    public static let remoteChangeNotification = Notification.Name("ArborPersistentStoreRemoteChange")
    /// The key of the store's identifier (a `UUID`) in a ``remoteChangeNotification``.
    public static let storeIdentifierKey = "storeIdentifier"
    /// The key of the history token (a ``PersistentHistoryToken``) in a
    /// ``remoteChangeNotification``.
    public static let historyTokenKey = "historyToken"

    /// Whether every access of the coordinator (a fetch, a fault, a save) compares the change
    /// counters its transactions saw with those it accounted for — no I/O — and, when another
    /// connection committed, processes the remote changes on another thread (false by default).
    /// An access sees a commit made before it; the notification follows it.
    public var checksRemoteChangesOnAccess: Bool {
        get { remoteChecking.onAccess.load(ordering: .relaxed) }
        set { remoteChecking.onAccess.store(newValue, ordering: .relaxed) }
    }

    /// Polls the stores' files every `interval` (a read of each file's header) and processes the
    /// remote changes found, until ``stopPollingRemoteChanges()`` or the coordinator goes.
    public func startPollingRemoteChanges(every interval: Duration) {
        remoteChecking.startPolling(every: interval) { [weak self] in
            guard let self else { return }
            do {
                try self.processRemoteChanges()
            } catch {
                self.logger.warning("could not look for remote changes", metadata: ["arbor.error": "\(error)"])
            }
        }
    }

    /// Stops the poll ``startPollingRemoteChanges(every:)`` started.
    public func stopPollingRemoteChanges() {
        remoteChecking.stopPolling()
    }

    /// Looks now for commits other connections made to the native stores' files since the
    /// coordinator last looked (reading each file's header), and for each store that has some
    /// posts a ``remoteChangeNotification``: with persistent history, after refreshing the row
    /// cache's rows of the objects they changed and merging them into the root contexts that
    /// merge automatically. Returns whether any store had some.
    ///
    /// - Throws: ``ArborError/Code/store`` when the files or their history cannot be read.
    @discardableResult
    public func processRemoteChanges() throws -> Bool {
        try processRemoteChanges(refreshing: true)
    }

    func processRemoteChanges(refreshing: Bool) throws -> Bool {
        remoteChecking.processing.lock()
        defer { remoteChecking.processing.unlock() }
        let found = try locked {
            try persistentStores.compactMap { $0 as? any RemoteChangeStore }.compactMap { store in try store.remoteChanges(refreshing: refreshing).map { (store, $0) } }
        }
        // Each store's changes are accounted for once announced and handed to the contexts: a
        // failure leaves them to be found again, and the other stores' go on.
        var failure: (any Error)?
        var announced = false
        for (store, result) in found {
            do {
                if let changes = result.changes {
                    try announce(changes)
                    announced = true
                }
                store.accept(result)
            } catch {
                logger.debug("could not process the remote changes of a store; they will be looked for again",
                               metadata: ["arbor.store": "\(store.identifier)", "arbor.error": "\(error)"])
                failure = failure ?? error
            }
        }
        if let failure { throw failure }
        return announced
    }

    /// Refreshes the row cache's rows of what others changed, posts the notification and hands
    /// the changes to the root contexts that merge automatically (posted to their inboxes, in
    /// order, and merged on their own queues: ManagedObjectContext+MergeInbox.swift).
    private func announce(_ record: ChangeRecord) throws {
        let changed = record.updated.union(record.deleted)
        if !changed.isEmpty { try reloadSnapshots(Array(changed)) }
        logger.debug("remote changes", metadata: ["arbor.store": "\(record.store.map(\.uuidString) ?? "")", "arbor.inserted": "\(record.inserted.count)",
                                                  "arbor.updated": "\(record.updated.count)", "arbor.deleted": "\(record.deleted.count)"])
        var userInfo: [AnyHashable: Any] = [:]
        if let store = record.store { userInfo[Self.storeIdentifierKey] = store }
        if let token = record.token { userInfo[Self.historyTokenKey] = token }
        NotificationCenter.default.post(name: Self.remoteChangeNotification, object: self, userInfo: userInfo)
        guard !record.isEmpty else { return }
        // Only contexts that merge automatically take them (read without their queue).
        let roots = liveContexts().filter { $0.parent == nil && $0.merges.takesAutomaticMerges.load(ordering: .acquiring) }
        for context in roots { context.postMerge(PendingMerge(record: record, fromOwnCoordinator: false, source: .automatic)) }
        for context in roots { context.deliverMerges(.later) }
    }

    /// After an access (under the lock): when a store's transactions saw a change counter it
    /// has not accounted for, processes the remote changes on another thread (one at a time).
    func noticeRemoteChanges(_ stores: [any PersistentStore]) {
        guard stores.contains(where: { ($0 as? any RemoteChangeStore)?.mayHaveRemoteChanges ?? false }),
              !remoteChecking.scheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        DispatchQueue.global().async { [weak self] in
            guard let self else { return }
            defer { self.remoteChecking.scheduled.store(false, ordering: .releasing) }
            do {
                _ = try self.processRemoteChanges(refreshing: false)
            } catch {
                self.logger.warning("could not look for remote changes", metadata: ["arbor.error": "\(error)"])
            }
        }
    }
}
