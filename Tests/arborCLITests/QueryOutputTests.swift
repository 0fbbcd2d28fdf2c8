import Arbor
import Foundation
import Testing

/// `arbor query --format` and `--arg`, end to end, on a store of awkward values made here.
@Suite("arbor query: formats and arguments")
struct QueryOutputTests {
    /// A store of Items (every kind of value, strings with commas, quotes, line breaks, control
    /// characters and none at all) and one Tag.
    @discardableResult
    static func makeStore(_ path: String) throws -> UUID {
        let model = try ManagedObjectModel {
            Entity("Tag") {
                Attribute("name", .string)
                Relationship("items", to: "Item", inverse: "tag").toMany()
            }
            Entity("Item") {
                Attribute("name", .string)
                Attribute("count", .integer32)
                Attribute("price", .decimal)
                Attribute("ratio", .double)
                Attribute("active", .boolean)
                Attribute("due", .date)
                Attribute("code", .uuid)
                Attribute("blob", .binaryData)
                Relationship("tag", to: "Tag", inverse: "items")
            }
        }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addNativeStore(at: path)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let red = ManagedObject(entity: model.entity(named: "Tag")!, insertInto: context)
        try red.setValue("red", forKey: "name")
        let rows: [[String: Any?]] = [
            ["name": "plain", "count": 1, "price": Decimal(string: "9.5")!, "ratio": 0.25, "active": true,
             "due": Date(timeIntervalSince1970: 1_796_083_200), "code": UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!,
             "blob": Data([1, 2, 3]), "tag": red],
            ["name": "comma, \"quoted\"\nnew line", "count": 42, "price": Decimal(100), "ratio": -1.5, "active": false,
             "due": Date(timeIntervalSince1970: 1_796_117_400.25)],
            ["name": "tab\there ünï \u{1}", "count": -7],
            ["name": ""],
        ]
        for values in rows {
            let item = ManagedObject(entity: model.entity(named: "Item")!, insertInto: context)
            for (key, value) in values { try item.setValue(value, forKey: key) }
            try context.save()
        }
        return store.identifier
    }

    let dir: TemporaryDirectory
    let store: String
    let identifier: UUID

    init() throws {
        dir = try TemporaryDirectory()
        store = dir.file("items.arbor")
        identifier = try Self.makeStore(store)
    }

    func query(_ arguments: String...) throws -> RunResult {
        try runArbor(["query", store, "Item"] + arguments)
    }

    @Test("table: aligned columns, NULL, data as its size, control characters escaped; the count on standard error")
    func table() throws {
        defer { dir.cleanup() }
        let result = try query()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == """
            id  name                       count  price  ratio  active  due                      code                                  blob       tag
            --  -------------------------  -----  -----  -----  ------  -----------------------  ------------------------------------  ---------  -----
            1   plain                      1      9.5    0.25   true    2026-12-01T00:00:00Z     E621E1F8-C36C-495A-93FC-0C247A3E6E5F  <3 bytes>  Tag/1
            2   comma, "quoted"\\nnew line  42     100    -1.5   false   2026-12-01T09:30:00.25Z  NULL                                  NULL       NULL
            3   tab\\there ünï \\u0001       -7     NULL   NULL   NULL    NULL                     NULL                                  NULL       NULL
            4                              NULL   NULL   NULL   NULL    NULL                     NULL                                  NULL       NULL

            """, "\(result.stdout)")
        #expect(result.stderr == "4 objects\n")
    }

    @Test("table: widths come from the first 1,000 rows; a wider value later pushes its own line along, and nothing is cut")
    func tableWidths() throws {
        defer { dir.cleanup() }
        let path = dir.file("many.arbor")
        let model = try ManagedObjectModel { Entity("Row") { Attribute("name", .string); Attribute("n", .integer64) } }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        _ = try coordinator.addNativeStore(at: path)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for n in 1...1_003 {
            let row = ManagedObject(entity: model.entity(named: "Row")!, insertInto: context)
            try row.setValue(n == 1_002 ? "a much longer name" : "name", forKey: "name")
            try row.setValue(n, forKey: "n")
        }
        try context.save()
        let result = try runArbor(["query", path, "Row", "--sort", "n"])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == 2 + 1_003)
        #expect(lines[0] == "id    name  n" && lines[1] == "----  ----  ----")
        #expect(lines[2] == "1     name  1")
        #expect(lines[1_001] == "1000  name  1000")
        #expect(lines[1_003] == "1002  a much longer name  1002")
        #expect(lines[1_004] == "1003  name  1003")
        #expect(result.stderr == "1003 objects\n")
    }

    @Test("csv: RFC 4180, a header row, CRLF, quoted commas, quotes and line breaks; nil empty, an empty string \"\"")
    func csv() throws {
        defer { dir.cleanup() }
        let result = try query("--format", "csv")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "id,name,count,price,ratio,active,due,code,blob,tag\r\n"
            + "1,plain,1,9.5,0.25,true,2026-12-01T00:00:00Z,E621E1F8-C36C-495A-93FC-0C247A3E6E5F,AQID,Tag/1\r\n"
            + "2,\"comma, \"\"quoted\"\"\nnew line\",42,100,-1.5,false,2026-12-01T09:30:00.25Z,,,\r\n"
            + "3,tab\there ünï \u{1},-7,,,,,,,\r\n"
            + "4,\"\",,,,,,,,\r\n", "\(result.stdout)")
        #expect(result.stderr.isEmpty)
    }

    @Test("json: one array, an object per line, escapes, numbers, booleans and null; ndjson: the same objects, one per line")
    func json() throws {
        defer { dir.cleanup() }
        let objects = [
            #"{"id":1,"entity":"Item","name":"plain","count":1,"price":9.5,"ratio":0.25,"active":true,"due":"2026-12-01T00:00:00Z","code":"E621E1F8-C36C-495A-93FC-0C247A3E6E5F","blob":"AQID","tag":"Tag/1"}"#,
            #"{"id":2,"entity":"Item","name":"comma, \"quoted\"\nnew line","count":42,"price":100,"ratio":-1.5,"active":false,"due":"2026-12-01T09:30:00.25Z","code":null,"blob":null,"tag":null}"#,
            #"{"id":3,"entity":"Item","name":"tab\there ünï \u0001","count":-7,"price":null,"ratio":null,"active":null,"due":null,"code":null,"blob":null,"tag":null}"#,
            #"{"id":4,"entity":"Item","name":"","count":null,"price":null,"ratio":null,"active":null,"due":null,"code":null,"blob":null,"tag":null}"#,
        ]
        let json = try query("--format", "json")
        #expect(json.status == 0, "\(json.stderr)")
        #expect(json.stdout == "[\n" + objects.joined(separator: ",\n") + "\n]\n", "\(json.stdout)")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(parsed[1]["name"] as? String == "comma, \"quoted\"\nnew line" && parsed[2]["name"] as? String == "tab\there ünï \u{1}")
        let ndjson = try query("--format", "ndjson")
        #expect(ndjson.stdout == objects.joined(separator: "\n") + "\n", "\(ndjson.stdout)")
        #expect(try query("--format", "json", "--where", "count > 100").stdout == "[]\n")
        #expect(try query("--format", "ndjson", "--where", "count > 100").stdout == "")
        #expect(try query("--format", "csv", "--where", "count > 100").stdout == "id,name,count,price,ratio,active,due,code,blob,tag\r\n")
        #expect(try query("--format", "xml").status != 0)
    }

    /// The primary keys of the Items a query with `arguments` returns.
    func ids(_ arguments: String...) throws -> [Int] {
        let result = try runArbor(["query", store, "Item", "--format", "csv"] + arguments)
        #expect(result.status == 0, "\(arguments): \(result.stderr)")
        return result.stdout.split(separator: "\r\n").dropFirst().compactMap { Int($0.prefix { $0 != "," }) }
    }

    @Test("--arg values are typed by the attribute they are compared with; %K takes a key path")
    func arguments() throws {
        defer { dir.cleanup() }
        // 42 is an integer for count, and stays the string "42" for name.
        #expect(try ids("--where", "count == %@ OR name == %@", "--arg", "42", "--arg", "plain") == [1, 2])
        #expect(try ids("--where", "name == %@", "--arg", "42") == [])
        #expect(try ids("--where", "price > %@", "--arg", "9.5") == [2])
        #expect(try ids("--where", "ratio < %@", "--arg", "0") == [2])
        #expect(try ids("--where", "due >= %@", "--arg", "2026-12-01T10:00:00+01:00") == [2])
        #expect(try ids("--where", "due == %@", "--arg", "2026-12-01") == [1])
        #expect(try ids("--where", "%K == %@", "--arg", "active", "--arg", "yes") == [1])
        #expect(try ids("--where", "%K == %@", "--arg", "active", "--arg", "false") == [2])
        #expect(try ids("--where", "code == %@", "--arg", "e621e1f8-c36c-495a-93fc-0c247a3e6e5f") == [1])
        #expect(try ids("--where", "blob == %@", "--arg", "AQID") == [1])
        #expect(try ids("--where", "tag == %@", "--arg", "Tag/1") == [1])
        #expect(try ids("--where", "tag == %@", "--arg", "1") == [1])
        #expect(try ids("--where", "tag == %@", "--arg", "x-arbor://\(identifier.uuidString)/Tag/p1") == [1])
        #expect(try ids("--where", "%K.name == %@", "--arg", "tag", "--arg", "red") == [1])
        #expect(try ids("--where", "count IN {%@, %@}", "--arg", "1", "--arg", "-7") == [1, 3])
        #expect(try ids("--where", "count BETWEEN {%@, %@}", "--arg", "0", "--arg", "50") == [1, 2])
        #expect(try ids("--where", "count > %@ * 2", "--arg", "3") == [2])
        #expect(try ids("--where", "name BEGINSWITH %@", "--arg", "comma, \"") == [2])
        #expect(try ids("--where", "due < CAST('2026-12-01T09:30:00.5Z', 'NSDate') AND due > %@", "--arg", "2026-11-30T23:59:59Z") == [1, 2])
        // The items of a tag, from the tag's side: SUBQUERY variables are typed too.
        let tags = try runArbor(["query", store, "Tag", "--format", "csv", "--where", "SUBQUERY(items, $i, $i.count == %@).@count == %@",
                                 "--arg", "1", "--arg", "1"])
        #expect(tags.stdout == "id,name\r\n1,red\r\n", "\(tags.stdout)\(tags.stderr)")
    }

    @Test("a --arg that cannot be what it is compared with, or too many or too few: a one-line message, exit status 1",
          arguments: [
              (["count > %@", "abc"], "--arg 1 \"abc\" is not an integer -2147483648...2147483647, as Item.count (integer32) needs"),
              (["count > %@", "3000000000"], "--arg 1 \"3000000000\" is not an integer"),
              (["price > %@", "9,5"], "--arg 1 \"9,5\" is not a decimal number, as Item.price (decimal) needs"),
              (["due > %@", "2026-13-01"], "--arg 1 \"2026-13-01\" is not an ISO-8601 date (2026-12-01, 2026-12-01T09:30:00Z, 2026-12-01T09:30:00.25+01:00), as Item.due (date) needs: month 13 is not 1…12"),
              (["active == %@", "maybe"], "--arg 1 \"maybe\" is not a boolean"),
              (["code == %@", "xyz"], "--arg 1 \"xyz\" is not a UUID"),
              (["tag == %@", "Item/1"], "--arg 1 \"Item/1\" is not an object, as tag needs (Tag/KEY, KEY, or an x-arbor: URI): Item is not Tag"),
              (["count > %@ AND name == %@", "1"], "the format uses more arguments than the 1 given"),
              (["due > CAST(%@, 'NSDate')", "2026-12-01"], "--arg 1 \"2026-12-01\" cannot be used there: only %@ and %K take --arg values, and not inside CAST"),
              (["count > %d", "3"], "--arg 1 \"3\" cannot be used there"),
              (["count > %@", "1", "2"], "2 arguments given, but the format uses 1"),
              (["%K > 1", "height"], "Item has no property \"height\""),
          ])
    func badArguments(_ case: ([String], String)) throws {
        defer { dir.cleanup() }
        let (values, expected) = `case`
        let result = try runArbor(["query", store, "Item", "--where", values[0]] + values.dropFirst().flatMap { ["--arg", $0] })
        #expect(result.status == 1)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.hasPrefix("arbor: ") && result.stderr.contains(expected), "\(result.stderr)")
        #expect(!result.stderr.contains("\u{1}"), "a placeholder leaked: \(result.stderr)")
    }

    @Test("--arg without --where is refused")
    func argWithoutWhere() throws {
        defer { dir.cleanup() }
        let result = try query("--arg", "1")
        #expect(result.status != 0 && result.stderr.contains("there is no --where"), "\(result.stderr)")
    }
}
