import Foundation
import Testing

/// What every subcommand shares: the version, and how the database file is given.
@Suite("arbor's command line")
struct CommandLineTests {
    /// Every subcommand `--help` lists, and the hidden `stress`.
    static let commands = ["demo", "query", "model", "info", "check", "recover", "get", "put", "delete", "scan", "dump", "load", "stress"]

    @Test("--version prints 0.2.0")
    func version() throws {
        let result = try runArbor(["--version"])
        #expect(result.status == 0)
        #expect(result.stdout == "0.2.0\n")
    }

    @Test("every subcommand takes the database file as its first argument", arguments: commands)
    func fileFirst(command: String) throws {
        let help = try runArbor([command, "--help"])
        #expect(help.status == 0, "\(help.stderr)")
        let usage = try #require(help.stdout.split(separator: "\n").first { $0.hasPrefix("USAGE: ") })
        // The first positional argument in the usage line is the file: `<file>`, or `[<file>]`
        // for demo, whose file has a default.
        let positional = usage.split(separator: " ").dropFirst(3).first { !$0.hasPrefix("--") && !$0.hasPrefix("[--") }
        #expect(positional == "<file>" || (command == "demo" && positional == "[<file>]"), "\(usage)")
        #expect(!help.stdout.contains("--store"))
    }

    @Test("demo takes its store file as an argument, as every command does")
    func demoFile() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let store = dir.file("staff.arbor")
        let result = try runArbor(["demo", store])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("The store stays at \(store)"))
        #expect(FileManager.default.fileExists(atPath: store))
        let old = try runArbor(["demo", "--store", store])
        #expect(old.status != 0 && old.stderr.contains("--store"), "\(old.stderr)")
    }
}
