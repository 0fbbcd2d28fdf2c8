import ArborTestSupport
import Testing
@testable import Arbor

/// The slot index behind `value(forKey:)` (a layout's), against a dictionary.
@Suite("Name index")
struct NameIndexTests {
    @Test("every name finds its slot and no other name finds one: short, long, non-ASCII and decomposed names, one to two hundred of them")
    func agreesWithDictionary() {
        var random = SplitMix64(seed: 0x4E41_4D45)
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCXYZ_0123456789éü名前") + ["e\u{301}"]
        func randomName() -> String {
            String((0..<(1 + Int(random.next() % 40))).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
        }
        for size in [1, 2, 7, 8, 9, 63, 200] {
            var names: [String] = []
            while names.count < size {
                let name = randomName()
                if !names.contains(name) { names.append(name) }
            }
            let index = PropertyLayout.named(names).index
            let model = Dictionary(uniqueKeysWithValues: names.enumerated().map { ($1, $0) })
            for name in names { #expect(index[name] == model[name]) }
            // Absent names, and a canonically equivalent spelling ("é" precomposed against "e" and
            // a combining accent), which String's == treats as equal, as the dictionary did.
            for _ in 0..<500 {
                let name = randomName()
                #expect(index[name] == model[name], "\(name)")
            }
            for name in names where name.contains("é") {
                let decomposed = name.replacingOccurrences(of: "é", with: "e\u{301}")
                #expect(index[decomposed] == model[decomposed], "\(decomposed)")
            }
        }
    }

    @Test("a non-ASCII key canonically equal to an ASCII name finds it, and the reverse (the Kelvin sign is K)")
    func canonicalEquivalenceAcrossASCII() {
        let ascii = PropertyLayout.named(["name", "K", "salary"]).index
        #expect(ascii["\u{212A}"] == 1 && ascii["K"] == 1 && ascii["k"] == nil)
        let mixed = PropertyLayout.named(["name", "\u{212A}", "salary"]).index
        #expect(mixed["K"] == 1 && mixed["\u{212A}"] == 1 && mixed["salary"] == 2 && mixed["age"] == nil)
    }
}
