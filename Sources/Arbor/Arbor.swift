@_exported import ArborStore

/// Arbor: Core Data's object-graph programming model on the ArborStore engine.
///
/// Models, managed objects, contexts on private and main queues, the coordinator with its row
/// cache, the native and in-memory stores, fetch requests, notifications and merging, parent
/// contexts, merge policies and undo. The module re-exports the engine.
public enum ArborLibrary {
    /// The library's version.
    public static let version = "0.2.0"

    /// The on-disk format versions this build reads and writes.
    public static var formatVersions: (read: UInt16, write: UInt16) {
        (DatabaseHeader.currentReadVersion, DatabaseHeader.currentWriteVersion)
    }
}
