// Imports issues across projects and people into a new store file, in batches of one save each,
// as an application's first import would, and times it (docs/debug-builds.md).
//
//   DependentImport [issues] [rounds]      (defaults: 20,000 issues, 3 rounds)
//
// Each round makes a new file; the figures are the wall-clock time from opening the store to
// the last save (with the processor time beside it), and the median of the rounds.
import Arbor
import Foundation

final class Project: ManagedObject {
    @Managed("name") var name: String
    @ManagedSet("issues") var issues: Set<Issue>
}

final class Person: ManagedObject {
    @Managed("name") var name: String
    @Managed("email") var email: String
}

final class Issue: ManagedObject {
    @Managed("number") var number: Int64
    @Managed("title") var title: String
    @Managed("body") var body: String?
    @Managed("priority") var priority: Int16
    @Managed("createdAt") var createdAt: Date
    @Managed("project") var project: Project?
    @Managed("assignee") var assignee: Person?
}

func makeModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Project", class: Project.self) {
            Attribute("name", .string).required()
            Relationship("issues", to: "Issue", inverse: "project").toMany().deleteRule(.cascade)
            Unique("name")
        }
        Entity("Person", class: Person.self) {
            Attribute("name", .string).required()
            Attribute("email", .string).required()
            Relationship("assigned", to: "Issue", inverse: "assignee").toMany()
        }
        Entity("Issue", class: Issue.self) {
            Attribute("number", .integer64).required().indexed()
            Attribute("title", .string).required()
            Attribute("body", .string)
            Attribute("priority", .integer16).required()
            Attribute("createdAt", .date).required().defaultValue(Date(timeIntervalSince1970: 0))
            Relationship("project", to: "Project", inverse: "issues")
            Relationship("assignee", to: "Person", inverse: "assigned")
        }
    }
}

/// The sizes of one import.
struct Workload {
    var issues = 20_000
    var projects = 50
    var people = 200
    var batch = 1_000
}

/// The processor time the process has used so far (user and system), in seconds.
func processorTime() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// Imports `workload` into a new store at `path`; returns the seconds it took, wall-clock and
/// of processor time.
func runImport(_ workload: Workload, model: ManagedObjectModel, path: String) throws -> (wall: Double, processor: Double) {
    let start = ContinuousClock.now
    let startProcessor = processorTime()
    let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
    try coordinator.addNativeStore(at: path)
    let context = ManagedObjectContext(concurrencyType: .privateQueue)
    context.persistentStoreCoordinator = coordinator
    try context.performAndWait {
        let projects = (0..<workload.projects).map { index in
            let project = Project(context: context)
            project.name = "Project \(index)"
            return project
        }
        let people = (0..<workload.people).map { index in
            let person = Person(context: context)
            person.name = "Person \(index)"
            person.email = "person\(index)@example.com"
            return person
        }
        try context.save()
        let epoch = Date(timeIntervalSince1970: 1_700_000_000)
        for number in 0..<workload.issues {
            let issue = Issue(context: context)
            issue.number = Int64(number)
            issue.title = "Issue \(number): something does not work as it should"
            issue.body = number % 3 == 0 ? nil : String(repeating: "Steps to reproduce, expected and actual behaviour. ", count: 1 + number % 4)
            issue.priority = Int16(number % 5)
            issue.createdAt = epoch.addingTimeInterval(Double(number) * 60)
            issue.project = projects[number % projects.count]
            issue.assignee = number % 4 == 0 ? nil : people[(number * 7) % people.count]
            if (number + 1) % workload.batch == 0 { try context.save() }
        }
        try context.save()
    }
    return ((ContinuousClock.now - start).seconds, processorTime() - startProcessor)
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
var workload = Workload()
if let issues = arguments.first { workload.issues = issues }
let rounds = max(1, arguments.dropFirst().first ?? 3)

#if DEBUG
let configuration = "debug"
#else
let configuration = "release"
#endif
#if ArborChecks
let checks = "with Arbor's checks"
#else
let checks = "without Arbor's checks"
#endif

let model = try makeModel()
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dependent-import-\(UUID().uuidString)").path
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }

print("import of \(workload.issues) issues (\(workload.projects) projects, \(workload.people) people, saves of \(workload.batch)); \(configuration) build, \(checks)")
var times: [Double] = []
for round in 1...rounds {
    let time = try runImport(workload, model: model, path: "\(directory)/round\(round).arbor")
    times.append(time.wall)
    print(String(format: "round %d: %.3f s (processor %.3f s)", round, time.wall, time.processor))
}
let sorted = times.sorted()
print(String(format: "median %.3f s (min %.3f, max %.3f) over %d rounds", sorted[sorted.count / 2], sorted.first!, sorted.last!, rounds))
