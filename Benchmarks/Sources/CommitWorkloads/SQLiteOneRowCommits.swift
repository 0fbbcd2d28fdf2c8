import CSQLite
import SQLiteSyncCounter

/// SQLite's durable one-row commit: one autocommit `UPDATE` of one row, with
/// `page_size=4096`, `journal_mode=DELETE`, `synchronous=FULL`, through a VFS that wraps the
/// default unix VFS and counts its syncs (see `SQLiteSyncCounter.h`).
///
/// Each commit creates the journal (original images of page 1 and the table's page), syncs it,
/// writes the record count into its header and syncs it again, writes and syncs the database,
/// and deletes the journal. The unix VFS syncs the directory inside the first sync of every
/// newly created journal: four syncs in all.
public final class SQLiteOneRowCommits: DurableCommitWorkload {
    public let engine: String
    /// The name the counting VFS is registered under.
    public static let vfsName = "arbor-sync-counter"
    /// The directory holding the database (and, during a commit, its journal).
    public let directory: ScratchDirectory
    /// The database file's path.
    public let path: String
    private var db: OpaquePointer?
    private var update: OpaquePointer?
    private(set) var counter: Int64 = 0
    private let baseline: SyncCounts

    /// Creates the database with one table holding one row (an integer and a 100-byte blob).
    public init(pageSize: Int = 4096) throws {
        engine = "SQLite " + String(cString: sqlite3_libversion())
        let registered = arbor_sqlite_sync_counter_register(Self.vfsName, 0)
        guard registered == SQLITE_OK else {
            throw WorkloadError("SQLite: cannot register the counting VFS (result \(registered))")
        }
        directory = try ScratchDirectory(prefix: "sqlite-commits")
        path = directory.path + "/commits.sqlite"
        baseline = Self.counts()
        do {
            let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
            try check(sqlite3_open_v2(path, &db, flags, Self.vfsName), "open \(path)")
            try execute("""
                PRAGMA page_size=\(pageSize);
                PRAGMA journal_mode=DELETE;
                PRAGMA synchronous=FULL;
                CREATE TABLE counters(id INTEGER PRIMARY KEY, value INTEGER NOT NULL, payload BLOB NOT NULL);
                INSERT INTO counters VALUES (1, 0, zeroblob(100));
                """)
            let settings = (try integer("PRAGMA page_size"), try text("PRAGMA journal_mode"), try integer("PRAGMA synchronous"))
            guard settings == (Int64(pageSize), "delete", 2) else {
                throw WorkloadError("SQLite: settings are page_size=\(settings.0) journal_mode=\(settings.1) synchronous=\(settings.2), expected \(pageSize), delete, 2 (FULL)")
            }
            try check(sqlite3_prepare_v2(db, "UPDATE counters SET value = ?1 WHERE id = 1", -1, &update, nil), "prepare the UPDATE")
        } catch {
            sqlite3_close_v2(db)
            directory.remove()
            throw error
        }
    }

    /// One autocommit `UPDATE` of the row.
    public func commitOne() throws {
        counter &+= 1
        sqlite3_bind_int64(update, 1, counter)
        let rc = sqlite3_step(update)
        sqlite3_reset(update)
        guard rc == SQLITE_DONE else { throw failure(rc, "UPDATE") }
    }

    /// The counting VFS's counts since this workload was opened (the counter is process-wide:
    /// only one SQLite workload is open at a time).
    public var syncs: SyncCounts { Self.counts() - baseline }

    static func counts() -> SyncCounts {
        let counts = arbor_sqlite_sync_counter_read()
        return SyncCounts(journal: counts.journal, database: counts.database,
                          directory: counts.directory, other: counts.other)
    }

    /// Whether the wrapper can see the unix VFS's directory syncs.
    public static var countsDirectorySyncs: Bool { arbor_sqlite_sync_counter_read().directoryCounted != 0 }

    /// Reads the row back through a fresh connection.
    public func verify() throws {
        var reader: OpaquePointer?
        defer { sqlite3_close_v2(reader) }
        try check(sqlite3_open_v2(path, &reader, SQLITE_OPEN_READONLY, Self.vfsName), "open \(path) to verify")
        let value = try integer("SELECT value FROM counters WHERE id = 1", on: reader)
        guard value == counter else {
            throw WorkloadError("SQLite: the row holds \(value), expected \(counter)")
        }
    }

    public func close() {
        sqlite3_finalize(update)
        update = nil
        sqlite3_close_v2(db)
        db = nil
        directory.remove()
    }

    // MARK: Helpers (on this workload's connection)

    private func failure(_ rc: Int32, _ what: String) -> WorkloadError { SQLite.failure(rc, db, what) }
    private func check(_ rc: Int32, _ what: String) throws { try SQLite.check(rc, db, what) }
    private func execute(_ sql: String) throws { try SQLite.execute(db, sql) }
    private func integer(_ sql: String, on connection: OpaquePointer? = nil) throws -> Int64 { try SQLite.integer(connection ?? db, sql) }
    private func text(_ sql: String) throws -> String { try SQLite.text(db, sql) }
}
