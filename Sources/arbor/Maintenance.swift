import ArgumentParser
import ArborStore

/// `arbor backup`: a consistent copy of a database while other processes use it.
struct Backup: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy a database into a new file while other processes read and write it.",
        discussion: """
            Copies FILE page by page into DEST (which must not exist) a step at a time, between \
            other connections' commits, starting again when one commits (after three restarts, \
            the whole file in one read transaction, which writers wait for). DEST holds FILE as one \
            commit left it, with a file ID of its own, synced (docs/commit-protocol.md, "Online \
            backup"). Prints the pages copied and the restarts.
            """
    )

    @Argument(help: "The database file.") var file: String
    @Argument(help: "The new file to copy it into.") var destination: String

    func run() throws {
        try reportingErrors {
            // Other processes may hold the file for a while: a copy or a compaction waits longer.
            let database = try openDatabase(file, readOnly: false, busyTimeout: .seconds(30))
            defer { database.close() }
            let report = try database.backup(to: destination)
            print("\(file): copied into \(destination): \(report)")
        }
    }
}

/// `arbor vacuum`: compaction.
struct Vacuum: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rewrite a database without its free pages, in one crash-safe transaction.",
        discussion: """
            Copies every tree densely into FILE-compact, then replaces FILE's pages with it in \
            one write transaction, which truncates the file: other processes may keep FILE open \
            (they wait for the write lock as for any writer, then read the compacted file), and \
            a crash leaves FILE as it was or compacted. Needs free disk space for the copy and \
            the journal: about twice FILE's size. Prints the pages before and after.
            """
    )

    @Argument(help: "The database file.") var file: String

    func run() throws {
        try reportingErrors {
            // Other processes may hold the file for a while: a copy or a compaction waits longer.
            let database = try openDatabase(file, readOnly: false, busyTimeout: .seconds(30))
            defer { database.close() }
            let report = try database.compact()
            print("\(file): compacted: \(report)")
        }
    }
}
