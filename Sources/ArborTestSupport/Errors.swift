import ArborStore

/// The code of the ``StoreError`` that `body` throws; nil when it returns normally.
/// Any other error is returned as a code named after it, so a test asserting a code fails clearly.
public func storeErrorCode<R>(_ body: () throws -> R) -> StoreError.Code? {
    do {
        _ = try body()
        return nil
    } catch let error as StoreError {
        return error.code
    } catch {
        return StoreError.Code("not a StoreError: \(error)")
    }
}
