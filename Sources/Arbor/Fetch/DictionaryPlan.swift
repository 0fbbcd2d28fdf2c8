import Foundation

/// A dictionary fetch's part of its ``LogicalPlan``, read from the request once: what each
/// dictionary holds and what it is grouped by (``DictionaryShape``), where the order applies
/// (``DictionaryOrder``: to the objects, or to the dictionaries), and what is done with the
/// dictionaries after they are made (the having predicate, distinct results, the window). The
/// fetch follows it and `explain` prints it (docs/predicates.md, "Dictionaries").
struct DictionaryPlan {
    let shape: DictionaryShape
    let order: DictionaryOrder
    /// The predicate each group must meet (nil: every group).
    let having: ObjectPredicate?
    /// Whether equal dictionaries are given once.
    let distinct: Bool
    /// The request's window: applied to the objects when ``windowsObjects``, else to the
    /// dictionaries.
    let offset: Int, limit: Int

    /// Whether the objects are sorted (each dictionary is one object and every sort key is the
    /// objects' own); otherwise the dictionaries are.
    var sortsObjects: Bool { !order.sortsDictionaries }
    /// Whether the objects are windowed: they are sorted, and no dictionary is dropped as a
    /// duplicate after; otherwise the dictionaries are.
    var windowsObjects: Bool { sortsObjects && !distinct }

    /// - Throws: ``ArborError/Code/invalidFetchRequest`` for a sort key the dictionaries do not
    ///   hold and the objects cannot be sorted by (``DictionaryOrder``).
    init<Result>(_ request: FetchRequest<Result>, entity: EntityDescription) throws {
        shape = DictionaryShape(request, entity: entity)
        order = try DictionaryOrder(request.sortDescriptors, properties: shape.properties, groupKeys: shape.groupBy,
                                    collapsed: shape.collapses, entity: entity)
        having = request.havingPredicate
        distinct = request.returnsDistinctResults
        (offset, limit) = (request.fetchOffset, request.fetchLimit)
    }

    /// What is done to the dictionaries once they are made, in order: `explain`'s last lines.
    var steps: [String] {
        let what = shape.collapses ? "groups" : "dictionaries"
        var steps: [String] = []
        if let having { steps.append("keep the \(what) where \(having.predicateFormat)") }
        if !sortsObjects { steps.append("sort the \(what): \(order.descriptors.map(\.description).joined(separator: ", "))") }
        if distinct { steps.append("keep distinct dictionaries") }
        if !windowsObjects, let window = RequestPlan.windowStep(offset: offset, limit: limit) { steps.append(window) }
        return steps
    }
}

/// One dictionary of a dictionary fetch, with what its sort keys may read: the object it was
/// made of (nil for a group or an aggregate over several) and its group's key values.
struct DictionaryRow {
    var values: [String: any Sendable]
    let object: ManagedObject?
    let group: [String: Operand]
}

/// How a dictionary fetch orders its results: each sort key read from the dictionaries (an
/// aggregate's or expression's alias, a fetched key, a group-by key) or from the object each
/// dictionary was made of (an attribute or to-one key path). An alias shadows an attribute of the
/// same name. Checked before anything runs: a grouped or aggregated fetch sorts only by what its
/// dictionaries hold, and a key that is neither an alias nor an attribute or to-one key path of
/// the entity is `invalidFetchRequest`.
struct DictionaryOrder {
    enum Source {
        /// The value the dictionaries hold under this name (or the group's key value).
        case result(String)
        /// The key path on the object the dictionary was made of.
        case object(ArraySlice<String>)
    }

    let descriptors: [ObjectSortDescriptor]
    let sources: [Source]
    /// Whether the dictionaries are sorted (rather than the objects, by the fetch).
    let sortsDictionaries: Bool

    init(_ descriptors: [ObjectSortDescriptor], properties: [PropertyToFetch], groupKeys: [String], collapsed: Bool,
         entity: EntityDescription) throws {
        let aliases = Set(properties.compactMap { property -> String? in
            if case .key = property.kind { return nil }
            return property.name
        })
        let results = Set(properties.map(\.name)).union(groupKeys)
        var sources: [Source] = []
        for descriptor in descriptors {
            if aliases.contains(descriptor.key) || (collapsed && results.contains(descriptor.key)) {
                sources.append(.result(descriptor.key))
                continue
            }
            if collapsed {
                throw ArborError(.invalidFetchRequest,
                                 "the grouped or aggregated fetch of \(entity.name) is sorted by \(descriptor.key), which its dictionaries do not hold: sort it by a key it groups by or fetches, or by an aggregate's or expression's name",
                                 entity: entity.name, key: descriptor.key)
            }
            try LogicalPlan.checkSortKey(descriptor.key, of: entity)
            sources.append(.object(descriptor.keys[...]))
        }
        self.descriptors = descriptors
        self.sources = sources
        sortsDictionaries = collapsed || sources.contains { if case .result = $0 { true } else { false } }
    }

    /// `rows` in this order (stable: ties keep their order).
    func sorted(_ rows: [DictionaryRow], evaluator: PredicateEvaluator) throws -> [DictionaryRow] {
        guard !descriptors.isEmpty else { return rows }
        let keyed = try rows.map { row in
            (row, try sources.map { source -> Operand in
                switch source {
                case .result(let name):
                    if let value = row.values[name] { return Operand.from(value) }
                    return row.group[name] ?? .null
                case .object(let keys):
                    guard let object = row.object else { return .null }
                    return try evaluator.value(of: keys, on: .object(object))
                }
            })
        }
        return ObjectSortDescriptor.stableSort(keyed, descriptors).map(\.0)
    }
}

/// What a dictionary fetch gives: the properties of each dictionary (the entity's stored
/// attributes when the request names none) and the keys it groups by. The one reading of a
/// request's dictionary settings, for the fetch and for `explain`.
struct DictionaryShape {
    let properties: [PropertyToFetch]
    let groupBy: [String]

    init<Result>(_ request: FetchRequest<Result>, entity: EntityDescription) {
        properties = request.propertiesToFetch ?? entity.attributes.filter { !$0.isTransient }.map { PropertyToFetch.key($0.name) }
        groupBy = request.propertiesToGroupBy ?? []
    }

    /// Whether the rows are grouped by keys.
    var grouped: Bool { !groupBy.isEmpty }
    /// Whether a property is an aggregate (without group keys: one dictionary in all).
    var aggregates: Bool { properties.contains { if case .aggregate = $0.kind { true } else { false } } }
    /// Whether dictionaries are groups rather than one per object.
    var collapses: Bool { grouped || aggregates }
}

