/// Where to cut a node's entries into pages, each part measured with the prefix it will be
/// written with (docs/file-format.md, "Splitting a node").
///
/// Cuts are entry indices, ascending. A leaf's part `i` holds entries `cuts[i−1]..<cuts[i]`. An
/// interior node's entry at a cut moves up to the parent as the separator, its child becoming
/// the left part's right-most child, so part `i` holds `cuts[i−1] + 1..<cuts[i]`. Every part
/// holds at least one entry.
///
/// A part's size depends on its own prefix, the one ``chosenPrefix(_:)`` picks for its keys: a
/// run of keys sharing 40 bytes packs into far fewer bytes than the same keys in a node whose keys
/// share only 8. So the bytes of a node measured at its own prefix say little about its parts;
/// each part is measured on its own. Taking entries away from a part never makes it bigger (its
/// keys share at least as much; see the doc's argument), which is what lets a greedy pass find the
/// fewest parts.
extension NodeImage {
    /// The entries of each part for `cuts`.
    func parts(_ cuts: [Int]) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        var start = 0
        for cut in cuts {
            ranges.append(start..<cut)
            start = leaf ? cut : cut + 1
        }
        ranges.append(start..<count)
        return ranges
    }

    /// The bytes a node holding entries `range` uses, written with its own prefix.
    func partSize(_ range: Range<Int>) -> Int {
        let prefix = chosenPrefix(range)
        var total = NodeLayout.headerSize + prefix
        for index in range { total += size(index, prefix: prefix) }
        return total
    }

    /// Whether `cuts` are ascending, leave every part an entry, and every part fits a page.
    func partsFit(_ cuts: [Int], usable: Int) -> Bool {
        var previous = -1
        for cut in cuts {
            guard cut > previous, cut >= 1, cut < count else { return false }
            previous = cut
        }
        return parts(cuts).allSatisfy { !$0.isEmpty && partSize($0) <= usable }
    }

    /// Cuts into the fewest parts that fit pages of `usable` bytes — at most `maximumParts` — with
    /// the largest part about as small as it can be; nil when no such cuts exist (more parts
    /// needed, or an entry larger than a page: neither happens in a sound tree).
    ///
    /// - Complexity: O(n log n) size computations for n entries and two parts, O(n log n ·
    ///   log 64) for more; only for nodes whose even cut does not fit (keys sharing long
    ///   prefixes), never on the common path.
    func balancedCuts(maximumParts: Int = .max, usable: Int) -> [Int]? {
        guard let fewest = greedyCuts(capacity: usable, maximumCuts: maximumParts - 1) else { return nil }
        if fewest.count == 1 { return [balancedCut(latest: fewest[0], usable: usable)] }
        // The smallest capacity (within a 64th of a page) that still needs no more parts.
        var low = 0, high = usable
        while high - low > max(1, usable / 64) {
            let capacity = (low + high) / 2
            if greedyCuts(capacity: capacity, maximumCuts: fewest.count) != nil {
                high = capacity
            } else {
                low = capacity + 1
            }
        }
        return greedyCuts(capacity: high, maximumCuts: fewest.count)
    }

    /// Of the cuts into two parts that fit, the one whose larger part is smallest. `latest` is
    /// the last cut whose left part fits; the cuts whose right part fits are those from some
    /// cut on, and sizes move monotonically with the cut, so both ends and the crossing of the
    /// two sizes are found by bisection.
    private func balancedCut(latest: Int, usable: Int) -> Int {
        func left(_ cut: Int) -> Int { partSize(0..<cut) }
        func right(_ cut: Int) -> Int { partSize((leaf ? cut : cut + 1)..<count) }
        // The first cut whose right part fits (`latest` is one: greedy cuts only where it does).
        var low = 1, high = latest
        while low < high {
            let cut = (low + high) / 2
            if right(cut) <= usable { high = cut } else { low = cut + 1 }
        }
        // The first cut from there whose left part is at least its right part.
        var from = low
        high = latest
        while from < high {
            let cut = (from + high) / 2
            if left(cut) >= right(cut) { high = cut } else { from = cut + 1 }
        }
        guard from > low else { return from }
        return max(left(from - 1), right(from - 1)) < max(left(from), right(from)) ? from - 1 : from
    }

    /// Cuts that give each part, left to right, as many entries as fit in `capacity` bytes; nil
    /// when that takes more than `maximumCuts` cuts or an entry alone does not fit.
    private func greedyCuts(capacity: Int, maximumCuts: Int) -> [Int]? {
        var cuts: [Int] = []
        var start = 0
        // The last cut leaves the last part an entry (an interior node also the separator).
        let lastEnd = count - (leaf ? 1 : 2)
        while partSize(start..<count) > capacity {
            guard cuts.count < maximumCuts, start < lastEnd, partSize(start..<(start + 1)) <= capacity else { return nil }
            // The largest end that fits: sizes grow with the end.
            var low = start + 1, high = lastEnd
            while low < high {
                let end = (low + high + 1) / 2
                if partSize(start..<end) <= capacity { low = end } else { high = end - 1 }
            }
            cuts.append(low)
            start = leaf ? low : low + 1
        }
        return cuts
    }
}
