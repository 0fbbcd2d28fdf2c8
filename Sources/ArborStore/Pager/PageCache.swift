/// Counters of a page cache.
public struct PageCacheStatistics: Sendable, Equatable {
    /// Lookups that found the page in the cache.
    public var hits: UInt64 = 0
    /// Lookups that had to read the page from the file.
    public var misses: UInt64 = 0
    /// Pages dropped to make room for others.
    public var evictions: UInt64 = 0
    /// Dirty pages written to the database before commit because the cache was full.
    public var spills: UInt64 = 0
    /// Pages in the cache now.
    public var pages: Int = 0
    /// The most pages the cache may hold.
    public var capacity: Int = 0

    /// Creates zeroed statistics.
    public init() {}
}

/// A cache of page images bounded in bytes, with CLOCK eviction.
///
/// CLOCK rather than LRU: a hit only sets a bit (no list surgery), and on the B-tree's access
/// pattern (interior pages hot, leaves cold) it keeps the same pages LRU would.
/// Pinned pages (in use by a caller) and dirty pages (changed by the open write transaction) are
/// never evicted; when nothing else can go, ``frame(for:)`` returns nil and the pager spills.
///
/// Frames are allocated lazily, so a large budget costs nothing until it is used. The cache owns
/// its frame memory; callers reach it only inside `withUnsafe…` closures of the pager.
final class PageCache {
    let pageSize: Int
    let capacity: Int

    private var frames: [UnsafeMutableRawPointer] = []
    private var pageOfFrame: [PageNumber] = []
    private var referenced: [Bool] = []
    private var dirtyFlags: [Bool] = []
    private var pins: [Int32] = []
    private var index: [PageNumber: Int] = [:]
    private var hand = 0
    private(set) var dirtyCount = 0
    var statistics = PageCacheStatistics()

    /// Creates a cache of at most `budget` bytes (and never fewer than 16 pages).
    init(pageSize: Int, budget: Int) {
        self.pageSize = pageSize
        self.capacity = max(16, budget / pageSize)
        statistics.capacity = capacity
    }

    deinit {
        for frame in frames { frame.deallocate() }
    }

    /// The frame holding `page`, counting a hit or a miss.
    @inline(__always)
    func lookup(_ page: PageNumber) -> Int? {
        if let frame = index[page] {
            statistics.hits += 1
            referenced[frame] = true
            return frame
        }
        statistics.misses += 1
        return nil
    }

    /// The frame holding `page`, without counting.
    func peek(_ page: PageNumber) -> Int? { index[page] }

    /// A frame for `page` (not yet cached): a fresh one while under capacity, else a clean,
    /// unpinned victim chosen by CLOCK. Nil when every frame is dirty or pinned.
    func frame(for page: PageNumber) -> Int? {
        precondition(index[page] == nil)
        let frame: Int
        if frames.count < capacity {
            frames.append(UnsafeMutableRawPointer.allocate(byteCount: pageSize, alignment: 16))
            pageOfFrame.append(0)
            referenced.append(false)
            dirtyFlags.append(false)
            pins.append(0)
            frame = frames.count - 1
        } else {
            guard let victim = chooseVictim() else { return nil }
            if pageOfFrame[victim] != 0 {
                index[pageOfFrame[victim]] = nil
                statistics.evictions += 1
            }
            frame = victim
        }
        pageOfFrame[frame] = page
        referenced[frame] = true
        index[page] = frame
        statistics.pages = index.count
        return frame
    }

    private func chooseVictim() -> Int? {
        // Two sweeps: the first clears reference bits, the second must find a candidate if any
        // frame is clean and unpinned.
        for _ in 0..<(2 * frames.count) {
            let frame = hand
            hand = hand + 1 == frames.count ? 0 : hand + 1
            if pins[frame] > 0 || dirtyFlags[frame] { continue }
            if referenced[frame] {
                referenced[frame] = false
                continue
            }
            return frame
        }
        return nil
    }

    @inline(__always)
    func buffer(_ frame: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: frames[frame], count: pageSize)
    }

    @inline(__always)
    func page(ofFrame frame: Int) -> PageNumber { pageOfFrame[frame] }

    @inline(__always)
    func pin(_ frame: Int) { pins[frame] += 1 }

    @inline(__always)
    func unpin(_ frame: Int) { pins[frame] -= 1 }

    func pinCount(_ frame: Int) -> Int32 { pins[frame] }

    func isDirty(_ frame: Int) -> Bool { dirtyFlags[frame] }

    func markDirty(_ frame: Int) {
        if !dirtyFlags[frame] {
            dirtyFlags[frame] = true
            dirtyCount += 1
        }
    }

    func markClean(_ frame: Int) {
        if dirtyFlags[frame] {
            dirtyFlags[frame] = false
            dirtyCount -= 1
        }
    }

    /// The dirty frames, in page order (the order they are written to the file).
    func dirtyFrames() -> [Int] {
        var result: [Int] = []
        result.reserveCapacity(dirtyCount)
        for frame in frames.indices where dirtyFlags[frame] { result.append(frame) }
        result.sort { pageOfFrame[$0] < pageOfFrame[$1] }
        return result
    }

    /// Drops one page (which must not be pinned).
    func drop(_ page: PageNumber) {
        guard let frame = index[page] else { return }
        precondition(pins[frame] == 0, "dropping pinned page \(page)")
        markClean(frame)
        index[page] = nil
        pageOfFrame[frame] = 0
        referenced[frame] = false
        statistics.pages = index.count
    }

    /// Drops every dirty page (a rolled-back transaction's changes).
    func dropDirty() {
        for frame in frames.indices where dirtyFlags[frame] { drop(pageOfFrame[frame]) }
    }

    /// Drops every page (another connection changed the file). Keeps the frames for reuse.
    func dropAll() {
        for frame in frames.indices where pageOfFrame[frame] != 0 {
            precondition(pins[frame] == 0, "dropping pinned page \(pageOfFrame[frame])")
            dirtyFlags[frame] = false
            referenced[frame] = false
            pageOfFrame[frame] = 0
        }
        dirtyCount = 0
        index.removeAll(keepingCapacity: true)
        statistics.pages = 0
    }

    /// Drops cached pages past `count` (the file was truncated by a rollback).
    func dropPages(after count: PageNumber) {
        for frame in frames.indices where pageOfFrame[frame] > count { drop(pageOfFrame[frame]) }
    }
}
