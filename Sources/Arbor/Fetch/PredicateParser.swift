import Foundation

extension ObjectPredicate {
    /// Parses a predicate format string (Core Data's grammar; docs/predicates.md), taking format
    /// arguments (`%@`, `%K`, `%d`, `%i`, `%ld`, `%f`, `%g`, `%s`, …) from `arguments` in order.
    ///
    /// ```swift
    /// let adults = try ObjectPredicate(format: "%K >= %d AND department.name == %@", "age", 18, "Sales")
    /// ```
    ///
    /// - Throws: ``ArborError/Code/predicateSyntax`` for a malformed string, with the offending
    ///   position (``ArborError/position``, an offset in Unicode scalars from 0) and what was expected;
    ///   ``ArborError/Code/wrongValueType`` for an argument that does not suit its specifier.
    public init(format: String, _ arguments: Any?...) throws {
        try self.init(format: format, argumentArray: arguments)
    }

    /// Parses a predicate format string, taking format arguments from an array.
    ///
    /// - Throws: as ``init(format:_:)``.
    public init(format: String, argumentArray arguments: [Any?]) throws {
        var parser = try PredicateParser(format, arguments: arguments)
        self = try parser.parseWhole()
    }
}

extension ObjectExpression {
    /// Parses an expression format string (`salary * 1.1`, `employees.@count`, `$limit`).
    ///
    /// - Throws: as ``ObjectPredicate/init(format:_:)``.
    public init(format: String, _ arguments: Any?...) throws {
        var parser = try PredicateParser(format, arguments: arguments)
        self = try parser.parseWholeExpression()
    }
}

/// One token of a format string, with its character offset.
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

/// The recursive-descent parser of predicate format strings.
struct PredicateParser {
    let characters: [Unicode.Scalar]
    var tokens: [PredicateToken]
    var index = 0
    var arguments: [Any?]
    var argumentIndex = 0
    /// How deeply the parser has recursed (bounded: a string cannot exhaust the stack).
    var depth = 0
    static let maximumDepth = 100
    /// Parenthesised predicates already read, by the token of their "(": the result, and the
    /// token and argument after them (so a "(" is never parsed twice: no exponential time).
    var parenthesised: [Int: Result<(ObjectPredicate, Int, Int), ArborError>] = [:]

    init(_ format: String, arguments: [Any?]) throws {
        var lexer = PredicateLexer(format)
        characters = lexer.characters
        tokens = try lexer.tokens()
        self.arguments = arguments
    }

    // MARK: Tokens

    var current: PredicateToken { tokens[index] }

    func error(_ message: String, at token: PredicateToken? = nil) -> ArborError {
        let token = token ?? current
        return PredicateLexer.syntaxError(message, at: token.offset, in: characters)
    }

    func describe(_ token: PredicateToken) -> String {
        switch token.kind {
        case .word(let w): "\"\(w)\""
        case .escapedWord(let w): "\"#\(w)\""
        case .variable(let v): "\"$\(v)\""
        case .integer(let n), .real(let n): "the number \(n)"
        case .string(let s): "the string \"\(s)\""
        case .specifier(let c): "\"%\(c)\""
        case .symbol(let s): "\"\(s)\""
        case .end: "the end of the string"
        }
    }

    /// Whether the current token is the reserved word `word` (any case).
    func isWord(_ word: String, ahead: Int = 0) -> Bool {
        guard index + ahead < tokens.count, case .word(let w) = tokens[index + ahead].kind else { return false }
        return w.uppercased() == word
    }

    func isSymbol(_ symbol: String, ahead: Int = 0) -> Bool {
        guard index + ahead < tokens.count else { return false }
        return tokens[index + ahead].kind == .symbol(symbol)
    }

    mutating func advance() { if index < tokens.count - 1 { index += 1 } }

    mutating func expectSymbol(_ symbol: String, _ what: String) throws {
        guard isSymbol(symbol) else { throw error("expected \"\(symbol)\" \(what), found \(describe(current))") }
        advance()
    }

    mutating func nextArgument(_ specifier: Character, at token: PredicateToken) throws -> Any? {
        guard argumentIndex < arguments.count else {
            throw error("the format uses more arguments than the \(arguments.count) given (%\(specifier) has none)", at: token)
        }
        defer { argumentIndex += 1 }
        return arguments[argumentIndex]
    }

    // MARK: Predicates

    mutating func parseWhole() throws -> ObjectPredicate {
        let predicate = try parsePredicate()
        guard current.kind == .end else {
            throw error("expected AND, OR or the end of the predicate, found \(describe(current))")
        }
        guard argumentIndex == arguments.count else {
            throw error("\(arguments.count) arguments given, but the format uses \(argumentIndex)", at: current)
        }
        return predicate
    }

    mutating func parseWholeExpression() throws -> ObjectExpression {
        let expression = try parseExpression()
        guard current.kind == .end else { throw error("expected the end of the expression, found \(describe(current))") }
        guard argumentIndex == arguments.count else {
            throw error("\(arguments.count) arguments given, but the format uses \(argumentIndex)", at: current)
        }
        return expression
    }

    /// Counts one level of recursion.
    mutating func descend() throws {
        depth += 1
        if depth > Self.maximumDepth {
            throw error("the predicate is nested more than \(Self.maximumDepth) levels deep")
        }
    }

    mutating func parsePredicate() throws -> ObjectPredicate {
        try descend()
        defer { depth -= 1 }
        var terms = [try parseAnd()]
        while isWord("OR") || isSymbol("||") {
            advance()
            terms.append(try parseAnd())
        }
        return terms.count == 1 ? terms[0] : .or(terms)
    }

    mutating func parseAnd() throws -> ObjectPredicate {
        var terms = [try parseNot()]
        while isWord("AND") || isSymbol("&&") {
            advance()
            terms.append(try parseNot())
        }
        return terms.count == 1 ? terms[0] : .and(terms)
    }

    mutating func parseNot() throws -> ObjectPredicate {
        if isWord("NOT") || isSymbol("!") {
            advance()
            try descend()
            defer { depth -= 1 }
            return .not(try parseNot())
        }
        return try parsePrimaryPredicate()
    }

    mutating func parsePrimaryPredicate() throws -> ObjectPredicate {
        if isWord("TRUEPREDICATE") { advance(); return .truePredicate }
        if isWord("FALSEPREDICATE") { advance(); return .falsePredicate }
        if isSymbol("(") {
            // A parenthesised predicate — or an expression in parentheses starting a comparison,
            // `(a + b) > 3`: try the predicate first, and fall back when a comparison follows.
            let saved = (index, argumentIndex)
            var predicateError: ArborError?
            let attempt: Result<(ObjectPredicate, Int, Int), ArborError>
            if let known = parenthesised[index] {
                attempt = known
            } else {
                advance()
                do {
                    let inner = try parsePredicate()
                    try expectSymbol(")", "to close the parenthesis")
                    attempt = .success((inner, index, argumentIndex))
                } catch let error as ArborError {
                    attempt = .failure(error)
                }
                parenthesised[saved.0] = attempt
            }
            switch attempt {
            case .success(let (inner, next, nextArgument)):
                (index, argumentIndex) = (next, nextArgument)
                if !startsComparisonOrArithmetic() { return inner }
            case .failure(let error):
                predicateError = error
            }
            (index, argumentIndex) = saved
            do {
                return try parseComparison()
            } catch let error as ArborError {
                // Report the reading that got further.
                if let predicateError, (predicateError.position ?? 0) > (error.position ?? 0) { throw predicateError }
                throw error
            }
        }
        return try parseComparison()
    }

    /// Whether the current token continues an expression or starts a comparison operator.
    func startsComparisonOrArithmetic() -> Bool {
        if comparisonOperator() != nil { return true }
        for symbol in ["+", "-", "*", "/", "."] where isSymbol(symbol) { return true }
        return isWord("NOT") && comparisonOperator(ahead: 1) != nil
    }

    /// The comparison operator at the current token (and how many tokens it takes).
    func comparisonOperator(ahead: Int = 0) -> (ComparisonPredicate.Operator, negated: Bool, length: Int)? {
        let i = index + ahead
        guard i < tokens.count else { return nil }
        switch tokens[i].kind {
        case .symbol(let s):
            switch s {
            case "=", "==": return (.equalTo, false, 1)
            case "!=", "<>": return (.notEqualTo, false, 1)
            case "<": return (.lessThan, false, 1)
            case "<=", "=<": return (.lessThanOrEqualTo, false, 1)
            case ">": return (.greaterThan, false, 1)
            case ">=", "=>": return (.greaterThanOrEqualTo, false, 1)
            default: return nil
            }
        case .word(let w):
            switch w.uppercased() {
            case "MATCHES": return (.matches, false, 1)
            case "LIKE": return (.like, false, 1)
            case "BEGINSWITH": return (.beginsWith, false, 1)
            case "ENDSWITH": return (.endsWith, false, 1)
            case "IN": return (.in, false, 1)
            case "CONTAINS": return (.contains, false, 1)
            case "BETWEEN": return (.between, false, 1)
            case "NOT" where ahead == 0:
                // `a NOT IN b`, `a NOT LIKE b`, …: the negation of the comparison.
                if let (op, _, length) = comparisonOperator(ahead: 1), case .word = tokens[i + 1].kind { return (op, true, length + 1) }
                return nil
            default: return nil
            }
        default:
            return nil
        }
    }

    mutating func parseComparison() throws -> ObjectPredicate {
        var modifier = ComparisonPredicate.Modifier.direct
        if isWord("ANY") || isWord("SOME") { modifier = .any; advance() }
        else if isWord("ALL") { modifier = .all; advance() }
        else if isWord("NONE") { modifier = .none; advance() }
        let start = current
        let left = try parseExpression()
        guard let (op, negated, length) = comparisonOperator() else {
            if modifier == .direct, current.kind == .end || isSymbol(")") || isWord("AND") || isWord("OR") {
                throw error("expected a comparison operator after \(PredicateLexer.text(characters[start.offset..<current.offset]).trimmingCharacters(in: .whitespaces)) (a predicate compares two values: =, !=, <, >, IN, BEGINSWITH, …)")
            }
            throw error("expected a comparison operator (=, ==, !=, <>, <, <=, >, >=, BETWEEN, IN, CONTAINS, BEGINSWITH, ENDSWITH, LIKE, MATCHES), found \(describe(current))")
        }
        for _ in 0..<length { advance() }
        let options = try parseOptions()
        let right = try parseExpression()
        if op == .between {
            switch right {
            case .constant(.list(let bounds)) where bounds.count == 2: break
            case .aggregate(let bounds) where bounds.count == 2: break
            case .variable: break
            default: throw error("BETWEEN needs two bounds: {low, high}", at: tokens[index - 1])
            }
        }
        let comparison = ObjectPredicate.comparison(ComparisonPredicate(left, op, right, modifier: modifier, options: options))
        return negated ? .not(comparison) : comparison
    }

    /// `[c]`, `[d]`, `[cd]` after an operator.
    mutating func parseOptions() throws -> ComparisonPredicate.Options {
        guard isSymbol("[") else { return [] }
        let open = current
        advance()
        guard case .word(let letters) = current.kind else {
            throw error("expected comparison options (c, d or cd) after \"[\"", at: current)
        }
        var options: ComparisonPredicate.Options = []
        for letter in letters.lowercased() {
            switch letter {
            case "c": options.insert(.caseInsensitive)
            case "d": options.insert(.diacriticInsensitive)
            default: throw error("unknown comparison option \"\(letter)\" (c: case-insensitive, d: diacritic-insensitive)", at: open)
            }
        }
        advance()
        try expectSymbol("]", "to close the comparison options")
        return options
    }

    // MARK: Expressions

    mutating func parseExpression() throws -> ObjectExpression {
        try descend()
        defer { depth -= 1 }
        var value = try parseTerm()
        while isSymbol("+") || isSymbol("-") {
            let op: ObjectExpression.ArithmeticOperator = isSymbol("+") ? .add : .subtract
            advance()
            value = .arithmetic(op, value, try parseTerm())
        }
        return value
    }

    mutating func parseTerm() throws -> ObjectExpression {
        var value = try parseUnary()
        while isSymbol("*") || isSymbol("/") {
            let op: ObjectExpression.ArithmeticOperator = isSymbol("*") ? .multiply : .divide
            advance()
            value = .arithmetic(op, value, try parseUnary())
        }
        return value
    }

    mutating func parseUnary() throws -> ObjectExpression {
        if isSymbol("-") {
            let minus = current
            advance()
            // A negative number literal stays a constant (and -9223372036854775808 fits).
            switch current.kind {
            case .integer(let text):
                advance()
                guard let value = Int64("-" + text) else {
                    guard let real = Double("-" + text) else { throw error("\(text) is not a number", at: minus) }
                    return try parsePostfix(.constant(.double(real)))
                }
                return try parsePostfix(.constant(.int(value)))
            case .real(let text):
                advance()
                return try parsePostfix(.constant(.double(Double("-" + text) ?? -.infinity)))
            default:
                try descend()
                defer { depth -= 1 }
                let operand = try parseUnary()
                if case .constant(.int(let n)) = operand, n != .min { return .constant(.int(-n)) }
                if case .constant(.double(let d)) = operand { return .constant(.double(-d)) }
                return .arithmetic(.subtract, .constant(.int(0)), operand)
            }
        }
        if isSymbol("+") {
            advance()
            try descend()
            defer { depth -= 1 }
            return try parseUnary()
        }
        return try parsePostfix(try parsePrimary())
    }

    /// Keys after an expression: `.name`, `.@count`, `.@sum.salary`.
    mutating func parsePostfix(_ base: ObjectExpression) throws -> ObjectExpression {
        var keys: [String] = []
        while isSymbol(".") {
            advance()
            keys += try parseKey(after: "\".\"")
        }
        if isSymbol("[") {
            throw error("index subscripts ([FIRST], [LAST], [SIZE], [n]) are not supported; use @count, or a key path")
        }
        guard !keys.isEmpty else { return base }
        switch base {
        case .keyPath(let head): return .keyPath(head + keys)
        case .evaluatedObject: return .keyPath(keys)
        case .constant:
            throw error("a constant has no keys (\(keys.joined(separator: ".")))", at: tokens[index - 1])
        default: return .keyPathOn(base, keys)
        }
    }

    /// One key of a key path — a name, a `#`-escaped name, or a collection operator (`@count`) —
    /// or the keys of a `%K` argument.
    mutating func parseKey(after what: String) throws -> [String] {
        switch current.kind {
        case .specifier("K"):
            let token = current
            advance()
            guard case .keyPath(let keys) = try argumentExpression("K", token: token) else { return [] }
            return keys
        case .word(let w) where !PredicateReservedWords.isReserved(w):
            advance()
            return [w]
        case .word(let w):
            throw error("\"\(w)\" is a reserved word; write #\(w) to use it as a key")
        case .escapedWord(let w):
            advance()
            return [w]
        case .symbol("@"):
            let at = current
            advance()
            guard case .word(let name) = current.kind else { throw error("expected a collection operator after \"@\"", at: at) }
            let key = "@" + name
            guard KeyPathEvaluator.operators.contains(key) else {
                throw error("\"\(key)\" is not a collection operator (\(KeyPathEvaluator.operators.sorted().joined(separator: ", ")))", at: at)
            }
            advance()
            return [key]
        default:
            throw error("expected a key after \(what), found \(describe(current))")
        }
    }

    mutating func parsePrimary() throws -> ObjectExpression {
        let token = current
        switch token.kind {
        case .integer(let text):
            advance()
            if let value = Int64(text) { return .constant(.int(value)) }
            guard let real = Double(text) else { throw error("\(text) is not a number", at: token) }
            return .constant(.double(real))
        case .real(let text):
            advance()
            guard let value = Double(text) else { throw error("\(text) is not a number", at: token) }
            return .constant(.double(value))
        case .string(let text):
            advance()
            return .constant(.string(text))
        case .variable(let name):
            advance()
            return .variable(name)
        case .escapedWord(let name):
            advance()
            return .keyPath([name])
        case .specifier(let specifier):
            advance()
            return try argumentExpression(specifier, token: token)
        case .symbol("{"):
            advance()
            var elements: [ObjectExpression] = []
            if !isSymbol("}") {
                elements.append(try parseExpression())
                while isSymbol(",") {
                    advance()
                    elements.append(try parseExpression())
                }
            }
            try expectSymbol("}", "to close the aggregate")
            return Self.aggregate(elements)
        case .symbol("("):
            advance()
            let inner = try parseExpression()
            try expectSymbol(")", "to close the parenthesis")
            return inner
        case .symbol("@"):
            return .keyPath(try parseKey(after: "the start of a key path"))
        case .word(let word):
            switch word.uppercased() {
            case "NULL", "NIL": advance(); return .constant(.null)
            case "TRUE", "YES": advance(); return .constant(.bool(true))
            case "FALSE", "NO": advance(); return .constant(.bool(false))
            case "SELF": advance(); return .evaluatedObject
            case "SUBQUERY": return try parseSubquery()
            case "CAST": return try parseCast()
            case "FUNCTION", "FETCH", "FIRST", "LAST", "SIZE", "ANYKEY", "INDEX", "ASSIGN":
                throw error("\(word.uppercased()) is not supported by Arbor's predicates (docs/predicates.md lists the grammar)")
            default:
                if PredicateReservedWords.isReserved(word) {
                    throw error("expected a value, found the reserved word \(word.uppercased()) (write #\(word) for a key of that name)")
                }
                advance()
                return .keyPath([word])
            }
        case .end:
            throw error("the predicate ends where a value was expected")
        default:
            throw error("expected a value (a key, a number, a string, NULL, TRUE, FALSE, SELF, $variable, %@, {…}), found \(describe(token))")
        }
    }

    /// `{a, b}`: a constant list when every element is constant.
    static func aggregate(_ elements: [ObjectExpression]) -> ObjectExpression {
        var values: [PredicateValue] = []
        for element in elements {
            guard case .constant(let value) = element else { return .aggregate(elements) }
            values.append(value)
        }
        return .constant(.list(values))
    }

    /// The expression a format argument stands for.
    mutating func argumentExpression(_ specifier: Character, token: PredicateToken) throws -> ObjectExpression {
        let argument = try nextArgument(specifier, at: token)
        func wrong(_ expected: String) -> ArborError {
            var failure = ArborError(.wrongValueType, "%\(specifier) (argument \(argumentIndex)) needs \(expected); \(argument.map { "\(type(of: $0)) \($0)" } ?? "nil") given",
                                     value: argument.map { "\($0)" })
            failure.position = token.offset
            return failure
        }
        switch specifier {
        case "K":
            guard let path = argument as? String ?? (argument as? Substring).map(String.init), !path.isEmpty else {
                throw wrong("a key path string")
            }
            return ObjectExpression.key(path)
        case "d", "i", "u", "x", "X", "o":
            let value = try PredicateValue.from(argument)
            switch value {
            case .int, .null: return .constant(value)
            case .bool(let b): return .constant(.int(b ? 1 : 0))
            case .double(let d) where d.rounded(.towardZero) == d && abs(d) < 9.2e18: return .constant(.int(Int64(d)))
            default: throw wrong("an integer")
            }
        case "f", "g", "e":
            let value = try PredicateValue.from(argument)
            switch value {
            case .double, .null: return .constant(value)
            case .int(let n): return .constant(.double(Double(n)))
            case .decimal(let d): return .constant(.double(NSDecimalNumber(decimal: d).doubleValue))
            default: throw wrong("a number")
            }
        case "s":
            let value = try PredicateValue.from(argument)
            guard case .string = value else { throw wrong("a string") }
            return .constant(value)
        default:
            do {
                return .constant(try PredicateValue.from(argument))
            } catch var failure as ArborError {
                failure.position = token.offset
                throw failure
            }
        }
    }

    /// `SUBQUERY(collection, $variable, predicate)`.
    mutating func parseSubquery() throws -> ObjectExpression {
        let start = current
        advance()
        try expectSymbol("(", "after SUBQUERY")
        let collection = try parseExpression()
        try expectSymbol(",", "after the SUBQUERY's collection")
        guard case .variable(let name) = current.kind else {
            throw error("expected the SUBQUERY's variable ($x) as its second argument, found \(describe(current))")
        }
        advance()
        try expectSymbol(",", "after the SUBQUERY's variable")
        let predicate = try parsePredicate()
        try expectSymbol(")", "to close the SUBQUERY begun at offset \(start.offset)")
        return try parsePostfix(.subquery(collection, variable: name, predicate))
    }

    /// `CAST(value, "type")`: the way the format prints dates, decimals, UUIDs, URLs, data and
    /// object IDs, which have no literals of their own.
    mutating func parseCast() throws -> ObjectExpression {
        let start = current
        advance()
        try expectSymbol("(", "after CAST")
        let valueToken = current
        let value = try parseExpression()
        try expectSymbol(",", "after the value to CAST")
        guard case .string(let typeName) = current.kind else { throw error("expected the type to CAST to, as a string (\"NSDate\")") }
        advance()
        try expectSymbol(")", "to close the CAST")
        func bad() -> ArborError { error("CAST cannot make a \(typeName) from that value", at: valueToken) }
        switch (typeName, value) {
        case ("NSDate", .constant(.int(let n))): return .constant(.date(Date(timeIntervalSinceReferenceDate: Double(n))))
        case ("NSDate", .constant(.double(let d))): return .constant(.date(Date(timeIntervalSinceReferenceDate: d)))
        case ("NSNumber", .constant(.string(let s))):
            guard let d = Double(s) else { throw bad() }
            return .constant(.double(d))
        case ("NSDecimalNumber", .constant(.string(let s))):
            guard let d = Decimal(string: s, locale: Locale(identifier: "en_US_POSIX")) else { throw bad() }
            return .constant(.decimal(d))
        case ("UUID", .constant(.string(let s))):
            guard let uuid = UUID(uuidString: s) else { throw bad() }
            return .constant(.uuid(uuid))
        case ("NSURL", .constant(.string(let s))):
            guard let url = URL(string: s) else { throw bad() }
            return .constant(.url(url))
        case ("NSData", .constant(.string(let s))):
            guard let data = Data(base64Encoded: s) else { throw bad() }
            return .constant(.data(data))
        case ("ManagedObjectID", .constant(.string(let s))):
            guard let url = URL(string: s), let id = ManagedObjectID(uri: url) else { throw bad() }
            return .constant(.objectID(id))
        case ("NSDate", _), ("NSNumber", _), ("NSDecimalNumber", _), ("UUID", _), ("NSURL", _), ("NSData", _), ("ManagedObjectID", _):
            throw bad()
        default:
            throw error("CAST to \"\(typeName)\" is not supported (NSDate, NSNumber, NSDecimalNumber, UUID, NSURL, NSData, ManagedObjectID)", at: start)
        }
    }
}
