import Foundation

/// Evaluates key paths on managed objects for `value(forKeyPath:)`, with Core Data's collection
/// operators (``CollectionOperator``, the predicates' own, under key-value coding's rules).
///
/// Where key-value coding's rules differ from a predicate's, they are stated here: a key through
/// a to-many relationship gives the distinct values of its destinations (an unordered
/// relationship is a set), nils left out, where a predicate keeps every element's value, nils
/// included (`ANY employees.name == nil`); `@distinctUnionOfObjects` tells objects apart by
/// identity and values by kind and value (``CollectionOperator/Rules/keyValueCoding``); the key
/// path after `@count` is ignored, as Foundation ignores it; `@min` and `@max` give the element
/// itself, in its own type (a predicate compares it as a number or a string).
enum KeyPathEvaluator {
    /// The most keys a key path may have (evaluating one recurses once per key: a path of a
    /// hundred thousand `manager.manager…` keys over a cycle would exhaust the stack). Key paths
    /// in predicates, sort descriptors, `value(forKeyPath:)` and `setValue(_:forKeyPath:)` are
    /// checked against it.
    static let maximumKeys = 100

    /// The keys of `keyPath`, split at dots: the one place a key path is split (empty keys
    /// kept, so that a malformed path fails on its empty key, not silently).
    static func components(of keyPath: String) -> [String] {
        // Split over the UTF-8 bytes (a dot is one byte, never inside another scalar): the
        // generic `split` and a `String` per `Substring` allocate per key on the hot path of
        // every key-path read.
        var keys: [String] = []
        let utf8 = keyPath.utf8
        var start = utf8.startIndex
        var index = start
        while index != utf8.endIndex {
            if utf8[index] == UInt8(ascii: ".") {
                keys.append(String(keyPath[start..<index]))
                start = utf8.index(after: index)
            }
            index = utf8.index(after: index)
        }
        keys.append(String(keyPath[start..<utf8.endIndex]))
        return keys
    }

    /// The keys of `keyPath` (``components(of:)``), at most ``maximumKeys`` of them.
    ///
    /// - Throws: ``ArborError/Code/unknownKey`` for a path of more than ``maximumKeys`` keys.
    static func keys(of keyPath: String) throws -> [String] {
        let keys = components(of: keyPath)
        guard keys.count <= maximumKeys else {
            throw ArborError(.unknownKey, "a key path has \(keys.count) keys, more than the \(maximumKeys) allowed", key: String(keyPath.prefix(80)))
        }
        return keys
    }

    /// The value of `path` on `root` (an object, a collection of values, or nil).
    static func evaluate(_ path: ArraySlice<String>, on root: Any?) throws -> Any? {
        guard let key = path.first else { return root }
        let rest = path.dropFirst()
        if key.hasPrefix("@") {
            let operation = try CollectionOperator(named: key)
            let elements = root.map { self.elements(of: $0) ?? [$0] } ?? []
            if operation == .count { return elements.count }
            try loadRows(of: elements, reading: rest)
            let values = try elements.map { try evaluate(rest, on: $0) }.compactMap { $0 }
            return try aggregate(operation, values)
        }
        if let object = root as? ManagedObject { return try evaluate(path, onObject: object) }
        guard !key.isEmpty else {
            throw ArborError(.unknownKey, "a key path has an empty key", key: key)
        }
        guard let root else { return nil }
        // Through a collection: the path continues on every element; the results are flattened.
        // A key after a plain value (`name.count`) names nothing.
        guard let items = elements(of: root) else {
            throw ArborError(.unknownKey, "\"\(key)\" cannot follow a \(type(of: root)) value: only objects and collections have keys", key: key)
        }
        try loadRows(of: items, reading: path)
        var flat: [Any] = []
        for item in items {
            guard let result = try evaluate(path, on: item) else { continue }
            flat.append(contentsOf: elements(of: result) ?? [result])
        }
        if root is [Any] { return flat }
        return try distinct(flat)
    }

    /// ``evaluate(_:on:)`` from an object: to-one hops followed object to object (no value boxed
    /// and cast back per hop), until the path ends, meets an operator or leaves the objects.
    private static func evaluate(_ path: ArraySlice<String>, onObject root: ManagedObject) throws -> Any? {
        var object = root
        var path = path
        while let key = path.first, !key.hasPrefix("@") {
            guard !key.isEmpty else {
                throw ArborError(.unknownKey, "a key path has an empty key", key: key)
            }
            let rest = path.dropFirst()
            guard let next = rest.first else { return try object.value(forKey: key) }
            // `employees.@sum.salary` on an unloaded to-many: from the store's rows, when they
            // tell what the objects would (ManagedObjectContext.aggregateFromRows).
            if next.hasPrefix("@"), let operation = CollectionOperator(rawValue: next), operation != .distinctUnionOfObjects,
               rest.count == (operation == .count ? 1 : 2), let context = object.managedObjectContext,
               let relationship = object.entity.relationshipsByName[key], relationship.isToMany,
               let answer = try context.aggregateFromRows(of: object, through: relationship, operation, rest.dropFirst().first) {
                return answer
            }
            switch try object.relationshipValue(forKey: key) {
            case .toOne(let destination?)?:
                object = destination
                path = rest
            case .toOne(nil)?:
                return try evaluate(rest, on: nil)
            case .other(let value)?:
                return try evaluate(rest, on: value)
            case nil:
                return try evaluate(rest, on: try object.value(forKey: key))
            }
        }
        return try evaluate(path, on: object)
    }

    /// Reads the rows of the faults among `elements` in one batch before `path` is read on each
    /// (`employees.@sum.salary` fired every employee one read at a time).
    static func loadRows(of elements: [Any], reading path: ArraySlice<String>) throws {
        guard !path.isEmpty, elements.count > 1 else { return }
        let objects = elements.compactMap { $0 as? ManagedObject }
        guard objects.count > 1, let context = objects[0].managedObjectContext else { return }
        try context.loadRows(of: objects.filter { $0.managedObjectContext === context })
    }

    /// `values` without repeats, in first-seen order, as `@distinctUnionOfObjects` gives them
    /// under key-value coding's rules: managed objects by identity, other values by kind and
    /// value.
    static func distinct(_ values: [Any]) throws -> [Any] {
        try aggregate(.distinctUnionOfObjects, values) as? [Any] ?? values
    }

    /// The elements of a collection value (a to-many relationship's objects, or values gathered
    /// through one); nil for a single value.
    static func elements(of value: Any) -> [Any]? {
        switch value {
        case let set as Set<ManagedObject>: Array(set)
        case let set as Set<AnyHashable>: Array(set)
        case let array as [Any]: array
        default: nil
        }
    }

    /// `operation` over `values` (nils left out), under key-value coding's rules: `@min`,
    /// `@max` and `@distinctUnionOfObjects` give elements themselves, in their own types.
    static func aggregate(_ operation: CollectionOperator, _ values: [Any]) throws -> Any? {
        try aggregate(operation, values.map(Operand.from)) { values[$0] }
    }

    /// `operation` over an attribute's stored values, by the rules of ``aggregate(_:_:)`` over
    /// their Swift values — without making each a Swift value first (an element is given back
    /// in the attribute's own type, as there).
    static func aggregate(_ operation: CollectionOperator, stored: [AttributeValue], of type: AttributeType) throws -> Any? {
        // A transformable's Swift value is what it decodes to: the general way.
        if type.kind == .transformable { return try aggregate(operation, stored.map(type.swiftValue(of:))) }
        return try aggregate(operation, stored.map(Operand.init)) { type.swiftValue(of: stored[$0]) }
    }

    /// `operation` over `operands` under key-value coding's rules; an element the operator
    /// picks is given back as `element` makes it from its position.
    private static func aggregate(_ operation: CollectionOperator, _ operands: [Operand], element: (Int) -> Any) throws -> Any? {
        switch try operation.apply(to: operands, rules: .keyValueCoding) {
        case .value(let result): return result.swiftValue
        case .element(let position): return position.map(element)
        case .elements(let positions): return positions.map(element)
        }
    }
}
