import ArborStore
import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// Verifying a migration on a copy (issue 27 item 6; docs/migration.md, "Verify before you ship"):
/// the store is read, never written; what the migration would do, or why it would fail, is
/// reported with each entity's objects before and after.
@Suite("Verifying a migration on a copy")
struct MigrationVerificationTests {
    typealias Library = MigrationTests

    @Test("a migration that succeeds: each entity's objects before and after (renamed entities under both names), the report and the time; the store is not written and no copy is left")
    func succeeds() throws {
        let (path, _) = try Library.makeStore()
        let before = try Library.fileBytes(path)
        let copy = try temporaryDirectory() + "/copy.arbor"
        let check = try NativeStore.verifyMigration(at: path, to: try Library.library([.renames, .subtitle]), copyAt: copy)
        #expect(check.succeeded)
        #expect(check.objectsBefore == ["Author": 3, "Book": 30, "Tag": 4])
        #expect(check.objectsAfter == ["Writer": 3, "Book": 30, "Tag": 4])
        #expect(check.migration?.kind == "lightweight")
        #expect(check.description.contains("Writer: 3 → 3"), "\(check)")
        #expect(check.description.contains("Book: 30 → 30"), "\(check)")
        #expect(try Library.fileBytes(path) == before)
        #expect(!FileManager.default.fileExists(atPath: copy))
        #expect(try NativeStore.modelHistory(at: path).count == 1)
    }

    @Test("a migration that would fail is reported (not thrown), naming the rows; kept values breaking new rules are listed; a plan runs its stages on the copy")
    func failuresAndPlans() throws {
        let (path, _) = try Library.makeStore(duplicateTitles: true)
        let before = try Library.fileBytes(path)
        let duplicates = try NativeStore.verifyMigration(at: path, to: try Library.library([.uniqueTitle]))
        #expect(!duplicates.succeeded)
        #expect(duplicates.failure?.code == .incompatibleModel)
        #expect(duplicates.failure?.message.contains("uniqueness") == true, "\(String(describing: duplicates.failure))")
        #expect(duplicates.objectsAfter.isEmpty && duplicates.objectsBefore["Book"] == 30)
        #expect(duplicates.description.hasPrefix("the migration fails"))

        let (rulesPath, _) = try Library.makeStore()
        let kept = try NativeStore.verifyMigration(at: rulesPath, to: try Library.library([.rules]))
        #expect(kept.succeeded && kept.invalidObjects.count == 20 && kept.migration?.invalidObjectCount == 30)
        var failing = MigrationOptions()
        failing.invalidObjects = .fail
        let refused = try NativeStore.verifyMigration(at: rulesPath, to: try Library.library([.rules]), migration: failing)
        #expect(refused.failure?.code == .migrationFailed)

        let models = try StagedMigrationTests.versions()
        let planned = try NativeStore.verifyMigration(at: path, to: models[2], migration: StagedMigrationTests.options(StagedMigrationTests.plan(models)))
        #expect(planned.succeeded, "\(planned)")
        #expect(planned.migration?.stages.map(\.kind) == ["lightweight", "custom"])
        #expect(planned.objectsAfter["Book"] == 30 && planned.objectsAfter["Writer"] == 3)
        #expect(try Library.fileBytes(path) == before)
    }

    @Test("a store that cannot be read is a storeOpen error; a copy path that exists is refused")
    func unreadable() throws {
        let path = try temporaryDirectory() + "/missing.arbor"
        let error = try #require(throws: ArborError.self) { try NativeStore.verifyMigration(at: path, to: try Library.library()) }
        #expect(error.code == .storeOpen)
        #expect(!FileManager.default.fileExists(atPath: path))
        // The copy is deleted afterwards, so it may not be an existing file: never the store.
        let (store, _) = try Library.makeStore()
        let before = try Library.fileBytes(store)
        let refused = try #require(throws: ArborError.self) { try NativeStore.verifyMigration(at: store, to: try Library.library(), copyAt: store) }
        #expect(refused.code == .misuse)
        #expect(try Library.fileBytes(store) == before)
    }
}
