import Arbor
import ArborStore
import Foundation
import Testing

/// `arbor migrate`: a migration checked on a copy, from the command line.
@Suite("arbor migrate")
struct MigrateCommandTests {
    @Test("prints each entity's objects before and after and what the migration does, exit 0; a migration that would fail prints why, exit 1; the store is never written")
    func check() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let (old, new, strict) = (dir.file("old.arbor"), dir.file("new.arbor"), dir.file("strict.arbor"))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try ModelCommandTests.libraryModel(year: false))
        try coordinator.addNativeStore(at: old)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let author = ManagedObject(entity: coordinator.managedObjectModel.entity(named: "Author")!, insertInto: context)
        try author.setValue("Ann", forKey: "name")
        for title in ["One", "Two"] {
            let book = ManagedObject(entity: coordinator.managedObjectModel.entity(named: "Book")!, insertInto: context)
            try book.setValue(title, forKey: "title")
            try book.setValue(author, forKey: "author")
        }
        try context.save()
        _ = try PersistentStoreCoordinator(managedObjectModel: try ModelCommandTests.libraryModel()).addNativeStore(at: new)
        let original = try Data(contentsOf: URL(fileURLWithPath: old))

        let ok = try runArbor(["migrate", old, "--to", new])
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(ok.stdout.hasPrefix("\(old): the migration succeeds: lightweight migration"), "\(ok.stdout)")
        #expect(ok.stdout.contains("  Book: 2 → 2"), "\(ok.stdout)")
        #expect(ok.stdout.contains("  Author: 1 → 1"), "\(ok.stdout)")

        // A required attribute without a default: the existing books have none.
        let strictModel = try ModelCommandTests.libraryModel(yearRequired: true)
        _ = try PersistentStoreCoordinator(managedObjectModel: strictModel).addNativeStore(at: strict)
        let failing = try runArbor(["migrate", old, "--to", strict])
        #expect(failing.status == 1)
        #expect(failing.stdout.hasPrefix("\(old): the migration fails: \(old) cannot be migrated"), "names the user's file, not the copy: \(failing.stdout)")
        #expect(!failing.stdout.contains("arbor-verify"), "\(failing.stdout)")
        #expect(failing.stdout.contains("Book.year becomes required"), "\(failing.stdout)")
        #expect(failing.stdout.contains("  Book: 2 objects") && !failing.stdout.contains("→ –"), "counts before, no blank after: \(failing.stdout)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: old)) == original)
    }

    @Test("a migration that would drop data is refused with what and how much (--dry-run); --drop names it and the check then succeeds, listing the drop; the store is never written")
    func drops() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let (dated, undated) = (dir.file("dated.arbor"), dir.file("undated.arbor"))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try ModelCommandTests.libraryModel())
        try coordinator.addNativeStore(at: dated)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let author = ManagedObject(entity: coordinator.managedObjectModel.entity(named: "Author")!, insertInto: context)
        try author.setValue("Ann", forKey: "name")
        for (title, year) in [("One", 1999), ("Two", 2004), ("Three", nil)] as [(String, Int16?)] {
            let book = ManagedObject(entity: coordinator.managedObjectModel.entity(named: "Book")!, insertInto: context)
            try book.setValue(title, forKey: "title")
            try book.setValue(year, forKey: "year")
            try book.setValue(author, forKey: "author")
        }
        try context.save()
        _ = try PersistentStoreCoordinator(managedObjectModel: try ModelCommandTests.libraryModel(year: false)).addNativeStore(at: undated)
        let original = try Data(contentsOf: URL(fileURLWithPath: dated))

        let refused = try runArbor(["migrate", dated, "--to", undated, "--dry-run"])
        #expect(refused.status == 1)
        #expect(refused.stdout.contains("without dropping data it holds (Book.year: the values of 2 objects)"), "\(refused.stdout)")
        #expect(refused.stdout.contains("  would drop Book.year: the values of 2 objects"), "\(refused.stdout)")
        let allowed = try runArbor(["migrate", dated, "--to", undated, "--dry-run", "--drop", "Book.year"])
        #expect(allowed.status == 0, "\(allowed.stdout) \(allowed.stderr)")
        #expect(allowed.stdout.contains("  drops Book.year: the values of 2 objects"), "\(allowed.stdout)")
        #expect(allowed.stdout.contains("  Book: 3 → 3"), "\(allowed.stdout)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: dated)) == original)
    }
}
