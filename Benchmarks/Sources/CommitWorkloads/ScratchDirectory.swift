#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A fresh directory for one workload's files, on a real file system, removed by ``remove()``.
///
/// It is created under `$ARBOR_BENCH_DIR` when set, else `$TMPDIR`, else `/tmp`. Durable commits
/// measured on tmpfs would be meaningless (its fsync does nothing): ``fileSystemName`` says
/// what the files really are on, and reports print it.
public final class ScratchDirectory {
    /// The directory's absolute path.
    public let path: String

    /// Creates `<parent>/<prefix>-XXXXXX`.
    public init(prefix: String = "arbor-bench") throws {
        let environment = { (name: String) -> String? in
            guard let value = getenv(name), value.pointee != 0 else { return nil }
            return String(cString: value)
        }
        let parent = environment("ARBOR_BENCH_DIR") ?? environment("TMPDIR") ?? "/tmp"
        var template = Array("\(parent)/\(prefix)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer -> String? in
            mkdtemp(buffer.baseAddress!).map { String(cString: $0) }
        }
        guard let made else {
            throw WorkloadError("cannot create a scratch directory in \(parent): \(String(cString: strerror(errno))); set ARBOR_BENCH_DIR to a writable directory")
        }
        path = made
    }

    /// The kind of file system holding the directory (`ext4`, `xfs`, `tmpfs`, `overlay`…), from the
    /// longest mount point in `/proc/self/mounts` that contains it; `unknown` elsewhere.
    public var fileSystemName: String {
        guard let resolved = realpath(path, nil) else { return "unknown" }
        let directory = String(cString: resolved)
        free(resolved)
        guard let mounts = fopen("/proc/self/mounts", "r") else { return "unknown" }
        defer { fclose(mounts) }
        var best = (length: -1, type: "unknown")
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, mounts) > 0, let line {
            // device mount-point type options dump pass (spaces in names are escaped as \040)
            let fields = String(cString: line).split(separator: " ")
            guard fields.count >= 3 else { continue }
            let mountPoint = String(fields[1])
            let inside = mountPoint == "/" || directory == mountPoint || directory.hasPrefix(mountPoint + "/")
            if inside && mountPoint.count > best.length {
                best = (mountPoint.count, String(fields[2]))
            }
        }
        return best.type
    }

    /// The size in bytes of each file in the directory, by name: what a workload left on disk
    /// (a database, a journal).
    public var fileSizes: [String: Int] {
        var sizes: [String: Int] = [:]
        guard let stream = opendir(path) else { return sizes }
        defer { closedir(stream) }
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name == "." || name == ".." { continue }
            var info = stat()
            if stat(path + "/" + name, &info) == 0 { sizes[name] = Int(info.st_size) }
        }
        return sizes
    }

    /// Removes the files in the directory (it holds no subdirectories) and the directory itself —
    /// unless `ARBOR_KEEP_SCRATCH` is set, when it leaves them and names the directory on standard
    /// error (to look at a workload's files afterwards: `arbor info`, `sqlite3 … dbstat`).
    public func remove() {
        if let keep = getenv("ARBOR_KEEP_SCRATCH"), keep.pointee != 0 {
            let line = Array("kept \(path)\n".utf8)
            _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
            return
        }
        if let stream = opendir(path) {
            while let entry = readdir(stream) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
                }
                if name == "." || name == ".." { continue }
                unlink(path + "/" + name)
            }
            closedir(stream)
        }
        rmdir(path)
    }
}

/// A failure of a benchmark workload (set-up, a commit, or the read-back check).
public struct WorkloadError: Error, CustomStringConvertible {
    /// What failed.
    public let description: String

    public init(_ description: String) { self.description = description }
}
