#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import CLZ4

// Safety: The cache owns its frames, images and table (allocated at capacity, freed in `deinit`),
// indexes them only below capacity, and never evicts a pinned or dirty frame, so a buffer lent
// while pinned stays valid; it belongs to one pager, used from one thread at a time and never
// re-entered, hence the unchecked fields.

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
/// The hot path is a lookup per page visit, so the cache keeps everything in memory it owns and
/// reaches through pointers: per-frame state in one array of `Frame`s, and an open-addressing
/// table (linear probing, backward-shift deletion, multiplicative hash) from page number to frame.
/// Frame images live in one page-aligned block allocated at capacity; the system maps its pages
/// only when they are first touched, so a large budget costs nothing until it is used. (One
/// 4 KiB `malloc` per frame would put every image 16 bytes past a page boundary, where copies
/// into it run into the CPU's 4 KiB aliasing.) The properties are `@exclusivity(unchecked)`:
/// the cache belongs to one pager, which is used from one thread at a time and never re-enters
/// it, and dynamic exclusivity checks would add runtime calls to that hot path (see
/// docs/performance.md).
final class PageCache {
    struct Frame {
        var page: PageNumber = 0
        var pins: Int32 = 0
        var referenced = false
        var dirty = false
        /// Loaded by a scan into the scan ring, and not used by anything else since.
        var inRing = false
        /// The scan ring's load count when the page was loaded into it.
        var ringStamp: UInt32 = 0
    }

    struct Slot {
        /// 0: empty.
        var page: PageNumber
        var frame: Int32
    }

    @exclusivity(unchecked) private(set) var pageSize: Int
    /// The frame images, per-frame state and index, allocated together at capacity.
    @exclusivity(unchecked) private var storage: Storage
    var capacity: Int { storage.capacity }
    private var images: UnsafeMutableRawPointer { storage.images }
    private var frames: UnsafeMutablePointer<Frame> { storage.frames }
    private var slots: UnsafeMutablePointer<Slot> { storage.slots }
    private var slotMask: Int { storage.slotMask }
    private var hashShift: UInt32 { storage.hashShift }
    /// Frames handed out so far (images allocated).
    @exclusivity(unchecked) private var used = 0
    @exclusivity(unchecked) private var hand = 0
    @exclusivity(unchecked) private(set) var dirtyCount = 0
    @exclusivity(unchecked) private var count = 0
    @exclusivity(unchecked) var statistics = PageCacheStatistics()

    /// Set while a full scan (`Tree.forEach`) reads: pages it loads go through a small ring of
    /// frames instead of taking the cache over, so a scan of a table larger than the cache
    /// neither evicts the working set nor touches more memory than the ring (see
    /// docs/architecture.md, "Page cache").
    @exclusivity(unchecked) var scanning = false

    /// Runs `body` with ``scanning`` set to `value`, then back as it was.
    func scanning<R>(_ value: Bool, _ body: () throws -> R) rethrows -> R {
        let was = scanning
        scanning = value
        defer { scanning = was }
        return try body()
    }
    /// The frames of the scan ring, and the next one to reuse.
    @exclusivity(unchecked) private var ring: [Int] = []
    @exclusivity(unchecked) private var ringNext = 0
    /// Pages loaded into the ring so far (stamps tell a page re-read by the same leaf visit from
    /// one used again later, such as an interior node, which then leaves the ring).
    @exclusivity(unchecked) private var ringLoads: UInt32 = 0
    static let ringSize = 16

    /// Creates a cache of at most `budget` bytes (and never fewer than 16 pages).
    init(pageSize: Int, budget: Int) {
        self.pageSize = pageSize
        storage = Self.makeStorage(pageSize: pageSize, budget: budget)
        statistics.capacity = storage.capacity
    }

    deinit { release() }

    private struct Storage {
        var capacity: Int
        var images: UnsafeMutableRawPointer
        var frames: UnsafeMutablePointer<Frame>
        var slots: UnsafeMutablePointer<Slot>
        var slotMask: Int
        var hashShift: UInt32
    }

    /// The most frames a cache has: frame numbers are 32-bit in the index
    /// (`PagerOptions.maximumCacheSize` keeps budgets below it).
    static let maximumFrames = Int(Int32.max)

    private static func makeStorage(pageSize: Int, budget: Int) -> Storage {
        let capacity = min(max(16, budget / pageSize), maximumFrames)
        let images = allocateImages(byteCount: capacity * pageSize, pageSize: pageSize)
        let frames = UnsafeMutablePointer<Frame>.allocate(capacity: capacity)
        frames.initialize(repeating: Frame(), count: capacity)
        var tableSize = 32
        var bits: UInt32 = 5
        while tableSize < 2 * capacity {
            tableSize <<= 1
            bits += 1
        }
        let slots = UnsafeMutablePointer<Slot>.allocate(capacity: tableSize)
        slots.initialize(repeating: Slot(page: 0, frame: 0), count: tableSize)
        return Storage(capacity: capacity, images: images, frames: frames, slots: slots,
                       slotMask: tableSize - 1, hashShift: 32 - bits)
    }

    /// The block of frame images. Blocks of 2 MiB or more are aligned to 2 MiB and offered to
    /// the kernel for transparent huge pages (`MADV_HUGEPAGE`; systems where that is off, or not
    /// Linux, ignore it): a 64 MiB cache is then 32 mappings instead of 16,384, so filling it takes
    /// 32 page faults rather than one per frame, and random page visits stop missing the TLB.
    private static func allocateImages(byteCount: Int, pageSize: Int) -> UnsafeMutableRawPointer {
        let huge = 2 << 20
        guard byteCount >= huge else {
            return UnsafeMutableRawPointer.allocate(byteCount: byteCount, alignment: max(pageSize, 4096))
        }
        let rounded = (byteCount + huge - 1) / huge * huge
        let images = UnsafeMutableRawPointer.allocate(byteCount: rounded, alignment: max(pageSize, huge))
        #if os(Linux)
        _ = madvise(images, rounded, MADV_HUGEPAGE)
        #endif
        return images
    }

    private func release() {
        images.deallocate()
        frames.deallocate()
        slots.deallocate()
    }

    /// Empties the cache and gives it a new page size and budget.
    func reset(pageSize: Int, budget: Int) {
        release()
        self.pageSize = pageSize
        storage = Self.makeStorage(pageSize: pageSize, budget: budget)
        used = 0
        hand = 0
        dirtyCount = 0
        count = 0
        ring.removeAll()
        ringNext = 0
        statistics = PageCacheStatistics()
        statistics.capacity = storage.capacity
    }

    // MARK: The index

    @inline(__always)
    private func home(_ page: PageNumber) -> Int {
        Int((page &* 0x9E37_79B1) >> hashShift)
    }

    @inline(__always)
    private func find(_ page: PageNumber) -> Int? {
        var slot = home(page)
        while true {
            let entry = slots[slot]
            if entry.page == page { return Int(entry.frame) }
            if entry.page == 0 { return nil }
            slot = (slot + 1) & slotMask
        }
    }

    private func insertIndex(_ page: PageNumber, _ frame: Int) {
        var slot = home(page)
        while slots[slot].page != 0 { slot = (slot + 1) & slotMask }
        slots[slot] = Slot(page: page, frame: Int32(frame))
        count += 1
    }

    private func removeIndex(_ page: PageNumber) {
        var hole = home(page)
        while slots[hole].page != page {
            if slots[hole].page == 0 { return }
            hole = (hole + 1) & slotMask
        }
        // Backward-shift deletion: pull later entries of the probe run into the hole when their
        // home position allows it, so lookups never need tombstones.
        var next = hole
        while true {
            next = (next + 1) & slotMask
            let entry = slots[next]
            if entry.page == 0 { break }
            let want = home(entry.page)
            let between = hole <= next ? (want > hole && want <= next) : (want > hole || want <= next)
            if !between {
                slots[hole] = entry
                hole = next
            }
        }
        slots[hole].page = 0
        count -= 1
    }

    // MARK: Lookups

    /// The frame holding `page`, counting a hit or a miss.
    @inline(__always)
    func lookup(_ page: PageNumber) -> Int? {
        if let frame = find(page) {
            statistics.hits &+= 1
            if frames[frame].inRing {
                // A ring page used again after the scan moved on (or by anything but the scan)
                // is worth keeping: it leaves the ring and becomes an ordinary cached page.
                if !scanning || frames[frame].ringStamp != ringLoads {
                    frames[frame].inRing = false
                    frames[frame].referenced = true
                }
            } else {
                frames[frame].referenced = true
            }
            return frame
        }
        statistics.misses &+= 1
        return nil
    }

    /// The frame holding `page`, without counting.
    func peek(_ page: PageNumber) -> Int? { find(page) }

    /// Asks the processor to bring `page`'s image — its first `byteCount` bytes, all of it by
    /// default — into its caches when the page is cached (a hint: nothing is counted, pinned or
    /// loaded). A scan asks for its next leaf while it reads the current one, so the first touch
    /// of each leaf does not wait on memory; a batched lookup asks for the header and slots of
    /// several keys' leaves before it searches any of them.
    @inline(__always)
    func prefetch(_ page: PageNumber, byteCount: Int? = nil) {
        guard let frame = find(page) else { return }
        arbor_prefetch_range(images + frame * pageSize, min(byteCount ?? pageSize, pageSize))
    }

    /// Asks the processor for the table slot where a lookup of `page` starts (a hint). A scan
    /// asks for the slot of the leaf after next: the lookup that finds the next leaf's frame
    /// then does not wait on memory either (the table is spread over megabytes, so a lookup's
    /// first slot is usually out of the processor's caches).
    @inline(__always)
    func prefetchSlot(_ page: PageNumber) {
        arbor_prefetch_range(slots + home(page), MemoryLayout<Slot>.stride)
    }

    /// A frame for `page` (not yet cached): a fresh one while under capacity, else a clean,
    /// unpinned victim chosen by CLOCK. Nil when every frame is dirty or pinned.
    func frame(for page: PageNumber) -> Int? {
        assert(find(page) == nil, "page \(page) is already cached")
        let frame: Int
        if used < capacity {
            frame = used
            used += 1
        } else {
            guard let victim = chooseVictim() else { return nil }
            let old = frames[victim].page
            if old != 0 {
                removeIndex(old)
                statistics.evictions &+= 1
            }
            frame = victim
        }
        frames[frame] = Frame(page: page, pins: 0, referenced: true, dirty: false)
        insertIndex(page, frame)
        statistics.pages = count
        return frame
    }

    /// A frame for `page` loaded by a scan: a fresh frame while the cache has some; then the next
    /// frame of the scan ring when it is still the ring's (clean, unpinned, not used since), else
    /// an ordinary frame that joins the ring.
    func frame(forScan page: PageNumber) -> Int? {
        // While the cache has frames never used, a scan's pages take them as any page would:
        // nothing is evicted, and a table that fits stays cached for the next scan. The ring
        // starts once the cache is full.
        if used < capacity { return self.frame(for: page) }
        let frame: Int
        if ring.count == Self.ringSize {
            let slot = ringNext
            ringNext = ringNext + 1 == Self.ringSize ? 0 : ringNext + 1
            let candidate = ring[slot]
            if frames[candidate].inRing && frames[candidate].pins == 0 && !frames[candidate].dirty {
                if frames[candidate].page != 0 {
                    removeIndex(frames[candidate].page)
                    statistics.evictions &+= 1
                }
                insertIndex(page, candidate)
                frame = candidate
            } else {
                guard let fresh = self.frame(for: page) else { return nil }
                ring[slot] = fresh
                frame = fresh
            }
        } else {
            guard let fresh = self.frame(for: page) else { return nil }
            ring.append(fresh)
            frame = fresh
        }
        ringLoads &+= 1
        frames[frame] = Frame(page: page, pins: 0, referenced: false, dirty: false, inRing: true, ringStamp: ringLoads)
        statistics.pages = count
        return frame
    }

    private func chooseVictim() -> Int? {
        // Two sweeps: the first clears reference bits, the second must find a candidate if any
        // frame is clean and unpinned.
        for _ in 0..<(2 * used) {
            let frame = hand
            hand = hand + 1 == used ? 0 : hand + 1
            if frames[frame].pins > 0 || frames[frame].dirty { continue }
            if frames[frame].referenced {
                frames[frame].referenced = false
                continue
            }
            return frame
        }
        return nil
    }

    @inline(__always)
    func buffer(_ frame: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: images + frame * pageSize, count: pageSize)
    }

    @inline(__always)
    func page(ofFrame frame: Int) -> PageNumber { frames[frame].page }

    @inline(__always)
    func pin(_ frame: Int) { frames[frame].pins += 1 }

    @inline(__always)
    func unpin(_ frame: Int) { frames[frame].pins -= 1 }

    func pinCount(_ frame: Int) -> Int32 { frames[frame].pins }

    /// The pages of frames handed out whose pins do not balance (pinned, or unpinned more often
    /// than pinned), with their counts: none between transactions.
    func unbalancedPins() -> [(page: PageNumber, pins: Int32)] {
        (0..<used).compactMap { frames[$0].pins == 0 ? nil : (frames[$0].page, frames[$0].pins) }
    }

    @inline(__always)
    func isDirty(_ frame: Int) -> Bool { frames[frame].dirty }

    func markDirty(_ frame: Int) {
        if !frames[frame].dirty {
            frames[frame].dirty = true
            dirtyCount += 1
        }
    }

    func markClean(_ frame: Int) {
        if frames[frame].dirty {
            frames[frame].dirty = false
            dirtyCount -= 1
        }
    }

    /// The dirty frames, in page order (the order they are written to the file).
    func dirtyFrames() -> [Int] {
        var result: [Int] = []
        result.reserveCapacity(dirtyCount)
        for frame in 0..<used where frames[frame].dirty { result.append(frame) }
        result.sort { frames[$0].page < frames[$1].page }
        return result
    }

    /// Drops one page (which must not be pinned).
    func drop(_ page: PageNumber) {
        guard let frame = find(page) else { return }
        precondition(frames[frame].pins == 0, "dropping pinned page \(page)")
        markClean(frame)
        removeIndex(page)
        frames[frame] = Frame()
        statistics.pages = count
    }

    /// Drops every dirty page (a rolled-back transaction's changes).
    func dropDirty() {
        for frame in 0..<used where frames[frame].dirty { drop(frames[frame].page) }
    }

    /// Drops every page (another connection changed the file). Keeps the frames for reuse.
    func dropAll() {
        for frame in 0..<used where frames[frame].page != 0 {
            // A page still pinned (an error ended the transaction while a caller was reading it:
            // a spill that failed under `Tree.forEach`) keeps its image until it is unpinned. It
            // leaves the index now, and CLOCK reuses its frame once it is free.
            frames[frame] = Frame(pins: frames[frame].pins)
        }
        slots.update(repeating: Slot(page: 0, frame: 0), count: slotMask + 1)
        dirtyCount = 0
        count = 0
        statistics.pages = 0
        ring.removeAll(keepingCapacity: true)
        ringNext = 0
    }
}
