import ArborStore
import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// A store's lifecycle (docs/store-lifecycle.md): removing a store closes its file; a container
/// closes; destroying, replacing and moving store files (Core Data's
/// `destroyPersistentStore(at:)`, `replacePersistentStore(at:withPersistentStoreFrom:)`,
/// `migratePersistentStore(_:to:)`); backup and compaction of a store in use, here and in another
/// process.
@Suite("A store's lifecycle", .serialized)
struct StoreLifecycleTests {
    /// How many of this process's file descriptors are open on `path`.
    static func openDescriptors(_ path: String) -> Int {
        let resolved = (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? path
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return names.count { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == resolved }
    }

    /// A store of departments at `path` with `count` of them; the stack and their IDs.
    static func departments(at path: String, _ count: Int) throws -> (Stack, [ManagedObjectID]) {
        let stack = try Stack(path: path)
        let context = stack.context()
        let objects = try (0..<count).map { try stack.insert("Department", in: context, ["name": "D\($0)", "budget": Int32($0)]) }
        try context.save()
        return (stack, objects.map(\.objectID))
    }

    /// The departments' names a new coordinator reads from `path`.
    static func names(at path: String) throws -> Set<String> {
        let stack = try Stack(path: path)
        return Set(try stack.context().fetch(FetchRequest<ManagedObject>(entityName: "Department")).map { try $0.value(forKey: "name") as! String })
    }

    @Test("removing a store closes its file: no descriptor is left open on it; its objects can no longer load; a store that is not the coordinator's is refused")
    func removeCloses() throws {
        let path = try temporaryDirectory() + "/removed.arbor"
        let (stack, ids) = try Self.departments(at: path, 3)
        let store = try #require(stack.coordinator.persistentStores.first)
        #expect(Self.openDescriptors(path) > 0)
        let context = stack.context()
        let fault = context.object(with: ids[0])
        try stack.coordinator.remove(store)
        #expect(stack.coordinator.persistentStores.isEmpty)
        #expect(Self.openDescriptors(path) == 0, "the file is closed")
        #expect(throws: ArborError.self) { _ = try fault.value(forKey: "name") }
        let error = try #require(throws: ArborError.self) { try stack.coordinator.remove(store) }
        #expect(error.code == .misuse)
        // Added again, it works as before.
        try stack.coordinator.addNativeStore(at: path)
        #expect(try Self.names(at: path) == ["D0", "D1", "D2"])
    }

    @Test("a container closes: every store's file closed, and loading opens them again")
    func containerCloses() throws {
        let directory = try temporaryDirectory()
        let container = PersistentContainer(name: "Closing", managedObjectModel: try employeeModel())
        container.persistentStoreDescriptions = [PersistentStoreDescription(url: URL(fileURLWithPath: directory + "/a.arbor")),
                                                 PersistentStoreDescription(url: URL(fileURLWithPath: directory + "/b.arbor"))]
        try container.loadPersistentStores()
        #expect(Self.openDescriptors(directory + "/a.arbor") > 0 && Self.openDescriptors(directory + "/b.arbor") > 0)
        container.close()
        #expect(container.persistentStoreCoordinator.persistentStores.isEmpty)
        #expect(Self.openDescriptors(directory + "/a.arbor") == 0 && Self.openDescriptors(directory + "/b.arbor") == 0)
        try container.loadPersistentStores()
        #expect(container.persistentStoreCoordinator.persistentStores.count == 2)
    }

    @Test("destroying a store removes it from the coordinator and deletes its files; a connection still open reads an empty database; a file that is not there is nothing to destroy")
    func destroy() throws {
        let path = try temporaryDirectory() + "/destroyed.arbor"
        let (stack, _) = try Self.departments(at: path, 3)
        let other = try Database(path: path)
        defer { other.close() }
        try stack.coordinator.destroyPersistentStore(at: URL(fileURLWithPath: path))
        #expect(stack.coordinator.persistentStores.isEmpty)
        for file in [path, path + "-journal"] { #expect(!FileManager.default.fileExists(atPath: file), "\(file)") }
        #expect(try other.read { try $0.trees() }.isEmpty, "the open connection reads an empty database")
        #expect(Self.openDescriptors(path) <= 1)
        try stack.coordinator.destroyPersistentStore(at: URL(fileURLWithPath: path))
        // A file of something else is refused and left alone.
        let foreign = try temporaryDirectory() + "/foreign.txt"
        try Data("not a database".utf8).write(to: URL(fileURLWithPath: foreign))
        #expect(throws: ArborError.self) { try stack.coordinator.destroyPersistentStore(at: URL(fileURLWithPath: foreign)) }
        #expect(FileManager.default.fileExists(atPath: foreign))
    }

    @Test("replacing a store with its backup restores the backup's objects, its IDs holding; a missing destination is made as a copy")
    func replaceWithBackup() throws {
        let directory = try temporaryDirectory()
        let (path, backup, copy) = (directory + "/live.arbor", directory + "/backup.arbor", directory + "/copy.arbor")
        let (stack, ids) = try Self.departments(at: path, 3)
        let store = try #require(stack.coordinator.persistentStores.first as? NativeStore)
        try store.backup(to: backup)
        let context = stack.context()
        context.delete(try context.existingObject(with: ids[0]))
        let later = try stack.insert("Department", in: context, ["name": "Later", "budget": Int32(9)])
        try context.save()
        // A row cached now must not outlive the restore (the restored store has the same IDs).
        let holder = stack.context()
        let held = try holder.existingObject(with: ids[1])
        try held.setValue(Int32(77), forKey: "budget")
        try holder.save()
        #expect(try Self.names(at: path) == ["D1", "D2", "Later"])
        try stack.coordinator.replacePersistentStore(at: URL(fileURLWithPath: path), withPersistentStoreFrom: URL(fileURLWithPath: backup))
        #expect(stack.coordinator.persistentStores.isEmpty, "the coordinator's store at the destination was removed")
        try stack.coordinator.addNativeStore(at: path)
        #expect(try Self.names(at: path) == ["D0", "D1", "D2"])
        let restored = stack.context()
        #expect(try restored.existingObject(with: ids[0]).value(forKey: "name") as? String == "D0", "the backup's IDs are the store's")
        #expect(try restored.existingObject(with: ids[1]).value(forKey: "budget") as? Int32 == 1, "read afresh, not the cached 77")
        #expect(throws: ArborError.self) { _ = try restored.existingObject(with: later.objectID) }
        try stack.coordinator.replacePersistentStore(at: URL(fileURLWithPath: copy), withPersistentStoreFrom: URL(fileURLWithPath: backup))
        #expect(try Self.names(at: copy) == ["D0", "D1", "D2"])
    }

    @Test("moving an in-memory store to a file: the objects are there, their IDs valid in the same contexts, the old store out; an existing file is refused")
    func migrateToFile() throws {
        let stack = try Stack()
        let context = stack.context()
        let ada = try stack.insert("Department", in: context, ["name": "Engines", "budget": Int32(1)])
        try context.save()
        let memory = try #require(stack.coordinator.persistentStores.first)
        let path = try temporaryDirectory() + "/moved.arbor"
        let moved = try stack.coordinator.migratePersistentStore(memory, to: URL(fileURLWithPath: path))
        #expect(stack.coordinator.persistentStores.count == 1 && stack.coordinator.persistentStores.first === moved)
        #expect(moved.path == path && moved.identifier == memory.identifier)
        let reader = stack.context()
        #expect(try reader.existingObject(with: ada.objectID).value(forKey: "name") as? String == "Engines")
        _ = try stack.insert("Department", in: reader, ["name": "Boilers", "budget": Int32(2)])
        try reader.save()
        #expect(try Self.names(at: path) == ["Engines", "Boilers"])
        let error = try #require(throws: ArborError.self) { try stack.coordinator.migratePersistentStore(moved, to: URL(fileURLWithPath: path)) }
        #expect(error.code == .storeOpen)
        #expect(stack.coordinator.persistentStores.first === moved, "still in place")
    }

    @Test("backup and compaction of a store another process is saving to: every save of the other process lands, each backup opens with a prefix of them, the store stays sound")
    func anotherProcessSaving() async throws {
        let path = try temporaryDirectory() + "/shared.arbor"
        _ = try Self.departments(at: path, 200)
        do {
            let (stack, _) = (try Stack(path: path), ())
            let context = stack.context()
            try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Department", format: "budget >= 50")))
        }
        let saves = 60
        // A handshake through marker files: after each of these saves the other process waits
        // until this one starts a backup, then saves on while the backup and the compaction run.
        let landed = [10, 25, 40, 55]
        /// The path of the marker file `name`.
        @Sendable func marker(_ name: String) -> String { path + "." + name }
        async let other = #expect(processExitsWith: .success) { [path = path as String, saves = saves as Int, landed = landed as [Int]] in
            let stack = try! Stack(path: path)
            for i in 1...saves {
                let context = stack.context()
                _ = try! stack.insert("Department", in: context, ["name": "P\(i - 1)", "budget": Int32(1000 + i)])
                try! context.save()
                guard landed.contains(i) else { continue }
                _ = FileManager.default.createFile(atPath: "\(path).saved-\(i)", contents: Data())
                let deadline = Date().addingTimeInterval(600)
                while !FileManager.default.fileExists(atPath: "\(path).started-\(i)") {
                    guard Date() < deadline else { exit(3) }
                    usleep(1_000)
                }
            }
        }
        let stack = try Stack(path: path)
        let store = try #require(stack.coordinator.persistentStores.first as? NativeStore)
        // This side of the handshake runs on a thread of its own: the test's task shares the
        // cooperative pool with every other test, which may keep it waiting for minutes, while
        // the other process waits on it. (The waits are bounded, generously: a child process
        // of a loaded run can be slow to start.)
        let backups: [String] = try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result {
                    var backups: [String] = []
                    for (round, count) in landed.enumerated() {
                        let deadline = Date().addingTimeInterval(600)
                        while !FileManager.default.fileExists(atPath: marker("saved-\(count)")) {
                            guard Date() < deadline else { throw ArborError(.misuse, "the other process did not make \(count) saves") }
                            usleep(1_000)
                        }
                        _ = FileManager.default.createFile(atPath: marker("started-\(count)"), contents: Data())
                        let backup = path + ".backup-\(round)"
                        try store.backup(to: backup)
                        backups.append(backup)
                        try store.compact()
                    }
                    return backups
                })
            }
        }
        _ = await other
        #expect(try stack.context().count(for: FetchRequest<Int>(entityName: "Department", format: "name BEGINSWITH 'P'")) == saves)
        let database = try Database(path: path)
        #expect(try database.checkIntegrity().isSound)
        database.close()
        var seen: [Int] = []
        for backup in backups {
            let names = try Self.names(at: backup)
            let saved = names.filter { $0.hasPrefix("P") }.compactMap { Int($0.dropFirst()) }.sorted()
            #expect(saved == Array(0..<saved.count), "a backup holds a prefix of the other process's saves: \(saved)")
            #expect(names.filter { $0.hasPrefix("D") }.count == 50)
            seen.append(saved.count)
        }
        #expect(zip(seen, landed).allSatisfy { $0 >= $1 }, "each backup holds at least the saves made before it started: \(seen)")
        print("backups while another process saves: \(seen) of \(saves) saves")
    }
}
