import ArborTestSupport

// The data sets of the engine workloads. Everything is derived from row numbers and fixed seeds,
// so both engines store exactly the same bytes, and the generators cost both the same.

/// Rows of the main table: row `i` has the 8-byte big-endian key `i` and a 100-byte value whose
/// first 8 bytes repeat the key and whose other 92 are seeded pseudo-random bytes (incompressible,
/// so neither engine can win on compression here).
public enum MainRows {
    /// The value size.
    public static let valueSize = 100

    /// Writes row `row`'s key into `key` (8 bytes).
    @inline(__always)
    public static func storeKey(_ row: Int, into key: inout [UInt8]) {
        key.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(row).bigEndian, as: UInt64.self) }
    }

    /// The row number of an 8-byte big-endian key.
    @inline(__always)
    public static func row(ofKey key: UnsafeRawBufferPointer) -> Int {
        Int(UInt64(bigEndian: key.loadUnaligned(as: UInt64.self)))
    }

    /// Writes row `row`'s value into `value` (``valueSize`` bytes). A non-zero `salt` gives the
    /// row another value (for updates).
    @inline(__always)
    public static func storeValue(_ row: Int, salt: UInt64 = 0, into value: inout [UInt8]) {
        var random = SplitMix64(seed: UInt64(row) &* 0x9E37_79B9_7F4A_7C15 ^ salt ^ 0x5EED)
        value.withUnsafeMutableBytes { bytes in
            bytes.storeBytes(of: UInt64(row).bigEndian, as: UInt64.self)
            var offset = 8
            while offset + 8 <= valueSize {
                bytes.storeBytes(of: random.next(), toByteOffset: offset, as: UInt64.self)
                offset += 8
            }
            bytes.storeBytes(of: UInt32(truncatingIfNeeded: random.next()), toByteOffset: offset, as: UInt32.self)
        }
    }

    /// Whether `value` is a value of row `row` (right size, the key in its first 8 bytes).
    @inline(__always)
    public static func isValue(_ value: UnsafeRawBufferPointer, ofRow row: Int) -> Bool {
        value.count == valueSize && UInt64(bigEndian: value.loadUnaligned(as: UInt64.self)) == UInt64(row)
    }
}

/// Rows of the text-keyed table: row `i` has a 12-byte key of random-looking lower-case text
/// (`[a-z2-7]`, base-32 of a bijective scramble of `i`, so every key is distinct) and an 8-byte
/// value, the big-endian `i` — a name-to-id index over the main table.
public enum TextKeyRows {
    /// The key size in bytes.
    public static let keySize = 12
    /// The value size in bytes.
    public static let valueSize = 8

    private static let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567".utf8)
    private static let mask: UInt64 = (1 << 60) - 1

    /// A bijection of the 60-bit integers that looks random (odd multipliers and xor-shifts,
    /// each invertible modulo 2⁶⁰).
    @inline(__always)
    static func scramble(_ row: Int) -> UInt64 {
        var x = UInt64(row) & mask
        x = (x &* 0x9E37_79B9_7F4A_7C15) & mask
        x ^= x >> 29
        x = (x &* 0xBF58_476D_1CE4_E5B9) & mask
        x ^= x >> 32
        x = (x &* 0x94D0_49BB_1331_11EB) & mask
        x ^= x >> 29
        return x
    }

    /// Writes row `row`'s key into `key` (``keySize`` bytes).
    @inline(__always)
    public static func storeKey(_ row: Int, into key: inout [UInt8]) {
        let bits = scramble(row)
        key.withUnsafeMutableBufferPointer { bytes in
            for i in 0..<keySize {
                bytes[i] = alphabet[Int(bits >> UInt64(5 * (keySize - 1 - i)) & 31)]
            }
        }
    }

    /// Writes row `row`'s value into `value` (``valueSize`` bytes).
    @inline(__always)
    public static func storeValue(_ row: Int, into value: inout [UInt8]) {
        value.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(row).bigEndian, as: UInt64.self) }
    }

    /// Whether `value` is row `row`'s value.
    @inline(__always)
    public static func isValue(_ value: UnsafeRawBufferPointer, ofRow row: Int) -> Bool {
        value.count == valueSize && UInt64(bigEndian: value.loadUnaligned(as: UInt64.self)) == UInt64(row)
    }
}

/// Uniformly random row numbers in `0..<rows` from a seeded generator (the modulo bias is below
/// 10⁻¹² at these sizes).
public struct RandomRows {
    private var generator: SplitMix64
    public let rows: Int

    public init(rows: Int, seed: UInt64) {
        precondition(rows > 0, "no rows to pick from")
        generator = SplitMix64(seed: seed)
        self.rows = rows
    }

    @inline(__always)
    public mutating func next() -> Int { Int(generator.next() % UInt64(rows)) }
}

/// English-like text for the text-heavy data set: sentences of common English words drawn with
/// Zipf-like frequencies (the word of rank r with weight 1/(r+1), as in real text), capitalised,
/// with commas and full stops; each value 800–1200 bytes (about 1 KB).
///
/// A pool of distinct values is generated once, before anything is timed; row `i` stores
/// `values[poolIndex(i)]`. Each engine stores (and Arbor compresses) every row's value on its own,
/// so the pool's size does not change what either engine can save.
public struct TextPool: Sendable {
    /// The values, as UTF-8 bytes.
    public let values: [[UInt8]]

    /// The 256 words, most frequent first (frequency order of written English, roughly).
    static let words: [String] = """
        the of and to a in is it you that he was for on are with as I his they be at one have this \
        from or had by hot word but what some we can out other were all there when up use your how \
        said an each she which do their time if will way about many then them write would like so \
        these her long make thing see him two has look more day could go come did number sound no \
        most people my over know water than call first who may down side been now find any new work \
        part take get place made live where after back little only round man year came show every \
        good me give our under name very through just form sentence great think say help low line \
        differ turn cause much mean before move right boy old too same tell does set three want air \
        well also play small end put home read hand port large spell add even land here must big \
        high such follow act why ask men change went light kind off need house picture try us again \
        animal point mother world near build self earth father head stand own page should country \
        found answer school grow study still learn plant cover food sun four between state keep eye \
        never last let thought city tree cross farm hard start might story saw far sea draw left late \
        run while press close night real life few north open seem together next white children begin \
        got walk example ease paper group always music those both mark often letter until mile river \
        car feet care second book carry took science eat room friend began idea fish mountain stop \
        once base hear horse cut sure watch color face wood main enough plain girl usual young ready
        """.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)

    /// Generates `count` values from `seed`.
    public init(count: Int = 4096, seed: UInt64 = 0x7E47) {
        var random = SplitMix64(seed: seed)
        let words = Self.words.map { Array($0.utf8) }
        // Cumulative Zipf weights, for sampling by binary search.
        var cumulative: [Double] = []
        var total = 0.0
        for rank in words.indices {
            total += 1.0 / Double(rank + 1)
            cumulative.append(total)
        }
        func uniform() -> Double { Double(random.next() >> 11) / Double(1 << 53) }
        func word() -> [UInt8] {
            let target = uniform() * total
            var low = 0, high = cumulative.count - 1
            while low < high {
                let mid = (low + high) / 2
                if cumulative[mid] < target { low = mid + 1 } else { high = mid }
            }
            return words[low]
        }
        var values: [[UInt8]] = []
        values.reserveCapacity(count)
        for _ in 0..<count {
            let length = 800 + Int(random.next() % 401)
            var text: [UInt8] = []
            text.reserveCapacity(length + 100)
            while text.count < length {
                let sentenceWords = 5 + Int(random.next() % 14)
                for position in 0..<sentenceWords {
                    var next = word()
                    if position == 0, let first = next.first, first >= 0x61, first <= 0x7A {
                        next[0] = first - 0x20
                    }
                    if !text.isEmpty { text.append(0x20) }
                    text.append(contentsOf: next)
                    if position > 2, position < sentenceWords - 2, random.next() % 9 == 0 {
                        text.append(0x2C)  // ","
                    }
                }
                text.append(0x2E)  // "."
            }
            values.append(Array(text.prefix(length)))
        }
        self.values = values
    }

    /// The pool index row `row` stores (a scramble, so neighbouring rows differ).
    @inline(__always)
    public func poolIndex(_ row: Int) -> Int {
        Int((UInt64(row) &* 0x9E37_79B9_7F4A_7C15) >> 32) % values.count
    }

    /// The value row `row` stores.
    @inline(__always)
    public func value(_ row: Int) -> [UInt8] { values[poolIndex(row)] }

    /// The mean value length in bytes.
    public var meanLength: Double {
        Double(values.reduce(0) { $0 + $1.count }) / Double(max(values.count, 1))
    }
}
