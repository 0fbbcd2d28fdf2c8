import ArborTestSupport
import Foundation
import Testing
@testable import ArborStore

@Suite("File system")
struct FileSystemTests {
    @Test("a gathering write on a real file puts every buffer in place, over more than one pwritev batch")
    func gatheringWrite() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-fs-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try PosixFileSystem.shared.open(directory + "/f", mode: .readWriteCreate)
        defer { file.close() }
        // 2500 buffers of varied sizes (more than the 1024 of one batch), each filled with its index,
        // cut out of one allocation in a shuffled order so that no two neighbours are adjacent.
        let sizes = (0..<2500).map { 1 + ($0 * 37) % 300 }
        let total = sizes.reduce(0, +)
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: total, alignment: 16)
        defer { memory.deallocate() }
        var starts = [Int](repeating: 0, count: sizes.count)
        var offset = 0
        for index in (0..<sizes.count).reversed() {
            starts[index] = offset
            memory[offset..<(offset + sizes[index])].initializeMemory(as: UInt8.self, repeating: UInt8(truncatingIfNeeded: index))
            offset += sizes[index]
        }
        let buffers = sizes.indices.map { UnsafeRawBufferPointer(rebasing: memory[starts[$0]..<(starts[$0] + sizes[$0])]) }
        try file.write(gathering: buffers, at: 100)
        #expect(try file.size() == Int64(100 + total))
        var back = [UInt8](repeating: 0, count: total)
        #expect(try back.withUnsafeMutableBytes { try file.readFully(into: $0, at: 100) })
        let expected = sizes.indices.flatMap { [UInt8](repeating: UInt8(truncatingIfNeeded: $0), count: sizes[$0]) }
        #expect(back == expected)
    }
}
