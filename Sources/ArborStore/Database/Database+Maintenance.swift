import Foundation

// Safety: The page buffers of a backup and of a new file ID are allocated for one call and freed on
// the way out (`defer`).

/// Keeping a database file: compaction, restoring it from another file, and online backup
/// (docs/commit-protocol.md, "Replacing a file's contents: compaction and restore" and
/// "Online backup").
extension Database {
    /// What ``compact()`` did: the file's pages and bytes before and after.
    public struct CompactionReport: Sendable, Equatable, CustomStringConvertible {
        /// The file's pages before and after.
        public let pagesBefore: Int
        public let pagesAfter: Int
        /// The free pages before (none are left after, but for the few a dense copy leaves).
        public let freePagesBefore: Int
        /// The page size.
        public let pageSize: Int

        /// `412 → 296 pages (1.6 MiB → 1.2 MiB), 116 free pages before`.
        public var description: String {
            func mebibytes(_ pages: Int) -> String { String(format: "%.1f MiB", Double(pages * pageSize) / 1_048_576) }
            return "\(pagesBefore) → \(pagesAfter) pages (\(mebibytes(pagesBefore)) → \(mebibytes(pagesAfter))), \(freePagesBefore) free page\(freePagesBefore == 1 ? "" : "s") before"
        }
    }

    /// What ``backup(to:fileSystem:)`` did.
    public struct BackupReport: Sendable, Equatable, CustomStringConvertible {
        /// The pages copied (the copy's size in pages).
        public let pages: Int
        /// How many times another connection's commit made the copy start again.
        public let restarts: Int
        /// The change counter of the commit the copy holds.
        public let changeCounter: UInt64

        /// `296 pages, at change 1043 (1 restart)`.
        public var description: String {
            "\(pages) pages, at change \(changeCounter)\(restarts > 0 ? " (\(restarts) restart\(restarts == 1 ? "" : "s"))" : "")"
        }
    }

    /// The pages an online backup copies per read transaction.
    static let backupStep = 256
    /// Restarts after which a backup copies the whole file in one read transaction.
    static let backupRestarts = 3

    /// Rewrites the file without its free pages, in one write transaction: every tree is copied
    /// densely into a separate file (`<path>-compact`), whose pages then replace the file's,
    /// which shrinks. Other connections and processes may keep the file open; they wait for the
    /// write lock as for any writer and then see the compacted file. A power cut at any point
    /// leaves the file as it was or compacted, never between (the journal holds every page it
    /// overwrites or removes, so it needs as much free disk space as the file's size, twice).
    ///
    /// - Throws: ``StoreError`` (`busy`, `readOnly`, `full`, I/O); the file is then as it was.
    @discardableResult
    public func compact() throws -> CompactionReport {
        let scratch = path + "-compact"
        return try write { transaction in
            // Under the write lock: no other compaction of the file uses the scratch file.
            try removeScratch(scratch)
            defer { try? removeScratch(scratch) }
            let before = transaction.header
            let copy = try Database(path: scratch, options: scratchOptions(pageSize: before.pageSize))
            defer { copy.close() }
            try copy.write { target in try target.copyTrees(of: transaction) }
            try copy.read { source in try transaction.pager.replaceContents(with: source.pager) }
            return CompactionReport(pagesBefore: Int(before.pageCount), pagesAfter: Int(transaction.header.pageCount),
                                    freePagesBefore: Int(before.freelistCount), pageSize: before.pageSize)
        }
    }

    /// Replaces the file's contents with the database at `source` (a backup being restored), in
    /// one write transaction, as ``compact()`` replaces them: other connections keep the file
    /// open and see the new contents afterwards; a power cut leaves the old contents or the new.
    /// `source` is read through `sourceOptions` (read-only), every page verified.
    ///
    /// - Throws: ``StoreError``: `invalidArgument` for a source of another page size;
    ///   `notADatabase`, `corrupt` for a damaged source (nothing is written then); `busy`, I/O.
    public func replaceContents(withContentsOf source: String, options sourceOptions: DatabaseOptions = DatabaseOptions()) throws {
        var reading = sourceOptions
        reading.readOnly = true
        reading.create = false
        let other = try Database(path: source, options: reading)
        defer { other.close() }
        try write { transaction in
            try other.read { from in try transaction.pager.replaceContents(with: from.pager, keepsUserVersion: false) }
        }
    }

    /// Empties the database in one write transaction: afterwards it is a valid database with no
    /// trees, one page long (what destroying a store does before deleting its file, so that
    /// other connections read an empty database). Crash-safe as ``compact()`` is.
    ///
    /// - Throws: ``StoreError`` (`busy`, `readOnly`, I/O); the database is then as it was.
    public func erase() throws {
        var memory = options
        memory.fileSystem = MemoryFileSystem()
        memory.lockTable = LockTable()
        memory.readOnly = false
        memory.create = true
        try write { transaction in
            memory.pageSize = transaction.header.pageSize
            let empty = try Database(path: "/empty", options: memory)
            defer { empty.close() }
            try empty.read { source in try transaction.pager.replaceContents(with: source.pager) }
        }
    }

    /// Copies the database into a new file at `destination`, page by page, while other
    /// connections read and write: a consistent copy of one commit (docs/commit-protocol.md,
    /// "Online backup"). The copy gets a file ID of its own and is synced before this returns.
    ///
    /// - Parameters:
    ///   - destination: the new file's path.
    ///   - fileSystem: where the copy is written (the database's own by default).
    /// - Throws: `invalidArgument` when `destination` exists; the engine's read errors; I/O
    ///   errors writing the copy (which is then deleted).
    @discardableResult
    public func backup(to destination: String, fileSystem: (any FileSystem)? = nil) throws -> BackupReport {
        let target = fileSystem ?? options.fileSystem
        guard try !target.exists(destination) else {
            throw StoreError(.invalidArgument, "\(destination) exists: a backup is written to a new file", path: destination)
        }
        let file = try target.open(destination, mode: .readWriteCreate)
        var finished = false
        defer {
            file.close()
            if !finished { try? target.delete(destination) }
        }
        let report = try copyPages(into: file)
        try giveNewFileID(file)
        try file.sync()
        try target.syncDirectory(containing: destination)
        finished = true
        return report
    }

    /// Steps 1 and 2 of a backup: the pages of one commit, copied into `file` a step at a time,
    /// starting again when another connection commits between steps (after
    /// ``backupRestarts``, the whole file in one read transaction).
    private func copyPages(into file: any StoreFile) throws -> BackupReport {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: try read { $0.header.pageSize }, alignment: 16)
        defer { buffer.deallocate() }
        var restarts = 0
        while true {
            var next: PageNumber = 1
            var commit: (counter: UInt64, pages: PageNumber)?
            var free: Set<PageNumber>?
            var consistent = true
            repeat {
                consistent = try read { transaction -> Bool in
                    let header = transaction.header
                    if commit == nil { commit = (header.changeCounter, header.pageCount) }
                    guard header.changeCounter == commit!.counter else { return false }
                    let end = restarts >= Self.backupRestarts ? header.pageCount : min(header.pageCount, next + PageNumber(Self.backupStep) - 1)
                    if free == nil { free = try transaction.pager.freePages() }
                    while next <= end {
                        // A free page need not hold a page (freed at the end, never written).
                        if free!.contains(next) {
                            try transaction.pager.readRaw(next, into: buffer)
                        } else {
                            try transaction.pager.copyPage(next, into: buffer)
                        }
                        try file.write(UnsafeRawBufferPointer(buffer), at: Int64(next - 1) * Int64(buffer.count))
                        next += 1
                    }
                    return true
                }
            } while consistent && next <= commit!.pages
            guard consistent, let commit else {
                restarts += 1
                continue
            }
            try file.truncate(to: Int64(commit.pages) * Int64(buffer.count))
            return BackupReport(pages: Int(commit.pages), restarts: restarts, changeCounter: commit.counter)
        }
    }

    /// Step 3 of a backup: page 1 of the copy in `file` gets a new file ID (a journal of the
    /// original must never be replayed onto it), resealed.
    private func giveNewFileID(_ file: any StoreFile) throws {
        let pageSize = try read { $0.header.pageSize }
        let page = UnsafeMutableRawBufferPointer.allocate(byteCount: pageSize, alignment: 16)
        defer { page.deallocate() }
        guard try file.readFully(into: page, at: 0) else { throw StoreError(.ioError, "the backup's first page could not be read back") }
        var header = try DatabaseHeader.decode(UnsafeRawBufferPointer(page), path: path)
        header.fileID = DatabaseHeader.newFileID()
        header.encode(into: page)
        PageLayout.seal(page, pageNumber: 1)
        try file.write(UnsafeRawBufferPointer(page), at: 0)
    }

    /// The options of a compaction's separate file: the database's file system, writable, new.
    private func scratchOptions(pageSize: Int) -> DatabaseOptions {
        var scratch = options
        scratch.readOnly = false
        scratch.create = true
        scratch.pageSize = pageSize
        scratch.metricsFactory = nil
        return scratch
    }

    /// Deletes a compaction's separate file and its journal, when there.
    private func removeScratch(_ scratch: String) throws {
        for name in [scratch, scratch + "-journal"] where try options.fileSystem.exists(name) { try options.fileSystem.delete(name) }
    }
}
