import Foundation
import Testing

/// Real processes on one file: writers and readers at the same time, nothing lost, nothing torn.
@Suite("Several processes on one file")
struct MultiProcessTests {
    @Test("two writer processes and a reader process: every commit lands, every read is consistent")
    func writersAndReader() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let path = dir.file("shared.arbor")
        let commits = 150
        let writers = (0..<2).map { id in try? startArbor(["stress", path, "--writer", "\(id)", "--count", "\(commits)"]) }
        let reader = try startArbor(["stress", path, "--count", "300"])
        for (id, writer) in writers.enumerated() {
            let result = finish(try #require(writer))
            #expect(result.status == 0, "writer \(id): \(result.stderr)")
        }
        let read = finish(reader)
        #expect(read.status == 0, "reader: \(read.stderr)")
        #expect(read.stdout.contains("300 consistent read transactions"))

        let verify = try runArbor(["stress", path, "--verify", "--writers", "2", "--count", "\(commits)"])
        #expect(verify.status == 0, "\(verify.stderr)")
        #expect(verify.stdout.contains("verified: 2 writers x \(commits) commits, \(2 * commits) records"))
        let info = try runArbor(["info", path])
        #expect(info.status == 0 && info.stdout.contains("page check      ok"), "\(info.stdout)\(info.stderr)")
    }
}
