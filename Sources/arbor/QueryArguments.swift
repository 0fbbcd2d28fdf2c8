import Arbor
import Foundation

/// The predicate of `arbor query --where FORMAT --arg VALUE…`: the values of `--arg`, text on
/// the command line, become the format's arguments, in order — a key path for each `%K`, and for
/// each `%@` a value of the type of what it is compared with.
///
/// The format is parsed once with a placeholder string in place of every argument; the parsed
/// tree shows which key each placeholder is compared with (`salary > %@`, `%K == %@`,
/// `lastName IN {%@, %@}`, `salary * 2 > %@`), and the model gives that key's type. So `42`
/// becomes an integer for an integer attribute, a decimal for a decimal one, and stays the
/// string "42" for a string attribute. A `%@` compared with nothing the model types (a constant,
/// an expression of constants) is read as an integer, then a floating-point number, else kept as
/// a string.
struct PredicateArguments {
    /// The entity the predicate is evaluated on.
    let entity: EntityDescription
    /// The values of `--arg`, in order.
    let arguments: [String]
    /// The object ID of `entity`'s object with a primary key (for `%@` compared with a to-one
    /// relationship).
    let objectID: (EntityDescription, Int64) -> ManagedObjectID
    /// The object an `x-arbor:` URI names, if any.
    let uriObjectID: (String) -> ManagedObjectID?

    /// What a value must be, from the key it is compared with.
    enum Target {
        /// An attribute's value (of the entity named).
        case attribute(AttributeDescription, entity: String)
        /// An object of the entity (a relationship's destination).
        case object(EntityDescription, relationship: String)
        /// A count (`@count`): an integer.
        case count
    }

    /// A `--arg` value that cannot be what it is compared with.
    struct Unreadable: Error, CustomStringConvertible {
        var description: String
    }

    /// The placeholder standing for argument `index` while the format is parsed (no key or
    /// string of a real predicate holds U+0001).
    static func placeholder(_ index: Int) -> String { "\u{1}arg\(index)\u{1}" }

    /// The argument a placeholder stands for, or nil when `text` is not one.
    func argumentIndex(_ text: String) -> Int? {
        guard text.hasPrefix("\u{1}arg"), text.hasSuffix("\u{1}"), let index = Int(text.dropFirst(4).dropLast()),
              arguments.indices.contains(index) else { return nil }
        return index
    }

    /// The predicate `format` writes with the arguments in place.
    ///
    /// - Throws: ``ArborError`` from the parser (`predicateSyntax`: too few or too many
    ///   arguments, at the offending offset), or ``Unreadable`` naming the value and the key.
    func predicate(_ format: String) throws -> ObjectPredicate {
        let parsed: ObjectPredicate
        do {
            parsed = try ObjectPredicate(format: format, argumentArray: arguments.indices.map { Self.placeholder($0) })
        } catch let error as ArborError {
            // A placeholder the parser could not use was needed as a value while reading: by a
            // %d, %f or %s (which want numbers or a string, not text to be typed later), or by a
            // CAST (which reads its value at once).
            if let index = arguments.indices.first(where: { error.message.contains(Self.placeholder($0)) }) {
                throw Unreadable(description: "--arg \(index + 1) \"\(arguments[index])\" cannot be used there: only %@ and %K take --arg values, and not inside CAST (compare the key with %@ itself: the value is read as the key's type)")
            }
            throw error
        }
        return try substituted(parsed, on: entity, variables: [:])
    }

    // MARK: Walking the tree

    func substituted(_ predicate: ObjectPredicate, on entity: EntityDescription, variables: [String: EntityDescription]) throws -> ObjectPredicate {
        switch predicate {
        case .constant: return predicate
        case .not(let inner): return .not(try substituted(inner, on: entity, variables: variables))
        case .and(let terms): return .and(try terms.map { try substituted($0, on: entity, variables: variables) })
        case .or(let terms): return .or(try terms.map { try substituted($0, on: entity, variables: variables) })
        case .comparison(var comparison):
            let left = try withKeys(comparison.left, on: entity, variables: variables)
            let right = try withKeys(comparison.right, on: entity, variables: variables)
            let leftTarget = target(of: left, on: entity, variables: variables)
            let rightTarget = target(of: right, on: entity, variables: variables)
            comparison.left = try withValues(left, for: rightTarget, on: entity, variables: variables)
            comparison.right = try withValues(right, for: leftTarget, on: entity, variables: variables)
            return .comparison(comparison)
        }
    }

    /// `expression` with each `%K` placeholder replaced by the key path given.
    func withKeys(_ expression: ObjectExpression, on entity: EntityDescription, variables: [String: EntityDescription]) throws -> ObjectExpression {
        func keys(_ path: [String]) -> [String] {
            path.flatMap { key in argumentIndex(key).map { ObjectExpression.keys(of: arguments[$0]) } ?? [key] }
        }
        switch expression {
        case .keyPath(let path): return .keyPath(keys(path))
        case .keyPathOn(let base, let path): return .keyPathOn(try withKeys(base, on: entity, variables: variables), keys(path))
        case .aggregate(let elements): return .aggregate(try elements.map { try withKeys($0, on: entity, variables: variables) })
        case .arithmetic(let op, let a, let b):
            return .arithmetic(op, try withKeys(a, on: entity, variables: variables), try withKeys(b, on: entity, variables: variables))
        case .subquery(let collection, let variable, let predicate):
            let collection = try withKeys(collection, on: entity, variables: variables)
            var inner = variables
            if case .object(let destination, _)? = target(of: collection, on: entity, variables: variables) { inner[variable] = destination }
            return .subquery(collection, variable: variable, try substituted(predicate, on: entity, variables: inner))
        case .constant, .evaluatedObject, .variable: return expression
        }
    }

    /// `expression` with each `%@` placeholder replaced by its value, read as `target` needs.
    func withValues(_ expression: ObjectExpression, for target: Target?, on entity: EntityDescription,
                    variables: [String: EntityDescription]) throws -> ObjectExpression {
        switch expression {
        case .constant(let value): return .constant(try withValues(value, for: target))
        case .aggregate(let elements):
            return .aggregate(try elements.map { try withValues($0, for: target, on: entity, variables: variables) })
        case .arithmetic(let op, let a, let b):
            // Each operand is read as its sibling is typed, else as the whole is compared.
            let aTarget = self.target(of: b, on: entity, variables: variables) ?? target
            let bTarget = self.target(of: a, on: entity, variables: variables) ?? target
            return .arithmetic(op, try withValues(a, for: aTarget, on: entity, variables: variables),
                               try withValues(b, for: bTarget, on: entity, variables: variables))
        case .keyPathOn(let base, let path):
            return .keyPathOn(try withValues(base, for: nil, on: entity, variables: variables), path)
        case .keyPath, .evaluatedObject, .variable, .subquery: return expression
        }
    }

    func withValues(_ value: PredicateValue, for target: Target?) throws -> PredicateValue {
        switch value {
        case .string(let text):
            guard let index = argumentIndex(text) else { return value }
            return try read(arguments[index], number: index + 1, as: target)
        case .list(let values): return .list(try values.map { try withValues($0, for: target) })
        default: return value
        }
    }

    // MARK: Types

    /// What the values compared with `expression` must be: the attribute or relationship its key
    /// path ends at (through to-one and to-many relationships, and `@count`, `@sum.key`…).
    func target(of expression: ObjectExpression, on entity: EntityDescription, variables: [String: EntityDescription]) -> Target? {
        switch expression {
        case .keyPath(let path): return target(of: path, from: entity)
        case .keyPathOn(.variable(let name), let path): return variables[name].flatMap { target(of: path, from: $0) }
        case .keyPathOn(.subquery, let path) where path == ["@count"]: return .count
        case .arithmetic(_, let a, let b):
            return target(of: a, on: entity, variables: variables) ?? target(of: b, on: entity, variables: variables)
        default: return nil
        }
    }

    func target(of path: [String], from start: EntityDescription) -> Target? {
        var entity = start
        var keys = path[...]
        while let key = keys.popFirst() {
            switch key {
            case "@count": return .count
            case "@sum", "@avg", "@min", "@max", "@distinctUnionOfObjects": continue
            default: break
            }
            if let attribute = entity.attributesByName[key] { return keys.isEmpty ? .attribute(attribute, entity: entity.name) : nil }
            guard let relationship = entity.relationshipsByName[key], let destination = relationship.destinationEntity else { return nil }
            if keys.isEmpty { return .object(destination, relationship: relationship.name) }
            entity = destination
        }
        return nil
    }

    /// `text`, argument `number`, as `target` needs it.
    func read(_ text: String, number: Int, as target: Target?) throws -> PredicateValue {
        // Long: one case per kind the argument may need to be: the switch is the table of how
        // `--arg` text is read.
        func unreadable(_ what: String, _ why: String? = nil) -> Unreadable {
            Unreadable(description: "--arg \(number) \"\(text)\" is not \(what)\(why.map { ": \($0)" } ?? "")")
        }
        switch target {
        case nil:
            if let integer = Int64(text) { return .int(integer) }
            if let real = Double(text), real.isFinite { return .double(real) }
            return .string(text)
        case .count?:
            guard let integer = Int64(text) else { throw unreadable("an integer, as a count needs") }
            return .int(integer)
        case .object(let destination, let relationship)?:
            return .objectID(try objectID(text, destination: destination, relationship: relationship, unreadable: unreadable))
        case .attribute(let attribute, let entityName)?:
            let needs = "\(entityName).\(attribute.name) (\(attribute.type))"
            switch attribute.type.kind {
            case .integer16, .integer32, .integer64:
                let range: ClosedRange<Int64> = switch attribute.type.kind {
                case .integer16: Int64(Int16.min)...Int64(Int16.max)
                case .integer32: Int64(Int32.min)...Int64(Int32.max)
                default: Int64.min...Int64.max
                }
                guard let integer = Int64(text), range.contains(integer) else { throw unreadable("an integer \(range), as \(needs) needs") }
                return .int(integer)
            case .decimal:
                guard text.wholeMatch(of: /[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/) != nil,
                      let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else {
                    throw unreadable("a decimal number, as \(needs) needs")
                }
                return .decimal(decimal)
            case .double, .float:
                guard let real = Double(text) else { throw unreadable("a number, as \(needs) needs") }
                return .double(real)
            case .string:
                return .string(text)
            case .boolean:
                switch text.lowercased() {
                case "true", "yes", "1": return .bool(true)
                case "false", "no", "0": return .bool(false)
                default: throw unreadable("a boolean (true, false, yes, no, 1, 0), as \(needs) needs")
                }
            case .date:
                do {
                    return .date(try ISO8601Date.date(from: text))
                } catch {
                    throw unreadable("an ISO-8601 date (\(ISO8601Date.examples)), as \(needs) needs", error.reason)
                }
            case .uuid:
                guard let uuid = UUID(uuidString: text) else { throw unreadable("a UUID, as \(needs) needs") }
                return .uuid(uuid)
            case .uri:
                guard let url = URL(string: text) else { throw unreadable("a URL, as \(needs) needs") }
                return .url(url)
            case .binaryData:
                guard let data = Data(base64Encoded: text) else { throw unreadable("base64 data, as \(needs) needs") }
                return .data(data)
            case .transformable:
                throw unreadable("comparable: \(needs) is transformable, and a predicate cannot hold its values")
            }
        }
    }

    /// An object named as the query prints one (`Department/3`), by its primary key alone (`3`),
    /// or by its URI (`x-arbor://…/Department/p3`).
    func objectID(_ text: String, destination: EntityDescription, relationship: String,
                  unreadable: (String, String?) -> Unreadable) throws -> ManagedObjectID {
        let needs = "an object, as \(relationship) needs (\(destination.name)/KEY, KEY, or an x-arbor: URI)"
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        if parts.count == 1, let key = Int64(text), key > 0 { return objectID(destination, key) }
        if parts.count == 2, let key = Int64(parts[1]), key > 0 {
            guard let entity = destination.selfAndDescendants.first(where: { $0.name == parts[0] }) else {
                throw unreadable(needs, "\(parts[0]) is not \(destination.name) or one of its sub-entities")
            }
            return objectID(entity, key)
        }
        if text.hasPrefix(ManagedObjectID.uriScheme + ":"), let id = uriObjectID(text) { return id }
        throw unreadable(needs, nil)
    }
}

extension ObjectExpression {
    /// The keys of a dotted key path (`department.name`).
    fileprivate static func keys(of path: String) -> [String] {
        path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    }
}
