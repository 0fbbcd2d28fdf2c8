/// The result of ``Database/checkIntegrity()``.
public struct IntegrityReport: Sendable {
    /// Every problem found; empty when the file is sound.
    public var problems: [IntegrityProblem] = []
    /// The file's page count.
    public var pageCount: PageNumber = 0
    /// Pages on the freelist.
    public var freePages = 0
    /// Statistics of each tree, by name.
    public var trees: [String: TreeStatistics] = [:]
    /// Statistics of the catalog tree.
    public var catalog = TreeStatistics()

    /// Whether no problem was found.
    public var isSound: Bool { problems.isEmpty }
}

/// Which structure uses each page, to prove every page is used exactly once.
struct PageUsage {
    private(set) var owners: [Int32]
    private(set) var names: [String] = [""]

    init(pageCount: PageNumber) {
        owners = [Int32](repeating: 0, count: Int(pageCount) + 1)
    }

    /// Records that `owner` uses `page`; returns the previous owner's name when it was taken.
    mutating func mark(_ page: PageNumber, _ owner: String) -> String? {
        guard Int(page) < owners.count, page >= 1 else { return "nothing (outside the file)" }
        if owners[Int(page)] != 0 { return names[Int(owners[Int(page)])] }
        if names.last != owner { names.append(owner) }
        owners[Int(page)] = Int32(names.count - 1)
        return nil
    }

    func unused() -> [PageNumber] {
        (1..<owners.count).filter { owners[$0] == 0 }.map { PageNumber($0) }
    }
}

/// Walks the whole file: header, freelist, catalog, every tree, every overflow chain.
struct IntegrityChecker {
    let pager: Pager

    func run() throws -> IntegrityReport {
        var report = IntegrityReport()
        report.pageCount = pager.pageCount
        report.problems = try pager.checkPages()
        var usage = PageUsage(pageCount: pager.pageCount)
        _ = usage.mark(1, "the header")
        var freelistProblems: [IntegrityProblem] = []
        let freelist = try pager.freelist(problems: &freelistProblems)
        for page in freelist.trunks + freelist.leaves {
            if let other = usage.mark(page, "the freelist") {
                report.problems.append(IntegrityProblem(owner: "the freelist", page: page, "page is also used by \(other)"))
            }
        }
        report.freePages = freelist.trunks.count + freelist.leaves.count
        let catalog = Catalog(pager: pager)
        if let tree = catalog.tree {
            walk(tree, name: "the catalog", usage: &usage, statistics: &report.catalog, problems: &report.problems, verifyValues: true)
            do {
                for descriptor in try catalog.all() {
                    var statistics = TreeStatistics()
                    let tree = BTree(pager: pager, descriptor: descriptor, compressionThreshold: .max)
                    let name = "tree \"\(descriptor.name)\""
                    if descriptor.dictionaryPage != 0 {
                        do {
                            try tree.walkOverflow(first: descriptor.dictionaryPage, length: descriptor.dictionaryLength) { page, _, _ in
                                if let other = usage.mark(page, name) {
                                    report.problems.append(IntegrityProblem(owner: name, page: page, "dictionary page is also used by \(other)"))
                                }
                                statistics.dictionaryPages += 1
                            }
                        } catch let error as StoreError {
                            report.problems.append(IntegrityProblem(owner: name, page: error.page, "dictionary: \(error.detail)"))
                        }
                    }
                    walk(tree, name: name, usage: &usage, statistics: &statistics,
                         problems: &report.problems, verifyValues: true)
                    report.trees[descriptor.name] = statistics
                }
            } catch let error as StoreError {
                report.problems.append(IntegrityProblem(owner: "the catalog", page: error.page, "unreadable: \(error.detail)"))
            }
        }
        for page in usage.unused() {
            report.problems.append(IntegrityProblem(page: page, "page is used by nothing (neither a tree nor the freelist)"))
        }
        report.problems = Self.merged(report.problems)
        return report
    }

    /// The problems with each found once: a page the page check found unreadable (knowing only
    /// its number) and a tree's walk then could not read either is one problem, with its owner.
    static func merged(_ problems: [IntegrityProblem]) -> [IntegrityProblem] {
        struct Unowned: Hashable {
            var page: PageNumber
            var message: String
        }
        var result: [IntegrityProblem] = []
        var places: [Unowned: Int] = [:]
        for problem in problems {
            guard let page = problem.page else {
                result.append(problem)
                continue
            }
            let key = Unowned(page: page, message: problem.message)
            if problem.owner == nil {
                places[key] = result.count
            } else if let place = places.removeValue(forKey: key), result[place].owner == nil {
                result[place].owner = problem.owner
                continue
            }
            result.append(problem)
        }
        return result
    }

    /// Walks one tree, marking its pages, checking order against the bounds inherited from the
    /// parents, leaf depth, overflow chains and (with `verifyValues`) that compressed values decode.
    /// `name` is the tree as problems name their owner: `tree "rows.Book"`, `the catalog`.
    func walk(_ tree: BTree, name: String, usage: inout PageUsage, statistics: inout TreeStatistics,
              problems: inout [IntegrityProblem], verifyValues: Bool) {
        // Long: one loop over the tree's pages by an explicit stack (no recursion on a damaged
        // tree): each page's checks need the bounds and depth the stack carries, and mark the same
        // usage and statistics.
        var leafDepth: Int?
        // (page, depth, lower bound inclusive, upper bound exclusive)
        var stack: [(PageNumber, Int, [UInt8]?, [UInt8]?)] = [(tree.root, 1, nil, nil)]
        while let (page, depth, lower, upper) = stack.popLast() {
            if let other = usage.mark(page, name) {
                problems.append(IntegrityProblem(owner: name, page: page, "page is also used by \(other)"))
                continue
            }
            guard depth <= BTree.maximumDepth else {
                problems.append(IntegrityProblem(owner: name, page: page, "the tree is deeper than \(BTree.maximumDepth) levels"))
                continue
            }
            let image: NodeImage
            do {
                image = try tree.image(of: page)
            } catch let error as StoreError {
                problems.append(IntegrityProblem(owner: name, page: page, error.detail))
                continue
            } catch {
                continue
            }
            statistics.capacityBytes += pager.usableSize
            statistics.usedBytes += (try? pager.withPage(page) { NodeView(body: $0).usedBytes }) ?? 0
            let keys = (0..<image.count).map(image.key)
            for (index, key) in keys.enumerated() {
                if index > 0, !keys[index - 1].lexicographicallyPrecedes(key) {
                    problems.append(IntegrityProblem(owner: name, page: page, "keys \(index - 1) and \(index) are out of order"))
                    break
                }
                if let lower, key.lexicographicallyPrecedes(lower) {
                    problems.append(IntegrityProblem(owner: name, page: page, "key \(index) sorts before its parent's separator"))
                    break
                }
                if let upper, !key.lexicographicallyPrecedes(upper) {
                    problems.append(IntegrityProblem(owner: name, page: page, "key \(index) does not sort before its parent's next separator"))
                    break
                }
            }
            if image.leaf {
                statistics.leafPages += 1
                statistics.entries += image.count
                if let leafDepth, leafDepth != depth {
                    problems.append(IntegrityProblem(owner: name, page: page, "leaf at depth \(depth), others at \(leafDepth)"))
                }
                leafDepth = leafDepth ?? depth
                statistics.depth = max(statistics.depth, depth)
                for index in 0..<image.count {
                    checkValue(image.payload(index), index: index, page: page, tree: tree, name: name, usage: &usage,
                               statistics: &statistics, problems: &problems, verifyValues: verifyValues)
                }
            } else {
                statistics.interiorPages += 1
                let children = image.children
                for (index, child) in children.enumerated() {
                    guard child >= 2, child <= pager.pageCount else {
                        problems.append(IntegrityProblem(owner: name, page: page, "child \(child) is outside the file"))
                        continue
                    }
                    let childLower = index == 0 ? lower : keys[index - 1]
                    let childUpper = index < keys.count ? keys[index] : upper
                    stack.append((child, depth + 1, childLower, childUpper))
                }
            }
        }
    }

    private func checkValue(_ payload: [UInt8], index: Int, page: PageNumber, tree: BTree, name: String,
                            usage: inout PageUsage, statistics: inout TreeStatistics,
                            problems: inout [IntegrityProblem], verifyValues: Bool) {
        let parsed = LeafCell(payload: payload)
        if parsed.isCompressed { statistics.compressedValues += 1 }
        do {
            var stored: [UInt8] = parsed.inline
            if parsed.isOverflow {
                var chain: [PageNumber] = []
                stored = []
                try tree.walkOverflow(first: parsed.overflow, length: parsed.storedLength) { overflowPage, bytes, _ in
                    chain.append(overflowPage)
                    if verifyValues && parsed.isCompressed { stored.append(contentsOf: bytes) }
                }
                statistics.overflowPages += chain.count
                for overflowPage in chain {
                    if let other = usage.mark(overflowPage, name) {
                        problems.append(IntegrityProblem(owner: name, page: overflowPage, "overflow page is also used by \(other)"))
                    }
                }
            }
            if verifyValues && parsed.isCompressed {
                _ = try parsed.decode(stored, tree: tree)
            }
        } catch let error as StoreError {
            problems.append(IntegrityProblem(owner: name, page: page, "value of cell \(index): \(error.detail)"))
        } catch {}
    }
}
