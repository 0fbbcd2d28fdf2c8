// An issue tracker — projects, users, issues, comments — on Arbor's object graph against SQLite
// (through GRDB, with SQL written for SQLite's planner: IN over grouped subqueries, the form it
// answers fastest), for the shapes that
// used to leave Arbor's store for objects: a to-one hop then a to-many count, a SUBQUERY whose
// body follows a to-one key path, a SUBQUERY with a compound body, a grouping of the largest
// entity by a to-one key path with a HAVING predicate, and CONTAINS[c] over text that is not
// ASCII. A model other than RelationalReport's, tuned on by nothing.
//
//   swift run -c release TrackerReport            (make bench-tracker)
//
// Environment: TRACKER_ISSUES=2500,20000 (the sizes, one table each), TRACKER_ROUNDS=5 (rounds;
// the engines alternate which goes first), TRACKER_REPEATS=3 (queries per timing; the fastest
// is kept). Each query's answer must be the same on both sides, or the report stops.
import Arbor
import ArborStore
import CommitWorkloads
import Foundation
import GRDB

let environment = ProcessInfo.processInfo.environment
let sizes = (environment["TRACKER_ISSUES"] ?? "2500,20000").split(separator: ",").compactMap { Int($0) }
let rounds = max(1, Int(environment["TRACKER_ROUNDS"] ?? "") ?? 5)
let repeats = max(1, Int(environment["TRACKER_REPEATS"] ?? "") ?? 3)

/// The data, the same for both engines: a function of the issue count.
struct Tracker {
    let issues: Int
    var projects: Int { max(8, issues / 250) }
    var users: Int { max(20, issues / 20) }
    var comments: Int { issues * 3 }
    /// Names with letters that are not ASCII, in upper and lower case.
    static let names = ["Ærøskøbing", "Ölçü", "Straße", "ŽOFIA", "Zoë", "Ángel", "Łukasz", "ÇAĞLA", "Niño", "Ísak", "Σοφία", "Ёлка", "Björk", "Dvořák"]
    func projectName(_ p: Int) -> String { "Project \(p)" }
    func userName(_ u: Int) -> String { "\(Self.names[u % Self.names.count]) \(u)" }
    /// Issues go to projects unevenly (the first ones large), a few to none.
    func project(ofIssue i: Int) -> Int? {
        if i % 97 == 0 { return nil }
        let r = (i &* 2_654_435_761) % 1000
        return r < 400 ? i % 2 : r < 700 ? 2 + i % 3 : i % projects
    }
    func title(ofIssue i: Int) -> String { "\(Self.names[(i * 5) % Self.names.count]) issue \(i) " + String(repeating: "détail ", count: i % 5) }
    func priority(ofIssue i: Int) -> Int64 { Int64(i % 5) }
    func issue(ofComment c: Int) -> Int { (c &* 40_503) % issues }
    func author(ofComment c: Int) -> Int { (c &* 7_919) % users }
    func length(ofComment c: Int) -> Int64 { Int64((c &* 31) % 500) }
    func votes(ofComment c: Int) -> Int64 { Int64((c &* 13) % 7) }
}

/// One engine on one tracker.
protocol Engine {
    var name: String { get }
    /// Issue IDs (as integers) of issues whose project has more than `count` issues.
    func busyProjects(_ count: Int) throws -> Set<Int64>
    /// Issues with a comment by the user named `name`.
    func commentedBy(_ name: String) throws -> Set<Int64>
    /// Issues with at least two comments longer than 200 characters with at least 3 votes.
    func discussed() throws -> Set<Int64>
    /// Authors' names with their comment counts, for authors with more than `count` comments.
    func prolific(_ count: Int) throws -> [String: Int64]
    /// Issues whose title contains `text`, case-insensitively.
    func titled(_ text: String) throws -> Set<Int64>
}

// MARK: Arbor

final class ArborEngine: Engine {
    let name = "Arbor"
    let stack: (coordinator: PersistentStoreCoordinator, path: String)
    let directory: String

    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Project") {
                Attribute("serial", .integer64)
                Attribute("name", .string)
                Relationship("issues", to: "Issue", inverse: "project").toMany()
            }
            Entity("User") {
                Attribute("name", .string)
                Relationship("comments", to: "Comment", inverse: "author").toMany()
            }
            Entity("Issue") {
                Attribute("serial", .integer64)
                Attribute("title", .string)
                Attribute("priority", .integer64)
                Relationship("project", to: "Project", inverse: "issues")
                Relationship("comments", to: "Comment", inverse: "issue").toMany()
            }
            Entity("Comment") {
                Attribute("length", .integer64)
                Attribute("votes", .integer64)
                Relationship("issue", to: "Issue", inverse: "comments")
                Relationship("author", to: "User", inverse: "comments")
            }
        }
    }

    init(_ tracker: Tracker) throws {
        directory = NSTemporaryDirectory() + "tracker-arbor-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let model = try Self.model()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let path = directory + "/tracker.arbor"
        try coordinator.addNativeStore(at: path)
        stack = (coordinator, path)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let entity = { (name: String) in model.entity(named: name)! }
        let projects = try (0..<tracker.projects).map { p in
            let project = ManagedObject(entity: entity("Project"), insertInto: context)
            try project.setValue(Int64(p), forKey: "serial")
            try project.setValue(tracker.projectName(p), forKey: "name")
            return project
        }
        let users = try (0..<tracker.users).map { u in
            let user = ManagedObject(entity: entity("User"), insertInto: context)
            try user.setValue(tracker.userName(u), forKey: "name")
            return user
        }
        let issues = try (0..<tracker.issues).map { i in
            let issue = ManagedObject(entity: entity("Issue"), insertInto: context)
            try issue.setValue(Int64(i), forKey: "serial")
            try issue.setValue(tracker.title(ofIssue: i), forKey: "title")
            try issue.setValue(tracker.priority(ofIssue: i), forKey: "priority")
            if let p = tracker.project(ofIssue: i) { try issue.setValue(projects[p], forKey: "project") }
            return issue
        }
        try context.save()
        for c in 0..<tracker.comments {
            let comment = ManagedObject(entity: entity("Comment"), insertInto: context)
            try comment.setValue(tracker.length(ofComment: c), forKey: "length")
            try comment.setValue(tracker.votes(ofComment: c), forKey: "votes")
            try comment.setValue(issues[tracker.issue(ofComment: c)], forKey: "issue")
            try comment.setValue(users[tracker.author(ofComment: c)], forKey: "author")
            if c % 5_000 == 4_999 { try context.save() }
        }
        try context.save()
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// The serials of the issues a predicate selects, fetched in the store (a fresh context): their
    /// IDs, whose primary keys follow the serials (issue i was the (i + 1)th saved), as SQLite's
    /// rowids are its serials.
    func serials(_ format: String, _ arguments: any Sendable...) throws -> Set<Int64> {
        let context = ManagedObjectContext(persistentStoreCoordinator: stack.coordinator)
        var request = FetchRequest<ManagedObjectID>(entityName: "Issue")
        request.predicate = try ObjectPredicate(format: format, argumentArray: arguments)
        request.requiresStoreEvaluation = true
        return Set(try context.fetch(request).map { ($0.primaryKey ?? 0) - 1 })
    }

    func busyProjects(_ count: Int) throws -> Set<Int64> { try serials("project.issues.@count > %@", count) }
    func commentedBy(_ name: String) throws -> Set<Int64> { try serials("SUBQUERY(comments, $c, $c.author.name == %@).@count > 0", name) }
    func discussed() throws -> Set<Int64> { try serials("SUBQUERY(comments, $c, $c.length > 200 AND $c.votes >= 3).@count >= 2") }
    func titled(_ text: String) throws -> Set<Int64> { try serials("title CONTAINS[c] %@", text) }

    func prolific(_ count: Int) throws -> [String: Int64] {
        let context = ManagedObjectContext(persistentStoreCoordinator: stack.coordinator)
        var request = FetchRequest<[String: any Sendable]>(entityName: "Comment")
        request.resultType = .dictionary
        request.propertiesToGroupBy = ["author.name"]
        request.propertiesToFetch = [.key("author.name"), .aggregate(.count, of: "votes", as: "n")]
        request.havingPredicate = try ObjectPredicate(format: "n > %@", count)
        request.requiresStoreEvaluation = true
        var result: [String: Int64] = [:]
        for row in try context.fetch(request) {
            guard let name = row["author.name"] as? String else { continue }
            result[name] = (row["n"] as? Int64) ?? Int64(row["n"] as? Int ?? -1)
        }
        return result
    }
}

// MARK: SQLite through GRDB

final class SQLiteEngine: Engine {
    let name = "SQLite"
    let queue: DatabaseQueue
    let directory: String

    init(_ tracker: Tracker) throws {
        directory = NSTemporaryDirectory() + "tracker-sqlite-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        queue = try DatabaseQueue(path: directory + "/tracker.sqlite")
        try queue.write { db in
            try db.execute(sql: """
                CREATE TABLE project (id INTEGER PRIMARY KEY, name TEXT);
                CREATE TABLE user (id INTEGER PRIMARY KEY, name TEXT);
                CREATE TABLE issue (id INTEGER PRIMARY KEY, title TEXT, priority INTEGER, projectId INTEGER REFERENCES project(id));
                CREATE INDEX issue_project ON issue(projectId);
                CREATE TABLE comment (id INTEGER PRIMARY KEY, length INTEGER, votes INTEGER,
                                      issueId INTEGER REFERENCES issue(id), authorId INTEGER REFERENCES user(id));
                CREATE INDEX comment_issue ON comment(issueId);
                CREATE INDEX comment_author ON comment(authorId);
                """)
            for p in 0..<tracker.projects { try db.execute(sql: "INSERT INTO project VALUES (?, ?)", arguments: [p, tracker.projectName(p)]) }
            for u in 0..<tracker.users { try db.execute(sql: "INSERT INTO user VALUES (?, ?)", arguments: [u, tracker.userName(u)]) }
            for i in 0..<tracker.issues {
                try db.execute(sql: "INSERT INTO issue VALUES (?, ?, ?, ?)",
                               arguments: [i, tracker.title(ofIssue: i), tracker.priority(ofIssue: i), tracker.project(ofIssue: i)])
            }
            for c in 0..<tracker.comments {
                try db.execute(sql: "INSERT INTO comment VALUES (?, ?, ?, ?, ?)",
                               arguments: [c, tracker.length(ofComment: c), tracker.votes(ofComment: c), tracker.issue(ofComment: c), tracker.author(ofComment: c)])
            }
            try db.execute(sql: "ANALYZE")
        }
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    func ids(_ sql: String, _ arguments: StatementArguments = []) throws -> Set<Int64> {
        try queue.read { db in Set(try Int64.fetchAll(db, sql: sql, arguments: arguments)) }
    }

    func busyProjects(_ count: Int) throws -> Set<Int64> {
        try ids("SELECT id FROM issue WHERE projectId IN (SELECT projectId FROM issue GROUP BY projectId HAVING COUNT(*) > ?)", [count])
    }
    func commentedBy(_ name: String) throws -> Set<Int64> {
        try ids("SELECT id FROM issue WHERE id IN (SELECT c.issueId FROM comment c JOIN user u ON u.id = c.authorId WHERE u.name = ?)", [name])
    }
    func discussed() throws -> Set<Int64> {
        try ids("SELECT id FROM issue WHERE id IN (SELECT issueId FROM comment WHERE length > 200 AND votes >= 3 GROUP BY issueId HAVING COUNT(*) >= 2)")
    }
    func titled(_ text: String) throws -> Set<Int64> {
        // SQLite's own LIKE and lower() fold ASCII only: Swift's lowercased(), as GRDB registers it.
        try ids("SELECT id FROM issue WHERE instr(swiftLowercaseString(title), ?) > 0", [text.lowercased()])
    }
    func prolific(_ count: Int) throws -> [String: Int64] {
        try queue.read { db in
            var result: [String: Int64] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT u.name, COUNT(c.votes) FROM comment c JOIN user u ON u.id = c.authorId GROUP BY u.name HAVING COUNT(c.votes) > ?",
                                        arguments: [count]) {
                result[row[0]] = row[1]
            }
            return result
        }
    }
}

// MARK: The report

struct Query {
    let label: String
    let run: (any Engine) throws -> String
}

func fingerprint(_ set: Set<Int64>) -> String { "\(set.count) issues, sum \(set.reduce(0, &+))" }

func report(_ tracker: Tracker) throws {
    FileHandle.standardError.write(Data("TrackerReport: \(tracker.issues) issues, importing…\n".utf8))
    let engines: [any Engine] = [try ArborEngine(tracker), try SQLiteEngine(tracker)]
    let busy = tracker.issues / 8
    let queries = [
        Query(label: "`project.issues.@count > \(busy)`") { fingerprint(try $0.busyProjects(busy)) },
        Query(label: "`SUBQUERY(comments, $c, $c.author.name == %@).@count > 0`") { fingerprint(try $0.commentedBy(tracker.userName(3))) },
        Query(label: "`SUBQUERY(comments, $c, $c.length > 200 AND $c.votes >= 3).@count >= 2`") { fingerprint(try $0.discussed()) },
        Query(label: "comments grouped by `author.name`, `HAVING n > 2`") { engine in
            let groups = try engine.prolific(2)
            return "\(groups.count) groups, \(groups.values.reduce(0, +)) comments"
        },
        Query(label: "`title CONTAINS[c] 'straße'` (not ASCII)") { fingerprint(try $0.titled("straße")) },
        Query(label: "`title CONTAINS[c] 'ölçü'` (not ASCII)") { fingerprint(try $0.titled("ölçü")) },
    ]
    var times: [[String: [Double]]] = Array(repeating: [:], count: queries.count)
    for round in 0..<rounds {
        let order = round % 2 == 0 ? engines : engines.reversed()
        for (index, query) in queries.enumerated() {
            var answers: [String: String] = [:]
            for engine in order {
                var best = Double.infinity
                for _ in 0..<repeats {
                    let start = ContinuousClock.now
                    answers[engine.name] = try query.run(engine)
                    let elapsed = ContinuousClock.now - start
                    best = min(best, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
                }
                times[index][engine.name, default: []].append(best)
            }
            guard Set(answers.values).count == 1 else {
                FileHandle.standardError.write(Data("TrackerReport: the engines differ on \(query.label): \(answers)\n".utf8))
                exit(1)
            }
            if round == 0 { FileHandle.standardError.write(Data("  \(query.label): \(answers["Arbor"] ?? "")\n".utf8)) }
        }
    }
    print("\n\(tracker.issues) issues (\(tracker.projects) projects, \(tracker.users) users, \(tracker.comments) comments), \(rounds) rounds, the fastest of \(repeats) per round:\n")
    print("| query | Arbor | SQLite | SQLite ÷ Arbor (range) |")
    print("|---|---:|---:|---:|")
    for (index, query) in queries.enumerated() {
        let arbor = times[index]["Arbor"] ?? [], sqlite = times[index]["SQLite"] ?? []
        let ratios = zip(sqlite, arbor).map { $0 / $1 }
        func ms(_ values: [Double]) -> String { fixed(median(values) * 1000, 2) + " ms" }
        print("| \(query.label) | \(ms(arbor)) | \(ms(sqlite)) | \(medianAndRange(ratios)) |")
    }
}

for size in sizes { try report(Tracker(issues: size)) }
