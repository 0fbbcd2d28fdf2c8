// Safety: Checksums, encoding and decoding read and write a page buffer lent for the call, at
// offsets within the header's fixed size and the page's trailer.

/// A page number. Pages are numbered from 1; 0 means "no page".
public typealias PageNumber = UInt32

/// Page-size limits and the layout every page shares.
public enum PageLayout {
    /// The smallest page size.
    public static let minimumPageSize = 512
    /// The largest page size.
    public static let maximumPageSize = 65536
    /// The default page size.
    public static let defaultPageSize = 4096
    /// Bytes at the end of every page holding its checksum.
    public static let trailerSize = 8

    /// Whether `size` is a valid page size: a power of two from 512 to 65536.
    public static func isValid(pageSize size: Int) -> Bool {
        size >= minimumPageSize && size <= maximumPageSize && size & (size - 1) == 0
    }

    /// The checksum of a page: XXH64 of everything but the trailer, seeded with the page number so
    /// that a page written to the wrong place is detected too.
    static func checksum(_ page: UnsafeRawBufferPointer, pageNumber: PageNumber) -> UInt64 {
        XXH64.hash(UnsafeRawBufferPointer(rebasing: page[0..<(page.count - trailerSize)]), seed: UInt64(pageNumber))
    }

    /// Writes the checksum into the page's trailer.
    static func seal(_ page: UnsafeMutableRawBufferPointer, pageNumber: PageNumber) {
        let sum = checksum(UnsafeRawBufferPointer(page), pageNumber: pageNumber)
        page.storeLE(sum, at: page.count - trailerSize)
    }

    /// Whether the page's trailer holds its checksum.
    static func verify(_ page: UnsafeRawBufferPointer, pageNumber: PageNumber) -> Bool {
        page.loadLE(UInt64.self, at: page.count - trailerSize) == checksum(page, pageNumber: pageNumber)
    }
}

/// The fields of the database header, kept at the start of page 1.
///
/// Byte layout (all integers little-endian; see `docs/file-format.md`):
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 16 | magic `"ArborStore file\0"` |
/// | 16 | 2 | write format version |
/// | 18 | 2 | read format version |
/// | 20 | 4 | page size |
/// | 24 | 4 | page count |
/// | 28 | 4 | first freelist trunk page (0: none) |
/// | 32 | 4 | number of free pages |
/// | 36 | 4 | catalog root page (0: none) |
/// | 40 | 8 | change counter |
/// | 48 | 16 | file UUID |
/// | 64 | 4 | user version |
/// | 68 | 28 | reserved, zero |
public struct DatabaseHeader: Equatable, Sendable {
    /// The magic string identifying an Arbor database file.
    public static let magic: [UInt8] = Array("ArborStore file\0".utf8)
    /// The format version this build writes (2: node pages with key prefixes and heads).
    public static let currentWriteVersion: UInt16 = 2
    /// The newest format version this build can read.
    public static let currentReadVersion: UInt16 = 2
    /// The oldest format version this build can read (version 1 node pages are not understood).
    public static let oldestReadVersion: UInt16 = 2
    /// The number of bytes the header fields occupy.
    public static let size = 96

    /// The format version needed to write the file.
    public var writeVersion: UInt16 = currentWriteVersion
    /// The format version needed to read the file.
    public var readVersion: UInt16 = currentReadVersion
    /// The page size in bytes.
    public var pageSize: Int
    /// The number of pages in the file, header page included.
    public var pageCount: PageNumber
    /// The first freelist trunk page, or 0.
    public var freelistHead: PageNumber = 0
    /// The number of free pages (trunks and leaves).
    public var freelistCount: UInt32 = 0
    /// The root page of the catalog tree, or 0.
    public var catalogRoot: PageNumber = 0
    /// Incremented by every commit; connections compare it to know whether their cache is stale.
    public var changeCounter: UInt64 = 0
    /// A random identifier given to the file when it was created.
    public var fileID: (UInt64, UInt64) = (0, 0)
    /// A number the application may use freely.
    public var userVersion: UInt32 = 0

    /// Creates the header of a new file.
    public init(pageSize: Int, pageCount: PageNumber) {
        self.pageSize = pageSize
        self.pageCount = pageCount
    }

    public static func == (a: DatabaseHeader, b: DatabaseHeader) -> Bool {
        a.writeVersion == b.writeVersion && a.readVersion == b.readVersion && a.pageSize == b.pageSize
            && a.pageCount == b.pageCount && a.freelistHead == b.freelistHead
            && a.freelistCount == b.freelistCount && a.catalogRoot == b.catalogRoot
            && a.changeCounter == b.changeCounter && a.fileID == b.fileID && a.userVersion == b.userVersion
    }

    /// The file UUID as its 16 bytes.
    public var fileUUIDBytes: [UInt8] { Self.bytes(ofFileID: fileID) }

    /// A file ID's 16 bytes, as the header stores them.
    static func bytes(ofFileID id: (UInt64, UInt64)) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 16)
        bytes.withUnsafeMutableBytes {
            $0.storeLE(id.0, at: 0)
            $0.storeLE(id.1, at: 8)
        }
        return bytes
    }

    /// A file ID as `arbor info` prints it: its 16 bytes in hexadecimal.
    static func text(ofFileID id: (UInt64, UInt64)) -> String {
        bytes(ofFileID: id).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// A new file ID: a version-4 UUID (random, with the version and variant bits set).
    static func newFileID() -> (UInt64, UInt64) {
        var generator = SystemRandomNumberGenerator()
        let high: UInt64 = (generator.next() & ~(UInt64(0xF0) << 48)) | (UInt64(0x40) << 48)
        let low: UInt64 = (generator.next() & ~UInt64(0xC0)) | 0x80
        return (high, low)
    }

    /// Writes the header fields into the start of page 1.
    func encode(into page: UnsafeMutableRawBufferPointer) {
        for (i, byte) in Self.magic.enumerated() { page[i] = byte }
        page.storeLE(writeVersion, at: 16)
        page.storeLE(readVersion, at: 18)
        page.storeLE(UInt32(pageSize), at: 20)
        page.storeLE(pageCount, at: 24)
        page.storeLE(freelistHead, at: 28)
        page.storeLE(freelistCount, at: 32)
        page.storeLE(catalogRoot, at: 36)
        page.storeLE(changeCounter, at: 40)
        page.storeLE(fileID.0, at: 48)
        page.storeLE(fileID.1, at: 56)
        page.storeLE(userVersion, at: 64)
        for i in 68..<Self.size { page[i] = 0 }
    }

    /// Whether `bytes` starts with the magic string.
    static func hasMagic(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count >= magic.count && zip(bytes, magic).allSatisfy { $0 == $1 }
    }

    /// Decodes and validates the header fields from the start of page 1 (without the checksum,
    /// which the caller verifies once it knows the page size).
    static func decode(_ page: UnsafeRawBufferPointer, path: String?) throws -> DatabaseHeader {
        guard page.count >= size, hasMagic(page) else {
            throw StoreError(.notADatabase, "the file is not an Arbor database (no ArborStore magic at the start)", path: path)
        }
        let readVersion = page.loadLE(UInt16.self, at: 18)
        guard readVersion <= currentReadVersion else {
            throw StoreError(.unsupportedVersion,
                             "the file needs format version \(readVersion) to read; this build reads up to \(currentReadVersion)",
                             path: path)
        }
        guard readVersion >= oldestReadVersion else {
            throw StoreError(.unsupportedVersion,
                             "the file has format version \(readVersion), which this build no longer reads (it reads version \(oldestReadVersion)); dump it with the build that wrote it and load the dump",
                             path: path)
        }
        let pageSize = Int(page.loadLE(UInt32.self, at: 20))
        guard PageLayout.isValid(pageSize: pageSize) else {
            throw StoreError.corrupt(page: 1, "header page size \(pageSize) is not a power of two in 512…65536", path: path)
        }
        var header = DatabaseHeader(pageSize: pageSize, pageCount: page.loadLE(UInt32.self, at: 24))
        header.writeVersion = page.loadLE(UInt16.self, at: 16)
        header.readVersion = readVersion
        header.freelistHead = page.loadLE(UInt32.self, at: 28)
        header.freelistCount = page.loadLE(UInt32.self, at: 32)
        header.catalogRoot = page.loadLE(UInt32.self, at: 36)
        header.changeCounter = page.loadLE(UInt64.self, at: 40)
        header.fileID = (page.loadLE(UInt64.self, at: 48), page.loadLE(UInt64.self, at: 56))
        header.userVersion = page.loadLE(UInt32.self, at: 64)
        guard header.pageCount >= 1 else {
            throw StoreError.corrupt(page: 1, "header page count is 0", path: path)
        }
        guard header.freelistHead <= header.pageCount, header.freelistHead != 1 else {
            throw StoreError.corrupt(page: 1, "freelist head \(header.freelistHead) is outside the file (\(header.pageCount) pages)", path: path)
        }
        guard header.freelistCount < header.pageCount, (header.freelistCount == 0) == (header.freelistHead == 0) else {
            throw StoreError.corrupt(page: 1, "freelist count \(header.freelistCount) does not fit the file (\(header.pageCount) pages)", path: path)
        }
        guard header.catalogRoot <= header.pageCount, header.catalogRoot != 1 else {
            throw StoreError.corrupt(page: 1, "catalog root \(header.catalogRoot) is outside the file", path: path)
        }
        return header
    }
}
