import ArborStore
import ArborTestSupport

/// Input: a 4-byte little-endian length L, then L bytes of database image, then the rest as the
/// journal image (none when empty). The image is opened read-write on a simulated disk (so a hot
/// journal is rolled back), checked page by page, and every page is read. Any outcome but a crash,
/// a hang or an unbounded allocation is fine: errors must be `StoreError`s.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard bytes.count >= 4 else { return 0 }
    let declared = Int(bytes[0]) | Int(bytes[1]) << 8 | Int(bytes[2]) << 16 | Int(bytes[3]) << 24
    let databaseLength = min(declared, bytes.count - 4)
    let database = Array(bytes[4..<(4 + databaseLength)])
    let journal = Array(bytes[(4 + databaseLength)...])

    let disk = SimulatedDisk()
    disk.setContents(of: "/fuzz.db", to: database)
    if !journal.isEmpty { disk.setContents(of: "/fuzz.db-journal", to: journal) }
    var options = PagerOptions()
    options.create = false
    options.cacheSize = 64 << 10
    options.busyTimeout = .milliseconds(1)
    options.lockTable = LockTable()
    do {
        let pager = try Pager(path: "/fuzz.db", fileSystem: disk, options: options)
        defer { pager.close() }
        _ = try pager.checkPages()
        try pager.withReadTransaction { pager in
            guard pager.pageCount >= 2 else { return }
            for page in 2...min(pager.pageCount, 4096) {
                _ = try? pager.withPage(page) { $0.reduce(0, &+) }
            }
        }
        // A write transaction on whatever survived: allocation walks the freelist.
        try pager.beginWrite()
        for _ in 0..<4 { _ = try pager.allocatePage() }
        try pager.rollback()
    } catch is StoreError {
        // Expected for hostile input.
    } catch {
        fatalError("untyped error: \(error)")
    }
    return 0
}
