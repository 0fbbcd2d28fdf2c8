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
        #expect(ok.stdout.hasPrefix("the migration succeeds: lightweight migration"), "\(ok.stdout)")
        #expect(ok.stdout.contains("  Book: 2 → 2"), "\(ok.stdout)")
        #expect(ok.stdout.contains("  Author: 1 → 1"), "\(ok.stdout)")

        // A required attribute without a default: the existing books have none.
        let strictModel = try ModelCommandTests.libraryModel(yearRequired: true)
        _ = try PersistentStoreCoordinator(managedObjectModel: strictModel).addNativeStore(at: strict)
        let failing = try runArbor(["migrate", old, "--to", strict])
        #expect(failing.status == 1)
        #expect(failing.stdout.hasPrefix("the migration fails"), "\(failing.stdout)")
        #expect(failing.stdout.contains("Book.year becomes required"), "\(failing.stdout)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: old)) == original)
    }
}
