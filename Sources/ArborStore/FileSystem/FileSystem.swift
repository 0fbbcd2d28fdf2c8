// Safety: The buffers of `read` and `write` are the caller's, valid for the call; no implementation
// keeps them.

/// The operations the pager needs from a file system.
///
/// The pager never calls the operating system directly: it goes through a `FileSystem`, so that
/// tests can substitute a simulated disk that loses power, tears writes and fails on demand
/// (`ArborTestSupport.SimulatedDisk`), and the in-memory store can run the same engine over memory.
/// ``PosixFileSystem`` is the real implementation.
///
/// Implementations are shared between threads; every method must be safe to call concurrently.
public protocol FileSystem: AnyObject, Sendable {
    /// Opens the file at `path`.
    ///
    /// - Throws: ``StoreError`` with code `notFound` when the file does not exist and `mode` does
    ///   not create it.
    func open(_ path: String, mode: FileOpenMode) throws -> any StoreFile

    /// Whether a file exists at `path`.
    func exists(_ path: String) throws -> Bool

    /// Removes the file at `path`. Removing a file that does not exist is not an error.
    func delete(_ path: String) throws

    /// Makes the directory entries of the directory that contains `path` durable (after a file
    /// in it was created or removed).
    func syncDirectory(containing path: String) throws

    /// The path of the existing file at `path` with symbolic links, `.` and `..` resolved: the
    /// name its journal and directory syncs go by, whichever link a connection opened it through
    /// (two links would otherwise give one file two journals).
    func canonicalPath(_ path: String) throws -> String
}

extension FileSystem {
    /// `path` itself (file systems without links).
    public func canonicalPath(_ path: String) throws -> String { path }
}

/// How ``FileSystem/open(_:mode:)`` opens a file.
public enum FileOpenMode: Sendable {
    /// Read only; the file must exist.
    case readOnly
    /// Read and write; the file must exist.
    case readWrite
    /// Read and write, creating the file when it does not exist.
    case readWriteCreate
}

/// Identifies a file independently of its path (device and inode on POSIX), so that two handles
/// on one file, opened through different paths, share one lock table.
public struct FileIdentity: Hashable, Sendable, CustomStringConvertible {
    /// The device (or, for simulated file systems, the file system instance).
    public var device: UInt64
    /// The inode (or a per-file number).
    public var inode: UInt64

    /// Creates an identity.
    public init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }

    public var description: String { "\(device):\(inode)" }
}

/// An advisory byte-range lock request.
public enum FileLockRequest: Sendable {
    /// A shared (read) lock: other shared locks may coexist.
    case shared
    /// An exclusive (write) lock: no other lock may coexist.
    case exclusive
    /// Releases the range.
    case unlock
}

/// An open file: positional reads and writes, sync, size, and advisory byte-range locks.
///
/// Locks belong to the open file (an open file description on Linux): two handles on the same
/// file, even in one process, conflict with each other, and closing one handle never releases
/// another's locks.
public protocol StoreFile: AnyObject, Sendable {
    /// The path the file was opened with.
    var path: String { get }

    /// The identity of the underlying file.
    var identity: FileIdentity { get }

    /// Reads up to `buffer.count` bytes at `offset`; returns how many were read, fewer only at the
    /// end of the file.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int

    /// Writes all of `bytes` at `offset`, extending the file if needed.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws

    /// Writes `buffers` one after the other from `offset` (a gathering write: one system call
    /// for many pages where the platform has one). Implementations without one write each buffer
    /// in turn, as the default does.
    func write(gathering buffers: [UnsafeRawBufferPointer], at offset: Int64) throws

    /// Makes everything written so far durable (fdatasync on Linux, F_FULLFSYNC on Apple systems).
    func sync() throws

    /// Sets the file's size.
    func truncate(to size: Int64) throws

    /// The file's current size in bytes.
    func size() throws -> Int64

    /// Tries to take, change or release an advisory lock on a byte range without waiting.
    ///
    /// - Returns: `false` when a conflicting lock is held by another handle.
    func lock(_ request: FileLockRequest, offset: Int64, length: Int64) throws -> Bool

    /// Closes the handle, releasing its locks. Further calls are programmer errors.
    func close()
}

extension StoreFile {
    /// Writes each buffer in turn (implementations with a gathering write override this).
    public func write(gathering buffers: [UnsafeRawBufferPointer], at offset: Int64) throws {
        var position = offset
        for buffer in buffers {
            try write(buffer, at: position)
            position += Int64(buffer.count)
        }
    }

    /// Reads exactly `buffer.count` bytes at `offset`, or returns `false` when the file ends first.
    func readFully(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Bool {
        var done = 0
        while done < buffer.count {
            let n = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done..<buffer.count]), at: offset + Int64(done))
            if n == 0 { return false }
            done += n
        }
        return true
    }
}
