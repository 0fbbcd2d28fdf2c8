import CommitWorkloads
import Foundation

/// Durable saves from several writers at once on one database file (issue 6, item 10): each
/// writer runs on a thread of its own and makes small saves that change only its own row, so
/// writers never conflict; they only wait for one another.
///
/// A workload is shared by its writers' threads: ``save(writer:)`` for writer `w` is called only
/// from writer `w`'s thread, never twice at once, and touches only that writer's state (so the
/// conforming classes are `@unchecked Sendable`); everything else is called from one thread while
/// no writer runs.
public protocol ConcurrentSaveWorkload: AnyObject, Sendable {
    /// The engine and the way its writers share the file, as printed in reports.
    var engine: String { get }
    /// How many writers (contexts, connections or threads) save at once.
    var writers: Int { get }
    /// The kind of file system holding the files (`ext4`, `tmpfs`…): durable-save figures mean
    /// nothing on tmpfs.
    var fileSystemName: String { get }
    /// One durable save by writer `writer`: its row's `value` goes up by one.
    func save(writer: Int) throws
    /// Saves the engine refused and the workload then made again (SQLite's `SQLITE_BUSY` when
    /// its busy handler gave up or was not called); each counts once in the saves too.
    var retries: Int { get }
    /// Reads every writer's row back from the file; throws unless each holds `saves`.
    func verify(savesPerWriter saves: Int) throws
    /// Closes the database and removes its scratch directory.
    func remove()
}

/// What one run of ``runConcurrently(_:savesPerWriter:)`` measured.
public struct ConcurrentSaveRun: Sendable {
    /// All the saves made (writers × saves per writer).
    public var saves: Int
    /// From the moment every writer was released until the last one finished.
    public var elapsed: Duration
    /// Each writer's time from the release to its last save's return.
    public var writerTimes: [Duration]

    /// Saves per second over the whole run.
    public var rate: Double { Double(saves) / elapsed.seconds }

    /// The last writer's time over the first one's (1 when all finish together; large when some
    /// writers were starved while others ran).
    public var spread: Double {
        guard let first = writerTimes.min(), let last = writerTimes.max(), first > .zero else { return 1 }
        return last.seconds / first.seconds
    }
}

/// Runs `savesPerWriter` saves on every writer of `workload`, each writer on a thread of its own,
/// all released together once every thread has started; the time runs from the release until the
/// last writer is done.
///
/// - Throws: the first writer's error (the other writers finish their loops first).
public func runConcurrently(_ workload: any ConcurrentSaveWorkload, savesPerWriter: Int) throws -> ConcurrentSaveRun {
    let writers = workload.writers
    let ready = DispatchGroup()
    let done = DispatchGroup()
    let gate = DispatchSemaphore(value: 0)
    let results = WriterResults(count: writers)
    let clock = ContinuousClock()
    // The release instant, written before the gate opens and read by the writers after it: the
    // semaphore orders the two.
    let release = ReleaseInstant()
    for writer in 0..<writers {
        ready.enter()
        done.enter()
        let thread = Thread {
            ready.leave()
            gate.wait()
            var failure: (any Error)?
            do {
                for _ in 0..<savesPerWriter { try workload.save(writer: writer) }
            } catch {
                failure = error
            }
            results.record(writer: writer, time: clock.now - release.instant, failure: failure)
            done.leave()
        }
        thread.name = "\(workload.engine) writer \(writer)"
        thread.start()
    }
    ready.wait()
    release.instant = clock.now
    for _ in 0..<writers { gate.signal() }
    done.wait()
    let elapsed = clock.now - release.instant
    let (times, failure) = results.collected()
    if let failure { throw failure }
    return ConcurrentSaveRun(saves: writers * savesPerWriter, elapsed: elapsed, writerTimes: times)
}

/// The start instant shared with the writers (see ``runConcurrently(_:savesPerWriter:)``).
private final class ReleaseInstant: @unchecked Sendable {
    var instant = ContinuousClock.now
}

/// The writers' finish times and first error, behind a lock.
private final class WriterResults: @unchecked Sendable {
    private let lock = NSLock()
    private var times: [Duration]
    private var failure: (any Error)?

    init(count: Int) { times = Array(repeating: .zero, count: count) }

    func record(writer: Int, time: Duration, failure: (any Error)?) {
        lock.lock()
        defer { lock.unlock() }
        times[writer] = time
        if self.failure == nil, let failure { self.failure = failure }
    }

    func collected() -> ([Duration], (any Error)?) {
        lock.lock()
        defer { lock.unlock() }
        return (times, failure)
    }
}
