#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import SystemPackage

// Safety: The caller's buffers are passed to `pread`, `pwrite` and `pwritev` with their counts, for
// the call only.

/// The real file system, through POSIX calls.
///
/// Every call retries on `EINTR` and reports failures as ``StoreError`` carrying the `Errno`.
/// Locks are open-file-description locks (`F_OFD_SETLK`) on Linux, which `close()` of another
/// descriptor on the same file cannot drop; elsewhere they fall back to `F_SETLK`.
public final class PosixFileSystem: FileSystem {
    /// The shared instance.
    public static let shared = PosixFileSystem()

    /// Creates a POSIX file system. Instances are interchangeable; ``shared`` is enough.
    public init() {}

    /// Opens `path` with `open(2)` (close-on-exec; created files get mode 0644).
    public func open(_ path: String, mode: FileOpenMode) throws -> any StoreFile {
        var flags: Int32 = O_CLOEXEC
        switch mode {
        case .readOnly: flags |= O_RDONLY
        case .readWrite: flags |= O_RDWR
        case .readWriteCreate: flags |= O_RDWR | O_CREAT
        }
        let fd = try Syscall.retrying("open", path: path) { posixOpen(path, flags, 0o644) }
        var info = stat()
        do {
            _ = try Syscall.retrying("fstat", path: path) { fstat(fd, &info) }
        } catch {
            _ = posixClose(fd)
            throw error
        }
        let identity = FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        return PosixFile(fd: fd, path: path, identity: identity)
    }

    /// `realpath(3)` of `path` (which must exist). Hard links cannot be resolved: a file must not
    /// be opened through two hard links at once (docs/locking.md).
    public func canonicalPath(_ path: String) throws -> String {
        guard let resolved = realpath(path, nil) else {
            throw StoreError.system(Errno(rawValue: errnoValue()), "realpath", path: path)
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Whether `stat(2)` finds `path`.
    public func exists(_ path: String) throws -> Bool {
        var info = stat()
        if stat(path, &info) == 0 { return true }
        let error = Errno(rawValue: errnoValue())
        if error == .noSuchFileOrDirectory || error == .notDirectory { return false }
        throw StoreError.system(error, "stat", path: path)
    }

    /// Removes `path` with `unlink(2)`; a missing file is not an error.
    public func delete(_ path: String) throws {
        if unlink(path) == 0 { return }
        let error = Errno(rawValue: errnoValue())
        if error == .noSuchFileOrDirectory { return }
        throw StoreError.system(error, "unlink", path: path)
    }

    /// Opens the directory containing `path` and `fsync`s it.
    public func syncDirectory(containing path: String) throws {
        let directory = Self.directory(of: path)
        let fd = try Syscall.retrying("open directory", path: directory) {
            posixOpen(directory, O_RDONLY | O_CLOEXEC, 0)
        }
        defer { _ = posixClose(fd) }
        _ = try Syscall.retrying("fsync directory", path: directory) { fsync(fd) }
    }

    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }
}

/// An open POSIX file descriptor.
final class PosixFile: StoreFile {
    let fd: Int32
    let path: String
    let identity: FileIdentity

    init(fd: Int32, path: String, identity: FileIdentity) {
        self.fd = fd
        self.path = path
        self.identity = identity
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        guard buffer.count > 0 else { return 0 }
        let n = try Syscall.retrying("read", path: path) {
            pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
        }
        return n
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        var done = 0
        while done < bytes.count {
            let n = try Syscall.retrying("write", path: path) {
                pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + Int64(done)))
            }
            if n == 0 {
                throw StoreError(.ioError, "write made no progress", path: path)
            }
            done += n
        }
    }

    /// `pwritev` in batches of at most 1024 buffers (`IOV_MAX`), finishing short writes.
    func write(gathering buffers: [UnsafeRawBufferPointer], at offset: Int64) throws {
        var vectors = buffers.map { iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count) }
        var first = 0
        var position = offset
        while first < vectors.count {
            let count = min(vectors.count - first, 1024)
            let written = try vectors.withUnsafeMutableBufferPointer { all in
                try Syscall.retrying("write", path: path) { pwritev(fd, all.baseAddress! + first, Int32(count), off_t(position)) }
            }
            if written == 0 { throw StoreError(.ioError, "write made no progress", path: path) }
            position += Int64(written)
            // Skip the buffers written whole; trim a partly written one and go on from it.
            var remaining = written
            while remaining > 0 {
                let length = vectors[first].iov_len
                if remaining >= length {
                    remaining -= length
                    first += 1
                } else {
                    vectors[first].iov_base = vectors[first].iov_base! + remaining
                    vectors[first].iov_len = length - remaining
                    remaining = 0
                }
            }
        }
    }

    func sync() throws {
        #if canImport(Darwin)
        if fcntl(fd, F_FULLFSYNC) == 0 { return }
        _ = try Syscall.retrying("fsync", path: path) { fsync(fd) }
        #else
        _ = try Syscall.retrying("fdatasync", path: path) { fdatasync(fd) }
        #endif
    }

    func truncate(to size: Int64) throws {
        _ = try Syscall.retrying("ftruncate", path: path) { ftruncate(fd, off_t(size)) }
    }

    func size() throws -> Int64 {
        var info = stat()
        _ = try Syscall.retrying("fstat", path: path) { fstat(fd, &info) }
        return Int64(info.st_size)
    }

    func lock(_ request: FileLockRequest, offset: Int64, length: Int64) throws -> Bool {
        var lock = flock()
        switch request {
        case .shared: lock.l_type = Int16(F_RDLCK)
        case .exclusive: lock.l_type = Int16(F_WRLCK)
        case .unlock: lock.l_type = Int16(F_UNLCK)
        }
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = off_t(offset)
        lock.l_len = off_t(length)
        lock.l_pid = 0
        while true {
            if fcntl(fd, Syscall.setLockCommand, &lock) == 0 { return true }
            let error = Errno(rawValue: errnoValue())
            switch error {
            case .interrupted: continue
            case Errno(rawValue: EAGAIN), Errno(rawValue: EACCES): return false
            default: throw StoreError.system(error, "fcntl lock", path: path)
            }
        }
    }

    func close() {
        _ = posixClose(fd)
    }
}

/// The one place syscalls are made from: retries `EINTR`, maps failures to ``StoreError``.
enum Syscall {
    #if os(Linux)
    /// `F_OFD_SETLK`: open-file-description locks (Linux 3.15+).
    static let setLockCommand: Int32 = 37
    #else
    static let setLockCommand: Int32 = F_SETLK
    #endif

    /// Runs `call` until it does not fail with `EINTR`; a negative result throws.
    @inline(__always)
    static func retrying<T: BinaryInteger>(_ operation: String, path: String?, _ call: () -> T) throws -> T {
        while true {
            let result = call()
            if result >= 0 { return result }
            let error = Errno(rawValue: errnoValue())
            if error == .interrupted { continue }
            throw StoreError.system(error, operation, path: path)
        }
    }
}

@inline(__always)
func errnoValue() -> Int32 {
    #if canImport(Glibc) || canImport(Musl)
    return Glibc.errno
    #else
    return Darwin.errno
    #endif
}

@inline(__always)
func posixClose(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
    return Glibc.close(fd)
    #elseif canImport(Musl)
    return Musl.close(fd)
    #else
    return Darwin.close(fd)
    #endif
}

@inline(__always)
func posixOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    #if canImport(Glibc)
    return Glibc.open(path, flags, mode)
    #elseif canImport(Musl)
    return Musl.open(path, flags, mode)
    #else
    return Darwin.open(path, flags, mode)
    #endif
}
