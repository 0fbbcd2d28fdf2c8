import CSQLite
import CommitWorkloads

/// SQLite's side of the engine workloads, through the C API with prepared statements.
///
/// Schema, chosen to give SQLite its best layout for each data set:
///
/// - `t(k INTEGER PRIMARY KEY, v BLOB NOT NULL)`: a rowid table, so the key *is* the B+tree key
///   (SQLite's fastest path: integer comparisons, and its append optimisation for increasing
///   rowids). A `WITHOUT ROWID` table with a BLOB key would compare records instead and be slower
///   (not measured here; measuring it would flatter Arbor).
/// - `s(k TEXT PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID`: the key in the B-tree itself; a rowid
///   table would need a separate index (two trees, two lookups). TEXT keys compare with `memcmp`
///   (the BINARY collation), as Arbor's byte keys do.
/// - `texts(k INTEGER PRIMARY KEY, v BLOB NOT NULL)`.
///
/// Keys and values are bound with `SQLITE_STATIC` from the same reused buffers the Arbor side
/// uses; values read are looked at in place (`sqlite3_column_blob`), not copied — SQLite's
/// natural API, as returning a fresh array is Arbor's.
public final class SQLiteEngine: EngineWorkload {
    public let engine: String
    public let directory: ScratchDirectory
    public let path: String
    public let settings: EngineSettings
    private var db: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    public private(set) var lastCommitTime: Duration = .zero

    /// Creates a scratch directory (named after `prefix`) and the database in it.
    public init(prefix: String = "sqlite-engine", settings: EngineSettings = EngineSettings()) throws {
        engine = "SQLite " + String(cString: sqlite3_libversion())
        self.settings = settings
        directory = try ScratchDirectory(prefix: prefix)
        path = directory.path + "/engine.sqlite"
        do {
            try open()
        } catch {
            close()
            directory.remove()
            throw error
        }
    }

    public func open() throws {
        guard db == nil else { return }
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK else {
            let error = failure(rc, "open \(path)")
            close()
            throw error
        }
        let kib = settings.cacheBytes / 1024
        try execute("""
            PRAGMA page_size=\(settings.pageSize);
            PRAGMA journal_mode=DELETE;
            PRAGMA synchronous=FULL;
            PRAGMA cache_size=-\(kib);
            """)
        let pageSize = try integer("PRAGMA page_size")
        let journal = try text("PRAGMA journal_mode")
        let synchronous = try integer("PRAGMA synchronous")
        let cache = try integer("PRAGMA cache_size")
        let mmap = try integer("PRAGMA mmap_size")
        guard pageSize == settings.pageSize, journal == "delete", synchronous == 2, cache == -Int64(kib), mmap == 0 else {
            throw WorkloadError("SQLite: settings are page_size=\(pageSize) journal_mode=\(journal) synchronous=\(synchronous) cache_size=\(cache) mmap_size=\(mmap), expected \(settings.pageSize), delete, 2 (FULL), -\(kib), 0")
        }
    }

    public func close() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        sqlite3_close_v2(db)
        db = nil
    }

    public func insertSequential(count: Int) throws {
        try execute("CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB NOT NULL)")
        var value = [UInt8](repeating: 0, count: MainRows.valueSize)
        let insert = try statement("INSERT INTO t(k, v) VALUES (?1, ?2)")
        try transaction("BEGIN") {
            for row in 0..<count {
                MainRows.storeValue(row, into: &value)
                sqlite3_bind_int64(insert, 1, Int64(row))
                try value.withUnsafeBytes { bytes in
                    sqlite3_bind_blob(insert, 2, bytes.baseAddress, Int32(bytes.count), nil)
                    try stepDone(insert, "INSERT into t")
                }
            }
        }
    }

    public func pointReads(count: Int, rows: Int, seed: UInt64) throws {
        let select = try statement("SELECT v FROM t WHERE k = ?1")
        var random = RandomRows(rows: rows, seed: seed)
        try transaction("BEGIN") {
            for _ in 0..<count {
                let row = random.next()
                try lookUpMainRow(select, row)
            }
        }
    }

    public func pointReadTransactions(count: Int, rows: Int, seed: UInt64) throws {
        let select = try statement("SELECT v FROM t WHERE k = ?1")
        var random = RandomRows(rows: rows, seed: seed)
        for _ in 0..<count {
            // Autocommit: the statement is its own read transaction (shared lock, change-counter
            // check, unlock).
            try lookUpMainRow(select, random.next())
        }
    }

    @inline(__always)
    private func lookUpMainRow(_ select: OpaquePointer, _ row: Int) throws {
        sqlite3_bind_int64(select, 1, Int64(row))
        defer { sqlite3_reset(select) }
        guard sqlite3_step(select) == SQLITE_ROW, Self.column(select, 0, isMainValueOf: row) else {
            throw WorkloadError("SQLite: row \(row) of t is missing or wrong: \(message)")
        }
    }

    @inline(__always)
    private static func blob(_ statement: OpaquePointer, _ column: Int32) -> UnsafeRawBufferPointer {
        let pointer = sqlite3_column_blob(statement, column)
        return UnsafeRawBufferPointer(start: pointer, count: Int(sqlite3_column_bytes(statement, column)))
    }

    @inline(__always)
    private static func column(_ statement: OpaquePointer, _ column: Int32, isMainValueOf row: Int) -> Bool {
        MainRows.isValue(blob(statement, column), ofRow: row)
    }

    public func scan() throws -> Int {
        let select = try statement("SELECT k, v FROM t")
        return try transaction("BEGIN") {
            defer { sqlite3_reset(select) }
            var rows = 0
            while true {
                let rc = sqlite3_step(select)
                if rc == SQLITE_DONE { break }
                guard rc == SQLITE_ROW, sqlite3_column_int64(select, 0) == Int64(rows),
                      Self.column(select, 1, isMainValueOf: rows) else {
                    throw WorkloadError("SQLite: the scan of t went wrong at row \(rows) (\(rc)): \(message)")
                }
                rows += 1
            }
            return rows
        }
    }

    public func insertTextKeys(count: Int) throws {
        try execute("CREATE TABLE s(k TEXT PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID")
        var key = [UInt8](repeating: 0, count: TextKeyRows.keySize)
        var value = [UInt8](repeating: 0, count: TextKeyRows.valueSize)
        let insert = try statement("INSERT INTO s(k, v) VALUES (?1, ?2)")
        try transaction("BEGIN") {
            for row in 0..<count {
                TextKeyRows.storeKey(row, into: &key)
                TextKeyRows.storeValue(row, into: &value)
                try key.withUnsafeBytes { k in
                    try value.withUnsafeBytes { v in
                        sqlite3_bind_text(insert, 1, k.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(k.count), nil)
                        sqlite3_bind_blob(insert, 2, v.baseAddress, Int32(v.count), nil)
                        try stepDone(insert, "INSERT into s")
                    }
                }
            }
        }
    }

    public func textKeyLookups(count: Int, rows: Int, seed: UInt64) throws {
        let select = try statement("SELECT v FROM s WHERE k = ?1")
        var key = [UInt8](repeating: 0, count: TextKeyRows.keySize)
        var random = RandomRows(rows: rows, seed: seed)
        try transaction("BEGIN") {
            for _ in 0..<count {
                let row = random.next()
                TextKeyRows.storeKey(row, into: &key)
                try key.withUnsafeBytes { k in
                    sqlite3_bind_text(select, 1, k.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(k.count), nil)
                    defer { sqlite3_reset(select) }
                    guard sqlite3_step(select) == SQLITE_ROW,
                          TextKeyRows.isValue(Self.blob(select, 0), ofRow: row) else {
                        throw WorkloadError("SQLite: text key of row \(row) is missing or wrong: \(message)")
                    }
                }
            }
        }
    }

    public func updateOne(row: Int, salt: UInt64) throws {
        var value = [UInt8](repeating: 0, count: MainRows.valueSize)
        MainRows.storeValue(row, salt: salt, into: &value)
        let update = try statement("UPDATE t SET v = ?2 WHERE k = ?1")
        sqlite3_bind_int64(update, 1, Int64(row))
        try value.withUnsafeBytes { bytes in
            sqlite3_bind_blob(update, 2, bytes.baseAddress, Int32(bytes.count), nil)
            try stepDone(update, "UPDATE t")
        }
        guard sqlite3_changes(db) == 1 else { throw WorkloadError("SQLite: UPDATE of row \(row) changed nothing") }
    }

    public func insertTexts(count: Int, pool: TextPool) throws {
        try execute("CREATE TABLE texts(k INTEGER PRIMARY KEY, v BLOB NOT NULL)")
        let insert = try statement("INSERT INTO texts(k, v) VALUES (?1, ?2)")
        try transaction("BEGIN") {
            for row in 0..<count {
                sqlite3_bind_int64(insert, 1, Int64(row))
                try pool.values[pool.poolIndex(row)].withUnsafeBytes { bytes in
                    sqlite3_bind_blob(insert, 2, bytes.baseAddress, Int32(bytes.count), nil)
                    try stepDone(insert, "INSERT into texts")
                }
            }
        }
    }

    public func verifyTexts(count: Int, pool: TextPool, samples: Int) throws {
        let select = try statement("SELECT v FROM texts WHERE k = ?1")
        var random = RandomRows(rows: count, seed: 0x7E575)
        try transaction("BEGIN") {
            for _ in 0..<samples {
                let row = random.next()
                sqlite3_bind_int64(select, 1, Int64(row))
                defer { sqlite3_reset(select) }
                guard sqlite3_step(select) == SQLITE_ROW, Self.blob(select, 0).elementsEqual(pool.value(row)) else {
                    throw WorkloadError("SQLite: text row \(row) is missing or wrong")
                }
            }
        }
    }

    public func layout() throws -> String {
        let pages = try integer("PRAGMA page_count")
        let free = try integer("PRAGMA freelist_count")
        return "\(pages) pages in the file, \(free) free"
    }

    // MARK: Helpers

    private var message: String { db.map { String(cString: sqlite3_errmsg($0)) } ?? "closed" }

    private func failure(_ rc: Int32, _ what: String) -> WorkloadError { SQLite.failure(rc, db, what) }

    /// The prepared statement for `sql`, prepared once per open connection.
    private func statement(_ sql: String) throws -> OpaquePointer {
        if let prepared = statements[sql] { return prepared }
        var prepared: OpaquePointer?
        let rc = sqlite3_prepare_v2(db, sql, -1, &prepared, nil)
        guard rc == SQLITE_OK, let prepared else { throw failure(rc, "prepare \(sql)") }
        statements[sql] = prepared
        return prepared
    }

    @inline(__always)
    private func stepDone(_ statement: OpaquePointer, _ what: String) throws {
        let rc = sqlite3_step(statement)
        sqlite3_reset(statement)
        guard rc == SQLITE_DONE else { throw failure(rc, what) }
    }

    /// Runs `body` between `begin` and `COMMIT`, rolling back when it throws.
    private func transaction<R>(_ begin: String, _ body: () throws -> R) throws -> R {
        try execute(begin)
        let result: R
        do {
            result = try body()
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
        let workDone = ContinuousClock.now
        try execute("COMMIT")
        lastCommitTime = ContinuousClock.now - workDone
        return result
    }

    private func execute(_ sql: String) throws { try SQLite.execute(db, sql) }
    private func integer(_ sql: String) throws -> Int64 { try SQLite.integer(db, sql) }
    private func text(_ sql: String) throws -> String { try SQLite.text(db, sql) }
}
