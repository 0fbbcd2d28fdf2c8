import ArborStore
import Foundation

extension ManagedObjectModel {
    /// The model a store was made with, read from its metadata: its entities, attributes,
    /// relationships, constraints and indexes (not defaults or classes, nor validation rules,
    /// which the schema keeps only in words, for migrations to compare: every
    /// object is a plain ``ManagedObject``, and transformable values read as their encoded
    /// `Data`). What `arbor query` uses to read a store without the application.
    ///
    /// - Throws: ``ArborError/Code/storeOpen`` when the file cannot be read, is not an Arbor
    ///   store, or was made before stores kept their schema.
    public static func stored(in path: String, options: DatabaseOptions = DatabaseOptions()) throws -> ManagedObjectModel {
        let bytes = try NativeStore.readingMetadata(at: path, options: options, "read the schema of \(path)") { metadata in
            try metadata.get(MetadataKey.schema)
        }
        guard let bytes else {
            throw ArborError(.storeOpen, "\(path) was made before Arbor stores kept their model's schema; open it with the application's model")
        }
        do {
            return try JSONDecoder().decode(ModelSchema.self, from: Data(bytes)).model()
        } catch let error as ArborError {
            throw error
        } catch {
            throw ArborError(.storeOpen, "the schema stored in \(path) is unreadable: \(error)")
        }
    }
}
