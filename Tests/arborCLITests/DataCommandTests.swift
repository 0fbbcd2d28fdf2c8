import ArborStore
import Foundation
import Testing

@Suite("arbor data commands")
struct DataCommandTests {
    @Test("put, get, delete and scan, in text and hex")
    func putGetDeleteScan() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let db = dir.file("db")
        for (key, value) in [("b", "2"), ("a", "1"), ("c", "3"), ("d", "4")] {
            let put = try runArbor(["put", db, "letters", key, value])
            #expect(put.status == 0, "\(put.stderr)")
        }
        #expect(try runArbor(["get", db, "letters", "c"]).stdout == "3\n")
        let missing = try runArbor(["get", db, "letters", "zz"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("no key zz in tree \"letters\""))
        #expect(try runArbor(["scan", db, "letters"]).stdout == "a\t1\nb\t2\nc\t3\nd\t4\n")
        #expect(try runArbor(["scan", db, "letters", "--from", "b", "--to", "d"]).stdout == "b\t2\nc\t3\n")
        #expect(try runArbor(["scan", db, "letters", "--limit", "1"]).stdout == "a\t1\n")
        #expect(try runArbor(["delete", db, "letters", "b"]).status == 0)
        #expect(try runArbor(["delete", db, "letters", "b"]).status == 1)
        #expect(try runArbor(["put", "--hex", db, "binary", "00ff", "0a0b"]).status == 0)
        #expect(try runArbor(["get", "--hex", db, "binary", "00ff"]).stdout == "0a0b\n")
        let badHex = try runArbor(["put", "--hex", db, "binary", "zz", "00"])
        #expect(badHex.status != 0)
        #expect(badHex.stderr.contains("not hexadecimal"))
        #expect(try runArbor(["get", db, "nosuchtree", "a"]).stderr.contains("no tree named \"nosuchtree\""))
        let check = try runArbor(["check", db])
        #expect(check.status == 0, "\(check.stderr)")
        #expect(check.stdout.hasPrefix("ok: "))
    }

    @Test("dump and load round-trip every tree byte for byte")
    func dumpLoadRoundTrip() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let source = dir.file("source")
        var options = DatabaseOptions()
        options.pageSize = 1024
        let database = try Database(path: source, options: options)
        var generator = SystemRandomNumberGenerator()
        try database.write { (tx) throws in
            try tx.setUserVersion(77)
            let table = try tx.createTree(named: "rows")
            for _ in 0..<3 { _ = try table.nextSequence() }
            for i in 0..<2000 {
                let size = i % 97 == 0 ? 5000 : Int(generator.next() % 60)
                let value = (0..<size).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
                try table.put(KeyEncoding.encode([.int(Int64(i))]), value)
            }
            let index = try tx.createTree(named: "rows by text ✓", kind: .index)
            try index.put(Array("tab\there\nnewline".utf8), [0, 0, 0])
            try index.put([], Array(String(repeating: "compressible ", count: 300).utf8))
        }
        database.close()
        let dump = try runArbor(["dump", source])
        #expect(dump.status == 0, "\(dump.stderr)")
        let dumpFile = dir.file("dump.txt")
        try dump.stdout.write(toFile: dumpFile, atomically: true, encoding: .utf8)

        let target = dir.file("target")
        let load = Process()
        load.executableURL = URL(fileURLWithPath: arborBinary)
        load.arguments = ["load", target]
        load.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: dumpFile))
        let err = Pipe()
        load.standardError = err
        try load.run()
        load.waitUntilExit()
        let loadErr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(load.terminationStatus == 0, "\(loadErr)")
        #expect(loadErr.contains("loaded 2002 entries"))

        let again = try runArbor(["dump", target])
        #expect(again.stdout == dump.stdout)
        #expect(try runArbor(["check", target]).status == 0)
        // Loading into existing trees is refused without --replace, and nothing is written.
        let twice = Process()
        twice.executableURL = URL(fileURLWithPath: arborBinary)
        twice.arguments = ["load", target]
        twice.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: dumpFile))
        twice.standardError = Pipe()
        try twice.run()
        twice.waitUntilExit()
        #expect(twice.terminationStatus == 1)
    }

    @Test("malformed dumps are refused with the line number")
    func malformedDump() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        for (text, expected) in [("hello\n", "line 1: not an ArborStore dump"),
                                 ("ArborStore dump 1\npage-size 1000\n", "line 2"),
                                 ("ArborStore dump 1\npage-size 4096\nuser-version 0\ntree 61 table 0\n 0g\n", "line 5"),
                                 ("ArborStore dump 1\npage-size 4096\nuser-version 0\ntree 61 table 0\n 00\n", "line 6")] {
            let input = dir.file("in.txt")
            try text.write(toFile: input, atomically: true, encoding: .utf8)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: arborBinary)
            process.arguments = ["load", dir.file("db")]
            process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: input))
            let err = Pipe()
            process.standardError = err
            try process.run()
            process.waitUntilExit()
            let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(process.terminationStatus == 1, "\(text)")
            #expect(stderr.contains(expected), "\(stderr)")
        }
        // Nothing was loaded by the failed loads.
        if FileManager.default.fileExists(atPath: dir.file("db")) {
            #expect(try runArbor(["check", dir.file("db")]).stdout.contains("0 trees"))
        }
    }

    @Test("hostile files: every command exits with a message, never a crash or a hang",
          arguments: ["check", "info", "get", "scan", "dump"])
    func hostile(command: String) throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let db = dir.file("db")
        var options = DatabaseOptions()
        options.pageSize = 512
        let database = try Database(path: db, options: options)
        try database.write { (tx) throws in
            let tree = try tx.createTree(named: "t")
            for i in 0..<400 { try tree.put(KeyEncoding.encode([.int(Int64(i))]), Array(repeating: UInt8(i % 200), count: i % 7 == 0 ? 900 : 20)) }
        }
        database.close()
        let good = [UInt8](try Data(contentsOf: URL(fileURLWithPath: db)))
        var generator = SystemRandomNumberGenerator()
        var variants: [[UInt8]] = [Array(good.prefix(good.count / 2)), Array(good.prefix(100)),
                                   Array("not a database, just text\n".utf8)]
        for _ in 0..<6 {
            var flipped = good
            let offset = Int(generator.next() % UInt64(good.count))
            flipped[offset] ^= UInt8(1 << (generator.next() % 8))
            variants.append(flipped)
        }
        for variant in variants {
            try Data(variant).write(to: URL(fileURLWithPath: db))
            try? FileManager.default.removeItem(atPath: db + "-journal")
            let arguments = command == "get" || command == "scan"
                ? [command, db, "t"] + (command == "get" ? [String(decoding: KeyEncoding.encode([.int(5)]).map { $0 == 0 ? 0x30 : $0 }, as: UTF8.self)] : [])
                : [command, db]
            let result = try runArbor(arguments)
            #expect(!result.stderr.contains("Fatal error"), "\(command): \(result.stderr)")
            #expect(result.status == 0 || result.status == 1, "\(command) exited \(result.status): \(result.stderr)")
            if variant.count != good.count || command == "check" {
                // Truncated, foreign or (for check) damaged: always an error with a message.
                if variant.count != good.count { #expect(result.status == 1 && !result.stderr.isEmpty, "\(command)") }
            }
        }
    }
}

@Suite("arbor demo")
struct DemoCommandTests {
    @Test("arbor demo walks through the seeds' example on a store file that arbor check then finds sound")
    func demo() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-demo-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = directory + "/employees.arbor"
        let result = try runArbor(["demo", store])
        #expect(result.status == 0, "\(result.stderr)")
        for line in ["Engineering is a fault: true", "its name: Engineering (now a fault: false)", "same instance in the reader: true",
                     "Sales: [\"Katherine Johnson\"]", "Katherine's row is gone: objectNotFound",
                     "save failed: validationMultipleErrors", "rolled back: no changes left"] {
            #expect(result.stdout.contains(line), "missing: \(line)")
        }
        let check = try runArbor(["check", store])
        #expect(check.status == 0 && check.stdout.hasPrefix("ok:"))
    }
}

@Suite("arbor check")
struct CheckCommandTests {
    @Test("a corrupt page is one problem, printed once, naming its tree and page once each")
    func corruptPageOnce() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let db = dir.file("books.arbor")
        var options = DatabaseOptions()
        options.pageSize = 512
        let database = try Database(path: db, options: options)
        try database.write { transaction in
            let rows = try transaction.createTree(named: "rows.Book")
            for i in 0..<300 { try rows.put(KeyEncoding.encode([.int(Int64(i))]), Array(repeating: 7, count: 40)) }
        }
        // A one-page tree made last: its root is the file's last page.
        try database.write { transaction in
            let index = try transaction.createTree(named: "index.Book.year", kind: .index)
            for year in 1990..<1993 { try index.put(KeyEncoding.encode([.int(Int64(year))]), []) }
        }
        let page = try database.read { $0.header.pageCount }
        database.close()
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: db)))
        bytes[Int(page - 1) * 512 + 20] ^= 0x40
        try Data(bytes).write(to: URL(fileURLWithPath: db))

        let check = try runArbor(["check", db])
        #expect(check.status == 1)
        #expect(check.stdout == "1 problem(s) found\n")
        #expect(check.stderr == "arbor: \(db): tree \"index.Book.year\", page \(page): checksum mismatch\n", "\(check.stderr)")

        // info walks each tree for its statistics and checks every page: the same problem, once.
        let info = try runArbor(["info", db])
        #expect(info.status == 1)
        #expect(info.stderr == "arbor: \(db): tree \"index.Book.year\", page \(page): checksum mismatch\n", "\(info.stderr)")
    }
}
