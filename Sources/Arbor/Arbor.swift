@_exported import ArborStore

/// Arbor: Core Data's object-graph programming model on the ArborStore engine.
///
/// Models, managed objects, contexts, the coordinator and the stores are here; fetch requests,
/// merging, concurrency and undo follow. The module re-exports the engine.
public enum ArborLibrary {
    /// The library's version.
    public static let version = "0.1.0"

    /// The on-disk format versions this build reads and writes.
    public static var formatVersions: (read: UInt16, write: UInt16) {
        (DatabaseHeader.currentReadVersion, DatabaseHeader.currentWriteVersion)
    }
}
