// Safety: Records are read and written through the journal's own arrays, slices of which are lent
// for the call; images written are the caller's, valid for the call.

/// The rollback journal, `<database>-journal`: the original images of the pages a write
/// transaction changes, so that an interrupted commit can be undone. See
/// `docs/commit-protocol.md` for the protocol and `docs/file-format.md` for the bytes.
///
/// Layout: a header in its own sector-sized block (``headerSize`` bytes), then records.
///
/// Header (little-endian):
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 8 | magic `"ArborJnl"` |
/// | 8 | 4 | format version (2; version 1 journals, without the file ID, are still read) |
/// | 12 | 4 | page size |
/// | 16 | 8 | nonce: random per transaction, seeds the record checksums |
/// | 24 | 4 | original page count of the database |
/// | 28 | 4 | record count (0 until the commit writes it) |
/// | 32 | 16 | the database's file ID (header bytes 48..<64): whose journal this is |
/// | 48 | 8 | XXH64 of bytes 0..<48 (version 1: bytes 32..<40 hold the XXH64 of 0..<32) |
///
/// Record: page number (4 bytes), the page's original image (page size), XXH64 of the image seeded
/// with `nonce ^ pageNumber·prime` (8 bytes).
///
/// A journal is *hot*, and must be rolled back before anyone reads the database, when its header
/// is valid and either its record count is non-zero or the database's length differs from the original
/// page count says (a new database whose first commit was interrupted).
///
/// The file is kept between transactions; the pager trims it back to
/// ``PagerOptions/journalSizeLimit`` once its zeroed header is durable (step 4b), knowing its
/// length through ``length``.
final class Journal {
    static let magic: [UInt8] = Array("ArborJnl".utf8)
    static let version: UInt32 = 2
    /// The header block: one 512-byte sector, which the disk writes atomically.
    static let headerSize = 512

    struct Header {
        var pageSize: Int
        var nonce: UInt64
        var originalPageCount: PageNumber
        var recordCount: UInt32
        /// The file ID of the database the journal belongs to (``DatabaseHeader/fileID``; 0, 0 in
        /// a version 1 journal).
        var fileID: (UInt64, UInt64) = (0, 0)
    }

    let fileSystem: any FileSystem
    let path: String
    private(set) var pageSize: Int
    private(set) var file: (any StoreFile)?

    /// Scratch space for one record.
    private var record: [UInt8]

    /// How many records are gathered before they are written together.
    static let bufferedRecords = 32
    /// Records appended but not written yet: up to ``bufferedRecords`` consecutive ones, from
    /// record `pendingFirst`, written in one write when the buffer is full and before the header
    /// is written, the journal synced or a record read (see ``flush()``). The pager writes no
    /// database page before the journal is synced (docs/commit-protocol.md, the journal rule), so
    /// records held here a little longer change nothing a crash could see; a transaction that
    /// ends without syncing them drops them (``discardPending()``).
    private var pending: [UInt8] = []
    private var pendingFirst = 0
    private var pendingCount = 0

    /// Opened read-only (a read-only connection never writes the journal; a hot journal makes it
    /// fail with `readOnly` before it would).
    let readOnly: Bool

    /// The file's length in bytes as this connection knows it, or nil when the file must be asked
    /// (``learnLength()``): unknown when the journal is opened and after ``forgetLength()``
    /// (another connection may have written it, or a failed write left it uncertain); kept up to
    /// date by this connection's own writes and truncations.
    private(set) var length: Int64?

    init(fileSystem: any FileSystem, path: String, pageSize: Int, readOnly: Bool = false) {
        self.readOnly = readOnly
        self.fileSystem = fileSystem
        self.path = path
        self.pageSize = pageSize
        self.record = [UInt8](repeating: 0, count: pageSize + 12)
    }

    var recordSize: Int { pageSize + 12 }

    /// Switches to another page size (recovery of a journal written with the page size its header
    /// names, before the database header could be read).
    func setPageSize(_ size: Int) {
        guard size != pageSize else { return }
        // Only recovery changes the size, with nothing gathered; were anything gathered, its
        // offsets would be of the old size: it is dropped, never written at the new one.
        pendingCount = 0
        pageSize = size
        record = [UInt8](repeating: 0, count: size + 12)
    }

    func close() {
        pendingCount = 0
        file?.close()
        file = nil
        length = nil
    }

    /// Whether the file is open.
    var isOpen: Bool { file != nil }

    /// The file's length: ``length`` when known, else asked of the file (one `fstat`) and kept.
    func learnLength() throws -> Int64 {
        if let length { return length }
        guard let file else { return 0 }
        let size = try file.size()
        length = size
        return size
    }

    /// Forgets the length: another connection may have written the file since.
    func forgetLength() {
        length = nil
    }

    /// Notes that this connection wrote up to `end`.
    private func extendLength(to end: Int64) {
        if let known = length, known < end { length = end }
    }

    /// Truncates the file to `size` bytes. Only for a journal that is not hot, and whose zeroed
    /// header is durable (the pager's step 4b): a hot journal must never lose a record.
    func truncate(to size: Int64) throws {
        guard let file else { return }
        length = nil
        try file.truncate(to: size)
        length = size
    }

    /// Opens the journal if it exists; returns whether it does.
    func openIfExists() throws -> Bool {
        if file != nil { return true }
        guard try fileSystem.exists(path) else { return false }
        do {
            file = try fileSystem.open(path, mode: readOnly ? .readOnly : .readWrite)
        } catch let error as StoreError where error.code == .notFound {
            return false
        }
        return true
    }

    /// Opens the journal, creating it when needed; returns whether it was created (the caller must
    /// then sync the directory before relying on it).
    func openOrCreate() throws -> Bool {
        if file != nil { return false }
        let existed = try fileSystem.exists(path)
        file = try fileSystem.open(path, mode: .readWriteCreate)
        length = existed ? nil : 0
        return !existed
    }

    static func recordSeed(nonce: UInt64, page: PageNumber) -> UInt64 {
        nonce ^ (UInt64(page) &* XXH64.prime1)
    }

    /// Reads and validates the header; nil when the journal is absent, zeroed or not valid.
    func readHeader() throws -> Header? {
        guard let file else { return nil }
        var bytes = [UInt8](repeating: 0, count: 56)
        let complete = try bytes.withUnsafeMutableBytes { try file.readFully(into: $0, at: 0) }
        guard complete else { return nil }
        return bytes.withUnsafeBytes { raw -> Header? in
            guard zip(raw[0..<8], Self.magic).allSatisfy({ $0 == $1 }) else { return nil }
            let version = raw.loadLE(UInt32.self, at: 8)
            // Version 1 (before the file ID) is read still: a hot journal of an older build.
            let checked = version == 1 ? 32 : 48
            guard version == 1 || version == Self.version else { return nil }
            guard raw.loadLE(UInt64.self, at: checked) == XXH64.hash(UnsafeRawBufferPointer(rebasing: raw[0..<checked])) else { return nil }
            let pageSize = Int(raw.loadLE(UInt32.self, at: 12))
            guard PageLayout.isValid(pageSize: pageSize) else { return nil }
            return Header(pageSize: pageSize,
                          nonce: raw.loadLE(UInt64.self, at: 16),
                          originalPageCount: raw.loadLE(UInt32.self, at: 24),
                          recordCount: raw.loadLE(UInt32.self, at: 28),
                          fileID: version == 1 ? (0, 0) : (raw.loadLE(UInt64.self, at: 32), raw.loadLE(UInt64.self, at: 40)))
        }
    }

    /// Writes the header (in its own sector).
    func writeHeader(_ header: Header) throws {
        guard let file else { preconditionFailure("journal not open") }
        // The records first, as when each was written at once: the header never counts records
        // that were not handed to the file before it.
        try flush()
        var bytes = [UInt8](repeating: 0, count: Self.headerSize)
        bytes.withUnsafeMutableBytes { raw in
            for (i, b) in Self.magic.enumerated() { raw[i] = b }
            raw.storeLE(Self.version, at: 8)
            raw.storeLE(UInt32(header.pageSize), at: 12)
            raw.storeLE(header.nonce, at: 16)
            raw.storeLE(header.originalPageCount, at: 24)
            raw.storeLE(header.recordCount, at: 28)
            raw.storeLE(header.fileID.0, at: 32)
            raw.storeLE(header.fileID.1, at: 40)
            raw.storeLE(XXH64.hash(UnsafeRawBufferPointer(rebasing: raw[0..<48])), at: 48)
        }
        try bytes.withUnsafeBytes { try file.write($0, at: 0) }
        extendLength(to: Int64(Self.headerSize))
    }

    /// Zeroes the header in place: the journal is no longer hot. The file is kept so the next
    /// transaction does not have to create it (and sync the directory) again.
    func invalidate() throws {
        guard let file else { return }
        let zeros = [UInt8](repeating: 0, count: Self.headerSize)
        try zeros.withUnsafeBytes { try file.write($0, at: 0) }
        extendLength(to: Int64(Self.headerSize))
    }

    func sync() throws {
        try flush()
        try file?.sync()
    }

    /// Appends record number `index` (0-based): the original image of `page`. Records are
    /// gathered (``bufferedRecords`` at a time) and written together: one write of about
    /// 128 KiB instead of one per page.
    func writeRecord(index: Int, page: PageNumber, image: UnsafeRawBufferPointer, nonce: UInt64) throws {
        guard file != nil else { preconditionFailure("journal not open") }
        precondition(image.count == pageSize)
        if pendingCount > 0, index != pendingFirst + pendingCount { try flush() }
        if pendingCount == 0 { pendingFirst = index }
        let size = recordSize
        if pending.count != Self.bufferedRecords * size { pending = [UInt8](repeating: 0, count: Self.bufferedRecords * size) }
        let checksum = XXH64.hash(image, seed: Self.recordSeed(nonce: nonce, page: page))
        let base = pendingCount * size
        pending.withUnsafeMutableBytes { raw in
            raw.storeLE(page, at: base)
            UnsafeMutableRawBufferPointer(rebasing: raw[(base + 4)..<(base + 4 + pageSize)]).copyMemory(from: image)
            raw.storeLE(checksum, at: base + 4 + pageSize)
        }
        pendingCount += 1
        if pendingCount == Self.bufferedRecords { try flush() }
    }

    /// Writes the records gathered by ``writeRecord(index:page:image:nonce:)``, in one write.
    /// A failure leaves them unwritten (the pager then aborts the transaction).
    func flush() throws {
        guard pendingCount > 0, let file else { return }
        let bytes = pendingCount * recordSize
        let offset = Self.headerSize + pendingFirst * recordSize
        pendingCount = 0
        try pending.withUnsafeBytes { try file.write(UnsafeRawBufferPointer(rebasing: $0[0..<bytes]), at: Int64(offset)) }
        extendLength(to: Int64(offset + bytes))
    }

    /// Drops the records not written yet: their transaction ended without syncing them (a
    /// rollback that never spilled, or a failure).
    func discardPending() {
        pendingCount = 0
    }

    /// Reads record `index` and hands its page number and image to `body`; returns false when the
    /// record is missing or its checksum fails (the end of the valid records).
    func readRecord(index: Int, nonce: UInt64, _ body: (PageNumber, UnsafeRawBufferPointer) throws -> Void) throws -> Bool {
        guard let file else { return false }
        try flush()
        let pageSize = self.pageSize
        let found = try record.withUnsafeMutableBytes { raw -> Bool in
            try file.readFully(into: raw, at: Int64(Self.headerSize + index * recordSize))
        }
        guard found else { return false }
        return try record.withUnsafeBytes { raw -> Bool in
            let page = raw.loadLE(PageNumber.self, at: 0)
            let image = UnsafeRawBufferPointer(rebasing: raw[4..<(4 + pageSize)])
            let checksum = raw.loadLE(UInt64.self, at: 4 + pageSize)
            guard checksum == XXH64.hash(image, seed: Self.recordSeed(nonce: nonce, page: page)) else { return false }
            try body(page, image)
            return true
        }
    }
}
