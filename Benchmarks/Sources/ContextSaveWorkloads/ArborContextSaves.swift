import Arbor
import CommitWorkloads

/// Concurrent saves on Arbor: `writers` private-queue contexts on one coordinator with one native
/// store (one file), each owning one `Counter` object. A save is one `performAndWait` block on
/// the writer's context: look the counter up by ID (a registry hit: the context retains its
/// objects), add one to its `value`, `save()` — one durable engine transaction.
///
/// Every object belongs to one context, so no save conflicts with another; the saves still pass
/// one at a time through the coordinator's lock, which is held across the store's transaction.
public final class ArborContextSaves: ConcurrentSaveWorkload, @unchecked Sendable {
    /// "Arbor".
    public let engine = "Arbor"
    /// See ``ConcurrentSaveWorkload/writers``.
    public let writers: Int
    let directory: ScratchDirectory
    let path: String
    let model: ManagedObjectModel
    let coordinator: PersistentStoreCoordinator
    let contexts: [ManagedObjectContext]
    let counters: [ManagedObjectID]

    /// The model: one entity with a name and a 64-bit counter.
    static func counterModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Counter") {
                Attribute("name", .string).required()
                Attribute("value", .integer64)
            }
        }
    }

    /// A native store in a new scratch directory, `writers` contexts on its coordinator, and one
    /// saved counter (value 0) per context.
    public init(writers: Int) throws {
        precondition(writers > 0, "at least one writer")
        self.writers = writers
        directory = try ScratchDirectory(prefix: "arbor-contexts")
        path = directory.path + "/contexts.arbor"
        do {
            let model = try Self.counterModel()
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addNativeStore(at: path)
            let entity = model.entity(named: "Counter")!
            let contexts = (0..<writers).map { _ in
                let context = ManagedObjectContext(concurrencyType: .privateQueue)
                context.persistentStoreCoordinator = coordinator
                context.retainsRegisteredObjects = true
                return context
            }
            counters = try contexts.enumerated().map { writer, context in
                try context.performAndWait {
                    let counter = ManagedObject(entity: entity, insertInto: context)
                    try counter.setValue("Counter \(writer)", forKey: "name")
                    try counter.setValue(Int64(0), forKey: "value")
                    try context.save()
                    return counter.objectID
                }
            }
            self.model = model
            self.coordinator = coordinator
            self.contexts = contexts
        } catch {
            directory.remove()
            throw error
        }
    }

    /// See ``ConcurrentSaveWorkload/fileSystemName``.
    public var fileSystemName: String { directory.fileSystemName }

    /// See ``ConcurrentSaveWorkload/save(writer:)``.
    public func save(writer: Int) throws {
        let context = contexts[writer]
        let id = counters[writer]
        try context.performAndWait {
            let counter = context.object(with: id)
            guard let value = try counter.value(forKey: "value") as? Int64 else {
                throw WorkloadError("Arbor: counter \(writer) has no value")
            }
            try counter.setValue(value + 1, forKey: "value")
            try context.save()
        }
    }

    /// Always 0: the writers' objects are disjoint, so no save meets a merge conflict (one would
    /// throw, under the default merge policy).
    public var retries: Int { 0 }

    /// See ``ConcurrentSaveWorkload/verify(savesPerWriter:)``: reads through a second coordinator
    /// on the same file, so the values come from the file, not from the first one's row cache.
    public func verify(savesPerWriter saves: Int) throws {
        let reader = PersistentStoreCoordinator(managedObjectModel: model)
        try reader.addNativeStore(at: path)
        let context = ManagedObjectContext(persistentStoreCoordinator: reader)
        for (writer, id) in counters.enumerated() {
            let value = try context.existingObject(with: id).value(forKey: "value") as? Int64
            guard value == Int64(saves) else {
                throw WorkloadError("Arbor: counter \(writer) holds \(value.map(String.init) ?? "nothing"), expected \(saves)")
            }
        }
    }

    /// See ``ConcurrentSaveWorkload/remove()``.
    public func remove() { directory.remove() }
}
