#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's resident memory, from `/proc/self/status` (Linux; nil elsewhere).
///
/// To measure one phase: ``releaseFreedMemory()`` (so memory another phase freed is not counted
/// as still resident), ``resetPeak()``, run the phase, then read ``peakBytes``: the most the
/// process held at any moment of the phase, including what it held before (``residentBytes`` at
/// the start).
public enum MemoryUsage {
    /// `VmRSS`: resident now.
    public static var residentBytes: Int? { field("VmRSS:") }

    /// `VmHWM`: the peak resident size since start or since the last ``resetPeak()``.
    public static var peakBytes: Int? { field("VmHWM:") }

    /// Resets `VmHWM` to the current resident size (writes 5 to `/proc/self/clear_refs`, Linux
    /// 4.0 and later). Returns false when that is not possible here.
    @discardableResult
    public static func resetPeak() -> Bool {
        let descriptor = open("/proc/self/clear_refs", O_WRONLY)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        return write(descriptor, "5", 1) == 1
    }

    /// Returns free heap memory to the system (glibc's `malloc_trim(0)`, looked up at run time:
    /// Swift's Glibc module does not import `<malloc.h>`). Does nothing where it is missing.
    public static func releaseFreedMemory() {
        typealias Trim = @convention(c) (Int) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return }
        _ = unsafeBitCast(symbol, to: Trim.self)(0)
    }

    private static func field(_ name: String) -> Int? {
        guard let file = fopen("/proc/self/status", "r") else { return nil }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            let text = String(cString: line)
            guard text.hasPrefix(name) else { continue }
            // "VmHWM:\t  123456 kB"
            let digits = text.dropFirst(name.count).filter { $0.isNumber }
            return Int(digits).map { $0 * 1024 }
        }
        return nil
    }
}
