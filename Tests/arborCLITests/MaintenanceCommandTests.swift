import Arbor
import ArborStore
import Foundation
import Testing

/// `arbor backup` and `arbor vacuum`, end to end, with other processes on the file.
@Suite("arbor backup and arbor vacuum")
struct MaintenanceCommandTests {
    @Test("arbor backup copies a file two writer processes are committing to: the copy is consistent (a reader's invariant holds), sound, and every writer's commits still land")
    func backupWhileWriting() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let path = dir.file("shared.arbor")
        let commits = 150
        let writers = try (0..<2).map { id in try startArbor(["stress", path, "--writer", "\(id)", "--count", "\(commits)"]) }
        // The writers make the file: wait until they have committed a few times.
        let deadline = Date().addingTimeInterval(30)
        while ((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0) < 8 * 4096 && Date() < deadline { usleep(2_000) }
        var copies: [String] = []
        for round in 0..<3 {
            usleep(20_000)
            let copy = dir.file("copy-\(round).arbor")
            let result = try runArbor(["backup", path, copy])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.hasPrefix("\(path): copied into \(copy): "), "\(result.stdout)")
            copies.append(copy)
        }
        for (id, writer) in writers.enumerated() {
            let result = finish(writer)
            #expect(result.status == 0, "writer \(id): \(result.stderr)")
        }
        let verify = try runArbor(["stress", path, "--verify", "--writers", "2", "--count", "\(commits)"])
        #expect(verify.status == 0, "\(verify.stderr)")
        for copy in copies {
            let read = try runArbor(["stress", copy, "--count", "1"])
            #expect(read.status == 0 && read.stdout.contains("1 consistent read transactions"), "\(read.stdout)\(read.stderr)")
            // (Stress files are pages, not trees: the page check is theirs.)
            let info = try runArbor(["info", copy])
            #expect(info.status == 0 && info.stdout.contains("page check      ok"), "\(info.stdout)\(info.stderr)")
        }
        let existing = try runArbor(["backup", path, copies[0]])
        #expect(existing.status == 1 && existing.stderr.contains("exists"), "\(existing.stderr)")
    }

    @Test("arbor backup copies a stress file whose commit counter reads as a page type (10 commits: 0x0A, a leaf's type byte), so a failed backup in the concurrent test is the engine's, never the layout's")
    func backupOfStressFileAtTypeByte() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let path = dir.file("shared.arbor")
        let writer = try runArbor(["stress", path, "--writer", "0", "--count", "10"])
        #expect(writer.status == 0, "\(writer.stderr)")
        let copy = dir.file("copy.arbor")
        let result = try runArbor(["backup", path, copy])
        #expect(result.status == 0, "\(result.stderr)")
        let verify = try runArbor(["stress", copy, "--verify", "--writers", "1", "--count", "10"])
        #expect(verify.status == 0, "\(verify.stderr)")
    }

    @Test("arbor vacuum shrinks a store with free pages, keeping every object; arbor check passes and the store opens as before")
    func vacuum() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let path = dir.file("library.arbor")
        let model = try ManagedObjectModel {
            Entity("Note") {
                Attribute("text", .string).required()
                Attribute("serial", .integer32)
            }
        }
        do {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addNativeStore(at: path)
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            for i in 0..<2_000 {
                let note = ManagedObject(entity: model.entity(named: "Note")!, insertInto: context)
                try note.setValue("Note \(i) " + String(repeating: "x", count: 200), forKey: "text")
                try note.setValue(Int32(i), forKey: "serial")
            }
            try context.save()
            try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Note", format: "serial >= 900")))
        }
        let before = try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int
        let result = try runArbor(["vacuum", path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("\(path): compacted: "), "\(result.stdout)")
        let after = try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int
        #expect(after < before / 2, "\(before) → \(after) bytes")
        #expect(try runArbor(["check", path]).status == 0)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addNativeStore(at: path)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: FetchRequest<Int>(entityName: "Note")) == 900)
    }
}
