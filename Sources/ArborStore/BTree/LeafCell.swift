// Safety: Overflow pages are read and written through the pager's page-lending closures, within the
// page body's bounds.

/// A leaf cell's value, parsed out of its page: inline bytes, or an overflow chain; possibly
/// LZ4-compressed.
struct LeafCell {
    var flags: UInt8
    /// Length of the value as stored (compressed length when compressed).
    var storedLength: Int
    /// Length of the value before compression (equal to `storedLength` when not compressed).
    var originalLength: Int
    var inline: [UInt8]
    var overflow: PageNumber

    var isOverflow: Bool { flags & NodeLayout.flagOverflow != 0 }
    var isCompressed: Bool { flags & NodeLayout.flagCompressed != 0 }
    var usesDictionary: Bool { flags & NodeLayout.flagDictionary != 0 }

    init(_ node: NodeView, _ index: Int) {
        let (flags, stored, original, start) = node.value(index)
        self.flags = flags
        storedLength = stored
        originalLength = original
        if flags & NodeLayout.flagOverflow != 0 {
            overflow = node.body.loadLE(UInt32.self, at: start)
            inline = []
        } else {
            overflow = 0
            inline = Array(node.body[start..<(start + stored)])
        }
    }

    /// Parses a leaf entry's payload (flags byte, lengths, value or overflow page).
    init(payload: [UInt8]) {
        let flags = payload[0] & NodeLayout.flagMask
        self.flags = flags
        var position = 1
        let parsed = payload.withUnsafeBytes { raw -> (Int, Int) in
            let stored = Varint.read(raw, &position)
            return (stored, flags & NodeLayout.flagCompressed != 0 ? Varint.read(raw, &position) : stored)
        }
        (storedLength, originalLength) = parsed
        if flags & NodeLayout.flagOverflow != 0 {
            overflow = PageNumber(payload[position]) | PageNumber(payload[position + 1]) << 8
                | PageNumber(payload[position + 2]) << 16 | PageNumber(payload[position + 3]) << 24
            inline = []
        } else {
            overflow = 0
            inline = Array(payload[position..<payload.count])
        }
    }

    /// The value, read from the overflow chain and decompressed as needed.
    func value(tree: BTree) throws -> [UInt8] {
        let stored = isOverflow ? try tree.readOverflow(first: overflow, length: storedLength) : inline
        return try decode(stored, tree: tree)
    }

    /// The value from its stored bytes: decompressed as its flags say.
    func decode(_ stored: [UInt8], tree: BTree) throws -> [UInt8] {
        guard isCompressed else { return stored }
        guard usesDictionary else { return try LZ4.decompress(stored, originalLength: originalLength, path: tree.pager.path) }
        guard let dictionary = try tree.dictionary() else {
            throw StoreError(.corrupt, "a value is compressed against a dictionary, but its tree has none", page: tree.root, path: tree.pager.path)
        }
        return try dictionary.decompress(stored, originalLength: originalLength, path: tree.pager.path)
    }

    /// Frees the overflow chain, if any.
    func freeOverflow(tree: BTree) throws {
        guard isOverflow else { return }
        try tree.freeOverflow(first: overflow, length: storedLength)
    }
}

extension BTree {
    var overflowPayload: Int { usable - NodeLayout.overflowHeaderSize }

    /// Writes `bytes` to a new overflow chain; returns its first page.
    func writeOverflow(_ bytes: [UInt8]) throws -> PageNumber {
        let payload = overflowPayload
        let count = (bytes.count + payload - 1) / payload
        var pages: [PageNumber] = []
        pages.reserveCapacity(count)
        for _ in 0..<count { pages.append(try pager.allocatePage()) }
        for (i, page) in pages.enumerated() {
            let start = i * payload
            let end = min(bytes.count, start + payload)
            let next = i + 1 < pages.count ? pages[i + 1] : 0
            try pager.withMutablePage(page) { body in
                body[0] = NodeLayout.overflowType
                body.storeLE(next, at: 4)
                bytes.withUnsafeBytes { source in
                    UnsafeMutableRawBufferPointer(rebasing: body[NodeLayout.overflowHeaderSize..<(NodeLayout.overflowHeaderSize + end - start)])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[start..<end]))
                }
            }
        }
        return pages.first ?? 0
    }

    /// Visits the pages of an overflow chain of `length` bytes, validating each link; `body`
    /// receives each page and how many payload bytes it holds.
    func walkOverflow(first: PageNumber, length: Int, _ visit: (PageNumber, UnsafeRawBufferPointer, Int) throws -> Void) throws {
        let payload = overflowPayload
        let pages = (length + payload - 1) / payload
        guard pages <= Int(pager.pageCount) else {
            throw StoreError.corrupt(page: first, "an overflow value of \(length) bytes cannot fit in a file of \(pager.pageCount) pages", path: pager.path)
        }
        var page = first
        var remaining = length
        for _ in 0..<pages {
            guard page >= 2, page <= pager.pageCount else {
                throw StoreError.corrupt(page: page, "overflow chain points outside the file", path: pager.path)
            }
            let take = min(remaining, payload)
            let next = try pager.withPage(page) { body -> PageNumber in
                guard body[0] == NodeLayout.overflowType else {
                    throw StoreError.corrupt(page: page, "expected an overflow page, found type \(body[0])", path: pager.path)
                }
                try visit(page, UnsafeRawBufferPointer(rebasing: body[NodeLayout.overflowHeaderSize..<(NodeLayout.overflowHeaderSize + take)]), take)
                return body.loadLE(UInt32.self, at: 4)
            }
            remaining -= take
            page = next
        }
        guard page == 0 else {
            throw StoreError.corrupt(page: page, "overflow chain is longer than its \(length)-byte value", path: pager.path)
        }
    }

    func readOverflow(first: PageNumber, length: Int) throws -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(min(length, Int(pager.pageCount) * overflowPayload))
        try walkOverflow(first: first, length: length) { _, bytes, _ in result.append(contentsOf: bytes) }
        return result
    }

    func freeOverflow(first: PageNumber, length: Int) throws {
        var pages: [PageNumber] = []
        try walkOverflow(first: first, length: length) { page, _, _ in pages.append(page) }
        for page in pages { try pager.freePage(page) }
    }
}
