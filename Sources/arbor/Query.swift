import ArgumentParser
import Arbor
import Foundation

/// `arbor query`: fetch objects from a store file with a predicate, using the model the file
/// keeps (no application code needed), and write them as they come.
struct Query: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Fetch objects of an entity from an Arbor store, with a predicate, an order and a limit.",
        discussion: """
            Reads the model stored in FILE (`arbor model FILE` prints it), so any Arbor store can \
            be queried without its application. PREDICATE uses Core Data's format grammar \
            (docs/predicates.md), for example: --where "salary > 50000 AND department.name \
            BEGINSWITH[c] 's'". Dates are written CAST('2026-12-01T00:00:00Z', 'NSDate').

            Values: each %K and %@ of PREDICATE takes the next --arg, in order. A %K takes a key \
            path. A %@ takes a value read as the type of what it is compared with: "42" is an \
            integer for an integer attribute, a decimal for a decimal one, the string "42" for a \
            string; dates are ISO-8601 (2026-12-01, 2026-12-01T09:30:00Z, …+01:00); booleans \
            true/false/yes/no/1/0; UUIDs as text; binary data as base64; an object (compared \
            with a to-one relationship) as ENTITY/KEY, KEY or its x-arbor: URI. A %@ compared with \
            nothing typed (a constant) is an integer, else a number, else a string. --arg never \
            gives nil: write NIL in the predicate (manager == NIL). For IN and BETWEEN, write \
            {%@, %@}. %d, %f, %s and a %@ inside CAST take no --arg (the value is typed by the \
            key it is compared with: due > %@ --arg 2026-12-01). Example: --where "salary > %@ AND %K BEGINSWITH %@" --arg 100000 --arg \
            lastName --arg Ho.

            Output (--format): the columns are id (the primary key), the entity's stored \
            attributes, then each to-one relationship as the destination's ENTITY/KEY (\
            Employee/2), or NULL when it is empty; to-many relationships are not shown. Each row \
            is written as the store reads it, and memory does not grow with the number of rows, \
            except where --explain shows work done after reading: a "sort:" line (no index gives \
            the order, so every match is read and sorted first) or a "then in memory" line (a \
            key path through a relationship, a to-many key: the matching objects are fetched \
            first). The query is one read transaction: the file stays read-locked until the \
            last row is written, and a writer's commit waits for it (a slow reader of the \
            output, such as a pager, keeps writers waiting). \
            table: aligned columns, their widths taken from the first \
            \(QueryOutput.tableWidthRows) rows (a wider value later pushes its line along), NULL \
            for nil, data as its size; the object count goes to standard error. json: one array, \
            an object per row with "id", "entity" and a key per column. ndjson: one such object \
            per line. csv: RFC 4180 with a header row and CRLF line ends; nil is an empty field, \
            an empty string is "". Dates are ISO-8601 in UTC, data is base64 (json, ndjson, csv). \
            --explain prints the plan instead: the index and ranges used, what is checked, \
            whether a sort is needed.
            """
    )

    /// The rows read from the store at a time.
    static let batchSize = 1000

    @Argument(help: "The store file.") var file: String
    @Argument(help: "The entity to fetch (its sub-entities' objects included).") var entity: String
    @Option(name: .customLong("where"), help: "A predicate format string.") var predicate: String?
    @Option(name: .customLong("arg"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("A value for the next %@ or %K of the predicate (-7 is a value, not an option); repeatable.", valueName: "value"))
    var arguments: [String] = []
    @Option(name: .long, help: "A key (or key path) to sort by, with :desc for descending; repeatable.") var sort: [String] = []
    @Option(name: .long, help: "The most objects to print.") var limit: Int?
    @Option(name: .long, help: "How many matching objects to skip.") var offset: Int?
    @Option(name: .long, help: "How to write the objects: table, json, ndjson or csv.") var format: QueryFormat = .table
    @Flag(name: .long, help: "Print only the number of matching objects.") var count = false
    @Flag(name: .long, help: "Print the plan the store follows instead of the objects.") var explain = false

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more") }
        if let offset, offset < 0 { throw ValidationError("--offset must be 0 or more") }
        if predicate == nil && !arguments.isEmpty { throw ValidationError("--arg gives values to --where's %@ and %K; there is no --where") }
    }

    func run() throws {
        do {
            var options = DatabaseOptions()
            options.readOnly = true
            options.create = false
            let model = try ManagedObjectModel.stored(in: file, options: options)
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            let store = try NativeStore(path: file, model: model, options: options)
            coordinator.addPersistentStore(store)
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            var request = FetchRequest<ManagedObjectID>(entityName: entity)
            if let predicate, let described = model.entity(named: entity) {
                let values = PredicateArguments(entity: described, arguments: arguments, objectID: { store.objectID(entityName: $0.name, primaryKey: $1) },
                                                uriObjectID: { URL(string: $0).flatMap(coordinator.managedObjectID(forURIRepresentation:)) })
                request.predicate = try values.predicate(predicate)
            } else if let predicate {
                // An unknown entity: the fetch says so; the predicate is parsed for its own errors first.
                request.predicate = try ObjectPredicate(format: predicate, argumentArray: arguments)
            }
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
            let written = try write(request, of: try requireEntity(model), model: model, from: store, context: context)
            if format == .table { printError("\(written) \(written == 1 ? "object" : "objects")") }
        } catch let error as ArborError {
            printError("arbor: \(describe(error))")
            if let position = error.position, let predicate {
                printError("  \(predicate)\n  \(String(repeating: " ", count: max(0, position)))^")
            }
            throw ExitCode(1)
        } catch let error as PredicateArguments.Unreadable {
            printError("arbor: \(error)")
            throw ExitCode(1)
        } catch let error as StoreError {
            printError("arbor: \(describe(error))")
            throw ExitCode(1)
        }
    }

    func requireEntity(_ model: ManagedObjectModel) throws -> EntityDescription {
        guard let described = model.entity(named: entity) else {
            throw ArborError(.invalidFetchRequest, "the model has no entity \(entity)")
        }
        return described
    }

    /// Writes the objects `request` fetches, as they are read; returns how many were written. No
    /// managed object is made for them and nothing of them is kept but a table's first rows.
    ///
    /// When the store runs the whole request (its predicate reads only what rows hold, its sort
    /// keys are attributes), its rows are written as the store reads them, in one read
    /// transaction: memory does not grow with the rows, unless the store must sort them in
    /// memory first (`--explain` shows a `sort:` line). Otherwise the context fetches the
    /// matching IDs (holding the objects its part of the predicate needs), and the rows are read
    /// and written a batch at a time.
    func write(_ request: FetchRequest<ManagedObjectID>, of entity: EntityDescription, model: ManagedObjectModel,
               from store: NativeStore, context: ManagedObjectContext) throws -> Int {
        let columns = QueryColumns(entity)
        var output = QueryOutput(format: format, columns: columns.names)
        var written = 0
        func writeRow(_ id: ManagedObjectID, _ row: StoreRow) {
            output.write(entity: row.entityName, columns.cells(id, row))
            written += 1
        }
        if let whole = try StoreFetch(whole: request, model: model) {
            try store.forEachRow(whole) { id, row in
                writeRow(id, row)
                return true
            }
        } else {
            let ids = try context.fetch(request)
            for start in stride(from: 0, to: ids.count, by: Self.batchSize) {
                let batch = Array(ids[start..<min(ids.count, start + Self.batchSize)])
                for (id, row) in zip(batch, try store.rows(for: batch)) {
                    if let row { writeRow(id, row) }
                }
            }
        }
        output.finish()
        return written
    }
}

/// The columns `arbor query` writes for an entity: `id`, its stored attributes, its to-one
/// relationships.
struct QueryColumns {
    let attributes: [String]
    let toOne: [String]

    init(_ entity: EntityDescription) {
        attributes = entity.attributes.filter { !$0.isTransient }.map(\.name)
        toOne = entity.relationships.filter { !$0.isToMany }.map(\.name)
    }

    var names: [String] { ["id"] + attributes + toOne }

    /// The cells of one row: its primary key, its attribute values, its to-one destinations as
    /// `ENTITY/KEY`.
    func cells(_ id: ManagedObjectID, _ row: StoreRow) -> [Cell] {
        let values = row.attributes, destinations = row.toOne
        var cells: [Cell] = [id.primaryKey.map(Cell.integer) ?? .null]
        cells.reserveCapacity(1 + attributes.count + toOne.count)
        for name in attributes { cells.append(Cell(values[name])) }
        for name in toOne { cells.append(Cell(destinations[name])) }
        return cells
    }
}
