import CoreMetrics

/// The engine's metrics for one database file (docs/observability.md, "Metrics"): made once when
/// the ``Database`` opens, and fed at the end of each transaction with what its connection counted
/// since it last reported — the hot paths keep counting in plain integers, as before.
final class StoreMetrics: Sendable {
    /// Whether a metrics backend is there (not swift-metrics' no-op handler): without one a
    /// transaction reports nothing at all.
    let enabled: Bool
    let pageCacheHits: Counter
    let pageCacheMisses: Counter
    let pageCacheEvictions: Counter
    let pageCachePages: Gauge
    let commits: Counter
    let journalSyncs: Counter
    let databaseSyncs: Counter
    let directorySyncs: Counter
    let pagesWritten: Counter
    let recoveries: Counter
    let journalTrims: Counter
    let busy: Counter
    let commitDuration: Timer

    init(path: String, factory: any MetricsFactory) {
        enabled = !(factory is NOOPMetricsHandler)
        let file = [("path", path)]
        pageCacheHits = Counter(label: "arbor_store_page_cache_hits", dimensions: file, factory: factory)
        pageCacheMisses = Counter(label: "arbor_store_page_cache_misses", dimensions: file, factory: factory)
        pageCacheEvictions = Counter(label: "arbor_store_page_cache_evictions", dimensions: file, factory: factory)
        pageCachePages = Gauge(label: "arbor_store_page_cache_pages", dimensions: file, factory: factory)
        commits = Counter(label: "arbor_store_commits", dimensions: file, factory: factory)
        journalSyncs = Counter(label: "arbor_store_syncs", dimensions: file + [("file", "journal")], factory: factory)
        databaseSyncs = Counter(label: "arbor_store_syncs", dimensions: file + [("file", "database")], factory: factory)
        directorySyncs = Counter(label: "arbor_store_syncs", dimensions: file + [("file", "directory")], factory: factory)
        pagesWritten = Counter(label: "arbor_store_pages_written", dimensions: file, factory: factory)
        recoveries = Counter(label: "arbor_store_recoveries", dimensions: file, factory: factory)
        journalTrims = Counter(label: "arbor_store_journal_trims", dimensions: file, factory: factory)
        busy = Counter(label: "arbor_store_busy", dimensions: file, factory: factory)
        commitDuration = Timer(label: "arbor_store_commit_duration", dimensions: file, factory: factory)
    }

    /// What one connection has counted, as last reported.
    struct Counts {
        var cache = PageCacheStatistics()
        var pager = PagerStatistics()
    }

    /// Reports what `pager` counted since `reported`, and remembers it (callers skip it when
    /// the metrics are not ``enabled``).
    func report(_ pager: Pager, since reported: inout Counts) {
        let cache = pager.cacheStatistics, io = pager.statistics
        func add(_ counter: Counter, _ now: UInt64, _ before: UInt64) {
            if now > before { counter.increment(by: Int64(clamping: now - before)) }
        }
        add(pageCacheHits, cache.hits, reported.cache.hits)
        add(pageCacheMisses, cache.misses, reported.cache.misses)
        add(pageCacheEvictions, cache.evictions, reported.cache.evictions)
        pageCachePages.record(cache.pages)
        add(commits, io.commits, reported.pager.commits)
        add(journalSyncs, io.journalSyncs, reported.pager.journalSyncs)
        add(databaseSyncs, io.databaseSyncs, reported.pager.databaseSyncs)
        add(directorySyncs, io.directorySyncs, reported.pager.directorySyncs)
        add(pagesWritten, io.pagesWritten, reported.pager.pagesWritten)
        add(recoveries, io.recoveries, reported.pager.recoveries)
        add(journalTrims, io.journalTrims, reported.pager.journalTrims)
        add(busy, io.busyTimeouts, reported.pager.busyTimeouts)
        reported = Counts(cache: cache, pager: io)
    }
}
