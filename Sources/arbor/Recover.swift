import ArgumentParser
import ArborStore

/// `arbor recover`: opens a database read-write once, which rolls back a hot journal (step 5 of
/// docs/commit-protocol.md), and says what that did.
struct Recover: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Roll back an interrupted transaction (a hot journal) and say what was done.",
        discussion: """
            A writer that died mid-commit leaves FILE-journal holding the original images of the \
            pages it changed. Opening the file read-write writes them back and truncates the file \
            to its length before the transaction; read-only commands (info, check, query, …) \
            cannot, and ask for this command instead. Prints whether there was a hot journal, \
            how many pages were restored, and the file's size before and after. Exits 0 when \
            nothing needed recovery too.
            """
    )

    @Argument(help: "The database file.")
    var file: String

    func run() throws {
        try reportingErrors {
            let journal = file + "-journal"
            let sizeBefore = fileSize(file)
            var options = PagerOptions()
            options.create = false
            options.busyTimeout = .seconds(5)
            // Opening is what recovers: the first shared lock rolls a hot journal back.
            let pager = try Pager(path: file, options: options)
            defer { pager.close() }
            let header = pager.currentHeader
            let sizeAfter = Int64(header.pageCount) * Int64(header.pageSize)
            let now = "now \(header.pageCount) pages of \(header.pageSize) bytes (\(sizeAfter) bytes)"
            guard pager.statistics.recoveries > 0 else {
                let why = fileSize(journal) == nil ? "there is no journal" : "\(journal) is not hot"
                print("\(file): nothing to recover (\(why)); \(now)")
                return
            }
            let restored = pager.statistics.pagesRestored
            var did = "\(file): rolled back an interrupted transaction from \(journal): "
            did += "\(restored) \(restored == 1 ? "page" : "pages") restored"
            if let sizeBefore, sizeBefore != sizeAfter {
                did += ", the file truncated from \(sizeBefore) to \(sizeAfter) bytes"
            }
            print(did + "; " + now)
        }
    }

    /// The size of the file at `path`, or nil when there is none.
    func fileSize(_ path: String) -> Int64? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return Int64(status.st_size)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
