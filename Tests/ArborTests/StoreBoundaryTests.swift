import Foundation
import Testing
@testable import Arbor

/// The store boundary (docs/architecture.md, "The store boundary"): what every store implements
/// is the `PersistentStore` protocol; what only some can do is a capability the coordinator asks
/// a store for, refusing a request with `unsupported` when the store lacks it. A store with none
/// (`FailingStore`, a plain forwarder) still carries every fetch, save and merge; the requests
/// that need a capability fall back to objects where Core Data's answer can be computed there,
/// and are refused otherwise. The sources keep the layers apart.
@Suite("The store boundary")
struct StoreBoundaryTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: "team").toMany().deleteRule(.cascade)
            }
            Entity("Player") {
                Attribute("name", .string)
                Attribute("goals", .integer32).defaultValue(Int32(0))
                Relationship("team", to: "Team", inverse: "players")
            }
        }
    }

    /// A coordinator whose only store is `store` (made by `wrap` from a native in-memory store),
    /// with two teams of three players each saved.
    static func league(_ wrap: (NativeStore) -> any PersistentStore) throws -> (PersistentStoreCoordinator, ManagedObjectContext) {
        let model = try model()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        coordinator.addPersistentStore(wrap(try NativeStore.inMemory(model: model)))
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for team in ["Reds", "Blues"] {
            let object = try EntityDescription.insertNewObject(forEntityName: "Team", into: context)
            try object.setValue(team, forKey: "name")
            for index in 0..<3 {
                let player = try EntityDescription.insertNewObject(forEntityName: "Player", into: context)
                try player.setValue("\(team) \(index)", forKey: "name")
                try player.setValue(Int32(index * (team == "Reds" ? 2 : 3)), forKey: "goals")
                try player.setValue(object, forKey: "team")
            }
        }
        try context.save()
        return (coordinator, context)
    }

    static func goalsByTeam(_ context: ManagedObjectContext) throws -> [String: Int] {
        var request = FetchRequest<[String: any Sendable]>(entityName: "Player")
        request.propertiesToGroupBy = ["team.name"]
        request.propertiesToFetch = [.key("team.name"), .aggregate(.sum, of: "goals", as: "total")]
        var totals: [String: Int] = [:]
        for row in try context.fetch(request) {
            let team = try #require(row["team.name"] as? String)
            totals[team] = try #require((row["total"] as? any BinaryInteger).map { Int($0) })
        }
        return totals
    }

    @Test("batch deletes and updates need a store that runs them: a store without is refused with unsupported, naming the request and the store, and nothing changes")
    func batchRequestsRefused() throws {
        let (_, context) = try Self.league { FailingStore($0) }
        let delete = #expect(throws: ArborError.self) {
            try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Player", format: "goals > 2")))
        }
        #expect(delete?.code == .unsupported)
        #expect(delete?.message.contains("a batch delete") == true && delete?.message.contains("memory") == true, "\(delete?.message ?? "")")
        var update = BatchUpdateRequest(entityName: "Player")
        update.propertiesToUpdate = ["goals": .constant(.int(9))]
        let updated = #expect(throws: ArborError.self) { try context.execute(update) }
        #expect(updated?.code == .unsupported && updated?.message.contains("a batch update") == true)
        let fresh = ManagedObjectContext(persistentStoreCoordinator: context.persistentStoreCoordinator!)
        #expect(try fresh.count(for: FetchRequest<ManagedObject>(entityName: "Player", format: "goals > 2")) == 3)
        #expect(try fresh.count(for: FetchRequest<ManagedObject>(entityName: "Player", format: "goals == 9")) == 0)
    }

    @Test("a grouped fetch on a store that cannot group is computed on objects, equal to the native store's answer in the store")
    func groupingFallsBack() throws {
        let (_, native) = try Self.league { $0 }
        let (_, plain) = try Self.league { FailingStore($0) }
        let inStore = try Self.goalsByTeam(native)
        #expect(inStore == ["Reds": 6, "Blues": 9])
        #expect(try Self.goalsByTeam(plain) == inStore)
    }

    @Test("persistent history and query generations need a store that records history: none is read from a store without, and pinning is refused")
    func historyNeedsTheCapability() throws {
        let (coordinator, context) = try Self.league { FailingStore($0) }
        #expect(try context.execute(PersistentHistoryChangeRequest.fetchHistory(after: nil)).transactions?.isEmpty == true)
        #expect(try coordinator.currentPersistentHistoryToken() == nil)
        let pin = #expect(throws: ArborError.self) { try context.setQueryGenerationFrom(.current) }
        #expect(pin?.code == .misuse && pin?.message.contains("records none") == true, "\(pin?.message ?? "")")
    }

    @Test("a batch insert on a store without one-read row checks checks its destinations row by row before the write: a missing one is refused, nothing written")
    func batchInsertChecksDestinations() throws {
        let (_, context) = try Self.league { FailingStore($0) }
        let team = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Team", format: "name == 'Reds'")).first)
        var insert = BatchInsertRequest(entityName: "Player", objects: [["name": "Reds 9", "team": team.objectID]])
        insert.resultType = .count
        #expect(try context.execute(insert).count == 1)
        let missing = context.persistentStoreCoordinator!.persistentStores[0].objectID(entityName: "Team", primaryKey: 999)
        let refused = #expect(throws: ArborError.self) {
            try context.execute(BatchInsertRequest(entityName: "Player", objects: [["name": "nobody", "team": missing]]))
        }
        #expect(refused?.code == .misuse && refused?.objectID == missing)
        #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Player", format: "name == 'nobody'")) == 0)
    }

    @Test("explain goes through the coordinator to any store")
    func explainThroughTheCoordinator() throws {
        let (_, context) = try Self.league { FailingStore($0) }
        let plan = try FetchRequest<ManagedObject>(entityName: "Player", format: "goals > 2").explain(in: context)
        #expect(plan.contains("Player"), "\(plan)")
    }

    /// The Swift files under `Sources/Arbor/<folder>`, each with its comments taken out.
    static func code(in folders: [String]) throws -> [(file: String, code: String)] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Sources/Arbor").standardized
        var files: [(String, String)] = []
        for folder in folders {
            let directory = root.appendingPathComponent(folder)
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) where name.hasSuffix(".swift") {
                let text = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
                let code = text.split(separator: "\n", omittingEmptySubsequences: false)
                    .map { line in line.range(of: "//").map { String(line[..<$0.lowerBound]) } ?? String(line) }
                    .joined(separator: "\n")
                files.append(("\(folder)/\(name)", code))
            }
        }
        return files
    }

    /// The other direction — nothing outside the native store's folder casts to it or reads its
    /// database — is `Scripts/check-habits.py`'s check 8, which `make test` runs.
    @Test("the store folders name no context, coordinator or context-side type: a store never calls up")
    func layers() throws {
        let stores = try Self.code(in: ["StoreBoundary", "NativeStore"])
        #expect(!stores.isEmpty)
        for (file, code) in stores {
            for banned in ["ManagedObjectContext", "PersistentStoreCoordinator", "ContextChange", "PendingMerge", "ManagedObject("] {
                #expect(!code.contains(banned), "\(file) names \(banned)")
            }
        }
    }
}
