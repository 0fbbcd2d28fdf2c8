import ArborStore
import Foundation
import Testing

/// `arbor query` end to end, on the store `arbor demo` leaves (its model is read from the file).
@Suite("arbor query")
struct QueryCommandTests {
    /// A directory holding the demonstration's store.
    func demoStore() throws -> (TemporaryDirectory, String) {
        let dir = try TemporaryDirectory()
        let path = dir.file("employees.arbor")
        let demo = try runArbor(["demo", path])
        #expect(demo.status == 0, "\(demo.stderr)")
        return (dir, path)
    }

    @Test("prints matching objects as a table, sorted, limited, with the model stored in the file")
    func table() throws {
        let (dir, path) = try demoStore()
        defer { dir.cleanup() }
        let result = try runArbor(["query", path, "Employee", "--where", "salary >= 100000", "--sort", "lastName:desc"])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("id  firstName  lastName") == true, "\(result.stdout)")
        #expect(lines.dropFirst(2).map { $0.split(separator: " ", omittingEmptySubsequences: true)[2] } == ["Turing", "Lovelace", "Hopper"])
        #expect(result.stderr == "3 objects\n")
        let limited = try runArbor(["query", path, "Employee", "--sort", "firstName", "--limit", "1", "--offset", "1"])
        #expect(limited.status == 0 && limited.stdout.contains("Alan") && !limited.stdout.contains("Ada"), "\(limited.stdout)")
    }

    @Test("--format json, --count and --explain")
    func formats() throws {
        let (dir, path) = try demoStore()
        defer { dir.cleanup() }
        let json = try runArbor(["query", path, "Employee", "--where", "firstName == 'Ada'", "--format", "json"])
        #expect(json.status == 0, "\(json.stderr)")
        let array = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(array.count == 1 && array[0]["lastName"] as? String == "Lovelace" && array[0]["entity"] as? String == "Employee")
        #expect(array[0]["manager"] as? String == "Employee/2")

        let count = try runArbor(["query", path, "Employee", "--where", "department.name == 'Engineering'", "--count"])
        #expect(count.status == 0 && count.stdout == "3\n", "\(count.stdout)\(count.stderr)")

        let explain = try runArbor(["query", path, "Employee", "--where", "lastName BEGINSWITH[cd] 'h'", "--explain"])
        #expect(explain.status == 0)
        #expect(explain.stdout.contains("index index.Employee.lastName.cd on lastName, range begins with \"h\""), "\(explain.stdout)")
        // A count through a to-many relationship runs in the store (issue 26); a key path compared
        // with another key path is still checked on objects.
        let counted = try runArbor(["query", path, "Department", "--where", "employees.@count > 1", "--explain"])
        #expect(counted.stdout.contains("join employees.@count > 1: Employee by a scan of rows.Employee, counted per Department by their department"), "\(counted.stdout)")
        let scan = try runArbor(["query", path, "Employee", "--where", "department.name == lastName", "--explain"])
        #expect(scan.stdout.contains("scan rows.Employee") && scan.stdout.contains("then in memory"), "\(scan.stdout)")
    }

    @Test("--help says what the columns hold: a to-one relationship is the destination's ENTITY/KEY, as printed")
    func help() throws {
        let (dir, path) = try demoStore()
        defer { dir.cleanup() }
        let help = try runArbor(["query", "--help"])
        #expect(help.status == 0)
        let text = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(text.contains("each to-one relationship as the destination's ENTITY/KEY (Employee/2), or NULL when it is empty"), "\(text)")
        #expect(!text.contains("show the destination's primary key"))
        #expect(text.contains("--format <format>") && text.contains("--arg <value>"))
        // What the help says is what a query prints.
        let table = try runArbor(["query", path, "Employee", "--where", "firstName == 'Ada'"])
        #expect(table.stdout.contains("Department/1  Employee/2"), "\(table.stdout)")
    }

    @Test("bad predicates, keys, entities and files: a message, exit status 1, never a crash")
    func errors() throws {
        let (dir, path) = try demoStore()
        defer { dir.cleanup() }
        let syntax = try runArbor(["query", path, "Employee", "--where", "salary >> 3"])
        #expect(syntax.status == 1 && syntax.stdout.isEmpty)
        #expect(syntax.stderr.contains("at offset 8") && syntax.stderr.contains("salary >> 3\n          ^"), "\(syntax.stderr)")
        let key = try runArbor(["query", path, "Employee", "--where", "height > 3"])
        #expect(key.status == 1 && key.stderr.contains("Employee has no property \"height\""), "\(key.stderr)")
        let type = try runArbor(["query", path, "Employee", "--where", "firstName > 3"])
        #expect(type.status == 1 && type.stderr.contains("firstName is string"), "\(type.stderr)")
        let entity = try runArbor(["query", path, "Nobody"])
        #expect(entity.status == 1 && entity.stderr.contains("no entity Nobody"), "\(entity.stderr)")
        let missing = try runArbor(["query", dir.file("missing.arbor"), "Employee"])
        #expect(missing.status == 1 && missing.stderr.contains("could not be opened"), "\(missing.stderr)")
        // A database that is not an Arbor store.
        let plain = dir.file("plain.arbor")
        let database = try Database(path: plain)
        try database.write { _ = try $0.createTree(named: "things") }
        database.close()
        let foreign = try runArbor(["query", plain, "Employee"])
        #expect(foreign.status == 1 && foreign.stderr.contains("not an Arbor store"), "\(foreign.stderr)")
        #expect(try runArbor(["query", path, "Employee", "--limit", "-1"]).status != 0)
    }
}
