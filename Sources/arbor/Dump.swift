import ArgumentParser
import ArborStore

/// The text dump format (`docs/dump-format.md`):
///
///     ArborStore dump 1
///     page-size 4096
///     user-version 0
///     tree <name in hex> <table|index> <sequence>
///      <key in hex>
///      <value in hex>
///     end
///
/// One `tree` block per tree, entries in key order, each key and value on its own line indented
/// by one space (as mdb_dump does), so `load` can round-trip every byte.
enum DumpFormat {
    static let magic = "ArborStore dump 1"
}

struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write every tree of a database to standard output as text, for `arbor load`.")

    @Argument(help: "The database file.") var file: String

    func run() throws {
        try reportingErrors {
            let database = try openDatabase(file, readOnly: true)
            defer { database.close() }
            try database.read { transaction in
                var output = StandardOutput()
                output.write("\(DumpFormat.magic)\npage-size \(transaction.header.pageSize)\nuser-version \(transaction.header.userVersion)\n")
                for descriptor in try transaction.trees() {
                    output.write("tree \(hexString(Array(descriptor.name.utf8))) \(descriptor.kind) \(descriptor.sequence)\n")
                    let cursor = try requireTree(transaction, descriptor.name, file: file).makeCursor()
                    var more = try cursor.first()
                    while more, let key = cursor.key {
                        output.write(" \(hexString(key))\n \(hexString(try cursor.value() ?? []))\n")
                        more = try cursor.next()
                    }
                    output.write("end\n")
                }
                output.flush()
            }
        }
    }
}

struct Load: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load a dump from standard input into a database, in one transaction.",
        discussion: """
            Creates FILE (with the dump's page size) when it does not exist. Each tree in the dump \
            must not exist yet, unless --replace is given, which drops it first. Everything is \
            committed in one transaction: on any error nothing is loaded. Progress goes to standard \
            error every 100 000 entries.
            """
    )

    @Argument(help: "The database file.") var file: String
    @Flag(help: "Drop trees that already exist before loading them.") var replace = false

    struct Malformed: Error, CustomStringConvertible {
        var line: Int
        var why: String
        var description: String { "line \(line): \(why)" }
    }

    func run() throws {
        // Long: one reader of the dump's grammar, line by line, in the order the dump writes it
        // (header, trees, entries): the nested `next` and `fail` share the line number every error
        // names.
        var reader = LineReader()
        var lineNumber = 0
        func next() -> String? {
            lineNumber += 1
            return reader.next()
        }
        func fail(_ why: String) -> Malformed { Malformed(line: lineNumber, why: why) }
        do {
            guard next() == DumpFormat.magic else { throw fail("not an ArborStore dump (expected \"\(DumpFormat.magic)\")") }
            guard let pageLine = next(), pageLine.hasPrefix("page-size "),
                  let pageSize = Int(pageLine.dropFirst("page-size ".count)), PageLayout.isValid(pageSize: pageSize) else {
                throw fail("expected \"page-size N\" with N a power of two in 512…65536")
            }
            guard let versionLine = next(), versionLine.hasPrefix("user-version "),
                  let userVersion = UInt32(versionLine.dropFirst("user-version ".count)) else {
                throw fail("expected \"user-version N\"")
            }
            try reportingErrors {
                var options = DatabaseOptions()
                options.pageSize = pageSize
                options.busyTimeout = .seconds(5)
                let database = try Database(path: file, options: options)
                defer { database.close() }
                var loaded = 0
                try database.write { transaction in
                    try transaction.setUserVersion(userVersion)
                    while let line = next() {
                        let parts = line.split(separator: " ", omittingEmptySubsequences: false)
                        guard parts.count == 4, parts[0] == "tree", let nameBytes = parseHex(String(parts[1])),
                              let name = String(validating: nameBytes, as: UTF8.self),
                              let kind = ["table": TreeKind.table, "index": .index][String(parts[2])],
                              let sequence = UInt64(parts[3]) else {
                            throw fail("expected \"tree <hex name> <table|index> <sequence>\"")
                        }
                        if try transaction.tree(named: name) != nil {
                            guard replace else { throw fail("tree \"\(name)\" already exists in \(file) (use --replace to drop it first)") }
                            try transaction.dropTree(named: name)
                        }
                        // Arbor's primary keys are Int64, handed out from the sequence.
                        guard sequence <= UInt64(Int64.max) else {
                            throw fail("tree \"\(name)\" has sequence \(sequence), above \(Int64.max), the largest primary key a table can hand out")
                        }
                        let tree = try transaction.createTree(named: name, kind: kind)
                        // The tree is new (sequence 0): one reservation of `sequence` numbers sets
                        // it, in one catalog update (one call per number would take time in
                        // proportion to a sequence that may be near 2^63).
                        if sequence > 0 { _ = try tree.nextSequence(reserving: Int(sequence)) }
                        while true {
                            guard let keyLine = next() else { throw fail("the dump ends inside tree \"\(name)\" (no \"end\")") }
                            if keyLine == "end" { break }
                            guard keyLine.hasPrefix(" "), let key = parseHex(String(keyLine.dropFirst())) else {
                                throw fail("expected \" <hex key>\" or \"end\"")
                            }
                            guard let valueLine = next(), valueLine.hasPrefix(" "), let value = parseHex(String(valueLine.dropFirst())) else {
                                throw fail("expected \" <hex value>\"")
                            }
                            try tree.put(key, value)
                            loaded += 1
                            if loaded % 100_000 == 0 { printError("loaded \(loaded) entries…") }
                        }
                    }
                }
                printError("loaded \(loaded) entries")
            }
        } catch let error as Malformed {
            printError("arbor: standard input: \(error)")
            throw ExitCode(1)
        }
    }
}

/// Buffered standard output (print() per line is slow for big dumps).
struct StandardOutput {
    /// Bytes not written yet (callers may append to it, then ``flush()`` when they choose).
    var buffer: [UInt8] = []

    mutating func write(_ text: String) {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= 1 << 16 { flush() }
    }

    mutating func flush() {
        buffer.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(1, raw.baseAddress! + offset, raw.count - offset)
                if n <= 0 { return }
                offset += n
            }
        }
        buffer.removeAll(keepingCapacity: true)
    }
}

/// Reads standard input line by line without Foundation.
struct LineReader {
    private var buffer: [UInt8] = []
    private var position = 0
    private var finished = false

    mutating func next() -> String? {
        while true {
            if let newline = buffer[position...].firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[position..<newline], as: UTF8.self)
                position = newline + 1
                return line
            }
            if finished {
                guard position < buffer.count else { return nil }
                let line = String(decoding: buffer[position...], as: UTF8.self)
                position = buffer.count
                return line
            }
            buffer.removeSubrange(..<position)
            position = 0
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            let n = chunk.withUnsafeMutableBytes { Glibc.read(0, $0.baseAddress, $0.count) }
            if n <= 0 { finished = true } else { buffer.append(contentsOf: chunk[..<n]) }
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
