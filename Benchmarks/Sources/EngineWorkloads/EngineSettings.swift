/// The settings both engines run with, so that neither gets more memory or a different page.
///
/// - Arbor: `DatabaseOptions.pageSize = pageSize`, `DatabaseOptions.cacheSize = cacheBytes`
///   (everything else default: LZ4 for values of 256 bytes or more, rollback journal kept between
///   transactions, every commit synced).
/// - SQLite: `PRAGMA page_size=<pageSize>; PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL;
///   PRAGMA cache_size=-<cacheBytes / 1024>` (a negative cache size is a budget in KiB), the
///   default unix VFS, locking_mode NORMAL (locks taken per transaction, as Arbor does), no mmap.
public struct EngineSettings: Sendable {
    /// The page size of both files.
    public var pageSize = 4096
    /// Each connection's page-cache budget in bytes (64 MiB unless changed).
    public var cacheBytes = 64 << 20

    /// The defaults: 4096-byte pages, a 64 MiB cache.
    public init() {}

    /// The cache budget in whole MiB, for reports.
    public var cacheMiB: Int { cacheBytes >> 20 }
}
