// Issue 7, item 5: the cost of change tracking with and without an undo manager. The seeds say
// that setting a context's undo manager to nil "provides a performance benefit if you do not want
// to support undo … for example in a large import process" (S000-750); this measures it. Prints
// markdown tables (docs/performance.md).
//
//   swift run -c release UndoReport [changes] [objects] [rounds]
//
// `objects` (default 10,000) saved `Item`s (a name and an integer64 `value`) are fetched into a
// fresh context and their faults fired; then `changes` (default 100,000) `setValue(_:forKey:
// "value")` calls cycle over them, in events of 100 changes (`processPendingChanges()` after
// each): with no undo manager, with one (unlimited levels), with one keeping 100 levels, and with
// one whose registration is disabled (the context records, then drops each event). With the
// unlimited undo manager, undoing every step, redoing every step and then dropping them all
// (`removeAllActions()`) are timed too. Then the same changes in events of 1 to 10,000 changes,
// without and with an undo manager. `rounds` (default 5) of everything, the configurations taking
// turns to go first; the tables show medians. Memory held after the changes (resident size after
// minus before) is measured in one more, untimed pass.
//
// UNDO_PROFILE=none|unlimited|levels100|disabled runs that measurement alone, 20 times, for perf.
import Arbor
import CommitWorkloads
import EngineWorkloads
import Foundation

let arguments = CommandLine.arguments
let changes = arguments.count > 1 ? max(1, Int(arguments[1]) ?? 100_000) : 100_000
let objectCount = arguments.count > 2 ? max(1, Int(arguments[2]) ?? 10_000) : 10_000
let rounds = arguments.count > 3 ? max(1, Int(arguments[3]) ?? 5) : 5
let eventSize = 100
let eventSizes = [1, 10, 100, 1_000, 10_000]

let model = try ManagedObjectModel {
    Entity("Item") {
        Attribute("name", .string)
        Attribute("value", .integer64)
    }
}
let entity = model.entity(named: "Item")!
let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
try coordinator.addInMemoryStore()
do {
    let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    for i in 0..<objectCount {
        let item = ManagedObject(entity: entity, insertInto: context)
        try item.setValue("Item \(i)", forKey: "name")
        try item.setValue(i, forKey: "value")
    }
    try context.save()
}

/// The ways of tracking changes, in the table's order.
enum Tracking: String, CaseIterable {
    case none = "no undo manager (nil, the default)"
    case unlimited = "undo manager, unlimited levels (the default `levelsOfUndo` 0)"
    case levels100 = "undo manager, `levelsOfUndo` = 100"
    case disabled = "undo manager, registration disabled (`disableUndoRegistration()`)"

    func makeUndoManager() -> ObjectUndoManager? {
        switch self {
        case .none: return nil
        case .unlimited: return ObjectUndoManager()
        case .levels100:
            let undoManager = ObjectUndoManager()
            undoManager.levelsOfUndo = 100
            return undoManager
        case .disabled:
            let undoManager = ObjectUndoManager()
            undoManager.disableUndoRegistration()
            return undoManager
        }
    }
}

/// One measurement of the changes, and of undoing and redoing them when asked.
struct Measurement {
    var changes: Duration
    var steps = 0
    var undoAll: Duration?
    var redoAll: Duration?
    /// `removeAllActions()` after the redo: releasing the steps (a cost the changes leave for later).
    var removeAll: Duration?
    /// Resident memory after the changes minus before (the undo stack, mostly), in bytes.
    var retainedBytes: Int?
}

let clock = ContinuousClock()

/// A fresh context with every item fetched and its faults fired (outside the measurement),
/// in the order of their `name`s' numbers.
func loadedContext() throws -> (ManagedObjectContext, [ManagedObject]) {
    let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    let fetched = try context.fetch(FetchRequest<ManagedObject>(entityName: "Item"))
    guard fetched.count == objectCount else { throw WorkloadError("fetched \(fetched.count) items of \(objectCount)") }
    var objects = [ManagedObject?](repeating: nil, count: objectCount)
    for object in fetched {
        let name = try object.value(forKey: "name") as? String ?? ""
        guard let index = Int(name.dropFirst(5)), objects.indices.contains(index) else { throw WorkloadError("item \(name)") }
        objects[index] = object
    }
    return (context, objects.map { $0! })
}

/// Checks every item's value: change `k` set item `k % objectCount` to `k + 1`.
func verify(_ objects: [ManagedObject], changed: Bool, _ what: String) throws {
    for (index, object) in objects.enumerated() {
        var expected = index
        if changed && index < changes { expected = index + ((changes - 1 - index) / objectCount) * objectCount + 1 }
        let value = (try object.value(forKey: "value") as? Int64).map(Int.init) ?? -1
        guard value == expected else { throw WorkloadError("\(what): item \(index) holds \(value), not \(expected)") }
    }
}

/// `changes` changes in events of `size`, tracked as `tracking` says; with `undoRedo`, every
/// step is then undone and redone (timed separately).
func measure(_ tracking: Tracking, eventSize size: Int, undoRedo: Bool = false, memory: Bool = false) throws -> Measurement {
    let (context, objects) = try loadedContext()
    context.undoManager = tracking.makeUndoManager()
    if memory { MemoryUsage.releaseFreedMemory() }
    let residentBefore = memory ? MemoryUsage.residentBytes : nil
    let start = clock.now
    var inEvent = 0
    var index = 0
    for k in 0..<changes {
        try objects[index].setValue(k + 1, forKey: "value")
        index += 1
        if index == objectCount { index = 0 }
        inEvent += 1
        if inEvent == size {
            context.processPendingChanges()
            inEvent = 0
        }
    }
    context.processPendingChanges()
    var measurement = Measurement(changes: clock.now - start)
    if memory, let residentBefore, let after = MemoryUsage.residentBytes {
        MemoryUsage.releaseFreedMemory()
        measurement.retainedBytes = (MemoryUsage.residentBytes ?? after) - residentBefore
    }
    try verify(objects, changed: true, "\(tracking) after the changes")
    guard let undoManager = context.undoManager else { return measurement }
    measurement.steps = undoManager.undoCount
    let expectedSteps: Int
    switch tracking {
    case .none, .disabled: expectedSteps = 0
    case .unlimited: expectedSteps = (changes + size - 1) / size
    case .levels100: expectedSteps = min(100, (changes + size - 1) / size)
    }
    guard measurement.steps == expectedSteps else {
        throw WorkloadError("\(tracking): \(measurement.steps) undo steps, not \(expectedSteps)")
    }
    guard undoRedo else { return measurement }
    var start2 = clock.now
    while undoManager.canUndo { context.undo() }
    measurement.undoAll = clock.now - start2
    try verify(objects, changed: false, "after undoing everything")
    start2 = clock.now
    while undoManager.canRedo { context.redo() }
    measurement.redoAll = clock.now - start2
    try verify(objects, changed: true, "after redoing everything")
    guard undoManager.undoCount == expectedSteps else { throw WorkloadError("\(undoManager.undoCount) steps after the redo") }
    start2 = clock.now
    undoManager.removeAllActions()
    measurement.removeAll = clock.now - start2
    return measurement
}

// UNDO_PROFILE=none|unlimited|levels100|disabled: that measurement alone, 20 times, for profilers
// (`perf record -g .build/release/UndoReport`); prints the rate and stops.
if let name = ProcessInfo.processInfo.environment["UNDO_PROFILE"] {
    guard let tracking = Tracking.allCases.first(where: { "\($0)" == name }) else { throw WorkloadError("UNDO_PROFILE=\(name)?") }
    var elapsed = Duration.zero
    for _ in 0..<20 { elapsed += try measure(tracking, eventSize: eventSize).changes }
    print("\(tracking.rawValue): \(grouped(Int(Double(20 * changes) / elapsed.seconds))) changes/s")
    exit(0)
}

// Warm-up: one small pass of each kind (caches, allocator), not recorded.
for tracking in Tracking.allCases { _ = try measure(tracking, eventSize: eventSize, undoRedo: tracking == .unlimited) }

var main: [Tracking: [Measurement]] = [:]
var sweep: [Int: [Bool: [Duration]]] = [:]
for round in 0..<rounds {
    let order = Tracking.allCases.indices.map { Tracking.allCases[($0 + round) % Tracking.allCases.count] }
    for tracking in order {
        main[tracking, default: []].append(try measure(tracking, eventSize: eventSize, undoRedo: tracking == .unlimited))
    }
    for size in eventSizes {
        for undo in round % 2 == 0 ? [false, true] : [true, false] {
            let measurement = try measure(undo ? .unlimited : .none, eventSize: size)
            sweep[size, default: [:]][undo, default: []].append(measurement.changes)
        }
    }
}

// Memory: one more pass of each kind, untimed (returning freed memory to the system before a
// measurement makes its allocations fault pages in again, which would distort the timings).
var retained: [Tracking: Int] = [:]
for tracking in Tracking.allCases {
    retained[tracking] = try measure(tracking, eventSize: eventSize, memory: true).retainedBytes
}

func rate(_ count: Int, _ durations: [Duration]) -> Double { median(durations.map { Double(count) / $0.seconds }) }
func nanoseconds(_ perSecond: Double) -> String { perSecond > 0 ? fixed(1e9 / perSecond, 0) : "—" }
func rateText(_ value: Double) -> String { grouped(Int(value.rounded())) }

let events = (changes + eventSize - 1) / eventSize
print("Change tracking with and without an undo manager: \(grouped(changes)) setValue calls of an integer64 attribute, cycling over")
print("\(grouped(objectCount)) saved, fetched and fired objects (in-memory store, one confinement context), in events of \(eventSize) changes")
print("(processPendingChanges after each: \(grouped(events)) events); median of \(rounds) rounds; \(ProcessInfo.processInfo.activeProcessorCount) CPUs.")
print("")
print("| Tracking | Changes/s | ns per change | No undo manager / this | Undo steps held | Memory held after the changes |")
print("|---|---:|---:|---:|---:|---:|")
let baseline = rate(changes, main[.none]?.map(\.changes) ?? [])
for tracking in Tracking.allCases {
    let measurements = main[tracking] ?? []
    let r = rate(changes, measurements.map(\.changes))
    let memoryText = retained[tracking].map { $0 > 256 * 1024 ? "\(fixed(Double($0) / 1_048_576, 1)) MiB" : "< 0.3 MiB" } ?? "—"
    print("| \(tracking.rawValue) | \(rateText(r)) | \(nanoseconds(r)) | \(fixed(r > 0 ? baseline / r : 0)) | \(grouped(measurements.first?.steps ?? 0)) | \(memoryText) |")
}
let unlimited = main[.unlimited] ?? []
let undoRate = rate(changes, unlimited.compactMap(\.undoAll))
let redoRate = rate(changes, unlimited.compactMap(\.redoAll))
let steps = unlimited.first?.steps ?? 0
print("")
print("Undo and redo of everything (unlimited levels): \(grouped(steps)) steps of \(eventSize) changes each.")
print("")
print("| Operation | Changes/s | Steps/s | ns per change |")
print("|---|---:|---:|---:|")
print("| undo() until canUndo is false | \(rateText(undoRate)) | \(rateText(undoRate / Double(eventSize))) | \(nanoseconds(undoRate)) |")
print("| redo() until canRedo is false | \(rateText(redoRate)) | \(rateText(redoRate / Double(eventSize))) | \(nanoseconds(redoRate)) |")
let removeRate = rate(changes, unlimited.compactMap(\.removeAll))
print("| removeAllActions() after the redo (releases the steps) | \(rateText(removeRate)) | \(rateText(removeRate / Double(eventSize))) | \(nanoseconds(removeRate)) |")
print("")
print("By event size: the same \(grouped(changes)) changes, events of 1 to \(grouped(eventSizes.last!)) changes (changes/s; median of \(rounds)).")
print("")
print("| Changes per event | Events | No undo manager | Undo manager | No undo / undo | ns per event, no undo | ns per event, undo |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for size in eventSizes {
    let n = rate(changes, sweep[size]?[false] ?? []), u = rate(changes, sweep[size]?[true] ?? [])
    let eventCount = (changes + size - 1) / size
    let perEvent = { (r: Double) in r > 0 ? grouped(Int((Double(changes) / r * 1e9 / Double(eventCount)).rounded())) : "—" }
    print("| \(grouped(size)) | \(grouped(eventCount)) | \(rateText(n)) | \(rateText(u)) | \(fixed(u > 0 ? n / u : 0)) | \(perEvent(n)) | \(perEvent(u)) |")
}
print("")
print("All rounds (changes/s):")
for tracking in Tracking.allCases {
    print("- \(tracking.rawValue): " + (main[tracking] ?? []).map { rateText(Double(changes) / $0.changes.seconds) }.joined(separator: ", "))
}
print("- undo of everything: " + unlimited.compactMap(\.undoAll).map { rateText(Double(changes) / $0.seconds) }.joined(separator: ", "))
print("- redo of everything: " + unlimited.compactMap(\.redoAll).map { rateText(Double(changes) / $0.seconds) }.joined(separator: ", "))
print("- removeAllActions(): " + unlimited.compactMap(\.removeAll).map { rateText(Double(changes) / $0.seconds) }.joined(separator: ", "))
for size in eventSizes {
    for undo in [false, true] {
        print("- events of \(grouped(size)), \(undo ? "undo manager" : "no undo manager"): "
            + (sweep[size]?[undo] ?? []).map { rateText(Double(changes) / $0.seconds) }.joined(separator: ", "))
    }
}
