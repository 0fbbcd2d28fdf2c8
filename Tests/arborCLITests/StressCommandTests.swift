import ArborStore
import Foundation
import Testing

/// The hidden `arbor stress` command refuses what it cannot do with a message and a status,
/// where it stopped the process before (a precondition, a negative range, an overflow).
@Suite("arbor stress: bad arguments and inconsistent files")
struct StressCommandTests {
    @Test("arguments out of range are usage errors", arguments: [
        (["--writer", "40"], "--writer must be 0…31, not 40"),
        (["--writer=-1"], "--writer must be 0…31, not -1"),
        (["--count=-5"], "--count must be 0 or more, not -5"),
        (["--verify", "--writers", "0"], "--writers must be 1…32, not 0"),
        (["--verify", "--writers", "100"], "--writers must be 1…32, not 100"),
    ])
    func badArguments(arguments: [String], message: String) throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let result = try runArbor(["stress", dir.file("db")] + arguments)
        // ArgumentParser's usage status (EX_USAGE), not a signal.
        #expect(result.status == 64, "\(arguments): \(result.status) \(result.stderr)")
        #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("db")), "\(arguments): the file was opened")
    }

    /// A stress file whose commit counters are `counters` (writer 0 first), in the layout
    /// `arbor stress` documents: type byte 0x53, padding to byte 8, then the counters.
    func stressFile(_ path: String, counters: [UInt64]) throws {
        var options = PagerOptions()
        options.pageSize = 512
        let pager = try Pager(path: path, options: options)
        defer { pager.close() }
        try pager.beginWrite()
        let page = try pager.allocatePage()
        #expect(page == 2)
        try pager.withMutablePage(page) { body in
            body.storeBytes(of: UInt8(0x53), toByteOffset: 0, as: UInt8.self)
            for (writer, counter) in counters.enumerated() { body.storeBytes(of: counter, toByteOffset: 8 + writer * 8, as: UInt64.self) }
        }
        try pager.commit()
    }

    @Test("a counter at UInt64.max is an inconsistent file, for a writer and a reader")
    func counterAtMaximum() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let path = dir.file("db")
        try stressFile(path, counters: [.max, 1])
        // The writer's `+ 1` overflowed.
        let writer = try runArbor(["stress", path, "--writer", "0", "--count", "1"])
        #expect(writer.status == 2, "\(writer.status) \(writer.stderr)")
        #expect(writer.stderr.contains("is not a consistent stress file: writer 0's commit counter is already 18446744073709551615"), "\(writer.stderr)")
        // The reader's sum of the counters overflowed.
        let reader = try runArbor(["stress", path, "--count", "1"])
        #expect(reader.status == 2, "\(reader.status) \(reader.stderr)")
        #expect(reader.stderr.contains("the counters add up to more than 18446744073709551615"), "\(reader.stderr)")
    }
}
