import ArborStore
import Foundation
import Testing

@Suite("arbor info")
struct InfoCommandTests {
    func makeDatabase(_ path: String, pages: Int = 5) throws {
        let pager = try Pager(path: path)
        try pager.beginWrite()
        for _ in 0..<pages { _ = try pager.allocatePage() }
        try pager.setUserVersion(7)
        try pager.commit()
        pager.close()
    }

    @Test("prints the header and page statistics of a good file")
    func goodFile() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        try makeDatabase(dir.file("good.arbor"))
        let result = try runArbor(["info", dir.file("good.arbor")])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("page size       4096"))
        #expect(result.stdout.contains("pages           6 (24576 bytes)"))
        #expect(result.stdout.contains("user version    7"))
        #expect(result.stdout.contains("page check      ok"))
        #expect(result.stderr.isEmpty)
    }

    @Test("hostile files: a clear message and exit status 1, never a crash",
          arguments: ["missing", "foreign", "empty", "truncated", "header", "page"])
    func hostileFiles(kind: String) throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let path = dir.file("db")
        try makeDatabase(path)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let expected: String
        switch kind {
        case "missing":
            try FileManager.default.removeItem(atPath: path)
            expected = "[notFound]"
        case "foreign":
            bytes = Array(String(repeating: "SQLite format 3\0 but not really ", count: 200).utf8)
            expected = "[notADatabase]"
        case "empty":
            bytes = []
            expected = "[notADatabase]"
        case "truncated":
            bytes = Array(bytes.prefix(4096 * 3 + 100))
            expected = "truncated"
        case "header":
            bytes[41] ^= 0xFF
            expected = "page 1 is corrupt"
        default:
            bytes[4096 * 2 + 10] ^= 0x01
            expected = "arbor: \(path): page 3: checksum mismatch\n"
        }
        if kind != "missing" { try Data(bytes).write(to: URL(fileURLWithPath: path)) }
        let result = try runArbor(["info", path])
        #expect(result.status == 1, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stderr.contains(expected), "\(result.stderr)")
        #expect(!result.stderr.contains("Fatal error"))
    }

    @Test("--help documents every command")
    func help() throws {
        for command in [["--help"], ["info", "--help"], ["check", "--help"], ["get", "--help"], ["put", "--help"],
                        ["delete", "--help"], ["scan", "--help"], ["dump", "--help"], ["load", "--help"]] {
            let result = try runArbor(command)
            #expect(result.status == 0)
            #expect(result.stdout.contains("USAGE: arbor"))
        }
    }
}
