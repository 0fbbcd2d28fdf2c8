import ArborStore
import Foundation
import PropertyBased
import Testing

/// The natural order the encoding must reproduce: component by component, by kind, then value.
func naturalOrder(_ a: [KeyComponent], _ b: [KeyComponent]) -> Int {
    for (x, y) in zip(a, b) {
        let order = naturalOrder(x, y)
        if order != 0 { return order }
    }
    return a.count - b.count
}

func rank(_ component: KeyComponent) -> Int {
    switch component {
    case .null: 0
    case .bool: 1
    case .int: 2
    case .double: 3
    case .date: 4
    case .string: 5
    case .data: 6
    case .uuid: 7
    }
}

func compareDoubles(_ x: Double, _ y: Double) -> Int {
    if x.isNaN || y.isNaN { return x.isNaN && y.isNaN ? 0 : (x.isNaN ? 1 : -1) }
    return x < y ? -1 : (x > y ? 1 : 0)
}

func compareBytes<C: Collection<UInt8>>(_ x: C, _ y: C) -> Int {
    x.lexicographicallyPrecedes(y) ? -1 : (y.lexicographicallyPrecedes(x) ? 1 : 0)
}

func naturalOrder(_ x: KeyComponent, _ y: KeyComponent) -> Int {
    if rank(x) != rank(y) { return rank(x) - rank(y) }
    switch (x, y) {
    case (.bool(let a), .bool(let b)): return a == b ? 0 : (a ? 1 : -1)
    case (.int(let a), .int(let b)): return a < b ? -1 : (a > b ? 1 : 0)
    case (.double(let a), .double(let b)): return compareDoubles(a, b)
    case (.date(let a), .date(let b)): return compareDoubles(a.timeIntervalSinceReferenceDate, b.timeIntervalSinceReferenceDate)
    case (.string(let a), .string(let b)): return compareBytes(Array(a.utf8), Array(b.utf8))
    case (.data(let a), .data(let b)): return compareBytes(a, b)
    case (.uuid(let a), .uuid(let b)):
        return compareBytes(withUnsafeBytes(of: a.uuid) { Array($0) }, withUnsafeBytes(of: b.uuid) { Array($0) })
    default: return 0
    }
}

let specialDoubles: [Double] = [-0.0, 0.0, .nan, -.nan, .infinity, -.infinity, .leastNonzeroMagnitude,
                                -.leastNonzeroMagnitude, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, 1, -1]

let componentGenerator = zip(Gen.int(in: 0...10), Gen.int64(in: -3...3), Gen.int64(), Gen.double(in: -1e6...1e6),
                             Gen.int(in: 0...3).array(of: 0...4))
    .map { kind, small, large, double, bytes -> KeyComponent in
        switch kind {
        case 0: return .null
        case 1: return .bool(small > 0)
        case 2: return .int(small)
        case 3: return .int(large)
        case 4: return .double(double)
        case 5: return .double(specialDoubles[Int(UInt64(bitPattern: large) % UInt64(specialDoubles.count))])
        case 6: return .date(Date(timeIntervalSinceReferenceDate: double))
        case 7: return .string(String(decoding: bytes.map { [0, 0x41, 0xC3, 0xA9][$0] }.filter { $0 != 0xC3 } , as: UTF8.self) + (small > 0 ? "é\u{0}x" : ""))
        case 8: return .data(bytes.map { UInt8($0 == 3 ? 0xFF : $0) })
        default:
            var uuid = UUID().uuid
            uuid.0 = UInt8(truncatingIfNeeded: small)
            return .uuid(UUID(uuid: uuid))
        }
    }

@Suite("Key encoding")
struct KeyEncodingTests {
    @Test("memcmp of encodings orders tuples as their natural order")
    func orderPreserved() async {
        await propertyCheck(count: 3000, input: componentGenerator.array(of: 1...3), componentGenerator.array(of: 1...3)) { a, b in
            let encodedOrder = compareBytes(KeyEncoding.encode(a), KeyEncoding.encode(b))
            #expect(encodedOrder.signum() == naturalOrder(a, b).signum(), "\(a) vs \(b)")
        }
    }

    @Test("decoding an encoding gives the tuple back")
    func roundTrip() async throws {
        await propertyCheck(count: 2000, input: componentGenerator.array(of: 0...4)) { tuple in
            let decoded = try? KeyEncoding.decode(KeyEncoding.encode(tuple))
            #expect(decoded.map { naturalOrder($0, tuple) } == 0, "\(tuple)")
        }
    }

    @Test("−0 equals +0, every NaN is one value above +∞, and a shorter tuple sorts first")
    func edgeCases() {
        #expect(KeyEncoding.encode([.double(-0.0)]) == KeyEncoding.encode([.double(0.0)]))
        #expect(KeyEncoding.encode([.double(.nan)]) == KeyEncoding.encode([.double(-.nan)]))
        #expect(compareBytes(KeyEncoding.encode([.double(.infinity)]), KeyEncoding.encode([.double(.nan)])) < 0)
        #expect(compareBytes(KeyEncoding.encode([.string("ab")]), KeyEncoding.encode([.string("ab"), .int(0)])) < 0)
        #expect(compareBytes(KeyEncoding.encode([.string("ab")]), KeyEncoding.encode([.string("ab\u{0}")])) < 0)
        #expect(compareBytes(KeyEncoding.encode([.null]), KeyEncoding.encode([.bool(false)])) < 0)
    }

    @Test("the in-place readers agree with the generic ones: component ends and byte order")
    func inPlaceReaders() async {
        await propertyCheck(count: 2000, input: componentGenerator.array(of: 1...4), componentGenerator.array(of: 1...4)) { a, b in
            let x = KeyEncoding.encode(a), y = KeyEncoding.encode(b)
            x.withUnsafeBytes { raw in
                var position = 0
                while position < x.count {
                    let end = KeyEncoding.componentEnd(raw, from: position)
                    #expect(end == KeyEncoding.componentEnd(x, from: position), "\(a) at \(position)")
                    guard let end else { break }
                    position = end
                }
                #expect(position == x.count, "\(a)")
                // Every truncation is a malformed component somewhere, never a read past the end.
                for cut in 0..<x.count {
                    var at = 0
                    let short = UnsafeRawBufferPointer(rebasing: raw[0..<cut])
                    while let end = KeyEncoding.componentEnd(short, from: at) { at = end }
                    #expect(at <= cut)
                }
                y.withUnsafeBytes { other in
                    #expect(KeyEncoding.order(raw, other).signum() == compareBytes(x, y).signum(), "\(a) vs \(b)")
                }
            }
        }
    }

    @Test("KeyReader reads each component in place, skips as componentEnd does, and refuses truncations")
    func keyReader() async {
        await propertyCheck(count: 1500, input: componentGenerator.array(of: 1...4)) { tuple in
            let bytes = KeyEncoding.encode(tuple)
            bytes.withUnsafeBytes { raw in
                var reader = KeyReader(raw)
                var skipper = KeyReader(raw)
                for component in tuple {
                    let read = try? reader.next()
                    #expect(read.map { naturalOrder([$0], [component]) } == 0, "\(tuple)")
                    let before = skipper.position
                    #expect((try? skipper.skip()) != nil)
                    #expect(skipper.position == KeyEncoding.componentEnd(raw, from: before))
                    #expect(reader.position == skipper.position)
                }
                #expect(reader.isAtEnd && (try? reader.next()) == .some(nil))
                #expect(throws: StoreError.self) { try skipper.skip() }
                // A cut inside the last component is an error, never a read past the end.
                let lastStart = KeyEncoding.encode(Array(tuple.dropLast())).count
                for cut in (lastStart + 1)..<bytes.count {
                    var short = KeyReader(UnsafeRawBufferPointer(rebasing: raw[0..<cut]))
                    #expect(throws: StoreError.self) { while try short.next() != nil {} }
                }
            }
        }
    }

    @Test("an entry's last integer is read in place, and a table's key is encoded on the stack as encode does")
    func inPlaceKeys() async {
        await propertyCheck(count: 1500, input: componentGenerator.array(of: 0...3), Gen.int64()) { tuple, key in
            let bytes = KeyEncoding.encode(tuple + [.int(key)])
            bytes.withUnsafeBytes { raw in
                #expect(KeyEncoding.lastInteger(raw) == key, "\(tuple)")
            }
            // Cut anywhere, the bytes give what decoding them whole gives: an integer only when
            // they still end with a whole one, never a read past the end.
            for cut in 0..<bytes.count {
                let short = Array(bytes[0..<cut])
                var expected: Int64?
                if case .int(let last)? = (try? KeyEncoding.decode(short))?.last { expected = last }
                short.withUnsafeBytes { #expect(KeyEncoding.lastInteger($0) == expected, "\(tuple) cut at \(cut)") }
            }
            KeyEncoding.withEncodedInteger(key) { #expect(Array($0) == KeyEncoding.encode([.int(key)])) }
        }
        for tuple: [KeyComponent] in [[], [.string("a")], [.int(1), .null], [.int(1), .string("x")]] {
            KeyEncoding.encode(tuple).withUnsafeBytes { #expect(KeyEncoding.lastInteger($0) == nil, "\(tuple)") }
        }
    }

    @Test("compact integers: as few bytes as the value needs, the same order as the standard form, read by every reader")
    func compactIntegers() async throws {
        // Lengths at the boundaries: 0 has no payload, 2^24 - 1 three bytes, Int64.max eight.
        for (value, length) in [(Int64(0), 1), (1, 2), (255, 2), (256, 3), (65_535, 3), (1 << 24 - 1, 4), (1 << 24, 5), (.max, 9)] {
            #expect(KeyEncoding.encode([.int(value)], compactIntegers: true).count == length, "\(value)")
        }
        // Negatives keep the standard form.
        #expect(KeyEncoding.encode([.int(-1)], compactIntegers: true) == KeyEncoding.encode([.int(-1)]))
        let interesting: [Int64] = [.min, -65_536, -1, 0, 1, 255, 256, 65_535, 65_536, 1 << 24, 1 << 32 - 1, 1 << 56, .max]
        await propertyCheck(count: 1500, input: componentGenerator.array(of: 0...3), componentGenerator.array(of: 0...3),
                            Gen.int(in: 0...12), Gen.int64()) { a, b, pick, random in
            let x = a + [.int(interesting[pick])], y = b + [.int(random)]
            let ex = KeyEncoding.encode(x, compactIntegers: true), ey = KeyEncoding.encode(y, compactIntegers: true)
            // Byte order is still the natural order (within the compact form).
            #expect(compareBytes(ex, ey).signum() == naturalOrder(x, y).signum(), "\(x) vs \(y)")
            // Decoding, the in-place readers and the component walk agree with the tuple.
            #expect((try? KeyEncoding.decode(ex)) == x)
            ex.withUnsafeBytes { raw in
                #expect(KeyEncoding.lastInteger(raw) == interesting[pick])
                var start = 0, count = 0
                while let end = KeyEncoding.componentEnd(raw, from: start) { start = end; count += 1 }
                #expect(start == ex.count && count == x.count)
                let last = KeyEncoding.lastComponentStart(raw)
                #expect(Array(ex[last...]) == KeyEncoding.encode([.int(interesting[pick])], compactIntegers: true))
                #expect(KeyEncoding.componentEnd(ex, from: 0) == KeyEncoding.componentEnd(raw, from: 0))
            }
            KeyEncoding.withEncodedInteger(random, compact: true) {
                #expect(Array($0) == KeyEncoding.encode([.int(random)], compactIntegers: true))
                #expect(KeyEncoding.integer(exactly: $0) == random)
            }
            KeyEncoding.encode([.int(random), .string("x")], compactIntegers: true).withUnsafeBytes {
                #expect(KeyEncoding.firstInteger($0) == random)
            }
        }
        // A compact payload past Int64.max (eight bytes, top bit set) is damage: refused, never
        // wrapped to a negative key.
        let damaged: [UInt8] = [KeyEncoding.Tag.lastCompactInteger, 0x80, 0, 0, 0, 0, 0, 0, 0]
        #expect(throws: StoreError.self) { try KeyEncoding.decode(damaged) }
        damaged.withUnsafeBytes { #expect(KeyEncoding.integer(exactly: $0) == nil) }
        // A truncated payload is refused by the walk and the decoder alike.
        let truncated: [UInt8] = [KeyEncoding.Tag.compactInteger + 3, 1, 2]
        #expect(throws: StoreError.self) { try KeyEncoding.decode(truncated) }
        truncated.withUnsafeBytes { #expect(KeyEncoding.componentEnd($0, from: 0) == nil) }
    }

    @Test("strings are read only when they are valid UTF-8 — including ill-formed bytes whose repair is as long")
    func stringValidation() throws {
        func read(_ body: [UInt8]) throws -> KeyComponent? {
            let bytes = [KeyEncoding.Tag.string] + body + [0, 0]
            return try bytes.withUnsafeBytes { raw in
                var reader = KeyReader(raw)
                return try reader.next()
            }
        }
        for text in ["", "Person 1", "é", "😀 and ü", "\u{FFFD}", String(repeating: "x", count: 40)] {
            #expect(try read(Array(text.utf8)) == .string(text))
        }
        // A truncated four-byte sequence (F0 9F 98) is repaired to one U+FFFD, three bytes: the
        // repaired text has the input's length, so only comparing the bytes catches it.
        let illFormed: [[UInt8]] = [[0xFF], [0xC3], [0x61, 0xC3], [0xF0, 0x9F, 0x98, 0x41], [0xED, 0xA0, 0x80],
                                    [0xE2, 0x82], [0xC0, 0xAF], [0xEF, 0xBF, 0x41],
                                    // ASCII is checked eight bytes at a time: a bad byte in the
                                    // first word, in a later one, and in the tail after words.
                                    Array("Person ".utf8) + [0xFF], Array("Employee 12345".utf8) + [0xC3],
                                    Array("Employee".utf8) + [0xF0, 0x9F, 0x98] + Array("12345678".utf8)]
        for body in illFormed {
            #expect(throws: StoreError.self, "\(body)") { try read(body) }
        }
    }

    @Test("malformed encodings are typed errors")
    func malformed() throws {
        for bytes: [UInt8] in [[0x99], [0x20, 1, 2], [0x40, 0x61], [0x40, 0x00, 0x07], [0x40, 0xFF, 0xFE, 0, 0]] {
            #expect(throws: StoreError.self) { try KeyEncoding.decode(bytes) }
        }
        // One component read alone: anything but exactly one valid component is refused.
        for bytes: [UInt8] in [[], [0x40, 0x61, 0x62], [0x40, 0x61, 0x00], [0x10, 0x00], [0x20, 1, 2]]
            + [KeyEncoding.encode([.int(1), .int(2)]), KeyEncoding.encode([.string("a"), .null])] {
            #expect(throws: StoreError.self) { try KeyEncoding.decodeComponent(bytes[...]) }
        }
        for component: KeyComponent in [.null, .bool(true), .bool(false), .int(-5), .string("ab"), .string("a\u{0}b"), .double(1.5)] {
            #expect(try KeyEncoding.decodeComponent(KeyEncoding.encode([component])[...]) == component)
        }
    }
}
