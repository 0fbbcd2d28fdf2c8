// Issue 28, item 6: the cost of one change in a fetched-results controller of 100,000 objects
// against fetching the results again. Prints a markdown table (docs/performance.md,
// "Fetched-results controller").
//
//   swift run -c release ResultsControllerReport [objects] [changes] [rounds]
//
// `objects` (default 100,000) saved `Item`s (a name, a group of 100, an integer64 `value`) in
// an in-memory store; a controller of every item with `value >= 0`, sorted by group then name,
// in sections by group. Each change renames one item (so that it moves within its section) and
// processes the context's changes: the controller applies it. Against it: the same change, then
// the request fetched again and its sections built (what a controller without incremental
// changes does). `changes` (default 200) each way, `rounds` (default 3) taking turns; medians.
import Arbor
import Foundation

let arguments = CommandLine.arguments
let objectCount = arguments.count > 1 ? max(1, Int(arguments[1]) ?? 100_000) : 100_000
let changes = arguments.count > 2 ? max(1, Int(arguments[2]) ?? 200) : 200
let rounds = arguments.count > 3 ? max(1, Int(arguments[3]) ?? 3) : 3

let model = try ManagedObjectModel {
    Entity("Item") {
        Attribute("name", .string)
        Attribute("group", .integer64)
        Attribute("value", .integer64)
    }
}
var observability = ObjectGraphObservability()
observability.slowFetchThreshold = nil   // the refetches are slow on purpose
let coordinator = PersistentStoreCoordinator(managedObjectModel: model, observability: observability)
try coordinator.addInMemoryStore()
do {
    let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    for index in 0..<objectCount {
        let item = ManagedObject(entity: model.entity(named: "Item")!, insertInto: context)
        try item.setValue(String(format: "item %07d", (index &* 7_919) % objectCount), forKey: "name")
        try item.setValue(Int64(index % 100), forKey: "group")
        try item.setValue(Int64(index), forKey: "value")
    }
    try context.save()
}

var request = try FetchRequest<ManagedObject>(entityName: "Item", format: "value >= 0")
request.sortDescriptors = [ObjectSortDescriptor(key: "group"), ObjectSortDescriptor(key: "name")]
let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "group")
let clock = ContinuousClock()
let setup = clock.measure { try! controller.performFetch() }
let items = controller.fetchedObjects
var generator = SystemRandomNumberGenerator()

func median(_ values: [Duration]) -> Duration { values.sorted()[values.count / 2] }

var incremental: [Duration] = []
var refetched: [Duration] = []
var serial = 0
@MainActor func rename() throws {
    serial += 1
    let item = items[Int.random(in: 0..<items.count, using: &generator)]
    try item.setValue(String(format: "renamed %07d", serial), forKey: "name")
}
for round in 0..<rounds {
    for first in [round % 2 == 0, round % 2 != 0] {
        if first {
            var times: [Duration] = []
            for _ in 0..<changes {
                try rename()
                times.append(clock.measure { context.processPendingChanges() })
            }
            incremental.append(median(times))
        } else {
            var times: [Duration] = []
            for _ in 0..<max(1, changes / 20) {
                try rename()
                times.append(try clock.measure {
                    context.processPendingChanges()
                    let fresh = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "group")
                    try fresh.performFetch()
                })
            }
            refetched.append(median(times))
        }
    }
}
let one = median(incremental), again = median(refetched)
func format(_ duration: Duration) -> String {
    let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    return seconds >= 0.001 ? String(format: "%.2f ms", seconds * 1e3) : String(format: "%.1f µs", seconds * 1e6)
}
print("Fetched-results controller of \(objectCount) objects in \(controller.sections.count) sections (first fetch \(format(setup))); \(changes) changes, \(rounds) rounds, medians.\n")
print("| one change (an item renamed, moving in its section) | time |")
print("|---|---:|")
print("| applied by the controller | \(format(one)) |")
print("| the results fetched again | \(format(again)) |")
print("| ratio | \(String(format: "%.0f", Double(again.components.attoseconds + again.components.seconds * 1_000_000_000_000_000_000) / Double(max(1, one.components.attoseconds + one.components.seconds * 1_000_000_000_000_000_000))))× |")
