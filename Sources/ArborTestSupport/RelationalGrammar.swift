/// Random fetch requests over the relational test model — ``RelationalGrammar/model()``
/// (RelationalModel.swift), which the tests and `Fuzz/Sources/FuzzPlanner` build:
///
///     Division (title) ──departments──▸ Department (name, budget) ──employees──▸ Person (abstract:
///     name, salary, rating; Employee adds badge, Contractor agency) ──manager/reports──▸ Person,
///     Person ◂──members── projects ──▸ Project (title) ──client──▸ Client (country)
///
/// as predicate format strings, sort keys and groupings, drawn from a small grammar: comparisons
/// of attributes and of to-one key paths of up to three hops with constants (`==`, `!=`, `<`,
/// `>=`, `BETWEEN`, `IN`, `BEGINSWITH`, `CONTAINS`, `LIKE`, … with and without `[c]`, `[d]`,
/// `[cd]`, and nil), `ANY`/`ALL`/`NONE` through to-many and many-to-many hops, `r.@count` and
/// `SUBQUERY(r, $x, …).@count` compared with constants, collection operators, all combined with
/// `AND`, `OR` and `NOT` (docs/relational-planning.md, "Differential testing").
///
/// The grammar only writes strings; the model and the comparison of results
/// (RelationalModel.swift) are the Arbor side, shared the same way by the tests and the fuzz
/// target. The data pools are the values the test graphs hold (plus constants they do not), so
/// that comparisons both match and miss.
public enum RelationalGrammar {
    // MARK: The model's shape

    /// The kind of an attribute's values, which says which constants it is compared with.
    public enum Value: Sendable, Hashable {
        case personName, departmentName, divisionTitle, projectTitle, country, agency
        case salary, budget, badge, rating

        /// Whether the attribute holds strings.
        public var isString: Bool {
            switch self {
            case .personName, .departmentName, .divisionTitle, .projectTitle, .country, .agency: true
            case .salary, .budget, .badge, .rating: false
            }
        }

        /// Whether the attribute holds numbers that add exactly (for `@sum` and `@avg`).
        public var isNumber: Bool { !isString }
    }

    /// An entity of the model: its attributes, to-one and to-many relationships (with their
    /// destinations).
    struct Shape {
        var attributes: [(name: String, value: Value)]
        var toOne: [(name: String, destination: String)]
        var toMany: [(name: String, destination: String)]
    }

    static let person = Shape(attributes: [("name", .personName), ("salary", .salary), ("rating", .rating)],
                              toOne: [("department", "Department"), ("manager", "Person")],
                              toMany: [("reports", "Person"), ("projects", "Project")])

    static let shapes: [String: Shape] = {
        var employee = person
        employee.attributes.append(("badge", .badge))
        var contractor = person
        contractor.attributes.append(("agency", .agency))
        return [
            "Division": Shape(attributes: [("title", .divisionTitle)], toOne: [], toMany: [("departments", "Department")]),
            "Department": Shape(attributes: [("name", .departmentName), ("budget", .budget)], toOne: [("division", "Division")],
                                toMany: [("employees", "Person")]),
            "Person": person,
            "Employee": employee,
            "Contractor": contractor,
            "Project": Shape(attributes: [("title", .projectTitle)], toOne: [("client", "Client")], toMany: [("members", "Person")]),
            "Client": Shape(attributes: [("country", .country)], toOne: [], toMany: [("projects", "Project")]),
        ]
    }()

    /// The entities a test fetches, people most often (they have every kind of relationship).
    public static let fetchedEntities = ["Person", "Person", "Person", "Employee", "Contractor", "Department", "Department", "Project",
                                         "Division", "Client"]

    // MARK: Data

    /// People's names: case, diacritics, folding's edge cases (a Kelvin sign, a sharp s, a
    /// decomposed accent), LIKE's wildcards, a percent sign, an empty string. (No "Kim": a Kelvin
    /// sign's name is canonically equal to it, and groups would then take the first one's
    /// spelling.)
    public static let personNames: [String?] = ["p1", "p2", "p3", "p14", "Ann", "ann", "Änn", "ANN", "anne", "Bob", "böb", "BOB", "Zoë",
                                                "zoe", "a*b", "A?", "50%", "", "\u{212A}im", "kim", "STRASSE", "stra\u{DF}e",
                                                "Ann\u{301}", "Élan", "o'Neil", nil]
    /// Department names (`JoinTests.Graph.departmentNames`).
    public static let departmentNames = ["Sales", "sales", "Support", "Research", "Ops", "Élan"]
    public static let divisionTitles = ["North", "South", "East"]
    public static let projectTitles = ["Atlas", "Apollo", "Borealis", "Cygnus", "Draco"]
    public static let countries = ["FR", "DE", "US"]
    public static let agencies: [String?] = ["Acme", "acme", "Ácme", "Globex", "globex", nil]
    /// Ratings: NaN, nil, numbers that add exactly in any order (no -0.0: a group keeps its first
    /// row's spelling of equal values, and the order of rows is the plan's).
    public static let ratings: [Double?] = [nil, .nan, -1.5, 0, 0.5, 2, 2.5, 100]

    /// Constants the data does not hold, compared as well.
    static let extraStrings: [Value: [String]] = [
        .personName: ["p", "A", "a", "z", "Nope", "é", "K", "ß", "ss"],
        .departmentName: ["elan", "ELAN", "S", "s", "R", "Nope", "Zed", "sales"],
        .divisionTitle: ["north", "West", "N", "e"],
        .projectTitle: ["A", "atlas", "Nope", "C"],
        .country: ["fr", "GB", "F", "u"],
        .agency: ["A", "ac", "Nope", "G"],
    ]

    static func strings(_ value: Value) -> [String] {
        let data: [String] = switch value {
        case .personName: personNames.compactMap { $0 }
        case .departmentName: departmentNames
        case .divisionTitle: divisionTitles
        case .projectTitle: projectTitles
        case .country: countries
        case .agency: agencies.compactMap { $0 }
        default: []
        }
        return data + (extraStrings[value] ?? [])
    }

    /// A constant for `value`, as the format grammar writes it.
    public static func constant<R: RandomNumberGenerator>(_ value: Value, _ random: inout R) -> String {
        switch value {
        case .salary:
            let step = Int.random(in: -1...21, using: &random) * 500
            return "\(Int.random(in: 0..<5, using: &random) == 0 ? step + 250 : step)"
        case .budget:
            let step = Int.random(in: -1...10, using: &random) * 1000
            return "\(Int.random(in: 0..<5, using: &random) == 0 ? step + 500 : step)"
        case .badge: return "\(Int.random(in: -1...41, using: &random))"
        case .rating: return ["-1.5", "0", "0.5", "2", "2.5", "3", "100", "-0.0", "1e3", "-1"].randomElement(using: &random)!
        default:
            let text = strings(value).randomElement(using: &random)!
            // A prefix a quarter of the time (for BEGINSWITH, <, LIKE).
            if Int.random(in: 0..<4, using: &random) == 0 { return quoted(String(text.prefix(Int.random(in: 1...2, using: &random)))) }
            return quoted(text)
        }
    }

    /// `text` as a string literal of the format grammar (`%` doubled: the parser reads format
    /// specifiers in literals' surroundings).
    public static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": result += "\\\\"
            case "\"": result += "\\\""
            case "%": result += "%%"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    // MARK: Key paths

    /// A key path from `entity`: its keys and its end (an attribute's kind, or nil for a to-one
    /// relationship), and whether it went through a to-many relationship.
    public struct Path: Sendable {
        public var keys: [String]
        public var value: Value?
        public var throughToMany: Bool
        public var text: String { keys.joined(separator: ".") }
    }

    /// A key path through to-one relationships (at most `hops`, fewer more often), ending at an
    /// attribute — or, with `relationshipEnds`, sometimes at a to-one relationship.
    public static func toOnePath<R: RandomNumberGenerator>(from entity: String, hops: Int = 3, relationshipEnds: Bool = false,
                                                          _ random: inout R) -> Path {
        let count = [0, 0, 0, 1, 1, 1, 2, 2, 3].filter { $0 <= hops }.randomElement(using: &random)!
        var keys: [String] = []
        var current = shapes[entity]!
        for _ in 0..<count {
            guard let hop = current.toOne.randomElement(using: &random) else { break }
            keys.append(hop.name)
            current = shapes[hop.destination]!
        }
        if relationshipEnds, let end = current.toOne.randomElement(using: &random), Int.random(in: 0..<5, using: &random) == 0 {
            return Path(keys: keys + [end.name], value: nil, throughToMany: false)
        }
        let attribute = current.attributes.randomElement(using: &random)!
        return Path(keys: keys + [attribute.name], value: attribute.value, throughToMany: false)
    }

    /// A key path of one to three relationships, at least one of them to-many (nil when the
    /// entity has none), ending at an attribute or, sometimes, a to-one relationship.
    public static func toManyPath<R: RandomNumberGenerator>(from entity: String, _ random: inout R) -> Path? {
        guard !shapes[entity]!.toMany.isEmpty else { return nil }
        let count = [1, 1, 1, 2, 2, 3].randomElement(using: &random)!
        // Which hop is the first to-many: the ones before it are to-one.
        let firstToMany = Int.random(in: 0..<count, using: &random)
        var keys: [String] = []
        var current = shapes[entity]!
        var toMany = false
        for position in 0..<count {
            let choices = position < firstToMany ? current.toOne : (position == firstToMany ? current.toMany : current.toOne + current.toMany)
            guard let hop = choices.randomElement(using: &random) ?? current.toMany.randomElement(using: &random) else { break }
            toMany = toMany || current.toMany.contains { $0.name == hop.name }
            keys.append(hop.name)
            current = shapes[hop.destination]!
        }
        guard toMany else { return nil }
        if let end = current.toOne.randomElement(using: &random), Int.random(in: 0..<6, using: &random) == 0 {
            return Path(keys: keys + [end.name], value: nil, throughToMany: true)
        }
        let attribute = current.attributes.randomElement(using: &random)!
        return Path(keys: keys + [attribute.name], value: attribute.value, throughToMany: true)
    }

    // MARK: Predicates

    /// A random predicate of `entity`'s objects, as a format string.
    public static func predicate<R: RandomNumberGenerator>(for entity: String, _ random: inout R, depth: Int = 0) -> String {
        switch depth < 2 ? Int.random(in: 0..<12, using: &random) : 0 {
        case 6, 7:
            let count = Int.random(in: 2...3, using: &random)
            return (0..<count).map { _ in predicate(for: entity, &random, depth: depth + 1) }.joined(separator: " AND ")
        case 8: return "(\(predicate(for: entity, &random, depth: depth + 1)) OR \(predicate(for: entity, &random, depth: depth + 1)))"
        case 10: return "NOT (\(predicate(for: entity, &random, depth: depth + 1)))"
        default: return term(for: entity, &random)
        }
    }

    /// One comparison (or count, subquery, collection operator) of the grammar.
    public static func term<R: RandomNumberGenerator>(for entity: String, _ random: inout R) -> String {
        // Long: one case per shape of term, weighted by its share of the roll: the switch is the
        // grammar's table of terms, and a new shape is one more case.
        let shape = shapes[entity]!
        switch Int.random(in: 0..<43, using: &random) {
        case 0..<16:
            return comparison(toOnePath(from: entity, relationshipEnds: true, &random), modifier: "", &random)
        case 16..<26:
            guard let path = toManyPath(from: entity, &random) else { return term(for: entity, &random) }
            return comparison(path, modifier: ["ANY ", "ANY ", "ALL ", "NONE "].randomElement(using: &random)!, &random)
        case 26:
            // ANY through to-one relationships only: the path's one value decides.
            return comparison(toOnePath(from: entity, relationshipEnds: true, &random), modifier: ["ANY ", "NONE "].randomElement(using: &random)!, &random)
        case 27..<31:
            guard let relationship = shape.toMany.randomElement(using: &random) else { return term(for: entity, &random) }
            return count("\(relationship.name).@count", &random)
        case 31..<35:
            guard let relationship = shape.toMany.randomElement(using: &random) else { return term(for: entity, &random) }
            let variable = ["$x", "$r", "$e"].randomElement(using: &random)!
            let inner = rowPredicate(for: relationship.destination, prefix: variable + ".", &random)
            return count("SUBQUERY(\(relationship.name), \(variable), \(inner)).@count", &random)
        case 35:
            // A collection operator over a to-many relationship (objects answer; unloaded
            // relationships are read from rows).
            guard let relationship = shape.toMany.randomElement(using: &random) else { return term(for: entity, &random) }
            let destination = shapes[relationship.destination]!
            // Ratings too: @min and @max skip NaN, whatever order the values come in.
            guard let attribute = destination.attributes.filter({ $0.value.isNumber }).randomElement(using: &random) else {
                return count("\(relationship.name).@count", &random)
            }
            let function = ["@sum", "@avg", "@min", "@max"].randomElement(using: &random)!
            return "\(relationship.name).\(function).\(attribute.name) \(["<", ">=", "==", "!="].randomElement(using: &random)!) \(constant(attribute.value, &random))"
        case 36:
            // A count the store does not run: the count on the right, or through two hops.
            if Bool.random(using: &random), let relationship = shape.toMany.randomElement(using: &random) {
                return "\(Int.random(in: 0...3, using: &random)) < \(relationship.name).@count"
            }
            guard let path = toManyPath(from: entity, &random) else { return term(for: entity, &random) }
            return count(path.keys.dropLast().joined(separator: ".") + ".@count", &random)
        case 37:
            // Two key paths compared (objects answer).
            let a = toOnePath(from: entity, hops: 2, &random)
            let b = toOnePath(from: entity, hops: 2, &random)
            guard let kind = a.value, let other = b.value, kind.isString == other.isString else { return comparison(a, modifier: "", &random) }
            return "\(a.text) \(["==", "!=", "<", ">="].randomElement(using: &random)!) \(b.text)"
        case 38:
            return ["TRUEPREDICATE", "FALSEPREDICATE"].randomElement(using: &random)!
        case 40, 41:
            // A to-one hop, then a to-many count or aggregate (or a SUBQUERY of it): the store
            // counts per owner and goes back along the hop; counts near the real sizes.
            guard let hop = shape.toOne.randomElement(using: &random), let relationship = shapes[hop.destination]!.toMany.randomElement(using: &random) else {
                return term(for: entity, &random)
            }
            let path = "\(hop.name).\(relationship.name)"
            let destination = shapes[relationship.destination]!
            let big = { (random: inout R) in Int.random(in: 0...20, using: &random) }
            let op = ["==", "!=", "<", "<=", ">", ">="].randomElement(using: &random)!
            switch Int.random(in: 0..<3, using: &random) {
            case 0:
                return "\(path).@count \(op) \(big(&random))"
            case 1:
                let inner = rowPredicate(for: relationship.destination, prefix: "$x.", &random)
                return "SUBQUERY(\(path), $x, \(inner)).@count \(op) \(Int.random(in: 0...6, using: &random))"
            default:
                guard let attribute = destination.attributes.filter({ $0.value.isNumber }).randomElement(using: &random) else {
                    return "\(path).@count \(op) \(big(&random))"
                }
                let function = ["@sum", "@avg", "@min", "@max"].randomElement(using: &random)!
                return "\(path).\(function).\(attribute.name) \(op) \(constant(attribute.value, &random))"
            }
        case 42:
            // A SUBQUERY whose body reads its element's to-one key paths, in a conjunction: a
            // join of the destination's fetch.
            guard let relationship = shape.toMany.randomElement(using: &random) else { return term(for: entity, &random) }
            var path = toOnePath(from: relationship.destination, hops: Int.random(in: 1...2, using: &random), &random)
            path.keys[0] = "$x." + path.keys[0]
            let joined = comparison(path, modifier: "", &random)
            let other = rowPredicate(for: relationship.destination, prefix: "$x.", &random, depth: 1)
            return count("SUBQUERY(\(relationship.name), $x, \(joined) AND \(other)).@count", &random)
        default:
            // An attribute of the fetched entity compared with arithmetic (decoded rows).
            let numbers = shape.attributes.filter { $0.value.isNumber }
            guard let attribute = numbers.randomElement(using: &random) else { return term(for: entity, &random) }
            return "\(attribute.name) + 1 > \(constant(attribute.value, &random))"
        }
    }

    /// `counted <op> constant`, the constant a small count.
    static func count<R: RandomNumberGenerator>(_ counted: String, _ random: inout R) -> String {
        let small = { (random: inout R) in Int.random(in: 0...4, using: &random) }
        switch Int.random(in: 0..<10, using: &random) {
        case 0: return "\(counted) BETWEEN {\(small(&random)), \(small(&random))}"
        case 1: return "\(counted) IN {\(small(&random)), \(small(&random))}"
        default: return "\(counted) \(["==", "!=", "<", "<=", ">", ">="].randomElement(using: &random)!) \(small(&random))"
        }
    }

    /// A predicate of a subquery's element (`$x.salary > 1000`): comparisons of its attributes
    /// (sometimes of a to-one key path, which a row cannot answer), nil tests of its to-one
    /// relationships, combined.
    static func rowPredicate<R: RandomNumberGenerator>(for entity: String, prefix: String, _ random: inout R, depth: Int = 0) -> String {
        let shape = shapes[entity]!
        switch depth < 1 ? Int.random(in: 0..<8, using: &random) : 0 {
        case 5: return "\(rowPredicate(for: entity, prefix: prefix, &random, depth: depth + 1)) AND \(rowPredicate(for: entity, prefix: prefix, &random, depth: depth + 1))"
        case 6: return "(\(rowPredicate(for: entity, prefix: prefix, &random, depth: depth + 1)) OR \(rowPredicate(for: entity, prefix: prefix, &random, depth: depth + 1)))"
        case 7: return "NOT (\(rowPredicate(for: entity, prefix: prefix, &random, depth: depth + 1)))"
        default:
            if let relationship = shape.toOne.randomElement(using: &random), Int.random(in: 0..<6, using: &random) == 0 {
                return "\(prefix)\(relationship.name) \(Bool.random(using: &random) ? "==" : "!=") nil"
            }
            var path = toOnePath(from: entity, hops: Int.random(in: 0..<6, using: &random) == 0 ? 1 : 0, &random)
            path.keys[0] = prefix + path.keys[0]
            return comparison(path, modifier: "", &random)
        }
    }

    /// `modifier path <op> constant`, with an operator and constants that suit the path's end.
    public static func comparison<R: RandomNumberGenerator>(_ path: Path, modifier: String, _ random: inout R) -> String {
        let key = path.text
        guard let value = path.value else {
            // A to-one relationship: compared with nil.
            return "\(modifier)\(key) \(Bool.random(using: &random) ? "==" : "!=") nil"
        }
        switch Int.random(in: 0..<12, using: &random) {
        case 0: return "\(modifier)\(key) == nil"
        case 1: return "\(modifier)\(key) != nil"
        default: break
        }
        var operators = ["==", "!=", "<", "<=", ">", ">=", "BETWEEN", "IN"]
        if value.isString {
            operators += ["BEGINSWITH", "BEGINSWITH", "CONTAINS", "CONTAINS", "ENDSWITH", "LIKE", "LIKE", "==", "MATCHES"]
        }
        let op = operators.randomElement(using: &random)!
        let options = value.isString ? ["", "", "[c]", "[cd]", "[d]"].randomElement(using: &random)! : ""
        switch op {
        case "BETWEEN":
            return "\(modifier)\(key) BETWEEN\(options) {\(constant(value, &random)), \(constant(value, &random))}"
        case "IN":
            let constants = (0..<Int.random(in: 0...3, using: &random)).map { _ in constant(value, &random) }
            return "\(modifier)\(key) IN\(options) {\(constants.joined(separator: ", "))}"
        case "LIKE":
            let wildcard = ["", "*", "?", "*n", "?*", "*a*"].randomElement(using: &random)!
            return "\(modifier)\(key) LIKE\(options) \(constant(value, &random).dropLast())\(wildcard)\""
        case "MATCHES":
            let pattern = ["S.*", "[a-z]+", ".*n", "p[0-9]", "(?i)a.*", ".*"].randomElement(using: &random)!
            return "\(modifier)\(key) MATCHES\(options) \(quoted(pattern))"
        case "BEGINSWITH", "CONTAINS", "ENDSWITH":
            return "\(modifier)\(key) \(op)\(options) \(constant(value, &random))"
        default:
            // The constant on the left now and then (a direct comparison only).
            if modifier.isEmpty, Int.random(in: 0..<6, using: &random) == 0 {
                return "\(constant(value, &random)) \(op)\(options) \(key)"
            }
            return "\(modifier)\(key) \(op)\(options) \(constant(value, &random))"
        }
    }

    // MARK: Sorts

    /// A sort key of the grammar: an attribute or a to-one key path (now and then a to-one
    /// relationship), its direction, and whether strings are compared folded (`[cd]`, or `[c]`).
    public struct Sort: Sendable {
        public var key: String
        public var ascending: Bool
        public var caseInsensitive: Bool
        public var diacriticInsensitive: Bool
    }

    /// None to three sort keys of `entity`'s objects.
    public static func sorts<R: RandomNumberGenerator>(for entity: String, _ random: inout R) -> [Sort] {
        (0..<[0, 0, 1, 1, 1, 2, 2, 3].randomElement(using: &random)!).map { _ in
            let path = toOnePath(from: entity, hops: 2, relationshipEnds: true, &random)
            let folded = path.value?.isString == true ? Int.random(in: 0..<4, using: &random) : 0
            return Sort(key: path.text, ascending: Bool.random(using: &random), caseInsensitive: folded >= 2, diacriticInsensitive: folded == 3)
        }
    }

    /// A window: an offset and a limit (0: none), none half of the time.
    public static func window<R: RandomNumberGenerator>(_ random: inout R) -> (offset: Int, limit: Int) {
        guard Bool.random(using: &random) else { return (0, 0) }
        return (Int.random(in: 0..<4, using: &random) == 0 ? 0 : Int.random(in: 0...12, using: &random),
                Int.random(in: 0..<4, using: &random) == 0 ? 0 : Int.random(in: 1...15, using: &random))
    }

    // MARK: Grouping

    /// A grouped (or aggregated) dictionary fetch of the grammar.
    public struct Grouping: Sendable {
        /// An aggregate: `function` of `keyPath`, named `alias`.
        public struct Aggregate: Sendable {
            /// `sum`, `average`, `min`, `max` or `count` (`PropertyToFetch.Function`'s raw values).
            public var function: String
            public var keyPath: String
            public var alias: String
        }

        public var groupBy: [String]
        public var aggregates: [Aggregate]
        /// A predicate of the dictionaries (their aliases and single-key group keys).
        public var having: String?
        /// Sorts by aliases and group-by keys.
        public var sorts: [Sort]
        public var distinct: Bool
    }

    /// A random grouping of `entity`'s objects: up to two group-by keys (attributes, to-one key
    /// paths, to-one relationships), one to three aggregates, sometimes a having predicate,
    /// sorts, distinctness.
    public static func grouping<R: RandomNumberGenerator>(for entity: String, _ random: inout R) -> Grouping {
        var groupBy: [String] = []
        for _ in 0..<[0, 1, 1, 1, 2, 2].randomElement(using: &random)! {
            let key = toOnePath(from: entity, hops: 2, relationshipEnds: true, &random).text
            if !groupBy.contains(key) { groupBy.append(key) }
        }
        var aggregates: [Grouping.Aggregate] = []
        var numeric: [String] = [], textual: [String] = []
        for index in 0..<Int.random(in: 1...3, using: &random) {
            let function = ["sum", "average", "min", "max", "count"].randomElement(using: &random)!
            var path = toOnePath(from: entity, hops: 2, relationshipEnds: function == "count", &random)
            if function == "sum" || function == "average" {
                // A number to add: the fetched entity's own, or one a hop or two away.
                for _ in 0..<8 where path.value?.isNumber != true { path = toOnePath(from: entity, hops: 2, &random) }
                guard path.value?.isNumber == true else { continue }
            }
            let alias = "a\(index)"
            aggregates.append(.init(function: function, keyPath: path.text, alias: alias))
            if function == "count" || path.value?.isNumber == true { numeric.append(alias) } else if path.value != nil { textual.append(alias) }
        }
        if aggregates.isEmpty { aggregates = [.init(function: "count", keyPath: toOnePath(from: entity, hops: 1, &random).text, alias: "a0")] }
        if aggregates.count == 1, aggregates[0].function == "count" { numeric = ["a0"] }
        var having: String?
        if Int.random(in: 0..<3, using: &random) == 0 {
            if let alias = numeric.randomElement(using: &random), Int.random(in: 0..<4, using: &random) > 0 {
                having = "\(alias) \([">", ">=", "<", "!="].randomElement(using: &random)!) \(["0", "1", "2", "1500", "4000.5", "-1"].randomElement(using: &random)!)"
            } else if let alias = textual.randomElement(using: &random) {
                having = "\(alias) BEGINSWITH[c] \(quoted(["s", "a", "p", "e"].randomElement(using: &random)!))"
            } else if let key = groupBy.first(where: { !$0.contains(".") }) {
                having = "\(key) != nil"
            }
        }
        let sortable = groupBy + aggregates.map(\.alias)
        var sorts: [Sort] = []
        for _ in 0..<[0, 1, 1, 2, 2, 3].randomElement(using: &random)! {
            guard let key = sortable.randomElement(using: &random), !sorts.contains(where: { $0.key == key }) else { continue }
            let folded = Int.random(in: 0..<5, using: &random) == 0
            sorts.append(Sort(key: key, ascending: Bool.random(using: &random), caseInsensitive: folded, diacriticInsensitive: folded))
        }
        return Grouping(groupBy: groupBy, aggregates: aggregates, having: having, sorts: sorts, distinct: Int.random(in: 0..<4, using: &random) == 0)
    }
}

/// A generator driven by bytes (a fuzzer's input): each `next()` spreads one byte over the word,
/// so the grammar's choices follow the bytes; once they run out, a SplitMix64 seeded by them goes
/// on (the grammar always ends: its recursion is bounded).
public struct ByteDrivenGenerator: RandomNumberGenerator {
    private let bytes: [UInt8]
    private var position = 0
    private var rest: SplitMix64

    /// A generator reading `bytes` first.
    public init<Bytes: Collection>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        self.bytes = Array(bytes)
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in self.bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
        rest = SplitMix64(seed: hash)
    }

    /// How many bytes have been read.
    public var consumed: Int { position }

    public mutating func next() -> UInt64 {
        guard position < bytes.count else { return rest.next() }
        let byte = UInt64(bytes[position])
        position += 1
        // The byte in every byte of the word: its high bits choose from small ranges
        // (`random(in:)` multiplies by the range's size and keeps the high word).
        return byte &* 0x0101_0101_0101_0101
    }
}
