@_exported import ArborStore

/// Arbor: Core Data's object-graph programming model on the ArborStore engine.
///
/// The object graph (model, managed objects, contexts, the coordinator) arrives in later
/// milestones; today the module re-exports the engine and names the library's version.
public enum ArborLibrary {
    /// The library's version.
    public static let version = "0.1.0"

    /// The on-disk format versions this build reads and writes.
    public static var formatVersions: (read: UInt16, write: UInt16) {
        (DatabaseHeader.currentReadVersion, DatabaseHeader.currentWriteVersion)
    }
}
