import ArborStore
import ArborTestSupport

/// Input: a 4-byte little-endian length L, then L bytes of database image, then the rest as the
/// journal image (none when empty). The image is opened read-write on a simulated disk (so a hot
/// journal is rolled back), checked page by page, and every page is read; then it is opened as a
/// database, integrity-checked, and every tree is read through cursors. Any outcome but a crash,
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
    fuzzTrees(disk)
    return 0
}

/// The same image as a database: the integrity check, then every tree read through a cursor
/// (forwards, backwards, and a seek), then a write that touches the first tree.
func fuzzTrees(_ disk: SimulatedDisk) {
    var options = DatabaseOptions()
    options.fileSystem = disk
    options.lockTable = LockTable()
    options.create = false
    options.cacheSize = 64 << 10
    options.busyTimeout = .milliseconds(1)
    do {
        let database = try Database(path: "/fuzz.db", options: options)
        defer { database.close() }
        _ = try database.checkIntegrity()
        let names = try database.read { transaction -> [String] in
            var names: [String] = []
            for descriptor in try transaction.trees() {
                names.append(descriptor.name)
                guard let tree = try transaction.tree(named: descriptor.name) else { continue }
                let cursor = try tree.makeCursor()
                var steps = 0
                var more = try cursor.first()
                while more && steps < 10_000 {
                    _ = try cursor.value()
                    more = try cursor.next()
                    steps += 1
                }
                more = try cursor.last()
                while more && steps < 20_000 {
                    more = try cursor.previous()
                    steps += 1
                }
                _ = try cursor.seek([0x40])
                _ = try tree.get([0x20, 0, 0, 0, 0, 0, 0, 0, 1])
            }
            return names
        }
        if let first = names.first {
            try database.write { transaction in
                let tree = try transaction.tree(named: first)!
                try tree.put([1, 2, 3], Array(repeating: 7, count: 3000))
                try tree.delete([0x20, 0, 0, 0, 0, 0, 0, 0, 1])
            }
        }
    } catch is StoreError {
        // Expected for hostile input.
    } catch {
        fatalError("untyped error: \(error)")
    }
}
