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

    @Test("every command's failure is one line on standard error and a non-zero status, never a crash", arguments: [
        ["demo", "/nonexistent-dir/x.arbor"], ["query", "MISSING", "Employee"], ["model", "MISSING"], ["info", "MISSING"],
        ["check", "MISSING"], ["recover", "MISSING"], ["get", "MISSING", "t", "k"], ["put", "/nonexistent-dir/x.arbor", "t", "k", "v"],
        ["delete", "MISSING", "t", "k"], ["scan", "MISSING", "t"], ["dump", "MISSING"], ["stress", "MISSING", "--writer", "99"],
        ["query", "MISSING", "Employee", "--limit", "-1"], ["model", "MISSING", "--format", "yaml"],
    ])
    func oneLineErrors(arguments: [String]) throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let result = try runArbor(arguments.map { $0 == "MISSING" ? dir.file("missing.arbor") : $0 })
        #expect(result.status != 0)
        #expect(!result.stderr.contains("Fatal error") && !result.stderr.contains("Stack dump"))
        // ArgumentParser follows its own one-line message with help and usage lines.
        let lines = result.stderr.split(separator: "\n").filter { !$0.hasPrefix("Usage:") && !$0.hasPrefix("Help:") && !$0.hasPrefix("  See ") }
        #expect(lines.count == 1 && (lines[0].hasPrefix("arbor: ") || lines[0].hasPrefix("Error: ")), "\(arguments): \(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("missing.arbor")), "a read-only command created the file")
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
