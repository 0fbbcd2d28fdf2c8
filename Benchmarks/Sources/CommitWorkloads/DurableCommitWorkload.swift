/// Syncs (fsync/fdatasync system calls) an engine has made, by what they synced.
public struct SyncCounts: Sendable, Equatable {
    /// Syncs of the rollback journal.
    public var journal: UInt64 = 0
    /// Syncs of the database file.
    public var database: UInt64 = 0
    /// Syncs of the directory holding the files (after a journal was created).
    public var directory: UInt64 = 0
    /// Syncs of anything else (SQLite's WAL, super-journals or temporary files; none here).
    public var other: UInt64 = 0

    /// Creates counts.
    public init(journal: UInt64 = 0, database: UInt64 = 0, directory: UInt64 = 0, other: UInt64 = 0) {
        self.journal = journal
        self.database = database
        self.directory = directory
        self.other = other
    }

    /// All syncs together.
    public var total: UInt64 { journal + database + directory + other }

    /// The syncs made between `earlier` and `self`.
    public static func - (later: SyncCounts, earlier: SyncCounts) -> SyncCounts {
        SyncCounts(journal: later.journal - earlier.journal,
                   database: later.database - earlier.database,
                   directory: later.directory - earlier.directory,
                   other: later.other - earlier.other)
    }

    public static func + (a: SyncCounts, b: SyncCounts) -> SyncCounts {
        SyncCounts(journal: a.journal + b.journal, database: a.database + b.database,
                   directory: a.directory + b.directory, other: a.other + b.other)
    }
}

/// A stream of small durable commits on a real file: each ``commitOne()`` is one write transaction
/// that changes one page (Arbor) or one row (SQLite) and returns only once the commit is durable.
///
/// Workloads are not thread-safe: use one from one thread.
public protocol DurableCommitWorkload: AnyObject {
    /// The engine's name as printed in reports.
    var engine: String { get }
    /// The syncs the engine has made since the workload was opened (or, for SQLite, since the
    /// process-wide counter was last reset when the workload was opened).
    var syncs: SyncCounts { get }
    /// Commits one small durable transaction.
    func commitOne() throws
    /// Reads the last committed value back from the file; throws when it is not there.
    func verify() throws
    /// Closes the database and removes its scratch directory.
    func close()
}
