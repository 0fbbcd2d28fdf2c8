import ArborStore
import Foundation

/// Where and how a ``PersistentContainer`` opens one store (Core Data's
/// `NSPersistentStoreDescription`).
public struct PersistentStoreDescription: Sendable, CustomStringConvertible {
    /// The kinds of store a container opens.
    public enum StoreType: String, Sendable, Hashable {
        /// A native store file (``NativeStore``).
        case native
        /// The engine over memory: gone when the coordinator goes.
        case inMemory
    }

    /// The kind of store.
    public var type: StoreType
    /// The store file (ignored for ``StoreType/inMemory``).
    public var url: URL?
    /// The model configuration whose entities the store holds (nil: every entity).
    public var configuration: String?
    /// The engine's options for the file (page size, cache size, compression, busy timeout).
    public var options: DatabaseOptions
    /// Whether a store made with another model migrates to the container's model when it opens
    /// (true, as in Core Data; docs/migration.md).
    public var shouldMigrateStoreAutomatically = true
    /// Whether that migration may be inferred from the two models (true, as in Core Data).
    public var shouldInferMappingModelAutomatically = true

    /// The versions of the model and the stages between them, for a store made by an earlier
    /// version (nil: inferred from the store's model alone; docs/migration.md, "Staged and custom
    /// migration"). Its last version must be the container's model.
    public var migrationPlan: MigrationPlan?

    /// Whether the store records persistent history (false by default; Core Data's
    /// `NSPersistentHistoryTrackingKey`): every save and batch request then records its
    /// transaction and its changes, with their old and new values (docs/history.md). A store
    /// that records history opens for writing only with this set, or with
    /// ``dropsPersistentHistory``.
    public var persistentHistoryTracking = false

    /// Whether opening the store deletes the persistent history it records and stops recording
    /// (false by default; ignored when ``persistentHistoryTracking`` is set).
    public var dropsPersistentHistory = false

    /// The two history flags together.
    var historyTracking: PersistentHistoryTracking {
        persistentHistoryTracking ? .on : dropsPersistentHistory ? .dropRecorded : .off
    }

    /// The two migration flags and the plan together.
    public var migrationOptions: MigrationOptions {
        var migration = MigrationOptions()
        migration.shouldMigrateStoreAutomatically = shouldMigrateStoreAutomatically
        migration.shouldInferMappingModelAutomatically = shouldInferMappingModelAutomatically
        migration.plan = migrationPlan
        return migration
    }

    /// A native store at `url`.
    public init(url: URL, configuration: String? = nil, options: DatabaseOptions = DatabaseOptions()) {
        type = .native
        self.url = url
        self.configuration = configuration
        self.options = options
    }

    /// A store of `type` (an in-memory store needs no URL).
    public init(type: StoreType, url: URL? = nil, configuration: String? = nil, options: DatabaseOptions = DatabaseOptions()) {
        self.type = type
        self.url = url
        self.configuration = configuration
        self.options = options
    }

    public var description: String {
        type == .inMemory ? "in-memory store" : "native store at \(url?.path ?? "?")"
    }
}

/// The stack in one object (Core Data's `NSPersistentContainer`): a model, a coordinator, its
/// stores, a main-queue ``viewContext`` for the user interface, and private-queue contexts for
/// background work.
///
/// ```swift
/// let container = PersistentContainer(name: "Employees", managedObjectModel: model)
/// try container.loadPersistentStores()
/// try await container.performBackgroundTask { context in
///     let ada = Employee(context: context)
///     ada.firstName = "Ada"
///     try context.save()                 // the viewContext merges it
/// }
/// ```
public final class PersistentContainer: @unchecked Sendable {
    /// The container's name: the default store file is `<name>.arbor` in
    /// ``defaultDirectoryURL()``.
    public let name: String
    /// The model.
    public let managedObjectModel: ManagedObjectModel
    /// The coordinator every context of the container uses.
    public let persistentStoreCoordinator: PersistentStoreCoordinator
    /// The stores ``loadPersistentStores()`` opens (by default one native store file). Change
    /// them before loading.
    public var persistentStoreDescriptions: [PersistentStoreDescription] {
        get { lock.withLock { descriptions } }
        set { lock.withLock { descriptions = newValue } }
    }
    /// The main-queue context, for the user interface: it merges the saves of the container's
    /// other contexts automatically (``ManagedObjectContext/automaticallyMergesChangesFromParent``),
    /// in blocks on the main queue — which the application must drain (a run loop, `dispatch_main()`,
    /// or an `async` main), or merges wait.
    public let viewContext: ManagedObjectContext

    private let lock = NSLock()
    private var descriptions: [PersistentStoreDescription]

    /// The directory default store files go to: `$ARBOR_STORE_DIRECTORY` when set, else the
    /// user's application-support directory (`~/.local/share` on Linux) under `Arbor`.
    public static func defaultDirectoryURL() -> URL {
        if let path = ProcessInfo.processInfo.environment["ARBOR_STORE_DIRECTORY"], !path.isEmpty {
            return URL(fileURLWithPath: path, isDirectory: true)
        }
        let base = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? FileManager.default.temporaryDirectory
        return base.appendingPathComponent("Arbor", isDirectory: true)
    }

    /// A container for `model`, with one native store at `<defaultDirectoryURL>/<name>.arbor`
    /// (not opened until ``loadPersistentStores()``), logging and counting through
    /// `observability` (docs/observability.md).
    public init(name: String, managedObjectModel: ManagedObjectModel, observability: ObjectGraphObservability = ObjectGraphObservability()) {
        self.name = name
        self.managedObjectModel = managedObjectModel
        persistentStoreCoordinator = PersistentStoreCoordinator(managedObjectModel: managedObjectModel, observability: observability)
        descriptions = [PersistentStoreDescription(url: Self.defaultDirectoryURL().appendingPathComponent("\(name).arbor"))]
        // Set up directly: the container may be made off the main thread, with the main queue
        // not drained yet (a server's main thread starts its loop later).
        viewContext = ManagedObjectContext(concurrencyType: .mainQueue, coordinator: persistentStoreCoordinator,
                                           name: "\(name).viewContext", mergesAutomatically: true)
    }

    /// Opens every store of ``persistentStoreDescriptions`` (creating files and their
    /// directories when missing) and adds it to the coordinator.
    ///
    /// - Throws: the first store's failure (``ArborError/Code/storeOpen``,
    ///   ``ArborError/Code/incompatibleModel``, …); the stores opened before it stay open.
    public func loadPersistentStores() throws {
        for description in persistentStoreDescriptions {
            try load(description)
        }
    }

    /// Closes the container: every store is taken out of the coordinator and its file closed
    /// (``PersistentStoreCoordinator/remove(_:)``). Its contexts' objects can no longer load
    /// what they do not hold, and saves fail: keep object IDs, not objects, across a close.
    /// ``loadPersistentStores()`` opens the stores again.
    public func close() {
        for store in persistentStoreCoordinator.persistentStores { try? persistentStoreCoordinator.remove(store) }
    }

    /// Opens every store of ``persistentStoreDescriptions``, calling `completion` once per store
    /// with its description and its failure, if any (Core Data's form).
    public func loadPersistentStores(completionHandler completion: (PersistentStoreDescription, (any Error)?) -> Void) {
        for description in persistentStoreDescriptions {
            do {
                try load(description)
                completion(description, nil)
            } catch {
                completion(description, error)
            }
        }
    }

    private func load(_ description: PersistentStoreDescription) throws {
        switch description.type {
        case .inMemory:
            try persistentStoreCoordinator.addInMemoryStore(configuration: description.configuration, history: description.historyTracking)
        case .native:
            guard let url = description.url else {
                throw ArborError(.misuse, "the native store description has no URL")
            }
            let directory = url.deletingLastPathComponent().path
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw ArborError(.storeOpen, "cannot create the directory \(directory) for \(url.path): \(error)")
            }
            try persistentStoreCoordinator.addNativeStore(at: url.path, configuration: description.configuration, options: description.options,
                                                          migration: description.migrationOptions, history: description.historyTracking)
        }
    }

    /// A new private-queue context on the container's coordinator (its saves reach the
    /// ``viewContext`` by automatic merging).
    public func newBackgroundContext() -> ManagedObjectContext {
        ManagedObjectContext(concurrencyType: .privateQueue, coordinator: persistentStoreCoordinator, name: "\(name).background",
                             mergesAutomatically: false)
    }

    /// Runs `body` on a new private-queue context, on that context's queue, and returns at once.
    public func performBackgroundTask(_ body: @escaping @Sendable (ManagedObjectContext) -> Void) {
        let context = newBackgroundContext()
        context.perform { body(context) }
    }

    /// Runs `body` on a new private-queue context, on that context's queue, and returns its value
    /// or rethrows its error.
    public func performBackgroundTask<T: Sendable, E: Error>(_ body: @escaping @Sendable (ManagedObjectContext) throws(E) -> T) async throws(E) -> T {
        let context = newBackgroundContext()
        return try await context.perform(schedule: .enqueued) { () throws(E) -> T in try body(context) }
    }
}
