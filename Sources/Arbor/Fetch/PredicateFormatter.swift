import Foundation

/// Prints predicates and expressions as format strings that parse back to the same tree
/// (`ObjectPredicate(format: p.predicateFormat) == p` for every predicate the parser makes).
enum PredicateFormatter {
    static func format(_ predicate: ObjectPredicate) -> String {
        switch predicate {
        case .constant(let value): return value ? "TRUEPREDICATE" : "FALSEPREDICATE"
        case .not(let inner): return "NOT " + nested(inner)
        case .and(let terms): return terms.isEmpty ? "TRUEPREDICATE" : terms.map(nested).joined(separator: " AND ")
        case .or(let terms): return terms.isEmpty ? "FALSEPREDICATE" : terms.map(nested).joined(separator: " OR ")
        case .comparison(let comparison): return format(comparison)
        }
    }

    /// A predicate inside another: compound ones in parentheses. `NOT` binds tighter than `AND`
    /// and `OR` and takes a `NOT` after it, so it needs none — and each pair of parentheses
    /// counts towards the parser's nesting limit: `!!!…x` must print no deeper than it parsed.
    static func nested(_ predicate: ObjectPredicate) -> String {
        switch predicate {
        case .and(let terms) where terms.count > 1: "(\(format(predicate)))"
        case .or(let terms) where terms.count > 1: "(\(format(predicate)))"
        case .and(let terms) where terms.count == 1: nested(terms[0])
        case .or(let terms) where terms.count == 1: nested(terms[0])
        default: format(predicate)
        }
    }

    static func format(_ comparison: ComparisonPredicate) -> String {
        var text = comparison.modifier == .direct ? "" : comparison.modifier.rawValue + " "
        text += format(comparison.left) + " " + comparison.operator.rawValue
        if !comparison.options.isEmpty {
            text += "[" + (comparison.options.contains(.caseInsensitive) ? "c" : "")
                + (comparison.options.contains(.diacriticInsensitive) ? "d" : "") + "]"
        }
        return text + " " + format(comparison.right)
    }

    static func format(_ expression: ObjectExpression) -> String {
        switch expression {
        case .constant(let value): return literal(value)
        case .evaluatedObject: return "SELF"
        case .keyPath(let keys): return keys.map(key).joined(separator: ".")
        case .keyPathOn(let base, let keys):
            let head: String
            switch base {
            case .variable, .subquery, .keyPathOn, .evaluatedObject: head = format(base)
            default: head = "(\(format(base)))"
            }
            return ([head] + keys.map(key)).joined(separator: ".")
        case .variable(let name): return "$" + name
        case .aggregate(let elements): return "{" + elements.map(format).joined(separator: ", ") + "}"
        case .arithmetic(let op, let a, let b):
            return operand(a, binding: precedence(op)) + " " + op.rawValue + " " + operand(b, binding: precedence(op) + 1)
        case .subquery(let collection, let variable, let predicate):
            return "SUBQUERY(\(format(collection)), $\(variable), \(format(predicate)))"
        }
    }

    // Arithmetic prints with no more parentheses than the parser needs, so a predicate nested
    // close to the parser's depth limit prints as a string that parses back (each pair of
    // parentheses is a level of nesting): operators of one precedence associate to the left.
    // A negation prints as `0 - x`, as the parser stores it. That costs no more than the `-x`
    // it may have been: the parser counts a unary minus as an operator, as it does the `-` of
    // `0 - x`, and a unary minus costs a level of nesting, as the parentheses `0 - x` needs
    // in some places (`a - (0 - x)`, `(0 - x) * b`) do; elsewhere it needs none. Printing `-x`
    // instead would add a level where `0 - x` was written.

    static func precedence(_ op: ObjectExpression.ArithmeticOperator) -> Int {
        op == .add || op == .subtract ? 1 : 2
    }

    /// An operand that must bind at least as tightly as `level`: arithmetic of a lower
    /// precedence in parentheses (`level` is the operator's own precedence on the left, one more
    /// on the right, where `a - (b - c)` needs them).
    static func operand(_ expression: ObjectExpression, binding level: Int) -> String {
        if case .arithmetic(let inner, _, _) = expression, precedence(inner) < level { return "(\(format(expression)))" }
        return format(expression)
    }

    /// A key of a key path: reserved words escaped with `#`.
    static func key(_ key: String) -> String {
        if key.hasPrefix("@") { return key }
        return PredicateReservedWords.isReserved(key) ? "#" + key : key
    }

    static func literal(_ value: PredicateValue) -> String {
        switch value {
        case .null: return "NULL"
        case .bool(let b): return b ? "TRUE" : "FALSE"
        case .int(let n): return String(n)
        case .double(let d): return d.isFinite ? "\(d)" : "CAST(\(quoted("\(d)")), \"NSNumber\")"
        case .decimal(let d): return "CAST(\(quoted(d.description)), \"NSDecimalNumber\")"
        case .string(let s): return quoted(s)
        case .date(let date):
            let interval = date.timeIntervalSinceReferenceDate
            return "CAST(\(interval.isFinite ? "\(interval)" : literal(.double(interval))), \"NSDate\")"
        case .data(let data): return "CAST(\(quoted(data.base64EncodedString())), \"NSData\")"
        case .uuid(let uuid): return "CAST(\(quoted(uuid.uuidString)), \"UUID\")"
        case .url(let url): return "CAST(\(quoted(url.absoluteString)), \"NSURL\")"
        case .objectID(let id): return "CAST(\(quoted(id.uriRepresentation().absoluteString)), \"ManagedObjectID\")"
        case .list(let values): return "{" + values.map(literal).joined(separator: ", ") + "}"
        }
    }

    /// A double-quoted string with `\`, `"`, `%` and control characters escaped.
    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": result += "\\\\"
            case "\"": result += "\\\""
            case "%": result += "%%"
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            case "\r": result += "\\r"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    result += "\\u{\(String(scalar.value, radix: 16))}"
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "\""
    }
}
