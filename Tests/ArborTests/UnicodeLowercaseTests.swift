import Foundation
import Testing
@testable import Arbor

/// The `[c]` fold of non-ASCII text on bytes (``UnicodeLowercase``) is Swift's `lowercased()`,
/// scalar for scalar, and a scan's `[c]` tests over such text agree with the evaluator.
@Suite("Lowercase on UTF-8 bytes")
struct UnicodeLowercaseTests {
    /// `text`'s UTF-8 lowered through the table (nil: not well-formed).
    static func lowered(_ bytes: [UInt8]) -> [UInt8]? {
        bytes.withUnsafeBytes { text in
            let output = UnsafeMutableRawBufferPointer.allocate(byteCount: UnicodeLowercase.capacity(for: text.count) + 1, alignment: 8)
            defer { output.deallocate() }
            var (index, written) = (0, 0)
            while index < text.count {
                if text[index] < 0x80 {
                    output[written] = text[index] &- 0x41 < 26 ? text[index] | 0x20 : text[index]
                    (index, written) = (index + 1, written + 1)
                    continue
                }
                guard let step = UnicodeLowercase.lower(text, at: index, into: output, at: written, table: .shared) else { return nil }
                (index, written) = (index + step.read, written + step.written)
            }
            return Array(output[0..<written])
        }
    }

    @Test("every scalar from U+0080 to U+10FFFF lowers to what lowercased() gives, alone and between ASCII letters")
    func everyScalar() {
        var mismatches: [String] = []
        for value in UInt32(0x80)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let text = "A\(Character(scalar))z"
            if Self.lowered(Array(text.utf8)) != Array(text.lowercased().utf8) { mismatches.append(String(value, radix: 16)) }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(10))")
    }

    @Test("bytes that are not well-formed UTF-8 are refused (the evaluator decides those rows)", arguments: [
        [0xC0, 0x80], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xC3], [0x80], [0xFF],
    ] as [[UInt8]])
    func malformed(bytes: [UInt8]) {
        #expect(Self.lowered(bytes) == nil)
    }

    @Test("CONTAINS[c], BEGINSWITH[c], ==[c] and LIKE[c] over non-ASCII text in a scan agree with the evaluator")
    func scansAgree() throws {
        let names = ["Straße", "STRASSE", "Zoë", "ZOË", "Ǆemal", "ǅemal", "İpek", "ipek", "ΣΟΦΊΑ", "σοφία", "Ölçü", "Ångström", "ÅNGSTRÖM",
                     "Kelvin K", "ﬁnance", "Ⅻ Roman", "𐐀𐐨 Deseret", "Niño", "NIÑO", "Ça va", "çA VA"]
        let stack = try Stack(model: try ManagedObjectModel { Entity("Word") { Attribute("text", .string) } })
        let context = stack.context()
        for name in names { _ = try stack.insert("Word", in: context, ["text": name]) }
        try context.save()
        let reader = stack.context()
        let all = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Word"))
        // `?` is one scalar: `Zo?` matches `Zoë`, on bytes too.
        for pattern in ["zo?", "?oë", "str??e", "ni?o", "??", "σοφ?α"] {
            let request = try FetchRequest<ManagedObjectID>(entityName: "Word", format: "text LIKE[c] %@", pattern)
            let predicate = try #require(request.predicate)
            #expect(Set(try reader.fetch(request)) == Set(try all.filter { try predicate.evaluate(with: $0) }.map(\.objectID)), "LIKE[c] \(pattern)")
        }
        for needle in ["ß", "SS", "ë", "Ǆ", "ǆ", "i̇", "İ", "σοφ", "ΣΟΦ", "ölç", "å", "k", "ﬁ", "ⅻ", "𐐨", "ñ", "Ç"] {
            for format in ["text CONTAINS[c] %@", "text BEGINSWITH[c] %@", "text ==[c] %@", "text LIKE[c] %@"] {
                let argument = format.contains("LIKE") ? "*\(needle)*" : needle
                let request = try FetchRequest<ManagedObjectID>(entityName: "Word", format: format, argument)
                let predicate = try #require(request.predicate)
                let expected = Set(try all.filter { try predicate.evaluate(with: $0) }.map(\.objectID))
                #expect(Set(try reader.fetch(request)) == expected, "\(format) \(argument)")
            }
        }
    }
}
