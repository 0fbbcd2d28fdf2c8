import ArborStore
import Foundation
import Testing

/// `arbor load` sets each tree's sequence from the dump in one step, and refuses one no primary
/// key can reach.
@Suite("arbor load: tree sequences")
struct LoadSequenceTests {
    /// Runs `arbor load FILE` with `text` on standard input, for at most a minute.
    func load(_ text: String, into file: String, in dir: TemporaryDirectory) throws -> RunResult {
        let input = dir.file("dump.txt")
        try text.write(toFile: input, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arborBinary)
        process.arguments = ["load", file]
        process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: input))
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Before the fix, a large sequence took hours: stop it rather than hang the test. SIGKILL:
        // the child inherits the test thread's signal mask, in which SIGTERM is blocked.
        let pid = process.processIdentifier
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(60)) { if process.isRunning { kill(pid, SIGKILL) } }
        let stdout = out.fileHandleForReading.readDataToEndOfFile(), stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return RunResult(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                         stderr: String(decoding: stderr, as: UTF8.self))
    }

    func dump(sequence: String) -> String {
        "ArborStore dump 1\npage-size 4096\nuser-version 0\ntree 726f7773 table \(sequence)\n 01\n 02\nend\n"
    }

    @Test("a sequence in the billions loads at once, and the next number follows it")
    func largeSequence() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let file = dir.file("db")
        // Before: one nextSequence() per number, 9 · 10^18 catalog updates for the largest.
        for sequence: UInt64 in [5_000_000_000, UInt64(Int64.max)] {
            let result = try load(dump(sequence: "\(sequence)"), into: file, in: dir)
            #expect(result.status == 0, "\(result.stderr)")
            let database = try Database(path: file)
            try database.write { (tx) throws in
                let tree = try #require(try tx.tree(named: "rows"))
                #expect(tree.descriptor.sequence == sequence)
                if sequence < UInt64(Int64.max) { #expect(try tree.nextSequence() == sequence + 1) }
                try tx.dropTree(named: "rows")
            }
            database.close()
        }
    }

    @Test("a sequence above Int64.max is refused with the line, and nothing is loaded")
    func sequenceAboveInt64() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let file = dir.file("db")
        for sequence in ["9223372036854775808", "18446744073709551615"] {
            let result = try load(dump(sequence: sequence), into: file, in: dir)
            #expect(result.status == 1)
            #expect(result.stderr.contains("line 4: tree \"rows\" has sequence \(sequence), above 9223372036854775807"), "\(result.stderr)")
        }
        let database = try Database(path: file)
        defer { database.close() }
        #expect(try database.read { (tx) throws in try tx.tree(named: "rows") } == nil)
    }
}
