// Safety: The raw page buffer is allocated for one call and freed (`defer`); a frame copied out is
// pinned while it is read.

/// Replacing a file's contents with another file's pages in one write transaction (compaction, a
/// restore), and copying pages out (online backup): docs/commit-protocol.md, "Replacing a file's
/// contents: compaction and restore" and "Online backup".
extension Pager {
    /// Steps 3 and 4 of a replacement: every page the new contents change or remove is journaled
    /// (read raw: a free page's content need not be a page), then pages 1 … `source`'s page count
    /// become `source`'s pages, in this write transaction, whose commit (step 5) truncates the
    /// file to the new count. Page 1's header keeps this file's identity and takes `source`'s
    /// page count, freelist and catalog root.
    ///
    /// - Throws: `misuse` when the transaction changed anything before, or `source` is in no
    ///   transaction; `invalidArgument` for a source of another page size; the engine's read and
    ///   write errors.
    func replaceContents(with source: Pager, keepsUserVersion: Bool = true) throws {
        try requireWrite()
        guard !write.changed else { throw StoreError(.misuse, "a replacement of the file's contents must come first in its transaction", path: path) }
        guard source.state != .none else { throw StoreError(.misuse, "the source of a replacement must be in a transaction", path: path) }
        guard source.pageSize == pageSize else {
            throw StoreError(.invalidArgument, "cannot replace a database of \(pageSize)-byte pages with one of \(source.pageSize)-byte pages", path: path)
        }
        let newCount = source.currentHeader.pageCount
        let oldCount = write.originalPageCount
        let raw = UnsafeMutableRawBufferPointer.allocate(byteCount: pageSize, alignment: 16)
        defer { raw.deallocate() }
        // The source's free pages need not hold pages at all (freed at its end, never written):
        // copied raw, and sealed when written here.
        let sourceFree = try source.freePages()
        write.header.pageCount = max(oldCount, newCount)
        for page in 1...max(oldCount, newCount) {
            if page <= oldCount && !write.journaled.contains(page) {
                try readRaw(page, into: raw)
                try journalOriginal(page, image: UnsafeRawBufferPointer(raw))
            }
            guard page <= newCount else {
                cache.drop(page)
                continue
            }
            try installZeroedPage(page)
            let frame = try frame(of: page)
            cache.pin(frame)
            defer { cache.unpin(frame) }
            if sourceFree.contains(page) {
                try source.readRaw(page, into: cache.buffer(frame))
            } else {
                try source.withPage(page) { image in
                    cache.buffer(frame).copyMemory(from: image)
                }
            }
            // Page 1 names this file even when spilled before the commit (recovery matches the
            // journal to the file by it); the commit writes the final header.
            if page == 1 { write.header.encode(into: cache.buffer(frame)) }
        }
        write.header.pageCount = newCount
        write.header.freelistHead = source.currentHeader.freelistHead
        write.header.freelistCount = source.currentHeader.freelistCount
        write.header.catalogRoot = source.currentHeader.catalogRoot
        if !keepsUserVersion { write.header.userVersion = source.currentHeader.userVersion }
        write.freedInTransaction = []
        write.changed = true
        write.shrinks = true
    }

    /// The free pages (trunks and leaves of the freelist) as this transaction sees them.
    func freePages() throws -> Set<PageNumber> {
        var problems: [IntegrityProblem] = []
        let layout = try freelist(problems: &problems)
        if let problem = problems.first { throw StoreError(.corrupt, "the freelist is damaged: \(problem)", path: path) }
        return layout.all
    }

    /// Page `page` as the file holds it, unverified (zeros past the file's end).
    func readRaw(_ page: PageNumber, into buffer: UnsafeMutableRawBufferPointer) throws {
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        _ = try file.readFully(into: buffer, at: Int64(page - 1) * Int64(pageSize))
    }

    /// Copies page `page` as it is in the file (its checksum trailer included) into `buffer`
    /// (one page long), in a read or write transaction; the page is verified on the way in.
    func copyPage(_ page: PageNumber, into buffer: UnsafeMutableRawBufferPointer) throws {
        let frame = try frame(of: page)
        buffer.copyMemory(from: UnsafeRawBufferPointer(cache.buffer(frame)))
    }
}
