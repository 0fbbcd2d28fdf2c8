import ArborStore
import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// Case- and diacritic-insensitive search (issue 26, item 4): `[c]`, `[d]`, `[cd]` and `LIKE`
/// decided on a row's bytes with an ASCII fast path (no row decoded), a folded index serving
/// `[cd]`, and `[c]`/`[d]` alone and `LIKE` with a leading literal narrowing by an index. The
/// random agreement with in-memory evaluation is `FetchPropertyTests`; these pin the mechanisms.
@Suite("Folded search")
struct FoldedSearchTests {
    static func model(plainIndex: Bool, foldedIndex: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Person") {
                Attribute("serial", .integer64)
                Attribute("lastName", .string)
                if plainIndex { Indexed("lastName") }
                if foldedIndex { Indexed("lastName", caseInsensitive: true) }
            }
        }
    }

    static let names: [String?] = [
        "Smith", "SMITH", "smith", "Smíth", "Smithsoñ", "SMITHé", "smi\u{301}th", "sm\u{212A}", "Goldsmith", "O'Brien", "obrien", "Østergaard", "Ostergaard",
        "\u{212A}elvin", "kelvin", "\u{130}nce", "ince", "\u{212A}im", "KIM", "\u{130}", "Straße", "STRASSE", "a*b", "a\\b", "x?y", "", nil, "nul\u{0}l", "Zoë", "ZOE",
    ]

    @Test("the substring search of the scan's CONTAINS finds what a search position by position finds: patterns of every length in texts short and long, at the start, the end, overlapping, and absent")
    func substringSearch() throws {
        var random = SplitMix64(seed: 0xC0A7_0001)
        func naive(_ text: [UInt8], _ pattern: [UInt8]) -> Bool {
            guard pattern.count <= text.count else { return false }
            return (0...(text.count - pattern.count)).contains { Array(text[$0..<($0 + pattern.count)]) == pattern }
        }
        var found = 0, cases = 0
        for _ in 0..<20_000 {
            // A small alphabet makes partial matches and repeats common.
            let length = Int(random.next() % 2 == 0 ? random.next() % 40 : random.next() % 300)
            let text = (0..<length).map { _ in UInt8(97 + random.next() % 3) }
            let patternLength = 1 + Int(random.next() % 9)
            var pattern = (0..<patternLength).map { _ in UInt8(97 + random.next() % 3) }
            if !text.isEmpty && random.next() % 2 == 0 && patternLength <= text.count {
                // Taken from the text: at its start, its end or anywhere.
                let start = [0, text.count - patternLength, Int(random.next() % UInt64(text.count - patternLength + 1))][Int(random.next() % 3)]
                pattern = Array(text[start..<(start + patternLength)])
            }
            guard pattern.count <= text.count else { continue }
            let expected = naive(text, pattern)
            let answer = text.withUnsafeBytes { t in pattern.withUnsafeBytes { ScanFilter.contains(t, $0) } }
            #expect(answer == expected, "\(text) \(pattern)")
            cases += 1
            if expected { found += 1 }
        }
        #expect(found > cases / 4 && found < cases * 3 / 4, "\(found) of \(cases) found")
    }

    /// Every row's encoded bytes, as the scan sees them.
    static func rows(of store: NativeStore) throws -> [[UInt8]] {
        var rows: [[UInt8]] = []
        try store.database.read { transaction in
            try transaction.tree(named: "rows.Person")?.forEach { _, value in
                rows.append(Array(value))
                return true
            }
        }
        return rows
    }

    @Test("ASCII lowercase eight bytes at a time equals the byte-by-byte lowercase for every ASCII byte in every position")
    func lowercaseWord() {
        for byte in UInt8(0)..<0x80 {
            for position in 0..<8 {
                var bytes = [UInt8](repeating: UInt8(ascii: "Q"), count: 8)
                bytes[position] = byte
                let word = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                let lowered = withUnsafeBytes(of: ScanFilter.lowercaseWord(word)) { Array($0) }
                let expected = bytes.map { (0x41...0x5A).contains($0) ? $0 + 0x20 : $0 }
                #expect(lowered == expected, "byte \(byte) at \(position)")
            }
        }
        #expect(ScanFilter.isASCII(UnsafeRawBufferPointer(start: nil, count: 0)))
        for text in ["plain ascii text!", "déjà", "abcdefgh\u{80}", "12345678901234567"] {
            let bytes = Array(text.utf8)
            #expect(bytes.withUnsafeBytes { ScanFilter.isASCII($0) } == text.utf8.allSatisfy { $0 < 0x80 }, "\(text)")
        }
    }

    @Test("[c], [d], [cd] and LIKE are decided on a row's bytes, equal to the evaluator: ASCII strings folded in place, others by the evaluator's fold, remembered (rows of layout 2, and records transcoded)",
          arguments: [RowFormat.Layout.fixedFirst, .records])
    func decidedOnBytes(layout: RowFormat.Layout) throws {
        let model = try Self.model(plainIndex: false, foldedIndex: false)
        let stack = try Stack(model: model, rowLayout: layout)
        let context = stack.context()
        for (serial, name) in Self.names.enumerated() {
            _ = try stack.insert("Person", in: context, name.map { ["serial": Int64(serial), "lastName": $0] } ?? ["serial": Int64(serial)])
        }
        try context.save()
        let store = try #require(stack.coordinator.persistentStores.first as? NativeStore)
        let rowFormat = store.format(of: try #require(model.entity(named: "Person")))
        let rows = try Self.rows(of: store)
        #expect(rows.count == Self.names.count)
        let formats = [
            "lastName ==[c] 'smith'", "lastName ==[d] 'Smith'", "lastName ==[cd] 'SMITH'", "lastName !=[c] 'smith'",
            "lastName BEGINSWITH[c] 'sm'", "lastName BEGINSWITH[cd] 'OST'", "lastName BEGINSWITH[d] 'Sm'", "lastName ENDSWITH[c] 'SMITH'",
            "lastName CONTAINS[c] 'SMI'", "lastName CONTAINS[cd] 'elv'", "lastName CONTAINS[d] 'ss'", "lastName <[c] 'n'",
            "lastName >=[cd] 'o'", "lastName BETWEEN[c] {'a', 'o'}", "lastName IN[c] {'smith', 'ince'}",
            "lastName LIKE 'Sm*'", "lastName LIKE '*smith'", "lastName LIKE 'S?ith'", "lastName LIKE[c] 's?ith*'", "lastName LIKE[cd] '*e?v*'",
            "lastName LIKE 'a\\\\*b'", "lastName LIKE 'a\\\\b'", "lastName LIKE '*'", "lastName LIKE ''", "lastName LIKE[d] 'x?y'",
            "lastName CONTAINS[c] ''",
        ]
        var decidedOnBytes = 0, leftToEvaluator = 0
        for format in formats {
            let predicate = try ObjectPredicate(format: format)
            let filter = ScanFilter(predicate, format: rowFormat, accepted: true)
            #expect(filter.compiled, "\(format) compiles for the scan")
            for (row, name) in zip(rows, Self.names) {
                let expected = try predicate.evaluate(with: ["lastName": name] as [String: Any?])
                let decided = row.withUnsafeBytes { filter.decide($0) }
                if let decided {
                    decidedOnBytes += 1
                    #expect(decided == expected, "\(format) on \(String(describing: name))")
                } else {
                    leftToEvaluator += 1
                    // Undecided only: a string with a zero byte (escaped in the row), or a
                    // non-ASCII string for a LIKE with `?` (one scalar, not one byte).
                    let hasZero = name?.utf8.contains(0) ?? false
                    let ascii = name?.utf8.allSatisfy { $0 < 0x80 } ?? true
                    #expect(hasZero || (!ascii && format.contains("LIKE") && format.contains("?")),
                            "\(format) leaves \(String(describing: name)) undecided")
                }
            }
            // The fetch, whatever was decided where, is the evaluator's answer.
            let fetched = try context.fetch(try FetchRequest<ManagedObject>(entityName: "Person", format: format))
            let serials = Set(try fetched.map { try #require($0.value(forKey: "serial") as? Int64) })
            let expected = Set(try Self.names.enumerated().filter { try predicate.evaluate(with: ["lastName": $0.element] as [String: Any?]) }.map { Int64($0.offset) })
            #expect(serials == expected, "\(format)")
        }
        #expect(decidedOnBytes > leftToEvaluator * 10, "most rows are decided on bytes (\(decidedOnBytes) against \(leftToEvaluator))")
        var request = try FetchRequest<ManagedObject>(entityName: "Person", format: "lastName BEGINSWITH[c] 'sm'")
        #expect(try request.explain(in: context).contains("(on its encoded values)"))
        request.predicate = try ObjectPredicate(format: "lastName LIKE[cd] 'sm*'")
        #expect(try request.explain(in: context).contains("(on its encoded values)"))
    }

    @Test("a folded index serves [cd] exactly and [c] or [d] alone with an ASCII constant; LIKE with a leading literal reads its prefix's range")
    func indexes() throws {
        for (plain, folded) in [(true, false), (false, true), (true, true)] {
            let stack = try Stack(model: try Self.model(plainIndex: plain, foldedIndex: folded))
            let context = stack.context()
            for (serial, name) in Self.names.enumerated() {
                _ = try stack.insert("Person", in: context, name.map { ["serial": Int64(serial), "lastName": $0] } ?? ["serial": Int64(serial)])
            }
            try context.save()
            // Which formats must read an index, and which may not.
            let cases: [(format: String, index: Bool)] = [
                ("lastName ==[cd] 'smith'", folded), ("lastName ==[c] 'smith'", folded || plain), ("lastName BEGINSWITH[d] 'Sm'", folded),
                ("lastName BEGINSWITH[c] 'ost'", folded || plain), ("lastName LIKE[c] 'sm*th'", folded || plain), ("lastName LIKE[cd] 'ø*'", folded),
                // [c] on a plain index reads every case variant, and the two other scalars that
                // lower to an ASCII start: the Kelvin sign (k) and the dotted capital I (i).
                ("lastName BEGINSWITH[c] 'kel'", folded || plain), ("lastName ==[c] 'kim'", folded || plain), ("lastName BEGINSWITH[c] 'i'", folded || plain),
                ("lastName ==[c] 'ince'", folded || plain), ("lastName BEGINSWITH[c] 'abcdefgh'", folded), ("lastName BEGINSWITH[c] \"o'b\"", folded || plain),
                ("lastName LIKE 'Sm*'", plain), ("lastName LIKE 'a\\\\*b'", plain), ("lastName LIKE '*mith'", false),
                ("lastName ==[c] 'Smíth'", false), ("lastName <[c] 'n'", false), ("lastName BEGINSWITH 'Sm'", plain),
            ]
            for (format, usesIndex) in cases {
                let request = try FetchRequest<ManagedObject>(entityName: "Person", format: format)
                let plan = try request.explain(in: context)
                #expect(plan.contains("index ") == usesIndex, "plain \(plain), folded \(folded): \(format)\n\(plan)")
                let predicate = try #require(request.predicate)
                let fetched = try context.fetch(request)
                let serials = Set(try fetched.map { try #require($0.value(forKey: "serial") as? Int64) })
                let expected = Set(try Self.names.enumerated().filter { try predicate.evaluate(with: ["lastName": $0.element] as [String: Any?]) }.map { Int64($0.offset) })
                #expect(serials == expected, "plain \(plain), folded \(folded): \(format)")
                #expect(try context.count(for: request) == expected.count, "count: \(format)")
            }
        }
    }
}
