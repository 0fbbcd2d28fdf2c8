#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import CoreMetrics
import Logging
import Synchronization

// Safety: A `Gate`'s mutex is allocated once and never moves (a pthread mutex must not), and is
// destroyed and freed in `deinit`; `PagerBox.reported` is used only by the thread the pool lends
// the connection to.

/// How a ``Database`` opens its file.
public struct DatabaseOptions: Sendable {
    /// The page size of a new file (an existing file keeps its own): a power of two, 512…65536.
    public var pageSize = PageLayout.defaultPageSize
    /// The page cache budget of each connection, in bytes: at most
    /// ``PagerOptions/maximumCacheSize`` and the machine's memory (else `invalidArgument`).
    public var cacheSize = 8 << 20
    /// Values of at least this many bytes are stored LZ4-compressed when that saves space.
    /// `Int.max` turns compression off.
    public var compressionThreshold = 256
    /// The size of each tree's LZ4 compression dictionary, made from the first values of at
    /// least ``compressionThreshold`` bytes that one write transaction stores in the tree (see
    /// docs/file-format.md, "Compression dictionaries"); at most 65 536. 0 turns dictionaries off.
    public var compressionDictionarySize = 1 << 16
    /// How long to wait for another connection's lock before failing with `busy`: zero through
    /// ``PagerOptions/maximumWait`` (a day; else `invalidArgument`).
    public var busyTimeout: Duration = .seconds(5)
    /// Open for reading only.
    public var readOnly = false
    /// Create the file when it does not exist.
    public var create = true
    /// The file system (``PosixFileSystem`` unless testing).
    public var fileSystem: any FileSystem = PosixFileSystem.shared
    /// The lock table (``LockTable/processWide`` unless simulating several processes).
    public var lockTable = LockTable.processWide
    /// How long a connection keeps its shared lock after a read transaction, so that the next
    /// read starts without a system call: at most this long after the process took the lock,
    /// and never when a writer needs it (lock rules 9 and 10 in `docs/locking.md`). Writers in
    /// other processes may wait this much longer for readers. Zero turns retention off; at most
    /// ``PagerOptions/maximumWait``.
    public var readLockRetention: Duration = .milliseconds(1)
    /// Where the engine logs: opening and closing, hot-journal recovery, long lock waits, busy
    /// timeouts, failed syncs (docs/observability.md). The label `arbor.store` by default.
    public var logger = Logger(label: "arbor.store")
    /// A lock wait at least this long is logged (`notice`).
    public var slowLockWait: Duration = .milliseconds(100)
    /// The length, in bytes, the rollback journal (`<path>-journal`) is truncated back to after a
    /// transaction grew it past it (with one more sync, on such transactions only): 4 MiB
    /// (``PagerOptions/defaultJournalSizeLimit``) by default; `nil` keeps the file at the size of
    /// the largest transaction so far; 0 or more, else `invalidArgument`. See
    /// `docs/commit-protocol.md`, "The journal size limit".
    public var journalSizeLimit: Int? = PagerOptions.defaultJournalSizeLimit
    /// Makes the engine's metrics (cache hits and misses, commits, syncs, commit latency): nil
    /// for the process's bootstrapped `MetricsSystem.factory` at the time the database opens.
    public var metricsFactory: (any MetricsFactory)?

    /// Creates the default options.
    public init() {}

    var pagerOptions: PagerOptions {
        var options = PagerOptions()
        options.pageSize = pageSize
        options.cacheSize = cacheSize
        options.busyTimeout = busyTimeout
        options.readOnly = readOnly
        options.create = create
        options.lockTable = lockTable
        options.readLockRetention = readLockRetention
        options.logger = logger
        options.slowLockWait = slowLockWait
        options.journalSizeLimit = journalSizeLimit
        return options
    }
}

/// An ArborStore database: named, ordered key-value trees in one file, with atomic, durable
/// transactions shared safely between threads and processes.
///
/// ```swift
/// let database = try Database(path: "/tmp/example.arbor")
/// try database.write { transaction in
///     let people = try transaction.tree(named: "people", create: true)
///     try people.put(Array("ada".utf8), Array("Ada Lovelace".utf8))
/// }
/// let name = try database.read { transaction in
///     try transaction.tree(named: "people")?.get(Array("ada".utf8))
/// }
/// ```
///
/// Thread safety: a `Database` may be used from any number of threads. Read transactions run
/// concurrently (each on a connection of its own, taken from a pool); write transactions in this
/// process run one at a time, and across processes the file's locks keep one writer at a time.
/// Transactions and the trees and cursors obtained from them belong to the closure they were given
/// to: do not keep them past it or hand them to another thread.
public final class Database: Sendable {
    /// The database file's path.
    public let path: String
    /// The options it was opened with.
    public let options: DatabaseOptions

    /// Idle connections, ready for read transactions.
    private let idle = Mutex<[PagerBox]>([])
    /// The metrics each transaction reports to.
    private let metrics: StoreMetrics
    /// Serialises this process's write transactions (across processes, the file lock does).
    private let writerGate = Gate()
    private let closed = Atomic<Bool>(false)
    /// The largest change counter a transaction of this database has seen (``latestChangeCounter``).
    private let seenChangeCounter = Atomic<UInt64>(0)

    /// The file header's change counter as this database last saw it: the largest one any of its
    /// transactions saw when it began, or committed (a commit that changes something increments
    /// it; docs/file-format.md). Reading it costs no I/O: a caller that compares it with a value
    /// it kept learns whether anyone — another connection, another process — committed since,
    /// as far as this database's own reads and writes have looked (Arbor's remote-change
    /// notifications, docs/history.md).
    public var latestChangeCounter: UInt64 { seenChangeCounter.load(ordering: .acquiring) }

    /// Opens (and, when allowed, creates) the database at `path`, recovering it if a writer crashed.
    ///
    /// - Throws: ``StoreError`` (`notADatabase`, `corrupt`, `busy`, `unsupportedVersion`, I/O).
    public init(path: String, options: DatabaseOptions = DatabaseOptions()) throws {
        self.path = path
        self.options = options
        metrics = StoreMetrics(path: path, factory: options.metricsFactory ?? MetricsSystem.factory)
        let first = try openConnection()
        // What opening did (a recovery, say) is reported as the first connection's.
        if metrics.enabled { metrics.report(first.pager, since: &first.reported) }
        idle.withLock { $0.append(first) }
        options.logger.debug("opened \(path)", metadata: [
            "arbor.path": "\(path)", "arbor.pageSize": "\(first.pager.pageSize)", "arbor.pages": "\(first.pager.pageCount)",
            "arbor.readOnly": "\(options.readOnly)",
        ])
    }

    /// Closes every idle connection. Transactions must not be running.
    public func close() {
        guard !closed.exchange(true, ordering: .sequentiallyConsistent) else { return }
        options.logger.debug("closed \(path)", metadata: ["arbor.path": "\(path)"])
        let connections = idle.withLock { pool -> [PagerBox] in
            defer { pool.removeAll() }
            return pool
        }
        for connection in connections { connection.pager.close() }
    }

    deinit { close() }

    /// The structural validation of B+tree, overflow and freelist pages that every connection of a
    /// `Database` installs as its ``Pager/pageValidator`` (for tools that open a ``Pager`` on a
    /// database file directly).
    public static let pageValidator: @Sendable (PageNumber, UnsafeRawBufferPointer, PageNumber) -> String? = PageValidation.validate

    private func openConnection() throws -> PagerBox {
        let pager = try Pager(path: path, fileSystem: options.fileSystem, options: options.pagerOptions)
        pager.pageValidator = Self.pageValidator
        return PagerBox(pager)
    }

    private func checkout() throws -> PagerBox {
        // A store taken out of its coordinator while another thread still had a plan of it
        // reaches here: an error, not a stop.
        guard !closed.load(ordering: .sequentiallyConsistent) else {
            throw StoreError(.misuse, "the database at \(path) is closed", path: path)
        }
        if let connection = idle.withLock({ $0.popLast() }) { return connection }
        return try openConnection()
    }

    private func checkin(_ connection: PagerBox) {
        if connection.pager.isPoisoned {
            connection.pager.close()
            return
        }
        let counter = connection.pager.currentHeader.changeCounter
        var seen = seenChangeCounter.load(ordering: .relaxed)
        while seen < counter {
            let (exchanged, original) = seenChangeCounter.compareExchange(expected: seen, desired: counter, ordering: .acquiringAndReleasing)
            if exchanged { break }
            seen = original
        }
        idle.withLock { $0.append(connection) }
    }

    /// Runs `body` in a read transaction: it sees the database as committed when it began, however
    /// long it runs, while writers go on.
    ///
    /// - Throws: what `body` throws, or a ``StoreError`` (`busy` past the busy timeout).
    public func read<R>(_ body: (ReadTransaction) throws -> R) throws -> R {
        let connection = try checkout()
        defer { checkin(connection) }
        defer { if metrics.enabled { metrics.report(connection.pager, since: &connection.reported) } }
        let pager = connection.pager
        try pager.beginRead()
        defer { pager.endRead() }
        let transaction = ReadTransaction(pager: pager, options: options)
        defer { transaction.isOpen = false }
        return try body(transaction)
    }

    /// Runs `body` in a write transaction and commits it durably when `body` returns; if `body`
    /// throws, nothing it did is kept and its error is rethrown.
    ///
    /// - Throws: what `body` throws, or a ``StoreError`` (`busy`, `readOnly`, `full`, I/O…). When
    ///   the commit itself fails, nothing was written.
    public func write<R>(_ body: (WriteTransaction) throws -> R) throws -> R {
        try writeCounting(body).result
    }

    /// ``write(_:)``, also returning the file's change counter as the commit left it (as it
    /// began, when the transaction changed nothing): what this transaction made of the file,
    /// whatever other connections committed after it.
    public func writeCounting<R>(_ body: (WriteTransaction) throws -> R) throws -> (result: R, changeCounter: UInt64) {
        writerGate.enter()
        defer { writerGate.leave() }
        let connection = try checkout()
        defer { checkin(connection) }
        defer { if metrics.enabled { metrics.report(connection.pager, since: &connection.reported) } }
        let pager = connection.pager
        try pager.beginWrite()
        let transaction = WriteTransaction(pager: pager, options: options, writable: true)
        defer { transaction.isOpen = false }
        let result: R
        do {
            result = try body(transaction)
            // A change that failed midway may have left a tree half made: never commit it, even
            // when the closure caught the error and went on.
            if let failure = transaction.failure { throw failure }
        } catch {
            try? pager.rollback()
            throw error
        }
        do {
            if metrics.enabled {
                let start = ContinuousClock.now
                try pager.commit()
                metrics.commitDuration.recordNanoseconds((ContinuousClock.now - start).wholeNanoseconds)
            } else {
                try pager.commit()
            }
        } catch StoreError.busy {
            // Readers in other processes held on past the busy timeout: give up cleanly.
            try? pager.rollback()
            throw StoreError(.busy, "could not commit: readers kept the database busy past the timeout; nothing was written", path: path)
        }
        return (result, pager.currentHeader.changeCounter)
    }

    /// The page-level check alone: file length, freelist, and every page's checksum (no tree
    /// walk). Runs in a read transaction.
    public func pageProblems() throws -> [IntegrityProblem] {
        try read { try $0.pager.checkPages() }
    }

    /// Checks the whole file: every page used exactly once, checksums, key order, leaf depth,
    /// overflow chains, compressed values, the freelist. Runs in a read transaction.
    public func checkIntegrity() throws -> IntegrityReport {
        try read { try IntegrityChecker(pager: $0.pager).run() }
    }
}

/// Moves a connection between threads; the pool guarantees one user at a time.
final class PagerBox: @unchecked Sendable {
    let pager: Pager
    /// What the connection had counted when it last reported its metrics. (Used by the one
    /// thread that has the connection: no dynamic exclusivity check, which cost more than the
    /// report.)
    @exclusivity(unchecked) var reported = StoreMetrics.Counts()
    init(_ pager: Pager) { self.pager = pager }
}

extension Duration {
    /// The duration in whole nanoseconds (saturating), as metrics timers take it.
    package var wholeNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return seconds < 0 ? .min : .max }
        return whole.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }
}

/// A mutual-exclusion gate held across a caller's closure (a pthread mutex).
final class Gate: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func enter() { pthread_mutex_lock(mutex) }
    func leave() { pthread_mutex_unlock(mutex) }
}
