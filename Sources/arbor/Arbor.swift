import ArgumentParser
import Foundation
import Arbor
import ArborStore
import Logging

@main
struct ArborCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "arbor",
        abstract: "Inspect and maintain Arbor database files, and demonstrate the object graph.",
        discussion: """
            The library's log (labels arbor.store and arbor.graph: recoveries, lock waits, slow \
            fetches, failed saves) goes to standard error from the level ARBOR_LOG_LEVEL names \
            (trace, debug, info, notice, warning, error, critical; off when unset): each \
            command reports what it did itself.
            """,
        version: "0.2.0",
        subcommands: [Demo.self, Query.self, ModelCommand.self, Migrate.self, Info.self, Check.self, Recover.self, Backup.self, Vacuum.self, Get.self, Put.self, Delete.self, Scan.self, Dump.self, Load.self, Export.self, Import.self, Stress.self]
    )

    /// Sets up the library's log (see the discussion above), then runs the command.
    static func main() {
        let level = ProcessInfo.processInfo.environment["ARBOR_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        main(nil)
    }
}

/// Runs `body`, turning a `StoreError` or an `ArborError` into a one-line message on standard
/// error and exit status 1.
func reportingErrors<R>(_ body: () throws -> R) throws -> R {
    do {
        return try body()
    } catch let error as StoreError {
        printError("arbor: \(describe(error))")
        throw ExitCode(1)
    } catch let error as ArborError {
        printError("arbor: \(describe(error))")
        throw ExitCode(1)
    }
}

/// An engine error as `<path>: <message> [<code>]`.
func describe(_ error: StoreError) -> String {
    if error.code == .readOnly, let path = error.path { return "\(hotJournal(path)) [\(error.code)]" }
    var text = error.message
    if let path = error.path { text = "\(path): " + text }
    return "\(text) [\(error.code)]"
}

/// An object-graph error as its message and code (with the engine's code when an engine error
/// lies underneath).
func describe(_ error: ArborError) -> String {
    if let cause = error.storeError, cause.code == .readOnly, let path = cause.path {
        return "\(hotJournal(path)) [\(cause.code)]"
    }
    return "\(error.message) [\(error.storeError.map { "\(error.code), \($0.code)" } ?? "\(error.code)")]"
}

/// What a read-only command says about a file with a hot journal. The engine refuses to read it
/// with `readOnly` (a read-only handle may not roll the journal back); read-only commands never
/// write, so that refusal is the only `readOnly` error they meet.
func hotJournal(_ path: String) -> String {
    "\(path): an interrupted transaction (a hot journal, \(path)-journal) must be rolled back before the file can be read: run `arbor recover \(path)`"
}

func printError(_ text: String) {
    var standardError = StandardError()
    print(text, to: &standardError)
}

struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        var bytes = Array(string.utf8)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(2, raw.baseAddress! + offset, raw.count - offset)
                if n <= 0 { return }
                offset += n
            }
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
