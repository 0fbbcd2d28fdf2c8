import CLZ4

// Safety: A dictionary's bytes are allocated once and never move while LZ4's stream state points
// into them, and are freed with the streams in `deinit`; compression and decompression pass lent
// buffers with their counts as bounds; a dictionary belongs to one connection.

/// LZ4 block compression through the system liblz4. The one file that rebinds bytes to `CChar`.
enum LZ4 {
    /// Compresses `bytes`; nil when liblz4 fails (it does not for valid input), or when `bytes`
    /// is longer than liblz4 takes (`LZ4_MAX_INPUT_SIZE`, about 2 GB: such a value is stored
    /// uncompressed, which also keeps every length below passed as an `Int32` in range).
    static func compress(_ bytes: [UInt8]) -> [UInt8]? {
        guard !bytes.isEmpty, bytes.count <= Int(LZ4_MAX_INPUT_SIZE) else { return nil }
        let bound = Int(LZ4_compressBound(Int32(bytes.count)))
        var output = [UInt8](repeating: 0, count: bound)
        let written = bytes.withUnsafeBytes { source in
            output.withUnsafeMutableBytes { target in
                LZ4_compress_default(source.baseAddress!.assumingMemoryBound(to: CChar.self),
                                     target.baseAddress!.assumingMemoryBound(to: CChar.self),
                                     Int32(bytes.count), Int32(bound))
            }
        }
        guard written > 0 else { return nil }
        output.removeSubrange(Int(written)...)
        return output
    }

    /// Decompresses `bytes`, which must decode to exactly `originalLength` bytes; with
    /// `dictionary`, against it (the bytes it was compressed with).
    ///
    /// - Throws: `corrupt` when the data does not decode, or the lengths are impossible for LZ4
    ///   (checked before anything is allocated).
    static func decompress(_ bytes: [UInt8], originalLength: Int, dictionary: UnsafeRawBufferPointer? = nil,
                           path: String?) throws -> [UInt8] {
        try bytes.withUnsafeBytes { try decompress($0, originalLength: originalLength, dictionary: dictionary, path: path) }
    }

    /// ``decompress(_:originalLength:dictionary:path:)`` from bytes in place.
    static func decompress(_ bytes: UnsafeRawBufferPointer, originalLength: Int, dictionary: UnsafeRawBufferPointer? = nil,
                           path: String?) throws -> [UInt8] {
        // liblz4 takes 32-bit lengths: a value read from the file (an overflow chain of a file
        // over 2 GB) may be longer, and Int32(count) would stop the process.
        guard bytes.count <= Int(Int32.max), (dictionary?.count ?? 0) <= Int(Int32.max) else {
            throw StoreError(.corrupt, "a compressed value of \(bytes.count) bytes is longer than LZ4 takes (\(Int32.max))", path: path)
        }
        // LZ4 expands at most ~255:1; a larger claim is corruption, not a reason to allocate.
        guard !bytes.isEmpty, originalLength > 0, originalLength <= bytes.count * 255 + 16, originalLength <= Int(Int32.max) else {
            throw StoreError(.corrupt, "compressed value claims \(originalLength) bytes from \(bytes.count)", path: path)
        }
        var output = [UInt8](repeating: 0, count: originalLength)
        let decoded = output.withUnsafeMutableBytes { target in
            let input = bytes.baseAddress!.assumingMemoryBound(to: CChar.self)
            let out = target.baseAddress!.assumingMemoryBound(to: CChar.self)
            guard let dictionary, let start = dictionary.baseAddress else {
                return LZ4_decompress_safe(input, out, Int32(bytes.count), Int32(originalLength))
            }
            return LZ4_decompress_safe_usingDict(input, out, Int32(bytes.count), Int32(originalLength),
                                                 start.assumingMemoryBound(to: CChar.self), Int32(dictionary.count))
        }
        guard decoded == Int32(originalLength) else {
            throw StoreError(.corrupt, "compressed value does not decode\(dictionary == nil ? "" : " against its tree's dictionary") (LZ4 returned \(decoded), expected \(originalLength) bytes)", path: path)
        }
        return output
    }
}

/// A tree's LZ4 dictionary, loaded for use: its bytes in memory that does not move (LZ4's stream
/// state points into it), a stream state with the dictionary loaded, and a working state each
/// compression starts from a copy of (cheaper than loading the dictionary again: a 16 KiB copy
/// against hashing 64 KiB).
///
/// Not thread-safe: it belongs to one connection (``Pager``).
final class LZ4Dictionary {
    private let bytes: UnsafeMutableRawBufferPointer
    private let loaded: UnsafeMutablePointer<LZ4_stream_t>
    private let working: UnsafeMutablePointer<LZ4_stream_t>

    init(bytes source: [UInt8]) {
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: max(source.count, 1), alignment: 16)
        source.withUnsafeBytes { bytes.copyMemory(from: $0) }
        self.bytes = UnsafeMutableRawBufferPointer(rebasing: bytes[0..<source.count])
        loaded = LZ4_createStream()
        working = LZ4_createStream()
        LZ4_loadDict(loaded, bytes.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(source.count))
    }

    deinit {
        LZ4_freeStream(loaded)
        LZ4_freeStream(working)
        bytes.deallocate()
    }

    /// Compresses `source` against the dictionary; nil when liblz4 fails.
    func compress(_ source: [UInt8]) -> [UInt8]? {
        guard !source.isEmpty, source.count <= Int(LZ4_MAX_INPUT_SIZE) else { return nil }
        working.update(from: loaded, count: 1)
        let bound = Int(LZ4_compressBound(Int32(source.count)))
        var output = [UInt8](repeating: 0, count: bound)
        let written = source.withUnsafeBytes { input in
            output.withUnsafeMutableBytes { target in
                LZ4_compress_fast_continue(working, input.baseAddress!.assumingMemoryBound(to: CChar.self),
                                           target.baseAddress!.assumingMemoryBound(to: CChar.self),
                                           Int32(source.count), Int32(bound), 1)
            }
        }
        guard written > 0 else { return nil }
        output.removeSubrange(Int(written)...)
        return output
    }

    /// Decompresses `source`, compressed against this dictionary, to exactly `originalLength`
    /// bytes.
    ///
    /// - Throws: `corrupt` when it does not decode, or the length is impossible for LZ4.
    func decompress(_ source: [UInt8], originalLength: Int, path: String?) throws -> [UInt8] {
        try LZ4.decompress(source, originalLength: originalLength, dictionary: UnsafeRawBufferPointer(bytes), path: path)
    }
}
