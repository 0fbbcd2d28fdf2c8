import ArborStore
import Foundation

// Safety: The compiled buffers are allocated in `init`, never resized (the two scratch buffers only
// grow by reallocation, in the functions that use them) and freed in `deinit`; row bytes are lent
// by the engine for each test; a filter is made by one scan and used on its thread.

/// A scan's filter decided on a row's encoded bytes, where the predicate allows: comparisons of
/// an integer or string attribute with a constant (`==`, `!=`, `<`, `<=`, `>`, `>=`, `BETWEEN`,
/// `IN` a list, and `BEGINSWITH`, `ENDSWITH`, `CONTAINS`, `LIKE`), joined by `AND`, `OR` and
/// `NOT`. String comparisons may carry `[c]`, `[d]` or `[cd]`.
///
/// The key encoding preserves order and is canonical, so these tests on the bytes give exactly
/// what ``PredicateEvaluator`` gives on decoded values: integers compare as their nine encoded
/// bytes; strings compare by their UTF-8 (the evaluator's scalar order), and a pattern without
/// zero bytes occurs in a string's escaped bytes exactly where it occurs in the string. A row
/// whose bytes do not settle the question (a value of an unexpected kind) is left undecided, and
/// the scan evaluates it the general way — so errors and edge cases stay the evaluator's.
///
/// **Folded comparisons** (`[c]`, `[d]`, `[cd]`) take an ASCII fast path: the constant is folded
/// once, by the evaluator's own ``PredicateEvaluator/fold(_:_:)``; a row's string that is all
/// ASCII folds to itself (`[d]`) or to its ASCII lowercase (`[c]`, `[cd]`), computed eight bytes
/// at a time into a scratch buffer while checking that no byte is above 0x7F. For `[c]`, other
/// scalars are lowered on the bytes too, through ``UnicodeLowercase`` (exactly the evaluator's
/// `lowercased()`). For `[d]` and `[cd]`, a string with other scalars is folded by the
/// evaluator's fold (``slowFold``, remembered) — except that with an ASCII constant, `BEGINSWITH`
/// is decided when the prefix lies in the string's ASCII start and `CONTAINS` when an occurrence
/// is found. Bytes that are not well-formed UTF-8, or an escaped zero (`00 FF`), leave the row
/// undecided. `LIKE`'s pattern is compiled to bytes with `*` as `FF` and `?` as `FE` (bytes
/// UTF-8 never holds); matched on bytes, `?` needs an ASCII string (one byte, one scalar), `*`
/// and literals do not (UTF-8 literals only match at scalar boundaries).
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
        /// The string matches the node's compiled `LIKE` pattern (`FF` for `*`, `FE` for `?`).
        case like
    }

    /// How a string test folds the row's string before testing it (its constants are folded
    /// when compiled).
    enum Folding: UInt8 {
        /// The bytes as stored.
        case none
        /// `[d]`, and a case-sensitive `LIKE` with `?`: an ASCII string is its own fold (and
        /// one byte per scalar); any other string is undecided.
        case asciiOnly
        /// `[c]`, `[cd]`: a string's letters lowered (every scalar's for `[c]`, ASCII's for `[cd]`,
        /// whose other scalars the evaluator's fold takes).
        case lowercased
    }

    /// The `LIKE` pattern bytes standing for `*` and `?` (never in UTF-8).
    static let likeStar: UInt8 = 0xFF
    static let likeAny: UInt8 = 0xFE

    /// How an ordering comparison's operand must relate to its constant (nil for an operator
    /// that does not order): the one mapping the byte tests, the engine's prefilters and the
    /// folded tests share.
    @inline(__always)
    static func relation(of op: ComparisonPredicate.Operator) -> ValuePrefilter.Relation? {
        switch op {
        case .equalTo: .equal
        case .notEqualTo: .notEqual
        case .lessThan: .less
        case .lessThanOrEqualTo: .lessOrEqual
        case .greaterThan: .greater
        case .greaterThanOrEqualTo: .greaterOrEqual
        default: nil
        }
    }

    /// A node of the compiled predicate. `first` and `count` name its children (in `links`) for
    /// `not`, `and` and `or`, and its constants (in `spans`) for tests.
    struct Node {
        var kind: Kind
        var op: ComparisonPredicate.Operator = .equalTo
        /// The tag of the component kind the test reads (int or string).
        var tag: UInt8 = 0
        /// For string tests: how the row's string is folded. A folded test's constants are the
        /// folded text's raw UTF-8 (no tag, no terminator), as are `LIKE` patterns.
        var folding: Folding = .none
        /// For folded tests: whether the constants are ASCII (a row's string with other bytes
        /// may still be decided: see ``ScanFilter/foldedTest(_:_:)``).
        var asciiConstant = false
        /// For folded tests and `LIKE`: the comparison's options (the slow path folds with them).
        var options: ComparisonPredicate.Options = []
        /// For `LIKE`: whether the pattern has a `?` (one scalar: bytes decide only ASCII).
        var likeAny = false
        var component = 0
        var first = 0
        var count = 0

        /// Whether the test reads a string's text alone — `BEGINSWITH`, `ENDSWITH`, `CONTAINS`,
        /// a folded test or `LIKE` — not its key-encoding component (as an unfolded comparison
        /// does): a record's text column is then tested where it lies (``ScanFilter/recordText(_:_:)``).
        var readsTextOnly: Bool {
            tag == KeyEncoding.Tag.string && (kind == .beginsWith || kind == .endsWith || kind == .contains || kind == .like || folding != .none)
        }
    }

    /// A constant's bytes in `pool`.
    struct Span {
        var start: Int
        var count: Int
    }

    /// Whether rows of this entity belong in the result (the fetched entity, or a subentity when
    /// the request includes them).
    let accepted: Bool
    /// The format of the entity's rows (for the evaluator, when bytes do not decide).
    let format: RowFormat
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
    let components: UnsafeMutableBufferPointer<Int>
    /// The highest component any test reads.
    let lastComponent: Int
    /// Where folded strings are written (grown as a longer string needs).
    var scratch: UnsafeMutableRawBufferPointer = .allocate(byteCount: 256, alignment: 8)
    /// Records (layout 3): whether the rows are records, whose columns the tests read as the
    /// key-encoding components layouts 1 and 2 store (transcoded into ``componentScratch``); the
    /// record of the current row as parsed so far (its columns' serial types in ``recordTypes``
    /// and payload starts in ``components``, the first `recordLocated` of them; -1: the header
    /// is not read yet).
    let isRecords: Bool
    let recordTypes: UnsafeMutableBufferPointer<UInt64>
    var recordLocated = -1
    var recordTypePosition = 0
    var recordHeaderEnd = 0
    var componentScratch: UnsafeMutableRawBufferPointer = .allocate(byteCount: 256, alignment: 8)
    /// Folds of non-ASCII strings already made, by option byte and string bytes.
    var foldCache: [[UInt8]: [UInt8]] = [:]
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

    /// Compiles `predicate` (nil: no filter) for rows of `format`'s entity.
    init(_ predicate: ObjectPredicate?, format: RowFormat, accepted: Bool) {
        // Long: the compiled filter's buffers are allocated and filled here, once each, the later
        // ones sized from the earlier (nodes, conjunction, head, head tests, prefilter); no method
        // may run before all are set.
        self.format = format
        self.accepted = accepted
        let encodedName = format.entityPrefix
        name = .allocate(byteCount: encodedName.count, alignment: 1)
        name.copyBytes(from: encodedName)
        var compiler = Compiler(format: format)
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
        isRecords = format.layout == .records
        recordTypes = .allocate(capacity: compiler.lastComponent + 2)
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
        let head = format.fixedHead(through: compiler.lastComponent)
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
            guard node.kind == .compare, node.tag == KeyEncoding.Tag.int, node.component >= RowFormat.firstColumnComponent,
                  node.component < head.starts.count - 1, node.count == 1 else { continue }
            let span = compiler.spans[node.first]
            guard span.count == 9 else { continue }
            let constant = compiler.pool[(span.start + 1)..<(span.start + 9)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            // A compare node's operator orders (the compiler makes no other).
            let relation = Self.relation(of: node.op) ?? .greaterOrEqual
            headTests[position] = HeadTest(onHead: true, comparison: ValuePrefilter.Comparison(offset: head.starts[node.component] + 1, relation: relation, constant: constant))
        }
        if isRecords {
            prefilter = Self.makeRecordPrefilter(accepted: accepted, prefix: encodedName, tests: tests.map { compiler.nodes[$0] }, pool: compiler.pool, spans: compiler.spans)
        } else {
            prefilter = Self.makePrefilter(accepted: accepted, name: encodedName, guards: head.guards, tests: tests.map { compiler.nodes[$0] }, headTests: headTests)
        }
        prefilteredTests = prefilter?.comparisons.count ?? 0
        if (8...16).contains(encodedName.count) {
            let bytes = UnsafeRawBufferPointer(name)
            nameWords = (bytes.loadUnaligned(as: UInt64.self), bytes.loadUnaligned(fromByteOffset: bytes.count - 8, as: UInt64.self))
        } else {
            nameWords = nil
        }
    }

    /// The engine-side form of the conjunction's leading tests on the fixed head (those before
    /// its first other test): rows of this entity whose head holds as far as those tests read,
    /// and which fail one of them, are passed over inside the engine's leaf loop: rows
    /// ``decide(_:)`` would reject on those same tests. Nil when the predicate does not start
    /// with such a test, or for an entity whose rows the fetch does not take.
    let prefilter: ValuePrefilter?
    /// The conjunction's leading tests that ``prefilter`` makes (0: none).
    let prefilteredTests: Int
    /// Whether the engine runs ``prefilter`` on every row it hands this filter (the scan passed
    /// it to the tree): the filter then trusts it, and ``decide(_:)`` starts after the tests it
    /// made on a row that holds the fixed head — each test made once per row, not twice.
    var enginePrefilters = false

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
        scratch.deallocate()
        recordTypes.deallocate()
        componentScratch.deallocate()
    }

    /// Whether `predicate` compiles for rows of `format`'s entity (for explain).
    static func compiles(_ predicate: ObjectPredicate, format: RowFormat) -> Bool {
        var compiler = Compiler(format: format)
        return compiler.compile(predicate) != nil
    }

    /// Whether `row` is a row of this filter's entity (its first component is the name).
    @inline(__always)
    func owns(_ row: UnsafeRawBufferPointer) -> Bool {
        if let nameWords {
            return row.count >= name.count && row.loadUnaligned(as: UInt64.self) == nameWords.first
                && row.loadUnaligned(fromByteOffset: name.count - 8, as: UInt64.self) == nameWords.last
        }
        return RowFormat.row(row, begins: UnsafeRawBufferPointer(name))
    }

    /// Whether `row` (one of this entity's) matches; nil when its bytes do not decide it
    /// (including a row whose components cannot be located: the evaluator reports it).
    ///
    /// Components are located lazily, only as far as the tests evaluated read: a test that
    /// rejects a row on an early component spares locating the later ones (each string before a
    /// component is skipped to reach it). A row rejected that way is not checked beyond what
    /// was read; rows that match are decoded whole, which checks every component.
    func decide(_ row: UnsafeRawBufferPointer) -> Bool? {
        guard compiled else { return nil }
        recordLocated = -1
        // Components located so far: `components[located]` is where the next one starts.
        var located = 1
        components[0] = fixedStarts[0]
        components[1] = fixedStarts[1]
        let onHead = !isRecords && holdsFixedHead(row)
        /// Locates the fixed head at once (before the first test that needs components).
        func locateHead() {
            guard onHead, located < fixedCount else { return }
            for index in 2...fixedCount { components[index] = fixedStarts[index] }
            located = fixedCount
        }
        if conjunctionCount > 0 {
            // In order, as `AND` goes: an undecided test before a failing one leaves it undecided.
            // A row that holds the fixed head holds the prefilter's guards: the tests the engine
            // made on it passed (it would not be here otherwise).
            let first = onHead && enginePrefilters ? prefilteredTests : 0
            for position in first..<conjunctionCount {
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
            guard let end = RowFormat.componentEnd(row, from: components[located]) else { return false }
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
        if isRecords {
            let column = node.component - RowFormat.firstColumnComponent
            if node.readsTextOnly, let text = recordText(column, row) { return textTest(node, text) }
            guard let value = recordComponent(column, row) else { return nil }
            return test(node, value)
        }
        guard locate(through: node.component, row, &located) else { return nil }
        return test(node, UnsafeRawBufferPointer(rebasing: row[components[node.component]..<components[node.component + 1]]))
    }

    /// The order of two big-endian words as their bytes.
    @inline(__always)
    static func order(_ a: UInt64, _ b: UInt64) -> Int {
        let x = UInt64(bigEndian: a), y = UInt64(bigEndian: b)
        return x == y ? 0 : (x < y ? -1 : 1)
    }

    @inline(__always)
    func constant(_ node: Node, _ index: Int) -> UnsafeRawBufferPointer {
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
        if node.folding != .none || node.kind == .like {
            guard value.count >= 3 else { return nil }
            return foldedTest(node, UnsafeRawBufferPointer(rebasing: value[1..<(value.count - 2)]))
        }
        switch node.kind {
        case .compare:
            let constant = constant(node, 0)
            // An integer is nine bytes (located, so complete): its tag, then eight in order.
            let c = tag == KeyEncoding.Tag.int && value.count == 9 && constant.count == 9
                ? Self.order(value.loadUnaligned(fromByteOffset: 1, as: UInt64.self), constant.loadUnaligned(fromByteOffset: 1, as: UInt64.self))
                : KeyEncoding.order(value, constant)
            return (Self.relation(of: node.op) ?? .greaterOrEqual).admits(c, 0)
        case .between:
            return KeyEncoding.order(value, constant(node, 0)) >= 0 && KeyEncoding.order(value, constant(node, 1)) <= 0
        case .oneOf:
            for index in 0..<node.count where KeyEncoding.order(value, constant(node, index)) == 0 { return true }
            return false
        default:
            // The string's escaped UTF-8, without its tag and terminator.
            guard value.count >= 3 else { return nil }
            return textTest(node, UnsafeRawBufferPointer(rebasing: value[1..<(value.count - 2)]))
        }
    }

    /// A test that reads a string's text alone (``Node/readsTextOnly``) on `text`, its escaped
    /// UTF-8 (raw UTF-8 when it holds no zero byte).
    @inline(__always)
    func textTest(_ node: Node, _ text: UnsafeRawBufferPointer) -> Bool? {
        if node.folding != .none || node.kind == .like { return foldedTest(node, text) }
        let pattern = constant(node, 0)
        if pattern.count > text.count { return false }
        if pattern.isEmpty { return true }
        switch node.kind {
        case .beginsWith:
            return memcmp(text.baseAddress!, pattern.baseAddress!, pattern.count) == 0
        case .endsWith:
            return memcmp(text.baseAddress! + (text.count - pattern.count), pattern.baseAddress!, pattern.count) == 0
        default:
            return Self.contains(text, pattern)
        }
    }
}
