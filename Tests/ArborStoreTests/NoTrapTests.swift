import ArborTestSupport
import Testing
@testable import ArborStore

/// No process death from data (issue 25, item 2): bytes read from a hostile file, values from the
/// caller and options that overflow are typed errors. Each test stopped the process before its
/// fix (the trap is named in the test).
@Suite("No traps from stored bytes, arguments or options")
struct NoTrapTests {
    // MARK: Keys out of order in a page

    /// Replaces the root leaf of tree "t" with a leaf holding `keys` in the order given (prefix
    /// 0, each with an 8-byte value), then as many "abcdNN" keys as fit: a page whose bounds are
    /// sound and whose order is not. Returns the disk and the keys written.
    func fileWithLeaf(_ keys: [String]) throws -> (SimulatedDisk, [[UInt8]]) {
        let disk = SimulatedDisk()
        let database = try Database(path: "/db", options: simulatedOptions(disk, pageSize: 512))
        try database.write { (tx) throws in try tx.createTree(named: "t").put(Array("abcd".utf8), [0]) }
        let root = try #require(try database.read { (tx) throws in try tx.trees().first { $0.name == "t" }?.root })
        database.close()

        let pager = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: 512))
        defer { pager.close() }
        try pager.beginWrite()
        let tree = BTree(pager: pager, root: root, compressionThreshold: .max)
        let all = keys.map { Array($0.utf8) } + (10..<99).map { Array("abcd\($0)".utf8) }
        let payloads = try all.map { try tree.makeLeafPayload(key: $0, value: [UInt8](repeating: 7, count: 8)) }
        var written: [[UInt8]] = []
        try pager.withMutablePage(root) { body in
            let writer = NodeWriter(body: body)
            writer.initialize(leaf: true)
            for (key, payload) in zip(all, payloads) {
                let fitted = key.withUnsafeBytes { key in payload.withUnsafeBytes { writer.insertLeaf(key: key, payload: $0, at: written.count) } }
                guard fitted else { break }
                written.append(key)
            }
        }
        try pager.commit()
        return (disk, written)
    }

    @Test("a leaf whose keys are out of order is corrupt when rewritten whole, not a trap or a silent rewrite",
          arguments: [["abcd", "a"], ["abcd", "zzzzzzzz"]])
    func keysOutOfOrder(leading: [String]) throws {
        // Before the fix, the put below rewrote the leaf with the prefix of its first and last
        // keys ("abc"): "a" then had a suffix of −2 (NodeLayout.swift:352, UInt8(−2) trapped), and
        // "zzzzzzzz", which does not start with "abc", was silently turned into "abczzzzz".
        let (disk, written) = try fileWithLeaf(leading)
        #expect(written.count > 20)
        let before = disk.contents(of: "/db")
        let database = try Database(path: "/db", options: simulatedOptions(disk, pageSize: 512))
        defer { database.close() }
        // The leaf is full at prefix 0; at "abc" it has room: the insert rewrites it whole.
        #expect {
            try database.write { (tx) throws in try tx.tree(named: "t")!.put(Array("abcdzz".utf8), [UInt8](repeating: 1, count: 8)) }
        } throws: { error in
            let error = error as? StoreError
            return error?.code == .corrupt && error?.message.contains("keys out of order") == true
        }
        let unchanged = disk.contents(of: "/db") == before
        #expect(unchanged, "the failed transaction changed the file")
        let report = try database.checkIntegrity()
        #expect(report.problems.contains { $0.message.contains("out of order") }, "\(report.problems)")
    }

    // MARK: LZ4's 32-bit lengths

    @Test("a compressed value longer than LZ4's 32-bit lengths is corrupt, not a trap")
    func lz4Lengths() throws {
        // A value read from an overflow chain of a file over 2 GB. The buffer claims one byte
        // more than Int32.max over a real byte: the length check must refuse it before liblz4
        // (or Int32(count), which stopped the process) sees it. (Compression of such a value is
        // refused by LZ4.compress, which returns nil above LZ4_MAX_INPUT_SIZE and the value is
        // stored uncompressed: not tested, it takes 2 GB.)
        let byte: [UInt8] = [0]
        byte.withUnsafeBytes { real in
            let claimed = UnsafeRawBufferPointer(start: real.baseAddress, count: Int(Int32.max) + 1)
            #expect {
                try LZ4.decompress(claimed, originalLength: 10, path: "/db")
            } throws: { error in
                (error as? StoreError)?.code == .corrupt && "\(error)".contains("longer than LZ4 takes")
            }
        }
    }

    // MARK: Options that overflowed

    @Test("options out of range are invalidArgument naming the option, for a pager and a database")
    func optionsOutOfRange() throws {
        var cases: [(String, (inout PagerOptions) -> Void)] = []
        // Int.max: the cache's image block size overflowed (a trap) or its allocation failed.
        cases.append(("cacheSize", { $0.cacheSize = .max }))
        cases.append(("cacheSize", { $0.cacheSize = -1 }))
        cases.append(("cacheSize", { $0.cacheSize = PagerOptions.maximumCacheSize + 1 }))
        cases.append(("busyTimeout", { $0.busyTimeout = .seconds(-1) }))
        cases.append(("busyTimeout", { $0.busyTimeout = .seconds(86_401) }))
        // 317 years: Int(seconds) * 1_000_000_000 trapped at the first endRead.
        cases.append(("readLockRetention", { $0.readLockRetention = .seconds(10_000_000_000) }))
        cases.append(("readLockRetention", { $0.readLockRetention = .milliseconds(-1) }))
        for (index, (name, change)) in cases.enumerated() {
            let disk = SimulatedDisk()
            var pagerOptions = options(pageSize: 512)
            change(&pagerOptions)
            #expect {
                let pager = try Pager(path: "/db", fileSystem: disk, options: pagerOptions)
                try pager.beginRead()
                pager.endRead()
                pager.close()
            } throws: { error in
                (error as? StoreError)?.code == .invalidArgument && (error as? StoreError)?.message.contains(name) == true
            }
            var databaseOptions = simulatedOptions(disk)
            databaseOptions.cacheSize = pagerOptions.cacheSize
            databaseOptions.busyTimeout = pagerOptions.busyTimeout
            databaseOptions.readLockRetention = pagerOptions.readLockRetention
            #expect(storeErrorCode { try Database(path: "/db", options: databaseOptions).close() } == .invalidArgument, "case \(index), \(name)")
            #expect(disk.contents(of: "/db") == nil, "case \(index): the file was created before the options were checked")
        }
    }

    @Test("the longest options allowed work: a day of retention and of busy timeout")
    func longestOptions() throws {
        var longest = options(pageSize: 512, cacheSize: 1 << 20)
        longest.readLockRetention = PagerOptions.maximumWait
        longest.busyTimeout = PagerOptions.maximumWait
        let pager = try Pager(path: "/db", fileSystem: SimulatedDisk(), options: longest)
        try pager.beginWrite()
        _ = try pager.allocatePage()
        try pager.commit()
        try pager.beginRead()
        pager.endRead()
        pager.close()
    }

    @Test("a lock table's timer saturates rather than overflowing its nanoseconds")
    func timerNanoseconds() {
        #expect(InodeLock.timerNanoseconds(.zero) == 1)
        #expect(InodeLock.timerNanoseconds(.milliseconds(1)) == 1_000_001)
        #expect(InodeLock.timerNanoseconds(.seconds(86_400)) == 86_400_000_000_001)
        #expect(InodeLock.timerNanoseconds(.seconds(10_000_000_000)) == .max)
        #expect(InodeLock.timerNanoseconds(.seconds(Int64.max)) == .max)
        #expect(InodeLock.timerNanoseconds(Duration(secondsComponent: 9_223_372_036, attosecondsComponent: 854_775_807_000_000_000)) == .max)
    }

    // MARK: Arguments

    @Test("reserving no sequence numbers, or fewer, is invalidArgument, not a trap", arguments: [0, -1, Int.min])
    func reserveNothing(count: Int) throws {
        let database = try Database(path: "/db", options: simulatedOptions(SimulatedDisk()))
        defer { database.close() }
        try database.write { (tx) throws in
            let tree = try tx.createTree(named: "t")
            // Before: precondition(count > 0) stopped the process.
            #expect(storeErrorCode { try tree.nextSequence(reserving: count) } == .invalidArgument)
            #expect(try tree.nextSequence() == 1, "a refused reservation takes nothing")
        }
    }
}
