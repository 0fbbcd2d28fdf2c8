import ArborStore
import Foundation
import Testing

/// `arbor recover`, and what read-only commands say about a file that needs it.
@Suite("arbor recover")
struct RecoverCommandTests {
    /// A database at `path` with a hot journal beside it: the state a writer leaves when it dies
    /// after spilling pages into the file. A transaction larger than the page cache spills (its
    /// journal synced, changed pages written over the file); copies of the file and the journal
    /// taken then are that crash. The database committed before holds keys 0..<200 of tree "t"
    /// with values "before"; the interrupted transaction overwrote them with "after".
    func makeHotJournal(at path: String, scratch: String) throws {
        var options = DatabaseOptions()
        options.pageSize = 512
        options.cacheSize = 16 * 512
        let database = try Database(path: scratch, options: options)
        try database.write { transaction in
            let tree = try transaction.tree(named: "t", create: true)!
            for i in 0..<200 { try tree.put(KeyEncoding.encode([.int(Int64(i))]), Array("before".utf8)) }
        }
        struct Interrupted: Error {}
        #expect(throws: Interrupted.self) {
            try database.write { transaction in
                let tree = try transaction.tree(named: "t")!
                for i in 0..<200 { try tree.put(KeyEncoding.encode([.int(Int64(i))]), Array(repeating: UInt8(ascii: "a"), count: 100)) }
                try FileManager.default.copyItem(atPath: scratch, toPath: path)
                try FileManager.default.copyItem(atPath: scratch + "-journal", toPath: path + "-journal")
                throw Interrupted()
            }
        }
        database.close()
    }

    @Test("read-only commands name `arbor recover FILE`; recover rolls the journal back and says so; a second recover finds nothing to do")
    func recover() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let db = dir.file("crashed.arbor")
        try makeHotJournal(at: db, scratch: dir.file("scratch.arbor"))
        let sizeBefore = try #require(try FileManager.default.attributesOfItem(atPath: db)[.size] as? Int)

        for command in [["info", db], ["check", db], ["get", db, "t", "x"], ["scan", db, "t"], ["dump", db],
                        ["query", db, "Thing"], ["model", db]] {
            let result = try runArbor(command)
            #expect(result.status == 1, "\(command): \(result.stdout)")
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].contains("run `arbor recover \(db)`") && lines[0].contains("hot journal"),
                    "\(command[0]): \(result.stderr)")
        }

        let recover = try runArbor(["recover", db])
        #expect(recover.status == 0, "\(recover.stderr)")
        let restored = try #require(recover.stdout.firstMatch(of: /rolled back an interrupted transaction from .*-journal: (\d+) pages restored/))
        #expect(Int(restored.1)! > 0, "\(recover.stdout)")
        let header = try Database(path: db).read { $0.header }
        let sizeAfter = Int(header.pageCount) * header.pageSize
        if sizeAfter != sizeBefore { #expect(recover.stdout.contains("the file truncated from \(sizeBefore) to \(sizeAfter) bytes")) }
        #expect(recover.stdout.hasSuffix("now \(header.pageCount) pages of 512 bytes (\(sizeAfter) bytes)\n"), "\(recover.stdout)")

        // The file is as the last commit left it.
        let check = try runArbor(["check", db])
        #expect(check.status == 0 && check.stdout.hasPrefix("ok:"), "\(check.stdout)\(check.stderr)")
        let scan = try runArbor(["scan", "--hex", db, "t", "--limit", "1"])
        #expect(scan.stdout.hasSuffix("\t" + Array("before".utf8).map { String(format: "%02x", $0) }.joined() + "\n"), "\(scan.stdout)")

        let again = try runArbor(["recover", db])
        #expect(again.status == 0)
        #expect(again.stdout == "\(db): nothing to recover (\(db)-journal is not hot); now \(header.pageCount) pages of 512 bytes (\(sizeAfter) bytes)\n")
    }

    @Test("recover on a sound file with no journal, and on a missing file")
    func nothingToDo() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let db = dir.file("fresh.arbor")
        #expect(try runArbor(["put", db, "t", "k", "v"]).status == 0)
        try? FileManager.default.removeItem(atPath: db + "-journal")
        let result = try runArbor(["recover", db])
        #expect(result.status == 0)
        #expect(result.stdout == "\(db): nothing to recover (there is no journal); now 3 pages of 4096 bytes (12288 bytes)\n", "\(result.stdout)")
        let missing = try runArbor(["recover", dir.file("missing.arbor")])
        #expect(missing.status == 1 && missing.stderr.contains("[notFound]"), "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("missing.arbor")))
    }
}
