import ArborStore
import Foundation

// Safety: `scratch` is the filter's own buffer, grown (freed and allocated again) only here, and a
// folded view into it is used before the next fold; row bytes are lent for the call; a filter
// serves one scan, on one thread.

/// Folded string tests (`[c]`, `[d]`, `[cd]`) and `LIKE` on a row's bytes: the ASCII fast path,
/// the evaluator's fold for other text (remembered), and the byte-level `LIKE` matcher (the
/// type's notes in ScanFilter.swift say when a row is decided here).
extension ScanFilter {
    /// A string test on the folded text (`[c]`, `[d]`, `[cd]`) or a `LIKE`, given the string's
    /// escaped UTF-8 (without its component's tag and terminator): the constants are raw folded
    /// UTF-8. Nil when the row's string leaves the fast path (see the type's notes).
    func foldedTest(_ node: Node, _ escaped: UnsafeRawBufferPointer) -> Bool? {
        // Long: one string test on one row's bytes, in the scan's loop: the text is folded (or the
        // ASCII path decides) once, then one case per kind of test reads the folded bytes.
        var text = escaped
        // How many leading bytes are ASCII (the fold of those is known).
        var asciiPrefix = text.count
        switch node.folding {
        case .none:
            break
        case .asciiOnly:
            asciiPrefix = Self.asciiPrefix(text)
        case .lowercased:
            (text, asciiPrefix) = lowercase(text, unicode: node.options == .caseInsensitive)
            // `?` counts scalars: on bytes, only in an ASCII string.
            if node.kind == .like && node.likeAny && asciiPrefix == text.count && !Self.isASCII(escaped) { return nil }
        }
        if asciiPrefix < text.count {
            // A string with other bytes: folding is the evaluator's, except where an ASCII
            // constant settles it without them. Folding maps ASCII to ASCII scalar by scalar and
            // never changes a scalar because of the ones after it (a combining mark after an
            // ASCII letter is dropped or kept, the letter stays), so a prefix within the ASCII
            // start is the fold's prefix; and an ASCII occurrence in the bytes (UTF-8 keeps ASCII
            // bytes for ASCII scalars only) is one in the fold. Not finding it decides nothing.
            if node.asciiConstant {
                switch node.kind {
                case .beginsWith:
                    let pattern = constant(node, 0)
                    if pattern.count <= asciiPrefix {
                        return pattern.isEmpty || memcmp(text.baseAddress!, pattern.baseAddress!, pattern.count) == 0
                    }
                case .contains:
                    let pattern = constant(node, 0)
                    if pattern.isEmpty || (pattern.count <= text.count && Self.contains(text, pattern)) { return true }
                default:
                    break
                }
            }
            // Otherwise the string is folded as the evaluator folds it (remembered: names
            // repeat) and the test runs on the folded bytes. `?` counts scalars: not on bytes.
            guard !(node.kind == .like && node.likeAny),
                  let folded = slowFold(escaped, node.options) else { return nil }
            text = folded
        }
        switch node.kind {
        case .like:
            return Self.like(text, constant(node, 0))
        case .compare, .between, .oneOf:
            func order(_ constant: UnsafeRawBufferPointer) -> Int {
                let common = min(text.count, constant.count)
                let c = common == 0 ? 0 : memcmp(text.baseAddress!, constant.baseAddress!, common)
                return c != 0 ? (c < 0 ? -1 : 1) : (text.count == constant.count ? 0 : (text.count < constant.count ? -1 : 1))
            }
            switch node.kind {
            case .between: return order(constant(node, 0)) >= 0 && order(constant(node, 1)) <= 0
            case .oneOf:
                for index in 0..<node.count where order(constant(node, index)) == 0 { return true }
                return false
            default:
                return (Self.relation(of: node.op) ?? .greaterOrEqual).admits(order(constant(node, 0)), 0)
            }
        default:
            let pattern = constant(node, 0)
            if pattern.count > text.count { return false }
            if pattern.isEmpty { return true }
            switch node.kind {
            case .beginsWith: return memcmp(text.baseAddress!, pattern.baseAddress!, pattern.count) == 0
            case .endsWith: return memcmp(text.baseAddress! + (text.count - pattern.count), pattern.baseAddress!, pattern.count) == 0
            default: return Self.contains(text, pattern)
            }
        }
    }

    /// Whether `pattern` (not empty, not longer) occurs in `text`: `memchr` for its first
    /// byte, then `memcmp` (`memmem` is a GNU extension).
    @inline(__always)
    static func contains(_ text: UnsafeRawBufferPointer, _ pattern: UnsafeRawBufferPointer) -> Bool {
        let base = text.baseAddress!, first = Int32(pattern[0])
        let lastStart = text.count - pattern.count
        var start = 0
        while start <= lastStart {
            guard let hit = memchr(base + start, first, lastStart - start + 1) else { return false }
            let at = base.distance(to: UnsafeRawPointer(hit))
            if memcmp(base + at, pattern.baseAddress!, pattern.count) == 0 { return true }
            start = at + 1
        }
        return false
    }

    /// The high bit of each byte of a word.
    private static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// The most strings ``slowFold(_:_:)`` remembers (then it folds without remembering).
    static let foldCacheLimit = 4096

    /// The evaluator's fold of a string's escaped bytes (`options` as the comparison's), as
    /// raw UTF-8 in a buffer of the filter's; nil for a string with a zero byte (escaped), left
    /// to the evaluator. Folds are remembered by the string's bytes, up to ``foldCacheLimit``.
    private func slowFold(_ text: UnsafeRawBufferPointer, _ options: ComparisonPredicate.Options) -> UnsafeRawBufferPointer? {
        guard memchr(text.baseAddress!, 0, text.count) == nil else { return nil }
        var key = [UInt8](repeating: options.rawValue, count: 1)
        key.append(contentsOf: text)
        let folded: [UInt8]
        if let known = foldCache[key] {
            folded = known
        } else {
            folded = Array(PredicateEvaluator.fold(String(decoding: text, as: UTF8.self), options).utf8)
            if foldCache.count < Self.foldCacheLimit { foldCache[key] = folded }
        }
        if folded.count > scratch.count {
            scratch.deallocate()
            scratch = .allocate(byteCount: max(folded.count, scratch.count * 2), alignment: 8)
        }
        folded.withUnsafeBytes { scratch.copyMemory(from: $0) }
        return UnsafeRawBufferPointer(rebasing: scratch[0..<folded.count])
    }

    /// The number of leading ASCII bytes of `text` (eight at a time).
    @inline(__always)
    static func asciiPrefix(_ text: UnsafeRawBufferPointer) -> Int {
        var index = 0
        while index + 8 <= text.count, text.loadUnaligned(fromByteOffset: index, as: UInt64.self) & highBits == 0 { index += 8 }
        while index < text.count, text[index] < 0x80 { index += 1 }
        return index
    }

    /// Whether every byte of `text` is ASCII (eight at a time).
    @inline(__always)
    static func isASCII(_ text: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        while index + 8 <= text.count {
            if text.loadUnaligned(fromByteOffset: index, as: UInt64.self) & highBits != 0 { return false }
            index += 8
        }
        while index < text.count {
            if text[index] >= 0x80 { return false }
            index += 1
        }
        return true
    }

    /// The ASCII lowercase of eight ASCII bytes: `A`…`Z` gain 0x20, the rest stay (a byte is
    /// upper case when adding `0x80 - 'A'` sets its high bit and adding `0x7F - 'Z'` does not;
    /// no byte carries into the next, as every byte is below 0x80).
    @inline(__always)
    static func lowercaseWord(_ word: UInt64) -> UInt64 {
        let atLeastA = word &+ 0x3F3F_3F3F_3F3F_3F3F  // 0x80 - 0x41
        let aboveZ = word &+ 0x2525_2525_2525_2525    // 0x7F - 0x5A
        return word | ((atLeastA & ~aboveZ & highBits) >> 2)
    }

    /// `text` in the scratch buffer with its ASCII upper-case letters lowered, and the number of
    /// its leading bytes that are folded: all of it is the string's `[c]` fold when that is its
    /// length. With `unicode` (a `[c]` test), every other scalar is lowered too
    /// (``UnicodeLowercase``), so the whole string is its fold unless its bytes are not
    /// well-formed UTF-8; without (`[cd]`, whose diacritics the evaluator folds), other bytes are
    /// kept and end the folded prefix.
    @inline(__always)
    private func lowercase(_ text: UnsafeRawBufferPointer, unicode: Bool) -> (UnsafeRawBufferPointer, asciiPrefix: Int) {
        let needed = unicode ? UnicodeLowercase.capacity(for: text.count) : text.count
        if needed > scratch.count {
            scratch.deallocate()
            scratch = .allocate(byteCount: max(needed, scratch.count * 2), alignment: 8)
        }
        var index = 0
        while index + 8 <= text.count {
            let word = text.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            if word & Self.highBits != 0 { break }
            scratch.storeBytes(of: Self.lowercaseWord(word), toByteOffset: index, as: UInt64.self)
            index += 8
        }
        var written = index
        var folded = text.count
        while index < text.count {
            let byte = text[index]
            if byte < 0x80 {
                scratch[written] = byte &- 0x41 < 26 ? byte | 0x20 : byte
                index += 1
                written += 1
            } else if unicode, folded == text.count,
                      let step = UnicodeLowercase.lower(text, at: index, into: scratch, at: written, table: UnicodeLowercase.Table.shared) {
                index += step.read
                written += step.written
            } else {
                // Kept as it is (and the string left to the evaluator's fold), from here on.
                if folded == text.count { folded = written }
                scratch[written] = byte
                index += 1
                written += 1
            }
        }
        return (UnsafeRawBufferPointer(rebasing: scratch[0..<written]), folded == text.count ? written : folded)
    }

    /// `LIKE` on bytes: the evaluator's wildcard matching (one backtrack point, linear for each
    /// star) over a pattern compiled to bytes (`FF` for `*`, `FE` for `?`, escapes resolved).
    static func like(_ text: UnsafeRawBufferPointer, _ pattern: UnsafeRawBufferPointer) -> Bool {
        var t = 0, p = 0, starP = -1, starT = 0
        while t < text.count {
            if p < pattern.count {
                let byte = pattern[p]
                if byte == likeStar {
                    starP = p
                    starT = t
                    p += 1
                    continue
                }
                if byte == likeAny || byte == text[t] {
                    t += 1
                    p += 1
                    continue
                }
            }
            guard starP >= 0 else { return false }
            p = starP + 1
            starT += 1
            t = starT
        }
        while p < pattern.count, pattern[p] == likeStar { p += 1 }
        return p == pattern.count
    }

    /// The bytes a `LIKE` pattern (already folded) compiles to, and whether it has a `?`; nil
    /// for a pattern with a zero byte. The escapes are the evaluator's: a backslash makes the
    /// next scalar literal.
    static func likePattern(_ pattern: String) -> (bytes: [UInt8], hasAny: Bool)? {
        let scalars = Array(pattern.unicodeScalars)
        var bytes: [UInt8] = [], hasAny = false, index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar == "\\", index + 1 < scalars.count {
                bytes += Array(String(scalars[index + 1]).utf8)
                index += 2
                continue
            }
            switch scalar {
            case "*": bytes.append(likeStar)
            case "?":
                bytes.append(likeAny)
                hasAny = true
            default: bytes += Array(String(scalar).utf8)
            }
            index += 1
        }
        return bytes.contains(0) ? nil : (bytes, hasAny)
    }
}
