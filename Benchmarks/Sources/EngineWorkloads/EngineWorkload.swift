import CommitWorkloads

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One engine's side of the engine workloads, on one database file in a scratch directory of its
/// own. Tables (trees) and their contents:
///
/// - `t`: the main table, rows `0..<n` of ``MainRows`` (8-byte big-endian key, 100-byte value);
/// - `s`: the text-keyed table, rows of ``TextKeyRows`` (12-byte text key, 8-byte value);
/// - `texts`: the text-heavy table, 8-byte big-endian keys and ``TextPool`` values (~1 KB).
///
/// Every operation checks what it read (a missing row or a wrong value throws), with the same
/// cheap check on both engines. ``open()`` and ``close()`` may be called repeatedly: reports open
/// the database for each phase, so both engines start each phase with a cold page cache (the
/// files themselves stay in the operating system's cache).
///
/// Not thread-safe: use one workload from one thread.
public protocol EngineWorkload: AnyObject {
    /// The engine's name as printed in reports.
    var engine: String { get }
    /// The directory holding the database (and its journal).
    var directory: ScratchDirectory { get }
    /// The database file's path.
    var path: String { get }

    /// Opens the database (creating it the first time).
    func open() throws
    /// Closes the database; the files stay.
    func close()

    /// Creates table `t` and inserts rows `0..<count` in key order, in one transaction.
    func insertSequential(count: Int) throws
    /// `count` lookups of random rows of `t` (which holds `rows` rows), in one read transaction.
    func pointReads(count: Int, rows: Int, seed: UInt64) throws
    /// `count` lookups of random rows of `t`, each in a read transaction of its own.
    func pointReadTransactions(count: Int, rows: Int, seed: UInt64) throws
    /// Reads every row of `t` in key order (keys and values), in one read transaction; returns the
    /// number of rows.
    func scan() throws -> Int
    /// Creates table `s` and inserts rows `0..<count` (in row order, so in random key order), in
    /// one transaction.
    func insertTextKeys(count: Int) throws
    /// `count` lookups of random rows of `s` (which holds `rows` rows) by key, in one read
    /// transaction.
    func textKeyLookups(count: Int, rows: Int, seed: UInt64) throws
    /// One durable transaction replacing the value of row `row` of `t` (salted with `salt`).
    func updateOne(row: Int, salt: UInt64) throws
    /// Creates table `texts` and inserts rows `0..<count` with `pool`'s values, in one transaction.
    func insertTexts(count: Int, pool: TextPool) throws
    /// Reads `samples` random rows of `texts` back and compares them with `pool`.
    func verifyTexts(count: Int, pool: TextPool, samples: Int) throws
    /// A line describing how the engine laid the data out (page counts, fill), for reports.
    func layout() throws -> String
    /// How long the commit of the last write transaction took (from the end of its work to the
    /// return of `write` or `COMMIT`): the durable part of an insert's time.
    var lastCommitTime: Duration { get }
}

extension EngineWorkload {
    /// The size of the database file in bytes (journal not included).
    public var fileSize: Int64 { fileSizeOf(path) }

    /// The size of the journal file in bytes (0 when there is none).
    public var journalSize: Int64 { fileSizeOf(path + "-journal") }

    /// Closes the database and removes its directory.
    public func remove() {
        close()
        directory.remove()
    }
}

/// The size of the file at `path`, 0 when it does not exist.
public func fileSizeOf(_ path: String) -> Int64 {
    var status = stat()
    guard stat(path, &status) == 0 else { return 0 }
    return Int64(status.st_size)
}
