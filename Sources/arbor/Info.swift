import ArgumentParser
import ArborStore

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a database's header, page statistics, freelist and trees.",
        discussion: """
            Opens FILE read-only and prints its header fields, its size, the freelist, each tree \
            (kind, entries, depth, pages, fill factor, compressed values), and the result of the \
            page-level check (every page's checksum, the freelist). Exits with status 1 when the \
            file is not an Arbor database, is damaged, or has an interrupted transaction that \
            `arbor recover` must roll back first. For the full structural check, use `arbor check`.
            """
    )

    @Argument(help: "The database file.")
    var file: String

    func run() throws {
        try reportingErrors {
            let database = try openDatabase(file, readOnly: true)
            defer { database.close() }
            // Each problem once: the page check below reports the freelist's problems and every
            // unreadable page; a tree that cannot be walked reports its page with its name.
            var treeProblems: [StoreError] = []
            let (fields, trees) = try database.read { transaction -> ([(String, String)], [[String]]) in
                let header = transaction.header
                let (freelist, _) = try transaction.freelist()
                let bytes = Int64(header.pageCount) * Int64(header.pageSize)
                let descriptors = try transaction.trees()
                var rows: [[String]] = [["tree", "kind", "entries", "depth", "pages", "leaf/interior/overflow", "fill", "compressed"]]
                for descriptor in descriptors {
                    guard let tree = try transaction.tree(named: descriptor.name) else { continue }
                    do {
                        let stats = try tree.statistics()
                        rows.append([descriptor.name, "\(descriptor.kind)", "\(stats.entries)", "\(stats.depth)", "\(stats.pages)",
                                     "\(stats.leafPages)/\(stats.interiorPages)/\(stats.overflowPages)",
                                     "\(Int((stats.fillFactor * 100).rounded()))%", "\(stats.compressedValues)"])
                    } catch let error as StoreError {
                        treeProblems.append(error)
                    }
                }
                let fields = [
                    ("file", file),
                    ("format", "ArborStore, read version \(header.readVersion), write version \(header.writeVersion)"),
                    ("file uuid", hexString(header.fileUUIDBytes)),
                    ("page size", "\(header.pageSize)"),
                    ("pages", "\(header.pageCount) (\(bytes) bytes)"),
                    ("free pages", "\(header.freelistCount) (\(freelist.trunks.count) trunk, \(freelist.leaves.count) leaf)"),
                    ("pages in use", "\(Int(header.pageCount) - 1 - Int(header.freelistCount)) (besides the header page)"),
                    ("catalog root", header.catalogRoot == 0 ? "none" : "page \(header.catalogRoot)"),
                    ("change counter", "\(header.changeCounter)"),
                    ("user version", "\(header.userVersion)"),
                    ("trees", "\(descriptors.count)"),
                ]
                return (fields, descriptors.isEmpty ? [] : rows)
            }
            let pageProblems = try database.pageProblems().filter { problem in
                !treeProblems.contains { $0.page == problem.page && $0.message.hasSuffix(problem.description) }
            }
            let problems = treeProblems.map(\.message) + pageProblems.map(\.description)
            let width = fields.map(\.0.count).max() ?? 0
            for (name, value) in fields { print(pad(name, width) + "  " + value) }
            if !trees.isEmpty {
                let widths = (0..<trees[0].count).map { column in trees.map { $0[column].count }.max() ?? 0 }
                for row in trees {
                    let line = "  " + zip(row, widths).map { pad($0, $1) }.joined(separator: "  ")
                    print(String(line.reversed().drop(while: { $0 == " " }).reversed()))
                }
            }
            print(pad("page check", width) + "  " + (problems.isEmpty ? "ok" : "\(problems.count) problem(s)"))
            if !problems.isEmpty {
                for problem in problems { printError("arbor: \(file): \(problem)") }
                throw ExitCode(1)
            }
        }
    }
}

func pad(_ text: String, _ width: Int) -> String {
    text + String(repeating: " ", count: max(0, width - text.count))
}
