import ArborStore
import CoreMetrics
import Foundation
import Logging

/// Where the object graph reports what an operator looks at: its logger (label `arbor.graph`), its
/// metrics, and the threshold past which a fetch is logged as slow (docs/observability.md).
///
/// Give it to ``PersistentStoreCoordinator/init(managedObjectModel:observability:)`` or
/// ``PersistentContainer/init(name:managedObjectModel:observability:)``. The engine under each
/// store logs through its own logger (`DatabaseOptions.logger`, label `arbor.store`).
///
/// ```swift
/// var observability = ObjectGraphObservability()
/// observability.slowFetchThreshold = .milliseconds(50)
/// let container = PersistentContainer(name: "Catalogue", managedObjectModel: model, observability: observability)
/// ```
public struct ObjectGraphObservability: Sendable {
    /// The logger: stores added or failing to open, slow fetches, failed saves.
    public var logger = Logger(label: "arbor.graph")
    /// Makes the object graph's metrics (row-cache hits and misses, snapshots held, saves, save
    /// and fetch latency): nil for the process's bootstrapped `MetricsSystem.factory` at the time
    /// the coordinator is made.
    public var metricsFactory: (any MetricsFactory)?
    /// A fetch taking at least this long is logged (`warning`, with its plan) and counted as
    /// slow; nil turns this off.
    public var slowFetchThreshold: Duration? = .milliseconds(250)

    /// The defaults: label `arbor.graph`, the bootstrapped metrics, slow fetches from 250 ms.
    public init() {}
}

/// A coordinator's logger and metrics, made once with it. Contexts report each root save, each
/// failed save and each fetch; the row cache's counters (kept as plain integers by the cache)
/// are reported as increments at each save, and at a fetch when a second has passed since the
/// last report.
final class ObjectGraphObserver: Sendable {
    /// Whether a metrics backend is there (not swift-metrics' no-op handler): without one the
    /// row cache is not read for reports and nothing is recorded.
    let metricsEnabled: Bool
    let logger: Logger
    let slowFetchThreshold: Duration?
    let rowCacheHits: Counter
    let rowCacheMisses: Counter
    let rowCacheStaleReads: Counter
    let snapshots: Gauge
    let saves: Counter
    let saveFailures: Counter
    let saveDuration: CoreMetrics.Timer
    let fetchDuration: CoreMetrics.Timer
    let slowFetches: Counter
    /// The row cache's counters as last reported, and when (under its lock).
    private let reported = LockedValue<(statistics: RowCacheStatistics, at: ContinuousClock.Instant)>((RowCacheStatistics(), .now))

    init(_ observability: ObjectGraphObservability) {
        let factory = observability.metricsFactory ?? MetricsSystem.factory
        metricsEnabled = !(factory is NOOPMetricsHandler)
        logger = observability.logger
        slowFetchThreshold = observability.slowFetchThreshold
        rowCacheHits = Counter(label: "arbor_row_cache_hits", factory: factory)
        rowCacheMisses = Counter(label: "arbor_row_cache_misses", factory: factory)
        rowCacheStaleReads = Counter(label: "arbor_row_cache_stale_reads", factory: factory)
        snapshots = Gauge(label: "arbor_row_cache_snapshots", factory: factory)
        saves = Counter(label: "arbor_saves", factory: factory)
        saveFailures = Counter(label: "arbor_save_failures", factory: factory)
        saveDuration = CoreMetrics.Timer(label: "arbor_save_duration", factory: factory)
        fetchDuration = CoreMetrics.Timer(label: "arbor_fetch_duration", factory: factory)
        slowFetches = Counter(label: "arbor_slow_fetches", factory: factory)
    }

    // MARK: Events

    /// A root context's save to `coordinator`'s stores wrote its changes.
    func saved(duration: Duration, _ coordinator: PersistentStoreCoordinator) {
        saves.increment()
        saveDuration.recordNanoseconds(duration.wholeNanoseconds)
        reportRowCache(of: coordinator, now: .now, force: true)
    }

    /// A save threw `error`: logged at `debug` whatever its kind — the caller receives it and
    /// decides — and counted (`arbor_save_failures`).
    func saveFailed(_ error: any Error, context: String?) {
        saveFailures.increment()
        let arbor = error as? ArborError
        logger.debug("a save failed: \(arbor.map { "\($0.code): \($0.message)" } ?? "\(error)")",
                     metadata: ["arbor.context": "\(context ?? "unnamed")", "arbor.error": "\(error)"])
    }

    /// A fetch of `request` returned `results` results in `duration`; `plan` gives its plan, asked
    /// only when the fetch was slow.
    func fetched<Result>(_ request: FetchRequest<Result>, from coordinator: PersistentStoreCoordinator, results: Int, duration: Duration,
                         plan: () throws -> String) {
        if metricsEnabled { fetchDuration.recordNanoseconds(duration.wholeNanoseconds) }
        if let slowFetchThreshold, duration >= slowFetchThreshold {
            slowFetches.increment()
            logger.warning("a fetch of \(request.entityName) took \(duration) (\(results) results)", metadata: [
                "arbor.entity": "\(request.entityName)", "arbor.duration": "\(duration)", "arbor.results": "\(results)",
                "arbor.predicate": "\(request.predicate?.predicateFormat ?? "none")",
                "arbor.plan": "\((try? plan()) ?? "unknown")",
            ])
        }
        reportRowCache(of: coordinator, now: .now, force: false)
    }

    /// A store was added to the coordinator.
    func added(_ store: any PersistentStore, model: ManagedObjectModel) {
        logger.debug("added \(store.type) store \(store.path ?? "in memory")", metadata: [
            "arbor.path": "\(store.path ?? "memory")", "arbor.store": "\(store.identifier)", "arbor.model": "\(model.versionHashString)",
        ])
    }

    /// A store at `path` failed to open (logged at `debug`: the caller receives the error).
    func storeFailedToOpen(_ path: String, _ error: any Error) {
        logger.debug("could not open the store at \(path): \(error)", metadata: ["arbor.path": "\(path)", "arbor.error": "\(error)"])
    }

    /// Reports the row cache's counters since the last report: always with `force`, else when a
    /// second has passed. (The coordinator, which owns this observer, is handed in rather than
    /// held: a weak reference to it would give it a side table, and every count of a reference
    /// to it would take the runtime's slow path.)
    func reportRowCache(of coordinator: PersistentStoreCoordinator, now: ContinuousClock.Instant, force: Bool) {
        guard metricsEnabled else { return }
        let due = reported.withLock { last -> Bool in
            guard force || now - last.at >= .seconds(1) else { return false }
            last.at = now
            return true
        }
        guard due else { return }
        let current = coordinator.rowCacheStatistics
        let before = reported.withLock { last -> RowCacheStatistics in
            defer { last.statistics = current }
            return last.statistics
        }
        if current.hits > before.hits { rowCacheHits.increment(by: Int64(current.hits - before.hits)) }
        if current.misses > before.misses { rowCacheMisses.increment(by: Int64(current.misses - before.misses)) }
        if current.staleReads > before.staleReads { rowCacheStaleReads.increment(by: Int64(current.staleReads - before.staleReads)) }
        snapshots.record(current.snapshots)
    }
}
