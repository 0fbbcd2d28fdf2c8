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
        let stores = coordinator.persistentStores.compactMap { $0 as? NativeStore }.filter(\.tracksHistory)
        switch request.operation {
        case .fetch(let bound):
            let evaluator = PredicateEvaluator()
            let subject = HistoryTransactionRow()
            var found: [PersistentHistoryTransaction] = []
            for store in stores {
                var after: Int64 = 0
                var date: Date?
                var named = false
                switch bound {
                case .token(let token):
                    // A token that does not name this store (another store's transaction's) reads it from the start.
                    if let number = token?.transactionNumbers[store.identifier] {
                        after = number
                        named = true
                    }
                case .date(let moment): date = moment
                }
                found += try store.fetchHistory(after: after, token: named, date: date, changes: request.resultType == .transactionsAndChanges) { transaction in
                    guard let predicate = request.predicate else { return true }
                    subject.transaction = transaction
                    return try evaluator.evaluate(predicate, on: .row(subject))
                }
            }
            if stores.count > 1 {
                found.sort { ($0.timestamp, $0.storeID.uuidString, $0.transactionNumber) < ($1.timestamp, $1.storeID.uuidString, $1.transactionNumber) }
            }
            return PersistentHistoryResult(resultType: request.resultType, count: found.count, transactions: found)
        case .delete(let bound):
            var deleted = 0
            for store in stores {
                // The history a pinned context of the coordinator reads stays.
                let keeping = coordinator.oldestPinnedGeneration(in: store.identifier)
                switch bound {
                case .token(let token?): deleted += try store.deleteHistory(before: token.transactionNumber(in: store.identifier), date: nil, keeping: keeping)
                case .token(nil): deleted += try store.deleteHistory(before: nil, date: nil, keeping: keeping)
                case .date(let moment): deleted += try store.deleteHistory(before: nil, date: moment, keeping: keeping)
                }
            }
            coordinator.logger.debug("deleted \(deleted) transactions of persistent history", metadata: name.map { ["arbor.context": .string($0)] } ?? [:])
            return PersistentHistoryResult(resultType: request.resultType, count: deleted, transactions: nil)
        }
    }
}

extension PersistentStoreCoordinator {
    /// The token covering every transaction recorded so far in `stores` (nil: every store of
    /// the coordinator) that record persistent history; nil when none does (Core Data's
    /// `currentPersistentHistoryToken(fromStores:)`).
    ///
    /// - Throws: ``ArborError/Code/store`` for damaged history records.
    public func currentPersistentHistoryToken(fromStores stores: [any PersistentStore]? = nil) throws -> PersistentHistoryToken? {
        let tracking = (stores ?? persistentStores).compactMap { $0 as? NativeStore }.filter(\.tracksHistory)
        guard !tracking.isEmpty else { return nil }
        var numbers: [UUID: Int64] = [:]
        for store in tracking { numbers[store.identifier] = try store.lastHistoryTransaction() }
        return PersistentHistoryToken(transactionNumbers: numbers)
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
