import ArgumentParser
import ArborStore

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a database's integrity; exit 1 listing every problem found.",
        discussion: """
            Proves that every page is used exactly once (by a tree, an overflow chain or the \
            freelist), that every checksum holds, that keys are strictly ordered within and across \
            the pages of each tree, that all leaves of a tree sit at one depth, that overflow chains \
            match their values' sizes, that compressed values decode, and that the freelist matches \
            the header.
            """
    )

    @Argument(help: "The database file.")
    var file: String

    func run() throws {
        try reportingErrors {
            let database = try openDatabase(file, readOnly: true)
            defer { database.close() }
            let report = try database.checkIntegrity()
            if report.isSound {
                let entries = report.trees.values.reduce(0) { $0 + $1.entries }
                print("ok: \(report.pageCount) pages, \(report.trees.count) trees, \(entries) entries, \(report.freePages) free pages")
                return
            }
            for problem in report.problems { printError("arbor: \(file): \(problem)") }
            print("\(report.problems.count) problem(s) found")
            throw ExitCode(1)
        }
    }
}

struct Put: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Store a value under a key in a tree (creating the file and the tree if needed).")

    @Argument(help: "The database file.") var file: String
    @Argument(help: "The tree.") var tree: String
    @Argument(help: "The key.") var key: String
    @Argument(help: "The value.") var value: String
    @OptionGroup var encoding: EncodingOptions

    func run() throws {
        let key = try encoding.bytes(self.key, what: "key")
        let value = try encoding.bytes(self.value, what: "value")
        try reportingErrors {
            let database = try openDatabase(file, readOnly: false, create: true)
            defer { database.close() }
            try database.write { transaction in
                try transaction.tree(named: tree, create: true)!.put(key, value)
            }
        }
    }
}

struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the value stored under a key; exit 1 when there is none.",
        discussion: "Values that are not single-line UTF-8 text print as hexadecimal.")

    @Argument(help: "The database file.") var file: String
    @Argument(help: "The tree.") var tree: String
    @Argument(help: "The key.") var key: String
    @OptionGroup var encoding: EncodingOptions

    func run() throws {
        let key = try encoding.bytes(self.key, what: "key")
        try reportingErrors {
            let database = try openDatabase(file, readOnly: true)
            defer { database.close() }
            let value = try database.read { transaction in
                try requireTree(transaction, tree, file: file).get(key)
            }
            guard let value else {
                throw missingKey(key, tree: tree, file: file, encoding: encoding)
            }
            print(encoding.format(value))
        }
    }
}

struct Delete: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove a key from a tree; exit 1 when it was not there.")

    @Argument(help: "The database file.") var file: String
    @Argument(help: "The tree.") var tree: String
    @Argument(help: "The key.") var key: String
    @OptionGroup var encoding: EncodingOptions

    func run() throws {
        let key = try encoding.bytes(self.key, what: "key")
        try reportingErrors {
            let database = try openDatabase(file, readOnly: false)
            defer { database.close() }
            let removed = try database.write { transaction in
                try requireTree(transaction, tree, file: file).delete(key)
            }
            guard removed else {
                throw missingKey(key, tree: tree, file: file, encoding: encoding)
            }
        }
    }
}

struct Scan: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a tree's entries in key order, one \"key<TAB>value\" line each.",
        discussion: "--from is inclusive, --to exclusive. Keys and values that are not single-line UTF-8 text print as hexadecimal.")

    @Argument(help: "The database file.") var file: String
    @Argument(help: "The tree.") var tree: String
    @Option(help: "Start at the first key ≥ this one.") var from: String?
    @Option(help: "Stop before the first key ≥ this one.") var to: String?
    @Option(help: "Print at most this many entries.") var limit: Int?
    @OptionGroup var encoding: EncodingOptions

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must not be negative") }
    }

    func run() throws {
        let start = try from.map { try encoding.bytes($0, what: "--from key") }
        let end = try to.map { try encoding.bytes($0, what: "--to key") }
        try reportingErrors {
            let database = try openDatabase(file, readOnly: true)
            defer { database.close() }
            try database.read { transaction in
                let cursor = try requireTree(transaction, tree, file: file).makeCursor()
                var more = try start.map { try cursor.seek($0) } ?? cursor.first()
                var printed = 0
                while more, printed < (limit ?? .max), let key = cursor.key {
                    if let end, !key.lexicographicallyPrecedes(end) { break }
                    print(encoding.format(key) + "\t" + encoding.format(try cursor.value() ?? []))
                    printed += 1
                    more = try cursor.next()
                }
            }
        }
    }
}

/// Reports a key that is not in its tree: the message on standard error, exit status 1.
func missingKey(_ key: [UInt8], tree: String, file: String, encoding: EncodingOptions) -> ExitCode {
    printError("arbor: \(file): no key \(encoding.format(key)) in tree \"\(tree)\"")
    return ExitCode(1)
}
