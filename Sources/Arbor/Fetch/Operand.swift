import Foundation

/// A row a store hands the predicate evaluator in place of a managed object: a decoded row, or
/// one read in place by a scan. The one way the evaluator reaches rows, so that it names no
/// store type (docs/predicates.md, "Semantics"). Class-bound: an operand holding a row is
/// one reference (no copy of the row, no box), and a store reuses one row object for every row
/// of a fetch.
protocol EvaluatedRow: AnyObject {
    /// The object the row is of (what `SELF` is on the row), when known.
    var objectID: ManagedObjectID? { get }
    /// The value of `key`: an attribute's value, a to-one relationship's destination
    /// (`.objectID`), an ordered to-many relationship's destinations (a collection of IDs), or
    /// `.null`; nil when the row has no such key.
    func operand(forKey key: String) throws -> Operand?
    /// The name of the row's entity, when known (for messages).
    var entityName: String? { get }
}

/// A value while a predicate is evaluated.
enum Operand {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case decimal(Decimal)
    case string(String)
    case date(Date)
    case data(Data)
    case uuid(UUID)
    case url(URL)
    case objectID(ManagedObjectID)
    /// A managed object (evaluation in a context).
    case object(ManagedObject)
    /// A store's row (evaluation inside a store; keys are its attributes and to-one
    /// relationships), reached through ``EvaluatedRow``.
    case row(any EvaluatedRow)
    /// A dictionary (filtering plain values).
    case dictionary([String: Any?])
    case collection([Operand])
    /// Any other Swift value: it equals only itself, has no keys and no order.
    case opaque(AnyHashable?)

    init(_ value: PredicateValue) {
        switch value {
        case .null: self = .null
        case .bool(let b): self = .bool(b)
        case .int(let n): self = .int(n)
        case .double(let d): self = .double(d)
        case .decimal(let d): self = .decimal(d)
        case .string(let s): self = .string(s)
        case .date(let d): self = .date(d)
        case .data(let d): self = .data(d)
        case .uuid(let u): self = .uuid(u)
        case .url(let u): self = .url(u)
        case .objectID(let id): self = .objectID(id)
        case .list(let values): self = .collection(values.map(Operand.init))
        }
    }

    init(_ value: AttributeValue) {
        switch value {
        case .integer(let n): self = .int(n)
        case .decimal(let d): self = .decimal(d)
        case .double(let d): self = .double(d)
        case .float(let f): self = .double(Double(f))
        case .string(let s): self = .string(s)
        case .boolean(let b): self = .bool(b)
        case .date(let d): self = .date(d)
        case .data(let d): self = .data(d)
        case .uuid(let u): self = .uuid(u)
        case .uri(let u): self = .url(u)
        case .transformable(let d): self = .data(d)
        }
    }

    /// Any Swift value (a dictionary's values, a plain value evaluated, a variable's value).
    static func from(_ value: Any?) -> Operand {
        guard let value else { return .null }
        switch value {
        case let object as ManagedObject: return .object(object)
        case let dictionary as [String: Any?]: return .dictionary(dictionary)
        case let dictionary as [String: Any]: return .dictionary(dictionary.mapValues { $0 as Any? })
        case let operand as Operand: return operand
        default: break
        }
        if let converted = try? PredicateValue.from(value) {
            // Collections may hold objects: keep them as objects, not IDs.
            if case .list = converted, let sequence = value as? any Sequence {
                return .collection(ManagedObject.elements(of: sequence).map(from))
            }
            return Operand(converted)
        }
        return .opaque(value as? AnyHashable)
    }

    var isNull: Bool { if case .null = self { true } else { false } }

    var kindName: String {
        switch self {
        case .null: "nil"
        case .bool: "a boolean"
        case .int, .double, .decimal: "a number"
        case .string: "a string"
        case .date: "a date"
        case .data: "data"
        case .uuid: "a UUID"
        case .url: "a URL"
        case .objectID, .object, .row: "an object"
        case .dictionary: "a dictionary"
        case .collection: "a collection"
        case .opaque(let value): value.map { "a \(type(of: $0.base))" } ?? "nil"
        }
    }
}

extension Operand {
    /// The value as Swift sees it (objects as objects, collections as arrays).
    var swiftValue: Any? {
        switch self {
        case .object(let object): object
        case .dictionary(let dictionary): dictionary
        case .collection(let elements): elements.map(\.swiftValue)
        case .opaque(let value): value?.base
        default: sendableValue
        }
    }
}

extension Operand {
    /// The value as a dictionary result holds it (nil for nil): plain values as they are,
    /// objects as their IDs (as Core Data's dictionary results give relationships), collections
    /// as arrays of such values; a value of no kind Arbor knows as its description.
    var sendableValue: (any Sendable)? {
        switch self {
        case .null: nil
        case .bool(let b): b
        case .int(let n): n
        case .double(let d): d
        case .decimal(let d): d
        case .string(let s): s
        case .date(let d): d
        case .data(let d): d
        case .uuid(let u): u
        case .url(let u): u
        case .objectID(let id): id
        case .object(let object): object.objectID
        case .row(let row): row.objectID
        case .dictionary(let dictionary): dictionary.compactMapValues { Operand.from($0).sendableValue }
        case .collection(let elements): elements.compactMap(\.sendableValue)
        case .opaque(let value): value.map { String(describing: $0.base) }
        }
    }
}
