/// Advisory byte-range locks held by handles on one file, with the semantics of open-file-
/// description locks: a handle's locks never conflict with each other, a new lock replaces the
/// handle's own locks over its range (splitting partial overlaps), and shared locks coexist.
///
/// The in-memory file systems keep one per file: ``MemoryFileSystem`` and the tests'
/// simulated disk.
package struct ByteRangeLocks: Sendable {
    struct Lock: Sendable {
        var owner: UInt64
        var exclusive: Bool
        var start: Int64
        var end: Int64
    }

    private var locks: [Lock] = []

    package init() {}

    /// Takes, changes or releases `owner`'s lock on `length` bytes at `offset`; false (changing
    /// nothing) when another owner's lock conflicts.
    package mutating func apply(_ request: FileLockRequest, owner: UInt64, offset: Int64, length: Int64) -> Bool {
        let end = offset + length
        if request != .unlock {
            for lock in locks where lock.owner != owner && lock.start < end && offset < lock.end {
                if request == .exclusive || lock.exclusive { return false }
            }
        }
        var kept: [Lock] = []
        for lock in locks {
            guard lock.owner == owner, lock.start < end, offset < lock.end else {
                kept.append(lock)
                continue
            }
            if lock.start < offset { kept.append(Lock(owner: owner, exclusive: lock.exclusive, start: lock.start, end: offset)) }
            if end < lock.end { kept.append(Lock(owner: owner, exclusive: lock.exclusive, start: end, end: lock.end)) }
        }
        if request != .unlock {
            kept.append(Lock(owner: owner, exclusive: request == .exclusive, start: offset, end: end))
        }
        locks = kept
        return true
    }

    /// Releases every lock of `owner` (its handle closed).
    package mutating func release(owner: UInt64) {
        locks.removeAll { $0.owner == owner }
    }
}
