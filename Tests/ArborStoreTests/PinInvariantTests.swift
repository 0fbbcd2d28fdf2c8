import ArborTestSupport
import Testing
@testable import ArborStore

/// Every pin a transaction takes on a cached page is released by the time it ends
/// (`Pager.pinViolation()`), which builds with Arbor's checks verify as every transaction ends
/// (`ARBOR_INVARIANTS`, the `Checks` trait): the whole test suite runs with them.
@Suite("Invariants of page pins")
struct PinInvariantTests {
    @Test("reads, writes, scans and a rolled-back write leave no page pinned; a pin left behind is named with its page")
    func pinsBalance() throws {
        let disk = SimulatedDisk()
        let database = try Database(path: "/db", options: simulatedOptions(disk, pageSize: 512))
        try database.write { (tx) throws in
            let tree = try tx.createTree(named: "t")
            for index in 0..<200 { try tree.put(bytes("key\(index)"), [UInt8(index % 251)]) }
        }
        struct Refused: Error {}
        #expect(throws: Refused.self) {
            try database.write { (tx) throws in
                try tx.tree(named: "t")!.put(bytes("extra"), [1])
                throw Refused()
            }
        }
        let seen = try database.read { (tx) throws -> Int in
            var count = 0
            try tx.tree(named: "t")!.forEach { _, _ in
                count += 1
                return true
            }
            return count
        }
        #expect(seen == 200)
        database.close()

        let pager = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: 512))
        defer { pager.close() }
        try pager.beginRead()
        _ = try pager.withPage(1) { $0.count }
        #expect(pager.pinViolation() == nil, "withPage releases its pin")
        let frame = try #require(pager.cache.lookup(1))
        pager.cache.pin(frame)
        let problem = try #require(pager.pinViolation())
        #expect(problem.contains("page 1 at 1"), "\(problem)")
        pager.cache.unpin(frame)
        #expect(pager.pinViolation() == nil)
        pager.endRead()
    }
}
