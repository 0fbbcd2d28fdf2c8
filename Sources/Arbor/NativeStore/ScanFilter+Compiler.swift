import ArborStore
import Foundation

/// How a predicate becomes a ``ScanFilter``'s nodes: which comparisons can be decided on a row's
/// bytes, and the constants they compare with, encoded once (ScanFilter.swift decides rows).
extension ScanFilter {
    /// Turns a predicate into nodes (children before parents), links and constants.
    struct Compiler {
        let format: RowFormat
        var nodes: [Node] = []
        var links: [Int] = []
        var spans: [Span] = []
        var pool: [UInt8] = []
        var lastComponent = 0

        init(format: RowFormat) {
            self.format = format
        }

        /// The node for `predicate` (not yet appended; its children are); nil when some part
        /// of it is not decided on bytes.
        mutating func compile(_ predicate: ObjectPredicate) -> Node? {
            switch predicate {
            case .constant(let value): return Node(kind: value ? .constantTrue : .constantFalse)
            case .not(let inner):
                guard let child = compile(inner) else { return nil }
                nodes.append(child)
                links.append(nodes.count - 1)
                return Node(kind: .not, first: links.count - 1, count: 1)
            case .and(let terms), .or(let terms):
                var children: [Int] = []
                for term in terms {
                    guard let child = compile(term) else { return nil }
                    nodes.append(child)
                    children.append(nodes.count - 1)
                }
                links += children
                if case .and = predicate { return Node(kind: .and, first: links.count - children.count, count: children.count) }
                return Node(kind: .or, first: links.count - children.count, count: children.count)
            case .comparison(let comparison):
                guard comparison.modifier == .direct,
                      case .keyPath(let keys) = comparison.left, keys.count == 1,
                      case .attribute(let component, let type)? = format.places[keys[0]],
                      case .constant(let constant) = comparison.right else { return nil }
                let node: Node?
                if comparison.options.isEmpty && comparison.operator != .like {
                    node = test(comparison.operator, constant, type.kind)
                } else {
                    node = foldedTest(comparison.operator, comparison.options, constant, type.kind)
                }
                guard var node else { return nil }
                node.component = component
                lastComponent = max(lastComponent, component)
                return node
            }
        }

        /// Adds constants to the pool; the node's `first` and `count` name them.
        private mutating func node(_ kind: Kind, _ op: ComparisonPredicate.Operator, tag: UInt8, _ constants: [[UInt8]]) -> Node {
            let first = spans.count
            for constant in constants {
                spans.append(Span(start: pool.count, count: constant.count))
                pool += constant
            }
            return Node(kind: kind, op: op, tag: tag, first: first, count: constants.count)
        }

        /// A string test with folding options, or a `LIKE`: constants folded by the evaluator's
        /// fold, stored as raw UTF-8 (a `LIKE` pattern compiled; see ``ScanFilter/likePattern(_:)``).
        private mutating func foldedTest(_ op: ComparisonPredicate.Operator, _ options: ComparisonPredicate.Options,
                                         _ constant: PredicateValue, _ kind: AttributeType.Kind) -> Node? {
            guard kind == .string else { return nil }
            var folding: Folding = options.contains(.caseInsensitive) ? .lowercased : (options.isEmpty ? .none : .asciiOnly)
            func folded(_ value: PredicateValue) -> [UInt8]? {
                guard case .string(let s) = value else { return nil }
                let bytes = Array(PredicateEvaluator.fold(s, options).utf8)
                return bytes.contains(0) ? nil : bytes
            }
            let kindOfNode: Kind
            var constants: [[UInt8]]
            switch op {
            case .equalTo, .notEqualTo, .lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo:
                guard let bytes = folded(constant) else { return nil }
                kindOfNode = .compare
                constants = [bytes]
            case .between, .in:
                guard case .list(let values) = constant, op == .in || values.count == 2 else { return nil }
                constants = values.compactMap(folded)
                guard constants.count == values.count else { return nil }
                kindOfNode = op == .in ? .oneOf : .between
            case .beginsWith, .endsWith, .contains:
                guard let bytes = folded(constant) else { return nil }
                kindOfNode = op == .beginsWith ? .beginsWith : (op == .endsWith ? .endsWith : .contains)
                constants = [bytes]
            case .like:
                guard case .string(let s) = constant,
                      let pattern = ScanFilter.likePattern(PredicateEvaluator.fold(s, options)) else { return nil }
                kindOfNode = .like
                constants = [pattern.bytes]
                // `?` is one scalar: matched on bytes only in ASCII strings (their own fold).
                if folding == .none && pattern.hasAny { folding = .asciiOnly }
            default:
                return nil
            }
            var made = node(kindOfNode, op, tag: KeyEncoding.Tag.string, constants)
            made.folding = folding
            made.asciiConstant = constants.allSatisfy { $0.allSatisfy { $0 < 0x80 } }
            made.options = options
            made.likeAny = op == .like && constants[0].contains(ScanFilter.likeAny)
            return made
        }

        private mutating func test(_ op: ComparisonPredicate.Operator, _ constant: PredicateValue, _ kind: AttributeType.Kind) -> Node? {
            let tag: UInt8
            let encoded: (PredicateValue) -> [UInt8]?
            switch kind {
            case .integer16, .integer32, .integer64:
                tag = KeyEncoding.Tag.int
                encoded = { if case .int(let n) = $0 { KeyEncoding.encode([.int(n)]) } else { nil } }
            case .string:
                tag = KeyEncoding.Tag.string
                encoded = { if case .string(let s) = $0 { KeyEncoding.encode([.string(s)]) } else { nil } }
            default:
                return nil
            }
            switch op {
            case .equalTo, .notEqualTo, .lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo:
                return encoded(constant).map { node(.compare, op, tag: tag, [$0]) }
            case .between, .in:
                guard case .list(let values) = constant, op == .in || values.count == 2 else { return nil }
                let all = values.compactMap(encoded)
                guard all.count == values.count else { return nil }
                return node(op == .in ? .oneOf : .between, op, tag: tag, all)
            case .beginsWith, .endsWith, .contains:
                guard tag == KeyEncoding.Tag.string, case .string(let s) = constant, !s.utf8.contains(0) else { return nil }
                let kind: Kind = op == .beginsWith ? .beginsWith : (op == .endsWith ? .endsWith : .contains)
                return node(kind, op, tag: tag, [Array(s.utf8)])
            default:
                return nil
            }
        }
    }
}
