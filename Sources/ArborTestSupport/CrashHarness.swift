import ArborStore

/// Crash testing of the pager on a ``SimulatedDisk``: for each transaction, a power cut at every
/// I/O operation it performs, with several kinds of damage each, then recovery and a check that
/// the file holds exactly the last acknowledged commit until the journal's invalidation is
/// written, either state until its sync (the commit point), and the new one after it (step 4b, the
/// journal's trim, comes after it).
public struct CrashHarness {
    /// What a campaign checked.
    public struct Report: Sendable, CustomStringConvertible {
        /// Crash images recovered and verified.
        public var images = 0
        /// Of those, the ones where a second power cut hit the recovery itself.
        public var recoveryCrashes = 0
        /// Transactions run.
        public var transactions = 0
        /// Of those, the ones that trimmed the journal back to its size limit (step 4b).
        public var journalTrims = 0
        /// Failures, each with the seed and crash point that reproduce it.
        public var failures: [String] = []

        public var description: String {
            "\(images) crash images (\(recoveryCrashes) with a crash during recovery) over \(transactions) transactions (\(journalTrims) trimming the journal), \(failures.count) failures"
        }
    }

    /// The damage patterns applied at each crash point.
    public static func damages(seed: UInt64) -> [SimulatedDisk.PowerCutDamage] {
        [.dropAll, .applyAll, .random(seed: seed), .tearAll(seed: seed &+ 1)]
    }

    public let pageSize: Int
    public let cacheSize: Int
    public let journalSizeLimit: Int?
    public let path = "/crash.db"

    /// Creates a harness for one page size; `cachePages` small enough makes large transactions
    /// spill, and a `journalSizeLimit` of a few pages makes most transactions trim the journal.
    public init(pageSize: Int, cachePages: Int = 16, journalSizeLimit: Int? = PagerOptions.defaultJournalSizeLimit) {
        self.pageSize = pageSize
        self.cacheSize = cachePages * pageSize
        self.journalSizeLimit = journalSizeLimit
    }

    /// The commit point of a transaction traced on the disk (``SimulatedDisk/startTrace()``):
    /// `sync`, the number (counting from 1 after operation `before`) of its step 4 sync — the first
    /// sync of the journal after the last sync of `database` (step 3's) — and `invalidation`, the
    /// number of the write that zeroed the journal header before it. A cut up to `invalidation`
    /// must leave the old state; after it, up to `sync`, either; after `sync`, the new one. Nil
    /// when the trace has no commit.
    public static func commitPoint(in trace: [String], database: String, after before: Int) -> (invalidation: Int, sync: Int)? {
        let operations = trace.compactMap { line -> (Int, Substring)? in
            guard let colon = line.firstIndex(of: ":"), let number = Int(line[..<colon]) else { return nil }
            return (number, line[line.index(colon, offsetBy: 2)...])
        }
        guard let step3 = operations.lastIndex(where: { $0.1 == "sync \(database)" }),
              let step4 = operations[step3...].firstIndex(where: { $0.1 == "sync \(database)-journal" }),
              let zeroing = operations[step3..<step4].lastIndex(where: { $0.1 == "write \(database)-journal @0 +512" }) // the header block
        else { return nil }
        return (operations[zeroing].0 - before, operations[step4].0 - before)
    }

    /// The options the harness opens the file with.
    public func options(_ table: LockTable) -> PagerOptions {
        var options = PagerOptions()
        options.pageSize = pageSize
        options.cacheSize = cacheSize
        options.lockTable = table
        options.busyTimeout = .milliseconds(100)
        options.logger = .quietStore
        options.journalSizeLimit = journalSizeLimit
        return options
    }

    /// Opens the file as a freshly booted process would (its own lock table).
    public func open(_ disk: SimulatedDisk) throws -> Pager {
        try Pager(path: path, fileSystem: disk, options: options(LockTable()))
    }

    /// Runs `transactions` random transactions; for each, crashes at every I/O operation with each
    /// damage pattern and verifies the recovered file. Every `recoveryEvery`-th image also crashes
    /// during recovery, at every operation of the recovery, before recovering for good.
    public func run(seed: UInt64, transactions: Int, recoveryEvery: Int = 7) -> Report {
        // Long: one loop per transaction (dry run, a cut at every operation with each damage,
        // replay) sharing the disk snapshot, the model and the commit point a failure's message
        // names.
        var report = Report()
        let disk = SimulatedDisk()
        var model = PageModel()
        var random = SplitMix64(seed: seed)
        do {
            // A populated starting file.
            let setup = try open(disk)
            for _ in 0..<3 { model = try PageWorkload.runTransaction(setup, model: model, seed: random.next()) }
            setup.close()
        } catch {
            report.failures.append("seed \(seed): setup failed: \(error)")
            return report
        }

        for t in 0..<transactions {
            let txSeed = random.next()
            let large = t % 5 == 4
            let base = disk.snapshot()
            report.transactions += 1

            // Dry run: count the I/O operations of the transaction, find its commit point, and
            // learn its outcome.
            let next: PageModel
            let operations: Int
            let commitPoint: (invalidation: Int, sync: Int)
            do {
                let pager = try open(disk)
                let before = disk.operationCount
                disk.startTrace()
                defer { disk.stopTrace() }
                next = try PageWorkload.runTransaction(pager, model: model, seed: txSeed, large: large)
                operations = disk.operationCount - before
                guard let point = Self.commitPoint(in: disk.trace, database: path, after: before) else {
                    report.failures.append("seed \(seed) tx \(t) (\(txSeed)): no commit point in the dry run's trace")
                    return report
                }
                commitPoint = point
                if pager.statistics.journalTrims > 0 { report.journalTrims += 1 }
                pager.close()
            } catch {
                report.failures.append("seed \(seed) tx \(t) (\(txSeed)): dry run failed: \(error)")
                return report
            }

            for point in 1...operations {
                for damage in Self.damages(seed: txSeed &+ UInt64(point)) {
                    disk.restore(base)
                    let context = "seed \(seed) tx \(t) txSeed \(txSeed) large \(large) crash at op \(point)/\(operations) (commit point \(commitPoint.sync)) \(damage)"
                    do {
                        let pager = try open(disk)
                        disk.inject(.powerCut(damage), atOperation: point)
                        let survived = (try? PageWorkload.runTransaction(pager, model: model, seed: txSeed, large: large)) != nil
                        pager.close()
                        // Past the commit point (a cut in step 4b) the transaction has happened and
                        // commit() returns; before it, or at it, commit() throws.
                        if survived != (point > commitPoint.sync) {
                            report.failures.append("\(context): the transaction \(survived ? "succeeded despite" : "failed after its commit point, at") the power cut")
                            continue
                        }
                        disk.clearFaults()
                        report.images += 1
                        // The old state until the journal's invalidation is issued, either until its
                        // sync (the commit point), the new one after it.
                        let acceptable = point <= commitPoint.invalidation ? [("old", model)]
                            : point <= commitPoint.sync ? [("old", model), ("new", next)] : [("new", next)]
                        let verify = { (recovered: Pager) throws -> String? in
                            var mismatches: [String] = []
                            for (name, state) in acceptable {
                                guard let mismatch = try PageWorkload.mismatch(recovered, state) else { return nil }
                                mismatches.append("differs from the \(name) state: \(mismatch)")
                            }
                            return "recovered file " + mismatches.joined(separator: "; ")
                        }
                        if report.images % recoveryEvery == 0 {
                            let crashes = crashDuringRecovery(disk, context: context, report: &report, verify: verify)
                            report.recoveryCrashes += crashes
                            report.images += crashes
                        }
                        let recovered = try open(disk)
                        defer { recovered.close() }
                        if let problem = try verify(recovered) {
                            report.failures.append("\(context): \(problem)")
                        }
                    } catch {
                        report.failures.append("\(context): \(error)")
                    }
                    if report.failures.count > 5 { return report }
                }
            }
            // Move on from the committed state.
            disk.restore(base)
            do {
                let pager = try open(disk)
                model = try PageWorkload.runTransaction(pager, model: model, seed: txSeed, large: large)
                pager.close()
            } catch {
                report.failures.append("seed \(seed) tx \(t): replay failed: \(error)")
                return report
            }
        }
        return report
    }

    /// With a crashed image on `disk`, cuts the power at every operation of its recovery (each time
    /// from the same crashed image), then recovers again and checks the result with `verify`.
    /// Restores the crashed image afterwards. Returns the number of recovery crashes checked.
    func crashDuringRecovery(_ disk: SimulatedDisk, context: String, report: inout Report,
                             verify: (Pager) throws -> String?) -> Int {
        let crashed = disk.snapshot()
        defer { disk.restore(crashed) }
        let before = disk.operationCount
        guard let pager = try? open(disk) else { return 0 }
        let operations = disk.operationCount - before
        pager.close()
        var count = 0
        for point in 1...max(1, operations) {
            disk.restore(crashed)
            disk.inject(.powerCut(.random(seed: UInt64(point))), atOperation: point)
            if let pager = try? open(disk) { pager.close() }
            disk.clearFaults()
            count += 1
            do {
                let recovered = try open(disk)
                defer { recovered.close() }
                if let problem = try verify(recovered) {
                    report.failures.append("\(context), then a crash at recovery op \(point)/\(operations): \(problem)")
                }
            } catch {
                report.failures.append("\(context), then a crash at recovery op \(point)/\(operations): \(error)")
            }
        }
        return count
    }
}
