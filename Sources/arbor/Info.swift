import ArgumentParser
import ArborStore

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a database's header and page statistics.",
        discussion: """
            Opens FILE read-only and prints its header fields, its size, the freelist, the state of \
            its journal, and the result of the page-level check (every page's checksum, the \
            freelist). Exits with status 1 when the file is not an Arbor database, is damaged, or \
            has an interrupted transaction that must be recovered by opening it read-write.
            """
    )

    @Argument(help: "The database file.")
    var file: String

    func run() throws {
        try reportingErrors {
            var options = PagerOptions()
            options.readOnly = true
            options.busyTimeout = .seconds(2)
            options.cacheSize = 1 << 20
            let pager = try Pager(path: file, options: options)
            defer { pager.close() }
            let report = try pager.withReadTransaction { pager -> [(String, String)] in
                let header = pager.currentHeader
                var problems: [IntegrityProblem] = []
                let freelist = try pager.freelist(problems: &problems)
                let bytes = Int64(header.pageCount) * Int64(header.pageSize)
                return [
                    ("file", file),
                    ("format", "ArborStore, read version \(header.readVersion), write version \(header.writeVersion)"),
                    ("file id", hex(header.fileUUIDBytes)),
                    ("page size", "\(header.pageSize)"),
                    ("pages", "\(header.pageCount) (\(bytes) bytes)"),
                    ("free pages", "\(header.freelistCount) (\(freelist.trunks.count) trunk, \(freelist.leaves.count) leaf)"),
                    ("pages in use", "\(Int(header.pageCount) - 1 - Int(header.freelistCount)) (besides the header page)"),
                    ("catalog root", header.catalogRoot == 0 ? "none" : "page \(header.catalogRoot)"),
                    ("change counter", "\(header.changeCounter)"),
                    ("user version", "\(header.userVersion)"),
                ]
            }
            let problems = try pager.checkPages()
            let width = report.map(\.0.count).max() ?? 0
            for (name, value) in report {
                print(pad(name, width) + "  " + value)
            }
            print(pad("page check", width) + "  "
                  + (problems.isEmpty ? "ok" : "\(problems.count) problem(s)"))
            if !problems.isEmpty {
                for problem in problems { printError("arbor: \(file): \(problem)") }
                throw ExitCode(1)
            }
        }
    }
}

func hex(_ bytes: [UInt8]) -> String {
    bytes.map { byte in
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 15)]])
    }.joined()
}

func pad(_ text: String, _ width: Int) -> String {
    text + String(repeating: " ", count: max(0, width - text.count))
}
