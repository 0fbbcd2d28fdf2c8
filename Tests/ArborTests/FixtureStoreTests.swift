import ArborStore
import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// Stores written by earlier builds, committed under `Tests/ArborTests/Fixtures/` (the file format
/// is a promise: a store an earlier release wrote opens in every later one). Each is copied, then
/// read, searched, written and read again by this build, and checked by the engine.
///
/// - `rows-1.arbor`: row layout 1 (the model's column order), written by the last build before
///   layout 2 (commit a3b356b);
/// - `release-0.1.0.arbor`: written by release 0.1.0 (commit 2ade8ec; row layout 2);
/// - `rows-2.arbor` and `rows-3.arbor`: row layouts 2 (fixed-size attributes first) and 3
///   (records), written by ``writeFixtures()`` (run it with `ARBOR_WRITE_FIXTURES=<dir>` to
///   write the fixtures this build makes) on 2026-11-26, with keys in the standard form;
/// - `keys-2.arbor`: row layout 3 with compact keys (key form 2), written by ``writeFixtures()``
///   on 2026-11-28;
/// - `history-1.arbor`: `keys-2.arbor`'s contents and edits in a store that records persistent
///   history (history records version 1), written by ``writeFixtures()`` on 2026-11-28.
///
/// The first two were written from `FixtureStore`'s model and data by a small program built
/// against those commits (`FixtureStore`'s source only uses API they already had).
@Suite("Fixture stores of earlier builds")
struct FixtureStoreTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures").path

    /// A fresh copy of fixture `name`, to be opened and written.
    static func copy(_ name: String) throws -> String {
        let path = try temporaryDirectory() + "/" + name
        try FileManager.default.copyItem(atPath: fixtures + "/" + name, toPath: path)
        return path
    }

    static let cases: [(file: String, layout: RowFormat.Layout, keys: NativeStore.KeyForm)] = [
        ("rows-1.arbor", .declared, .standard), ("release-0.1.0.arbor", .fixedFirst, .standard), ("rows-2.arbor", .fixedFirst, .standard),
        ("rows-3.arbor", .records, .standard), ("keys-2.arbor", .records, .compact),
    ]

    @Test("a fixture store opens in its layout, reads every value and relationship as written, answers searches like memory, takes a save and checks clean",
          arguments: cases.map(\.file))
    func readsAndWrites(file: String) throws {
        let fixture = try #require(Self.cases.first { $0.file == file })
        let path = try Self.copy(file)
        let model = try FixtureStore.model()
        do {
            let stack = try Stack(model: model, path: path)
            let store = try #require(stack.coordinator.persistentStores.first as? NativeStore)
            #expect(store.rowLayout == fixture.layout)
            // A store keeps the key form it was made with: its trees are never half one form.
            #expect(store.keyForm == fixture.keys)
            let context = stack.context()
            try Self.checkContents(context, removed: [], changed: [:])
            try Self.checkSearches(context)
            try Self.edit(context, stack)
        }
        let stack = try Stack(model: model, path: path)
        let context = stack.context()
        try Self.checkContents(context, removed: [8], changed: [3: "Retitled"], added: [99])
        try Self.checkSearches(context)
        let report = try Database(path: path).checkIntegrity()
        #expect(report.problems.isEmpty, "\(report.problems)")
    }

    /// Saves, in this build, the edits ``checkContents(_:removed:changed:added:)`` is told of
    /// afterwards: book 3 retitled "Retitled" and taken off its shelf, book 8 deleted, book 99
    /// inserted (attributes only).
    static func edit(_ context: ManagedObjectContext, _ stack: Stack) throws {
        let books = try books(context)
        try books[3]?.setValue("Retitled", forKey: "title")
        try books[3]?.setValue(nil, forKey: "shelf")
        context.delete(try #require(books[8]))
        _ = try stack.insert("Book", in: context, FixtureStore.attributes(ofBook: 99).compactMapValues { $0 })
        try context.save()
    }

    /// The books of `context`'s store, by serial.
    static func books(_ context: ManagedObjectContext) throws -> [Int: ManagedObject] {
        let books = try context.fetch(FetchRequest<ManagedObject>(entityName: "Book"))
        return Dictionary(uniqueKeysWithValues: try books.map { (Int(try #require($0.value(forKey: "serial") as? Int64)), $0) })
    }

    /// Every book's attributes and relationships (both ends), after the edits `removed`,
    /// `changed` (new titles; their shelf removed) and `added` (books with attributes only).
    static func checkContents(_ context: ManagedObjectContext, removed: Set<Int>, changed: [Int: String], added: Set<Int> = []) throws {
        let books = try books(context)
        let serials = Set(1...FixtureStore.bookCount).subtracting(removed).union(added)
        #expect(Set(books.keys) == serials)
        for serial in serials.sorted() {
            let book = try #require(books[serial])
            for (key, value) in FixtureStore.attributes(ofBook: serial) {
                let expected = key == "title" ? changed[serial] ?? value : value
                #expect(FixtureStore.comparable(try book.value(forKey: key)) == FixtureStore.comparable(expected), "book \(serial).\(key)")
            }
            let fromFixture = !added.contains(serial)
            let shelf = fromFixture && changed[serial] == nil ? FixtureStore.shelf(ofBook: serial).map { FixtureStore.shelfNames[$0] } : nil
            #expect(try (book.value(forKey: "shelf") as? ManagedObject)?.value(forKey: "name") as? String == shelf, "book \(serial).shelf")
            let owner = try book.value(forKey: "owner") as? ManagedObject
            let party = fromFixture ? FixtureStore.owner(ofBook: serial).map { FixtureStore.parties[$0] } : nil
            #expect(try owner?.value(forKey: "name") as? String == party?.name, "book \(serial).owner")
            #expect(owner?.entity.name == party.map { $0.age == nil ? "Party" : "Person" }, "book \(serial).owner's entity")
            let tags = try #require(try book.value(forKey: "tags") as? Set<ManagedObject>)
            let labels = try Set(tags.map { try #require($0.value(forKey: "label") as? String) })
            #expect(labels == Set(fromFixture ? FixtureStore.tags(ofBook: serial).map { FixtureStore.tagLabels[$0] } : []), "book \(serial).tags")
        }
        // The to-many ends, read from the store (foreign-key and join trees).
        let shelves = try context.fetch(FetchRequest<ManagedObject>(entityName: "Shelf"))
        #expect(shelves.count == FixtureStore.shelfNames.count)
        for shelf in shelves {
            let name = try #require(shelf.value(forKey: "name") as? String)
            let index = try #require(FixtureStore.shelfNames.firstIndex(of: name))
            let expected = serials.filter { !added.contains($0) && changed[$0] == nil && FixtureStore.shelf(ofBook: $0) == index }
            let held = try #require(try shelf.value(forKey: "books") as? Set<ManagedObject>)
            #expect(Set(try held.map { Int(try #require($0.value(forKey: "serial") as? Int64)) }) == expected, "shelf \(name)")
        }
        for tag in try context.fetch(FetchRequest<ManagedObject>(entityName: "Tag")) {
            let label = try #require(tag.value(forKey: "label") as? String)
            let index = try #require(FixtureStore.tagLabels.firstIndex(of: label))
            let expected = serials.filter { !added.contains($0) && FixtureStore.tags(ofBook: $0).contains(index) }
            #expect(try #require(try tag.value(forKey: "books") as? Set<ManagedObject>).count == expected.count, "tag \(label)")
        }
        var persons = FetchRequest<ManagedObject>(entityName: "Person")
        persons.predicate = try ObjectPredicate(format: "age > 0")
        #expect(Set(try context.fetch(persons).map { try #require($0.value(forKey: "name") as? String) }) == ["P1", "P3"])
        #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Party")) == FixtureStore.parties.count)
    }

    /// Searches the store answers (scans on the rows' bytes, the index, key paths, aggregates)
    /// give what evaluation over the loaded objects gives.
    static func checkSearches(_ context: ManagedObjectContext) throws {
        let all = try context.fetch(FetchRequest<ManagedObject>(entityName: "Book"))
        let searches: [(String, [Any?])] = [
            ("a16 > 0", []), ("a16 == nil", []), ("a32 < 0 AND flag == YES", []), ("title BEGINSWITH[c] 'book 1'", []),
            ("title == 'Book 12 — été'", []), ("title CONTAINS[cd] 'ETE'", []), ("shelf.name == 'B'", []),
            ("owner.name IN {'P1', 'P2'}", []), ("ANY tags.label == 't3'", []), ("dbl BETWEEN {2, 5}", []),
            ("when > %@", [Date(timeIntervalSinceReferenceDate: 86_400.5 * 20)]), ("uid == %@", [FixtureStore.attributes(ofBook: 17)["uid"]!]),
            ("blob != nil AND flt >= 4", []),
        ]
        for (format, arguments) in searches {
            let predicate = try ObjectPredicate(format: format, argumentArray: arguments)
            var request = FetchRequest<ManagedObject>(entityName: "Book")
            request.predicate = predicate
            let fetched = Set(try context.fetch(request).map(\.objectID))
            let expected = Set(try all.filter { try predicate.evaluate(with: $0) }.map(\.objectID))
            #expect(fetched == expected, "\(format)")
            #expect(try context.count(for: request) == expected.count, "count of \(format)")
        }
    }

    @Test("a store recording persistent history, written by an earlier build, opens only with tracking on, reads its history as written and goes on recording")
    func historyFixture() throws {
        let path = try Self.copy("history-1.arbor")
        let model = try FixtureStore.model()
        #expect(throws: ArborError.self) { try NativeStore(path: path, model: model) }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addNativeStore(at: path, history: .on)
        let stack = Stack(model: model, coordinator: coordinator)
        let context = stack.context()
        try Self.checkContents(context, removed: [8], changed: [3: "Retitled"], added: [99])
        let transactions = try #require(try context.execute(.fetchHistory(after: nil)).transactions)
        #expect(transactions.map(\.transactionNumber) == [1, 2])
        #expect(transactions.map(\.author) == ["fixture", "editor"])
        let books = try Self.books(context)
        // The first save inserted every row: each untouched book's values are its row's now.
        let changes = try #require(transactions[0].changes)
        let inserted = changes.filter { $0.changeType == .insert }
        #expect(inserted.count == FixtureStore.shelfNames.count + FixtureStore.tagLabels.count + FixtureStore.parties.count + FixtureStore.bookCount)
        // Books' tags (a many-to-many) are links added, after the inserts.
        #expect(changes.dropFirst(inserted.count).allSatisfy { change in change.newValues.values.allSatisfy { if case .links = $0 { true } else { false } } })
        for serial in 1...FixtureStore.bookCount where serial != 3 && serial != 8 {
            let book = try #require(books[serial])
            let change = try #require(inserted.first { $0.changedObjectID == book.objectID })
            let row = try #require(try store.row(for: book.objectID))
            #expect(change.newValues.compactMapValues(\.attributeValue) == row.attributes, "book \(serial)")
            #expect(change.newValues["shelf"] == row.toOne["shelf"].map(PersistentHistoryValue.object))
        }
        // The edit: book 3 retitled and off its shelf, book 8 deleted, book 99 inserted.
        let edited = try #require(transactions[1].changes)
        let retitled = try #require(edited.first { $0.changedObjectID == books[3]?.objectID })
        #expect(retitled.updatedProperties == ["title", "shelf"])
        #expect(retitled.newValues["title"] == .attribute(.string("Retitled")) && retitled.newValues["shelf"] == .null)
        let deleted = try #require(edited.first { $0.changeType == .delete })
        #expect(deleted.tombstone?["serial"] == .integer(8))
        #expect(edited.contains { $0.changeType == .insert && $0.changedObjectID == books[99]?.objectID })
        try books[1]?.setValue("Once more", forKey: "title")
        try context.save()
        #expect(try context.execute(.fetchHistory(after: transactions[1])).transactions?.map(\.transactionNumber) == [3])
        let report = try Database(path: path).checkIntegrity()
        #expect(report.problems.isEmpty, "\(report.problems)")
    }

    /// Writes this build's fixtures into `ARBOR_WRITE_FIXTURES` (a directory): run when the
    /// format changes, and commit what it writes next to the earlier ones.
    @Test("writes this build's fixture stores", .enabled(if: ProcessInfo.processInfo.environment["ARBOR_WRITE_FIXTURES"] != nil))
    func writeFixtures() throws {
        let directory = try #require(ProcessInfo.processInfo.environment["ARBOR_WRITE_FIXTURES"])
        // Layout 2 keeps the standard key form; records are written with compact keys.
        for (layout, name) in [(RowFormat.Layout.fixedFirst, "rows-2.arbor"), (.records, "keys-2.arbor")] {
            let stack = try Stack(model: try FixtureStore.model(), path: directory + "/" + name, rowLayout: layout)
            try FixtureStore.populate(stack.context())
        }
        // A store recording history: the fixture's rows (author "fixture"), then the edits (author "editor").
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try FixtureStore.model())
        try coordinator.addNativeStore(at: directory + "/history-1.arbor", history: .on)
        let stack = Stack(model: coordinator.managedObjectModel, coordinator: coordinator)
        let context = stack.context()
        context.transactionAuthor = "fixture"
        try FixtureStore.populate(context)
        context.transactionAuthor = "editor"
        try Self.edit(context, stack)
    }
}
