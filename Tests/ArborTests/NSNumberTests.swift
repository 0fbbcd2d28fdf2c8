import Foundation
import Testing
@testable import Arbor

/// `NSNumber` values wherever Foundation code passes them: attribute values, predicate format
/// arguments and constants, batch-update constants, batch-insert values and fetch predicates.
@Suite("NSNumber values")
struct NSNumberTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Book") {
                Attribute("title", .string)
                Attribute("pages", .integer16)
                Attribute("copies", .integer32)
                Attribute("isbn", .integer64)
                Attribute("rating", .double)
                Attribute("weight", .float)
                Attribute("price", .decimal)
                Attribute("inPrint", .boolean)
                Attribute("edition", .integer32).defaultValue(NSNumber(value: 1))
            }
        }
    }

    /// The code `body` fails with.
    func failure(_ body: () throws -> Void) -> ArborError.Code? {
        do {
            try body()
            return nil
        } catch let error as ArborError {
            return error.code
        } catch {
            return nil
        }
    }

    @Test("S002-02: setValue(_:forKey:) takes an NSNumber for integer, double, float, decimal and boolean attributes, read back as the attribute's Swift type, saved and fetched; and as a default value")
    func attributeValues() throws {
        let stack = try Stack(model: try Self.model())
        let context = stack.context()
        let book = try stack.insert("Book", in: context, [
            "pages": NSNumber(value: 320), "copies": NSNumber(value: Int8(7)), "isbn": NSNumber(value: Int64(9_780_441_013_593)),
            "rating": NSNumber(value: 4.5), "weight": NSNumber(value: Float(0.25)), "price": NSDecimalNumber(string: "19.99"),
            "inPrint": NSNumber(value: true),
        ])
        #expect(try book.value(forKey: "edition") as? Int32 == 1, "a default value given as an NSNumber")
        // A whole number made from a Double fits an integer; a double's decimal is its shortest text.
        try book.setValue(NSNumber(value: 3.0), forKey: "copies")
        try book.setValue(NSNumber(value: 2), forKey: "rating")
        let halfPriced = try stack.insert("Book", in: context, ["price": NSNumber(value: 9.95), "inPrint": NSNumber(value: 0), "pages": NSNumber(value: true)])
        try context.save()

        let other = stack.context()
        let stored = other.object(with: book.objectID)
        #expect(try stored.value(forKey: "pages") as? Int16 == 320)
        #expect(try stored.value(forKey: "copies") as? Int32 == 3)
        #expect(try stored.value(forKey: "isbn") as? Int64 == 9_780_441_013_593)
        #expect(try stored.value(forKey: "rating") as? Double == 2)
        #expect(try stored.value(forKey: "weight") as? Float == 0.25)
        #expect(try stored.value(forKey: "price") as? Decimal == Decimal(string: "19.99"))
        #expect(try stored.value(forKey: "inPrint") as? Bool == true)
        let second = other.object(with: halfPriced.objectID)
        #expect(try second.value(forKey: "price") as? Decimal == Decimal(string: "9.95"), "not 9.949999…")
        #expect(try second.value(forKey: "inPrint") as? Bool == false && second.value(forKey: "pages") as? Int16 == 1)
    }

    @Test("an NSNumber that does not fit its attribute is refused with the error the Swift value gets: a fraction into an integer as the Double, out of range as the Int, 2 into a boolean, any number into a string")
    func refusals() throws {
        let stack = try Stack(model: try Self.model())
        let context = stack.context()
        let book = try stack.insert("Book", in: context, [:])
        func code(_ value: Any, _ key: String) -> ArborError.Code? { failure { try book.setValue(value, forKey: key) } }
        #expect(code(NSNumber(value: 3.5), "pages") == .wrongValueType)
        #expect(code(NSNumber(value: 3.5), "pages") == code(3.5, "pages"))
        #expect(code(NSDecimalNumber(string: "2.25"), "isbn") == .wrongValueType)
        #expect(code(NSNumber(value: Double.nan), "copies") == .wrongValueType)
        #expect(code(NSNumber(value: 70_000), "pages") == .validationNumberTooLarge)
        #expect(code(NSNumber(value: 70_000), "pages") == code(70_000, "pages"))
        #expect(code(NSNumber(value: -70_000), "pages") == .validationNumberTooSmall)
        #expect(code(NSNumber(value: UInt64.max), "isbn") == .validationNumberTooLarge)
        #expect(code(NSNumber(value: 1e300), "isbn") == .validationNumberTooLarge)
        #expect(code(NSNumber(value: 2), "inPrint") == .wrongValueType)
        #expect(code(NSNumber(value: 0.5), "inPrint") == .wrongValueType)
        #expect(code(NSNumber(value: Double.infinity), "price") == .wrongValueType)
        #expect(code(NSNumber(value: 3), "title") == .wrongValueType)
        #expect(try book.value(forKey: "pages") == nil && book.value(forKey: "title") == nil, "nothing changed")
        let error = try #require(throws: ArborError.self) { try book.setValue(NSNumber(value: 3.5), forKey: "pages") }
        #expect(error.message == "Book.pages holds Int16 values; NSNumber given (3.5)", "\(error.message)")
    }

    @Test("predicate format arguments: %@ takes an NSNumber as the number (or boolean) it was made from, %d and %f convert it; it prints as a literal and parses back")
    func formatArguments() throws {
        let longer = try ObjectPredicate(format: "pages > %@", NSNumber(value: 3))
        #expect(longer == (try ObjectPredicate(format: "pages > 3")))
        #expect(longer.predicateFormat == "pages > 3")
        #expect(try ObjectPredicate(format: "rating >= %@", NSNumber(value: 4.5)) == (try ObjectPredicate(format: "rating >= 4.5")))
        #expect(try ObjectPredicate(format: "inPrint == %@", NSNumber(value: true)) == (try ObjectPredicate(format: "inPrint == TRUE")))
        #expect(try ObjectPredicate(format: "price == %@", NSDecimalNumber(string: "1.25")) == (try ObjectPredicate(format: "price == %@", Decimal(string: "1.25")!)))
        #expect(try ObjectPredicate(format: "pages == %d", NSNumber(value: 7)) == (try ObjectPredicate(format: "pages == 7")))
        #expect(try ObjectPredicate(format: "rating == %f", NSNumber(value: 2)) == (try ObjectPredicate(format: "rating == 2.0")))
        #expect(try ObjectPredicate(format: "pages IN %@", [NSNumber(value: 1), NSNumber(value: 2)]) == (try ObjectPredicate(format: "pages IN {1, 2}")))
        let huge = try ObjectPredicate(format: "isbn < %@", NSNumber(value: UInt64.max))
        #expect(huge == (try ObjectPredicate(format: "isbn < %@", Decimal(UInt64.max))), "an unsigned number past Int64.max, exactly")
        #expect(try ObjectPredicate(format: huge.predicateFormat) == huge)
        // Evaluated on plain values, an NSNumber compares as its number.
        #expect(try longer.evaluate(with: ["pages": NSNumber(value: 4)] as [String: Any]))
        #expect(try !longer.evaluate(with: ["pages": NSNumber(value: 2.5)] as [String: Any]))
        #expect(try ObjectPredicate(format: "SELF == 1").evaluate(with: NSNumber(value: true)))
    }

    @Test("fetch requests, batch updates and batch inserts take NSNumber values: predicates the store runs, constants of new values, values of new rows")
    func requests() throws {
        let stack = try Stack(model: try Self.model())
        let context = stack.context()
        for (title, pages, rating, inPrint) in [("Dune", 412, 4.5, true), ("Emma", 474, 3.9, false), ("Ubik", 202, 4.1, true)] {
            _ = try stack.insert("Book", in: context, ["title": title, "pages": NSNumber(value: pages), "rating": NSNumber(value: rating),
                                                      "inPrint": NSNumber(value: inPrint)])
        }
        try context.save()
        func titles(_ predicate: ObjectPredicate) throws -> [String] {
            var request = FetchRequest<ManagedObject>(entityName: "Book")
            request.predicate = predicate
            request.sortDescriptors = [ObjectSortDescriptor(key: "title")]
            let reader = stack.context()
            return try reader.fetch(request).map { try $0.value(forKey: "title") as! String }
        }
        #expect(try titles(ObjectPredicate(format: "pages > %@", NSNumber(value: 300))) == ["Dune", "Emma"])
        #expect(try titles(ObjectPredicate(format: "rating >= %@ AND inPrint == %@", NSNumber(value: 4.2), NSNumber(value: true))) == ["Dune"])
        #expect(try titles(.comparison(ComparisonPredicate(.key("pages"), .lessThan, .value(NSNumber(value: Int16(300)))))) == ["Ubik"])

        var update = BatchUpdateRequest(entityName: "Book")
        update.predicate = try ObjectPredicate(format: "inPrint == %@", NSNumber(value: false))
        update.propertiesToUpdate = ["copies": .value(NSNumber(value: 12)), "price": .value(NSDecimalNumber(string: "7.50")),
                                     "inPrint": .value(NSNumber(value: true))]
        update.resultType = .count
        #expect(try context.execute(update).count == 1)
        #expect(try titles(ObjectPredicate(format: "copies == %@ AND price == %@ AND inPrint == YES", NSNumber(value: 12), NSDecimalNumber(string: "7.5"))) == ["Emma"])

        var refused = BatchUpdateRequest(entityName: "Book")
        refused.propertiesToUpdate = ["pages": .value(NSNumber(value: 70_000))]
        #expect(failure { _ = try context.execute(refused) } == .validationNumberTooLarge)

        let insert = BatchInsertRequest(entityName: "Book", objects: [
            ["title": "Solaris", "pages": NSNumber(value: 204), "weight": NSNumber(value: 0.3), "inPrint": NSNumber(value: 1)],
        ])
        _ = try context.execute(insert)
        #expect(try titles(ObjectPredicate(format: "pages == %@ AND inPrint == TRUE", NSNumber(value: 204))) == ["Solaris"])
        let wrong = BatchInsertRequest(entityName: "Book", objects: [["title": "Bad", "pages": NSNumber(value: 1.5)]])
        #expect(failure { _ = try context.execute(wrong) } == .wrongValueType)
    }
}
