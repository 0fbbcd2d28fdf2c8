import Foundation

// Safety: An attribute is used unretained through its entity's `attributeInSlot` while the object
// evaluated holds its entity, and the entity its attributes.

/// Expressions: constants, variables, arithmetic, SUBQUERY, key paths and collection operators.
extension PredicateEvaluator {

    func value(of expression: ObjectExpression, on subject: Operand) throws -> Operand {
        switch expression {
        case .constant(let value): return Operand(value)
        case .evaluatedObject: return subject
        case .keyPath(let keys): return try value(of: keys[...], on: subject)
        case .keyPathOn(let base, let keys): return try value(of: keys[...], on: try value(of: base, on: subject))
        case .variable(let name):
            guard let value = variables[name] else {
                throw ArborError(.invalidFetchRequest, "the predicate uses $\(name), and no value was given for it", key: name)
            }
            return value
        case .aggregate(let elements): return .collection(try elements.map { try value(of: $0, on: subject) })
        case .arithmetic(let op, let a, let b):
            return try arithmetic(op, try value(of: a, on: subject), try value(of: b, on: subject))
        case .subquery(let collection, let variable, let predicate):
            let elements: [Operand]
            switch try value(of: collection, on: subject) {
            case .collection(let items): elements = items
            case .null: elements = []
            case let single: elements = [single]
            }
            let saved = variables[variable]
            defer { variables[variable] = saved }
            var kept: [Operand] = []
            for element in elements {
                variables[variable] = element
                if try evaluate(predicate, on: element) { kept.append(element) }
            }
            return .collection(kept)
        }
    }

    func arithmetic(_ op: ObjectExpression.ArithmeticOperator, _ a: Operand, _ b: Operand) throws -> Operand {
        if a.isNull || b.isNull { return .null }
        if case .int(let x) = a, case .int(let y) = b, op != .divide {
            let (result, overflow): (Int64, Bool)
            switch op {
            case .add: (result, overflow) = x.addingReportingOverflow(y)
            case .subtract: (result, overflow) = x.subtractingReportingOverflow(y)
            default: (result, overflow) = x.multipliedReportingOverflow(by: y)
            }
            if !overflow { return .int(result) }
        }
        if Self.isDecimal(a) || Self.isDecimal(b), let x = Self.decimal(a), let y = Self.decimal(b) {
            return .decimal(Self.apply(op, x, y))
        }
        guard let x = Self.double(a), let y = Self.double(b), !Self.isBool(a), !Self.isBool(b) else {
            throw ArborError(.wrongValueType, "\(op.rawValue) needs numbers; \(a.kindName) and \(b.kindName) given")
        }
        return .double(Self.apply(op, x, y))
    }

    static func isBool(_ value: Operand) -> Bool { if case .bool = value { true } else { false } }
    static func isDecimal(_ value: Operand) -> Bool { if case .decimal = value { true } else { false } }

    static func decimal(_ value: Operand) -> Decimal? {
        switch value {
        case .int(let n): Decimal(n)
        case .decimal(let d): d
        case .double(let d): d.isFinite && d.magnitude < 1e38 && (d == 0 || d.magnitude > 1e-38) ? Decimal(d) : nil
        default: nil
        }
    }

    static func apply<T: FloatingPoint>(_ op: ObjectExpression.ArithmeticOperator, _ x: T, _ y: T) -> T {
        switch op {
        case .add: x + y
        case .subtract: x - y
        case .multiply: x * y
        case .divide: x / y
        }
    }

    static func apply(_ op: ObjectExpression.ArithmeticOperator, _ x: Decimal, _ y: Decimal) -> Decimal {
        switch op {
        case .add: x + y
        case .subtract: x - y
        case .multiply: x * y
        case .divide: x / y
        }
    }

    // MARK: Key paths

    /// The value of a key path on a value: through objects, rows, dictionaries and collections
    /// (a key on a collection gives the collection of its elements' values, flattened), with the
    /// collection operators.
    func value(of keys: ArraySlice<String>, on root: Operand) throws -> Operand {
        guard let key = keys.first else { return root }
        let rest = keys.dropFirst()
        if key.hasPrefix("@") { return try collectionOperator(key, rest, on: root) }
        switch root {
        case .null:
            return .null
        case .object(let object):
            // `relationship.@count` counts the IDs the object holds, without resolving each
            // (the collection would have as many elements): a key path read per row stays linear.
            if rest.count == 1, rest.first == "@count", let relationship = object.entity.relationshipsByName[key], relationship.isToMany {
                try object.fireFault()
                try object.loadRelationship(key)
                return .int(Int64(object.values[key]?.objectIDs.count ?? 0))
            }
            return try value(of: rest, on: try value(of: key, on: object))
        case .objectID(let id):
            guard let object = context?.resolve(id) else {
                throw ArborError(.unknownKey, "\"\(key)\" cannot be read from \(id) outside its context", key: key, objectID: id)
            }
            return try value(of: rest, on: try value(of: key, on: object))
        case .row(let row):
            guard let result = try row.operand(forKey: key) else {
                throw ArborError(.unknownKey, "\(row.entityName ?? "the row") has no key \"\(key)\"", entity: row.entityName, key: key)
            }
            return try value(of: rest, on: result)
        case .dictionary(let dictionary):
            guard let entry = dictionary[key] else { return try value(of: rest, on: .null) }
            return try value(of: rest, on: Operand.from(entry))
        case .collection(let elements):
            var flat: [Operand] = []
            for element in elements {
                let result = try value(of: keys, on: element)
                // Nils stay (as in SQL, `ANY employees.name == nil` finds an unnamed one).
                if case .collection(let inner) = result { flat.append(contentsOf: inner) } else { flat.append(result) }
            }
            return .collection(flat)
        default:
            throw ArborError(.unknownKey, "\"\(key)\" cannot follow \(root.kindName): only objects, dictionaries and collections have keys", key: key)
        }
    }

    /// A property of a managed object, read without boxing attribute values.
    func value(of key: String, on object: ManagedObject) throws -> Operand {
        let entity = object.entity
        guard let slot = entity.propertyLayout.index[key] else { throw object.unknownKey(key) }
        if let attribute = entity.attributeInSlot[slot] {
            if attribute._withUnsafeGuaranteedRef({ !$0.isTransient }) { try object.fireFault() }
            // A transformable value is its encoding (as in the store: equality and nil tests).
            guard case .attribute(let stored)? = object.values[slot: slot] else { return .null }
            return Operand(stored)
        }
        try object.fireFault()
        try object.loadRelationship(key)
        let objectContext = object.managedObjectContext
        if context == nil { context = objectContext }
        switch object.values[slot: slot] {
        case .object(let id)?: return objectContext?.resolve(id).map(Operand.object) ?? .objectID(id)
        case .objects(let ids)?: return .collection(ids.map { objectContext?.resolve($0).map(Operand.object) ?? .objectID($0) })
        default: return .null
        }
    }

    /// `@count`, `@sum`, `@avg`, `@min`, `@max`, `@distinctUnionOfObjects` on the collection
    /// `root`, with the rest of the key path applied to each element first (``CollectionOperator``,
    /// under a predicate's rules). After `@count` the rest applies to the count.
    func collectionOperator(_ name: String, _ rest: ArraySlice<String>, on root: Operand) throws -> Operand {
        let operation = try CollectionOperator(named: name)
        let elements: [Operand]
        switch root {
        case .collection(let items): elements = items
        case .null: elements = []
        default: elements = [root]
        }
        if operation == .count { return try value(of: rest, on: .int(Int64(elements.count))) }
        return try apply(operation, to: try elements.map { try value(of: rest, on: $0) }.filter { !$0.isNull })
    }

    /// `operation` applied to `values` (nils left out), under a predicate's rules.
    func apply(_ operation: CollectionOperator, to values: [Operand]) throws -> Operand {
        switch try operation.apply(to: values, rules: .predicate) {
        case .value(let result): return result
        case .element(let position): return position.map { values[$0] } ?? .null
        case .elements(let positions): return .collection(positions.map { values[$0] })
        }
    }
}
