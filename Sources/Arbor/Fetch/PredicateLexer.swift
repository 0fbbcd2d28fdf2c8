import Foundation

struct PredicateToken: Equatable {
    enum Kind: Equatable {
        /// A word: a key, or a reserved word (compared case-insensitively).
        case word(String)
        /// A key escaped with `#` (never a reserved word).
        case escapedWord(String)
        /// `$name`.
        case variable(String)
        case integer(String)
        case real(String)
        case string(String)
        /// A format specifier: `@`, `K`, `d`, `f`, `s`, … (without `%` or length modifiers).
        case specifier(Character)
        /// An operator or punctuation: `==`, `<=`, `(`, `{`, `.`, `@`, …
        case symbol(String)
        case end
    }

    var kind: Kind
    var offset: Int
    /// A word's text in upper case (empty for other tokens): reserved words are recognised
    /// without folding case again at every parse (tokens are cached per format string).
    var folded: String
    /// Whether the token is a word spelled like a reserved word (in any case).
    var isReservedWord: Bool

    init(kind: Kind, offset: Int) {
        self.kind = kind
        self.offset = offset
        if case .word(let text) = kind {
            folded = text.uppercased()
            isReservedWord = PredicateReservedWords.all.contains(folded)
        } else {
            folded = ""
            isReservedWord = false
        }
    }
}

/// The reserved words of the format grammar (case-insensitive; a key spelled like one is
/// written `#key`).
enum PredicateReservedWords {
    static let all: Set<String> = [
        "AND", "OR", "NOT", "IN", "LIKE", "MATCHES", "CONTAINS", "BEGINSWITH", "ENDSWITH", "BETWEEN",
        "ANY", "SOME", "ALL", "NONE", "NULL", "NIL", "SELF", "TRUE", "YES", "FALSE", "NO",
        "TRUEPREDICATE", "FALSEPREDICATE", "SUBQUERY", "CAST", "FIRST", "LAST", "SIZE", "ANYKEY",
        "FETCH", "FUNCTION", "INDEX", "ASSIGN",
    ]

    static func isReserved(_ word: String) -> Bool { all.contains(word.uppercased()) }
}

/// Reads format strings into tokens.
struct PredicateLexer {
    /// The format string's Unicode scalars (offsets count them: a quote is never fused with a
    /// combining mark, as it could be in a `Character`).
    let characters: [Unicode.Scalar]
    var position = 0

    init(_ text: String) { characters = Array(text.unicodeScalars) }

    static func syntaxError(_ message: String, at offset: Int, in characters: [Unicode.Scalar]) -> ArborError {
        let start = max(0, offset - 12), end = min(characters.count, offset + 12)
        let near = offset < characters.count ? " near \"\(text(characters[start..<end]))\"" : " at the end"
        var error = ArborError(.predicateSyntax, "\(message) (at offset \(offset)\(near))")
        error.position = offset
        return error
    }

    func error(_ message: String, at offset: Int) -> ArborError {
        Self.syntaxError(message, at: offset, in: characters)
    }

    static func text(_ scalars: ArraySlice<Unicode.Scalar>) -> String {
        var result = ""
        result.unicodeScalars.append(contentsOf: scalars)
        return result
    }

    static func isDigit(_ c: Unicode.Scalar) -> Bool { ("0"..."9").contains(c) }
    static func isWordStart(_ c: Unicode.Scalar) -> Bool { c == "_" || c.properties.isAlphabetic }
    static func isWordPart(_ c: Unicode.Scalar) -> Bool { c == "_" || c.properties.isAlphabetic || c.properties.numericType != nil }

    mutating func tokens() throws -> [PredicateToken] {
        var result: [PredicateToken] = []
        while true {
            let token = try next()
            result.append(token)
            if token.kind == .end { return result }
        }
    }

    func peek(_ ahead: Int = 0) -> Unicode.Scalar? {
        position + ahead < characters.count ? characters[position + ahead] : nil
    }

    mutating func word() -> String {
        let start = position
        while let c = peek(), Self.isWordPart(c) { position += 1 }
        return Self.text(characters[start..<position])
    }

    mutating func next() throws -> PredicateToken {
        while let c = peek(), c.properties.isWhitespace { position += 1 }
        let start = position
        guard let c = peek() else { return PredicateToken(kind: .end, offset: start) }
        func token(_ kind: PredicateToken.Kind) -> PredicateToken { PredicateToken(kind: kind, offset: start) }

        if Self.isWordStart(c) { return token(.word(word())) }
        if c == "#" {
            position += 1
            guard let next = peek(), Self.isWordStart(next) else { throw error("\"#\" must be followed by a key", at: start) }
            return token(.escapedWord(word()))
        }
        if c == "$" {
            position += 1
            guard let next = peek(), Self.isWordStart(next) else { throw error("\"$\" must be followed by a variable name", at: start) }
            return token(.variable(word()))
        }
        if Self.isDigit(c) { return token(try number()) }
        if c == ".", let next = peek(1), Self.isDigit(next),
           !(characters[..<start].last.map { Self.isWordPart($0) || $0 == ")" || $0 == "]" } ?? false) {
            return token(try number())
        }
        if c == "\"" || c == "'" { return token(.string(try string(quote: c))) }
        if c == "%" { return token(try specifier()) }

        // Operators and punctuation, longest first.
        let two = peek(1).map { Self.text([c, $0]) } ?? ""
        for symbol in ["==", "!=", "<>", "<=", "=<", ">=", "=>", "&&", "||"] where two == symbol {
            position += 2
            return token(.symbol(symbol))
        }
        if "=<>!+-*/(){}[],.@".unicodeScalars.contains(c) {
            position += 1
            return token(.symbol(String(c)))
        }
        throw error("unexpected character \"\(c)\"", at: start)
    }

    mutating func number() throws -> PredicateToken.Kind {
        let start = position
        if peek() == "0", let radix = peek(1), "xXoObB".unicodeScalars.contains(radix) {
            position += 2
            let digitsStart = position
            while let c = peek(), c.properties.isASCIIHexDigit { position += 1 }
            let digits = Self.text(characters[digitsStart..<position])
            let base = "xX".unicodeScalars.contains(radix) ? 16 : ("oO".unicodeScalars.contains(radix) ? 8 : 2)
            guard !digits.isEmpty, let value = UInt64(digits, radix: base) else {
                throw error("\"\(Self.text(characters[start..<position]))\" is not a number", at: start)
            }
            return .integer(String(value))
        }
        var isReal = false
        while let c = peek(), Self.isDigit(c) { position += 1 }
        if peek() == ".", let next = peek(1), Self.isDigit(next) {
            isReal = true
            position += 1
            while let c = peek(), Self.isDigit(c) { position += 1 }
        } else if peek() == ".", !(peek(1).map(Self.isWordStart) ?? false), peek(1) != "@" {
            // "1." is a real; "1.name" would be a key path on a number (an error later).
            isReal = true
            position += 1
        }
        if let e = peek(), e == "e" || e == "E" {
            var ahead = 1
            if let sign = peek(1), sign == "+" || sign == "-" { ahead = 2 }
            if let digit = peek(ahead), Self.isDigit(digit) {
                isReal = true
                position += ahead
                while let c = peek(), Self.isDigit(c) { position += 1 }
            }
        }
        if let c = peek(), Self.isWordStart(c) {
            throw error("a number runs into \"\(c)\"", at: position)
        }
        let text = Self.text(characters[start..<position])
        return isReal ? .real(text) : .integer(text)
    }

    mutating func string(quote: Unicode.Scalar) throws -> String {
        let start = position
        position += 1
        var text = ""
        while true {
            guard let c = peek() else { throw error("the string has no closing \(quote)", at: start) }
            position += 1
            if c == quote { return text }
            if c == "%", peek() == "%" {
                // "%%" in a quoted string is a percent sign (other specifiers stay as written).
                position += 1
                text.append("%")
                continue
            }
            guard c == "\\" else {
                text.unicodeScalars.append(c)
                continue
            }
            guard let escaped = peek() else { throw error("the string has no closing \(quote)", at: start) }
            position += 1
            switch escaped {
            case "n": text.append("\n")
            case "t": text.append("\t")
            case "r": text.append("\r")
            case "0": text.append("\0")
            case "\\", "\"", "'": text.unicodeScalars.append(escaped)
            case "u":
                guard peek() == "{" else { throw error("\\u must be followed by {hex digits}", at: position - 2) }
                let escapeStart = position - 2
                position += 1
                let digitsStart = position
                while let d = peek(), d.properties.isASCIIHexDigit { position += 1 }
                guard peek() == "}", let value = UInt32(Self.text(characters[digitsStart..<position]), radix: 16),
                      let scalar = Unicode.Scalar(value) else {
                    throw error("\\u{…} must hold the hex digits of a Unicode scalar", at: escapeStart)
                }
                position += 1
                text.unicodeScalars.append(scalar)
            default:
                throw error("unknown escape \"\\\(escaped)\" in a string", at: position - 2)
            }
        }
    }

    mutating func specifier() throws -> PredicateToken.Kind {
        let start = position
        position += 1
        // Length modifiers are accepted and ignored: every integer is 64-bit here.
        while let c = peek(), "lhqLjzt".unicodeScalars.contains(c) { position += 1 }
        guard let c = peek() else { throw error("a format specifier ends the string", at: start) }
        position += 1
        switch c {
        case "@", "K", "d", "i", "u", "f", "g", "e", "s", "x", "X", "o": return .specifier(Character(c))
        case "%": throw error("\"%%\" (a percent sign) belongs inside a quoted string", at: start)
        default: throw error("\"%\(c)\" is not a format specifier (%@ %K %d %i %ld %f %g %s)", at: start)
        }
    }
}

/// The tokens of recently used format strings. An application builds the same few requests
/// again and again with new arguments (`"team == %@"`); the tokens depend only on the string,
/// so each is read once — as SQLite libraries keep prepared statements by their SQL. Bounded:
/// when full, it starts over.
final class LexedFormats: Sendable {
    static let shared = LexedFormats()
    static let capacity = 256

    private let formats = LockedValue<[String: (format: String, scalars: [Unicode.Scalar], tokens: [PredicateToken])]>([:])

    /// The scalars and tokens of `format`.
    ///
    /// - Throws: the lexer's syntax error (such strings are not kept).
    func lexed(_ format: String) throws -> ([Unicode.Scalar], [PredicateToken]) {
        // Strings compare by canonical equivalence ("é" precomposed equals "e" + U+0301): a hit
        // counts only when the bytes are the same too, since the store compares bytes.
        if let known = formats.withLock({ $0[format] }), known.format.utf8.elementsEqual(format.utf8) {
            return (known.scalars, known.tokens)
        }
        var lexer = PredicateLexer(format)
        let lexed = (format: format, scalars: lexer.characters, tokens: try lexer.tokens())
        formats.withLock { formats in
            if formats.count >= Self.capacity { formats.removeAll(keepingCapacity: true) }
            formats[format] = lexed
        }
        return (lexed.scalars, lexed.tokens)
    }
}
