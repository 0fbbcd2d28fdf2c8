@_exported import ArborStore

/// Arbor: Core Data's object-graph programming model on the ArborStore engine.
///
/// The model layer (``ManagedObjectModel`` and its descriptions), object IDs and the error type are
/// here; managed objects, contexts and the coordinator follow. The module re-exports the engine.
public enum ArborLibrary {
    /// The library's version.
    public static let version = "0.1.0"

    /// The on-disk format versions this build reads and writes.
    public static var formatVersions: (read: UInt16, write: UInt16) {
        (DatabaseHeader.currentReadVersion, DatabaseHeader.currentWriteVersion)
    }
}
