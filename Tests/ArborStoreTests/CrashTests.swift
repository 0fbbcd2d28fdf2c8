import ArborTestSupport
import Foundation
import Testing
@testable import ArborStore

/// How many transactions each crash test runs; `make crash-campaign` raises it.
let crashTransactions = Int(ProcessInfo.processInfo.environment["ARBOR_CRASH_TRANSACTIONS"] ?? "") ?? 12

@Suite("Crash safety")
struct CrashTests {
    @Test("a power cut at every I/O operation of random transactions, four damage patterns each, recovers to the last commit",
          arguments: [(512, UInt64(0xA5B0_0001)), (512, 0xA5B0_0002), (4096, 0xA5B0_0003)])
    func powerCutEverywhere(pageSize: Int, seed: UInt64) {
        let harness = CrashHarness(pageSize: pageSize)
        let report = harness.run(seed: seed, transactions: crashTransactions)
        print("crash images checked (page size \(pageSize), seed \(seed)): \(report)")
        #expect(report.failures.isEmpty, "\(report.failures.joined(separator: "\n"))")
        #expect(report.images > 300)
        #expect(report.recoveryCrashes > 0)
    }

    @Test("a power cut at every I/O operation of transactions whose journal outgrows a limit of a few pages (or 0): a cut in the trim keeps the commit; recovery trims too",
          arguments: [(512, 2048, UInt64(0xA5B0_1001)), (4096, 0, 0xA5B0_1002)])
    func powerCutEverywhereOverTheJournalLimit(pageSize: Int, limit: Int, seed: UInt64) {
        let harness = CrashHarness(pageSize: pageSize, journalSizeLimit: limit)
        // Half as many transactions as the tests above: most of them trim, and each trim adds
        // two crash points and a recovery that trims (both crashed at every operation in turn).
        let report = harness.run(seed: seed, transactions: max(4, crashTransactions / 2))
        print("crash images checked (page size \(pageSize), journal limit \(limit), seed \(seed)): \(report)")
        #expect(report.failures.isEmpty, "\(report.failures.joined(separator: "\n"))")
        #expect(report.images > 300)
        #expect(report.recoveryCrashes > 0)
        #expect(report.journalTrims >= report.transactions / 2, "most transactions outgrow the limit")
    }

    @Test("an interrupted creation leaves no half-made database")
    func interruptedCreation() throws {
        let harness = CrashHarness(pageSize: 512)
        let disk = SimulatedDisk()
        let before = disk.operationCount
        try harness.open(disk).close()
        let operations = disk.operationCount - before
        for point in 1...operations {
            for damage in CrashHarness.damages(seed: UInt64(point)) {
                disk.restore(SimulatedDisk().snapshot())
                disk.inject(.powerCut(damage), atOperation: point)
                _ = try? harness.open(disk)
                disk.clearFaults()
                // Reopening either finds a valid empty database or creates one.
                let pager = try harness.open(disk)
                #expect(pager.pageCount == 1, "crash at \(point) \(damage)")
                #expect(try pager.checkPages().isEmpty, "crash at \(point) \(damage)")
                pager.close()
            }
        }
    }
}

@Suite("Crash safety of trees")
struct TreeCrashTests {
    @Test("a power cut at every I/O operation of random tree transactions; the integrity check passes after every recovery",
          arguments: [(512, UInt64(0xC0FF_0001), PagerOptions.defaultJournalSizeLimit), (1024, 0xC0FF_0002, PagerOptions.defaultJournalSizeLimit),
                      (512, 0xC0FF_0003, 2048)])
    func powerCutEverywhere(pageSize: Int, seed: UInt64, journalSizeLimit: Int) {
        let harness = DatabaseModelHarness(pageSize: pageSize, journalSizeLimit: journalSizeLimit)
        let report = harness.crashEverywhere(seed: seed, transactions: crashTransactions * 4)
        print("crash images checked (trees, page size \(pageSize), journal limit \(journalSizeLimit), seed \(seed)): \(report)")
        #expect(report.failures.isEmpty, "\(report.failures.joined(separator: "\n"))")
        #expect(report.images > 200)
        if journalSizeLimit < 4096 { #expect(report.journalTrims > 0) }
    }
}
