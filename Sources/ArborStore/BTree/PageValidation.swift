// Safety: The checks read a page body lent by the pager for the call, each read bounded by the
// body's size first.

/// Structural validation of typed pages, run by the pager on every page it reads from the file
/// (see ``Pager/pageValidator``), so that no number read from disk indexes anything unchecked.
///
/// It checks bounds, not meaning: every offset, length and page number must fall inside the page
/// or the file. Key order, leaf depth and the like are the integrity check's business
/// (`Database.checkIntegrity()`); keys out of order can make a search miss, never read outside a
/// page. A node rewritten whole checks its keys' order first (`BTree.write`): its prefix is that
/// of its first and last keys, which keys out of order may not share.
///
/// Key order is not checked here: it would add a key comparison per entry to every page read,
/// a cost that grows with the keys a leaf holds, so it is left to the rewrite and the integrity
/// check.
enum PageValidation {
    /// Validates a page body by its type byte; nil when it is sound (or of a type this layer does
    /// not own, such as a free page whose content means nothing).
    static func validate(_ page: PageNumber, _ body: UnsafeRawBufferPointer, pageCount: PageNumber) -> String? {
        switch body[0] {
        case NodeLayout.leafType, NodeLayout.interiorType:
            return validateNode(body, pageCount: pageCount)
        case NodeLayout.overflowType:
            let next = body.loadLE(UInt32.self, at: 4)
            return next == 1 || next > pageCount ? "overflow page points to page \(next), outside the file" : nil
        case FreelistTrunk.type:
            let next = body.loadLE(UInt32.self, at: 4)
            let count = Int(body.loadLE(UInt32.self, at: 8))
            if next == 1 || next > pageCount { return "freelist trunk points to page \(next), outside the file" }
            if count > FreelistTrunk.capacity(usable: body.count) { return "freelist trunk claims \(count) entries" }
            return nil
        default:
            return nil
        }
    }

    /// Reads a varint without running past `limit`; nil when it does or exceeds 32 bits.
    static func varint(_ body: UnsafeRawBufferPointer, _ position: inout Int, limit: Int) -> Int? {
        var result = 0
        var shift = 0
        while position < limit && shift <= 28 {
            let byte = body[position]
            position += 1
            result |= Int(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result <= Int(UInt32.max) ? result : nil }
            shift += 7
        }
        return nil
    }

    static func validateNode(_ body: UnsafeRawBufferPointer, pageCount: PageNumber) -> String? {
        // Long: the node check walks the page in its layout's order, header to last cell, one guard
        // per field it checks and one cursor (`position`) through each cell.
        let size = body.count
        let leaf = body[0] == NodeLayout.leafType
        let prefix = Int(body[1])
        let count = Int(body.loadLE(UInt16.self, at: 2))
        let contentStart = Int(body.loadLE(UInt16.self, at: 4))
        let fragmented = Int(body.loadLE(UInt16.self, at: 6))
        let maxKey = NodeLayout.maxKeySize(usable: size)
        guard prefix <= maxKey else { return "node claims a \(prefix)-byte key prefix" }
        let slotBase = NodeLayout.headerSize + prefix
        guard slotBase + NodeLayout.slotSize * count <= contentStart, contentStart <= size else {
            return "node header claims \(count) cells with content from offset \(contentStart)"
        }
        guard fragmented <= size - contentStart else { return "node claims \(fragmented) fragmented bytes" }
        if !leaf {
            let right = body.loadLE(UInt32.self, at: 8)
            guard right >= 2, right <= pageCount else { return "right-most child \(right) is outside the file" }
        }
        let maxCell = NodeLayout.maxLocalCell(usable: size)
        var total = 0
        for index in 0..<count {
            let offset = Int(body.loadLE(UInt16.self, at: slotBase + NodeLayout.slotSize * index))
            guard offset >= contentStart, offset < size else { return "cell \(index) starts at \(offset), outside the content area" }
            var position = offset
            if !leaf {
                guard position + 5 <= size else { return "cell \(index) runs past the page" }
                let child = body.loadLE(UInt32.self, at: position)
                guard child >= 2, child <= pageCount else { return "cell \(index) points to child \(child), outside the file" }
                position += 4
            }
            let header = body[position]
            position += 1
            let flags = header & NodeLayout.flagMask
            guard leaf || flags == 0 else { return "interior cell \(index) has flags \(flags)" }
            guard flags & NodeLayout.flagDictionary == 0 || flags & NodeLayout.flagCompressed != 0 else {
                return "cell \(index) claims a dictionary without compression"
            }
            var suffix = Int(header >> NodeLayout.suffixShift)
            if suffix == NodeLayout.suffixEscape {
                guard let extra = varint(body, &position, limit: size) else { return "cell \(index) has a malformed header" }
                suffix += extra
            }
            guard prefix + suffix <= maxKey else { return "cell \(index) claims a \(prefix + suffix)-byte key" }
            position += max(0, suffix - 2)
            guard position <= size else { return "cell \(index) runs past the page" }
            let end: Int
            if leaf {
                guard let stored = varint(body, &position, limit: size) else { return "cell \(index) has a malformed header" }
                if flags & NodeLayout.flagCompressed != 0 {
                    guard let original = varint(body, &position, limit: size), original > 0,
                          original <= stored * 255 + 16 else { return "cell \(index) has an impossible compressed length" }
                }
                if flags & NodeLayout.flagOverflow != 0 {
                    end = position + 4
                    guard end <= size else { return "cell \(index) runs past the page" }
                    let first = body.loadLE(UInt32.self, at: position)
                    guard first >= 2, first <= pageCount else { return "cell \(index) points to overflow page \(first), outside the file" }
                } else {
                    end = position + stored
                    guard end <= size, end - offset <= maxCell else { return "cell \(index) runs past the page" }
                }
            } else {
                end = position
            }
            total += end - offset
        }
        guard total + fragmented == size - contentStart else {
            return "cells and free space do not add up (\(total) + \(fragmented) ≠ \(size - contentStart))"
        }
        return nil
    }
}
