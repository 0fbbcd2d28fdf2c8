// Safety: `withPage` and `withMutablePage` pin the frame for the body's call, so the buffer lent
// cannot be evicted or reused meanwhile; the pager is used from one thread at a time.

/// Page access, allocation and the freelist.
///
/// The freelist is a chain of *trunk* pages (layout in ``FreelistTrunk``). Leaves are
/// free pages whose content means nothing: freeing a page usually touches only the head trunk (the
/// freed page itself becomes the new head trunk when there is none or it is full), and reusing a
/// leaf that was already free when the transaction began needs no journal record (a rollback
/// restores the trunk that lists it as free again).
extension Pager {
    /// Calls `body` with the bytes of page `page` (its body, without the checksum trailer).
    ///
    /// The page is read through the cache and its checksum verified on the way in.
    ///
    /// - Throws: `corrupt` naming the page when its checksum fails; `invalidArgument` for a page
    ///   past the end of the file; `misuse` outside a transaction.
    @inline(__always) @discardableResult
    public func withPage<R>(_ page: PageNumber, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        let frame = try frame(of: page)
        cache.pin(frame)
        defer { cache.unpin(frame) }
        return try body(UnsafeRawBufferPointer(rebasing: cache.buffer(frame)[0..<usableSize]))
    }

    /// Calls `body` with the mutable bytes of page `page` (its body, without the trailer), inside a
    /// write transaction. The first change journals the page's original image.
    @discardableResult
    public func withMutablePage<R>(_ page: PageNumber, _ body: (UnsafeMutableRawBufferPointer) throws -> R) throws -> R {
        try requireWrite()
        let frame = try frame(of: page)
        try makeWritable(frame, page: page)
        cache.pin(frame)
        defer { cache.unpin(frame) }
        return try body(UnsafeMutableRawBufferPointer(rebasing: cache.buffer(frame)[0..<usableSize]))
    }

    /// Allocates a page, from the freelist when it has one, else at the end of the file. The new
    /// page's body is zeroed.
    public func allocatePage() throws -> PageNumber {
        try requireWrite()
        let head = write.header.freelistHead
        if head != 0 {
            let (next, count) = try withPage(head) { body -> (PageNumber, UInt32) in
                (body.loadLE(UInt32.self, at: FreelistTrunk.nextOffset), body.loadLE(UInt32.self, at: FreelistTrunk.countOffset))
            }
            try checkTrunk(head, next: next, count: count)
            if count > 0 {
                let leaf = try withMutablePage(head) { body -> PageNumber in
                    let leaf = body.loadLE(UInt32.self, at: FreelistTrunk.entriesOffset + 4 * Int(count - 1))
                    body.storeLE(count - 1, at: FreelistTrunk.countOffset)
                    return leaf
                }
                guard leaf >= 2, leaf <= write.header.pageCount, leaf != head else {
                    throw StoreError.corrupt(page: head, "freelist trunk lists page \(leaf), outside the file", path: path)
                }
                try takeFromFreelistCount(head)
                try reuseLeaf(leaf)
                return leaf
            }
            // An empty trunk is itself reused; its content (the next pointer) was journaled when
            // it was made writable.
            try withMutablePage(head) { body in body.initializeMemory(as: UInt8.self, repeating: 0) }
            guard next != head else {
                throw StoreError.corrupt(page: head, "freelist trunk points to itself", path: path)
            }
            try takeFromFreelistCount(head)
            write.header.freelistHead = next
            return head
        }
        guard write.header.pageCount < PageNumber.max - 1 else {
            throw StoreError(.full, "the database has reached the largest page count (\(PageNumber.max - 1))", path: path)
        }
        write.header.pageCount += 1
        let page = write.header.pageCount
        try installZeroedPage(page)
        return page
    }

    /// Returns page `page` to the freelist.
    public func freePage(_ page: PageNumber) throws {
        try requireWrite()
        guard page >= 2, page <= write.header.pageCount else {
            throw StoreError(.invalidArgument, "cannot free page \(page): outside 2…\(write.header.pageCount)", path: path)
        }
        let head = write.header.freelistHead
        let capacity = UInt32(FreelistTrunk.capacity(usable: usableSize))
        if head != 0 {
            let count = try withPage(head) { $0.loadLE(UInt32.self, at: FreelistTrunk.countOffset) }
            if count < capacity {
                try withMutablePage(head) { body in
                    body.storeLE(page, at: FreelistTrunk.entriesOffset + 4 * Int(count))
                    body.storeLE(count + 1, at: FreelistTrunk.countOffset)
                }
                write.header.freelistCount += 1
                write.freedInTransaction.insert(page)
                // A leaf's content means nothing: do not write it.
                if let frame = cache.peek(page) {
                    precondition(!isPinned(frame), "freeing page \(page) while it is in use")
                    cache.drop(page)
                }
                write.changed = true
                return
            }
        }
        // The page becomes the new head trunk.
        try withMutablePage(page) { body in
            body.initializeMemory(as: UInt8.self, repeating: 0)
            body[0] = FreelistTrunk.type
            body.storeLE(head, at: FreelistTrunk.nextOffset)
            body.storeLE(UInt32(0), at: FreelistTrunk.countOffset)
        }
        write.header.freelistHead = page
        write.header.freelistCount += 1
    }

    /// The catalog root recorded in the header.
    public var catalogRoot: PageNumber { currentHeader.catalogRoot }

    /// Records the catalog root in the header (inside a write transaction).
    public func setCatalogRoot(_ page: PageNumber) throws {
        try requireWrite()
        write.header.catalogRoot = page
        write.changed = true
    }

    /// Records the application's version number in the header (inside a write transaction).
    public func setUserVersion(_ version: UInt32) throws {
        try requireWrite()
        write.header.userVersion = version
        write.changed = true
    }

    // MARK: Internals

    func requireWrite() throws {
        guard state == .write else {
            throw StoreError(.misuse, state == .read ? "cannot change pages inside a read transaction" : "no write transaction is open")
        }
    }

    func isPinned(_ frame: Int) -> Bool {
        // Pins are only visible through the cache; a frame with pins cannot be dropped.
        cache.pinCount(frame) > 0
    }

    /// Counts one page off the freelist; a freelist holding more pages than the header counts is
    /// corruption (a hostile file), not an arithmetic trap.
    private func takeFromFreelistCount(_ trunk: PageNumber) throws {
        guard write.header.freelistCount > 0 else {
            throw StoreError.corrupt(page: trunk, "the freelist holds more pages than the header counts", path: path)
        }
        write.header.freelistCount -= 1
    }

    func checkTrunk(_ trunk: PageNumber, next: PageNumber, count: UInt32) throws {
        let capacity = UInt32(FreelistTrunk.capacity(usable: usableSize))
        guard count <= capacity else {
            throw StoreError.corrupt(page: trunk, "freelist trunk holds \(count) entries; at most \(capacity) fit", path: path)
        }
        guard next <= currentHeader.pageCount, next != 1 else {
            throw StoreError.corrupt(page: trunk, "freelist trunk points to page \(next), outside the file", path: path)
        }
    }

    /// The cache frame of `page`, reading it from the file on a miss.
    @inline(__always)
    func frame(of page: PageNumber) throws -> Int {
        guard state != .none else {
            throw StoreError(.misuse, "pages can only be read inside a transaction")
        }
        if let frame = cache.lookup(page) { return frame }
        return try load(page)
    }

    private func load(_ page: PageNumber) throws -> Int {
        guard page >= 1, page <= currentHeader.pageCount else {
            throw StoreError(.invalidArgument, "page \(page) is outside the file (1…\(currentHeader.pageCount))", page: page, path: path)
        }
        let frame = try freeFrame(for: page)
        let buffer = cache.buffer(frame)
        do {
            let complete = try file.readFully(into: buffer, at: Int64(page - 1) * Int64(pageSize))
            guard complete else {
                throw StoreError.corrupt(page: page, "the file ends before the page", path: path)
            }
            guard PageLayout.verify(UnsafeRawBufferPointer(buffer), pageNumber: page) else {
                throw StoreError.corrupt(page: page, "checksum mismatch", path: path)
            }
            if let pageValidator,
               let problem = pageValidator(page, UnsafeRawBufferPointer(rebasing: buffer[0..<usableSize]), currentHeader.pageCount) {
                throw StoreError.corrupt(page: page, problem, path: path)
            }
        } catch {
            cache.drop(page)
            throw error
        }
        return frame
    }

    /// A frame for `page`, spilling dirty pages when the cache is full of them.
    private func freeFrame(for page: PageNumber) throws -> Int {
        if cache.scanning, let frame = cache.frame(forScan: page) { return frame }
        if let frame = cache.frame(for: page) { return frame }
        if state == .write && cache.dirtyCount > 0 {
            try spill()
            if let frame = cache.frame(for: page) { return frame }
        }
        throw StoreError(.misuse, "the page cache is full of pages in use (\(cache.capacity) pages); raise the cache size", path: path)
    }

    /// A zeroed, dirty frame for a page whose previous content does not matter.
    func installZeroedPage(_ page: PageNumber) throws {
        let frame: Int
        if let cached = cache.peek(page) {
            frame = cached
        } else {
            frame = try freeFrame(for: page)
        }
        cache.buffer(frame).initializeMemory(as: UInt8.self, repeating: 0)
        cache.markDirty(frame)
        write.changed = true
    }

    /// Makes a freelist leaf a zeroed page in use.
    private func reuseLeaf(_ leaf: PageNumber) throws {
        if leaf <= write.originalPageCount && !write.journaled.contains(leaf) {
            if write.freedInTransaction.contains(leaf) {
                // It held live data when the transaction began: journal the original first.
                let frame = try frame(of: leaf)
                try makeWritable(frame, page: leaf)
            } else {
                // Free since before the transaction: its content is meaningless, skip the journal.
                write.journaled.insert(leaf)
            }
        }
        write.freedInTransaction.remove(leaf)
        try installZeroedPage(leaf)
    }

    /// Journals the page's original image before its first change, and marks it dirty.
    @inline(__always)
    func makeWritable(_ frame: Int, page: PageNumber) throws {
        if cache.isDirty(frame) { return }
        if page <= write.originalPageCount && !write.journaled.contains(page) {
            try journalOriginal(page, image: UnsafeRawBufferPointer(cache.buffer(frame)))
        }
        cache.markDirty(frame)
        write.changed = true
    }
}

/// The layout of a freelist trunk page's body: type byte (``type``), 3 reserved bytes, the next
/// trunk (4 bytes, 0 for none), the number of leaf entries (4 bytes), then the leaf page numbers
/// (4 bytes each).
public enum FreelistTrunk {
    /// The type byte of a trunk page.
    public static let type: UInt8 = 0x0E
    static let nextOffset = 4
    static let countOffset = 8
    static let entriesOffset = 12

    /// How many leaf entries a trunk holds at this usable page size.
    public static func capacity(usable: Int) -> Int { (usable - entriesOffset) / 4 }
}
