import Arbor
import ArborStore

/// An object-graph store opened by a command without the application's code: the model the
/// store keeps (``ManagedObjectModel/stored(in:options:)``), a coordinator with the store, and
/// a context on it.
struct ObjectStore {
    let model: ManagedObjectModel
    let store: NativeStore
    let context: ManagedObjectContext

    /// Opens the store at `path`, which must exist (read-only, or to write to it).
    ///
    /// - Throws: ``ArborError/Code/storeOpen`` when it cannot be opened or keeps no model.
    init(path: String, readOnly: Bool) throws {
        var options = DatabaseOptions()
        options.readOnly = readOnly
        options.create = false
        options.busyTimeout = .seconds(5)
        model = try ManagedObjectModel.stored(in: path, options: options)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        store = try NativeStore(path: path, model: model, options: options)
        coordinator.addPersistentStore(store)
        context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    }

    /// The entities whose objects are exported: `name`'s and its sub-entities' (every entity's
    /// when nil), concrete ones only, in the model's order.
    ///
    /// - Throws: ``ArborError/Code/unknownEntity`` when the model has no entity `name`.
    func entities(named name: String?) throws -> [EntityDescription] {
        guard let name else { return model.entities.filter { !$0.isAbstract } }
        guard let entity = model.entity(named: name) else {
            throw ArborError(.unknownEntity, "the model has no entity \(name) (its entities: \(model.entities.map(\.name).joined(separator: ", ")))",
                             entity: name)
        }
        let members = Set(entity.selfAndDescendants.map(ObjectIdentifier.init))
        return model.entities.filter { !$0.isAbstract && members.contains(ObjectIdentifier($0)) }
    }

    /// The number of objects of each entity that has any (concrete entities, by name).
    func objectCounts() throws -> [(entity: String, count: Int)] {
        var counts: [(entity: String, count: Int)] = []
        for entity in model.entities where !entity.isAbstract {
            var request = FetchRequest<ManagedObjectID>(entityName: entity.name)
            request.includesSubentities = false
            let count = try context.count(for: request)
            if count > 0 { counts.append((entity.name, count)) }
        }
        return counts
    }

    /// What a record holds of an entity's objects: its stored attributes and its relationships.
    static func recordedProperties(of entity: EntityDescription) -> (attributes: [AttributeDescription], relationships: [RelationshipDescription]) {
        (entity.attributes.filter { !$0.isTransient }, entity.relationships)
    }
}
