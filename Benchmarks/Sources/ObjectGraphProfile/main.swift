// The object graph's workloads, Arbor alone, for profilers and quick measurements:
//   swift run -c release ObjectGraphProfile [objects] [insert|fetch|keyed|faults]
import Arbor
import ArborStore
import ArborTestSupport
import CommitWorkloads
import Foundation

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 100_000 : 100_000
// A second argument runs one workload alone, repeated, for a profiler: insert, fetch, keyed or faults.
let mode = CommandLine.arguments.count > 2 ? CommandLine.arguments[2] : ""
let model = try ManagedObjectModel {
    Entity("Employee") {
        Attribute("name", .string).required()
        Attribute("salary", .integer64)
        Attribute("startDate", .date)
    }
}
let directory = try ScratchDirectory(prefix: "arbor-graph")
defer { directory.remove() }
let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
// CACHE_MIB=N gives the store an N MiB page cache (the reports' budget is 128).
var options = DatabaseOptions()
if let mib = ProcessInfo.processInfo.environment["CACHE_MIB"].flatMap(Int.init) { options.cacheSize = mib << 20 }
try coordinator.addNativeStore(at: directory.path + "/graph.arbor", options: options)
let entity = model.entity(named: "Employee")!
let clock = ContinuousClock()
func rate(_ operations: Int, _ duration: Duration) -> String {
    let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    return "\(Int(Double(operations) / seconds))/s"
}

var ids: [ManagedObjectID] = []
var saved = clock.now
do {
    let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    let start = clock.now
    var objects: [ManagedObject] = []
    objects.reserveCapacity(count)
    for i in 0..<count {
        let object = ManagedObject(entity: entity, insertInto: context)
        try object.setValue("Employee \(i)", forKey: "name")
        try object.setValue(i * 10, forKey: "salary")
        try object.setValue(Date(timeIntervalSince1970: Double(i)), forKey: "startDate")
        objects.append(object)
    }
    let inserted = clock.now
    try context.save()
    saved = clock.now
    print("insert \(count): \(rate(count, inserted - start)); save: \(saved - inserted); insert+save: \(rate(count, saved - start))")
    ids = objects.map(\.objectID)
    saved = clock.now
}
// The context and its objects end here (the benchmark's insert + save includes that).
print("context and objects freed: \(clock.now - saved)")
// `ObjectGraphProfile N insert` stops here (a profile of insert+save alone).
if mode == "insert" { exit(0) }
if mode != "keyed" {
    // Fetch of all: one fetch request in a fresh context, each object's salary read.
    // `ObjectGraphProfile N fetch` repeats it ten times and stops (a profile of fetching alone).
    let rounds = mode == "fetch" ? 10 : 1
    let start = clock.now
    for _ in 0..<rounds {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let objects = try context.fetch(FetchRequest<ManagedObject>(entityName: "Employee"))
        for object in objects { _ = try object.value(forKey: "salary") }
    }
    print("fetch of all: \(rate(count * rounds, clock.now - start))")
    if rounds > 1 { exit(0) }
}
do {
    // Keyed fetches: a fresh object each time (nothing holds the snapshots), so every one reads the store.
    // `ObjectGraphProfile N keyed` repeats them ten times and stops (a profile of keyed fetches alone).
    let rounds = mode == "keyed" ? 10 : 1
    let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    var random = SystemRandomNumberGenerator()
    let n = min(count, 100_000) * rounds
    let start = clock.now
    for _ in 0..<n {
        let id = ids[Int(random.next() % UInt64(ids.count))]
        _ = try context.existingObject(with: id).value(forKey: "salary")
    }
    print("keyed fetches (existingObject): \(rate(n, clock.now - start))")
    if rounds > 1 { exit(0) }
}
do {
    // Fault firing from the row cache: another context holds every snapshot.
    let holder = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    holder.retainsRegisteredObjects = true
    let n = min(count, 100_000)
    for id in ids.prefix(n) { _ = try holder.existingObject(with: id) }
    // `ObjectGraphProfile N faults` repeats it twenty times and stops (a profile of fault fires alone).
    let rounds = mode == "faults" ? 20 : 1
    var elapsed = Duration.zero
    // In a random order, as ObjectGraphReport fires them.
    var generator = SplitMix64(seed: 7)
    let order = Array(ids.prefix(n)).shuffled(using: &generator)
    for _ in 0..<rounds {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        context.retainsRegisteredObjects = true
        let start = clock.now
        for id in order { _ = try context.object(with: id).value(forKey: "salary") }
        elapsed += clock.now - start
    }
    print("fault fires from the cache: \(rate(n * rounds, elapsed)); cache \(coordinator.rowCacheStatistics)")
    if rounds > 1 { exit(0) }
}
do {
    let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    let n = 200
    let start = clock.now
    for i in 0..<n {
        let object = ManagedObject(entity: entity, insertInto: context)
        try object.setValue("Late \(i)", forKey: "name")
        try context.save()
    }
    print("durable one-object saves: \(rate(n, clock.now - start))")
}
