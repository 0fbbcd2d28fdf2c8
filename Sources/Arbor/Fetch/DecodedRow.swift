import Foundation

/// A decoded row as the predicate evaluator reads it (``EvaluatedRow``): one per fetch, given
/// each row in turn (``set(_:id:)``), so that evaluating a row allocates nothing.
final class DecodedRow: EvaluatedRow {
    private(set) var row = StoreRow.placeholder
    private(set) var objectID: ManagedObjectID?

    init() {}

    /// The row `row` of `id` (nil: not known), replacing the one before; the object itself, for
    /// an operand.
    @inline(__always)
    func set(_ row: StoreRow, id: ManagedObjectID?) -> DecodedRow {
        self.row = row
        objectID = id
        return self
    }

    var entityName: String? { row.entityName }

    func operand(forKey key: String) throws -> Operand? {
        guard let slot = row.values.layout.index[key] else { return nil }
        return Self.operand(row.values[slot: slot])
    }

    /// A slot's value as the evaluator reads it.
    @inline(__always)
    static func operand(_ value: PropertyValue?) -> Operand {
        switch value {
        case .attribute(let stored)?: Operand(stored)
        case .object(let id)?: .objectID(id)
        case .objects(let ids)?: .collection(ids.map(Operand.objectID))
        case .none?, nil: .null
        }
    }
}
