import ArborStore
import ArborTestSupport
import Foundation
import Testing

/// Operations per model-based run; `make model-campaign` raises it.
let modelOperations = Int(ProcessInfo.processInfo.environment["ARBOR_MODEL_OPERATIONS"] ?? "") ?? 60_000

@Suite("Database against a model")
struct DatabaseModelTests {
    @Test("random puts, deletes, seeks, scans, drops, commits, rollbacks, reopens and power cuts match sorted maps",
          arguments: [(512, UInt64(0x5EED_0001), PagerOptions.defaultJournalSizeLimit), (512, 0x5EED_0002, PagerOptions.defaultJournalSizeLimit),
                      (1024, 0x5EED_0003, PagerOptions.defaultJournalSizeLimit), (4096, 0x5EED_0004, PagerOptions.defaultJournalSizeLimit),
                      (512, 0x5EED_0005, 2048)])
    func modelBased(pageSize: Int, seed: UInt64, journalSizeLimit: Int) {
        let report = DatabaseModelHarness(pageSize: pageSize, journalSizeLimit: journalSizeLimit).run(seed: seed, operations: modelOperations)
        print("model operations checked (page size \(pageSize), journal limit \(journalSizeLimit), seed \(seed)): \(report)")
        #expect(report.failures.isEmpty, "\(report.failures.joined(separator: "\n"))")
        #expect(report.powerCuts > 0)
        #expect(report.operations >= modelOperations)
    }
}
