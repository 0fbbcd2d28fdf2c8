import ArborStore
import Foundation

/// A scan's filter decided on a row's encoded bytes, where the predicate allows: comparisons of
/// an integer or string attribute with a constant (`==`, `!=`, `<`, `<=`, `>`, `>=`, `BETWEEN`,
/// `IN` a list, and `BEGINSWITH`, `ENDSWITH`, `CONTAINS` without `[c]`/`[d]`), joined by `AND`,
/// `OR` and `NOT`.
///
/// The key encoding preserves order and is canonical, so these tests on the bytes give exactly
/// what ``PredicateEvaluator`` gives on decoded values: integers compare as their nine encoded
/// bytes; strings compare by their UTF-8 (the evaluator's scalar order), and a pattern without
/// zero bytes occurs in a string's escaped bytes exactly where it occurs in the string. A row
/// whose bytes do not settle the question (a value of an unexpected kind) is left undecided, and
/// the scan evaluates it the general way — so errors and edge cases stay the evaluator's.
///
/// One filter serves the rows of one entity: it recognizes them by their first component (the
/// entity's name) and locates their components in a scratch buffer. Everything it reads per row
/// is in buffers it owns (nodes, constants, offsets), so testing a row retains and releases
/// nothing.
final class ScanFilter {
    /// What a node does.
    enum Kind: UInt8 {
        case constantFalse, constantTrue, not, and, or
        /// Compares the component with the node's one constant (`op`).
        case compare
        /// The component lies between the node's two constants.
        case between
        /// The component equals one of the node's constants.
        case oneOf
        /// The string's escaped UTF-8 begins with, ends with or contains the node's constant (a
        /// pattern without zero bytes, so escaping does not change where it occurs).
        case beginsWith, endsWith, contains
    }

    /// A node of the compiled predicate. `first` and `count` name its children (in `links`) for
    /// `not`, `and` and `or`, and its constants (in `spans`) for tests.
    struct Node {
        var kind: Kind
        var op: ComparisonPredicate.Operator = .equalTo
        /// The tag of the component kind the test reads (int or string).
        var tag: UInt8 = 0
        var component = 0
        var first = 0
        var count = 0
    }

    /// A constant's bytes in `pool`.
    struct Span {
        var start: Int
        var count: Int
    }

    /// Whether rows of this entity belong in the result (the fetched entity, or a subentity when
    /// the request includes them).
    let accepted: Bool
    /// The layout of the entity's rows (for the evaluator, when bytes do not decide).
    let layout: RawRowLayout
    /// Whether the predicate compiled: false leaves every row to the evaluator.
    let compiled: Bool
    /// The encoded entity name, each row's first component.
    private let name: UnsafeMutableRawBufferPointer
    private let nodes: UnsafeMutableBufferPointer<Node>
    private let links: UnsafeMutableBufferPointer<Int>
    private let spans: UnsafeMutableBufferPointer<Span>
    private let pool: UnsafeMutableRawBufferPointer
    /// The start of each component of the current row located so far, then the end of the
    /// last one located.
    private let components: UnsafeMutableBufferPointer<Int>
    /// The highest component any test reads.
    let lastComponent: Int
    /// When the predicate is one test or an `AND` of tests (the common shape), those tests'
    /// nodes in order: decided by a loop rather than by walking the tree.
    private let conjunction: UnsafeMutableBufferPointer<Int>
    /// The number of tests in `conjunction` (0: walk the tree).
    private let conjunctionCount: Int
    /// The row's *fixed head*: the leading components whose sizes the layout fixes (the name,
    /// the version, then integer, floating-point, date, UUID and boolean attributes up to the
    /// first of another kind). `fixedStarts[k]` is where component `k` starts, for `k` up to
    /// `fixedCount` (the first component after the head). A row whose head holds the expected
    /// tags (`guards`) has its first `fixedCount` components located without reading them.
    private let fixedStarts: UnsafeMutableBufferPointer<Int>
    private let fixedCount: Int
    /// For each head component after the name: its offset and the tags it may have there.
    private let guards: UnsafeMutableBufferPointer<ValuePrefilter.Guard>
    /// For each test of `conjunction`: when it compares an integer of the fixed head with its
    /// constant, where the integer's eight bytes are and the constant as a number (a row that
    /// holds the fixed head has an integer there, so the test is decided by one comparison).
    private let headTests: UnsafeMutableBufferPointer<HeadTest>
    /// The encoded name's first and last eight bytes, when it is 8…16 bytes long (most are): the
    /// row's entity is then told by two loads, not a call to `memcmp`.
    private let nameWords: (first: UInt64, last: UInt64)?

    /// A conjunction test decided on the fixed head (see ``headTests``): the comparison the
    /// engine's prefilter makes of the integer's eight bytes.
    struct HeadTest {
        /// False: the test goes the general way.
        var onHead = false
        var comparison = ValuePrefilter.Comparison(offset: 0, relation: .equal, constant: 0)

        /// The test on a row that holds the fixed head.
        @inline(__always)
        func passes(_ row: UnsafeRawBufferPointer) -> Bool { comparison.passes(row) }
    }

    /// Compiles `predicate` (nil: no filter) for rows of `layout`'s entity.
    init(_ predicate: ObjectPredicate?, layout: RawRowLayout, accepted: Bool) {
        self.layout = layout
        self.accepted = accepted
        let encodedName = KeyEncoding.encode([.string(layout.entity.name)])
        name = .allocate(byteCount: encodedName.count, alignment: 1)
        name.copyBytes(from: encodedName)
        var compiler = Compiler(layout: layout)
        let root = predicate.flatMap { compiler.compile($0) }
        compiled = root != nil
        if let root { compiler.nodes.append(root) }  // the root is the last node
        nodes = .allocate(capacity: max(1, compiler.nodes.count))
        _ = nodes.initialize(from: compiler.nodes)
        links = .allocate(capacity: max(1, compiler.links.count))
        _ = links.initialize(from: compiler.links)
        spans = .allocate(capacity: max(1, compiler.spans.count))
        _ = spans.initialize(from: compiler.spans)
        pool = .allocate(byteCount: max(1, compiler.pool.count), alignment: 1)
        pool.copyBytes(from: compiler.pool)
        lastComponent = compiler.lastComponent
        var tests: [Int] = []
        if let root {
            let isTest = { (node: Node) in ![.constantFalse, .constantTrue, .not, .and, .or].contains(node.kind) }
            if isTest(root) {
                tests = [compiler.nodes.count - 1]
            } else if root.kind == .and {
                let children = compiler.links[root.first..<(root.first + root.count)]
                if children.allSatisfy({ isTest(compiler.nodes[$0]) }) { tests = Array(children) }
            }
        }
        conjunction = .allocate(capacity: max(1, tests.count))
        _ = conjunction.initialize(from: tests)
        conjunctionCount = tests.count
        let head = Self.fixedHead(layout, nameCount: encodedName.count, through: compiler.lastComponent)
        // Room for every component a test reads and for the fixed head (which always spans the
        // name and the version), each start and the end after.
        components = .allocate(capacity: max(compiler.lastComponent + 2, head.starts.count))
        fixedStarts = .allocate(capacity: head.starts.count)
        _ = fixedStarts.initialize(from: head.starts)
        fixedCount = head.starts.count - 1
        guards = .allocate(capacity: max(1, head.guards.count))
        _ = guards.initialize(from: head.guards)
        headTests = .allocate(capacity: max(1, tests.count))
        headTests.initialize(repeating: HeadTest())
        for (position, index) in tests.enumerated() {
            let node = compiler.nodes[index]
            // A test of a head component other than the name and version (always an attribute).
            guard node.kind == .compare, node.tag == KeyEncoding.Tag.int, node.component >= 2,
                  node.component < head.starts.count - 1, node.count == 1 else { continue }
            let span = compiler.spans[node.first]
            guard span.count == 9 else { continue }
            let constant = compiler.pool[(span.start + 1)..<(span.start + 9)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let relation: ValuePrefilter.Relation = switch node.op {
            case .equalTo: .equal
            case .notEqualTo: .notEqual
            case .lessThan: .less
            case .lessThanOrEqualTo: .lessOrEqual
            case .greaterThan: .greater
            default: .greaterOrEqual
            }
            headTests[position] = HeadTest(onHead: true, comparison: ValuePrefilter.Comparison(offset: head.starts[node.component] + 1, relation: relation, constant: constant))
        }
        prefilter = Self.makePrefilter(accepted: accepted, name: encodedName, guards: head.guards, tests: tests.map { compiler.nodes[$0] }, headTests: headTests)
        if (8...16).contains(encodedName.count) {
            let bytes = UnsafeRawBufferPointer(name)
            nameWords = (bytes.loadUnaligned(as: UInt64.self), bytes.loadUnaligned(fromByteOffset: bytes.count - 8, as: UInt64.self))
        } else {
            nameWords = nil
        }
    }

    /// The fixed head of `layout`'s rows, no further than component `last` needs: the start of
    /// each component in it and of the one after it, and the tags that must hold.
    static func fixedHead(_ layout: RawRowLayout, nameCount: Int, through last: Int) -> (starts: [Int], guards: [ValuePrefilter.Guard]) {
        var kinds: [Int: AttributeType.Kind] = [:]
        for case .attribute(let component, let type) in layout.slots.values { kinds[component] = type.kind }
        // The name, then the version: an integer.
        var starts = [0, nameCount, nameCount + 9]
        var guards = [ValuePrefilter.Guard(offset: nameCount, allowed: [KeyEncoding.Tag.int])]
        var component = 2
        while component <= last, let kind = kinds[component], let fixed = RowColumns.fixedComponent(kind) {
            let start = starts[component]
            guards.append(ValuePrefilter.Guard(offset: start, allowed: fixed.tags))
            starts.append(start + fixed.size)
            component += 1
        }
        return (starts, guards)
    }

    /// The engine-side form of the conjunction's leading tests on the fixed head (those before
    /// its first other test): rows of this entity whose head holds as far as those tests read,
    /// and which fail one of them, are passed over inside the engine's leaf loop: rows
    /// ``decide(_:)`` would reject on those same tests. Nil when the predicate does not start
    /// with such a test, or for an entity whose rows the fetch does not take.
    let prefilter: ValuePrefilter?

    /// The ``prefilter`` of a filter with these parts (`tests` and `headTests` by the
    /// conjunction's positions).
    static func makePrefilter(accepted: Bool, name: [UInt8], guards: [ValuePrefilter.Guard], tests: [Node],
                          headTests: UnsafeMutableBufferPointer<HeadTest>) -> ValuePrefilter? {
        guard accepted else { return nil }
        var comparisons: [ValuePrefilter.Comparison] = []
        var lastComponent = 0
        for (position, node) in tests.enumerated() {
            let head = headTests[position]
            guard head.onHead else { break }
            comparisons.append(head.comparison)
            lastComponent = max(lastComponent, node.component)
        }
        guard !comparisons.isEmpty else { return nil }
        // The guard of component k is guards[k - 1] (the version's is the first).
        return ValuePrefilter(prefix: name, guards: Array(guards.prefix(lastComponent)), comparisons: comparisons)
    }

    /// Whether `row` has the fixed head the layout implies (every head component of its
    /// expected kind, so none is nil except booleans).
    @inline(__always)
    private func holdsFixedHead(_ row: UnsafeRawBufferPointer) -> Bool {
        guard row.count >= fixedStarts[fixedCount] else { return false }
        for index in 0..<(fixedCount - 1) where !guards[index].holds(row.load(fromByteOffset: guards[index].offset, as: UInt8.self)) {
            return false
        }
        return true
    }

    deinit {
        name.deallocate()
        nodes.deallocate()
        links.deallocate()
        spans.deallocate()
        pool.deallocate()
        components.deallocate()
        conjunction.deallocate()
        fixedStarts.deallocate()
        guards.deallocate()
        headTests.deallocate()
    }

    /// Whether `predicate` compiles for rows of `layout`'s entity (for explain).
    static func compiles(_ predicate: ObjectPredicate, layout: RawRowLayout) -> Bool {
        var compiler = Compiler(layout: layout)
        return compiler.compile(predicate) != nil
    }

    /// Whether `row` is a row of this filter's entity (its first component is the name).
    @inline(__always)
    func owns(_ row: UnsafeRawBufferPointer) -> Bool {
        if let nameWords {
            return row.count >= name.count && row.loadUnaligned(as: UInt64.self) == nameWords.first
                && row.loadUnaligned(fromByteOffset: name.count - 8, as: UInt64.self) == nameWords.last
        }
        return RowColumns.row(row, begins: UnsafeRawBufferPointer(name))
    }

    /// Whether `row` (one of this entity's) matches; nil when its bytes do not decide it
    /// (including a row whose components cannot be located: the evaluator reports it).
    ///
    /// Components are located lazily, only as far as the tests evaluated read: a test that
    /// rejects a row on an early component spares locating the later ones (measured: skipping a
    /// string to reach the component after it was a sixth of a scan). A row rejected that way
    /// is not checked beyond what was read; rows that match are decoded whole, which checks
    /// every component.
    func decide(_ row: UnsafeRawBufferPointer) -> Bool? {
        guard compiled else { return nil }
        // Components located so far: `components[located]` is where the next one starts.
        var located = 1
        components[0] = 0
        components[1] = name.count
        let onHead = holdsFixedHead(row)
        /// Locates the fixed head at once (before the first test that needs components).
        func locateHead() {
            guard onHead, located < fixedCount else { return }
            for index in 2...fixedCount { components[index] = fixedStarts[index] }
            located = fixedCount
        }
        if conjunctionCount > 0 {
            // In order, as `AND` goes: an undecided test before a failing one leaves it undecided.
            for position in 0..<conjunctionCount {
                let head = headTests[position]
                if onHead && head.onHead {
                    if !head.passes(row) { return false }
                    continue
                }
                locateHead()
                guard let passed = test(nodes[conjunction[position]], row, &located) else { return nil }
                if !passed { return false }
            }
            return true
        }
        locateHead()
        return evaluate(nodes.count - 1, row, &located)
    }

    /// Locates components up to `index` (its start and end) in `components`; false when the
    /// row is malformed there.
    @inline(__always)
    private func locate(through index: Int, _ row: UnsafeRawBufferPointer, _ located: inout Int) -> Bool {
        while located <= index {
            guard let end = KeyEncoding.componentEnd(row, from: components[located]) else { return false }
            located += 1
            components[located] = end
        }
        return true
    }

    private func evaluate(_ index: Int, _ row: UnsafeRawBufferPointer, _ located: inout Int) -> Bool? {
        let node = nodes[index]
        switch node.kind {
        case .constantFalse: return false
        case .constantTrue: return true
        case .not: return evaluate(links[node.first], row, &located).map(!)
        case .and, .or:
            // In order, as the evaluator goes: an undecided term before a deciding one leaves the
            // whole undecided (the evaluator may throw there).
            let decisive = node.kind == .or
            for link in node.first..<(node.first + node.count) {
                guard let value = evaluate(links[link], row, &located) else { return nil }
                if value == decisive { return decisive }
            }
            return !decisive
        default:
            return test(node, row, &located)
        }
    }

    /// Test `node` on its component of `row`, located first.
    @inline(__always)
    private func test(_ node: Node, _ row: UnsafeRawBufferPointer, _ located: inout Int) -> Bool? {
        guard locate(through: node.component, row, &located) else { return nil }
        return test(node, UnsafeRawBufferPointer(rebasing: row[components[node.component]..<components[node.component + 1]]))
    }

    /// The order of two big-endian words as their bytes.
    @inline(__always)
    private static func order(_ a: UInt64, _ b: UInt64) -> Int {
        let x = UInt64(bigEndian: a), y = UInt64(bigEndian: b)
        return x == y ? 0 : (x < y ? -1 : 1)
    }

    @inline(__always)
    private func constant(_ node: Node, _ index: Int) -> UnsafeRawBufferPointer {
        let span = spans[node.first + index]
        return UnsafeRawBufferPointer(rebasing: pool[span.start..<(span.start + span.count)])
    }

    @inline(__always)
    private func test(_ node: Node, _ value: UnsafeRawBufferPointer) -> Bool? {
        guard let tag = value.first else { return nil }
        if tag == KeyEncoding.Tag.null {
            // nil: equal to no constant (these are never nil), in no order, no string.
            return node.kind == .compare && node.op == .notEqualTo
        }
        guard tag == node.tag else { return nil }
        switch node.kind {
        case .compare:
            let constant = constant(node, 0)
            // An integer is nine bytes (located, so complete): its tag, then eight in order.
            let c = tag == KeyEncoding.Tag.int && value.count == 9 && constant.count == 9
                ? Self.order(value.loadUnaligned(fromByteOffset: 1, as: UInt64.self), constant.loadUnaligned(fromByteOffset: 1, as: UInt64.self))
                : KeyEncoding.order(value, constant)
            switch node.op {
            case .equalTo: return c == 0
            case .notEqualTo: return c != 0
            case .lessThan: return c < 0
            case .lessThanOrEqualTo: return c <= 0
            case .greaterThan: return c > 0
            default: return c >= 0
            }
        case .between:
            return KeyEncoding.order(value, constant(node, 0)) >= 0 && KeyEncoding.order(value, constant(node, 1)) <= 0
        case .oneOf:
            for index in 0..<node.count where KeyEncoding.order(value, constant(node, index)) == 0 { return true }
            return false
        default:
            // The string's escaped UTF-8, without its tag and terminator.
            guard value.count >= 3 else { return nil }
            let text = UnsafeRawBufferPointer(rebasing: value[1..<(value.count - 2)])
            let pattern = constant(node, 0)
            if pattern.count > text.count { return false }
            if pattern.isEmpty { return true }
            switch node.kind {
            case .beginsWith:
                return memcmp(text.baseAddress!, pattern.baseAddress!, pattern.count) == 0
            case .endsWith:
                return memcmp(text.baseAddress! + (text.count - pattern.count), pattern.baseAddress!, pattern.count) == 0
            default:
                // memchr for the first byte, then memcmp (memmem is a GNU extension).
                let base = text.baseAddress!, first = Int32(pattern[0])
                let lastStart = text.count - pattern.count
                var start = 0
                while start <= lastStart {
                    guard let hit = memchr(base + start, first, lastStart - start + 1) else { return false }
                    let at = base.distance(to: UnsafeRawPointer(hit))
                    if memcmp(base + at, pattern.baseAddress!, pattern.count) == 0 { return true }
                    start = at + 1
                }
                return false
            }
        }
    }

    /// Turns a predicate into nodes (children before parents), links and constants.
    struct Compiler {
        let layout: RawRowLayout
        var nodes: [Node] = []
        var links: [Int] = []
        var spans: [Span] = []
        var pool: [UInt8] = []
        var lastComponent = 0

        init(layout: RawRowLayout) {
            self.layout = layout
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
                guard comparison.modifier == .direct, comparison.options.isEmpty,
                      case .keyPath(let keys) = comparison.left, keys.count == 1,
                      case .attribute(let component, let type)? = layout.slots[keys[0]],
                      case .constant(let constant) = comparison.right,
                      var node = test(comparison.operator, constant, type.kind) else { return nil }
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
