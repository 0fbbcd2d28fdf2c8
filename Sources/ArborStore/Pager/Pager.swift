import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// Safety: A pager is one connection, used from one thread at a time and never re-entered, so its
// unchecked fields are never accessed from two places at once; the header is checked in its own
// scratch bytes, lent for the call.

/// How a ``Pager`` opens its file.
public struct PagerOptions: Sendable {
    /// The page size of a new file (an existing file keeps its own). A power of two, 512…65536.
    public var pageSize = PageLayout.defaultPageSize
    /// The page cache's budget in bytes (at least 16 pages are always cached): 0 through
    /// ``maximumCacheSize``, and no more than the machine's memory.
    public var cacheSize = 8 << 20
    /// How long to wait for a lock held by another connection before failing with `busy`: zero
    /// through ``maximumWait``.
    public var busyTimeout: Duration = .seconds(5)
    /// Open for reading only: write transactions fail with `readOnly`.
    public var readOnly = false
    /// Create the file when it does not exist (ignored when `readOnly`).
    public var create = true
    /// The lock table arbitrating between this process's connections. Tests that simulate several
    /// processes give each its own; everything else uses ``LockTable/processWide``.
    public var lockTable = LockTable.processWide
    /// How long a connection may keep its shared lock after a read transaction ends, so that
    /// the next one starts without a system call (lock rules 9 and 10 in `docs/locking.md`).
    /// Zero (the pager's default) releases it at once; at most ``maximumWait``.
    public var readLockRetention: Duration = .zero
    /// Where the pager logs recoveries, long lock waits, busy timeouts and failed syncs
    /// (docs/observability.md).
    public var logger = Logger(label: "arbor.store")
    /// A lock wait at least this long is logged (`notice`).
    public var slowLockWait: Duration = .milliseconds(100)
    /// The journal file's length, in bytes, that a transaction leaves behind: a journal grown past
    /// it is truncated back to it (and synced) after the commit point, and after a rollback or a
    /// recovery (step 4b in `docs/commit-protocol.md`). Zero or more; `nil` keeps the file at its
    /// largest. A transaction within the limit pays nothing for it; one past it pays a truncation
    /// and one more journal sync.
    public var journalSizeLimit: Int? = Self.defaultJournalSizeLimit

    /// The default ``journalSizeLimit``: 4 MiB, about 1,000 pages of 4 KiB. Ordinary transactions
    /// stay under it and reuse the file as it is; bulk ones leave no more than this behind.
    public static let defaultJournalSizeLimit = 4 << 20

    /// The largest ``cacheSize``: 1 TiB. It keeps frame numbers in 32 bits at the smallest page
    /// size (2³¹ frames of 512 bytes); the cache's frame table is allocated when the pager opens,
    /// 32 to 48 bytes per frame.
    public static let maximumCacheSize = 1 << 40
    /// The longest ``busyTimeout`` and ``readLockRetention``: one day. (A longer one is a mistake
    /// rather than a wish, and a retention of centuries overflowed the timer's nanoseconds.)
    public static let maximumWait: Duration = .seconds(86_400)

    /// Creates the default options.
    public init() {}

    /// Checks every option against its range before anything is opened or allocated.
    ///
    /// - Throws: `invalidArgument` naming the option, its value and its range.
    func validate() throws {
        guard PageLayout.isValid(pageSize: pageSize) else {
            throw StoreError(.invalidArgument, "page size \(pageSize) is not a power of two in 512…65536")
        }
        let memory = Self.physicalMemory
        guard cacheSize >= 0, cacheSize <= Self.maximumCacheSize, cacheSize <= memory else {
            throw StoreError(.invalidArgument, "cacheSize \(cacheSize) is outside 0…\(min(Self.maximumCacheSize, memory)) bytes (at most 1 TiB, and no more than this machine's memory); give the page cache a budget in that range")
        }
        for (name, wait) in [("busyTimeout", busyTimeout), ("readLockRetention", readLockRetention)] {
            guard wait >= .zero, wait <= Self.maximumWait else {
                throw StoreError(.invalidArgument, "\(name) \(wait) is outside 0…\(Self.maximumWait) (one day); use a duration in that range")
            }
        }
        if let journalSizeLimit, journalSizeLimit < 0 {
            throw StoreError(.invalidArgument, "journalSizeLimit \(journalSizeLimit) is negative; give a number of bytes (0 or more), or nil to keep the journal at its largest")
        }
    }

    /// The machine's memory in bytes (`Int.max` when the system does not say).
    static let physicalMemory: Int = {
        #if canImport(Glibc) || canImport(Musl)
        let pages = sysconf(Int32(_SC_PHYS_PAGES)), size = sysconf(Int32(_SC_PAGESIZE))
        #else
        let pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE)
        #endif
        guard pages > 0, size > 0 else { return .max }
        let (bytes, overflow) = pages.multipliedReportingOverflow(by: size)
        return overflow ? .max : bytes
    }()
}

/// Counters of the I/O a pager has done.
public struct PagerStatistics: Sendable, Equatable {
    /// Committed write transactions that changed something.
    public var commits: UInt64 = 0
    /// Syncs of the journal.
    public var journalSyncs: UInt64 = 0
    /// Syncs of the database file.
    public var databaseSyncs: UInt64 = 0
    /// Syncs of the directory (after the journal was created).
    public var directorySyncs: UInt64 = 0
    /// Pages written to the database file.
    public var pagesWritten: UInt64 = 0
    /// Page images written to the journal.
    public var journalRecords: UInt64 = 0
    /// Hot journals rolled back by this connection.
    public var recoveries: UInt64 = 0
    /// Locks not granted within the busy timeout (each a `busy` error).
    public var busyTimeouts: UInt64 = 0
    /// Page images those rollbacks wrote back into the database file (`arbor recover` reports
    /// them). A hot journal may hold none: a crash while the file only grew is undone by
    /// truncating it.
    public var pagesRestored: UInt64 = 0
    /// Journals truncated back to ``PagerOptions/journalSizeLimit`` after a transaction grew them
    /// past it (each with one journal sync, counted in ``journalSyncs``).
    public var journalTrims: UInt64 = 0

    /// All syncs together.
    public var syncs: UInt64 { journalSyncs + databaseSyncs + directorySyncs }

    /// Creates zeroed statistics.
    public init() {}
}

/// The pager: a database file as numbered pages, with a bounded cache, checksums, read and write
/// transactions, a freelist, crash-safe commits through a rollback journal, and locks shared with
/// other connections and processes.
///
/// A pager is one connection to the file. It is not thread-safe: use it from one thread at a time
/// (open one pager per thread for concurrency; they coordinate through locks).
///
/// ```swift
/// let pager = try Pager(path: "/tmp/example.arbor")
/// try pager.beginWrite()
/// let page = try pager.allocatePage()
/// try pager.withMutablePage(page) { bytes in bytes[0] = 42 }
/// try pager.commit()
/// ```
///
/// Page bodies passed to closures exclude the 8-byte checksum trailer; page 1's body starts with
/// the ``DatabaseHeader`` (its fields are reached through the pager, not the bytes).
public final class Pager {
    /// Where a connection is in its transaction life cycle.
    public enum TransactionState: Sendable {
        /// No transaction.
        case none
        /// A read transaction.
        case read
        /// A write transaction.
        case write
    }

    /// The database file's path.
    public let path: String
    /// The file's resolved path (``FileSystem/canonicalPath(_:)``): its journal is this path
    /// followed by `-journal`.
    let canonicalPath: String
    /// The options the pager was opened with.
    public let options: PagerOptions

    let fileSystem: any FileSystem
    let file: any StoreFile
    let inodeLock: InodeLock
    let journal: Journal
    let cache: PageCache
    @exclusivity(unchecked) var level = LockLevel.none
    /// The shared lock is kept between transactions (lock rule 9); the inode lock may revoke it.
    @exclusivity(unchecked) var retainsSharedLock = false
    /// The committed header as of the last time it was read or written.
    @exclusivity(unchecked) var header: DatabaseHeader
    /// The change counter the cached pages belong to.
    @exclusivity(unchecked) var cacheChangeCounter: UInt64?
    /// The failure that made the handle unusable.
    @exclusivity(unchecked) var poison: StoreError?
    @exclusivity(unchecked) var state = TransactionState.none
    @exclusivity(unchecked) var write = WriteState()
    @exclusivity(unchecked) var fileSize: Int64 = 0
    @exclusivity(unchecked) var closed = false
    /// The B+tree's append fast path: the root-to-leaf path of the last insert that went to the
    /// end of a tree's right-most leaf. The B+tree clears it whenever it reshapes a tree; the
    /// pager clears it at every transaction boundary.
    struct AppendHint {
        var root: PageNumber
        var path: [BTree.PathEntry]
    }

    @exclusivity(unchecked) var appendHint: AppendHint? {
        didSet {
            appendHintRoot = appendHint?.root ?? 0
            appendHintLeaf = appendHint?.path.last?.page ?? 0
        }
    }
    /// The hint's root and leaf as plain numbers, so the append fast path reads them without
    /// touching (retaining) the path array. 0 when there is no hint.
    @exclusivity(unchecked) private(set) var appendHintRoot: PageNumber = 0
    @exclusivity(unchecked) private(set) var appendHintLeaf: PageNumber = 0

    /// Catalog entries looked up by read transactions, valid while the change counter is the one
    /// recorded (the catalog layer fills and checks it).
    @exclusivity(unchecked) var catalogCache: (counter: UInt64, entries: [String: TreeDescriptor]) = (0, [:])

    /// Compression dictionaries loaded by this connection, by first page. Dropped with the cached
    /// pages (another connection committed, or a transaction rolled back).
    @exclusivity(unchecked) var dictionaries: [PageNumber: LZ4Dictionary] = [:]
    /// Dictionaries made by the open write transaction, by tree root, so that tree handles opened
    /// before one was made still find it.
    @exclusivity(unchecked) var newDictionaries: [PageNumber: (page: PageNumber, length: Int)] = [:]
    /// Values collected per tree root to make a dictionary from, in the open write transaction.
    @exclusivity(unchecked) var dictionarySamples: [PageNumber: [UInt8]] = [:]

    /// Reused for reading the header's bytes at the start of each transaction.
    @exclusivity(unchecked) var headerScratch = [UInt8](repeating: 0, count: DatabaseHeader.size)
    /// Whether the directory must be synced at the next journal sync: once per connection, the
    /// first time it relies on the journal, whoever created the journal file (a connection that
    /// created it and then rolled back, or died, may never have synced its directory entry); and
    /// again after this connection created the journal or the database file.
    @exclusivity(unchecked) var needsDirectorySync = true
    /// I/O counters.
    @exclusivity(unchecked) public internal(set) var statistics = PagerStatistics()

    /// Validates a page's structure when it is read from the file (after its checksum passed),
    /// before anyone indexes into it: returns a description of what is wrong, or nil. Installed
    /// by the layer that knows the page types (the B+tree); a failure is a `corrupt` error naming
    /// the page. Arguments: the page number, its body, and the file's page count.
    @exclusivity(unchecked) public var pageValidator: (@Sendable (PageNumber, UnsafeRawBufferPointer, PageNumber) -> String?)?

    /// The bookkeeping of the open write transaction.
    struct WriteState {
        var originalPageCount: PageNumber = 0
        var header = DatabaseHeader(pageSize: PageLayout.defaultPageSize, pageCount: 1)
        var journaled = Set<PageNumber>()
        var freedInTransaction = Set<PageNumber>()
        var records = 0
        var syncedRecords = 0
        var nonce: UInt64 = 0
        var journalHeaderWritten = false
        var spilled = false
        var changed = false
        /// Whether the commit may shrink the file: the transaction replaced its contents and
        /// journaled every page past the new end (``Pager/replaceContents(with:)``).
        var shrinks = false
    }

    var ownerID: ObjectIdentifier { ObjectIdentifier(self) }

    /// Opens (and, when allowed, creates) the database at `path`.
    ///
    /// Opening rolls back a hot journal left by a crashed writer and validates the header.
    ///
    /// - Throws: ``StoreError``: `invalidArgument` for options out of range
    ///   (the ranges ``PagerOptions`` documents), `notADatabase` for a foreign or empty file, `corrupt` for a
    ///   damaged header, `unsupportedVersion`, `busy`, or an I/O error.
    public init(path: String, fileSystem: any FileSystem = PosixFileSystem.shared, options: PagerOptions = PagerOptions()) throws {
        try options.validate()
        self.path = path
        self.options = options
        self.fileSystem = fileSystem
        let mode: FileOpenMode = options.readOnly ? .readOnly : (options.create ? .readWriteCreate : .readWrite)
        let file = try fileSystem.open(path, mode: mode)
        self.file = file
        do {
            self.inodeLock = try options.lockTable.attach(fileSystem: fileSystem, file: file, readOnly: options.readOnly)
        } catch {
            file.close()
            throw error
        }
        // The journal and the directory syncs go by the file's resolved path: a connection that
        // opened it through a symbolic link finds the journal another left under the real name.
        let canonical: String
        do {
            canonical = try fileSystem.canonicalPath(path)
        } catch {
            options.lockTable.detach(inodeLock)
            file.close()
            throw error
        }
        self.canonicalPath = canonical
        self.journal = Journal(fileSystem: fileSystem, path: canonical + "-journal", pageSize: options.pageSize, readOnly: options.readOnly)
        self.header = DatabaseHeader(pageSize: options.pageSize, pageCount: 0)
        self.cache = PageCache(pageSize: options.pageSize, budget: options.cacheSize)
        do {
            try openDatabase()
        } catch {
            close()
            throw error
        }
    }

    deinit {
        if !closed { close() }
    }

    /// Closes the connection, rolling back an open write transaction and releasing its locks.
    public func close() {
        guard !closed else { return }
        if state == .write { try? rollback() }
        if state == .read { endRead() }
        unlock(to: .none)
        journal.close()
        options.lockTable.detach(inodeLock)
        file.close()
        closed = true
    }

    /// The page size of the file.
    public var pageSize: Int { header.pageSize }

    /// The bytes of a page available to its user (the page size less the checksum trailer).
    public var usableSize: Int { header.pageSize - PageLayout.trailerSize }

    /// The header as the current transaction sees it (the working copy inside a write transaction).
    public var currentHeader: DatabaseHeader { state == .write ? write.header : header }

    /// The number of pages as the current transaction sees it.
    public var pageCount: PageNumber { currentHeader.pageCount }

    /// The transaction now open.
    public var transactionState: TransactionState { state }

    /// The page cache's counters.
    public var cacheStatistics: PageCacheStatistics { cache.statistics }

    /// The lock this connection holds.
    public var lockLevel: LockLevel { level }

    /// Whether an earlier failed sync made this handle unusable.
    public var isPoisoned: Bool { poison != nil }

    // MARK: Opening

    private func openDatabase() throws {
        let deadline = ContinuousClock.now + options.busyTimeout
        var backoff = Backoff()
        while true {
            try acquireShared(deadline: deadline)
            defer { if state == .none { unlock(to: .none) } }
            fileSize = try file.size()
            if fileSize != 0 {
                try readHeader()
                return
            }
            guard !options.readOnly, options.create else {
                throw StoreError(.notADatabase, "the file is empty: it is not an Arbor database", path: path)
            }
            // An empty file: create the database — under the reserved lock, taken without waiting
            // while holding shared (lock rule 3: whoever holds reserved may be waiting for our
            // shared lock to go). Another connection may be creating it: let it finish.
            if try tryLock(.reserved) {
                fileSize = try file.size()
                if fileSize == 0 {
                    try initializeEmptyFile()
                    return
                }
                unlock(to: .shared)
                try readHeader()
                return
            }
            unlock(to: .none)
            guard ContinuousClock.now < deadline else { throw busyError("create the database") }
            backoff.wait()
        }
    }

    /// Writes page 1 of a new, empty file through an ordinary write transaction (journaled with an
    /// original page count of 0, so a crash leaves a hot journal that truncates the file to 0).
    /// Called with the reserved lock held.
    private func initializeEmptyFile() throws {
        var fresh = DatabaseHeader(pageSize: options.pageSize, pageCount: 0)
        fresh.fileID = DatabaseHeader.newFileID()
        header = fresh
        if cache.pageSize != fresh.pageSize { cache.reset(pageSize: fresh.pageSize, budget: options.cacheSize) }
        journal.setPageSize(fresh.pageSize)
        needsDirectorySync = true
        startWrite()
        write.header.pageCount = 1
        guard let frame = cache.frame(for: 1) else { preconditionFailure("empty cache has room") }
        cache.buffer(frame).initializeMemory(as: UInt8.self, repeating: 0)
        cache.markDirty(frame)
        write.changed = true
        try commit()
    }

    /// Reads page 1 from the file (bypassing the cache), validates it, and drops cached pages when
    /// another connection has committed since they were read.
    func readHeader() throws {
        // Fast path, at the start of most transactions: one read of the header's bytes; when they
        // decode to the header this connection has, change counter included, nothing else needs
        // checking. Every commit changes the counter, so page 1 is then as it was when its
        // checksum was verified; the page itself is read and verified only when they differ
        // (hashing all of it would add a whole page's checksum to every query that takes its lock
        // afresh, as every query does once retained locks have expired).
        if cacheChangeCounter != nil {
            let unchanged = try headerScratch.withUnsafeMutableBytes { bytes -> Bool in
                guard try file.readFully(into: bytes, at: 0),
                      bytes.loadLE(UInt64.self, at: 40) == cacheChangeCounter,
                      let decoded = try? DatabaseHeader.decode(UnsafeRawBufferPointer(bytes), path: path) else { return false }
                return decoded == header
            }
            if unchanged { return }
        }
        var prefix = [UInt8](repeating: 0, count: DatabaseHeader.size)
        let complete = try prefix.withUnsafeMutableBytes { try file.readFully(into: $0, at: 0) }
        guard complete else {
            throw StoreError(.notADatabase, "the file is too short (\(fileSize) bytes) to be an Arbor database", path: path)
        }
        let partial = try prefix.withUnsafeBytes { try DatabaseHeader.decode($0, path: path) }
        var page = [UInt8](repeating: 0, count: partial.pageSize)
        let fullPage = try page.withUnsafeMutableBytes { try file.readFully(into: $0, at: 0) }
        guard fullPage else {
            throw StoreError.corrupt(page: 1, "the file ends inside the header page", path: path)
        }
        let decoded = try page.withUnsafeBytes { raw -> DatabaseHeader in
            guard PageLayout.verify(raw, pageNumber: 1) else {
                throw StoreError.corrupt(page: 1, "checksum mismatch in the header page", path: path)
            }
            return try DatabaseHeader.decode(raw, path: path)
        }
        fileSize = try file.size()
        let needed = Int64(decoded.pageCount) * Int64(decoded.pageSize)
        guard fileSize >= needed else {
            throw StoreError(.corrupt, "the file is truncated: the header counts \(decoded.pageCount) pages (\(needed) bytes) but the file holds \(fileSize) bytes", page: 1, path: path)
        }
        if decoded.pageSize != cache.pageSize {
            cache.reset(pageSize: decoded.pageSize, budget: options.cacheSize)
            cacheChangeCounter = nil
        }
        journal.setPageSize(decoded.pageSize)
        header = decoded
        if cacheChangeCounter != decoded.changeCounter {
            dropCachedPages()
            cacheChangeCounter = decoded.changeCounter
            // Another connection committed: it may have grown the journal (step 4b asks again).
            journal.forgetLength()
        }
    }

    // MARK: Transactions

    /// Starts a read transaction: takes a shared lock (recovering a hot journal first if one is
    /// there) and sees the last committed state until ``endRead()``.
    public func beginRead() throws {
        try checkUsable()
        guard state == .none else {
            throw StoreError(.misuse, "a transaction is already open on this connection")
        }
        if try acquireShared() == .afresh {
            do {
                try readHeader()
            } catch {
                unlock(to: .none)
                throw error
            }
        }
        state = .read
    }

    /// Ends a read transaction and releases the shared lock — or keeps it for the next
    /// transaction, for at most ``PagerOptions/readLockRetention`` (lock rule 9).
    public func endRead() {
        guard state == .read else { return }
        state = .none
        checkPinsBalanced()
        if options.readLockRetention > .zero && poison == nil {
            inodeLock.retain(owner: ownerID, retention: options.readLockRetention)
            retainsSharedLock = true
        } else {
            unlock(to: .none)
        }
    }

    /// Starts a write transaction: takes the reserved lock (one writer at a time; readers go on).
    ///
    /// - Throws: `busy` when another connection keeps the write lock past the busy timeout,
    ///   `readOnly`, `poisoned`.
    public func beginWrite() throws {
        try checkUsable()
        guard !options.readOnly else {
            throw StoreError(.readOnly, "the database was opened read-only", path: path)
        }
        guard header.writeVersion <= DatabaseHeader.currentWriteVersion else {
            throw StoreError(.unsupportedVersion, "the file needs format version \(header.writeVersion) to write; this build writes version \(DatabaseHeader.currentWriteVersion)", path: path)
        }
        guard state == .none else {
            throw StoreError(.misuse, "a transaction is already open on this connection")
        }
        let deadline = ContinuousClock.now + options.busyTimeout
        var backoff = Backoff()
        while true {
            if try acquireShared(deadline: deadline) == .afresh {
                do {
                    try readHeader()
                } catch {
                    unlock(to: .none)
                    throw error
                }
            }
            // Never wait for the reserved lock while holding shared: the holder of reserved may be
            // waiting for our shared lock to go (deadlock). Drop it and start over instead.
            // A failure to lock (not a busy lock: an error) must not leave shared held.
            let reserved: Bool
            do {
                reserved = try tryLock(.reserved)
            } catch {
                unlock(to: .none)
                throw error
            }
            if reserved { break }
            unlock(to: .none)
            guard ContinuousClock.now < deadline else { throw busyError("write") }
            backoff.wait()
        }
        startWrite()
    }

    func startWrite() {
        appendHint = nil
        newDictionaries.removeAll()
        dictionarySamples.removeAll()
        var generator = SystemRandomNumberGenerator()
        write = WriteState()
        write.originalPageCount = header.pageCount
        write.header = header
        write.nonce = generator.next()
        state = .write
    }

    func checkUsable() throws {
        precondition(!closed, "the pager for \(path) is closed")
        if let poison {
            throw StoreError(.poisoned, "an earlier failure made this connection unusable (\(poison.message)); close it and open the file again", errno: poison.errno, path: path)
        }
    }

    // MARK: Locks

    /// How ``acquireShared(deadline:)`` got the shared lock.
    enum SharedAcquisition {
        /// Taken afresh: the header must be read (another connection may have committed).
        case afresh
        /// A retained lock resumed (lock rule 9): nothing can have changed since it was taken.
        case resumed
    }

    /// Takes the shared lock, waiting up to the busy timeout, and rolls back a hot journal —
    /// or resumes the lock this connection retained.
    @discardableResult
    func acquireShared(deadline: ContinuousClock.Instant? = nil) throws -> SharedAcquisition {
        if retainsSharedLock {
            retainsSharedLock = false
            if inodeLock.resume(owner: ownerID, retention: options.readLockRetention) { return .resumed }
            level = .none
        }
        let deadline = deadline ?? ContinuousClock.now + options.busyTimeout
        var backoff = Backoff()
        // When the first try failed: the wait is timed from there (none is timed otherwise).
        var waitingSince: ContinuousClock.Instant?
        while true {
            let (granted, firstReader) = try inodeLock.tryLock(.shared, owner: ownerID, current: level)
            if granted {
                level = .shared
                if let waitingSince { noteWait(for: .shared, since: waitingSince) }
                if !firstReader { return .afresh }
                do {
                    if try recoverIfHot(deadline: deadline) { return .afresh }
                } catch {
                    unlock(to: .none)
                    throw error
                }
                // Another connection is recovering or writing: let it finish.
                unlock(to: .none)
            }
            let now = ContinuousClock.now
            if waitingSince == nil { waitingSince = now }
            guard now < deadline else { throw busyTimeout("read", lock: .shared, since: waitingSince ?? now) }
            backoff.wait()
        }
    }

    /// Tries once to raise the lock.
    func tryLock(_ target: LockLevel) throws -> Bool {
        if level >= target { return true }
        let (granted, _) = try inodeLock.tryLock(target, owner: ownerID, current: level)
        if granted { level = target }
        return granted
    }

    /// Raises the lock, waiting up to the busy timeout.
    func waitForLock(_ target: LockLevel, deadline: ContinuousClock.Instant? = nil) throws {
        guard try !tryLock(target) else { return }
        let start = ContinuousClock.now
        let deadline = deadline ?? start + options.busyTimeout
        var backoff = Backoff()
        while try !tryLock(target) {
            guard ContinuousClock.now < deadline else { throw busyTimeout(target == .exclusive ? "write the file" : "write", lock: target, since: start) }
            backoff.wait()
        }
        noteWait(for: target, since: start)
    }

    /// Logs a lock wait that lasted at least ``PagerOptions/slowLockWait``.
    func noteWait(for lock: LockLevel, since start: ContinuousClock.Instant) {
        let waited = ContinuousClock.now - start
        guard waited >= options.slowLockWait else { return }
        options.logger.info("waited \(waited) for a \(lock) lock held by another connection",
                            metadata: ["arbor.path": "\(path)", "arbor.lock": "\(lock)", "arbor.waited": "\(waited)"])
    }

    /// The `busy` error of a lock not granted within the busy timeout, counted and logged (at
    /// `debug`: the caller receives the error).
    func busyTimeout(_ what: String, lock: LockLevel, since start: ContinuousClock.Instant) -> StoreError {
        statistics.busyTimeouts += 1
        let waited = ContinuousClock.now - start
        options.logger.debug("gave up waiting for a \(lock) lock after \(waited): another connection held it past the busy timeout",
                             metadata: ["arbor.path": "\(path)", "arbor.lock": "\(lock)", "arbor.waited": "\(waited)"])
        return busyError(what)
    }

    func unlock(to target: LockLevel) {
        if retainsSharedLock {
            retainsSharedLock = false
            inodeLock.releaseRetained(owner: ownerID)
            level = .none
        }
        guard level > target else { return }
        inodeLock.unlock(to: target, owner: ownerID, current: level)
        level = target
    }

    func busyError(_ what: String) -> StoreError {
        StoreError(.busy, "the database is locked by another connection (waited \(options.busyTimeout) to \(what)); try again later or raise the busy timeout", path: path)
    }
}

/// Exponential back-off for lock waits: 50 µs doubling to 5 ms.
struct Backoff {
    var microseconds: UInt32 = 50

    mutating func wait() {
        usleep(microseconds)
        microseconds = min(microseconds * 2, 5000)
    }
}
