import ArborStore

/// Model-based testing of ``Database`` on a ``SimulatedDisk``: random sequences of puts, deletes,
/// gets, seeks, scans, tree creation and drops, commits, rollbacks, reopens and power cuts,
/// checked step by step against an in-memory sorted map per tree.
public struct DatabaseModelHarness {
    /// What a run did.
    public struct Report: Sendable, CustomStringConvertible {
        /// Tree operations executed and checked.
        public var operations = 0
        /// Transactions committed.
        public var commits = 0
        /// Transactions rolled back.
        public var rollbacks = 0
        /// Power cuts injected (each followed by recovery and an integrity check).
        public var powerCuts = 0
        /// Clean reopens.
        public var reopens = 0
        /// What went wrong, with the seed and step to reproduce it.
        public var failures: [String] = []

        public var description: String {
            "\(operations) operations, \(commits) commits, \(rollbacks) rollbacks, \(powerCuts) power cuts, \(reopens) reopens, \(failures.count) failures"
        }
    }

    typealias Model = [String: [[UInt8]: [UInt8]]]

    public let pageSize: Int
    /// The journal size limit the database is opened with (a few pages makes most transactions
    /// trim the journal, step 4b of the commit protocol).
    public let journalSizeLimit: Int?
    let path = "/model.arbor"

    /// Creates a harness for one page size.
    public init(pageSize: Int, journalSizeLimit: Int? = PagerOptions.defaultJournalSizeLimit) {
        self.pageSize = pageSize
        self.journalSizeLimit = journalSizeLimit
    }

    func options(_ disk: SimulatedDisk) -> DatabaseOptions {
        var options = DatabaseOptions()
        options.fileSystem = disk
        options.logger = .quietStore
        options.lockTable = LockTable()
        options.pageSize = pageSize
        options.cacheSize = 24 * pageSize
        options.compressionThreshold = 64
        // Small dictionaries, so that trees get them often (and values compressed both ways mix).
        options.compressionDictionarySize = 700
        options.busyTimeout = .milliseconds(100)
        options.journalSizeLimit = journalSizeLimit
        return options
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs until `operations` tree operations have been checked.
    public func run(seed: UInt64, operations target: Int) -> Report {
        // Long: one random step per iteration (reopen, commit, rollback, power cut), each outcome
        // checked against the model where it happens; the branches share the database, the model
        // and its working copy.
        var report = Report()
        var random = SplitMix64(seed: seed)
        let disk = SimulatedDisk()
        var model: Model = [:]
        var database: Database
        do {
            database = try Database(path: path, options: options(disk))
        } catch {
            report.failures.append("seed \(seed): open failed: \(error)")
            return report
        }
        var step = 0
        while report.operations < target && report.failures.isEmpty {
            step += 1
            let context = "seed \(seed) step \(step)"
            let roll = random.next() % 100
            if roll < 4 {
                // A clean reopen.
                database.close()
                do {
                    database = try Database(path: path, options: options(disk))
                    report.reopens += 1
                    if let problem = try compare(database, model) { report.failures.append("\(context) after reopen: \(problem)") }
                } catch {
                    report.failures.append("\(context): reopen failed: \(error)")
                }
                continue
            }
            let cut = roll < 10
            let rollback = !cut && roll < 22
            var working = model
            var operationsDone = 0
            if cut {
                let damages: [SimulatedDisk.PowerCutDamage] = [.dropAll, .applyAll, .random(seed: random.next()), .tearAll(seed: random.next())]
                disk.inject(.powerCut(damages[Int(random.next() % 4)]), atOperation: 1 + Int(random.next() % 40))
            }
            struct Rollback: Error {}
            do {
                try database.write { transaction in
                    try randomTransaction(transaction, &working, &random, &operationsDone)
                    if rollback { throw Rollback() }
                }
                model = working
                report.commits += 1
                report.operations += operationsDone
                if cut && !disk.faultPending {
                    // The cut fell after the commit point (on the journal's trim, step 4b): the
                    // commit stands. A new process opens, and must find it.
                    report.powerCuts += 1
                    database.close()
                    do {
                        database = try Database(path: path, options: options(disk))
                        let integrity = try database.checkIntegrity()
                        if !integrity.isSound {
                            report.failures.append("\(context) after a power cut past the commit point: integrity: \(integrity.problems.map(\.description).joined(separator: "; "))")
                        }
                        if let problem = try compare(database, model) {
                            report.failures.append("\(context) after a power cut past the commit point: \(problem)")
                        }
                    } catch {
                        report.failures.append("\(context): reopening after a power cut past the commit point failed: \(error)")
                    }
                } else if cut {
                    // The cut did not happen inside this transaction: clear it before it hits a later one.
                    disk.clearFaults()
                }
            } catch is Rollback {
                report.rollbacks += 1
                report.operations += operationsDone
            } catch let failure as Failure {
                report.failures.append("\(context): \(failure)")
            } catch let error as StoreError where cut {
                _ = error
                // Power lost mid-transaction: a new process opens, recovers and checks.
                disk.clearFaults()
                report.powerCuts += 1
                database.close()
                do {
                    database = try Database(path: path, options: options(disk))
                    let integrity = try database.checkIntegrity()
                    if !integrity.isSound {
                        report.failures.append("\(context) after a power cut: integrity: \(integrity.problems.map(\.description).joined(separator: "; "))")
                    }
                    if try compare(database, model) == nil {
                        // The transaction was lost, as it may be.
                    } else if try compare(database, working) == nil {
                        model = working
                    } else {
                        report.failures.append("\(context) after a power cut: matches neither the old nor the new state: \(try compare(database, model) ?? "")")
                    }
                    report.operations += operationsDone
                } catch {
                    report.failures.append("\(context): recovery failed: \(error)")
                }
            } catch {
                report.failures.append("\(context): unexpected error \(error)")
            }
        }
        if report.failures.isEmpty {
            do {
                if let problem = try compare(database, model) { report.failures.append("seed \(seed) at the end: \(problem)") }
                let integrity = try database.checkIntegrity()
                if !integrity.isSound { report.failures.append("seed \(seed) at the end: \(integrity.problems)") }
            } catch {
                report.failures.append("seed \(seed) at the end: \(error)")
            }
        }
        database.close()
        return report
    }

    static let treeNames = ["alpha", "beta", "gamma"]

    func randomKey(_ random: inout SplitMix64) -> [UInt8] {
        let length = 1 + Int(random.next() % 12)
        return (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next() % 5 + 0x61) }
    }

    func randomValue(_ random: inout SplitMix64) -> [UInt8] {
        switch random.next() % 12 {
        case 0: return (0..<(pageSize + Int(random.next() % UInt64(3 * pageSize)))).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        case 1: return Array(repeating: UInt8(random.next() % 3 + 0x41), count: 64 + Int(random.next() % UInt64(2 * pageSize)))
        default: return (0..<Int(random.next() % 40)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        }
    }

    func randomTransaction(_ transaction: WriteTransaction, _ model: inout Model, _ random: inout SplitMix64, _ done: inout Int) throws {
        let count = 1 + Int(random.next() % 40)
        for _ in 0..<count {
            let name = Self.treeNames[Int(random.next() % 3)]
            let roll = random.next() % 100
            if roll < 2 {
                let existed = try transaction.dropTree(named: name)
                guard existed == (model[name] != nil) else { throw Failure(description: "drop \(name): existed \(existed)") }
                model[name] = nil
                done += 1
                continue
            }
            let tree: Tree
            if let existing = try transaction.tree(named: name) {
                tree = existing
            } else {
                tree = try transaction.createTree(named: name)
                model[name] = [:]
            }
            let key = randomKey(&random)
            switch roll {
            case 2..<50:
                let value = randomValue(&random)
                try tree.put(key, value)
                model[name]![key] = value
            case 50..<70:
                let removed = try tree.delete(key)
                guard removed == (model[name]![key] != nil) else { throw Failure(description: "delete \(key) from \(name): \(removed)") }
                model[name]![key] = nil
            case 70..<85:
                let value = try tree.get(key)
                guard value == model[name]![key] else { throw Failure(description: "get \(key) from \(name) differs") }
            default:
                // Seek, then scan a few entries forward or backward.
                let cursor = try tree.makeCursor()
                let sorted = model[name]!.keys.sorted { $0.lexicographicallyPrecedes($1) }
                var index = sorted.firstIndex { !$0.lexicographicallyPrecedes(key) } ?? sorted.count
                var valid = try cursor.seek(key)
                let forward = random.next() & 1 == 0
                for _ in 0..<5 {
                    guard valid == (index >= 0 && index < sorted.count) else {
                        throw Failure(description: "cursor on \(name) valid \(valid), expected index \(index) of \(sorted.count)")
                    }
                    if !valid { break }
                    guard cursor.key == sorted[index], try cursor.value() == model[name]![sorted[index]] else {
                        throw Failure(description: "cursor on \(name) at \(index) differs")
                    }
                    if forward { valid = try cursor.next(); index += 1 } else { valid = try cursor.previous(); index -= 1 }
                }
            }
            done += 1
        }
    }

    /// Compares every tree of the database with the model; nil when equal.
    func compare(_ database: Database, _ model: Model) throws -> String? {
        try database.read { transaction -> String? in
            let names = try transaction.trees().map(\.name)
            if names != model.keys.sorted() { return "trees \(names), expected \(model.keys.sorted())" }
            for name in names {
                let tree = try transaction.tree(named: name)!
                let expected = model[name]!.sorted { $0.key.lexicographicallyPrecedes($1.key) }
                let cursor = try tree.makeCursor()
                var more = try cursor.first()
                var index = 0
                while more {
                    guard index < expected.count else { return "\(name) has extra keys" }
                    guard cursor.key == expected[index].key else { return "\(name) key \(index) differs" }
                    guard try cursor.value() == expected[index].value else { return "\(name) value \(index) differs" }
                    index += 1
                    more = try cursor.next()
                }
                if index != expected.count { return "\(name) has \(index) keys, expected \(expected.count)" }
            }
            return nil
        }
    }
}

extension DatabaseModelHarness {
    /// Opens the file on `disk` as a new process would, calls `prepare` (to inject a fault), runs
    /// the random write transaction chosen by `txSeed`, and returns the model after it, the I/O
    /// operations the transaction made, and, when `traced`, its commit point
    /// (``CrashHarness/commitPoint(in:database:after:)``) and whether it trimmed the journal.
    func runSeeded(_ disk: SimulatedDisk, _ model: Model, _ txSeed: UInt64, traced: Bool = false,
                   prepare: () -> Void = {}) throws -> (next: Model, operations: Int, commitPoint: (invalidation: Int, sync: Int)?, trimmed: Bool) {
        let database = try Database(path: path, options: options(disk))
        defer { database.close() }
        prepare()
        let before = disk.operationCount
        if traced { disk.startTrace() }
        defer { if traced { disk.stopTrace() } }
        var next = model
        var generator = SplitMix64(seed: txSeed)
        var done = 0
        try database.write { try randomTransaction($0, &next, &generator, &done) }
        let trace = traced ? disk.trace : []
        let commitPoint = CrashHarness.commitPoint(in: trace, database: path, after: before)
        let trimmed = trace.contains { $0.hasSuffix("truncate \(path)-journal to \(journalSizeLimit ?? -1)") }
        return (next, disk.operationCount - before, commitPoint, trimmed)
    }

    /// Opens the file on `disk` as a new process would (recovering it), runs the integrity check,
    /// and compares the trees with `old` and `new` (either may be nil: not acceptable). Returns
    /// what is wrong, or nil.
    func verifyReopened(_ disk: SimulatedDisk, old: Model?, new: Model?) throws -> String? {
        let database = try Database(path: path, options: options(disk))
        defer { database.close() }
        let integrity = try database.checkIntegrity()
        if !integrity.isSound {
            return "integrity: \(integrity.problems.map(\.description).joined(separator: "; "))"
        }
        var mismatches: [String] = []
        for (name, model) in [("old", old), ("new", new)] {
            guard let model else { continue }
            guard let mismatch = try compare(database, model) else { return nil }
            mismatches.append("\(name) state: \(mismatch)")
        }
        return "matches no acceptable state (" + mismatches.joined(separator: "; ") + ")"
    }

    /// Crash testing at the database level: for each of `transactions` random write transactions,
    /// a power cut at every I/O operation it performs, with each of the four damage patterns; after
    /// every recovery the full integrity check runs and the trees must equal the last
    /// acknowledged commit (or the in-flight one, when the cut fell on the final sync).
    public func crashEverywhere(seed: UInt64, transactions: Int) -> CrashHarness.Report {
        // Long: one loop per transaction (dry run, a cut at every operation with each damage,
        // replay) sharing the disk snapshot, the model and the commit point, as CrashHarness.run
        // does for pages.
        var report = CrashHarness.Report()
        var random = SplitMix64(seed: seed)
        let disk = SimulatedDisk()
        var model: Model = [:]
        for t in 0..<transactions {
            let txSeed = random.next()
            let base = disk.snapshot()
            report.transactions += 1
            // Dry run: count the transaction's I/O operations, find its commit point, and learn
            // its result.
            let next: Model
            let operations: Int
            let commitPoint: (invalidation: Int, sync: Int)
            do {
                let dry = try runSeeded(disk, model, txSeed, traced: true)
                // A transaction that only read commits nothing: every cut must fail it, and the
                // state is the same either way.
                guard let point = dry.commitPoint ?? (dry.next == model ? (dry.operations, dry.operations) : nil) else {
                    report.failures.append("seed \(seed) tx \(t): no commit point in the dry run's trace")
                    return report
                }
                (next, operations, commitPoint) = (dry.next, dry.operations, point)
                if dry.trimmed { report.journalTrims += 1 }
            } catch {
                report.failures.append("seed \(seed) tx \(t): dry run failed: \(error)")
                return report
            }
            for point in 1...max(1, operations) {
                for damage in CrashHarness.damages(seed: txSeed &+ UInt64(point)) {
                    disk.restore(base)
                    let context = "seed \(seed) tx \(t) txSeed \(txSeed) crash at op \(point)/\(operations) (commit point \(commitPoint.sync)) \(damage)"
                    do {
                        let survived = (try? runSeeded(disk, model, txSeed) {
                            disk.inject(.powerCut(damage), atOperation: point)
                        }) != nil
                        disk.clearFaults()
                        // Past the commit point (a cut in step 4b) the transaction has happened and
                        // the write returns; before it, or at it, the write throws.
                        if survived != (point > commitPoint.sync) {
                            report.failures.append("\(context): the transaction \(survived ? "survived" : "failed after its commit point, at") the power cut")
                            continue
                        }
                        report.images += 1
                        // The old state until the journal's invalidation is issued, either until its
                        // sync (the commit point), the new one after it.
                        if let problem = try verifyReopened(disk, old: point <= commitPoint.sync ? model : nil,
                                                            new: point > commitPoint.invalidation ? next : nil) {
                            report.failures.append("\(context): \(problem)")
                        }
                    } catch {
                        report.failures.append("\(context): \(error)")
                    }
                    if report.failures.count > 5 { return report }
                }
            }
            disk.restore(base)
            do {
                model = try runSeeded(disk, model, txSeed).next
            } catch {
                report.failures.append("seed \(seed) tx \(t): replay failed: \(error)")
                return report
            }
        }
        return report
    }
}

extension DatabaseModelHarness {
    /// I/O faults at the database level: for `transactions` random write transactions, EIO, ENOSPC
    /// and a short write at every I/O operation, once and persistently; each time the error must be
    /// a `StoreError`, and the file, reopened, must pass the integrity check and hold the old state
    /// (or the new one when the commit reported success — or when a failed sync left the outcome
    /// unknown).
    public func faultEverywhere(seed: UInt64, transactions: Int) -> CrashHarness.Report {
        var report = CrashHarness.Report()
        var random = SplitMix64(seed: seed)
        let disk = SimulatedDisk()
        var model: Model = [:]
        let faults: [SimulatedDisk.Fault] = [.ioError, .diskFull, .shortWrite]
        for t in 0..<transactions {
            let txSeed = random.next()
            let base = disk.snapshot()
            let next: Model
            let operations: Int
            do {
                let dry = try runSeeded(disk, model, txSeed, traced: true)
                (next, operations) = (dry.next, dry.operations)
                if dry.trimmed { report.journalTrims += 1 }
            } catch {
                report.failures.append("seed \(seed) tx \(t): dry run failed: \(error)")
                return report
            }
            report.transactions += 1
            for point in 1...max(1, operations) {
                for fault in faults {
                    for persistent in [false, true] {
                        disk.restore(base)
                        let context = "seed \(seed) tx \(t) \(fault) at op \(point)/\(operations) persistent \(persistent)"
                        do {
                            var committed = false
                            do {
                                _ = try runSeeded(disk, model, txSeed) {
                                    disk.inject(fault, atOperation: point, persistent: persistent)
                                }
                                committed = true
                            } catch is StoreError {
                            } catch {
                                report.failures.append("\(context): untyped error \(error)")
                            }
                            disk.clearFaults()
                            report.images += 1
                            // A commit that reported success must have happened; one that failed may have
                            // (a failed sync leaves the outcome unknown), never half.
                            if let problem = try verifyReopened(disk, old: committed ? nil : model, new: next) {
                                report.failures.append("\(context): \(problem)")
                            }
                        } catch {
                            report.failures.append("\(context): \(error)")
                        }
                        if report.failures.count > 5 { return report }
                    }
                }
            }
            disk.restore(base)
            do {
                model = try runSeeded(disk, model, txSeed).next
            } catch {
                report.failures.append("seed \(seed) tx \(t): replay failed: \(error)")
                return report
            }
        }
        return report
    }
}
