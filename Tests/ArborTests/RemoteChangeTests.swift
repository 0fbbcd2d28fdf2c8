import ArborTestSupport
import Foundation
import Synchronization
import Testing
@testable import Arbor

/// Issue 28, item 3: remote changes (docs/history.md, "Remote changes"). A coordinator learns of
/// commits other connections — other coordinators, other processes — made to its stores' files,
/// posts a remote-change notification with the history token, and its root contexts that merge
/// automatically bring the changes in.
@Suite("Remote changes")
struct RemoteChangeTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Note") {
                Attribute("text", .string)
                Attribute("rank", .integer64)
            }
        }
    }

    /// A coordinator on the store at `path`.
    static func open(_ path: String, history: PersistentHistoryTracking = .on) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model())
        try coordinator.addNativeStore(at: path, history: history)
        return coordinator
    }

    /// The remote-change notifications a coordinator posts, gathered.
    final class Notifications: @unchecked Sendable {
        private let lock = NSLock()
        private var received: [[AnyHashable: Any]] = []
        private var observer: (any NSObjectProtocol)?

        init(_ coordinator: PersistentStoreCoordinator) {
            observer = NotificationCenter.default.addObserver(forName: PersistentStoreCoordinator.remoteChangeNotification, object: coordinator,
                                                              queue: nil) { [weak self] notification in
                self?.lock.withLock { self?.received.append(notification.userInfo ?? [:]) }
            }
        }

        deinit { if let observer { NotificationCenter.default.removeObserver(observer) } }

        var all: [[AnyHashable: Any]] { lock.withLock { received } }

        /// Waits (bounded) until there are `count`.
        func wait(for count: Int, seconds: Double = 20) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while all.count < count && Date() < deadline { usleep(2_000) }
            return all.count >= count
        }
    }

    /// A private-queue root context of `coordinator` that merges automatically.
    static func mergingContext(_ coordinator: PersistentStoreCoordinator) -> ManagedObjectContext {
        let context = ManagedObjectContext(concurrencyType: .privateQueue)
        context.performAndWait {
            context.persistentStoreCoordinator = coordinator
            context.automaticallyMergesChangesFromParent = true
        }
        return context
    }

    /// `text` of the note `id` as `context` holds it (on its queue).
    static func text(_ id: ManagedObjectID, in context: ManagedObjectContext) -> String? {
        context.performAndWait { try? context.existingObject(with: id).value(forKey: "text") as? String }
    }

    @Test("another coordinator's saves are found, announced with the history token and merged into contexts that merge automatically; the coordinator's own saves are not remote")
    func anotherCoordinator() throws {
        let path = try temporaryDirectory() + "/remote.arbor"
        let here = try Self.open(path)
        let there = try Self.open(path)
        let notifications = Notifications(here)
        let mine = here.persistentStores[0].identifier
        // A note both know, registered (and faulted in) in a merging context here.
        let writer = ManagedObjectContext(persistentStoreCoordinator: there)
        let note = ManagedObject(entity: try #require(there.managedObjectModel.entity(named: "Note")), insertInto: writer)
        try note.setValue("first", forKey: "text")
        try writer.save()
        #expect(try here.processRemoteChanges(), "the other coordinator's insert is remote")
        let id = note.objectID
        let merging = Self.mergingContext(here)
        #expect(Self.text(id, in: merging) == "first")

        // Its own saves are not remote.
        let local = ManagedObjectContext(persistentStoreCoordinator: here)
        let own = ManagedObject(entity: try #require(here.managedObjectModel.entity(named: "Note")), insertInto: local)
        try own.setValue("mine", forKey: "text")
        try local.save()
        let before = notifications.all.count
        #expect(try !here.processRemoteChanges())
        #expect(notifications.all.count == before)

        // Another coordinator updates the note and deletes the one made here.
        try note.setValue("second", forKey: "text")
        writer.delete(try writer.existingObject(with: own.objectID))
        try writer.save()
        #expect(try here.processRemoteChanges())
        let last = try #require(notifications.all.last)
        #expect(last[PersistentStoreCoordinator.storeIdentifierKey] as? UUID == mine)
        let token = try #require(last[PersistentStoreCoordinator.historyTokenKey] as? PersistentHistoryToken)
        #expect(token == (try there.currentPersistentHistoryToken()))
        // The merging context took the new value (merges run on its queue: wait for it).
        let deadline = Date().addingTimeInterval(10)
        while Self.text(id, in: merging) != "second" && Date() < deadline { usleep(2_000) }
        #expect(Self.text(id, in: merging) == "second")
        // The row cache was refreshed: a fault in a new context reads the new row.
        #expect(Self.text(id, in: ManagedObjectContext(persistentStoreCoordinator: here)) == "second")
        #expect(try !here.processRemoteChanges(), "nothing more")
    }

    @Test("a store without history still announces remote changes, with no token and nothing merged")
    func withoutHistory() throws {
        let path = try temporaryDirectory() + "/plain.arbor"
        let here = try Self.open(path, history: .off)
        let there = try Self.open(path, history: .off)
        let notifications = Notifications(here)
        #expect(try !here.processRemoteChanges())
        let writer = ManagedObjectContext(persistentStoreCoordinator: there)
        try ManagedObject(entity: try #require(there.managedObjectModel.entity(named: "Note")), insertInto: writer).setValue("x", forKey: "text")
        try writer.save()
        #expect(try here.processRemoteChanges())
        #expect(notifications.all.count == 1)
        #expect(notifications.all.first?[PersistentStoreCoordinator.historyTokenKey] == nil)
        // Own saves, one after another coordinator's commit that this one has not looked at yet:
        // the other's is still found.
        try ManagedObject(entity: try #require(there.managedObjectModel.entity(named: "Note")), insertInto: writer).setValue("y", forKey: "text")
        try writer.save()
        let local = ManagedObjectContext(persistentStoreCoordinator: here)
        try ManagedObject(entity: try #require(here.managedObjectModel.entity(named: "Note")), insertInto: local).setValue("z", forKey: "text")
        try local.save()
        #expect(try here.processRemoteChanges())
        #expect(try !here.processRemoteChanges())
    }

    @Test("checking on access: a fetch that sees another coordinator's commit brings the notification, with no poll")
    func onAccess() throws {
        let path = try temporaryDirectory() + "/access.arbor"
        let here = try Self.open(path)
        let there = try Self.open(path)
        here.checksRemoteChangesOnAccess = true
        let notifications = Notifications(here)
        let writer = ManagedObjectContext(persistentStoreCoordinator: there)
        try ManagedObject(entity: try #require(there.managedObjectModel.entity(named: "Note")), insertInto: writer).setValue("x", forKey: "text")
        try writer.save()
        #expect(notifications.all.isEmpty)
        #expect(try ManagedObjectContext(persistentStoreCoordinator: here).count(for: FetchRequest<ManagedObject>(entityName: "Note")) == 1)
        #expect(notifications.wait(for: 1))
    }

    @Test("another process's saves reach this one: found by the poll, announced with the token, merged into a context that merges automatically")
    func anotherProcess() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/shared.arbor"
        let here = try Self.open(path)
        let notifications = Notifications(here)
        let writer = ManagedObjectContext(persistentStoreCoordinator: here)
        let note = ManagedObject(entity: try #require(here.managedObjectModel.entity(named: "Note")), insertInto: writer)
        try note.setValue("before", forKey: "text")
        try writer.save()
        let id = note.objectID
        let merging = Self.mergingContext(here)
        #expect(Self.text(id, in: merging) == "before")
        here.startPollingRemoteChanges(every: .milliseconds(20))
        defer { here.stopPollingRemoteChanges() }

        // The other process changes the note and adds two, through a coordinator of its own.
        let uri = id.uriRepresentation()
        await #expect(processExitsWith: .success) { [path = path as String, uri = uri as URL] in
            let coordinator = try! RemoteChangeTests.open(path)
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            context.transactionAuthor = "other process"
            let note = try! context.existingObject(with: coordinator.managedObjectID(forURIRepresentation: uri)!)
            try! note.setValue("after", forKey: "text")
            for index in 0..<2 {
                try! ManagedObject(entity: coordinator.managedObjectModel.entity(named: "Note")!, insertInto: context).setValue("new \(index)", forKey: "text")
            }
            try! context.save()
        }
        #expect(notifications.wait(for: 1))
        let deadline = Date().addingTimeInterval(10)
        while Self.text(id, in: merging) != "after" && Date() < deadline { usleep(2_000) }
        #expect(Self.text(id, in: merging) == "after")
        let token = try #require(notifications.all.first?[PersistentStoreCoordinator.historyTokenKey] as? PersistentHistoryToken)
        let context = ManagedObjectContext(persistentStoreCoordinator: here)
        let remote = try #require(try context.execute(.fetchHistory(after: PersistentHistoryToken(transactionNumbers: token.transactionNumbers.mapValues { $0 - 1 }))).transactions)
        #expect(remote.map(\.author) == ["other process"])
        #expect(remote.first?.processID != ProcessInfo.processInfo.processIdentifier)
        #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Note")) == 3)
    }
}
