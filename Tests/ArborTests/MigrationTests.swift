import ArborStore
import ArborTestSupport
import Foundation
import InMemoryLogging
import Logging
import MetricsTestKit
import Testing
@testable import Arbor

/// Lightweight migration (issue 27 item 3; docs/migration.md): a store made with one version of
/// a library model opens with the next, keeping every value, link and object ID; what can be
/// done without rewriting rows rewrites none; rows that do not allow the new model are named and
/// the store is left as it was.
@Suite("Lightweight migration")
struct MigrationTests {
    /// What a version of the library model changes from the first.
    enum Change: Hashable {
        case subtitle, rating(default: Int16), ratingIndexed, publisher, renames, noPrice, wideTypes
        case pagesRequired(default: Bool), uniqueTitle, pagesText, noTags, genre, authorRequired, rules
    }

    static func library(_ changes: Set<Change> = []) throws -> ManagedObjectModel {
        let renames = changes.contains(.renames)
        let author = renames ? "Writer" : "Author"
        let title = renames ? "name" : "title"
        let rating = changes.compactMap { change -> Int16? in if case .rating(let value) = change { value } else { nil } }.first
        return try ManagedObjectModel {
            Entity(author) {
                Attribute("name", .string).required()
                Attribute("born", changes.contains(.wideTypes) ? .integer64 : .integer16)
                Relationship("books", to: "Book", inverse: "author").toMany().deleteRule(.cascade)
            }.renamingIdentifier("Author")
            Entity("Book") {
                if renames {
                    Attribute("name", .string).required().renamingIdentifier("title")
                } else {
                    if changes.contains(.rules) {
                        Attribute("title", .string).required().length(1...6)
                    } else {
                        Attribute("title", .string).required()
                    }
                }
                if changes.contains(.pagesText) {
                    Attribute("pages", .string)
                } else if changes.contains(.pagesRequired(default: true)) {
                    Attribute("pages", .integer32).required().defaultValue(Int32(100))
                } else if changes.contains(.pagesRequired(default: false)) {
                    Attribute("pages", .integer32).required()
                } else {
                    Attribute("pages", .integer32)
                }
                if changes.contains(.rules) {
                    Attribute("price", .float).maximum(Float(20))
                } else if !changes.contains(.noPrice) {
                    Attribute("price", changes.contains(.wideTypes) ? .double : .float)
                }
                if changes.contains(.subtitle) {
                    Attribute("subtitle", .string)
                }
                if let rating {
                    Attribute("rating", .integer16).defaultValue(rating)
                }
                if changes.contains(.ratingIndexed) {
                    Indexed("rating")
                }
                if changes.contains(.authorRequired) {
                    Relationship("author", to: author, inverse: "books").required()
                } else {
                    Relationship("author", to: author, inverse: "books")
                }
                if !changes.contains(.noTags) {
                    if renames {
                        Relationship("labels", to: "Tag", inverse: "titles").toMany().renamingIdentifier("tags")
                    } else {
                        Relationship("tags", to: "Tag", inverse: "books").toMany()
                    }
                }
                Indexed(title)
                if changes.contains(.uniqueTitle) {
                    Unique(title)
                }
            }
            if !changes.contains(.noTags) {
                Entity("Tag") {
                    Attribute("label", .string)
                    if renames {
                        Relationship("titles", to: "Book", inverse: "labels").toMany().renamingIdentifier("books")
                    } else {
                        Relationship("books", to: "Book", inverse: "tags").toMany()
                    }
                }
            }
            if changes.contains(.genre) {
                Entity("Genre", parent: "Tag") {
                    Attribute("shelfMark", .string)
                }
            }
            if changes.contains(.publisher) {
                Entity("Publisher") {
                    Attribute("name", .string)
                }
            }
        }
    }

    static let bookCount = 30
    static func title(_ i: Int, duplicates: Bool = false) -> String { duplicates ? "Book \(i % 10)" : "Book \(i)" }
    static func pages(_ i: Int) -> Int32? { i % 4 == 0 ? nil : Int32(100 + i) }
    static func price(_ i: Int) -> Float { Float(i) + 0.5 }
    static func tags(_ i: Int) -> Set<String> { ["t\(i % 4)", "t\((i + 1) % 4)"] }

    /// A store at version 1 (in `rowLayout`), with 3 authors, 30 books and 4 tags; returns its
    /// path and each book's object ID by serial.
    static func makeStore(rowLayout: RowFormat.Layout = .records, duplicateTitles: Bool = false, authorless: Set<Int> = [],
                          on disk: SimulatedDisk? = nil) throws -> (String, [Int: ManagedObjectID]) {
        let path = disk == nil ? try temporaryDirectory() + "/library.arbor" : "/library.arbor"
        let stack: Stack
        if let disk {
            let model = try library()
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addNativeStore(at: path, options: diskOptions(disk))
            stack = Stack(model: model, coordinator: coordinator)
        } else {
            stack = try Stack(model: try library(), path: path, rowLayout: rowLayout)
        }
        let context = stack.context()
        let authors = try (0..<3).map { try stack.insert("Author", in: context, ["name": "A\($0)", "born": Int16(1900 + $0)]) }
        let tags = try (0..<4).map { try stack.insert("Tag", in: context, ["label": "t\($0)"]) }
        var books: [Int: ManagedObject] = [:]
        for i in 0..<bookCount {
            var values: [String: Any] = ["title": title(i, duplicates: duplicateTitles), "price": price(i)]
            if let pages = pages(i) { values["pages"] = pages }
            let book = try stack.insert("Book", in: context, values)
            if !authorless.contains(i) { try book.setValue(authors[i % 3], forKey: "author") }
            try book.setValue(Set(try tags.filter { Self.tags(i).contains(try $0.value(forKey: "label") as! String) }), forKey: "tags")
            books[i] = book
        }
        try context.save()
        return (path, books.mapValues(\.objectID))
    }

    /// Opens `path` with `model` (migrating), returning the stack and the store.
    static func open(_ path: String, _ model: ManagedObjectModel, migration: MigrationOptions = MigrationOptions(),
                     options: DatabaseOptions = DatabaseOptions()) throws -> (Stack, NativeStore) {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addNativeStore(at: path, options: options, migration: migration)
        return (Stack(model: model, coordinator: coordinator), store)
    }

    /// Options whose plan's one lightweight stage, from `old` to `new`, may drop `drops`.
    static func allowing(_ drops: Set<MigrationDrop>, from old: ManagedObjectModel, to new: ManagedObjectModel) -> MigrationOptions {
        var options = MigrationOptions()
        options.plan = MigrationPlan(startingAt: old).lightweight(to: new, dropping: drops)
        return options
    }

    /// The books of a store, by their title's serial.
    static func books(_ context: ManagedObjectContext, title: String = "title") throws -> [Int: ManagedObject] {
        let books = try context.fetch(FetchRequest<ManagedObject>(entityName: "Book"))
        return Dictionary(uniqueKeysWithValues: try books.map { book in
            let text = try #require(book.value(forKey: title) as? String)
            return (try #require(Int(text.dropFirst(5))), book)
        })
    }

    /// Every value and link of version 1's data, read through `model`'s names.
    static func checkData(_ context: ManagedObjectContext, title: String = "title", author: String = "Author", tags: String? = "tags",
                          ids: [Int: ManagedObjectID], price: Bool = true, pages: (Int) -> Int32? = MigrationTests.pages) throws {
        let books = try books(context, title: title)
        #expect(books.count == bookCount)
        for (i, book) in books {
            #expect(book.objectID.primaryKey == ids[i]?.primaryKey, "book \(i) keeps its primary key")
            #expect(try book.value(forKey: "pages") as? Int32 == pages(i), "book \(i).pages")
            if price {
                let stored = try book.value(forKey: "price")
                let value = (stored as? Float).map(Double.init) ?? stored as? Double
                #expect(value == Double(Self.price(i)), "book \(i).price")
            }
            let owner = try #require(try book.value(forKey: "author") as? ManagedObject, "book \(i).author")
            #expect(owner.entity.name == author)
            #expect(try owner.value(forKey: "name") as? String == "A\(i % 3)")
            if let tags {
                let held = try #require(try book.value(forKey: tags) as? Set<ManagedObject>)
                #expect(Set(try held.map { try #require($0.value(forKey: "label") as? String) }) == Self.tags(i), "book \(i).\(tags)")
            }
        }
        for writer in try context.fetch(FetchRequest<ManagedObject>(entityName: author)) {
            let name = try #require(writer.value(forKey: "name") as? String)
            let held = try #require(try writer.value(forKey: "books") as? Set<ManagedObject>)
            #expect(held.count == bookCount / 3, "\(name)'s books")
        }
    }

    static func rowsTree(_ path: String, _ name: String) throws -> [[UInt8]: [UInt8]] {
        let database = try Database(path: path)
        defer { database.close() }
        return try database.read { transaction in
            var entries: [[UInt8]: [UInt8]] = [:]
            try transaction.tree(named: name)?.forEach { key, value in
                entries[Array(key)] = Array(value)
                return true
            }
            return entries
        }
    }

    static func fileBytes(_ path: String) throws -> [Data?] {
        [try Data(contentsOf: URL(fileURLWithPath: path)), FileManager.default.contents(atPath: path + "-journal")]
    }

    // MARK: No rewrite

    @Test("adding optional attributes, an attribute with a default, an index and an entity rewrites no row; old rows read the default, by scan and by index; a later default does not change them")
    func additionsRewriteNothing() throws {
        let (path, ids) = try Self.makeStore()
        let before = try Self.rowsTree(path, "rows.Book")
        let v2 = try Self.library([.subtitle, .rating(default: 3), .ratingIndexed, .publisher])
        do {
            let (stack, store) = try Self.open(path, v2)
            let report = try #require(store.migration)
            #expect(report.fromVersion == 1 && report.toVersion == 2 && report.kind == "lightweight")
            #expect(report.entities.allSatisfy { $0.rewrittenRows == 0 }, "\(report.entities)")
            #expect(report.treesBuilt == ["index.Book.rating"])
            #expect(Set(report.difference.changes.map(\.kind)) == [.attributeAdded, .indexAdded, .entityAdded])
            let context = stack.context()
            try Self.checkData(context, ids: ids)
            for book in try context.fetch(FetchRequest<ManagedObject>(entityName: "Book")) {
                #expect(try book.value(forKey: "subtitle") == nil)
                #expect(try book.value(forKey: "rating") as? Int16 == 3)
            }
            for format in ["rating == 3", "rating >= 3 AND rating < 4", "rating == 3 AND pages > 0"] {
                var request = FetchRequest<ManagedObject>(entityName: "Book")
                request.predicate = try ObjectPredicate(format: format)
                let expected = format.contains("pages") ? (0..<Self.bookCount).filter { Self.pages($0) != nil }.count : Self.bookCount
                #expect(try context.fetch(request).count == expected, "\(format)")
                #expect(try context.count(for: request) == expected, "\(format)")
            }
            var none = FetchRequest<ManagedObject>(entityName: "Book")
            none.predicate = try ObjectPredicate(format: "rating == 4")
            #expect(try context.fetch(none).isEmpty)
            // The new properties and entity take values.
            let books = try Self.books(context)
            try books[1]?.setValue("A sequel", forKey: "subtitle")
            try books[2]?.setValue(Int16(5), forKey: "rating")
            _ = try stack.insert("Publisher", in: context, ["name": "P"])
            try context.save()
        }
        // Builds that do not read fills refuse the store: its hashes name them.
        let hashes = try #require(try ModelHistoryTests.metadata(path, "hashes"))
        #expect(String(decoding: hashes, as: UTF8.self).contains("\"(column fills)\":\"01\""))
        // Untouched rows are the bytes they were.
        let after = try Self.rowsTree(path, "rows.Book")
        #expect(after.count == before.count)
        #expect(after.filter { before[$0.key] == $0.value }.count == Self.bookCount - 2)
        #expect(try Database(path: path).checkIntegrity().problems.isEmpty)

        // The store's fill stays with the store: a model whose default changed (which its
        // hashes do not see) still reads 3 in the rows that never stored one. A changed default
        // alone is no migration (a model may compute its defaults as it is built).
        let v3 = try Self.library([.subtitle, .rating(default: 7), .ratingIndexed, .publisher])
        let (stack, store) = try Self.open(path, v3)
        #expect(store.migration == nil)
        let recorded = try NativeStore.recordedAttributes(at: path)["Book"]?["rating"]
        #expect(recorded?.defaultValue == .integer(3) && recorded?.fill == .integer(3))
        let books = try Self.books(stack.context())
        #expect(try books[0]?.value(forKey: "rating") as? Int16 == 3)
        #expect(try books[2]?.value(forKey: "rating") as? Int16 == 5)
        #expect(try books[1]?.value(forKey: "subtitle") as? String == "A sequel")
        let history = try NativeStore.modelHistory(at: path)
        #expect(history.map(\.version) == [1, 2])
        #expect(history.last?.migration == "lightweight")
        // The older model is refused, the file untouched.
        let bytes = try Self.fileBytes(path)
        #expect(throws: ArborError.self) { _ = try Self.open(path, try Self.library()) }
        #expect(try Self.fileBytes(path) == bytes)
    }

    @Test("renaming an entity, an attribute and both ends of a many-to-many keeps every value, link, primary key and tree (renamed, not rebuilt)")
    func renames() throws {
        let (path, ids) = try Self.makeStore()
        let v2 = try Self.library([.renames])
        let (stack, store) = try Self.open(path, v2)
        let report = try #require(store.migration)
        #expect(report.entities.allSatisfy { $0.rewrittenRows == 0 })
        #expect(report.entities.first { $0.entity == "Writer" }?.renamedFrom == "Author")
        #expect(report.treesBuilt.isEmpty)
        #expect(report.treesRenamed["rows.Author"] == "rows.Writer")
        #expect(report.treesRenamed["index.Book.title"] == "index.Book.name")
        #expect(report.treesRenamed["join.Book.tags"] == "join.Book.labels")
        #expect(report.treesRenamed["join.Tag.books"] == "join.Tag.titles")
        #expect(Set(report.difference.changes.map(\.kind)) == [.entityRenamed, .attributeRenamed, .relationshipRenamed])
        let context = stack.context()
        try Self.checkData(context, title: "name", author: "Writer", tags: "labels", ids: ids)
        var request = FetchRequest<ManagedObject>(entityName: "Book")
        request.predicate = try ObjectPredicate(format: "name BEGINSWITH 'Book 1' AND author.name == 'A1'")
        #expect(try context.fetch(request).count == (0..<Self.bookCount).filter { "\($0)".hasPrefix("1") && $0 % 3 == 1 }.count)
        for tag in try context.fetch(FetchRequest<ManagedObject>(entityName: "Tag")) {
            let label = try #require(try tag.value(forKey: "label") as? String)
            let expected = (0..<Self.bookCount).filter { Self.tags($0).contains(label) }.count
            #expect(try #require(try tag.value(forKey: "titles") as? Set<ManagedObject>).count == expected, "\(label)")
        }
        // Deleting a writer cascades through the renamed trees.
        let writer = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Writer")).first)
        context.delete(writer)
        try context.save()
        #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Book")) == Self.bookCount - 10)
        #expect(try Database(path: path).checkIntegrity().problems.isEmpty)
    }

    @Test("widening integer16 → integer64 and float → double reads every value unchanged, no row rewritten")
    func widening() throws {
        let (path, ids) = try Self.makeStore()
        let (stack, store) = try Self.open(path, try Self.library([.wideTypes]))
        #expect(try #require(store.migration).entities.allSatisfy { $0.rewrittenRows == 0 })
        let context = stack.context()
        try Self.checkData(context, ids: ids)
        let born = try context.fetch(FetchRequest<ManagedObject>(entityName: "Author")).map { try $0.value(forKey: "born") as? Int64 }
        #expect(Set(born) == [1900, 1901, 1902])
        var request = FetchRequest<ManagedObject>(entityName: "Book")
        request.predicate = try ObjectPredicate(format: "price > 10.0")
        #expect(try context.count(for: request) == (0..<Self.bookCount).filter { Self.price($0) > 10 }.count)
    }

    // MARK: Rewrites

    @Test("removing an attribute rewrites its entity's rows without it, keeping the others; removing an entity drops its trees")
    func removals() throws {
        let (path, ids) = try Self.makeStore()
        let new = try Self.library([.noPrice, .noTags])
        // Dropping Tag allows dropping the links to it (Book.tags) too.
        let (stack, store) = try Self.open(path, new, migration: Self.allowing([.property("price", of: "Book"), .entity("Tag")], from: try Self.library(), to: new))
        let report = try #require(store.migration)
        #expect(report.losses.map(\.description) == ["Book.price: the values of 30 objects", "Book.tags: 60 links", "Tag: 4 objects"])
        #expect(report.losses.allSatisfy { $0.isAllowed })
        #expect(report.entities.first { $0.entity == "Book" }?.rewrittenRows == Self.bookCount)
        #expect(report.entities.first { $0.entity == "Author" }?.rewrittenRows == 0)
        #expect(Set(report.treesDropped) == ["rows.Tag", "join.Book.tags", "join.Tag.books"])
        try Self.checkData(stack.context(), tags: nil, ids: ids, price: false)
        let database = try Database(path: path)
        defer { database.close() }
        #expect(try database.read { try $0.trees().map(\.name).filter { $0.contains("Tag") || $0.contains("tags") } }.isEmpty)
        #expect(try database.checkIntegrity().problems.isEmpty)
    }

    @Test("optional → required with a default fills the nils (their rows rewritten, the index rebuilt); without a default the rows with nil are named and the store is left as it was")
    func optionalToRequired() throws {
        let (path, ids) = try Self.makeStore()
        let missing = (0..<Self.bookCount).filter { Self.pages($0) == nil }
        let bytes = try Self.fileBytes(path)
        do {
            try Self.open(path, try Self.library([.pagesRequired(default: false)]))
            Issue.record("a required attribute with nils and no default migrated")
        } catch let error as ArborError {
            #expect(error.code == .incompatibleModel)
            #expect(error.message.contains("Book.pages becomes required and has no default, and \(missing.count) objects have none"), "\(error.message)")
            #expect(error.message.contains(ids[missing[0]]!.description), "\(error.message)")
            #expect(error.message.contains("the store is as it was"))
        }
        #expect(try Self.fileBytes(path) == bytes)
        _ = try Self.open(path, try Self.library())

        let (stack, store) = try Self.open(path, try Self.library([.pagesRequired(default: true)]))
        let report = try #require(store.migration)
        #expect(report.entities.first { $0.entity == "Book" }?.rewrittenRows == Self.bookCount)
        try Self.checkData(stack.context(), ids: ids) { Self.pages($0) ?? 100 }
    }

    @Test("a new uniqueness constraint that rows break names the duplicates and leaves the store; one they keep is built and enforced")
    func newUniqueness() throws {
        let (duplicated, _) = try Self.makeStore(duplicateTitles: true)
        let bytes = try Self.fileBytes(duplicated)
        do {
            try Self.open(duplicated, try Self.library([.uniqueTitle]))
            Issue.record("duplicates under a new constraint migrated")
        } catch let error as ArborError {
            #expect(error.code == .incompatibleModel)
            #expect(error.message.contains("the new uniqueness constraint Book(title) is broken by 20 pairs"), "\(error.message)")
        }
        #expect(try Self.fileBytes(duplicated) == bytes)

        let (path, _) = try Self.makeStore()
        let (stack, store) = try Self.open(path, try Self.library([.uniqueTitle]))
        #expect(try #require(store.migration).treesBuilt == ["unique.Book.title"])
        let context = stack.context()
        _ = try stack.insert("Book", in: context, ["title": "Book 3"])
        #expect(throws: ArborError.self) { try context.save() }
    }

    @Test("a required to-one added to objects that lack it names them")
    func requiredRelationship() throws {
        let (path, ids) = try Self.makeStore(authorless: [4, 7])
        do {
            try Self.open(path, try Self.library([.authorRequired]))
            Issue.record("nil to-ones under a required relationship migrated")
        } catch let error as ArborError {
            #expect(error.message.contains("Book.author becomes required and has no default, and 2 objects have none"), "\(error.message)")
            #expect(error.message.contains(ids[4]!.description) && error.message.contains(ids[7]!.description))
        }
    }

    @Test("a store of row layout 2 migrates into layout 3, every row rewritten")
    func layoutTwo() throws {
        let (path, ids) = try Self.makeStore(rowLayout: .fixedFirst)
        let (stack, store) = try Self.open(path, try Self.library([.subtitle]))
        #expect(store.rowLayout == .records)
        let report = try #require(store.migration)
        #expect(report.entities.first { $0.entity == "Book" }?.rewrittenRows == Self.bookCount)
        try Self.checkData(stack.context(), ids: ids)
        #expect(try Database(path: path).checkIntegrity().problems.isEmpty)
    }

    @Test("a sub-entity added under an entity with rows rewrites that hierarchy (its rows now name their entity) and both entities work")
    func subEntityAdded() throws {
        let (path, ids) = try Self.makeStore()
        let (stack, store) = try Self.open(path, try Self.library([.genre]))
        let report = try #require(store.migration)
        #expect(report.entities.first { $0.entity == "Tag" }?.rewrittenRows == 4)
        let context = stack.context()
        try Self.checkData(context, ids: ids)
        let genre = try stack.insert("Genre", in: context, ["label": "g", "shelfMark": "G1"])
        try genre.setValue(Set([try #require(try Self.books(context)[0])]), forKey: "books")
        try context.save()
        #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Tag")) == 5)
        #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Genre")) == 1)
    }

    /// A store at the first of `models`, with `fill` run on a context, then opened with each
    /// later model in turn.
    static func migrate(_ models: [ManagedObjectModel], fill: (Stack, ManagedObjectContext) throws -> Void) throws -> String {
        let path = try temporaryDirectory() + "/small.arbor"
        do {
            let stack = try Stack(model: models[0], path: path)
            let context = stack.context()
            try fill(stack, context)
            try context.save()
        }
        for model in models.dropFirst() { _ = try Self.open(path, model) }
        return path
    }

    static func values(_ path: String, _ model: ManagedObjectModel, _ entity: String, _ key: String) throws -> [String] {
        let (stack, _) = try Self.open(path, model)
        let context = stack.context()
        return try context.fetch(FetchRequest<ManagedObject>(entityName: entity)).map { "\(try $0.value(forKey: key) ?? "nil")" }.sorted()
    }

    @Test("a renaming identifier kept in the next version, while a new entity took the old name, matches by name: neither entity's objects move")
    func keptRenamingIdentifier() throws {
        let v1 = try ManagedObjectModel { Entity("Note") { Attribute("text", .string) } }
        let v2 = try ManagedObjectModel {
            Entity("Memo") { Attribute("text", .string) }.renamingIdentifier("Note")
            Entity("Note") { Attribute("title", .string) }
        }
        let v3 = try ManagedObjectModel {
            Entity("Memo") { Attribute("text", .string); Attribute("pinned", .boolean) }.renamingIdentifier("Note")
            Entity("Note") { Attribute("title", .string) }
        }
        let path = try Self.migrate([v1, v2]) { stack, context in
            for text in ["a", "b"] { _ = try stack.insert("Note", in: context, ["text": text]) }
        }
        do {
            let (stack, _) = try Self.open(path, v2)
            let context = stack.context()
            _ = try stack.insert("Note", in: context, ["title": "n"])
            try context.save()
        }
        _ = try Self.open(path, v3)
        #expect(try Self.values(path, v3, "Memo", "text") == ["a", "b"])
        #expect(try Self.values(path, v3, "Note", "title") == ["n"])
    }

    @Test("an attribute of an abstract parent made required checks and fills the rows of its sub-entities")
    func requiredInherited() throws {
        func model(required: Bool, fill: String?) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                Entity("Party", abstract: true) {
                    if required, let fill { Attribute("name", .string).required().defaultValue(fill) }
                    else if required { Attribute("name", .string).required() }
                    else { Attribute("name", .string) }
                }
                Entity("Person", parent: "Party") { Attribute("age", .integer16) }
            }
        }
        let path = try Self.migrate([try model(required: false, fill: nil)]) { stack, context in
            _ = try stack.insert("Person", in: context, ["age": Int16(3)])
            _ = try stack.insert("Person", in: context, ["age": Int16(4), "name": "Ada"])
        }
        #expect(throws: ArborError.self) { try Self.open(path, try model(required: true, fill: nil)) }
        #expect(try Self.values(path, try model(required: true, fill: "?"), "Person", "name") == ["?", "Ada"])
    }

    @Test("a float added with a default (a fill) then widened to a double reads as a double in the session that widened it; a transformable's value type changing is refused")
    func widenedFill() throws {
        func model(_ score: AttributeType?, _ blob: AttributeType = .transformable([String].self)) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                Entity("Item") {
                    Attribute("name", .string)
                    Attribute("tags", blob)
                    if let score { Attribute("score", score).defaultValue(score == .float ? Float(1.5) as any Sendable : Double(1.5)) }
                }
            }
        }
        let path = try Self.migrate([try model(nil), try model(.float)]) { stack, context in
            _ = try stack.insert("Item", in: context, ["name": "x"])
        }
        let (stack, store) = try Self.open(path, try model(.double))
        #expect(try #require(store.migration).entities.allSatisfy { $0.rewrittenRows == 0 })
        let context = stack.context()
        let item = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Item")).first)
        #expect(try item.value(forKey: "score") as? Double == 1.5)
        let error = try #require(throws: ArborError.self) { try Self.open(path, try model(.double, .transformable([Int].self))) }
        #expect(error.message.contains("transformable"), "\(error.message)")
    }

    @Test("damaged fills or a damaged entity list are storeOpen errors naming them, not misread rows", arguments: ["fills.Book", "entities"])
    func damagedMetadata(key: String) throws {
        let (path, _) = try Self.makeStore()
        let model = try Self.library([.rating(default: 3)])
        _ = try Self.open(path, model)
        for damage in [Array("{\"rating\": \"zz\"}".utf8), Array("{\"rating\": \"0d\"}".utf8), [0xFF, 0x00]] {
            try ModelHistoryTests.setMetadata(path, key, damage)
            let error = try #require(throws: ArborError.self) { try Self.open(path, model) }
            #expect(error.code == .storeOpen && error.message.contains("damaged"), "\(error.message)")
        }
    }

    @Test("values breaking validation rules that changed (a length, a maximum) are reported and kept, or fail the migration naming them with the file untouched; rules that did not change are not checked again")
    func validationRules() throws {
        let (path, ids) = try Self.makeStore()
        let before = try Self.fileBytes(path)
        var failing = MigrationOptions()
        failing.invalidObjects = .fail
        let error = try #require(throws: ArborError.self) { try Self.open(path, try Self.library([.rules]), migration: failing) }
        // Titles "Book 10" … "Book 29" are longer than 6; prices 20.5 … 29.5 above 20.
        #expect(error.code == .migrationFailed)
        #expect(error.message.contains("30 values"), "\(error.message)")
        #expect(error.detailedErrors.count == 20)
        #expect(Set(error.detailedErrors.map(\.code)) == [.validationStringTooLong, .validationNumberTooLarge])
        #expect(error.detailedErrors.allSatisfy { $0.objectID != nil })
        #expect(try Self.fileBytes(path) == before)

        let (stack, store) = try Self.open(path, try Self.library([.rules]))
        let report = try #require(store.migration)
        // Rules are not in the version hashes (as in Core Data): checked, but no new version.
        #expect(report.kind == "rules")
        #expect(try NativeStore.modelHistory(at: path).count == 1)
        #expect(report.invalidObjectCount == 30)
        #expect(report.invalidObjects.filter { $0.key == "title" }.count == 10)
        #expect(report.invalidObjects.filter { $0.key == "price" }.count == 10)
        try Self.checkData(stack.context(), ids: ids)
        // The store records the rules it now has: the next version does not check them again.
        let (_, next) = try Self.open(path, try Self.library([.rules, .subtitle]))
        #expect(next.migration?.invalidObjectCount == 0)
        #expect(next.migration?.entities.first { $0.entity == "Book" }?.rows == nil, "no row read")
    }

    // MARK: Refusals

    @Test("a change that cannot be inferred is refused naming it and why; turning migration off refuses any change; a read-only open never migrates; each leaves the file as it was")
    func refusals() throws {
        let (path, _) = try Self.makeStore()
        let bytes = try Self.fileBytes(path)
        func refusal(_ model: ManagedObjectModel, migration: MigrationOptions = MigrationOptions(), readOnly: Bool = false) throws -> String {
            var options = DatabaseOptions()
            options.readOnly = readOnly
            do {
                _ = try Self.open(path, model, migration: migration, options: options)
            } catch let error as ArborError {
                #expect(error.code == .incompatibleModel)
                #expect(try Self.fileBytes(path) == bytes)
                return error.message
            }
            Issue.record("opened")
            return ""
        }
        let text = try refusal(try Self.library([.pagesText]))
        #expect(text.contains("Book.pages: attribute changed (type integer32 → string): integer32 → string is not a widening"), "\(text)")
        var off = MigrationOptions()
        off.shouldMigrateStoreAutomatically = false
        #expect(try refusal(try Self.library([.subtitle]), migration: off).contains("Book.subtitle: attribute added (string, optional)); automatic migration is off"))
        var noInference = MigrationOptions()
        noInference.shouldInferMappingModelAutomatically = false
        #expect(try refusal(try Self.library([.subtitle]), migration: noInference).contains("inferring the migration is off"))
        #expect(try refusal(try Self.library([.subtitle]), readOnly: true).contains("a read-only store never migrates"))
    }

    @Test("the container's store description carries both flags (true by default)")
    func containerFlags() throws {
        let (path, _) = try Self.makeStore()
        var description = PersistentStoreDescription(url: URL(fileURLWithPath: path))
        #expect(description.shouldMigrateStoreAutomatically && description.shouldInferMappingModelAutomatically)
        description.shouldMigrateStoreAutomatically = false
        let refused = PersistentContainer(name: "Library", managedObjectModel: try Self.library([.subtitle]))
        refused.persistentStoreDescriptions = [description]
        #expect(throws: ArborError.self) { try refused.loadPersistentStores() }
        description.shouldMigrateStoreAutomatically = true
        let container = PersistentContainer(name: "Library", managedObjectModel: try Self.library([.subtitle]))
        container.persistentStoreDescriptions = [description]
        try container.loadPersistentStores()
        #expect((container.persistentStoreCoordinator.persistentStores.first as? NativeStore)?.migration?.toVersion == 2)
    }

    @Test("a migration is logged before and after (info, arbor.store) and counted and timed; a failed one, which the caller receives, is a debug line and counted")
    func observability() throws {
        let (path, _) = try Self.makeStore()
        let handler = InMemoryLogHandler()
        let metrics = TestMetrics()
        var options = DatabaseOptions()
        options.logger = Logger(label: "arbor.store") { _ in handler }
        options.logger.logLevel = .debug
        options.metricsFactory = metrics
        #expect(throws: ArborError.self) { try Self.open(path, try Self.library([.pagesRequired(default: false)]), options: options) }
        #expect(metrics.counterTotal(label: "arbor_migration_failures") == 1)
        let failure = try #require(handler.entries.first { "\($0.message)".contains("could not be migrated") })
        #expect(failure.level == .debug && failure.metadata["arbor.path"] == "\(path)")
        #expect(!handler.entries.contains { $0.level >= .warning }, "the caller has the error: only its start, at info, is above debug")
        _ = try Self.open(path, try Self.library([.subtitle]), options: options)
        let notices = handler.entries.filter { $0.level == .info }.map { "\($0.message)" }
        #expect(notices.contains("migrating the store to a new model") && notices.contains("migrated the store"), "\(notices)")
        #expect(handler.entries.contains { $0.metadata["arbor.report"].map { "\($0)".contains("from model version 1 to 2") } ?? false })
        #expect(metrics.counterTotal(label: "arbor_migrations") == 1)
        #expect(try metrics.expectTimer("arbor_migration_duration").values.count == 1)
    }

    static func diskOptions(_ disk: SimulatedDisk) -> DatabaseOptions {
        var options = DatabaseOptions()
        options.fileSystem = disk
        options.lockTable = LockTable()
        options.pageSize = 512
        options.cacheSize = 16 << 10
        // Hundreds of opens: their notices would flood the test log.
        options.logger.logLevel = .error
        return options
    }

    @Test("a power cut at every I/O operation of a migration (rows rewritten, trees dropped, renamed and built) leaves the old store at the old model or the new store at the new model, never a mix; reopening finishes it")
    func powerCutEverywhere() throws {
        let disk = SimulatedDisk()
        let (path, ids) = try Self.makeStore(on: disk)
        disk.syncAll()
        let image = disk.snapshot()
        let old = try Self.library()
        let new = try Self.library([.renames, .noPrice, .ratingIndexed, .rating(default: 2)])
        let dropping = Self.allowing([.property("price", of: "Book")], from: old, to: new)
        let before = disk.operationCount
        _ = try Self.open(path, new, migration: dropping, options: Self.diskOptions(disk))
        let operations = disk.operationCount - before
        #expect(operations > 20)
        var outcomes = (old: 0, new: 0)
        for point in 1...operations {
            for damage: SimulatedDisk.PowerCutDamage in [.applyAll, .dropAll, .random(seed: UInt64(point))] {
                disk.restore(image)
                disk.inject(.powerCut(damage), atOperation: point)
                _ = try? Self.open(path, new, migration: dropping, options: Self.diskOptions(disk))
                disk.clearFaults()
                // Either the old model still opens the store (nothing of the migration stayed),
                // or the history says the migration committed; never both, never neither.
                let oldOpens = (try? Self.open(path, old, migration: .never, options: Self.diskOptions(disk))) != nil
                let (stack, store) = try Self.open(path, new, migration: dropping, options: Self.diskOptions(disk))
                #expect(oldOpens == (store.migration != nil), "crash at \(point) \(damage)")
                if oldOpens { outcomes.old += 1 } else { outcomes.new += 1 }
                try Self.checkData(stack.context(), title: "name", author: "Writer", tags: "labels", ids: ids, price: false)
                let database = try Database(path: path, options: Self.diskOptions(disk))
                #expect(try database.checkIntegrity().problems.isEmpty, "crash at \(point) \(damage)")
                database.close()
            }
        }
        #expect(outcomes.old > 0 && outcomes.new > 0, "\(outcomes)")
        print("migration crash images checked: \(operations) operations × 3 damages; old store \(outcomes.old), migrated \(outcomes.new)")
    }

    // MARK: Fixtures

    /// The fixtures' model with an optional attribute, an attribute with a default and an entity
    /// added.
    static func fixtureModelTwo() throws -> ManagedObjectModel {
        let one = try FixtureStore.model()
        var schema = ModelSchema(one)
        let book = try #require(schema.entities.firstIndex { $0.name == "Book" })
        schema.entities[book].attributes.append(ModelSchema.AttributeSchema(name: "note", type: "string", optional: true, transient: false))
        schema.entities.append(ModelSchema.EntitySchema(name: "Loan", parent: nil, abstract: false,
                                                        attributes: [ModelSchema.AttributeSchema(name: "days", type: "integer32", optional: true, transient: false)],
                                                        relationships: [], unique: [], indexes: []))
        return try schema.model()
    }

    @Test("every committed fixture store (layouts 1, 2, 3 and release 0.1.0) migrates to a second model version and reads, searches and writes as before",
          arguments: FixtureStoreTests.cases.map(\.file))
    func fixturesMigrate(file: String) throws {
        let path = try FixtureStoreTests.copy(file)
        let model = try Self.fixtureModelTwo()
        do {
            let (stack, store) = try Self.open(path, model)
            let report = try #require(store.migration)
            let layout = try #require(FixtureStoreTests.cases.first { $0.file == file }?.layout)
            #expect(report.entities.first { $0.entity == "Book" }?.rewrittenRows == (layout == .records ? 0 : FixtureStore.bookCount))
            #expect(store.rowLayout == .records)
            let context = stack.context()
            try FixtureStoreTests.checkContents(context, removed: [], changed: [:])
            try FixtureStoreTests.checkSearches(context)
            try FixtureStoreTests.edit(context, stack)
        }
        let (stack, store) = try Self.open(path, model)
        #expect(store.migration == nil)
        try FixtureStoreTests.checkContents(stack.context(), removed: [8], changed: [3: "Retitled"], added: [99])
        #expect(try NativeStore.modelHistory(at: path).count == 2)
        #expect(try Database(path: path).checkIntegrity().problems.isEmpty)
    }
}
