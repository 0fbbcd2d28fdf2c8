import Foundation

/// A fetch request's store-independent plan, made once per fetch: the request checked against
/// the model (unknown keys and values of the wrong type are caught before anything runs), its
/// predicate split into what stores evaluate on rows, the joins they run through relationships,
/// and what the context evaluates on objects (docs/relational-planning.md, "Where the work is
/// split"), its order and its window, and for a dictionary fetch what is done with the
/// dictionaries (``DictionaryPlan``: their shape and groups, their order, having, distinct). A context's ``RequestPlan`` adds where it runs; a store
/// turns the ``StoreFetch`` derived from it into its own physical plan.
struct LogicalPlan {
    let entity: EntityDescription
    /// Whether rows of the entity's sub-entities count.
    var includesSubentities = true
    /// The order asked for (a store applies it when ``storeSorts``; else objects are sorted).
    let sortDescriptors: [ObjectSortDescriptor]
    /// The window asked for: matching results to skip, then at most `limit` (0: no limit).
    var offset = 0, limit = 0
    /// The predicate's terms, each where it runs.
    private(set) var split: PredicateSplit
    /// The conjuncts a store runs as joins through relationships (``JoinTerm``).
    var joins: [JoinTerm] { split.joins }
    /// The conjuncts the context evaluates on objects (nil: none).
    var residual: ObjectPredicate? { split.residual }
    /// The same conjuncts, each with why it is judged on objects (``InMemoryReason``).
    var onObjects: [(term: ObjectPredicate, reason: String)] { split.onObjects }
    /// Whether every sort key is a persistent attribute (a store can sort).
    var storeSorts: Bool
    /// A dictionary fetch's part (nil for other fetches): the order and window above are then
    /// the objects' part of the request, and the rest applies to the dictionaries.
    private(set) var dictionary: DictionaryPlan?

    /// Whether a store's rows answer the whole request — predicate and order — so that the store
    /// may also apply the window (docs/predicates.md, "Pushdown"). The one statement of that
    /// rule: a context's plan (RequestPlan) and `arbor query` ask it.
    var rowsAnswerWholeRequest: Bool { residual == nil && storeSorts }

    init(entityName: String, predicate: ObjectPredicate?, sortDescriptors: [ObjectSortDescriptor], model: ManagedObjectModel) throws {
        guard let entity = model.entity(named: entityName) else {
            throw ArborError(.invalidFetchRequest, "the model has no entity \(entityName) to fetch", entity: entityName)
        }
        self.entity = entity
        self.sortDescriptors = sortDescriptors
        if let predicate { try Self.check(predicate, entity: entity, scope: [:]) }
        for descriptor in sortDescriptors { try Self.checkSortKey(descriptor.key, of: entity) }
        // A store sorts by its rows' attributes, and by key paths through to-one relationships
        // to a stored attribute (reading the destinations' rows; checkSortKey refused the rest).
        storeSorts = sortDescriptors.allSatisfy { descriptor in
            let path = ModelKeyPath(descriptor.keys, from: entity)
            return path.throughToOne && path.attribute.map { !$0.isTransient } == true
        }
        split = PredicateSplit(predicate, entity: entity)
    }

    /// The plan of `request`: its predicate, order, scope and window; for a dictionary fetch,
    /// its ``DictionaryPlan``, with the order and window kept for the objects only when they
    /// apply to them.
    ///
    /// - Throws: ``ArborError/Code/invalidFetchRequest`` for an entity or key the model lacks, a
    ///   constant of the wrong type, or a sort key that cannot be sorted by.
    init<Result>(_ request: FetchRequest<Result>, model: ManagedObjectModel) throws {
        let dictionary = try request.resultType != .dictionary ? nil
            : model.entity(named: request.entityName).map { try DictionaryPlan(request, entity: $0) }
        try self.init(entityName: request.entityName, predicate: request.predicate,
                      sortDescriptors: dictionary?.sortsObjects == false ? [] : request.sortDescriptors, model: model)
        self.dictionary = dictionary
        includesSubentities = request.includesSubentities
        if dictionary?.windowsObjects != false { (offset, limit) = (request.fetchOffset, request.fetchLimit) }
    }

    /// Keeps the joins with the context, on objects, when `inMemory`: a context with unsaved
    /// changes in the entities a join reaches judges objects by their in-memory values, which
    /// the store's rows do not hold (S000-22, S000-23).
    mutating func keepJoins(inMemory: Bool, because reason: String = "objects it reaches have unsaved changes, which the store's rows do not hold") {
        guard inMemory, !joins.isEmpty else { return }
        split.keepJoinsOnObjects(because: reason)
    }

    /// The entities whose rows the joins read beyond the fetched entity's.
    var joinedEntities: [EntityDescription] { joins.flatMap(\.reachedEntities) }

    /// Keeps the order with the context, on objects, when `inMemory`: a sort by a key path
    /// through to-one relationships reads the destinations' rows in the store, which do not hold
    /// the unsaved changes of a context that has them in the entities the key path reaches (as
    /// ``keepJoins(inMemory:)`` for predicates).
    mutating func keepSorts(inMemory: Bool) {
        if inMemory { storeSorts = false }
    }

    /// The entities whose rows a store's sort by `descriptors` reads beyond the fetched entity's:
    /// each to-one hop's destination, with its sub-entities (none for sorts by attributes).
    func sortedEntities(_ descriptors: [ObjectSortDescriptor]) -> [EntityDescription] {
        descriptors.flatMap { ModelKeyPath($0.keys, from: entity).reachedEntities }
    }

    /// Checks a sort key of `entity`'s objects: an attribute, or a key path through to-one
    /// relationships ending at an attribute or a to-one relationship.
    ///
    /// - Throws: ``ArborError/Code/invalidFetchRequest`` for anything else: an unknown key, a
    ///   path through a to-many relationship or past an attribute, a collection operator.
    static func checkSortKey(_ key: String, of entity: EntityDescription) throws {
        func refuse(_ why: String) -> ArborError {
            ArborError(.invalidFetchRequest, "\(entity.name) cannot be sorted by \(key): \(why) (a sort key is an attribute or a key path through to-one relationships)",
                       entity: entity.name, key: key)
        }
        let keys = KeyPathEvaluator.components(of: key)
        guard keys.count <= KeyPathEvaluator.maximumKeys else { throw refuse("it has more than \(KeyPathEvaluator.maximumKeys) keys") }
        let path = ModelKeyPath(keys, from: entity)
        if let toMany = path.hops.first(where: \.isToMany) {
            throw refuse("it goes through the to-many relationship \(toMany.entity?.name ?? entity.name).\(toMany.name)")
        }
        switch path.end {
        case .attribute: return
        case .relationship(let relationship):
            guard !relationship.isToMany else { throw refuse("it goes through the to-many relationship \(path.lastEntity.name).\(relationship.name)") }
        case .collectionOperator(let name, _): throw refuse("\(name) is a collection operator")
        case .unknownKey(let name, _): throw refuse("\(path.lastEntity.name) has no property \"\(name)\"")
        case .pastAttribute(let attribute, let name, _): throw refuse("\"\(name)\" cannot follow the attribute \(path.lastEntity.name).\(attribute.name)")
        }
    }

    // MARK: Row-evaluable

    /// Whether a predicate only reads what a row holds.
    static func isRowEvaluable(_ predicate: ObjectPredicate, _ entity: EntityDescription) -> Bool {
        switch predicate {
        case .constant: true
        case .not(let inner): isRowEvaluable(inner, entity)
        case .and(let terms), .or(let terms): terms.allSatisfy { isRowEvaluable($0, entity) }
        case .comparison(let comparison):
            isRowEvaluable(comparison.left, entity) && isRowEvaluable(comparison.right, entity)
        }
    }

    static func isRowEvaluable(_ expression: ObjectExpression, _ entity: EntityDescription) -> Bool {
        switch expression {
        case .constant, .evaluatedObject: return true
        case .keyPath(let keys):
            guard keys.count == 1 else { return false }
            if let attribute = entity.attributesByName[keys[0]] { return !attribute.isTransient }
            return entity.relationshipsByName[keys[0]].map { !$0.isToMany } ?? false
        case .aggregate(let elements): return elements.allSatisfy { isRowEvaluable($0, entity) }
        case .arithmetic(_, let a, let b): return isRowEvaluable(a, entity) && isRowEvaluable(b, entity)
        case .keyPathOn, .variable, .subquery: return false
        }
    }

    // MARK: Checking against the model

    /// What a key path leads to.
    enum End {
        case entity(EntityDescription)
        case collection(EntityDescription)
        case attribute(AttributeDescription)
        /// A value of unknown type (an aggregate, a count, a variable).
        case value
    }

    static func check(_ predicate: ObjectPredicate, entity: EntityDescription, scope: [String: End]) throws {
        switch predicate {
        case .constant: return
        case .not(let inner): try check(inner, entity: entity, scope: scope)
        case .and(let terms), .or(let terms): for term in terms { try check(term, entity: entity, scope: scope) }
        case .comparison(let comparison):
            let left = try end(of: comparison.left, entity: entity, scope: scope)
            let right = try end(of: comparison.right, entity: entity, scope: scope)
            try checkTypes(comparison, left, right, entity: entity)
        }
    }

    static func end(of expression: ObjectExpression, entity: EntityDescription, scope: [String: End]) throws -> End {
        switch expression {
        case .constant:
            return .value
        case .aggregate(let elements):
            for element in elements { _ = try end(of: element, entity: entity, scope: scope) }
            return .value
        case .arithmetic(_, let a, let b):
            _ = try end(of: a, entity: entity, scope: scope)
            _ = try end(of: b, entity: entity, scope: scope)
            return .value
        case .evaluatedObject: return .entity(entity)
        case .variable(let name): return scope[name] ?? .value
        case .keyPath(let keys):
            return try resolve(keys[...], from: .entity(entity), scope: scope, what: "the predicate's key path \(keys.joined(separator: "."))")
        case .keyPathOn(let base, let keys):
            let start = try end(of: base, entity: entity, scope: scope)
            return try resolve(keys[...], from: start, scope: scope, what: "the key path \(keys.joined(separator: "."))")
        case .subquery(let collection, let variable, let predicate):
            let source = try end(of: collection, entity: entity, scope: scope)
            guard case .collection(let element) = source else {
                if case .value = source { return .value }
                throw ArborError(.invalidFetchRequest, "SUBQUERY needs a to-many relationship as its collection; \(PredicateFormatter.format(collection)) is not one",
                                 entity: entity.name)
            }
            var inner = scope
            inner[variable] = .entity(element)
            try check(predicate, entity: element, scope: inner)
            return .collection(element)
        }
    }

    /// Follows keys from `start` through the model (``ModelKeyPath``): past a to-many hop, the
    /// key path is a collection, whose attributes are values of unknown type; a collection
    /// operator applies to a collection, and the keys after it to its elements.
    static func resolve(_ keys: ArraySlice<String>, from start: End, scope: [String: End], what: @autoclosure () -> String) throws -> End {
        guard keys.count <= KeyPathEvaluator.maximumKeys else {
            throw ArborError(.invalidFetchRequest, "\(what()): more than \(KeyPathEvaluator.maximumKeys) keys")
        }
        guard let first = keys.first else { return start }
        let entity: EntityDescription, startsMany: Bool
        switch start {
        case .value: return .value
        case .attribute(let attribute):
            if first.hasPrefix("@") { throw ArborError(.invalidFetchRequest, "\(what()): \(first) applies to a to-many relationship", key: first) }
            throw ArborError(.unknownKey, "\(what()): \"\(first)\" cannot follow the attribute \(attribute.name) (\(attribute.type))", key: first)
        case .entity(let start): (entity, startsMany) = (start, false)
        case .collection(let start): (entity, startsMany) = (start, true)
        }
        let path = ModelKeyPath(keys, from: entity)
        let many = startsMany || !path.throughToOne
        switch path.end {
        case .attribute(let attribute):
            return many ? .value : .attribute(attribute)
        case .relationship(let relationship):
            guard let destination = relationship.destinationEntity else { return .value }
            return relationship.isToMany || many ? .collection(destination) : .entity(destination)
        case .unknownKey(let key, _):
            throw ArborError(.unknownKey, "\(what()): \(path.lastEntity.name) has no property \"\(key)\"", entity: path.lastEntity.name, key: key)
        case .pastAttribute(let attribute, let key, _):
            if many { return .value }
            throw ArborError(.unknownKey, "\(what()): \"\(key)\" cannot follow the attribute \(attribute.name) (\(attribute.type))", key: key)
        case .collectionOperator(let key, let offset):
            guard many else { throw ArborError(.invalidFetchRequest, "\(what()): \(key) applies to a to-many relationship", key: key) }
            if key == "@count" {
                guard offset == keys.count - 1 else { throw ArborError(.invalidFetchRequest, "\(what()): nothing can follow @count", key: key) }
                return .value
            }
            let rest = try resolve(keys.dropFirst(offset + 1), from: .entity(path.lastEntity), scope: scope, what: what())
            return key == "@distinctUnionOfObjects" ? rest : .value
        }
    }

    /// Checks that constants compared with an attribute suit its type, and string operators
    /// apply to strings.
    static func checkTypes(_ comparison: ComparisonPredicate, _ left: End, _ right: End, entity: EntityDescription) throws {
        // Runs for every comparison of every fetch: nothing here allocates unless it throws.
        func check(_ attribute: AttributeDescription, against other: ObjectExpression) throws {
            let kind = attribute.type.kind
            let stringOperator = switch comparison.operator {
            case .beginsWith, .endsWith, .like, .matches: true
            default: false
            }
            if stringOperator, kind != .string {
                throw ArborError(.invalidFetchRequest, "\(comparison.operator.rawValue) applies to strings; \(entity.name).\(attribute.name) is \(attribute.type)",
                                 entity: entity.name, key: attribute.name)
            }
            func checkConstants(_ expression: ObjectExpression) throws {
                switch expression {
                case .constant(.list(let values)): for value in values { try checkConstant(value) }
                case .constant(let value): try checkConstant(value)
                case .aggregate(let elements): for element in elements { try checkConstants(element) }
                default: break
                }
            }
            func checkConstant(_ value: PredicateValue) throws {
                guard !suits(value, kind) else { return }
                throw ArborError(.invalidFetchRequest,
                                 "\(entity.name).\(attribute.name) is \(attribute.type); the predicate compares it with \(PredicateFormatter.literal(value)) (\(PredicateFormatter.format(.comparison(comparison))))",
                                 entity: entity.name, key: attribute.name, value: PredicateFormatter.literal(value))
            }
            try checkConstants(other)
        }
        if case .attribute(let attribute) = left { try check(attribute, against: comparison.right) }
        if case .attribute(let attribute) = right { try check(attribute, against: comparison.left) }
    }

    /// Whether a constant can be compared with values of an attribute kind.
    static func suits(_ value: PredicateValue, _ kind: AttributeType.Kind) -> Bool {
        switch value {
        case .null: return true
        case .int, .double, .decimal:
            switch kind {
            case .integer16, .integer32, .integer64, .decimal, .double, .float, .boolean: return true
            default: return false
            }
        case .bool:
            switch kind {
            case .boolean, .integer16, .integer32, .integer64: return true
            default: return false
            }
        case .string: return kind == .string
        case .date: return kind == .date
        case .data: return kind == .binaryData || kind == .transformable
        case .uuid: return kind == .uuid
        case .url: return kind == .uri
        case .objectID: return false
        case .list(let values): return values.allSatisfy { suits($0, kind) }
        }
    }
}
