import ArborTestSupport
import Testing
@testable import ArborStore

@Suite("I/O faults")
struct FaultTests {
    static let faults: [SimulatedDisk.Fault] = [.ioError, .diskFull, .shortWrite]

    @Test("an I/O error at every operation, once or persistently, is a typed error and leaves the file consistent",
          arguments: [(512, false, PagerOptions.defaultJournalSizeLimit), (512, true, PagerOptions.defaultJournalSizeLimit),
                      (4096, false, PagerOptions.defaultJournalSizeLimit), (512, true, 2048)])
    func failEveryOperation(pageSize: Int, large: Bool, journalSizeLimit: Int) throws {
        let harness = CrashHarness(pageSize: pageSize, journalSizeLimit: journalSizeLimit)
        let disk = SimulatedDisk()
        let table = LockTable()
        var options = harness.options(table)
        options.busyTimeout = .milliseconds(50)
        var model = PageModel()
        let setup = try Pager(path: harness.path, fileSystem: disk, options: options)
        for seed in 1...3 as ClosedRange<UInt64> { model = try PageWorkload.runTransaction(setup, model: model, seed: seed) }
        setup.close()
        let base = disk.snapshot()

        let txSeed: UInt64 = large ? 77 : 78
        let dry = try Pager(path: harness.path, fileSystem: disk, options: options)
        let before = disk.operationCount
        let next = try PageWorkload.runTransaction(dry, model: model, seed: txSeed, large: large)
        let operations = disk.operationCount - before
        // With a small limit, the faults reach the trim (its truncation and sync, after the
        // commit point: the commit stands) and the fstat that learns the journal's length.
        #expect((dry.statistics.journalTrims > 0) == (journalSizeLimit < 4096))
        dry.close()

        var checked = 0
        for point in 1...operations {
            for fault in Self.faults {
                for persistent in [false, true] {
                    disk.restore(base)
                    let context = "fault \(fault) at op \(point)/\(operations) persistent \(persistent)"
                    let pager = try Pager(path: harness.path, fileSystem: disk, options: options)
                    disk.inject(fault, atOperation: point, persistent: persistent)
                    var committed = false
                    do {
                        try PageWorkload.runTransaction(pager, model: model, seed: txSeed, large: large)
                        committed = true
                    } catch {
                        #expect(error is StoreError, "\(context): untyped error \(error)")
                    }
                    disk.clearFaults()
                    // The failed connection released its locks: another one can write at once.
                    let other = try Pager(path: harness.path, fileSystem: disk, options: options)
                    let expected = committed ? next : model
                    let mismatch = try PageWorkload.mismatch(other, expected)
                    if pager.isPoisoned {
                        // A failed sync at the commit point leaves the outcome unknown, never mixed.
                        let either = mismatch == nil ? nil : try PageWorkload.mismatch(other, next)
                        #expect(either == nil, "\(context): \(mismatch!)")
                        #expect(storeErrorCode { try pager.beginWrite() } == .poisoned, "\(context)")
                        #expect(storeErrorCode { try pager.beginRead() } == .poisoned, "\(context)")
                    } else {
                        #expect(mismatch == nil, "\(context): \(mismatch ?? "")")
                        // The connection that saw the error is still usable.
                        if !committed {
                            let retried = try PageWorkload.runTransaction(pager, model: model, seed: txSeed, large: large)
                            #expect(retried.pages == next.pages && retried.pageCount == next.pageCount, "\(context)")
                            #expect(try PageWorkload.mismatch(other, next) == nil, "\(context)")
                        }
                    }
                    other.close()
                    pager.close()
                    checked += 1
                }
            }
        }
        print("I/O faults checked (page size \(pageSize), large \(large), journal limit \(journalSizeLimit)): \(checked) over \(operations) operations")
        #expect(checked == operations * 6)
    }
}

@Suite("I/O faults in trees")
struct TreeFaultTests {
    @Test("EIO, ENOSPC and short writes at every operation of tree transactions; integrity holds after each",
          arguments: [PagerOptions.defaultJournalSizeLimit, 2048])
    func faultEverywhere(journalSizeLimit: Int) {
        let report = DatabaseModelHarness(pageSize: 512, journalSizeLimit: journalSizeLimit).faultEverywhere(seed: 0xFA17, transactions: 6)
        print("I/O faults checked (trees, journal limit \(journalSizeLimit)): \(report)")
        if journalSizeLimit < 4096 { #expect(report.journalTrims > 0) }
        #expect(report.failures.isEmpty, "\(report.failures.joined(separator: "\n"))")
        #expect(report.images > 300)
    }
}
