// The floor under issue 4's "fetch of all" goal: the least work a fetch that returns uniqued
// managed objects backed by a row cache must do per object, done by a minimal stand-in (plain
// classes and dictionaries, no locks, no notifications, no faulting), timed next to GRDB's
// `fetchAll` of the same rows in the same run, once with the uniquing table and the row cache as
// hash tables keyed by object ID (as Arbor has them) and once as dense arrays indexed by primary
// key: what the 2× goal leaves room for under each design; see docs/performance.md.
//
//   swift run -c release FetchFloor [objects]     (default 100000)
//
// Per object the stand-in does what the issue requires and nothing else:
// - decode the row's three values (a string made from UTF-8 bytes, an integer, a date);
// - one row-cache snapshot (an object holding the values, its ID and a reference count),
//   entered in a dictionary keyed by object ID (S000: one snapshot per row, shared by contexts);
// - one managed object (an object holding its ID, its values, its committed values, its
//   snapshot and a weak reference to its context), entered in the context's uniquing table
//   keyed by object ID (one instance per ID per context);
// - one array of results; the salary of each read back;
// - at the end, both table entries removed and everything freed (as a fetch's objects are
//   when the caller drops them: both GRDB's and Arbor's measured fetches include that).
import CommitWorkloads
import Foundation
import GraphWorkloads

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 100_000 : 100_000
let rounds = 7
let clock = ContinuousClock()

/// An object ID as Arbor's: entity name, store UUID, primary key; hashed by key alone.
struct StandInID: Hashable {
    let entityName: String
    let store: UUID
    let key: Int64
    static func == (a: StandInID, b: StandInID) -> Bool { a.key == b.key && a.store == b.store && a.entityName == b.entityName }
    func hash(into hasher: inout Hasher) { hasher.combine(key) }
    func _rawHashValue(seed: Int) -> Int {
        var x = UInt64(bitPattern: key) ^ UInt64(bitPattern: Int64(seed))
        x = (x ^ (x >> 30)) &* 0xbf58_476d_1ce4_e5b9
        x = (x ^ (x >> 27)) &* 0x94d0_49bb_1331_11eb
        return Int(bitPattern: UInt(truncatingIfNeeded: x ^ (x >> 31)))
    }
}

enum StandInValue {
    case none, integer(Int64), string(String), date(Date)
}

final class StandInSnapshot {
    let id: StandInID
    let values: [StandInValue]
    var references = 1
    init(id: StandInID, values: [StandInValue]) {
        self.id = id
        self.values = values
    }
}

final class StandInContext {}

final class StandInObject {
    let id: StandInID
    var values: [StandInValue]
    var committed: [StandInValue]
    var snapshot: StandInSnapshot?
    weak var context: StandInContext?
    init(id: StandInID, values: [StandInValue], context: StandInContext) {
        self.id = id
        self.values = values
        committed = values
        self.context = context
    }
}

/// The rows as a store hands them over: the name's UTF-8 bytes, the salary, the start date.
let rows: [([UInt8], Int64, Double)] = (0..<count).map {
    (Array(EmployeeRows.name($0).utf8), EmployeeRows.salary($0), EmployeeRows.startDate($0).timeIntervalSinceReferenceDate)
}
let store = UUID()

/// The uniquing table or the row cache of the stand-in: by object ID.
protocol StandInTable<Value> {
    associatedtype Value
    init(capacity: Int)
    subscript(id: StandInID) -> Value? { get set }
}

/// A hash table keyed by object ID (Arbor's design until this measurement).
struct HashTable<Value>: StandInTable {
    var entries: [StandInID: Value] = [:]
    init(capacity: Int) { entries.reserveCapacity(capacity) }
    subscript(id: StandInID) -> Value? {
        get { entries[id] }
        set { entries[id] = newValue }
    }
}

/// A dense array indexed by primary key (keys are handed out in sequence, so a table by key
/// needs no hashing).
struct DenseTable<Value>: StandInTable {
    var slots: [Value?]
    init(capacity: Int) { slots = Array(repeating: nil, count: capacity + 1) }
    subscript(id: StandInID) -> Value? {
        get { slots[Int(id.key)] }
        set { slots[Int(id.key)] = newValue }
    }
}

/// One fetch of all through the stand-in, with a row cache and a uniquing table of the kinds
/// given (the uniquing table holds its objects unretained, as Arbor's registry does); returns
/// the sum of the salaries.
func standInFetch<Cache: StandInTable, Registry: StandInTable>(_: Cache.Type, _: Registry.Type) -> Int64
    where Cache.Value == StandInSnapshot, Registry.Value == Unmanaged<StandInObject> {
    let context = StandInContext()
    var cache = Cache(capacity: count)
    var registry = Registry(capacity: count)
    var results: [StandInObject] = []
    results.reserveCapacity(count)
    for (index, row) in rows.enumerated() {
        let id = StandInID(entityName: "Employee", store: store, key: Int64(index + 1))
        let name = row.0.withUnsafeBufferPointer { String(decoding: $0, as: UTF8.self) }
        let values: [StandInValue] = [.string(name), .integer(row.1), .date(Date(timeIntervalSinceReferenceDate: row.2))]
        let snapshot = StandInSnapshot(id: id, values: values)
        cache[id] = snapshot
        let object = StandInObject(id: id, values: values, context: context)
        object.snapshot = snapshot
        registry[id] = Unmanaged.passUnretained(object)
        results.append(object)
    }
    var sum: Int64 = 0
    for object in results {
        if case .integer(let salary) = object.values[1] { sum &+= salary }
    }
    for object in results {
        registry[object.id] = nil
        cache[object.id] = nil
    }
    return sum
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
}

let grdb = try GRDBGraph()
defer { grdb.remove() }
_ = try grdb.insertAndSave(count: count, from: 0)
var grdbBest = Double.infinity, floorBest = Double.infinity, denseBest = Double.infinity
var grdbRounds: [Double] = [], floorRounds: [Double] = [], denseRounds: [Double] = []
for _ in 0..<rounds {
    // Alternating, so that a change in background load hits both alike.
    var start = clock.now
    guard try grdb.fetchAll() == count else { throw WorkloadError("GRDB fetched the wrong number of records") }
    let g = seconds(clock.now - start)
    start = clock.now
    guard standInFetch(HashTable<StandInSnapshot>.self, HashTable<Unmanaged<StandInObject>>.self) > 0 else { throw WorkloadError("the stand-in read no salary") }
    let f = seconds(clock.now - start)
    start = clock.now
    guard standInFetch(DenseTable<StandInSnapshot>.self, DenseTable<Unmanaged<StandInObject>>.self) > 0 else { throw WorkloadError("the dense stand-in read no salary") }
    let d = seconds(clock.now - start)
    grdbRounds.append(Double(count) / g)
    floorRounds.append(Double(count) / f)
    denseRounds.append(Double(count) / d)
    grdbBest = min(grdbBest, g)
    floorBest = min(floorBest, f)
    denseBest = min(denseBest, d)
}
let grdbRate = Double(count) / grdbBest, floorRate = Double(count) / floorBest, denseRate = Double(count) / denseBest
func grouped(_ value: Double) -> String { grouped(Int(value.rounded())) }
print("Fetch of all, \(grouped(Double(count))) objects: the floor of uniqued managed objects over a row cache, against GRDB fetchAll (best of \(rounds), alternating).")
print("")
print("| | objects/s | ns per object |")
print("|---|---:|---:|")
print("| GRDB fetchAll (Codable records) | \(grouped(grdbRate)) | \(Int((1e9 / grdbRate).rounded())) |")
print("| stand-in floor (object + uniquing entry + row-cache snapshot), hash tables by object ID | \(grouped(floorRate)) | \(Int((1e9 / floorRate).rounded())) |")
print("| the same, tables as dense arrays by primary key | \(grouped(denseRate)) | \(Int((1e9 / denseRate).rounded())) |")
print("| goal: 2 × GRDB | \(grouped(2 * grdbRate)) | \(Int((1e9 / (2 * grdbRate)).rounded())) |")
print("")
print(String(format: "Floor / GRDB: %.2f with hash tables, %.2f with dense tables (the goal needs 2.00).", floorRate / grdbRate, denseRate / grdbRate))
print("All rounds (objects/s): GRDB " + grdbRounds.map { grouped($0) }.joined(separator: ", ") + "; floor " + floorRounds.map { grouped($0) }.joined(separator: ", ")
      + "; dense " + denseRounds.map { grouped($0) }.joined(separator: ", "))
