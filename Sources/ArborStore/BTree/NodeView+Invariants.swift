extension NodeView {
    /// What is wrong with a node the engine wrote from `image`'s entries `range` (nil: nothing).
    /// The rules:
    ///
    /// 1. The node is sound as a page: every cell inside the page, and cells and free space
    ///    adding up (``PageValidation/validateNode(_:pageCount:)``, what every read checks).
    /// 2. It holds exactly the entries it was written from, in order: the same count, leaf or
    ///    interior, the same keys and (interior) the same children, the right-most included.
    ///
    /// That its keys ascend follows: the writer refuses entries that do not
    /// (``BTree/write(_:_:rightChild:to:)``), and the node holds the same.
    ///
    /// Child page numbers are compared with the image's, not with the file's size: they are the
    /// writer's input, not its work (they came from pages checked when read, or from a test).
    /// Keys are compared in place, not copied: it runs on every node rewritten whole, and copying
    /// two arrays per entry would allocate twice for every entry of every such node.
    ///
    /// - Complexity: O(*n*) in the node's entries.
    func invariantViolation(writtenFrom image: NodeImage, _ range: Range<Int>) -> String? {
        if let problem = PageValidation.validateNode(body, pageCount: .max) { return problem }
        guard isLeaf == image.leaf, count == range.count else {
            return "holds \(count) entries (leaf: \(isLeaf)) where \(range.count) were written (leaf: \(image.leaf))"
        }
        for index in 0..<range.count {
            let entry = range.lowerBound + index
            let same = image.withEntry(entry) { key, _ in compare(index, key) == 0 }
            if !same { return "entry \(index) has another key than the one written" }
            if !isLeaf && child(index) != image.child(entry) { return "entry \(index) has another child than the one written" }
        }
        if !isLeaf && rightChild != image.rightChild { return "has another right-most child than the one written" }
        return nil
    }
}

extension BTree {
    /// In builds with Arbor's checks (`ARBOR_INVARIANTS`), stops the program when `page`, just
    /// rewritten from `image`'s entries `range`, breaks a rule of
    /// `NodeView.invariantViolation(writtenFrom:_:)`; other builds compile it away.
    @inline(__always)
    func checkInvariants(of page: PageNumber, writtenFrom image: NodeImage, _ range: Range<Int>) throws {
        #if ARBOR_INVARIANTS
        if let problem = try pager.withPage(page, { NodeView(body: $0).invariantViolation(writtenFrom: image, range) }) {
            preconditionFailure("Arbor invariant broken: B-tree page \(page) as rewritten \(problem)")
        }
        #endif
    }
}
