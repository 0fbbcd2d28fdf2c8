import ArgumentParser
import ArborStore

@main
struct ArborCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "arbor",
        abstract: "Inspect and maintain Arbor database files, and demonstrate the object graph.",
        version: "0.2.0",
        subcommands: [Demo.self, Query.self, Info.self, Check.self, Get.self, Put.self, Delete.self, Scan.self, Dump.self, Load.self, Stress.self]
    )
}

/// Runs `body`, turning a `StoreError` into a clear message on standard error and exit status 1.
func reportingErrors<R>(_ body: () throws -> R) throws -> R {
    do {
        return try body()
    } catch let error as StoreError {
        printError("arbor: \(describe(error))")
        throw ExitCode(1)
    }
}

func describe(_ error: StoreError) -> String {
    var text = error.message
    if let path = error.path { text = "\(path): " + text }
    return "\(text) [\(error.code)]"
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
