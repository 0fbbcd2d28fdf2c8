import ArborStore

/// Backup and compaction of a native store's file (docs/store-lifecycle.md), through the engine's
/// (docs/commit-protocol.md, "Replacing a file's contents: compaction and restore"
/// and "Online backup").
extension NativeStore: BackupSource {
    /// Copies the store into a new file at `path` while other contexts, connections and
    /// processes read and write it: a consistent copy of one commit, itself a store that opens
    /// with the same model (and has the same identifier: its objects' IDs hold in it).
    ///
    /// - Throws: ``ArborError/Code/storeOpen`` when `path` exists or the copy cannot be made
    ///   (nothing is left at `path` then).
    @discardableResult
    public func backup(to path: String) throws -> Database.BackupReport {
        try Self.storeError("back up \(self.path ?? "the store") to \(path)", code: .storeOpen) { try database.backup(to: path) }
    }

    func backup(to path: String, fileSystem: (any FileSystem)?) throws {
        try Self.storeError("copy \(self.path ?? "the store") to \(path)", code: .storeOpen) { _ = try database.backup(to: path, fileSystem: fileSystem) }
    }

    /// Rewrites the store's file without its free pages (`Database.compact()`): smaller, with
    /// every object and link, in one write transaction that other connections wait for as for
    /// any save; a power cut leaves the file as it was or compacted.
    ///
    /// - Throws: ``ArborError/Code/storeSave`` when the engine fails (the file is as it was).
    @discardableResult
    public func compact() throws -> Database.CompactionReport {
        try Self.storeError("compact \(path ?? "the store")", code: .storeSave) { try database.compact() }
    }

    /// The files that belong to a store at `path`: the file, its journal, and what an
    /// interrupted compaction or migration may have left.
    static func files(of path: String) -> [String] {
        [path, path + "-compact", path + ".migration-a", path + ".migration-b"].flatMap { [$0, $0 + "-journal"] }
    }
}
