import ArborStore
import Foundation

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
/// at a time into a scratch buffer while checking that no byte is above 0x7F. A string with any
/// other byte (including an escaped zero, `00 FF`) is left undecided, so Unicode folding stays
/// the evaluator's — except that with an ASCII constant, `BEGINSWITH` is decided when the prefix
/// lies in the string's ASCII start and `CONTAINS` when an occurrence is found. `LIKE`'s pattern is compiled to bytes with `*` as `FF` and `?` as `FE` (bytes
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
        /// `[c]`, `[cd]`: an ASCII string folds to its ASCII lowercase; any other is undecided.
        case lowercased
    }

    /// The `LIKE` pattern bytes standing for `*` and `?` (never in UTF-8).
    static let likeStar: UInt8 = 0xFF
    static let likeAny: UInt8 = 0xFE

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
    private let components: UnsafeMutableBufferPointer<Int>
    /// The highest component any test reads.
    let lastComponent: Int
    /// Where folded strings are written (grown as a longer string needs).
    private var scratch: UnsafeMutableRawBufferPointer = .allocate(byteCount: 256, alignment: 8)
    /// Records (layout 3): whether the rows are records, whose columns the tests read as the
    /// key-encoding components layouts 1 and 2 store (transcoded into ``componentScratch``); the
    /// record of the current row as parsed so far (its columns' serial types in ``recordTypes``
    /// and payload starts in ``components``, the first `recordLocated` of them; -1: the header
    /// is not read yet).
    private let isRecords: Bool
    private let recordTypes: UnsafeMutableBufferPointer<UInt64>
    private var recordLocated = -1
    private var recordTypePosition = 0
    private var recordHeaderEnd = 0
    private var componentScratch: UnsafeMutableRawBufferPointer = .allocate(byteCount: 256, alignment: 8)
    /// Folds of non-ASCII strings already made, by option byte and string bytes.
    private var foldCache: [[UInt8]: [UInt8]] = [:]
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

    /// The engine-side form of a conjunction's leading integer comparisons on records: each an
    /// integer column compared with one constant (the engine reads the column's serial type and
    /// payload in its leaf loop). Nil when the predicate does not start with one.
    static func makeRecordPrefilter(accepted: Bool, prefix: [UInt8], tests: [Node], pool: [UInt8], spans: [Span]) -> ValuePrefilter? {
        guard accepted else { return nil }
        var comparisons: [ValuePrefilter.RecordComparison] = []
        for node in tests {
            guard node.kind == .compare, node.tag == KeyEncoding.Tag.int, node.count == 1,
                  node.component >= RowFormat.firstColumnComponent, spans[node.first].count == 9 else { break }
            let span = spans[node.first]
            let bits = pool[(span.start + 1)..<(span.start + 9)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let relation: ValuePrefilter.Relation
            switch node.op {
            case .equalTo: relation = .equal
            case .notEqualTo: relation = .notEqual
            case .lessThan: relation = .less
            case .lessThanOrEqualTo: relation = .lessOrEqual
            case .greaterThan: relation = .greater
            case .greaterThanOrEqualTo: relation = .greaterOrEqual
            default: return comparisons.isEmpty ? nil : ValuePrefilter(prefix: prefix, recordComparisons: comparisons)
            }
            comparisons.append(ValuePrefilter.RecordComparison(column: node.component - RowFormat.firstColumnComponent, relation: relation,
                                                               constant: Int64(bitPattern: bits ^ (1 << 63))))
        }
        return comparisons.isEmpty ? nil : ValuePrefilter(prefix: prefix, recordComparisons: comparisons)
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
    /// rejects a row on an early component spares locating the later ones (measured: skipping a
    /// string to reach the component after it was a sixth of a scan). A row rejected that way
    /// is not checked beyond what was read; rows that match are decoded whole, which checks
    /// every component.
    func decide(_ row: UnsafeRawBufferPointer) -> Bool? {
        guard compiled else { return nil }
        recordLocated = -1
        // Components located so far: `components[located]` is where the next one starts.
        var located = 1
        components[0] = fixedStarts[0]
        components[1] = fixedStarts[1]
        let onHead = holdsFixedHead(row)
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
            guard let value = recordComponent(node.component - RowFormat.firstColumnComponent, row) else { return nil }
            return test(node, value)
        }
        guard locate(through: node.component, row, &located) else { return nil }
        return test(node, UnsafeRawBufferPointer(rebasing: row[components[node.component]..<components[node.component + 1]]))
    }

    /// Column `column` of the current record as the key-encoding component layouts 1 and 2 store
    /// for it (nil, an int or a string; `FF`, which no test's tag matches, for a column of another
    /// type), transcoded into ``componentScratch``; nil when the record is malformed up to there.
    private func recordComponent(_ column: Int, _ row: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        if recordLocated < 0 {
            guard let record = RowFormat.record(row, prefixCount: format.entityPrefix.count) else { return nil }
            recordTypePosition = record.typesStart
            recordHeaderEnd = record.headerEnd
            components[0] = record.headerEnd
            recordLocated = 0
        }
        while recordLocated <= column {
            guard recordTypePosition < recordHeaderEnd else {
                // Past the record's last column: nil.
                return writeComponent(count: 1) { $0[0] = KeyEncoding.Tag.null }
            }
            guard let type = RowFormat.readVarint(row, &recordTypePosition), recordTypePosition <= recordHeaderEnd,
                  let size = RowFormat.payloadSize(type), size <= row.count - components[recordLocated] else { return nil }
            recordTypes[recordLocated] = type
            components[recordLocated + 1] = components[recordLocated] + size
            recordLocated += 1
        }
        let type = recordTypes[column], start = components[column], end = components[column + 1]
        if type == 0 { return writeComponent(count: 1) { $0[0] = KeyEncoding.Tag.null } }
        if let integer = RowFormat.integer(type, row, at: start) {
            return writeComponent(count: 9) { bytes in
                bytes[0] = KeyEncoding.Tag.int
                bytes.storeBytes(of: (UInt64(bitPattern: integer) ^ (1 << 63)).bigEndian, toByteOffset: 1, as: UInt64.self)
            }
        }
        guard type >= 13, type % 2 == 1 else { return writeComponent(count: 1) { $0[0] = 0xFF } }
        // Text: the tag, the UTF-8 with each zero byte escaped as 00 FF, the terminator 00 00.
        let text = UnsafeRawBufferPointer(rebasing: row[start..<end])
        var zeros = 0
        for byte in text where byte == 0 { zeros += 1 }
        return writeComponent(count: text.count + zeros + 3) { bytes in
            bytes[0] = KeyEncoding.Tag.string
            var position = 1
            if zeros == 0 {
                UnsafeMutableRawBufferPointer(rebasing: bytes[1..<(1 + text.count)]).copyMemory(from: text)
                position += text.count
            } else {
                for byte in text {
                    bytes[position] = byte
                    position += 1
                    if byte == 0 {
                        bytes[position] = 0xFF
                        position += 1
                    }
                }
            }
            bytes[position] = 0
            bytes[position + 1] = 0
        }
    }

    /// `count` bytes written by `write` into ``componentScratch`` (grown when short).
    @inline(__always)
    private func writeComponent(count: Int, _ write: (UnsafeMutableRawBufferPointer) -> Void) -> UnsafeRawBufferPointer {
        if componentScratch.count < count {
            componentScratch.deallocate()
            componentScratch = .allocate(byteCount: max(count, componentScratch.count * 2), alignment: 8)
        }
        let bytes = UnsafeMutableRawBufferPointer(rebasing: componentScratch[0..<count])
        write(bytes)
        return UnsafeRawBufferPointer(bytes)
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
        if node.folding != .none || node.kind == .like { return foldedTest(node, value) }
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

    /// A string test on the folded text (`[c]`, `[d]`, `[cd]`) or a `LIKE`: the constants are raw
    /// folded UTF-8. Nil when the row's string leaves the fast path (see the type's notes).
    private func foldedTest(_ node: Node, _ value: UnsafeRawBufferPointer) -> Bool? {
        guard value.count >= 3 else { return nil }
        var text = UnsafeRawBufferPointer(rebasing: value[1..<(value.count - 2)])
        // How many leading bytes are ASCII (the fold of those is known).
        var asciiPrefix = text.count
        switch node.folding {
        case .none:
            break
        case .asciiOnly:
            asciiPrefix = Self.asciiPrefix(text)
        case .lowercased:
            (text, asciiPrefix) = lowercase(text)
        }
        if asciiPrefix < text.count {
            // A string with other bytes: folding is the evaluator's, except where an ASCII
            // constant settles it without them. Folding maps ASCII to ASCII scalar by scalar and
            // never changes a scalar because of the ones after it (a combining mark after an
            // ASCII letter is dropped or kept, the letter stays), so a prefix within the ASCII
            // start is the fold's prefix; and an ASCII occurrence in the bytes (UTF-8 keeps ASCII
            // bytes for ASCII scalars only) is one in the fold. Not finding it decides nothing.
            if node.asciiConstant {
                switch node.kind {
                case .beginsWith:
                    let pattern = constant(node, 0)
                    if pattern.count <= asciiPrefix {
                        return pattern.isEmpty || memcmp(text.baseAddress!, pattern.baseAddress!, pattern.count) == 0
                    }
                case .contains:
                    let pattern = constant(node, 0)
                    if pattern.isEmpty || (pattern.count <= text.count && Self.contains(text, pattern)) { return true }
                default:
                    break
                }
            }
            // Otherwise the string is folded as the evaluator folds it (remembered: names
            // repeat) and the test runs on the folded bytes. `?` counts scalars: not on bytes.
            guard !(node.kind == .like && node.likeAny),
                  let folded = slowFold(UnsafeRawBufferPointer(rebasing: value[1..<(value.count - 2)]), node.options) else { return nil }
            text = folded
        }
        switch node.kind {
        case .like:
            return Self.like(text, constant(node, 0))
        case .compare, .between, .oneOf:
            func order(_ constant: UnsafeRawBufferPointer) -> Int {
                let common = min(text.count, constant.count)
                let c = common == 0 ? 0 : memcmp(text.baseAddress!, constant.baseAddress!, common)
                return c != 0 ? (c < 0 ? -1 : 1) : (text.count == constant.count ? 0 : (text.count < constant.count ? -1 : 1))
            }
            switch node.kind {
            case .between: return order(constant(node, 0)) >= 0 && order(constant(node, 1)) <= 0
            case .oneOf:
                for index in 0..<node.count where order(constant(node, index)) == 0 { return true }
                return false
            default:
                let c = order(constant(node, 0))
                switch node.op {
                case .equalTo: return c == 0
                case .notEqualTo: return c != 0
                case .lessThan: return c < 0
                case .lessThanOrEqualTo: return c <= 0
                case .greaterThan: return c > 0
                default: return c >= 0
                }
            }
        default:
            let pattern = constant(node, 0)
            if pattern.count > text.count { return false }
            if pattern.isEmpty { return true }
            switch node.kind {
            case .beginsWith: return memcmp(text.baseAddress!, pattern.baseAddress!, pattern.count) == 0
            case .endsWith: return memcmp(text.baseAddress! + (text.count - pattern.count), pattern.baseAddress!, pattern.count) == 0
            default: return Self.contains(text, pattern)
            }
        }
    }

    /// Whether `pattern` (not empty, not longer) occurs in `text`: `memchr` for its first
    /// byte, then `memcmp` (`memmem` is a GNU extension).
    @inline(__always)
    static func contains(_ text: UnsafeRawBufferPointer, _ pattern: UnsafeRawBufferPointer) -> Bool {
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

    /// The high bit of each byte of a word.
    private static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// The most strings ``slowFold(_:_:)`` remembers (then it folds without remembering).
    static let foldCacheLimit = 4096

    /// The evaluator's fold of a string's escaped bytes (`options` as the comparison's), as
    /// raw UTF-8 in a buffer of the filter's; nil for a string with a zero byte (escaped), left
    /// to the evaluator. Folds are remembered by the string's bytes, up to ``foldCacheLimit``.
    private func slowFold(_ text: UnsafeRawBufferPointer, _ options: ComparisonPredicate.Options) -> UnsafeRawBufferPointer? {
        guard memchr(text.baseAddress!, 0, text.count) == nil else { return nil }
        var key = [UInt8](repeating: options.rawValue, count: 1)
        key.append(contentsOf: text)
        let folded: [UInt8]
        if let known = foldCache[key] {
            folded = known
        } else {
            folded = Array(PredicateEvaluator.fold(String(decoding: text, as: UTF8.self), options).utf8)
            if foldCache.count < Self.foldCacheLimit { foldCache[key] = folded }
        }
        if folded.count > scratch.count {
            scratch.deallocate()
            scratch = .allocate(byteCount: max(folded.count, scratch.count * 2), alignment: 8)
        }
        folded.withUnsafeBytes { scratch.copyMemory(from: $0) }
        return UnsafeRawBufferPointer(rebasing: scratch[0..<folded.count])
    }

    /// The number of leading ASCII bytes of `text` (eight at a time).
    @inline(__always)
    static func asciiPrefix(_ text: UnsafeRawBufferPointer) -> Int {
        var index = 0
        while index + 8 <= text.count, text.loadUnaligned(fromByteOffset: index, as: UInt64.self) & highBits == 0 { index += 8 }
        while index < text.count, text[index] < 0x80 { index += 1 }
        return index
    }

    /// Whether every byte of `text` is ASCII (eight at a time).
    @inline(__always)
    static func isASCII(_ text: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        while index + 8 <= text.count {
            if text.loadUnaligned(fromByteOffset: index, as: UInt64.self) & highBits != 0 { return false }
            index += 8
        }
        while index < text.count {
            if text[index] >= 0x80 { return false }
            index += 1
        }
        return true
    }

    /// The ASCII lowercase of eight ASCII bytes: `A`…`Z` gain 0x20, the rest stay (a byte is
    /// upper case when adding `0x80 - 'A'` sets its high bit and adding `0x7F - 'Z'` does not;
    /// no byte carries into the next, as every byte is below 0x80).
    @inline(__always)
    static func lowercaseWord(_ word: UInt64) -> UInt64 {
        let atLeastA = word &+ 0x3F3F_3F3F_3F3F_3F3F  // 0x80 - 0x41
        let aboveZ = word &+ 0x2525_2525_2525_2525    // 0x7F - 0x5A
        return word | ((atLeastA & ~aboveZ & highBits) >> 2)
    }

    /// `text` in the scratch buffer with its ASCII upper-case letters lowered (other bytes
    /// kept), and the number of its leading ASCII bytes: all of it is the string's `[c]` fold
    /// when that is its length.
    @inline(__always)
    private func lowercase(_ text: UnsafeRawBufferPointer) -> (UnsafeRawBufferPointer, asciiPrefix: Int) {
        if text.count > scratch.count {
            scratch.deallocate()
            scratch = .allocate(byteCount: max(text.count, scratch.count * 2), alignment: 8)
        }
        var index = 0
        while index + 8 <= text.count {
            let word = text.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            if word & Self.highBits != 0 { break }
            scratch.storeBytes(of: Self.lowercaseWord(word), toByteOffset: index, as: UInt64.self)
            index += 8
        }
        var asciiPrefix = text.count
        while index < text.count {
            let byte = text[index]
            if byte >= 0x80 {
                asciiPrefix = min(asciiPrefix, index)
                scratch[index] = byte
            } else {
                scratch[index] = byte &- 0x41 < 26 ? byte | 0x20 : byte
            }
            index += 1
        }
        return (UnsafeRawBufferPointer(rebasing: scratch[0..<text.count]), asciiPrefix)
    }

    /// `LIKE` on bytes: the evaluator's wildcard matching (one backtrack point, linear for each
    /// star) over a pattern compiled to bytes (`FF` for `*`, `FE` for `?`, escapes resolved).
    static func like(_ text: UnsafeRawBufferPointer, _ pattern: UnsafeRawBufferPointer) -> Bool {
        var t = 0, p = 0, starP = -1, starT = 0
        while t < text.count {
            if p < pattern.count {
                let byte = pattern[p]
                if byte == likeStar {
                    starP = p
                    starT = t
                    p += 1
                    continue
                }
                if byte == likeAny || byte == text[t] {
                    t += 1
                    p += 1
                    continue
                }
            }
            guard starP >= 0 else { return false }
            p = starP + 1
            starT += 1
            t = starT
        }
        while p < pattern.count, pattern[p] == likeStar { p += 1 }
        return p == pattern.count
    }

    /// The bytes a `LIKE` pattern (already folded) compiles to, and whether it has a `?`; nil
    /// for a pattern with a zero byte. The escapes are the evaluator's: a backslash makes the
    /// next scalar literal.
    static func likePattern(_ pattern: String) -> (bytes: [UInt8], hasAny: Bool)? {
        let scalars = Array(pattern.unicodeScalars)
        var bytes: [UInt8] = [], hasAny = false, index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar == "\\", index + 1 < scalars.count {
                bytes += Array(String(scalars[index + 1]).utf8)
                index += 2
                continue
            }
            switch scalar {
            case "*": bytes.append(likeStar)
            case "?":
                bytes.append(likeAny)
                hasAny = true
            default: bytes += Array(String(scalar).utf8)
            }
            index += 1
        }
        return bytes.contains(0) ? nil : (bytes, hasAny)
    }
}
