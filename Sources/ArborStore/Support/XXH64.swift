// Safety: Hashes bytes lent for the call, reading within their count.

/// XXH64, the 64-bit xxHash function, implemented from its published specification.
///
/// The engine checksums every page and every journal record with it. Why XXH64 and not CRC32C:
/// Swift has no portable access to the SSE4.2 CRC instruction, and a table-driven CRC32C takes a
/// table lookup per byte, while XXH64 in plain Swift processes 8 bytes per multiply (see
/// `docs/file-format.md`, "Checksums"). Its 64 bits also make an accidental match on a torn page
/// vanishingly unlikely.
package enum XXH64 {
    static let prime1: UInt64 = 0x9E37_79B1_85EB_CA87
    static let prime2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    static let prime3: UInt64 = 0x1656_67B1_9E37_79F9
    static let prime4: UInt64 = 0x85EB_CA77_C2B2_AE63
    static let prime5: UInt64 = 0x27D4_EB2F_1656_67C5

    @inline(__always)
    static func round(_ acc: UInt64, _ input: UInt64) -> UInt64 {
        var acc = acc &+ input &* prime2
        acc = (acc << 31) | (acc >> 33)
        return acc &* prime1
    }

    @inline(__always)
    static func mergeRound(_ acc: UInt64, _ value: UInt64) -> UInt64 {
        let value = round(0, value)
        return (acc ^ value) &* prime1 &+ prime4
    }

    @inline(__always)
    static func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 { (x << r) | (x >> (64 - r)) }

    /// The XXH64 hash of `bytes` with `seed`.
    package static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        let count = bytes.count
        var offset = 0
        var h: UInt64
        if count >= 32 {
            var v1 = seed &+ prime1 &+ prime2
            var v2 = seed &+ prime2
            var v3 = seed
            var v4 = seed &- prime1
            let limit = count - 32
            while offset <= limit {
                v1 = round(v1, UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
                v2 = round(v2, UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)))
                v3 = round(v3, UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self)))
                v4 = round(v4, UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self)))
                offset += 32
            }
            h = rotl(v1, 1) &+ rotl(v2, 7) &+ rotl(v3, 12) &+ rotl(v4, 18)
            h = mergeRound(h, v1)
            h = mergeRound(h, v2)
            h = mergeRound(h, v3)
            h = mergeRound(h, v4)
        } else {
            h = seed &+ prime5
        }
        h = h &+ UInt64(count)
        while offset + 8 <= count {
            let k = round(0, UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
            h ^= k
            h = rotl(h, 27) &* prime1 &+ prime4
            offset += 8
        }
        if offset + 4 <= count {
            h ^= UInt64(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))) &* prime1
            h = rotl(h, 23) &* prime2 &+ prime3
            offset += 4
        }
        while offset < count {
            h ^= UInt64(bytes[offset]) &* prime5
            h = rotl(h, 11) &* prime1
            offset += 1
        }
        h ^= h >> 33
        h = h &* prime2
        h ^= h >> 29
        h = h &* prime3
        h ^= h >> 32
        return h
    }

    /// The XXH64 hash of an array of bytes.
    package static func hash(_ bytes: [UInt8], seed: UInt64 = 0) -> UInt64 {
        bytes.withUnsafeBytes { hash($0, seed: seed) }
    }
}
