import ArborStore
import ArborTestSupport
import Foundation
import Testing
@testable import Arbor

/// No migration drops data unless asked (docs/migration.md, "What a migration never drops"): an
/// inferred migration that would remove an entity's objects, an attribute's values or a
/// relationship's links fails naming each with its amount, the file untouched; a plan's stage
/// that names them allows them; a store of an unrelated model is refused whatever the options.
@Suite("Migrations that would drop data")
struct MigrationLossTests {
    /// What a version of the tracker model leaves out or changes.
    enum Change: Hashable {
        case noEstimate, transientEstimate, renamedEstimate, noProject, noTags, noTagEntity, noBug
    }

    /// Project 1—* Issue *—* Tag, and Bug, a sub-entity of Issue.
    static func tracker(_ changes: Set<Change> = []) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Project") {
                Attribute("name", .string).required()
                if !changes.contains(.noProject) {
                    Relationship("issues", to: "Issue", inverse: "project").toMany()
                }
            }
            Entity("Issue") {
                Attribute("title", .string).required()
                if changes.contains(.transientEstimate) {
                    Attribute("estimate", .integer32).transient()
                } else if changes.contains(.renamedEstimate) {
                    Attribute("points", .integer32).renamingIdentifier("estimate")
                } else if !changes.contains(.noEstimate) {
                    Attribute("estimate", .integer32)
                }
                if !changes.contains(.noProject) {
                    Relationship("project", to: "Project", inverse: "issues")
                }
                if !changes.contains(.noTags) && !changes.contains(.noTagEntity) {
                    Relationship("tags", to: "Tag", inverse: "issues").toMany()
                }
            }
            if !changes.contains(.noBug) {
                Entity("Bug", parent: "Issue") {
                    Attribute("severity", .integer16)
                }
            }
            if !changes.contains(.noTagEntity) {
                Entity("Tag") {
                    Attribute("label", .string)
                    if !changes.contains(.noTags) {
                        Relationship("issues", to: "Issue", inverse: "tags").toMany()
                    }
                }
            }
        }
    }

    /// A store of the first version: 2 projects, 6 issues and 4 bugs (every other one with an
    /// estimate and a project), 3 tags on every issue — or, `empty`, the projects, issues and
    /// bugs without estimates, projects or tags, and no tags.
    static func makeStore(empty: Bool = false) throws -> String {
        let path = try temporaryDirectory() + "/tracker.arbor"
        let stack = try Stack(model: try tracker(), path: path)
        let context = stack.context()
        let projects = try (0..<2).map { try stack.insert("Project", in: context, ["name": "P\($0)"]) }
        let tags = try (0..<(empty ? 0 : 3)).map { try stack.insert("Tag", in: context, ["label": "t\($0)"]) }
        for i in 0..<10 {
            let issue = try stack.insert(i < 6 ? "Issue" : "Bug", in: context, ["title": "I\(i)"])
            guard !empty else { continue }
            if i % 2 == 0 {
                try issue.setValue(Int32(i), forKey: "estimate")
                try issue.setValue(projects[i % 2 == 0 ? 0 : 1], forKey: "project")
            }
            try issue.setValue(Set(tags), forKey: "tags")
        }
        try context.save()
        return path
    }

    /// The refusal of opening `path` with `model` (and `migration`), with the file's bytes
    /// before and after.
    static func refusal(_ path: String, _ model: ManagedObjectModel, migration: MigrationOptions = MigrationOptions()) throws -> ArborError {
        let before = try MigrationTests.fileBytes(path)
        let error = try #require(throws: ArborError.self) { _ = try MigrationTests.open(path, model, migration: migration) }
        #expect(try MigrationTests.fileBytes(path) == before, "the store is untouched")
        return error
    }

    @Test("every change that would drop data the store holds is refused, naming what, how much, and how to allow it; the file is untouched and the old model still opens it",
          arguments: [
              (Change.noEstimate, ["Issue.estimate: the values of 5 objects"]),
              (.transientEstimate, ["Issue.estimate: the values of 5 objects"]),
              (.noProject, ["Issue.project: 5 links"]),
              (.noTags, ["Issue.tags: 30 links"]),
              (.noTagEntity, ["Issue.tags: 30 links", "Tag: 3 objects"]),
          ])
    func refusedWithData(change: Change, losses: [String]) throws {
        let path = try Self.makeStore()
        let error = try Self.refusal(path, try Self.tracker([change]))
        #expect(error.code == .incompatibleModel)
        #expect(error.migrationLosses.map(\.description) == losses)
        #expect(error.migrationLosses.allSatisfy { !$0.isAllowed })
        for loss in losses { #expect(error.message.contains(loss), "\(error.message)") }
        #expect(error.message.contains("renamingIdentifier") && error.message.contains("dropping: ["), "says how to keep or allow: \(error.message)")
        #expect(error.detailedErrors.count == losses.count)
        // Nothing changed: the first version still opens it, every object there.
        let (stack, _) = try MigrationTests.open(path, try Self.tracker(), migration: .never)
        #expect(try stack.context().count(for: FetchRequest<Int>(entityName: "Issue")) == 10)
    }

    @Test("the same changes over a store that holds no such data migrate: no values, no links, no objects are lost",
          arguments: [Change.noEstimate, .transientEstimate, .noProject, .noTags, .noTagEntity])
    func allowedWithoutData(change: Change) throws {
        let path = try Self.makeStore(empty: true)
        let (stack, store) = try MigrationTests.open(path, try Self.tracker([change]))
        #expect(store.migration != nil)
        #expect(store.migration?.losses == [])
        #expect(try stack.context().count(for: FetchRequest<Int>(entityName: "Issue")) == 10)
    }

    @Test("a renaming identifier turns a removal into a rename: the values stay")
    func renameKeeps() throws {
        let path = try Self.makeStore()
        let (stack, store) = try MigrationTests.open(path, try Self.tracker([.renamedEstimate]))
        #expect(store.migration?.losses == [])
        var request = FetchRequest<ManagedObject>(entityName: "Issue")
        request.predicate = try ObjectPredicate(format: "points != nil")
        #expect(try stack.context().fetch(request).count == 5)
    }

    @Test("a plan's stage that names the drops allows them: the data goes and the report lists it; naming some but not all still refuses, marking which were allowed")
    func planAllows() throws {
        let path = try Self.makeStore()
        let old = try Self.tracker()
        let new = try Self.tracker([.noEstimate, .noTagEntity])
        let partly = try Self.refusal(path, new, migration: MigrationTests.allowing([.property("estimate", of: "Issue")], from: old, to: new))
        #expect(partly.migrationLosses.map { "\($0.drop) \($0.isAllowed)" } == ["Issue.estimate true", "Issue.tags false", "Tag false"])
        #expect(!partly.message.contains("Issue.estimate"), "only the refused ones are named: \(partly.message)")

        let (stack, store) = try MigrationTests.open(path, new, migration: MigrationTests.allowing([.property("estimate", of: "Issue"), .entity("Tag")],
                                                                                                    from: old, to: new))
        let report = try #require(store.migration)
        #expect(report.losses.map(\.description) == ["Issue.estimate: the values of 5 objects", "Issue.tags: 30 links", "Tag: 3 objects"])
        #expect(report.description.contains("dropping Issue.estimate: the values of 5 objects"))
        let context = stack.context()
        #expect(try context.count(for: FetchRequest<Int>(entityName: "Issue")) == 10)
        let database = try Database(path: path)
        defer { database.close() }
        #expect(try database.read { try $0.trees().map(\.name).filter { $0.contains("Tag") || $0.contains("tags") } }.isEmpty)
        #expect(try database.checkIntegrity().problems.isEmpty)
    }

    @Test("a removed sub-entity with objects stays refused even when named (a custom stage can move them)")
    func subEntityRefused() throws {
        let path = try Self.makeStore()
        let old = try Self.tracker()
        let new = try Self.tracker([.noBug])
        let error = try Self.refusal(path, new, migration: MigrationTests.allowing([.entity("Bug")], from: old, to: new))
        #expect(error.message.contains("Bug is removed from the model and was a sub-entity"), "\(error.message)")
    }

    @Test("a store whose model history shares no entity with the model is refused outright — migration on, off, through a container — naming both; the store is untouched")
    func unrelatedModel() throws {
        let path = try Self.makeStore()
        let other = try ManagedObjectModel {
            Entity("Invoice") { Attribute("number", .integer64) }
            Entity("Customer") { Attribute("name", .string) }
        }
        for options in [MigrationOptions(), .never] {
            let error = try Self.refusal(path, other, migration: options)
            #expect(error.code == .incompatibleModel)
            #expect(error.message.contains("holds the data of another model"), "\(error.message)")
            #expect(error.message.contains("Issue") && error.message.contains("Invoice"))
            #expect(error.migrationLosses.isEmpty)
        }
        // Two programs, one container name, one directory: the second is refused.
        let directory = try temporaryDirectory()
        let first = PersistentContainer(name: "Shared", managedObjectModel: try Self.tracker())
        first.persistentStoreDescriptions = [PersistentStoreDescription(url: URL(fileURLWithPath: directory + "/Shared.arbor"))]
        try first.loadPersistentStores()
        let second = PersistentContainer(name: "Shared", managedObjectModel: other)
        second.persistentStoreDescriptions = [PersistentStoreDescription(url: URL(fileURLWithPath: directory + "/Shared.arbor"))]
        let error = try #require(throws: ArborError.self) { try second.loadPersistentStores() }
        #expect(error.message.contains("holds the data of another model"), "\(error.message)")
        // A model that renames one of the store's entities is related.
        let renamed = try ManagedObjectModel {
            Entity("Ticket") { Attribute("title", .string) }.renamingIdentifier("Issue")
        }
        let refused = try Self.refusal(path, renamed)
        #expect(!refused.message.contains("another model") && !refused.migrationLosses.isEmpty, "\(refused.message)")
    }

    @Test("verifyMigration reports the rows and links each change would drop, as losses, naming the store rather than its copy; with the drops allowed it succeeds and lists them")
    func verificationReportsLosses() throws {
        let path = try Self.makeStore()
        let old = try Self.tracker()
        let new = try Self.tracker([.noEstimate, .noProject])
        let check = try NativeStore.verifyMigration(at: path, to: new)
        #expect(!check.succeeded)
        #expect(check.losses.map(\.description) == ["Issue.estimate: the values of 5 objects", "Issue.project: 5 links"])
        let failure = try #require(check.failure)
        #expect(failure.message.hasPrefix(path), "names the store, not the copy: \(failure.message)")
        #expect(check.description.contains("would drop Issue.project: 5 links"), "\(check)")
        #expect(check.description.contains("Issue: 6 objects") && !check.description.contains("–"), "\(check)")

        let allowed = try NativeStore.verifyMigration(at: path, to: new, migration: MigrationTests.allowing(
            [.property("estimate", of: "Issue"), .property("issues", of: "Project")], from: old, to: new))
        #expect(allowed.succeeded, "\(allowed)")
        #expect(allowed.losses.map(\.description) == ["Issue.estimate: the values of 5 objects", "Issue.project: 5 links"])
        #expect(allowed.description.contains("drops Issue.estimate"), "\(allowed)")
        // The store itself was never written: the first version opens it as it was.
        let (stack, _) = try MigrationTests.open(path, old, migration: .never)
        var request = FetchRequest<ManagedObject>(entityName: "Issue")
        request.predicate = try ObjectPredicate(format: "estimate != nil AND project != nil")
        #expect(try stack.context().fetch(request).count == 5)
    }

    @Test("a plan of two lightweight stages on a working copy allows each stage's own drops only")
    func stagedDrops() throws {
        let path = try Self.makeStore()
        let v1 = try Self.tracker()
        let v2 = try Self.tracker([.renamedEstimate])
        let v3 = try Self.tracker([.renamedEstimate, .noProject])
        var options = MigrationOptions()
        // The drop is named on the wrong stage: the second stage still refuses.
        options.plan = MigrationPlan(startingAt: v1).lightweight(to: v2, dropping: [.property("project", of: "Issue")]).lightweight(to: v3)
        let error = try Self.refusal(path, v3, migration: options)
        #expect(error.migrationLosses.map(\.description) == ["Issue.project: 5 links"])
        options.plan = MigrationPlan(startingAt: v1).lightweight(to: v2).lightweight(to: v3, dropping: [.property("project", of: "Issue")])
        let (stack, store) = try MigrationTests.open(path, v3, migration: options)
        #expect(store.migration?.losses.map(\.description) == ["Issue.project: 5 links"])
        var request = FetchRequest<ManagedObject>(entityName: "Issue")
        request.predicate = try ObjectPredicate(format: "points != nil")
        #expect(try stack.context().fetch(request).count == 5)
    }
}
