import Foundation

extension EntityDescription {
    /// Makes an object of the entity named `entityName` and inserts it into `context`, as Core
    /// Data's `NSEntityDescription.insertNewObject(forEntityName:into:)` does: the object is an
    /// instance of the entity's ``managedObjectClass``, its attributes take their default values,
    /// ``ManagedObject/awakeFromInsert()`` runs, and it is saved by the context's next save.
    ///
    /// The entity is looked up in the model of the context's coordinator. Core Data raises an
    /// exception for a name the model does not have; this throws instead, because entity names
    /// often come from data (a file being imported, a command line) rather than from code, and
    /// such input must not stop the program. Where the name is a literal, `try!` states that it
    /// is known, or make the object with `Employee(context:)` or
    /// ``ManagedObject/init(entity:insertInto:)``.
    ///
    /// ```swift
    /// let book = try EntityDescription.insertNewObject(forEntityName: "Book", into: context)
    /// try book.setValue("Dune", forKey: "title")
    /// try context.save()
    /// ```
    ///
    /// - Throws: ``ArborError/Code/unknownEntity`` when the model has no entity `entityName`;
    ///   ``ArborError/Code/abstractEntity`` when the entity is abstract (only its sub-entities
    ///   have instances); ``ArborError/Code/misuse`` when the context has no coordinator.
    ///   Nothing is inserted then.
    public static func insertNewObject(forEntityName entityName: String, into context: ManagedObjectContext) throws -> ManagedObject {
        guard let model = context.persistentStoreCoordinator?.managedObjectModel else {
            throw ArborError(.misuse, "the context has no persistent store coordinator, so no model to find \(entityName) in", entity: entityName)
        }
        guard let entity = model.entity(named: entityName) else {
            let names = model.entities.map(\.name).sorted().joined(separator: ", ")
            throw ArborError(.unknownEntity, "the model has no entity \(entityName) (its entities: \(names))", entity: entityName)
        }
        guard !entity.isAbstract else {
            throw ArborError(.abstractEntity, "\(entityName) is abstract: only its sub-entities have instances", entity: entityName)
        }
        return entity.managedObjectClass.init(entity: entity, insertInto: context)
    }
}
