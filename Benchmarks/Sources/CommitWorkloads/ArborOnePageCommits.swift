import ArborStore
import ArborTestSupport

/// Arbor's durable one-page commit: `beginWrite`, rewrite one existing page, `commit`, on a real
/// file through ``PosixFileSystem``.
///
/// The commit journals the page's original image and page 1's (the header's change counter
/// changes too), syncs the journal, writes both pages, syncs the database, invalidates the journal
/// and syncs it again: three syncs. The journal file is kept between transactions, so the
/// directory is synced only once, when the file is created (in `init`, before measuring).
public final class ArborOnePageCommits: DurableCommitWorkload {
    public let engine = "Arbor"
    /// The directory holding the database and its journal.
    public let directory: ScratchDirectory
    /// The database file's path.
    public let path: String
    let pager: Pager
    /// The page every commit rewrites.
    let page: PageNumber
    /// The value the last commit stored at the start of the page.
    private(set) var counter: UInt64 = 0
    private var random = SplitMix64(seed: 0x4172_626F_72)
    private var body: [UInt8]

    /// Creates a database with page size `pageSize` holding one page besides the header page.
    public init(pageSize: Int = 4096) throws {
        directory = try ScratchDirectory(prefix: "arbor-commits")
        path = directory.path + "/commits.arbor"
        var options = PagerOptions()
        options.pageSize = pageSize
        do {
            pager = try Pager(path: path, fileSystem: PosixFileSystem.shared, options: options)
            body = [UInt8](repeating: 0, count: pager.usableSize)
            try pager.beginWrite()
            page = try pager.allocatePage()
            try pager.commit()
        } catch {
            directory.remove()
            throw error
        }
    }

    /// One transaction rewriting the whole body of the page (seeded random bytes, the commit's
    /// number in the first 8).
    public func commitOne() throws {
        counter &+= 1
        body.withUnsafeMutableBytes { bytes in
            var i = 8
            while i + 8 <= bytes.count {
                bytes.storeBytes(of: random.next(), toByteOffset: i, as: UInt64.self)
                i += 8
            }
            bytes.storeBytes(of: counter.littleEndian, toByteOffset: 0, as: UInt64.self)
        }
        try pager.beginWrite()
        do {
            try body.withUnsafeBytes { source in
                try pager.withMutablePage(page) { $0.copyMemory(from: source) }
            }
            try pager.commit()
        } catch {
            if pager.transactionState == .write { try? pager.rollback() }
            throw error
        }
    }

    public var syncs: SyncCounts {
        let statistics = pager.statistics
        return SyncCounts(journal: statistics.journalSyncs, database: statistics.databaseSyncs,
                          directory: statistics.directorySyncs)
    }

    /// Reads the page back through a fresh connection (so from the file, not the cache).
    public func verify() throws {
        let reader = try Pager(path: path)
        defer { reader.close() }
        try reader.beginRead()
        defer { reader.endRead() }
        let stored = try reader.withPage(page) { bytes in
            (UInt64(littleEndian: bytes.loadUnaligned(as: UInt64.self)), bytes.elementsEqual(body))
        }
        guard stored.0 == counter, stored.1 else {
            throw WorkloadError("Arbor: page \(page) holds commit \(stored.0) (body intact: \(stored.1)), expected commit \(counter)")
        }
    }

    public func close() {
        pager.close()
        directory.remove()
    }
}
