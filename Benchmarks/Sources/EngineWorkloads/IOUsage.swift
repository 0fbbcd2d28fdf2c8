#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What the process has read and written through system calls so far, from `/proc/self/io`
/// (Linux; nil elsewhere): the bytes every `read`/`pread`/`readv` and `write`/`pwrite`/`writev`
/// call moved, whether the kernel served them from its page cache or the disk, and the calls'
/// number. Syncs are not counted here.
public struct IOUsage: Codable, Sendable, Equatable {
    /// `rchar`: bytes read.
    public var bytesRead: Int
    /// `wchar`: bytes written.
    public var bytesWritten: Int
    /// `syscr`: read calls.
    public var readCalls: Int
    /// `syscw`: write calls.
    public var writeCalls: Int

    /// The counters now; nil where `/proc/self/io` cannot be read.
    public static var now: IOUsage? {
        guard let file = fopen("/proc/self/io", "r") else { return nil }
        defer { fclose(file) }
        var fields: [String: Int] = [:]
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            // "wchar: 123456"
            let parts = String(cString: line).split(separator: ":")
            guard parts.count == 2 else { continue }
            fields[String(parts[0])] = Int(parts[1].filter(\.isNumber))
        }
        guard let read = fields["rchar"], let written = fields["wchar"], let reads = fields["syscr"], let writes = fields["syscw"] else { return nil }
        return IOUsage(bytesRead: read, bytesWritten: written, readCalls: reads, writeCalls: writes)
    }

    /// What happened between `earlier` and this sample.
    public func since(_ earlier: IOUsage) -> IOUsage {
        IOUsage(bytesRead: bytesRead - earlier.bytesRead, bytesWritten: bytesWritten - earlier.bytesWritten,
                readCalls: readCalls - earlier.readCalls, writeCalls: writeCalls - earlier.writeCalls)
    }
}
