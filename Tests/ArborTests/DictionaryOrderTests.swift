import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// Issue 25, item 4: fetch requests that mean what they say — dictionary fetches sorted by their
/// aggregates' and expressions' aliases (an alias shadows an attribute of the same name), sort
/// keys checked (neither an attribute, a to-one key path nor an alias: invalidFetchRequest), and
/// sorts through to-many relationships refused.
@Suite("Dictionary order and sort keys")
struct DictionaryOrderTests {
    static func catalogueModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Writer") {
                Attribute("name", .string).required()
                Relationship("books", to: "Book", inverse: "writer").toMany()
                Unique("name")
            }
            Entity("Book") {
                Attribute("title", .string)
                Attribute("pages", .integer32)
                Attribute("price", .double)
                Attribute("year", .integer16)
                Relationship("writer", to: "Writer", inverse: "books")
                Relationship("loans", to: "Loan", inverse: "book").toMany()
            }
            Entity("Loan") {
                Attribute("dueAt", .date)
                Relationship("book", to: "Book", inverse: "loans")
            }
        }
    }

    struct Catalogue {
        let stack: Stack
        let context: ManagedObjectContext

        init() throws {
            stack = try Stack(model: try DictionaryOrderTests.catalogueModel())
            context = stack.context()
        }

        @discardableResult
        func writer(_ name: String) throws -> ManagedObject { try stack.insert("Writer", in: context, ["name": name]) }

        @discardableResult
        func book(_ title: String, pages: Int?, price: Double? = nil, year: Int? = nil, writer: ManagedObject?) throws -> ManagedObject {
            let book = try stack.insert("Book", in: context, ["title": title])
            try book.setValue(pages, forKey: "pages")
            try book.setValue(price, forKey: "price")
            try book.setValue(year, forKey: "year")
            try book.setValue(writer, forKey: "writer")
            return book
        }
    }

    @Test("the user's report: a grouped fetch sorted by an aggregate named like an attribute (sum of pages as \"pages\") sorts by the sums, not by some row's pages")
    func aliasShadowsAttribute() throws {
        let catalogue = try Catalogue()
        let a = try catalogue.writer("a"), b = try catalogue.writer("b"), c = try catalogue.writer("c")
        // First rows' pages order b, c, a; the sums order a, b, c.
        try catalogue.book("a1", pages: 10, writer: a)
        try catalogue.book("a2", pages: 990, writer: a)
        try catalogue.book("b1", pages: 500, writer: b)
        try catalogue.book("b2", pages: 100, writer: b)
        try catalogue.book("c1", pages: 300, writer: c)
        try catalogue.context.save()
        var request = FetchRequest<[String: any Sendable]>(entityName: "Book")
        request.propertiesToGroupBy = ["writer.name"]
        request.propertiesToFetch = [.key("writer.name"), .aggregate(.sum, of: "pages", as: "pages")]
        request.sortDescriptors = [ObjectSortDescriptor(key: "pages", ascending: false)]
        let rows = try catalogue.context.fetch(request)
        #expect(rows.map { $0["writer.name"] as? String } == ["a", "b", "c"])
        #expect(rows.map { $0["pages"] as? Int64 } == [1000, 600, 300])
        // A fresh alias, and a group key, sort too (unknownKey before).
        request.propertiesToFetch = [.key("writer.name"), .aggregate(.sum, of: "pages", as: "total")]
        request.sortDescriptors = [ObjectSortDescriptor(key: "total")]
        #expect(try catalogue.context.fetch(request).map { $0["writer.name"] as? String } == ["c", "b", "a"])
        request.sortDescriptors = [ObjectSortDescriptor(key: "writer.name", ascending: false)]
        #expect(try catalogue.context.fetch(request).map { $0["writer.name"] as? String } == ["c", "b", "a"])
        // A limit applies after the sort.
        request.sortDescriptors = [ObjectSortDescriptor(key: "total", ascending: false)]
        request.fetchLimit = 1
        #expect(try catalogue.context.fetch(request).map { $0["total"] as? Int64 } == [1000])
    }

    @Test("an expression's alias sorts one dictionary per object, shadowing the attribute of the same name; attributes not fetched still sort")
    func expressionAlias() throws {
        let catalogue = try Catalogue()
        let w = try catalogue.writer("w")
        try catalogue.book("x", pages: 100, price: 30, writer: w)
        try catalogue.book("y", pages: 200, price: 5, writer: w)
        try catalogue.book("z", pages: 300, price: 10, writer: w)
        try catalogue.context.save()
        var request = FetchRequest<[String: Any]>(entityName: "Book")
        // "pages" is the price per page here: sorting by "pages" sorts by it.
        request.propertiesToFetch = [.key("title"), .expression(try ObjectExpression(format: "price / pages"), as: "pages")]
        request.sortDescriptors = [ObjectSortDescriptor(key: "pages")]
        #expect(try catalogue.context.fetch(request).map { $0["title"] as? String } == ["y", "z", "x"])
        // A plain attribute that is not fetched sorts one-object dictionaries.
        request.sortDescriptors = [ObjectSortDescriptor(key: "price", ascending: false)]
        #expect(try catalogue.context.fetch(request).map { $0["title"] as? String } == ["x", "z", "y"])
        request.fetchOffset = 1
        request.fetchLimit = 1
        #expect(try catalogue.context.fetch(request).map { $0["title"] as? String } == ["z"])
    }

    @Test("sort keys that are neither an attribute, a to-one key path nor an alias are invalidFetchRequest; a sort through a to-many is refused as documented")
    func refusedSortKeys() throws {
        let catalogue = try Catalogue()
        let w = try catalogue.writer("w")
        let book = try catalogue.book("x", pages: 1, writer: w)
        let loan = try catalogue.stack.insert("Loan", in: catalogue.context, ["dueAt": Date()])
        try loan.setValue(book, forKey: "book")
        try catalogue.context.save()
        func code(_ entity: String, _ key: String, configure: (inout FetchRequest<ManagedObject>) -> Void = { _ in }) -> ArborError.Code? {
            var request = FetchRequest<ManagedObject>(entityName: entity)
            request.sortDescriptors = [ObjectSortDescriptor(key: key)]
            configure(&request)
            do {
                _ = try catalogue.context.fetch(request)
                return nil
            } catch let error as ArborError {
                return error.code
            } catch {
                return nil
            }
        }
        #expect(code("Book", "loans.dueAt") == .invalidFetchRequest, "through a to-many (it was accepted)")
        #expect(code("Writer", "books.pages") == .invalidFetchRequest)
        #expect(code("Book", "loans.@count") == .invalidFetchRequest)
        #expect(code("Book", "nope") == .invalidFetchRequest)
        #expect(code("Book", "title.length") == .invalidFetchRequest)
        #expect(code("Book", "writer.name") == nil, "a to-one key path sorts")
        #expect(code("Loan", "book.writer.name") == nil)
        #expect(code("Book", "writer") == nil, "a to-one relationship sorts by its object")
        // Dictionary fetches: the same checks, and a grouped fetch sorts only by what it holds.
        var grouped = FetchRequest<[String: any Sendable]>(entityName: "Book")
        grouped.propertiesToGroupBy = ["year"]
        grouped.propertiesToFetch = [.key("year"), .aggregate(.count, of: "title", as: "n")]
        grouped.sortDescriptors = [ObjectSortDescriptor(key: "title")]
        #expect(arborErrorCode { try catalogue.context.fetch(grouped) } == .invalidFetchRequest)
        grouped.sortDescriptors = [ObjectSortDescriptor(key: "loans.dueAt")]
        #expect(arborErrorCode { try catalogue.context.fetch(grouped) } == .invalidFetchRequest)
        var plain = FetchRequest<[String: any Sendable]>(entityName: "Book")
        plain.propertiesToFetch = [.key("title")]
        plain.sortDescriptors = [ObjectSortDescriptor(key: "loans.dueAt")]
        #expect(arborErrorCode { try catalogue.context.fetch(plain) } == .invalidFetchRequest)
    }

    @Test("dictionary results are Sendable: relationships come back as object IDs, and the rows cross queues from performBackgroundTask")
    func sendableResults() async throws {
        let model = try Self.catalogueModel()
        let container = PersistentContainer(name: "Catalogue", managedObjectModel: model)
        container.persistentStoreDescriptions = [PersistentStoreDescription(type: .inMemory)]
        try container.loadPersistentStores()
        let rows: [[String: any Sendable]] = try await container.performBackgroundTask { context in
            let writer = ManagedObject(entity: model.entity(named: "Writer")!, insertInto: context)
            try writer.setValue("w", forKey: "name")
            let book = ManagedObject(entity: model.entity(named: "Book")!, insertInto: context)
            try book.setValue("t", forKey: "title")
            try book.setValue(writer, forKey: "writer")
            try context.save()
            var request = FetchRequest<[String: any Sendable]>(entityName: "Book")
            request.propertiesToFetch = [.key("title"), .key("writer")]
            return try context.fetch(request)
        }
        #expect(rows.count == 1 && rows[0]["title"] as? String == "t")
        #expect((rows[0]["writer"] as? ManagedObjectID)?.entityName == "Writer")
    }

    // MARK: The property

    /// One book of the random catalogue, as the by-hand computation sees it.
    struct BookRow {
        var writer: String?
        var pages: Int?
        var price: Double?
        var year: Int?
    }

    @Test("property: grouped fetches sorted by random aliases (some named like attributes), group keys and directions agree with groups and a sort done by hand", arguments: Array(0..<40))
    func randomGroupedSorts(round: Int) throws {
        let seed = UInt64(0xA11A5 &+ round &* 7919)
        var random = SplitMix64(seed: seed)
        let catalogue = try Catalogue()
        let writerNames = ["ann", "bo", "cy", "di", "ed"].prefix(Int.random(in: 1...5, using: &random))
        let writers = try writerNames.map { try catalogue.writer($0) }
        var books: [BookRow] = []
        for index in 0..<Int.random(in: 0...40, using: &random) {
            let writer = Int.random(in: -1..<writers.count, using: &random)
            let row = BookRow(writer: writer < 0 ? nil : writerNames[writerNames.startIndex + writer],
                              pages: Int.random(in: 0...9, using: &random) == 0 ? nil : Int.random(in: 1...900, using: &random),
                              price: Int.random(in: 0...7, using: &random) == 0 ? nil : Double(Int.random(in: 0...400, using: &random)) / 4,
                              year: Int.random(in: 0...5, using: &random) == 0 ? nil : Int.random(in: 2018...2022, using: &random))
            try catalogue.book("b\(index)", pages: row.pages, price: row.price, year: row.year, writer: writer < 0 ? nil : writers[writer])
            books.append(row)
        }
        try catalogue.context.save()

        // A random request: a group key, one to three aggregates under distinct random names.
        let groupKey = ["writer.name", "year"].randomElement(using: &random)!
        var names = ["pages", "price", "title", "total", "n", "best", "mean", groupKey == "year" ? "writer" : "year"].shuffled(using: &random)
        let functions: [PropertyToFetch.Function] = [.sum, .count, .min, .max, .average]
        var aggregates: [(name: String, function: PropertyToFetch.Function, key: String)] = []
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            aggregates.append((names.removeFirst(), functions.randomElement(using: &random)!, ["pages", "price"].randomElement(using: &random)!))
        }
        let sortable = [groupKey] + aggregates.map(\.name)
        let descriptors = (0..<Int.random(in: 1...2, using: &random)).map { _ in
            ObjectSortDescriptor(key: sortable.randomElement(using: &random)!, ascending: Bool.random(using: &random))
        }
        var request = FetchRequest<[String: any Sendable]>(entityName: "Book")
        request.propertiesToGroupBy = [groupKey]
        request.propertiesToFetch = [.key(groupKey)] + aggregates.map { .aggregate($0.function, of: $0.key, as: $0.name) }
        request.sortDescriptors = descriptors
        let rows = try catalogue.context.fetch(request)

        // By hand: the groups, each aggregate, as numbers (nil: none).
        var groups: [(key: String, members: [BookRow])] = []
        for book in books {
            let key = groupKey == "year" ? book.year.map { "\($0)" } ?? "nil" : book.writer ?? "nil"
            if let index = groups.firstIndex(where: { $0.key == key }) { groups[index].members.append(book) } else { groups.append((key, [book])) }
        }
        func aggregate(_ function: PropertyToFetch.Function, _ key: String, _ members: [BookRow]) -> Double? {
            let values = members.compactMap { key == "pages" ? $0.pages.map(Double.init) : $0.price }
            switch function {
            case .count: return Double(values.count)
            case .sum: return values.reduce(0, +)
            case .average: return values.isEmpty ? nil : values.reduce(0, +) / Double(values.count)
            case .min: return values.min()
            case .max: return values.max()
            }
        }
        typealias Expected = (key: String?, values: [String: Double?])
        let expected: [Expected] = groups.map { group in
            let key = group.key == "nil" ? nil : group.key
            var values: [String: Double?] = [:]
            for (name, function, property) in aggregates { values[name] = aggregate(function, property, group.members) }
            return (key, values)
        }
        func number(_ value: (any Sendable)?) -> Double? {
            switch value {
            case let int as Int64: Double(int)
            case let double as Double: double
            case let decimal as Decimal: NSDecimalNumber(decimal: decimal).doubleValue
            default: nil
            }
        }
        func key(of row: [String: any Sendable]) -> String? {
            guard let value = row[groupKey] else { return nil }
            return (value as? String) ?? (value as? Int64).map { "\($0)" }
        }
        let context = "seed \(seed): group by \(groupKey), \(aggregates), sorted by \(descriptors)"
        // The same groups with the same aggregates.
        #expect(rows.count == expected.count, "\(context)")
        for row in rows {
            guard let match = expected.first(where: { $0.key == key(of: row) }) else {
                Issue.record("\(context): a group \(row) that should not be there")
                continue
            }
            for (name, value) in match.values {
                let got = number(row[name])
                #expect((got == nil) == (value == nil) && abs((got ?? 0) - (value ?? 0)) < 1e-9, "\(context): \(name) of \(match.key ?? "nil"): \(String(describing: got)) against \(String(describing: value))")
            }
        }
        // The order: each pair of neighbours is in order by the descriptors, compared by hand
        // (nil first ascending, last descending; numbers by value; strings by their scalars).
        func sortValue(_ row: [String: any Sendable], _ name: String) -> (Double?, String?) {
            if name == groupKey && groupKey == "writer.name" { return (nil, row[name] as? String) }
            return (number(row[name]), nil)
        }
        func compare(_ a: (Double?, String?), _ b: (Double?, String?)) -> Int {
            switch (a.0 ?? a.1.map { _ in 0 }, b.0 ?? b.1.map { _ in 0 }) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            default:
                if let x = a.1, let y = b.1 { return x.unicodeScalars.lexicographicallyPrecedes(y.unicodeScalars) ? -1 : (x == y ? 0 : 1) }
                return a.0! < b.0! ? -1 : (a.0! == b.0! ? 0 : 1)
            }
        }
        for (first, second) in zip(rows, rows.dropFirst()) {
            var order = 0
            for descriptor in descriptors where order == 0 {
                let result = compare(sortValue(first, descriptor.key), sortValue(second, descriptor.key))
                order = descriptor.ascending ? result : -result
            }
            #expect(order <= 0, "\(context): \(first) comes before \(second)")
        }
    }
}
