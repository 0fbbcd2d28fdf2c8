// Safety: The gathering write passes the buffers of dirty cache frames, which the cache never
// evicts while they are dirty, and marks them clean only after the write.

/// The commit protocol: journaling, spilling, commit, rollback, and hot-journal recovery.
///
/// `docs/commit-protocol.md` numbers the steps; the comments below cite those numbers.
extension Pager {
    /// Step 1: appends the original image of `page` to the journal before its first change.
    func journalOriginal(_ page: PageNumber, image: UnsafeRawBufferPointer) throws {
        if try journal.openOrCreate() { needsDirectorySync = true }
        do {
            try journal.writeRecord(index: write.records, page: page, image: image, nonce: write.nonce)
        } catch {
            abortAfterFailure()
            throw error
        }
        write.records += 1
        write.journaled.insert(page)
        statistics.journalRecords += 1
    }

    /// Step 2: writes the record count into the journal header and syncs the journal (and the
    /// directory, the first time the journal exists). After this, database pages covered by the
    /// journal may be overwritten.
    private func syncJournal() throws {
        if try journal.openOrCreate() { needsDirectorySync = true }
        // Step 4b compares the journal's length with the limit; learn it now (one fstat, once per
        // journal opened or written by another connection), before the commit point, so that a
        // journal within the limit costs nothing after it.
        if options.journalSizeLimit != nil { _ = try journal.learnLength() }
        try journal.writeHeader(journalHeader(recordCount: write.records))
        try syncing { try journal.sync() }
        statistics.journalSyncs += 1
        if needsDirectorySync {
            try syncing { try fileSystem.syncDirectory(containing: canonicalPath) }
            statistics.directorySyncs += 1
            needsDirectorySync = false
        }
        write.syncedRecords = write.records
    }

    /// The journal header of the open write transaction, with `recordCount` records.
    private func journalHeader(recordCount: Int) -> Journal.Header {
        Journal.Header(pageSize: pageSize, nonce: write.nonce, originalPageCount: write.originalPageCount,
                       recordCount: UInt32(recordCount), fileID: write.header.fileID)
    }

    /// Writes every dirty page to the database file (after the journal covering them is durable),
    /// in page order, each run of consecutive pages with one gathering write.
    private func writeDirtyPages() throws {
        let frames = cache.dirtyFrames()
        var start = 0
        while start < frames.count {
            var end = start + 1
            let first = cache.page(ofFrame: frames[start])
            while end < frames.count && cache.page(ofFrame: frames[end]) == first + PageNumber(end - start) { end += 1 }
            var buffers: [UnsafeRawBufferPointer] = []
            buffers.reserveCapacity(end - start)
            for frame in frames[start..<end] {
                let buffer = cache.buffer(frame)
                PageLayout.seal(buffer, pageNumber: cache.page(ofFrame: frame))
                buffers.append(UnsafeRawBufferPointer(buffer))
            }
            let offset = Int64(first - 1) * Int64(pageSize)
            try file.write(gathering: buffers, at: offset)
            fileSize = max(fileSize, offset + Int64(buffers.count * pageSize))
            statistics.pagesWritten += UInt64(buffers.count)
            for frame in frames[start..<end] { cache.markClean(frame) }
            start = end
        }
    }

    /// Writes dirty pages early because the cache is full of them. The journal records covering
    /// them are synced first, every time, so the journal rule holds mid-transaction.
    func spill() throws {
        try waitForLock(.exclusive)
        do {
            if write.syncedRecords != write.records || !write.spilled {
                try syncJournal()
            }
            cache.statistics.spills += UInt64(cache.dirtyCount)
            write.spilled = true
            try writeDirtyPages()
        } catch {
            if write.spilled && poison == nil { restoreFromJournal() }
            abortAfterFailure()
            throw error
        }
    }

    /// Commits the write transaction durably.
    ///
    /// Steps 2–4 of the protocol: sync the journal, write and sync the database, invalidate the
    /// journal and sync it. Three syncs; the last is the commit point, and only after it does
    /// `commit()` return — after step 4b, which trims a journal grown past
    /// ``PagerOptions/journalSizeLimit`` (one more sync, then) and cannot undo the commit.
    ///
    /// - Throws: `busy` when readers keep the file past the busy timeout (the transaction stays
    ///   open: retry `commit()` or call `rollback()`); any other error aborts the transaction
    ///   (a failed sync also poisons the handle).
    public func commit() throws {
        try requireWrite()
        guard write.changed || write.header != header else {
            finishWrite()
            return
        }
        try waitForLock(.exclusive)
        var journalDurable = write.spilled
        do {
            write.header.changeCounter &+= 1
            let frame = try frame(of: 1)
            try makeWritable(frame, page: 1)
            write.header.encode(into: cache.buffer(frame))
            try syncJournal()
            journalDurable = true
            try writeDirtyPages()
            let needed = Int64(write.header.pageCount) * Int64(pageSize)
            if fileSize < needed || (write.shrinks && fileSize > needed) {
                // Freed pages at the end were never written: give the file its full length. Or a
                // replacement of the file's contents shrinks it, every page it removes journaled
                // (``replaceContents(with:)``).
                try file.truncate(to: needed)
                fileSize = needed
            }
            try syncing { try file.sync() }
            statistics.databaseSyncs += 1
            try journal.invalidate()
            try syncing { try journal.sync() }
            statistics.journalSyncs += 1
        } catch {
            if journalDurable && poison == nil { restoreFromJournal() }
            abortAfterFailure()
            throw error
        }
        // The commit point has passed: nothing below may throw or undo the transaction.
        if write.shrinks {
            // A replacement: pages and dictionaries cached by page number named other contents.
            cache.dropAll()
            dictionaries.removeAll()
        }
        header = write.header
        cacheChangeCounter = header.changeCounter
        statistics.commits += 1
        trimJournal()
        finishWrite()
    }

    /// Step 4b: truncates a journal longer than ``PagerOptions/journalSizeLimit`` back to the limit
    /// and syncs it.
    ///
    /// Called only once the journal's zeroed header is durable (after step 4's sync, or a replay's
    /// invalidation), and with the lock still held: a journal whose header is durably zero is cold
    /// whatever its length, so a power cut anywhere in here leaves the transaction as it ended.
    /// (Before that sync, the truncation could reach the disk without the zeroing, leaving a hot
    /// journal short of records: an incomplete rollback.) Never throws — the transaction has
    /// already ended: a failed truncation leaves a longer journal for a later transaction to trim;
    /// a failed sync poisons the handle, as every failed sync does.
    func trimJournal() {
        guard let limit = options.journalSizeLimit.map(Int64.init), journal.isOpen else { return }
        let length: Int64
        do {
            length = try journal.learnLength()
            guard length > limit else { return }
            try journal.truncate(to: limit)
            try syncing { try journal.sync() }
        } catch {
            // No caller is told: the transaction has ended. A failed sync poisoned the handle.
            if poison != nil {
                options.logger.error("a sync failed after the transaction ended: this connection refuses further writes until the file is opened again",
                                     metadata: ["arbor.path": "\(path)", "arbor.journal": "\(journal.path)", "arbor.error": "\(error)"])
            } else {
                options.logger.warning("could not trim the journal to journalSizeLimit: it stays longer until a later transaction trims it",
                                       metadata: ["arbor.path": "\(path)", "arbor.journal": "\(journal.path)", "arbor.error": "\(error)"])
            }
            return
        }
        statistics.journalSyncs += 1
        statistics.journalTrims += 1
        options.logger.debug("trimmed the journal from \(length) to \(limit) bytes (journalSizeLimit)",
                             metadata: ["arbor.path": "\(path)", "arbor.journal": "\(journal.path)",
                                        "arbor.journalBytes": "\(length)", "arbor.journalSizeLimit": "\(limit)"])
    }

    /// Abandons the write transaction, restoring every page it changed.
    ///
    /// When pages were already spilled to the file, they are restored from the journal.
    public func rollback() throws {
        guard state == .write else { return }
        // Records gathered but not written are of no use now: the spill synced the ones that
        // cover written pages, and a later journal write (the replay's reads, the trim's sync)
        // must not put them back past the limit or fail on them.
        journal.discardPending()
        if write.spilled {
            do {
                guard let journalHeader = try journal.readHeader() else {
                    throw StoreError(.corrupt, "the journal of the open transaction is unreadable", path: journal.path)
                }
                try playback(journalHeader)
            } catch {
                abortAfterFailure()
                throw error
            }
            dropCachedPages()
        } else {
            cache.dropDirty()
            // A dictionary made in the transaction is gone with it.
            dictionaries.removeAll()
        }
        // Step 4b. Without a spill the journal's header was never written: it is still the zeroed
        // one the last transaction synced.
        if write.records > 0 { trimJournal() }
        finishWrite()
    }

    /// After a failure once the database file may have been written: put the original pages back
    /// now, rewriting the journal header first (a failed invalidation may have damaged it), so a
    /// commit that throws has not happened. If that fails too, the handle is poisoned and the next
    /// connection to lock the file recovers it from whatever the journal holds.
    private func restoreFromJournal() {
        do {
            let journalHeader = journalHeader(recordCount: write.syncedRecords)
            try journal.writeHeader(journalHeader)
            try playback(journalHeader)
        } catch {
            poison = poison ?? (error as? StoreError) ?? StoreError(.ioError, "rollback after a failed commit failed: \(error)", path: path)
        }
    }

    /// Ends the write transaction and releases its locks.
    ///
    /// - Parameter aborting: the transaction ends because of a failure in its middle, so the
    ///   pins of the calls it interrupted are still held (they are released as the error
    ///   unwinds); the pins are checked only at a normal end.
    func finishWrite(aborting: Bool = false) {
        journal.discardPending()
        appendHint = nil
        newDictionaries.removeAll()
        dictionarySamples.removeAll()
        write = WriteState()
        state = .none
        if !aborting { checkPinsBalanced() }
        unlock(to: .none)
    }

    /// After a failure mid-transaction: forget everything cached (the file may hold a partial
    /// write that the hot journal will undo), end the transaction and release the locks so that
    /// the next connection to lock the file recovers it.
    func abortAfterFailure() {
        guard state == .write else { return }
        dropCachedPages()
        // A failed write may have left the journal longer than this connection counted.
        journal.forgetLength()
        finishWrite(aborting: true)
    }

    /// Forgets every cached page and what was derived from them (loaded dictionaries): the file
    /// may have changed under them.
    func dropCachedPages() {
        cache.dropAll()
        dictionaries.removeAll()
        cacheChangeCounter = nil
    }

    /// Runs a sync; a failure poisons the handle (the kernel may have dropped the written pages, so
    /// nothing this connection believes about the file can be trusted any more). Logged at
    /// `debug`: the error is thrown (``trimJournal()``, which throws nothing, logs its own).
    func syncing(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as StoreError {
            poison = error
            options.logger.debug("a sync failed: this connection refuses further writes until the file is opened again (which recovers it)",
                                 metadata: ["arbor.path": "\(path)", "arbor.error": "\(error)"])
            throw error
        }
    }

    // MARK: Recovery

    /// Step 5: with the shared lock held, rolls back a hot journal.
    ///
    /// - Returns: `false` when the journal is hot but another connection holds the write lock (it
    ///   is recovering or committing): the caller releases its lock and tries again.
    func recoverIfHot(deadline: ContinuousClock.Instant) throws -> Bool {
        guard try journal.openIfExists(), let first = try journal.readHeader(), try isHot(first) else { return true }
        guard !options.readOnly else {
            throw StoreError(.readOnly, "the file has an interrupted transaction (a hot journal) that must be rolled back; open it read-write once to recover it", path: path)
        }
        guard try tryLock(.reserved) else { return false }
        do {
            try waitForLock(.exclusive, deadline: deadline)
            // Someone may have recovered between our look and our lock.
            if let journalHeader = try journal.readHeader(), try isHot(journalHeader) {
                let restored = try playback(journalHeader)
                statistics.pagesRestored += UInt64(restored)
                statistics.recoveries += 1
                options.logger.warning("rolled back a hot journal: a writer stopped mid-commit; \(restored) pages restored, the file is as its last commit left it",
                                       metadata: ["arbor.path": "\(path)", "arbor.pagesRestored": "\(restored)", "arbor.journal": "\(journal.path)"])
                // Step 5.7: the crashed transaction may have grown the journal (another
                // connection wrote it: its length is asked afresh).
                journal.forgetLength()
                trimJournal()
            }
        } catch {
            unlock(to: .shared)
            throw error
        }
        dropCachedPages()
        unlock(to: .shared)
        return true
    }

    /// A journal that cannot belong to this database is refused rather than replayed: the
    /// header's page size (in the first sector, which is never torn) must agree, and so must the
    /// file ID the journal names. A journal naming none (written by builds before journals named
    /// their file) must also describe a file no longer than this one: only a replacement of the
    /// file's contents shrinks a file (docs/commit-protocol.md, "Replacing a file's contents:
    /// compaction and restore"), and its journal names the file.
    private func checkJournalMatchesDatabase(_ journalHeader: Journal.Header) throws {
        let size = try file.size()
        let original = Int64(journalHeader.originalPageCount) * Int64(journalHeader.pageSize)
        var prefix = [UInt8](repeating: 0, count: DatabaseHeader.size)
        let complete = try prefix.withUnsafeMutableBytes { try file.readFully(into: $0, at: 0) }
        // A longer original only for a journal naming this very file (a replacement shrank it):
        // the file must begin with a header naming the journal's file ID.
        let namesThisFile = complete && prefix.withUnsafeBytes { DatabaseHeader.hasMagic($0) }
            && journalHeader.fileID != (0, 0)
            && prefix.withUnsafeBytes { ($0.loadLE(UInt64.self, at: 48), $0.loadLE(UInt64.self, at: 56)) } == journalHeader.fileID
        guard original <= size || namesThisFile else {
            throw StoreError(.corrupt, "the journal describes a database of \(original) bytes but the file holds \(size): it does not belong to this database; move it away to open the file", path: journal.path)
        }
        if complete, prefix.withUnsafeBytes({ DatabaseHeader.hasMagic($0) }) {
            let pageSize = Int(prefix.withUnsafeBytes { $0.loadLE(UInt32.self, at: 20) })
            guard pageSize == journalHeader.pageSize else {
                throw StoreError(.corrupt, "the journal's page size \(journalHeader.pageSize) differs from the database's \(pageSize): it does not belong to this database", path: journal.path)
            }
            // The file ID never changes and lies in the first sector (never torn): a journal
            // naming another is another database's (a backup copied over this file, say), and
            // replaying it would overwrite this one with that one's pages.
            let fileID = prefix.withUnsafeBytes { ($0.loadLE(UInt64.self, at: 48), $0.loadLE(UInt64.self, at: 56)) }
            let named = journalHeader.fileID
            guard named == (0, 0) || named == fileID else {
                throw StoreError(.corrupt, "the journal belongs to another database (file uuid \(DatabaseHeader.text(ofFileID: named)), not this file's \(DatabaseHeader.text(ofFileID: fileID))); move it away to open the file", path: journal.path)
            }
        }
    }

    private func isHot(_ journalHeader: Journal.Header) throws -> Bool {
        if journalHeader.recordCount > 0 { return true }
        let size = try file.size()
        return size != Int64(journalHeader.originalPageCount) * Int64(journalHeader.pageSize)
    }

    /// Writes the journal's original images back, truncates the file to its original length,
    /// syncs it, and only then invalidates the journal: a crash anywhere in here leaves the
    /// journal hot, and replaying it again is harmless.
    ///
    /// - Returns: the number of page images written back (the records before the first whose
    ///   checksum fails).
    @discardableResult
    func playback(_ journalHeader: Journal.Header) throws -> Int {
        try checkJournalMatchesDatabase(journalHeader)
        journal.setPageSize(journalHeader.pageSize)
        defer { journal.setPageSize(header.pageSize) }
        let pageSize = Int64(journalHeader.pageSize)
        var restored = 0
        for index in 0..<Int(journalHeader.recordCount) {
            let valid = try journal.readRecord(index: index, nonce: journalHeader.nonce) { page, image in
                guard page >= 1, page <= journalHeader.originalPageCount else {
                    throw StoreError(.corrupt, "journal record \(index) names page \(page), outside the original \(journalHeader.originalPageCount) pages", path: journal.path)
                }
                try file.write(image, at: Int64(page - 1) * pageSize)
            }
            // A record whose checksum fails was never synced, so its page was never overwritten.
            if !valid { break }
            restored += 1
        }
        let originalSize = Int64(journalHeader.originalPageCount) * pageSize
        try file.truncate(to: originalSize)
        fileSize = originalSize
        try syncing { try file.sync() }
        statistics.databaseSyncs += 1
        try journal.invalidate()
        try syncing { try journal.sync() }
        statistics.journalSyncs += 1
        return restored
    }
}
