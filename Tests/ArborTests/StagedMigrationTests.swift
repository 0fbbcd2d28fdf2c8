import ArborStore
import ArborTestSupport
import Foundation
import Synchronization
import Testing
@testable import Arbor

/// Staged and custom migration (issue 27 item 4; docs/migration.md, "Staged and custom
/// migration"): a store several versions behind runs every stage of its plan in order; a custom
/// stage sees the old and the new objects side by side; the store is replaced in one transaction,
/// so a failing stage, another writer or a power cut leaves it as it was.
@Suite("Staged and custom migration")
struct StagedMigrationTests {
    typealias Library = MigrationTests

    /// Version 2: renames (Author → Writer, title → name, tags → labels); version 3: `pages`
    /// becomes a string and a required `summary` is added, which only code can fill.
    static func versions() throws -> [ManagedObjectModel] {
        [try Library.library(), try Library.library([.renames]), try versionThree()]
    }

    static func versionThree() throws -> ManagedObjectModel {
        var schema = ModelSchema(try Library.library([.renames, .pagesText]))
        let book = try #require(schema.entities.firstIndex { $0.name == "Book" })
        schema.entities[book].attributes.append(ModelSchema.AttributeSchema(name: "summary", type: "string", optional: false, transient: false))
        return try schema.model()
    }

    /// Pages as text, and a summary made from old and new values alike.
    static let convert: @Sendable (MigrationContext) throws -> Void = { migration in
        try migration.forEachObject(ofEntity: "Book") { old, new in
            let new = try #require(new)
            let pages = try old.value(forKey: "pages") as? Int32
            try new.setValue(pages.map { "\($0) pages" }, forKey: "pages")
            let author = try #require(try new.value(forKey: "author") as? ManagedObject)
            try new.setValue("\(try old.value(forKey: "name") as! String) by \(try author.value(forKey: "name") as! String)", forKey: "summary")
        }
    }

    static func plan(_ models: [ManagedObjectModel], custom: @escaping @Sendable (MigrationContext) throws -> Void = convert) -> MigrationPlan {
        MigrationPlan(startingAt: models[0]).lightweight(to: models[1]).custom(to: models[2], custom)
    }

    static func options(_ plan: MigrationPlan) -> MigrationOptions {
        var options = MigrationOptions()
        options.plan = plan
        return options
    }

    /// Every value of version 1's data, read through version 3.
    static func checkVersionThree(_ context: ManagedObjectContext) throws {
        let books = try Library.books(context, title: "name")
        #expect(books.count == Library.bookCount)
        for (i, book) in books {
            #expect(try book.value(forKey: "pages") as? String == Library.pages(i).map { "\($0) pages" }, "book \(i).pages")
            #expect(try book.value(forKey: "price") as? Float == Library.price(i))
            #expect(try book.value(forKey: "summary") as? String == "Book \(i) by A\(i % 3)")
            let labels = try #require(try book.value(forKey: "labels") as? Set<ManagedObject>)
            #expect(Set(try labels.map { try #require($0.value(forKey: "label") as? String) }) == Library.tags(i))
        }
        for writer in try context.fetch(FetchRequest<ManagedObject>(entityName: "Writer")) {
            #expect((try writer.value(forKey: "books") as? Set<ManagedObject>)?.count == Library.bookCount / 3)
        }
        // The indexes and the store's searches hold for the new objects.
        let found = try context.fetch(FetchRequest<ManagedObject>(entityName: "Book", format: "name == %@ AND author.name == %@", "Book 4", "A1"))
        #expect(found.count == 1)
    }

    @Test("a store two versions behind runs a lightweight then a custom stage: values converted and filled by code that sees old and new objects, links kept, history and report say so, progress is reported, no working file is left")
    func chain() throws {
        let (path, _) = try Library.makeStore()
        let models = try Self.versions()
        let identifier = try NativeStore(path: path, model: models[0]).identifier
        let phases = Mutex<[String]>([])
        let plan = Self.plan(models).reportingProgress { progress in phases.withLock { $0.append("\(progress.stage)/\(progress.stages) \(progress.phase)") } }
        let (stack, store) = try Library.open(path, models[2], migration: Self.options(plan))
        try Self.checkVersionThree(stack.context())
        #expect(store.identifier == identifier)
        let report = try #require(store.migration)
        #expect(report.kind == "staged")
        #expect(report.stages.map(\.kind) == ["lightweight", "custom"])
        #expect((report.fromVersion, report.toVersion) == (1, 3))
        #expect(report.stages[1].entities.first { $0.entity == "Book" }?.rows == Library.bookCount)
        let history = try NativeStore.modelHistory(at: path)
        #expect(history.map(\.migration) == [nil, "lightweight", "custom"])
        #expect(history.last?.isVersion(of: models[2]) == true)
        let seen = phases.withLock { $0 }
        for phase in ["1/2 copying the store", "1/2 lightweight", "2/2 copying Book", "2/2 relating Book", "2/2 custom Book", "2/2 saving", "2/2 replacing the store"] {
            #expect(seen.contains(phase), "\(phase) in \(Set(seen))")
        }
        #expect(!FileManager.default.fileExists(atPath: path + ".migration-a") && !FileManager.default.fileExists(atPath: path + ".migration-b"))
        let database = try Database(path: path)
        #expect(try database.checkIntegrity().problems.isEmpty)
        database.close()
        // Reopened with the plan: nothing more to do; an earlier version is refused as older.
        #expect(try Library.open(path, models[2], migration: Self.options(plan)).1.migration == nil)
        #expect(throws: ArborError.self) { try Library.open(path, models[1]) }
    }

    @Test("a store one stage behind runs only that stage: a custom one on a working copy, a lightweight one in place keeping object IDs")
    func fromAnyVersion() throws {
        let models = try Self.versions()
        let (path, _) = try Library.makeStore()
        _ = try Library.open(path, models[1])
        let (stack, store) = try Library.open(path, models[2], migration: Self.options(Self.plan(models)))
        #expect(store.migration?.kind == "staged")
        #expect(store.migration?.stages.map(\.kind) == ["custom"])
        try Self.checkVersionThree(stack.context())

        // Lightweight stages only, inferring off: the plan's stages still run, keeping IDs.
        let (second, secondIDs) = try Library.makeStore()
        var options = Self.options(MigrationPlan(startingAt: models[0]).lightweight(to: models[1]))
        options.shouldInferMappingModelAutomatically = false
        let (lightStack, light) = try Library.open(second, models[1], migration: options)
        #expect(light.migration?.kind == "lightweight")
        try Library.checkData(lightStack.context(), title: "name", author: "Writer", tags: "labels", ids: secondIDs)
    }

    @Test("consecutive lightweight stages compose: a chain of renames keeps its objects, where one inference from the first version to the last would drop them")
    func lightweightChain() throws {
        func model(_ name: String, was: String?) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                Entity(name) {
                    Attribute("name", .string)
                }.renamingIdentifier(was ?? name)
            }
        }
        let path = try temporaryDirectory() + "/chain.arbor"
        let v1 = try model("Author", was: nil)
        let stack = try Stack(model: v1, path: path)
        let context = stack.context()
        let authors = try (0..<50).map { try stack.insert("Author", in: context, ["name": "A\($0)"]) }
        try context.save()
        let ids = authors.map(\.objectID)
        let v2 = try model("Writer", was: "Author")
        let v3 = try model("Person", was: "Writer")
        // Inferred straight from version 1, Person would be new and Author removed with its
        // objects: the store shares no entity with the model, so it is refused, untouched.
        let direct = try temporaryDirectory() + "/direct.arbor"
        try FileManager.default.copyItem(atPath: path, toPath: direct)
        let before = try Library.fileBytes(direct)
        let refusal = try #require(throws: ArborError.self) { try Library.values(direct, v3, "Person", "name") }
        #expect(refusal.code == .incompatibleModel && refusal.message.contains("holds the data of another model"), "\(refusal)")
        #expect(try Library.fileBytes(direct) == before)
        // Through the plan, each stage is inferred between its two versions.
        let (planned, store) = try Library.open(path, v3, migration: Self.options(MigrationPlan(startingAt: v1).lightweight(to: v2).lightweight(to: v3)))
        #expect(store.migration?.stages.map(\.kind) == ["lightweight", "lightweight"])
        let reading = planned.context()
        let people = try reading.fetch(FetchRequest<ManagedObject>(entityName: "Person"))
        #expect(Set(try people.map { try $0.value(forKey: "name") as! String }) == Set((0..<50).map { "A\($0)" }))
        #expect(Set(people.map(\.objectID.primaryKey)) == Set(ids.map(\.primaryKey)), "lightweight stages keep primary keys")
        #expect(try NativeStore.modelHistory(at: path).map(\.migration) == [nil, "lightweight", "lightweight"])
    }

    @Test("a failing custom stage — its code throws, or leaves a required value nil — is a migrationFailed error and leaves the store byte for byte as it was")
    func failingStage() throws {
        let models = try Self.versions()
        let (path, ids) = try Library.makeStore()
        let before = try Library.fileBytes(path)
        struct Refused: Error {}
        let throwing = Self.plan(models) { _ in throw Refused() }
        let leavingNil = Self.plan(models) { migration in
            try migration.forEachObject(ofEntity: "Book") { _, new in try new?.setValue("x", forKey: "pages") }
        }
        for plan in [throwing, leavingNil] {
            let error = try #require(throws: ArborError.self) { try Library.open(path, models[2], migration: Self.options(plan)) }
            #expect(error.code == .migrationFailed, "\(error)")
            #expect(error.message.contains("custom stage from version 2 to 3"), "\(error.message)")
            #expect(try Library.fileBytes(path) == before)
            #expect(!FileManager.default.fileExists(atPath: path + ".migration-a") && !FileManager.default.fileExists(atPath: path + ".migration-b"))
        }
        let leftNil = try #require(throws: ArborError.self) { try Library.open(path, models[2], migration: Self.options(leavingNil)) }
        #expect(leftNil.detailedErrors.first.map { "\($0)" }?.contains("summary") == true, "\(leftNil.detailedErrors)")
        let (stack, _) = try Library.open(path, models[0], migration: .never)
        try Library.checkData(stack.context(), ids: ids)
    }

    @Test("a plan's run holds the store's write lock: another connection cannot write meanwhile (busy), and nothing it tried is lost or half-applied")
    func writtenMeanwhile() throws {
        let models = try Self.versions()
        let (path, _) = try Library.makeStore()
        let refused = Mutex<ArborError?>(nil)
        let meddling = Self.plan(models) { migration in
            var options = DatabaseOptions()
            options.busyTimeout = .milliseconds(50)
            do {
                let (stack, _) = try Library.open(path, models[0], migration: .never, options: options)
                let context = stack.context()
                _ = try stack.insert("Tag", in: context, ["label": "written meanwhile"])
                try context.save()
            } catch let error as ArborError {
                refused.withLock { $0 = error }
            }
            try StagedMigrationTests.convert(migration)
        }
        let (stack, store) = try Library.open(path, models[2], migration: Self.options(meddling))
        #expect(store.migration?.kind == "staged")
        let error = try #require(refused.withLock { $0 })
        #expect(error.storeError?.code == .busy, "\(error)")
        try Self.checkVersionThree(stack.context())
    }

    @Test("the plan's last version must be the model the store opens with")
    func wrongModel() throws {
        let models = try Self.versions()
        let (path, _) = try Library.makeStore()
        let error = try #require(throws: ArborError.self) {
            try Library.open(path, models[1], migration: Self.options(Self.plan(models)))
        }
        #expect(error.code == .misuse)
    }

    @Test("a power cut at every I/O operation of the transaction that replaces the store, and at every tenth of the working copy's, leaves the store at version 1 or at version 3, never between; reopening with the plan finishes it")
    func powerCutEverywhere() throws {
        let disk = SimulatedDisk()
        let (path, ids) = try Library.makeStore(on: disk)
        disk.syncAll()
        let image = disk.snapshot()
        let models = try Self.versions()
        let options = Self.options(Self.plan(models))
        let before = disk.operationCount
        _ = try Library.open(path, models[2], migration: options, options: Library.diskOptions(disk))
        let operations = disk.operationCount - before
        #expect(operations > 50)
        var outcomes = (old: 0, new: 0)
        // Every operation of the final transaction (the last part), and a sample of the working
        // copy's, which never touch the store.
        let finalPart = operations - 120
        let points = Array(1...operations).filter { $0 % 10 == 0 || $0 > finalPart }
        var images = 0
        for point in points {
            let damages: [SimulatedDisk.PowerCutDamage] = point > finalPart ? [.applyAll, .dropAll, .random(seed: UInt64(point))] : [.random(seed: UInt64(point))]
            for damage in damages {
                images += 1
                disk.restore(image)
                disk.inject(.powerCut(damage), atOperation: point)
                _ = try? Library.open(path, models[2], migration: options, options: Library.diskOptions(disk))
                disk.clearFaults()
                // Reopened with the plan first, as an application would (its journal, if any, is
                // rolled back before the plan reads the store's version).
                let afterCut = disk.snapshot()
                let (planned, _) = try Library.open(path, models[2], migration: options, options: Library.diskOptions(disk))
                try Self.checkVersionThree(planned.context())
                disk.restore(afterCut)
                let oldOpens = (try? Library.open(path, models[0], migration: .never, options: Library.diskOptions(disk))) != nil
                if oldOpens {
                    outcomes.old += 1
                    let (stack, _) = try Library.open(path, models[0], migration: .never, options: Library.diskOptions(disk))
                    try Library.checkData(stack.context(), ids: ids)
                } else {
                    outcomes.new += 1
                    #expect(try NativeStore.modelHistory(at: path, options: Library.diskOptions(disk)).count == 3, "crash at \(point) \(damage)")
                }
                let (stack, _) = try Library.open(path, models[2], migration: options, options: Library.diskOptions(disk))
                try Self.checkVersionThree(stack.context())
                let database = try Database(path: path, options: Library.diskOptions(disk))
                #expect(try database.checkIntegrity().problems.isEmpty, "crash at \(point) \(damage)")
                database.close()
            }
        }
        #expect(outcomes.old > 0 && outcomes.new > 0, "\(outcomes)")
        print("staged migration crash images checked: \(images) at \(points.count) of \(operations) operations; old store \(outcomes.old), migrated \(outcomes.new)")
    }
}
