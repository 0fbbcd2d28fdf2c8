import CSQLite
import CommitWorkloads

/// Concurrent saves on SQLite through its C API: `writers` threads on one database file, each
/// updating its own row of `counters(id, name, value)` with one autocommit
/// `UPDATE counters SET value = value + 1 WHERE id = ?` (a prepared statement) per save, with
/// Arbor's durability: `journal_mode=DELETE` (a rollback journal, no WAL), `synchronous=FULL`,
/// page size 4096, as in `SQLiteOneRowCommits`.
///
/// Two ways of sharing the file:
/// - ``Sharing/connectionPerWriter``: one connection per writer (`SQLITE_OPEN_NOMUTEX`, each used
///   by its thread alone), `busy_timeout=10000`: writers wait for one another through the file's
///   locks and SQLite's busy handler, which sleeps (1, 2, 5, 10… ms) between attempts.
/// - ``Sharing/oneConnection``: one connection for every writer, opened `SQLITE_OPEN_FULLMUTEX`
///   (each writer has its own prepared statement on it): writers wait on the connection's mutex,
///   held for a whole `sqlite3_step` — the arrangement closest to Arbor's coordinator.
public final class SQLiteConnectionSaves: ConcurrentSaveWorkload, @unchecked Sendable {
    /// How the writers reach the file.
    public enum Sharing: Sendable {
        /// A connection per writer.
        case connectionPerWriter
        /// One serialised connection for all the writers.
        case oneConnection
    }

    /// The busy timeout of every connection, in milliseconds.
    public static let busyTimeout: Int32 = 10_000

    /// "SQLite 3.x.y, N connections" or "SQLite 3.x.y, one connection".
    public let engine: String
    /// See ``ConcurrentSaveWorkload/writers``.
    public let writers: Int
    /// How the writers share the file.
    public let sharing: Sharing
    let directory: ScratchDirectory
    let path: String
    private var connections: [OpaquePointer?] = []
    private let slots: [WriterSlot]

    /// One writer's statement and counter: touched only by that writer's thread.
    private final class WriterSlot {
        let connection: OpaquePointer?
        var update: OpaquePointer?
        var retries = 0

        init(connection: OpaquePointer?) { self.connection = connection }
    }

    /// A database in a new scratch directory with one row per writer (value 0), and the writers'
    /// connections and statements.
    public init(writers: Int, sharing: Sharing = .connectionPerWriter) throws {
        precondition(writers > 0, "at least one writer")
        self.writers = writers
        self.sharing = sharing
        let version = String(cString: sqlite3_libversion())
        engine = "SQLite \(version), " + (sharing == .oneConnection ? "one connection" : "\(writers) connection\(writers == 1 ? "" : "s")")
        directory = try ScratchDirectory(prefix: "sqlite-connections")
        path = directory.path + "/contexts.sqlite"
        var slots: [WriterSlot] = []
        do {
            let opened = sharing == .oneConnection ? 1 : writers
            let mutex = sharing == .oneConnection ? SQLITE_OPEN_FULLMUTEX : SQLITE_OPEN_NOMUTEX
            for index in 0..<opened {
                var db: OpaquePointer?
                let rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | mutex, nil)
                connections.append(db)
                try SQLite.check(rc, db, "open \(path)")
                sqlite3_busy_timeout(db, Self.busyTimeout)
                try SQLite.execute(db, "PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL;")
                if index == 0 {
                    var rows = "PRAGMA page_size=4096; CREATE TABLE counters(id INTEGER PRIMARY KEY, name TEXT NOT NULL, value INTEGER NOT NULL);"
                    for writer in 0..<writers { rows += "INSERT INTO counters VALUES (\(writer + 1), 'Counter \(writer)', 0);" }
                    try SQLite.execute(db, rows)
                }
                let settings = (try SQLite.integer(db, "PRAGMA page_size"), try SQLite.text(db, "PRAGMA journal_mode"), try SQLite.integer(db, "PRAGMA synchronous"))
                guard settings == (4096, "delete", 2) else {
                    throw WorkloadError("SQLite: settings are page_size=\(settings.0) journal_mode=\(settings.1) synchronous=\(settings.2), expected 4096, delete, 2 (FULL)")
                }
            }
            for writer in 0..<writers {
                let slot = WriterSlot(connection: connections[sharing == .oneConnection ? 0 : writer])
                slots.append(slot)
                try SQLite.check(sqlite3_prepare_v2(slot.connection, "UPDATE counters SET value = value + 1 WHERE id = ?1", -1, &slot.update, nil),
                          slot.connection, "prepare the UPDATE")
                // The binding stays across resets.
                try SQLite.check(sqlite3_bind_int64(slot.update, 1, Int64(writer + 1)), slot.connection, "bind the row's key")
            }
        } catch {
            for slot in slots { sqlite3_finalize(slot.update) }
            for db in connections { sqlite3_close_v2(db) }
            directory.remove()
            throw error
        }
        self.slots = slots
    }

    /// See ``ConcurrentSaveWorkload/fileSystemName``.
    public var fileSystemName: String { directory.fileSystemName }

    /// See ``ConcurrentSaveWorkload/save(writer:)``: the `UPDATE`, made again when SQLite returns
    /// `SQLITE_BUSY` (its busy handler gave up, or was skipped to avoid a deadlock).
    public func save(writer: Int) throws {
        let slot = slots[writer]
        while true {
            let rc = sqlite3_step(slot.update)
            sqlite3_reset(slot.update)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_BUSY else {
                throw WorkloadError("SQLite: UPDATE of writer \(writer) failed (\(rc)): \(String(cString: sqlite3_errstr(rc)))")
            }
            slot.retries += 1
        }
    }

    /// See ``ConcurrentSaveWorkload/retries``.
    public var retries: Int { slots.reduce(0) { $0 + $1.retries } }

    /// See ``ConcurrentSaveWorkload/verify(savesPerWriter:)``: reads through a fresh connection.
    public func verify(savesPerWriter saves: Int) throws {
        var reader: OpaquePointer?
        defer { sqlite3_close_v2(reader) }
        try SQLite.check(sqlite3_open_v2(path, &reader, SQLITE_OPEN_READONLY, nil), reader, "open \(path) to verify")
        sqlite3_busy_timeout(reader, Self.busyTimeout)
        for writer in 0..<writers {
            let value = try SQLite.integer(reader, "SELECT value FROM counters WHERE id = \(writer + 1)")
            guard value == Int64(saves) else {
                throw WorkloadError("SQLite: row \(writer + 1) holds \(value), expected \(saves)")
            }
        }
    }

    /// See ``ConcurrentSaveWorkload/remove()``.
    public func remove() {
        for slot in slots {
            sqlite3_finalize(slot.update)
            slot.update = nil
        }
        for db in connections { sqlite3_close_v2(db) }
        connections = []
        directory.remove()
    }

}
