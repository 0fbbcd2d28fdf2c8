import Arbor
import ArborTestSupport
import Foundation

/// Input: one argument-selector byte, then the predicate format string (the rest, decoded as
/// UTF-8, lossily). The string is parsed with the selected format arguments; a predicate that
/// parses must print (`predicateFormat`) as a string that parses back to an equal predicate, and is
/// then evaluated against dictionaries, plain values and nil made from the input, with
/// substitution variables — both directly and after `substituting(_:)`, which must agree. Any
/// outcome but a crash, a hang, a failed round trip, a disagreement, or an error that is not an
/// `ArborError` is fine.
///
/// The selector byte, modulo 32, chooses the format arguments (the seeds in
/// Corpus/FuzzPredicate write it as the character shown). The parser takes exactly as many as the
/// format's specifiers use, so a count mismatch is an expected `ArborError`:
///
///     '@'  none                         'P'  "a.b", 3            (%K %d)
///     'A'  ["x", "y"]      (string array) 'Q'  Double.nan
///     'B'  true                         'R'  "size"             (%K: a reserved word, #size)
///     'C'  "tags", "x", 1.5 (%K %@ %f)  'S'  "bob"              (a string)
///     'D'  a Date                       'T'  -7, 7              (two ints)
///     'E'  Decimal 1.25                 'U'  a UUID
///     'F'  2.5             (a double)   'V'  "first name"       (%K not a plain key: no round trip)
///     'G'  1e300                        'W'  a URL
///     'H'  ["k": 1]    (a dictionary: no predicate can hold it)
///     'I'  42              (an int)     'X'  "name", "x", 2.5
///     'J'  Data [1, 2, 3]               'Y'  Double.infinity
///     'K'  "a.b"       (a key path)     'Z'  0
///     'L'  [1, 5]      (BETWEEN %@)     '['  ["x", nil, 3]      (a mixed array with nil)
///     'M'  "name", "bob"   (%K %@)      '\'  "q\"\\%"           (a string with quote, \ and %)
///     'N'  nil                          ']'  Set(["p"])
///     'O'  Int64.min                    '^'  Int8(5)
///                                       '_'  ""                 (an empty string: bad for %K)
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1, size <= 4096 else { return 0 }
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let (arguments, roundTrips) = formatArguments(bytes[0])
    let format = String(decoding: bytes[1...], as: UTF8.self)

    let predicate: ObjectPredicate
    do {
        predicate = try ObjectPredicate(format: format, argumentArray: arguments)
    } catch is ArborError {
        // Expected for most inputs. The same string as an expression (`a + 1`, `$x.name`).
        fuzzExpression(format, arguments, seed: hash(bytes))
        return 0
    } catch {
        fatalError("untyped error from ObjectPredicate(format:): \(error) for \(literal(format))")
    }

    var shape = Shape()
    shape.measure(predicate, depth: 0)
    // A key that is not a plain name (from a `%K` argument such as `q"\%`) does not print back
    // (docs/predicates.md, "Keys").
    if roundTrips && !shape.hasUnprintableKey { checkRoundTrip(predicate, format: format) }
    guard shape.isCheap else { return 0 }
    var random = SplitMix64(seed: hash(bytes))
    let variables = makeVariables(&random)
    for subject in makeSubjects(&random) {
        evaluate(predicate, on: subject, variables: variables, format: format)
    }
    return 0
}

// MARK: - Format arguments

/// The arguments the selector byte chooses (see the table above), and whether the predicate's
/// printed form can parse back to it (not for a `%K` key that is not a plain name).
func formatArguments(_ selector: UInt8) -> ([Any?], roundTrips: Bool) {
    switch selector % 32 {
    case 0: return ([], true)
    case 1: return ([["x", "y"]], true)
    case 2: return ([true], true)
    case 3: return (["tags", "x", 1.5], true)
    case 4: return ([Date(timeIntervalSinceReferenceDate: 86_400.5)], true)
    case 5: return ([Decimal(string: "1.25", locale: Locale(identifier: "en_US_POSIX"))!], true)
    case 6: return ([2.5], true)
    case 7: return ([1e300], true)
    case 8: return ([["k": 1]], true)
    case 9: return ([42], true)
    case 10: return ([Data([1, 2, 3])], true)
    case 11: return (["a.b"], true)
    case 12: return ([[1, 5]], true)
    case 13: return (["name", "bob"], true)
    case 14: return ([nil], true)
    case 15: return ([Int64.min], true)
    case 16: return (["a.b", 3], true)
    case 17: return ([Double.nan], true)
    case 18: return (["size"], true)
    case 19: return (["bob"], true)
    case 20: return ([-7, 7], true)
    case 21: return ([UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!], true)
    case 22: return (["first name"], false)
    case 23: return ([URL(string: "https://example.com/a?b=c")!], true)
    case 24: return (["name", "x", 2.5], true)
    case 25: return ([Double.infinity], true)
    case 26: return ([0], true)
    case 27: return ([["x", nil, 3] as [Any?]], true)
    case 28: return (["q\"\\%"], true)
    case 29: return ([Set(["p"])], true)
    case 30: return ([Int8(5)], true)
    default: return ([""], true)
    }
}

// MARK: - Round trip

/// `ObjectPredicate(format: p.predicateFormat) == p`. A predicate holding a NaN is not equal to
/// another parse of itself (`p == p` holds only because arrays of one buffer compare equal
/// without looking): when two parses of the printed string differ, the reparsed predicate must
/// print the same instead. (`fatalError`, not `preconditionFailure`: release builds drop the
/// latter's message.)
func checkRoundTrip(_ predicate: ObjectPredicate, format: String) {
    let printed = predicate.predicateFormat
    let reparsed: ObjectPredicate
    do {
        reparsed = try ObjectPredicate(format: printed, argumentArray: [])
    } catch {
        fatalError("the printed predicate does not parse: \(error)\n  format:  \(literal(format))\n  printed: \(literal(printed))")
    }
    if reparsed == predicate { return }
    if let again = try? ObjectPredicate(format: printed, argumentArray: []), again != reparsed,
       reparsed.predicateFormat == printed { return }
    fatalError("the printed predicate parses to another predicate\n  format:    \(literal(format))\n  printed:   \(literal(printed))\n  reprinted: \(literal(reparsed.predicateFormat))")
}

// MARK: - Evaluation

/// Evaluates with the variables given at evaluation, and with them substituted first: both must
/// give the same answer (or fail with the same code).
func evaluate(_ predicate: ObjectPredicate, on subject: Any?, variables: [String: Any?], format: String) {
    let direct = outcome { try predicate.evaluate(with: subject, substitutionVariables: variables) }
    let substituted: ObjectPredicate
    do {
        substituted = try predicate.substituting(variables)
    } catch is ArborError {
        return
    } catch {
        fatalError("untyped error from substituting(_:): \(error) for \(literal(format))")
    }
    let afterwards = outcome { try substituted.evaluate(with: subject, substitutionVariables: [:]) }
    if direct != afterwards {
        fatalError("evaluation with variables (\(direct)) and after substituting them (\(afterwards)) disagree\n  format: \(literal(format))\n  substituted: \(literal(substituted.predicateFormat))\n  subject: \(String(describing: subject))\n  variables: \(variables)")
    }
}

/// A result or an `ArborError`'s code; any other error is a bug.
enum Outcome: Equatable {
    case value(Bool)
    case failure(ArborError.Code)
}

func outcome(_ body: () throws -> Bool) -> Outcome {
    do {
        return .value(try body())
    } catch let error as ArborError {
        return .failure(error.code)
    } catch {
        fatalError("untyped error from evaluate(with:): \(error)")
    }
}

/// The string parsed as an expression and evaluated on a dictionary.
func fuzzExpression(_ format: String, _ arguments: [Any?], seed: UInt64) {
    do {
        let expression = try ObjectExpression(format: format, argumentArray: arguments)
        var shape = Shape()
        shape.measure(expression, depth: 0)
        guard shape.isCheap else { return }
        var random = SplitMix64(seed: seed)
        let variables = makeVariables(&random)
        _ = try expression.expressionValue(with: fixedDictionary, substitutionVariables: variables)
    } catch is ArborError {
        // Expected.
    } catch {
        fatalError("untyped error from ObjectExpression: \(error) for \(literal(format))")
    }
}

/// Bounds on the evaluation work: nested SUBQUERYs multiply (each level runs over a collection),
/// and MATCHES runs ICU regular expressions, exponential in the subject for some patterns, so only
/// with short strings.
struct Shape {
    var subqueryDepth = 0
    var hasMatches = false
    var longestString = 0
    /// Whether a key path has a key the format grammar cannot spell (only `%K` can give one).
    var hasUnprintableKey = false

    var isCheap: Bool { subqueryDepth <= 3 && !(hasMatches && longestString > 24) }

    mutating func measure(_ predicate: ObjectPredicate, depth: Int) {
        switch predicate {
        case .constant: break
        case .not(let inner): measure(inner, depth: depth)
        case .and(let terms), .or(let terms): for term in terms { measure(term, depth: depth) }
        case .comparison(let comparison):
            if comparison.operator == .matches { hasMatches = true }
            measure(comparison.left, depth: depth)
            measure(comparison.right, depth: depth)
        }
    }

    mutating func measure(_ expression: ObjectExpression, depth: Int) {
        switch expression {
        case .constant(let value): measure(value)
        case .evaluatedObject, .variable: break
        case .keyPath(let keys): measure(keys)
        case .keyPathOn(let base, let keys):
            measure(keys)
            measure(base, depth: depth)
        case .aggregate(let elements): for element in elements { measure(element, depth: depth) }
        case .arithmetic(_, let a, let b):
            measure(a, depth: depth)
            measure(b, depth: depth)
        case .subquery(let collection, _, let predicate):
            subqueryDepth = max(subqueryDepth, depth + 1)
            measure(collection, depth: depth)
            measure(predicate, depth: depth + 1)
        }
    }

    /// The grammar's words: a letter or `_`, then letters, digits and `_` (collection operators
    /// print as they are).
    mutating func measure(_ keys: [String]) {
        for key in keys where !key.hasPrefix("@") {
            let scalars = Array(key.unicodeScalars)
            let start = scalars.first.map { $0 == "_" || $0.properties.isAlphabetic } ?? false
            let rest = scalars.dropFirst().allSatisfy { $0 == "_" || $0.properties.isAlphabetic || $0.properties.numericType != nil }
            if !(start && rest) { hasUnprintableKey = true }
        }
    }

    mutating func measure(_ value: PredicateValue) {
        switch value {
        case .string(let text): longestString = max(longestString, text.unicodeScalars.count)
        case .list(let values): for value in values { measure(value) }
        default: break
        }
    }
}

// MARK: - Subjects and variables

/// A dictionary with the keys the seeds use.
nonisolated(unsafe) let fixedDictionary: [String: Any?] = [
    "name": "Bób",
    "age": 42,
    "score": 2.5,
    "ratio": Double.nan,
    "tags": ["x", "y", "Ünï"],
    "nums": [1, 5, 9],
    "a": ["b": "x", "c": 3, "d": ["e": [1.5, 2.5]]] as [String: Any?],
    "date": Date(timeIntervalSinceReferenceDate: 86_400.5),
    "flag": true,
    "nothing": nil,
    "size": 7,
    "first name": "Ann",
    "price": Decimal(string: "1.25", locale: Locale(identifier: "en_US_POSIX"))!,
]

/// The evaluated objects: the fixed dictionary, a random one, a random plain value (for SELF), a
/// string array and nil.
func makeSubjects(_ random: inout SplitMix64) -> [Any?] {
    var dictionary: [String: Any?] = [:]
    for _ in 0..<random.below(8) {
        dictionary[random.pick(keys)] = makeValue(&random, depth: 0)
    }
    return [fixedDictionary, dictionary, makeValue(&random, depth: 1), ["x", "bob", ""], nil]
}

/// `$v`, `$x`, `$limit`, `$name`.
func makeVariables(_ random: inout SplitMix64) -> [String: Any?] {
    ["v": makeValue(&random, depth: 1), "x": makeValue(&random, depth: 1), "limit": random.pick(integers), "name": random.pick(strings)]
}

let keys = ["name", "age", "score", "tags", "a", "b", "c", "x", "nums", "first name", "size", "value"]
let strings = ["", "bob", "Bób", "BOB", "x", "y", "a*b", "ÉCOLE", "école", "%", "\"q\"", "ﬁ", "e\u{301}", "🙂"]
let integers: [Int64] = [0, 1, -1, 3, 42, 7, .max, .min]
let doubles: [Double] = [0, -0.0, 2.5, -1.5, .nan, .infinity, -.infinity, 1e300, .leastNonzeroMagnitude, 42]

/// A random value: nil, a number, a string, a boolean, a date, a decimal, an array of strings or
/// numbers, or (not too deep) a nested dictionary.
func makeValue(_ random: inout SplitMix64, depth: Int) -> Any? {
    switch random.below(depth < 2 ? 11 : 9) {
    case 0: return nil
    case 1: return random.pick(integers)
    case 2: return random.pick(doubles)
    case 3, 4: return random.pick(strings)
    case 5: return random.below(2) == 0
    case 6: return Date(timeIntervalSinceReferenceDate: random.pick(doubles.filter(\.isFinite)))
    case 7: return (0..<random.below(4)).map { _ in random.pick(strings) }
    case 8:
        if random.below(2) == 0 { return (0..<random.below(4)).map { _ in random.pick(integers) } }
        return Decimal(random.pick(integers))
    default:
        var nested: [String: Any?] = [:]
        for _ in 0..<random.below(4) { nested[random.pick(keys)] = makeValue(&random, depth: depth + 1) }
        return nested
    }
}

/// The test support's seeded generator (an input always gives the same values), with the
/// choices the harness makes.
extension SplitMix64 {
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    mutating func pick<T>(_ choices: [T]) -> T { choices[below(choices.count)] }
}

/// FNV-1a of the input.
func hash(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
    var h: UInt64 = 0xCBF2_9CE4_8422_2325
    for byte in bytes { h = (h ^ UInt64(byte)) &* 0x100_0000_01B3 }
    return h
}

/// A string as a Swift string literal (for reproducers in failure messages).
func literal(_ text: String) -> String {
    var result = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\\": result += "\\\\"
        case "\"": result += "\\\""
        case "\n": result += "\\n"
        case "\t": result += "\\t"
        case "\r": result += "\\r"
        default:
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                result += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
    }
    return result + "\""
}
