import ArborStore
import CommitWorkloads

/// Arbor's side of the engine workloads, through the public `Database` API only: `write` and
/// `read` transactions, `Tree.put`/`get`, `Cursor.first`/`next`.
///
/// Keys and values are written into reused arrays (uniquely referenced, so no copy is made), as
/// a careful caller would; what `get` and `Cursor.value()` return is Arbor's own allocation and
/// is counted. Each one-read transaction opens its tree by name, as the API requires (a tree
/// belongs to its transaction's closure).
public final class ArborEngine: EngineWorkload {
    public let engine = "Arbor"
    public let directory: ScratchDirectory
    public let path: String
    public let settings: EngineSettings
    /// The open database (nil between ``close()`` and ``open()``).
    public private(set) var database: Database?
    public private(set) var lastCommitTime: Duration = .zero

    /// Creates a scratch directory (named after `prefix`) and the database in it.
    public init(prefix: String = "arbor-engine", settings: EngineSettings = EngineSettings()) throws {
        self.settings = settings
        directory = try ScratchDirectory(prefix: prefix)
        path = directory.path + "/engine.arbor"
        do {
            try open()
        } catch {
            directory.remove()
            throw error
        }
    }

    public func open() throws {
        guard database == nil else { return }
        var options = DatabaseOptions()
        options.pageSize = settings.pageSize
        options.cacheSize = settings.cacheBytes
        database = try Database(path: path, options: options)
    }

    public func close() {
        database?.close()
        database = nil
    }

    private var db: Database {
        guard let database else { preconditionFailure("the Arbor database at \(path) is closed") }
        return database
    }

    /// Runs a write transaction, timing its commit.
    private func timedWrite(_ body: (WriteTransaction) throws -> Void) throws {
        var workDone = ContinuousClock.now
        try db.write { transaction in
            try body(transaction)
            workDone = ContinuousClock.now
        }
        lastCommitTime = ContinuousClock.now - workDone
    }

    private static func table(_ transaction: ReadTransaction, _ name: String) throws -> Tree {
        guard let tree = try transaction.tree(named: name) else {
            throw WorkloadError("Arbor: there is no tree \"\(name)\"")
        }
        return tree
    }

    public func insertSequential(count: Int) throws {
        var key = [UInt8](repeating: 0, count: 8)
        var value = [UInt8](repeating: 0, count: MainRows.valueSize)
        try timedWrite { transaction in
            let tree = try transaction.createTree(named: "t")
            for row in 0..<count {
                MainRows.storeKey(row, into: &key)
                MainRows.storeValue(row, into: &value)
                try tree.put(key, value)
            }
        }
    }

    /// The page-cache counters of the last ``pointReads(count:rows:seed:)`` transaction.
    public private(set) var lastPointReadCache = PageCacheStatistics()

    public func pointReads(count: Int, rows: Int, seed: UInt64) throws {
        var key = [UInt8](repeating: 0, count: 8)
        var random = RandomRows(rows: rows, seed: seed)
        lastPointReadCache = try db.read { transaction in
            let before = transaction.cacheStatistics
            let tree = try Self.table(transaction, "t")
            for _ in 0..<count {
                let row = random.next()
                MainRows.storeKey(row, into: &key)
                guard let value = try tree.get(key),
                      value.withUnsafeBytes({ MainRows.isValue($0, ofRow: row) }) else {
                    throw WorkloadError("Arbor: row \(row) of t is missing or wrong")
                }
            }
            var after = transaction.cacheStatistics
            after.hits -= before.hits
            after.misses -= before.misses
            return after
        }
    }

    /// The cost of the pager's miss path alone: the time per page of reading `samples` random
    /// pages of the file through a pager whose cache holds 16 pages, so that nearly every read
    /// is a miss (a `pread` of the page, its checksum, its structural validation, the cache's
    /// bookkeeping). Nothing is searched.
    public func missPathCost(samples: Int) throws -> Duration {
        var options = PagerOptions()
        options.cacheSize = 16 * settings.pageSize
        options.readOnly = true
        let pager = try Pager(path: path, options: options)
        defer { pager.close() }
        pager.pageValidator = Database.pageValidator
        try pager.beginRead()
        defer { pager.endRead() }
        var random = RandomRows(rows: Int(pager.pageCount) - 1, seed: 0x3155)
        var sink = 0
        let began = ContinuousClock.now
        for _ in 0..<samples {
            sink &+= try pager.withPage(PageNumber(random.next() + 2)) { Int($0[0]) }
        }
        let elapsed = ContinuousClock.now - began
        if sink == -1 { print(sink) }
        return elapsed / samples
    }

    public func pointReadTransactions(count: Int, rows: Int, seed: UInt64) throws {
        var key = [UInt8](repeating: 0, count: 8)
        var random = RandomRows(rows: rows, seed: seed)
        let database = db
        for _ in 0..<count {
            let row = random.next()
            MainRows.storeKey(row, into: &key)
            let found = try database.read { transaction in
                try Self.table(transaction, "t").get(key)?.withUnsafeBytes { MainRows.isValue($0, ofRow: row) }
            }
            guard found == true else { throw WorkloadError("Arbor: row \(row) of t is missing or wrong") }
        }
    }

    public func scan() throws -> Int {
        try db.read { transaction in
            // Tree.forEach: Arbor's in-place scan (keys and values as buffers into the pages), the
            // counterpart of stepping a SELECT and reading columns in place with sqlite3_column_blob.
            var rows = 0
            var wrong = false
            try Self.table(transaction, "t").forEach { key, value in
                guard MainRows.row(ofKey: key) == rows, MainRows.isValue(value, ofRow: rows) else {
                    wrong = true
                    return false
                }
                rows += 1
                return true
            }
            if wrong { throw WorkloadError("Arbor: the scan of t went wrong at row \(rows)") }
            return rows
        }
    }

    public func insertTextKeys(count: Int) throws {
        var key = [UInt8](repeating: 0, count: TextKeyRows.keySize)
        var value = [UInt8](repeating: 0, count: TextKeyRows.valueSize)
        try timedWrite { transaction in
            let tree = try transaction.createTree(named: "s", kind: .index)
            for row in 0..<count {
                TextKeyRows.storeKey(row, into: &key)
                TextKeyRows.storeValue(row, into: &value)
                try tree.put(key, value)
            }
        }
    }

    public func textKeyLookups(count: Int, rows: Int, seed: UInt64) throws {
        var key = [UInt8](repeating: 0, count: TextKeyRows.keySize)
        var random = RandomRows(rows: rows, seed: seed)
        try db.read { transaction in
            let tree = try Self.table(transaction, "s")
            for _ in 0..<count {
                let row = random.next()
                TextKeyRows.storeKey(row, into: &key)
                guard let value = try tree.get(key),
                      value.withUnsafeBytes({ TextKeyRows.isValue($0, ofRow: row) }) else {
                    throw WorkloadError("Arbor: text key of row \(row) is missing or wrong")
                }
            }
        }
    }

    public func updateOne(row: Int, salt: UInt64) throws {
        var key = [UInt8](repeating: 0, count: 8)
        var value = [UInt8](repeating: 0, count: MainRows.valueSize)
        MainRows.storeKey(row, into: &key)
        MainRows.storeValue(row, salt: salt, into: &value)
        try db.write { transaction in
            try Self.table(transaction, "t").put(key, value)
        }
    }

    public func insertTexts(count: Int, pool: TextPool) throws {
        var key = [UInt8](repeating: 0, count: 8)
        try timedWrite { transaction in
            let tree = try transaction.createTree(named: "texts")
            for row in 0..<count {
                MainRows.storeKey(row, into: &key)
                try tree.put(key, pool.value(row))
            }
        }
    }

    public func verifyTexts(count: Int, pool: TextPool, samples: Int) throws {
        var key = [UInt8](repeating: 0, count: 8)
        var random = RandomRows(rows: count, seed: 0x7E575)
        try db.read { transaction in
            let tree = try Self.table(transaction, "texts")
            for _ in 0..<samples {
                let row = random.next()
                MainRows.storeKey(row, into: &key)
                guard try tree.get(key) == pool.value(row) else {
                    throw WorkloadError("Arbor: text row \(row) is missing or wrong")
                }
            }
        }
    }

    public func layout() throws -> String {
        try db.read { transaction in
            var parts: [String] = []
            for descriptor in try transaction.trees().sorted(by: { $0.name < $1.name }) {
                guard let tree = try transaction.tree(named: descriptor.name) else { continue }
                let s = try tree.statistics()
                var part = "\(descriptor.name): \(s.entries) entries, depth \(s.depth), \(s.leafPages) leaf + \(s.interiorPages) interior"
                if s.overflowPages > 0 { part += " + \(s.overflowPages) overflow" }
                part += " pages, fill \(fixed(s.fillFactor * 100, 0))%"
                if s.compressedValues > 0 { part += ", \(s.compressedValues) values LZ4-compressed" }
                parts.append(part)
            }
            let header = transaction.header
            parts.append("\(header.pageCount) pages in the file, \(header.freelistCount) free")
            return parts.joined(separator: "; ")
        }
    }
}
