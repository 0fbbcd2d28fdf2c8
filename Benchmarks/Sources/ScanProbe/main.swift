// What a full scan costs per row, in one process: the engine's own leaf walk (`Tree.forEach`) over
// rows like FetchReport's people, with and without a test on their bytes, next to Arbor fetch
// requests over the same rows (a native store with a 128 MiB cache). Best of N rounds each.
//
//   swift run -c release ScanProbe [rows]       (default 100000)
//   FLUSH=1            evicts the processor's caches before every round (a 64 MiB write)
//   PROBE_FORMAT=...   one predicate instead of the default four; PROBE_ROUNDS=N rounds (15)
import ArborStore
import Foundation
import GraphWorkloads

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 100_000 : 100_000
let dir = "/tmp/scanprobe"
try? FileManager.default.removeItem(atPath: dir)
try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: dir) }
let db = try Database(path: dir + "/p.arbor")
try db.write { t in
    let tree = try t.createTree(named: "rows", kind: .table)
    for i in 0..<count {
        let key = KeyEncoding.encode([.int(Int64(i + 1))])
        let value = KeyEncoding.encode([.string("Person"), .int(1), .int(Int64(20 + i % 45)), .string("Person \(i)"), .int(Int64((i * 7919) % 100_000 + 30_000)), .int(Int64(i % max(1, count / 10)))])
        try tree.put(key, value)
    }
}
let clock = ContinuousClock()
nonisolated(unsafe) var junk = [UInt8](repeating: 1, count: 64 << 20)
func flush() { junk.withUnsafeMutableBytes { b in var i = 0; while i < b.count { b[i] &+= 1; i += 64 } } }
let age = KeyEncoding.encode([.int(33)])
func time(_ label: String, _ body: () throws -> Int) throws {
    var best = Duration.seconds(1000)
    var r = 0
    for _ in 0..<(Int(ProcessInfo.processInfo.environment["PROBE_ROUNDS"] ?? "") ?? 15) {
        if ProcessInfo.processInfo.environment["FLUSH"] != nil { flush() }
        let s = clock.now
        r = try body()
        best = min(best, clock.now - s)
    }
    let ns = Double(best.components.attoseconds) / 1e9 + Double(best.components.seconds) * 1e9
    print(label, r, String(format: "%.1f ns/row, %.2f ms", ns / Double(count), ns / 1e6))
}
/// A scan of the rows tree calling `test` on each value; the number it accepts.
func scanRows(_ test: (UnsafeRawBufferPointer) -> Bool) throws -> Int {
    try db.read { t in
        var n = 0
        try t.tree(named: "rows")!.forEach { _, value in
            if test(value) { n += 1 }
            return true
        }
        return n
    }
}
try age.withUnsafeBytes { a in
    try time("walk") { try scanRows { _ in true } }
    try time("age test") { try scanRows { v in v.count > 27 && memcmp(v.baseAddress! + 18, a.baseAddress!, 9) == 0 } }
}

// The same scans through Arbor's fetch path (FetchReport's store of people, its cache budget).
let arbor = try ArborFetches()
defer { arbor.remove() }
try arbor.fill(count: count)
let formats = ProcessInfo.processInfo.environment["PROBE_FORMAT"].map { [$0] } ?? ["age == 999", "age == 33", "age == 33 AND name ENDSWITH '7'", "name ENDSWITH 'x'"]
for format in formats {
    try time(format) { try arbor.fetchCount(format) }
}
