import ArgumentParser
import Arbor
import Foundation

/// `arbor query`: fetch objects from a store file with a predicate, using the model the file
/// keeps (no application code needed).
struct Query: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Fetch objects of an entity from an Arbor store, with a predicate, an order and a limit.",
        discussion: """
            Reads the model stored in FILE, so any Arbor store can be queried without its \
            application. PREDICATE uses Core Data's format grammar (docs/predicates.md), for \
            example: --where "salary > 50000 AND department.name BEGINSWITH[c] 's'". Objects are \
            printed as a table (or JSON with --json); to-one relationships show the destination's \
            primary key. --explain prints the plan instead: the index and ranges used, what is \
            checked, whether a sort is needed.
            """
    )

    @Argument(help: "The store file.") var file: String
    @Argument(help: "The entity to fetch (its sub-entities' objects included).") var entity: String
    @Option(name: .customLong("where"), help: "A predicate format string.") var predicate: String?
    @Option(name: .long, help: "A key (or key path) to sort by, with :desc for descending; repeatable.") var sort: [String] = []
    @Option(name: .long, help: "The most objects to print.") var limit: Int?
    @Option(name: .long, help: "How many matching objects to skip.") var offset: Int?
    @Flag(name: .long, help: "Print only the number of matching objects.") var count = false
    @Flag(name: .long, help: "Print the plan the store follows instead of the objects.") var explain = false
    @Flag(name: .long, help: "Print the objects as a JSON array.") var json = false

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more") }
        if let offset, offset < 0 { throw ValidationError("--offset must be 0 or more") }
    }

    func run() throws {
        do {
            var options = DatabaseOptions()
            options.readOnly = true
            options.create = false
            let model = try ManagedObjectModel.stored(in: file, options: options)
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            coordinator.addPersistentStore(try NativeStore(path: file, model: model, options: options))
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            var request = FetchRequest<ManagedObject>(entityName: entity)
            if let predicate { request.predicate = try ObjectPredicate(format: predicate) }
            request.sortDescriptors = sort.map { key in
                if key.hasSuffix(":desc") { return ObjectSortDescriptor(key: String(key.dropLast(5)), ascending: false) }
                if key.hasSuffix(":asc") { return ObjectSortDescriptor(key: String(key.dropLast(4))) }
                return ObjectSortDescriptor(key: key)
            }
            request.fetchLimit = limit ?? 0
            request.fetchOffset = offset ?? 0
            if explain {
                print(try request.explain(in: context))
                return
            }
            if count {
                print(try context.count(for: request))
                return
            }
            request.returnsObjectsAsFaults = false
            let objects = try context.fetch(request)
            guard let described = model.entity(named: entity) else { return }
            let columns = ["id"] + described.attributes.filter { !$0.isTransient }.map(\.name)
                + described.relationships.filter { !$0.isToMany }.map(\.name)
            let rows = try objects.map { object in try [object.objectID.primaryKey.map(String.init) ?? "?"] + columns.dropFirst().map { try text(object, $0) } }
            if json {
                printJSON(columns: columns, objects: objects, rows: rows)
            } else {
                printTable(columns: columns, rows: rows)
                printError("\(objects.count) \(objects.count == 1 ? "object" : "objects")")
            }
        } catch let error as ArborError {
            printError("arbor: \(describe(error))")
            if let position = error.position, let predicate {
                printError("  \(predicate)\n  \(String(repeating: " ", count: max(0, position)))^")
            }
            throw ExitCode(1)
        }
    }

    /// A property of an object as table text.
    func text(_ object: ManagedObject, _ key: String) throws -> String {
        switch try object.value(forKey: key) {
        case nil: return "NULL"
        case let string as String: return string
        case let date as Date: return date.formatted(.iso8601)
        case let data as Data: return "<\(data.count) bytes>"
        case let related as ManagedObject: return related.objectID.primaryKey.map { "\(related.objectID.entityName)/\($0)" } ?? "?"
        case let value?: return "\(value)"
        }
    }

    func printTable(columns: [String], rows: [[String]]) {
        var widths = columns.map(\.count)
        for row in rows { for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) } }
        func line(_ cells: [String]) -> String {
            zip(cells, widths).map { $0 + String(repeating: " ", count: max(0, $1 - $0.count)) }.joined(separator: "  ")
                .replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
        }
        print(line(columns))
        print(line(widths.map { String(repeating: "-", count: $0) }))
        for row in rows { print(line(row)) }
    }

    func printJSON(columns: [String], objects: [ManagedObject], rows: [[String]]) {
        var array: [[String: Any]] = []
        for (object, row) in zip(objects, rows) {
            var entry: [String: Any] = ["entity": object.entity.name]
            for (column, cell) in zip(columns, row) {
                if column == "id" { entry["id"] = object.objectID.primaryKey.map { Int($0) } ?? 0; continue }
                switch (try? object.value(forKey: column)) ?? nil {
                case nil: entry[column] = NSNull()
                case let number as any BinaryInteger: entry[column] = Int(number)
                case let number as Double: entry[column] = number.isFinite ? number : cell
                case let number as Float: entry[column] = number.isFinite ? Double(number) : cell
                case let flag as Bool: entry[column] = flag
                default: entry[column] = cell
                }
            }
            array.append(entry)
        }
        let data = (try? JSONSerialization.data(withJSONObject: array, options: [.prettyPrinted, .sortedKeys])) ?? Data("[]".utf8)
        print(String(decoding: data, as: UTF8.self))
    }
}
