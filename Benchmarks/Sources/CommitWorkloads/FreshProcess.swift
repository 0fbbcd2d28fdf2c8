import Foundation

/// Runs the current executable again in a process of its own: the reports' way of making each
/// round start from a fresh process (no memory, caches or allocator history left by the previous
/// round or by the other engine).
public enum FreshProcess {
    /// Runs this executable with the same arguments and the current environment with
    /// `environment` added, waits for it, and returns what it wrote to standard output (its
    /// standard error goes to ours).
    ///
    /// - Throws: ``WorkloadError`` naming `what` when the process fails (a non-zero exit status
    ///   or a signal).
    public static func run(adding environment: [String: String], what: String) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = Array(CommandLine.arguments.dropFirst())
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, added in added }
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0, process.terminationReason == .exit else {
            throw WorkloadError("\(what) failed (exit status \(process.terminationStatus))")
        }
        return data
    }
}

/// The median of `ratios` with their range, as the reports print it: `"2.05; 2.00–2.17"`, or the
/// median alone for one ratio (`"—"` for none). Ratios below 0.1 get three decimals (`0.008`), so
/// that a step a hundred times slower than its peer still shows how far it is.
public func medianAndRange(_ ratios: [Double]) -> String {
    guard let low = ratios.min(), let high = ratios.max() else { return "—" }
    func text(_ ratio: Double) -> String { fixed(ratio, ratio < 0.1 ? 3 : 2) }
    return text(median(ratios)) + (ratios.count > 1 ? "; \(text(low))–\(text(high))" : "")
}
