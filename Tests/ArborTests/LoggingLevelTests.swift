import Foundation
import Testing

/// The log levels follow one rule (docs/observability.md, "Levels: who is told"): an error the
/// caller receives is logged at `debug` at most; `warning` and `error` are for what no caller
/// sees. The table of docs/observability.md, "What is logged", is checked against the sources:
/// every place that logs is in it with its level, and nothing else is.
@Suite("Log levels")
struct LoggingLevelTests {
    /// The repository's root (this file is Tests/ArborTests/LoggingLevelTests.swift).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    struct Row: Hashable {
        let message: String
        let level: String
        let told: String
    }

    /// The rows of the table under "### What is logged".
    static func documented() throws -> [Row] {
        let text = try String(contentsOf: root.appendingPathComponent("docs/observability.md"), encoding: .utf8)
        guard let start = text.range(of: "### What is logged"), let end = text.range(of: "## Metrics", range: start.upperBound..<text.endIndex) else {
            Issue.record("docs/observability.md has no table of what is logged")
            return []
        }
        return text[start.upperBound..<end.lowerBound].split(separator: "\n").compactMap { line -> Row? in
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 6, cells[1].hasPrefix("`"), cells[1].hasSuffix("`") else { return nil }
            return Row(message: String(cells[1].dropFirst().dropLast()), level: cells[2], told: cells[4])
        }
    }

    /// Each call of a logger in Sources/ (but the test support): its level and its message as
    /// it begins (up to the first interpolation).
    static func calls() throws -> [(message: String, level: String, file: String)] {
        let call = try Regex(#"logger\??\.(trace|debug|info|notice|warning|error|critical)\(\s*"((?:[^"\\]|\\[^(])*)"#)
        var found: [(String, String, String)] = []
        let sources = root.appendingPathComponent("Sources")
        guard let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil) else { return [] }
        for case let url as URL in files where url.pathExtension == "swift" && !url.path.contains("/ArborTestSupport/") {
            let text = try String(contentsOf: url, encoding: .utf8)
            for match in text.matches(of: call) {
                let level = match.output[1].substring.map(String.init) ?? ""
                let message = match.output[2].substring.map(String.init) ?? ""
                found.append((message.replacingOccurrences(of: "\\\"", with: "\""), level, url.lastPathComponent))
            }
        }
        return found
    }

    @Test("every place that logs is in the table with its level, and every row of the table logs")
    func tableMatchesTheSources() throws {
        let rows = try Self.documented()
        let calls = try Self.calls()
        #expect(calls.count > 25, "the scan found the calls")
        let documented = Set(rows.map { "\($0.level) \($0.message)" })
        let logged = Set(calls.map { "\($0.level) \($0.message)" })
        for call in calls where !documented.contains("\(call.level) \(call.message)") {
            Issue.record("\(call.file) logs \"\(call.message)…\" at \(call.level): not so in docs/observability.md")
        }
        for row in rows where !logged.contains("\(row.level) \(row.message)") {
            Issue.record("docs/observability.md lists \"\(row.message)…\" at \(row.level): nothing logs it so")
        }
    }

    @Test("an error the caller receives is logged at debug at most; warning and error are only for what nobody is told")
    func theRule() throws {
        let rows = try Self.documented()
        #expect(!rows.isEmpty)
        for row in rows {
            if row.told.hasPrefix("the caller") {
                #expect(["trace", "debug"].contains(row.level), "\(row.message): the caller receives it, yet it is logged at \(row.level)")
            }
            if ["warning", "error", "critical"].contains(row.level) {
                #expect(row.told.hasPrefix("nobody"), "\(row.message) is logged at \(row.level), but someone is told: \(row.told)")
            }
            #expect(row.level != "notice", "\(row.message): a library logs at info or below, or warning and above for what nobody sees")
        }
    }
}
