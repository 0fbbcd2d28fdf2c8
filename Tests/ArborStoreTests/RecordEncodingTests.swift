import ArborStore
import Foundation
import Testing

/// The record format's readers (docs/row-format.md): serial types' payload sizes, integers read
/// with one load or byte by byte near a buffer's end, one-byte and longer varints.
@Suite("Record encoding")
struct RecordEncodingTests {
    @Test("every serial type's payload size, as the format defines it")
    func payloadSizes() {
        let small: [Int?] = [0, 1, 2, 3, 4, 6, 8, 8, 0, 0, 16, nil]
        for type in 0..<12 { #expect(RecordEncoding.payloadSize(UInt64(type)) == small[type], "type \(type)") }
        for type in UInt64(12)..<400 { #expect(RecordEncoding.payloadSize(type) == Int((type - 12) / 2), "type \(type)") }
        #expect(RecordEncoding.payloadSize(UInt64(Int32.max)) == nil)
        #expect(RecordEncoding.payloadSize(.max) == nil)
    }

    @Test("integers of every size, sign and place, against a byte-by-byte reference")
    func integers() {
        var random = SystemRandomNumberGenerator()
        let sizes: [(type: UInt64, size: Int)] = [(1, 1), (2, 2), (3, 3), (4, 4), (5, 6), (6, 8)]
        for _ in 0..<2000 {
            let (type, size) = sizes[Int.random(in: 0..<sizes.count, using: &random)]
            let payload = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
            // The reference: big-endian two's complement, sign from the first byte.
            var expected = Int64(Int8(bitPattern: payload[0]))
            for byte in payload.dropFirst() { expected = expected << 8 | Int64(byte) }
            // With under eight bytes from the payload to the buffer's end (read byte by byte) and
            // with eight or more (one load), depending on the size, the lead and what trails.
            for trailing in [0, 1, 7, 8, 20] {
                let lead = Int.random(in: 0..<5, using: &random)
                let bytes = (0..<lead).map { _ in UInt8(0xEE) } + payload + (0..<trailing).map { _ in UInt8.random(in: 0...255, using: &random) }
                let value = bytes.withUnsafeBytes { RecordEncoding.integer(type, $0, at: lead) }
                #expect(value == expected, "type \(type) payload \(payload) trailing \(trailing)")
            }
        }
        [UInt8](repeating: 0xFF, count: 16).withUnsafeBytes { bytes in
            #expect(RecordEncoding.integer(8, bytes, at: 3) == 0)
            #expect(RecordEncoding.integer(9, bytes, at: 3) == 1)
            for type: UInt64 in [0, 7, 10, 11, 12, 13, 200] { #expect(RecordEncoding.integer(type, bytes, at: 0) == nil, "type \(type)") }
            #expect(RecordEncoding.integer(6, bytes, at: 8) == -1)
        }
    }

    @Test("varints of one byte and more, and ones cut short")
    func varints() {
        for value: UInt64 in [0, 1, 0x7F, 0x80, 0x3FFF, 0x4000, 1 << 35, .max] {
            let encoded = RecordEncoding.varint(value)
            (encoded + [0x01]).withUnsafeBytes { bytes in
                var position = 0
                #expect(RecordEncoding.readVarint(bytes, &position) == value)
                #expect(position == encoded.count)
            }
            if encoded.count > 1 {
                encoded.dropLast().withUnsafeBytes { bytes in
                    var position = 0
                    #expect(RecordEncoding.readVarint(bytes, &position) == nil, "\(value) cut short")
                }
            }
        }
        [UInt8]([0x05]).withUnsafeBytes { bytes in
            var position = 1
            #expect(RecordEncoding.readVarint(bytes, &position) == nil)
            #expect(position == 1)
        }
    }
}
