import ArborStore
import Foundation

/// A store's lifecycle: taking a store out and closing its file, destroying, replacing and moving
/// store files, backup and compaction (docs/store-lifecycle.md).
extension PersistentStoreCoordinator {
    /// Takes `store` out of the coordinator and closes its file (Core Data's `remove(_:)`). The
    /// coordinator saves nothing more to it and forgets its rows; contexts' objects of the store
    /// can no longer load what they do not hold, and a save of their changes fails. Add the store
    /// again (a new store object) to go on with it.
    ///
    /// - Throws: ``ArborError/Code/misuse`` when the store is not one of the coordinator's.
    public func remove(_ store: any PersistentStore) throws {
        try locked {
            guard let index = persistentStoresIndex(of: store) else {
                throw ArborError(.misuse, "the store \(store.identifier) (\(store.path ?? store.type)) is not one of the coordinator's")
            }
            removeStore(at: index)
            forgetRows(of: store.identifier)
        }
        store.close()
        logger.debug("removed a store", metadata: ["arbor.store": "\(store.identifier)", "arbor.path": "\(store.path ?? store.type)"])
    }

    /// Deletes the store file at `url` and the files that go with it (its journal, what an
    /// interrupted compaction or migration left), Core Data's `destroyPersistentStore(at:)`. A
    /// store of this coordinator at `url` is removed first. The file is emptied in one write
    /// transaction before it is deleted, so that other connections and processes that still have
    /// it open read an empty database, never a half-deleted one; what they write after that is
    /// lost with the file. A file that is not there is nothing to destroy.
    ///
    /// - Throws: ``ArborError/Code/storeOpen`` when the file is not a database (it is left
    ///   alone) or cannot be written (busy, read-only, I/O).
    public func destroyPersistentStore(at url: URL, options: DatabaseOptions = DatabaseOptions()) throws {
        let path = url.path
        try removeStores(at: path)
        guard try options.fileSystem.exists(path) else { return }
        try NativeStore.storeError("destroy the store at \(path)", code: .storeOpen) {
            var writable = options
            writable.readOnly = false
            writable.create = false
            let database = try Database(path: path, options: writable)
            defer { database.close() }
            try database.erase()
        }
        for file in NativeStore.files(of: path) where try options.fileSystem.exists(file) { try options.fileSystem.delete(file) }
        logger.debug("destroyed a store", metadata: ["arbor.path": "\(path)"])
    }

    /// Replaces the store file at `destination` with a copy of the one at `source`, Core Data's
    /// `replacePersistentStore(at:withPersistentStoreFrom:)`: restoring a backup, say. An existing
    /// destination's contents are replaced in one write transaction (other connections keep it
    /// open and see the new contents; a power cut leaves the old or the new); a missing one is
    /// made as a backup of `source`. A store of this coordinator at `destination` is removed
    /// first: add it again to use the new contents.
    ///
    /// - Throws: ``ArborError/Code/storeOpen`` when `source` is not a sound database, has another
    ///   page size than the destination, or either file cannot be read or written.
    public func replacePersistentStore(at destination: URL, destinationOptions: DatabaseOptions = DatabaseOptions(),
                                       withPersistentStoreFrom source: URL, sourceOptions: DatabaseOptions = DatabaseOptions()) throws {
        try removeStores(at: destination.path)
        try NativeStore.storeError("replace the store at \(destination.path) with \(source.path)", code: .storeOpen) {
            if try destinationOptions.fileSystem.exists(destination.path) {
                var writable = destinationOptions
                writable.create = false
                let database = try Database(path: destination.path, options: writable)
                defer { database.close() }
                try database.replaceContents(withContentsOf: source.path, options: sourceOptions)
            } else {
                var reading = sourceOptions
                reading.readOnly = true
                reading.create = false
                let database = try Database(path: source.path, options: reading)
                defer { database.close() }
                try database.backup(to: destination.path, fileSystem: destinationOptions.fileSystem)
            }
        }
    }

    /// Moves `store` to a new file at `url` (Core Data's `migratePersistentStore(_:to:)`): a
    /// consistent copy is made there (an in-memory store's too), opened as a native store in
    /// the old one's place, and the old one taken out and closed. Object IDs stay valid: the new
    /// store has the old one's identifier. Returns the new store.
    ///
    /// - Throws: ``ArborError/Code/misuse`` for a store that is not one of the coordinator's or
    ///   not a native store; ``ArborError/Code/storeOpen`` when `url` exists or the copy cannot
    ///   be made or opened (the old store is then still in place).
    @discardableResult
    public func migratePersistentStore(_ store: any PersistentStore, to url: URL, options: DatabaseOptions = DatabaseOptions()) throws -> NativeStore {
        guard locked({ persistentStoresIndex(of: store) }) != nil else {
            throw ArborError(.misuse, "the store \(store.identifier) is not one of the coordinator's")
        }
        guard let native = store as? any BackupSource else {
            throw ArborError(.misuse, "the store \(store.identifier) is a \(store.type) store: only native stores can be moved to a file")
        }
        // Under the lock: no save of this coordinator lands in the old store after the copy.
        let moved: NativeStore = try locked {
            guard let index = persistentStoresIndex(of: store) else {
                throw ArborError(.misuse, "the store \(store.identifier) was taken out of the coordinator while it was being moved")
            }
            try native.backup(to: url.path, fileSystem: options.fileSystem)
            let moved: NativeStore
            do {
                moved = try NativeStore(path: url.path, model: managedObjectModel, configuration: store.configurationName, options: options)
            } catch {
                try? options.fileSystem.delete(url.path)
                throw error
            }
            replaceStore(at: index, with: moved)
            return moved
        }
        store.close()
        observer.added(moved, model: managedObjectModel)
        return moved
    }

    /// The place of `store` among the stores (call with the lock held).
    func persistentStoresIndex(of store: any PersistentStore) -> Int? {
        stores.firstIndex { $0 === store }
    }

    /// Takes the store at `index` out (call with the lock held).
    func removeStore(at index: Int) {
        stores.remove(at: index)
    }

    /// Puts `store` in the place of the store at `index` (call with the lock held).
    func replaceStore(at index: Int, with store: any PersistentStore) {
        stores[index] = store
    }

    /// Takes out and closes every store of the coordinator whose file is `path`.
    private func removeStores(at path: String) throws {
        for store in persistentStores where store.path == path { try remove(store) }
    }
}
