import Foundation

/// Expressions: arithmetic, key paths, literals, format arguments, SUBQUERY and CAST.
extension PredicateParser {

    mutating func parseExpression() throws -> ObjectExpression {
        try descend()
        defer { depth -= 1 }
        var value = try parseTerm()
        while isSymbol("+") || isSymbol("-") {
            let op: ObjectExpression.ArithmeticOperator = isSymbol("+") ? .add : .subtract
            try countOperator()
            advance()
            value = .arithmetic(op, value, try parseTerm())
        }
        return value
    }

    mutating func parseTerm() throws -> ObjectExpression {
        var value = try parseUnary()
        while isSymbol("*") || isSymbol("/") {
            let op: ObjectExpression.ArithmeticOperator = isSymbol("*") ? .multiply : .divide
            try countOperator()
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
                // Stored as `0 - x`, and counted as that subtraction: the printer writes it so,
                // and what parses must print as a string that parses back.
                try countOperator()
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

    /// Counts one arithmetic operator (see ``PredicateParser/maximumOperators``).
    mutating func countOperator() throws {
        operators += 1
        if operators > Self.maximumOperators {
            throw error("the predicate has more than \(Self.maximumOperators) arithmetic operators", at: current)
        }
    }

    /// Checks a key path's length (see ``KeyPathEvaluator/maximumKeys``).
    func checkLength(of keys: [String]) throws {
        if keys.count > KeyPathEvaluator.maximumKeys {
            throw error("a key path has more than \(KeyPathEvaluator.maximumKeys) keys", at: current)
        }
    }

    /// Keys after an expression: `.name`, `.@count`, `.@sum.salary`.
    mutating func parsePostfix(_ base: ObjectExpression) throws -> ObjectExpression {
        var keys: [String] = []
        while isSymbol(".") {
            advance()
            keys += try parseKey(after: "\".\"")
            try checkLength(of: keys)
        }
        if isSymbol("[") {
            throw error("index subscripts ([FIRST], [LAST], [SIZE], [n]) are not supported; use @count, or a key path")
        }
        guard !keys.isEmpty else { return base }
        switch base {
        case .keyPath(let head):
            try checkLength(of: head + keys)
            return .keyPath(head + keys)
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
        case .word(let w) where !current.isReservedWord:
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
            guard CollectionOperator.isOperator(key) else {
                throw error("\"\(key)\" is not a collection operator (\(CollectionOperator.names.joined(separator: ", ")))", at: at)
            }
            advance()
            return [key]
        default:
            throw error("expected a key after \(what), found \(describe(current))")
        }
    }

    mutating func parsePrimary() throws -> ObjectExpression {
        // Long: one case per kind of token a value can start with: the switch is the grammar's rule
        // for a primary expression.
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
            let keys = try parseKey(after: "the start of a key path")
            try checkLength(of: keys)
            return .keyPath(keys)
        case .word(let word):
            switch token.folded {
            case "NULL", "NIL": advance(); return .constant(.null)
            case "TRUE", "YES": advance(); return .constant(.bool(true))
            case "FALSE", "NO": advance(); return .constant(.bool(false))
            case "SELF": advance(); return .evaluatedObject
            case "SUBQUERY": return try parseSubquery()
            case "CAST": return try parseCast()
            case "FUNCTION", "FETCH", "FIRST", "LAST", "SIZE", "ANYKEY", "INDEX", "ASSIGN":
                throw error("\(token.folded) is not supported by Arbor's predicates (docs/predicates.md lists the grammar)")
            default:
                if token.isReservedWord {
                    throw error("expected a value, found the reserved word \(token.folded) (write #\(word) for a key of that name)")
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
            let expression = ObjectExpression.key(path)
            if case .keyPath(let keys) = expression { try checkLength(of: keys) }
            return expression
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
    /// object IDs, which have no literals of their own. A date is a number of seconds since
    /// 2001-01-01 (as the format prints it) or an ISO-8601 string (``ISO8601Date``).
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
        case ("NSDate", .constant(.string(let s))):
            do {
                return .constant(.date(try ISO8601Date.date(from: s)))
            } catch {
                throw self.error("CAST cannot make an NSDate from \"\(s)\": \(error.reason) (ISO-8601 dates: \(ISO8601Date.examples))", at: valueToken)
            }
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
