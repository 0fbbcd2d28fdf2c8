import ArborTestSupport
import Testing
@testable import ArborStore

/// The rules a node the engine rewrote whole keeps (`NodeView.invariantViolation`), which
/// builds with Arbor's checks verify after every rewrite (`ARBOR_INVARIANTS`, the `Checks`
/// trait): the whole test suite runs with them.
@Suite("Invariants of rewritten nodes")
struct NodeInvariantTests {
    /// The bytes of the root leaf of a one-leaf tree of `count` keys on 512-byte pages (with
    /// more keys than a leaf holds, the root is an interior node).
    func leafBytes(count: Int) throws -> [UInt8] {
        let disk = SimulatedDisk()
        let database = try Database(path: "/db", options: simulatedOptions(disk, pageSize: 512))
        try database.write { (tx) throws in
            let tree = try tx.createTree(named: "t")
            for index in 0..<count { try tree.put(bytes("key\(index)"), [UInt8(index)]) }
        }
        let root = try #require(try database.read { (tx) throws in try tx.trees().first { $0.name == "t" }?.root })
        database.close()
        let pager = try Pager(path: "/db", fileSystem: disk, options: options(pageSize: 512))
        defer { pager.close() }
        try pager.beginRead()
        defer { pager.endRead() }
        return try pager.withPage(root) { Array($0) }
    }

    @Test("a node holding what it was written from, in order, breaks no rule; fewer entries or other keys are named")
    func writtenNode() throws {
        let page = try leafBytes(count: 6)
        page.withUnsafeBytes { body in
            let view = NodeView(body: body)
            let image = view.image()
            #expect(view.count == 6)
            #expect(view.invariantViolation(writtenFrom: image, 0..<6) == nil)
            #expect(view.invariantViolation(writtenFrom: image, 1..<6)?.contains("holds 6 entries") == true)
            var other = NodeImage(leaf: true, rightChild: 0, capacity: 1024)
            other.append(image, 1..<6)
            other.append(image, 0..<1)
            #expect(view.invariantViolation(writtenFrom: other, 0..<6) == "entry 0 has another key than the one written")
        }
    }

    @Test("an interior node whose right-most child is not the one written is named")
    func rightChild() throws {
        let page = try leafBytes(count: 200)
        page.withUnsafeBytes { body in
            let view = NodeView(body: body)
            #expect(!view.isLeaf)
            var image = view.image()
            #expect(view.invariantViolation(writtenFrom: image, 0..<view.count) == nil)
            image.rightChild += 1
            #expect(view.invariantViolation(writtenFrom: image, 0..<view.count) == "has another right-most child than the one written")
        }
    }
}
