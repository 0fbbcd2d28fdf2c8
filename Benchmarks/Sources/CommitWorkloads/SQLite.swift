import CSQLite

/// The calls of SQLite's C API every SQLite workload makes, failing with ``WorkloadError``s that
/// say what failed and SQLite's message.
public enum SQLite {
    /// The error of `what`, which returned `rc` on `db`.
    public static func failure(_ rc: Int32, _ db: OpaquePointer?, _ what: String) -> WorkloadError {
        let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
        return WorkloadError("SQLite: \(what) failed (\(rc)): \(message)")
    }

    /// Throws unless `rc` is `SQLITE_OK`.
    public static func check(_ rc: Int32, _ db: OpaquePointer?, _ what: String) throws {
        guard rc == SQLITE_OK else { throw failure(rc, db, what) }
    }

    /// Runs statements that return no rows.
    public static func execute(_ db: OpaquePointer?, _ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &message)
        if rc != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_free(message)
            throw WorkloadError("SQLite: \(sql): \(text)")
        }
    }

    /// Runs a query returning one row and hands its statement to `body`.
    public static func single<R>(_ db: OpaquePointer?, _ sql: String, _ body: (OpaquePointer) -> R) throws -> R {
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        let rc = sqlite3_prepare_v2(db, sql, -1, &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw failure(rc, db, "prepare \(sql)") }
        guard sqlite3_step(statement) == SQLITE_ROW else {
            throw WorkloadError("SQLite: \(sql) returned no row: \(db.map { String(cString: sqlite3_errmsg($0)) } ?? "closed")")
        }
        return body(statement)
    }

    /// The integer a one-row query returns.
    public static func integer(_ db: OpaquePointer?, _ sql: String) throws -> Int64 {
        try single(db, sql) { sqlite3_column_int64($0, 0) }
    }

    /// The text a one-row query returns.
    public static func text(_ db: OpaquePointer?, _ sql: String) throws -> String {
        try single(db, sql) { sqlite3_column_text($0, 0).map { String(cString: $0) } ?? "" }
    }
}
