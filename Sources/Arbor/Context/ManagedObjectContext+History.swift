import Foundation
import Logging

/// Persistent history: reading and trimming what the stores record (docs/history.md; issue 28,
/// item 2).
extension ManagedObjectContext {
    /// Fetches or deletes persistent history in the coordinator's stores that record it (Core
    /// Data's `execute(_:)` with an `NSPersistentHistoryChangeRequest`). Stores that record no
    /// history contribute nothing.
    ///
    /// - Returns: for a fetch, the transactions after the request's token or date that its
    ///   predicate accepts, oldest first; for a deletion, how many transactions went — as much
    ///   as the request's ``PersistentHistoryChangeRequest/resultType`` asks for.
    /// - Throws: ``ArborError/Code/persistentHistoryTokenExpired`` when a fetch names a token
    ///   whose store has deleted history after it; ``ArborError/Code/unknownKey`` for a
    ///   predicate naming something a transaction does not have; ``ArborError/Code/store`` for damaged history records;
    ///   ``ArborError/Code/storeSave`` when a deletion cannot be written.
    public func execute(_ request: PersistentHistoryChangeRequest) throws -> PersistentHistoryResult {
        checkQueue()
        let coordinator = try requireCoordinator("read persistent history in")
        switch request.operation {
        case .fetch(let bound):
            let evaluator = PredicateEvaluator()
            let subject = HistoryTransactionRow()
            let found = try coordinator.fetchHistory(after: bound, changes: request.resultType == .transactionsAndChanges) { transaction in
                guard let predicate = request.predicate else { return true }
                subject.transaction = transaction
                return try evaluator.evaluate(predicate, on: .row(subject))
            }
            return PersistentHistoryResult(resultType: request.resultType, count: found.count, transactions: found)
        case .delete(let bound):
            // The history a pinned context of the coordinator reads stays.
            let deleted = try coordinator.deleteHistory(before: bound)
            coordinator.logger.debug("deleted \(deleted) transactions of persistent history", metadata: name.map { ["arbor.context": .string($0)] } ?? [:])
            return PersistentHistoryResult(resultType: request.resultType, count: deleted, transactions: nil)
        }
    }
}

/// A transaction as a history request's predicate reads it (``EvaluatedRow``).
final class HistoryTransactionRow: EvaluatedRow {
    var transaction: PersistentHistoryTransaction?

    var objectID: ManagedObjectID? { nil }
    var entityName: String? { "PersistentHistoryTransaction" }

    func operand(forKey key: String) throws -> Operand? {
        guard let transaction else { return nil }
        switch key {
        case "author": return transaction.author.map(Operand.string) ?? .null
        case "contextName": return transaction.contextName.map(Operand.string) ?? .null
        case "timestamp": return .date(transaction.timestamp)
        case "processID": return .int(Int64(transaction.processID))
        case "processName", "bundleID": return .string(transaction.processName)
        case "kind": return .string(transaction.kind.rawValue)
        case "transactionNumber": return .int(transaction.transactionNumber)
        case "changeCount": return .int(Int64(transaction.changeCount))
        default: return nil
        }
    }
}
