import Foundation

/// The result of running the built `arbor` binary.
struct RunResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// The `arbor` executable next to the test bundle in the build folder.
let arborBinary: String = {
    let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    var directory = testBinary.deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent("arbor").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    return ".build/debug/arbor"
}()

/// Starts `arbor` with `arguments` (and `input` as its standard input); call `wait(_:)` on the
/// returned process.
func startArbor(_ arguments: [String], input: FileHandle? = nil) throws -> (Process, Pipe, Pipe) {
    let process = Process()
    if let input { process.standardInput = input }
    process.executableURL = URL(fileURLWithPath: arborBinary)
    process.arguments = arguments
    var environment = ProcessInfo.processInfo.environment
    environment["SWIFT_BACKTRACE"] = "enable=no"
    process.environment = environment
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    return (process, out, err)
}

func finish(_ started: (Process, Pipe, Pipe)) -> RunResult {
    let (process, out, err) = started
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    let errData = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return RunResult(status: process.terminationStatus,
                     stdout: String(decoding: outData, as: UTF8.self),
                     stderr: String(decoding: errData, as: UTF8.self))
}

/// Runs `arbor` to completion.
func runArbor(_ arguments: [String]) throws -> RunResult {
    finish(try startArbor(arguments))
}

/// Runs `arbor` to completion with `input` on its standard input (read from a file, as a shell
/// redirection gives it).
func runArbor(_ arguments: [String], input: String) throws -> RunResult {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-input-\(UUID().uuidString)")
    try Data(input.utf8).write(to: file)
    defer { try? FileManager.default.removeItem(at: file) }
    return finish(try startArbor(arguments, input: try FileHandle(forReadingFrom: file)))
}

/// A fresh temporary directory, removed by `cleanup()`.
struct TemporaryDirectory {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-cli-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { path + "/" + name }

    func cleanup() { try? FileManager.default.removeItem(atPath: path) }
}
