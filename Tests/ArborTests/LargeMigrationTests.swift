import ArborStore
import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// Migrations larger than the page cache (issue 27 item 5; docs/migration.md, "Never half-done"):
/// a migration that rewrites more pages than the cache holds is still one engine transaction —
/// the engine spills dirty pages to the file after syncing their journal records — so a power
/// cut anywhere leaves the old store at the old model or the migrated one, and the next open
/// rolls back what was spilled.
@Suite("Migrations larger than the cache")
struct LargeMigrationTests {
    static let bookCount = 1200

    /// A store of `bookCount` books (each with an author and a tag) at version 1 of the library
    /// model, on `disk`, with 512-byte pages and a 32-page cache.
    static func makeStore(on disk: SimulatedDisk) throws -> String {
        let path = "/large.arbor"
        let model = try MigrationTests.library()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addNativeStore(at: path, options: MigrationTests.diskOptions(disk))
        let stack = Stack(model: model, coordinator: coordinator)
        let context = stack.context()
        let authors = try (0..<5).map { try stack.insert("Author", in: context, ["name": "A\($0)", "born": Int16(1900 + $0)]) }
        let tags = try (0..<3).map { try stack.insert("Tag", in: context, ["label": "t\($0)"]) }
        for i in 0..<bookCount {
            let book = try stack.insert("Book", in: context, ["title": "book \(i)", "pages": Int32(i), "price": Float(i) / 4])
            try book.setValue(authors[i % 5], forKey: "author")
            try book.setValue(Set([tags[i % 3]]), forKey: "tags")
        }
        try context.save()
        return path
    }

    /// Every book's values and links, read through the model of `migrated` or not.
    static func checkBooks(_ context: ManagedObjectContext, migrated: Bool) throws {
        let books = try context.fetch(FetchRequest<ManagedObject>(entityName: "Book"))
        #expect(books.count == bookCount)
        var seen = Set<Int>()
        for book in books {
            let title = try #require(book.value(forKey: migrated ? "name" : "title") as? String)
            let i = try #require(Int(title.dropFirst(5)))
            seen.insert(i)
            #expect(try book.value(forKey: "pages") as? Int32 == Int32(i))
            if !migrated { #expect(try book.value(forKey: "price") as? Float == Float(i) / 4) }
            let author = try #require(book.value(forKey: "author") as? ManagedObject)
            #expect(try author.value(forKey: "name") as? String == "A\(i % 5)")
            let tags = try #require(book.value(forKey: migrated ? "labels" : "tags") as? Set<ManagedObject>)
            #expect(try tags.map { try $0.value(forKey: "label") as? String } == ["t\(i % 3)"])
        }
        #expect(seen.count == bookCount)
    }

    @Test("a migration rewriting a hierarchy many times the cache's size is one transaction: a power cut at its I/O operations leaves the old store or the migrated one, whole; reopening migrates")
    func powerCutBeyondTheCache() throws {
        let disk = SimulatedDisk()
        let path = try Self.makeStore(on: disk)
        disk.syncAll()
        let image = disk.snapshot()
        let options = MigrationTests.diskOptions(disk)
        let cachePages = options.cacheSize / options.pageSize
        // The rows alone are more than twice the cache: the rewrite must spill.
        let rowPages = try Database(path: path, options: options).read { (tx) throws in
            try #require(try tx.tree(named: "rows.Book")).statistics().pages
        }
        #expect(rowPages > 2 * cachePages, "\(rowPages) pages of rows, \(cachePages) of cache")
        let old = try MigrationTests.library()
        let new = try MigrationTests.library([.renames, .noPrice])
        let dropping = MigrationTests.allowing([.property("price", of: "Book")], from: old, to: new)
        let before = disk.operationCount
        do {
            let (_, store) = try MigrationTests.open(path, new, migration: dropping, options: options)
            #expect(store.migration?.entities.first { $0.entity == "Book" }?.rewrittenRows == Self.bookCount)
        }
        let operations = disk.operationCount - before
        #expect(operations > 200)
        var outcomes = (old: 0, new: 0)
        // Each of the last 15 operations (the journal's sync, the file's writes and sync, the
        // journal's invalidation) three ways; every 20th before, with random damage (the spills).
        for point in 1...operations where point % 20 == 0 || point > operations - 15 {
            let damages: [SimulatedDisk.PowerCutDamage] = point > operations - 15 ? [.applyAll, .dropAll, .random(seed: UInt64(point))] : [.random(seed: UInt64(point))]
            for damage in damages {
                disk.restore(image)
                disk.inject(.powerCut(damage), atOperation: point)
                _ = try? MigrationTests.open(path, new, migration: dropping, options: options)
                disk.clearFaults()
                let oldStack = try? MigrationTests.open(path, old, migration: .never, options: options).0
                if let oldStack { try Self.checkBooks(oldStack.context(), migrated: false) }
                let (stack, store) = try MigrationTests.open(path, new, migration: dropping, options: options)
                #expect((oldStack != nil) == (store.migration != nil), "crash at \(point) \(damage)")
                if oldStack != nil { outcomes.old += 1 } else { outcomes.new += 1 }
                try Self.checkBooks(stack.context(), migrated: true)
                let database = try Database(path: path, options: options)
                #expect(try database.checkIntegrity().problems.isEmpty, "crash at \(point) \(damage)")
                database.close()
            }
        }
        #expect(outcomes.old > 0 && outcomes.new > 0, "\(outcomes)")
        print("large migration crash images checked: \(outcomes.old + outcomes.new) at \(operations) operations; old store \(outcomes.old), migrated \(outcomes.new)")
    }
}
