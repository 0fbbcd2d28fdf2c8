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
        try self.init(format: format, argumentArray: arguments)
    }

    /// Parses an expression format string with its arguments in an array.
    ///
    /// - Throws: as ``ObjectPredicate/init(format:_:)``.
    public init(format: String, argumentArray arguments: [Any?]) throws {
        var parser = try PredicateParser(format, arguments: arguments)
        self = try parser.parseWholeExpression()
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
    /// Arithmetic operators met so far: a chain (`a + b + c`) nests one level per operator in the
    /// parsed tree without counting towards ``depth``, so chains have a bound of their own — the
    /// evaluators, the printer and the tree's own release recurse through it. A unary minus
    /// that is not folded into a number counts too: the tree holds it as `0 - x`, and that is
    /// how it prints, so a string and its printed form have the same count.
    var operators = 0
    static let maximumOperators = 200
    /// Parenthesised predicates already read, by the token of their "(": the result, and the
    /// token and argument after them (so a "(" is never parsed twice: no exponential time).
    var parenthesised: [Int: Result<(ObjectPredicate, Int, Int), ArborError>] = [:]

    init(_ format: String, arguments: [Any?]) throws {
        (characters, tokens) = try LexedFormats.shared.lexed(format)
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
        // Only words have a folded text.
        index + ahead < tokens.count && tokens[index + ahead].folded == word
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
        case .word:
            switch tokens[i].folded {
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
}
