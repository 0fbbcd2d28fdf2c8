import CLZ4

/// LZ4 block compression through the system liblz4. The one file that rebinds bytes to `CChar`.
enum LZ4 {
    /// Compresses `bytes`; nil when liblz4 fails (it does not for valid input).
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

    /// Decompresses `bytes`, which must decode to exactly `originalLength` bytes.
    ///
    /// - Throws: `corrupt` when the data does not decode, or the length is impossible for LZ4
    ///   (checked before anything is allocated).
    static func decompress(_ bytes: [UInt8], originalLength: Int, path: String?) throws -> [UInt8] {
        // LZ4 expands at most ~255:1; a larger claim is corruption, not a reason to allocate.
        guard !bytes.isEmpty, originalLength > 0, originalLength <= bytes.count * 255 + 16, originalLength <= Int(Int32.max) else {
            throw StoreError(.corrupt, "compressed value claims \(originalLength) bytes from \(bytes.count)", path: path)
        }
        var output = [UInt8](repeating: 0, count: originalLength)
        let decoded = bytes.withUnsafeBytes { source in
            output.withUnsafeMutableBytes { target in
                LZ4_decompress_safe(source.baseAddress!.assumingMemoryBound(to: CChar.self),
                                    target.baseAddress!.assumingMemoryBound(to: CChar.self),
                                    Int32(bytes.count), Int32(originalLength))
            }
        }
        guard decoded == Int32(originalLength) else {
            throw StoreError(.corrupt, "compressed value does not decode (LZ4 returned \(decoded), expected \(originalLength) bytes)", path: path)
        }
        return output
    }
}
