// Issue 28, item 5: what reading a query generation costs. A context pinned to a generation
// reads the rows as they are and rolls back, from persistent history, the objects changed since
// (docs/history.md, "Query generations"): its reads should cost what the same reads cost
// unpinned, plus a part growing with the changes since the generation, not with the store.
// Prints a markdown table (docs/performance.md, "Query generations").
//
//   swift run -c release QueryGenerationReport [items] [rounds]
//
// `items` (default 100,000) `Item`s (a name, an indexed integer64 `value`, a department of 100)
// in an in-memory store that records history. A generation is taken, then another context
// changes the value (and every tenth the department) of 0, 100, 1,000 and 10,000 items since,
// saving every 500. At each point, taking turns `rounds` times (default 3; medians), a new
// context — pinned with the generation's token, or not pinned — runs: a count of
// `value < 1000` (the index), the items of one department through a key path
// (`department.name == 'D7'`), and 1,000 faults fired by ID.
import Arbor
import Foundation

let arguments = CommandLine.arguments
let itemCount = arguments.count > 1 ? max(1_000, Int(arguments[1]) ?? 100_000) : 100_000
let rounds = arguments.count > 2 ? max(1, Int(arguments[2]) ?? 3) : 3

let model = try ManagedObjectModel {
    Entity("Department") {
        Attribute("name", .string).indexed()
        Relationship("items", to: "Item", inverse: "department").toMany()
    }
    Entity("Item") {
        Attribute("name", .string)
        Attribute("value", .integer64).indexed()
        Relationship("department", to: "Department", inverse: "items")
    }
}
var observability = ObjectGraphObservability()
observability.slowFetchThreshold = nil
let coordinator = PersistentStoreCoordinator(managedObjectModel: model, observability: observability)
try coordinator.addInMemoryStore(history: .on)
var itemIDs: [ManagedObjectID] = []
var departmentIDs: [ManagedObjectID] = []
do {
    let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    let departments = (0..<100).map { index -> ManagedObject in
        let department = ManagedObject(entity: model.entity(named: "Department")!, insertInto: context)
        try! department.setValue("D\(index)", forKey: "name")
        return department
    }
    var items: [ManagedObject] = []
    for index in 0..<itemCount {
        let item = ManagedObject(entity: model.entity(named: "Item")!, insertInto: context)
        try item.setValue("item \(index)", forKey: "name")
        try item.setValue(Int64(index), forKey: "value")
        try item.setValue(departments[index % 100], forKey: "department")
        items.append(item)
    }
    try context.save()
    itemIDs = items.map(\.objectID)
    departmentIDs = departments.map(\.objectID)
}
let pin = ManagedObjectContext(persistentStoreCoordinator: coordinator)
try pin.setQueryGenerationFrom(.current)
let token = pin.queryGenerationToken!
let clock = ContinuousClock()
var generator = SystemRandomNumberGenerator()
let probes = (0..<1_000).map { _ in itemIDs.randomElement(using: &generator)! }

func median(_ values: [Duration]) -> Duration { values.sorted()[values.count / 2] }
func format(_ duration: Duration) -> String {
    let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    return seconds >= 0.001 ? String(format: "%.2f ms", seconds * 1e3) : String(format: "%.1f µs", seconds * 1e6)
}

/// The three reads, each by a new context (pinned or not): their times.
func reads(pinned: Bool) throws -> [Duration] {
    func context() throws -> ManagedObjectContext {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        if pinned { try context.setQueryGenerationFrom(token) }
        return context
    }
    var times: [Duration] = []
    let counting = try context()
    let cheap = try FetchRequest<ManagedObject>(entityName: "Item", format: "value < 1000")
    var counted = 0
    times.append(try clock.measure { counted = try counting.count(for: cheap) })
    let joining = try context()
    let joined = try FetchRequest<ManagedObject>(entityName: "Item", format: "department.name == 'D7'")
    var found = 0
    times.append(try clock.measure { found = try joining.fetch(joined).count })
    let faulting = try context()
    times.append(try clock.measure {
        for id in probes { _ = try faulting.existingObject(with: id).value(forKey: "value") }
    })
    precondition(!pinned || (counted == min(1000, itemCount) && found == itemCount / 100), "a pinned read did not see the generation")
    return times
}

var changed = 0
let writer = ManagedObjectContext(persistentStoreCoordinator: coordinator)
print("Query generations: \(itemCount) items; a new context per read, pinned to the generation or not; \(rounds) rounds taking turns, medians.\n")
print("| changed since the generation | count `value < 1000` pinned / not | `department.name == 'D7'` pinned / not | 1,000 faults pinned / not |")
print("|---:|---:|---:|---:|")
for target in [0, 100, 1_000, 10_000] where target <= itemCount {
    while changed < target {
        let item = try writer.existingObject(with: itemIDs[Int.random(in: 0..<itemCount, using: &generator)])
        try item.setValue(Int64.random(in: 0..<Int64(itemCount), using: &generator), forKey: "value")
        if changed % 10 == 0 { try item.setValue(try writer.existingObject(with: departmentIDs.randomElement(using: &generator)!), forKey: "department") }
        changed += 1
        if changed % 500 == 0 || changed == target { try writer.save() }
    }
    var pinnedTimes: [[Duration]] = [[], [], []]
    var plainTimes: [[Duration]] = [[], [], []]
    for round in 0..<rounds {
        for pinned in round % 2 == 0 ? [true, false] : [false, true] {
            let times = try reads(pinned: pinned)
            for index in 0..<3 {
                if pinned { pinnedTimes[index].append(times[index]) } else { plainTimes[index].append(times[index]) }
            }
        }
    }
    let cells = (0..<3).map { "\(format(median(pinnedTimes[$0]))) / \(format(median(plainTimes[$0])))" }
    print("| \(target) | " + cells.joined(separator: " | ") + " |")
}
