import ArborStore
import Foundation

/// An error thrown by the object graph.
///
/// One type for every failure of the object graph, with a ``Code`` whose meanings — and numbers —
/// follow Core Data's (`NSValidationMissingMandatoryPropertyError` is
/// ``Code/validationMissingMandatoryProperty`` with ``Code/number`` 1570, and so on), a message
/// saying what failed, and where they apply the object, key and value involved, the errors it
/// gathers (``detailedErrors``, for several validation failures at once) and the engine error
/// underneath (``storeError``).
///
/// ```swift
/// do {
///     try context.save()
/// } catch ArborError.validationMultipleErrors {
///     ...
/// } catch let error as ArborError where error.code.isValidation {
///     print(error.key ?? "", error.message)
/// }
/// ```
public struct ArborError: Error, Sendable, CustomStringConvertible, LocalizedError {
    /// The kind of failure: a stable name and Core Data's error number where Core Data has one.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's stable name, as printed.
        public let name: String
        /// Core Data's number for the same failure (`NSCoreDataError` and friends), or 0.
        public let number: Int

        /// Creates a code.
        public init(_ name: String, _ number: Int) {
            self.name = name
            self.number = number
        }

        public var description: String { name }

        /// Lets `catch ArborError.invalidModel` match an `ArborError` by its code.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? ArborError)?.code == code
        }

        /// Whether the code is one of the validation failures (1550…1680).
        public var isValidation: Bool { (1550...1680).contains(number) }

        // Validation (Core Data's numbers).

        /// A managed object failed validation for a reason of its own (`validateForInsert` and
        /// friends).
        public static let managedObjectValidation = Code("managedObjectValidation", 1550)
        /// Several validation failures: ``ArborError/detailedErrors`` holds each.
        public static let validationMultipleErrors = Code("validationMultipleErrors", 1560)
        /// A required attribute or to-one relationship has no value.
        public static let validationMissingMandatoryProperty = Code("validationMissingMandatoryProperty", 1570)
        /// A to-many relationship has fewer objects than its minimum count.
        public static let validationRelationshipLacksMinimumCount = Code("validationRelationshipLacksMinimumCount", 1580)
        /// A to-many relationship has more objects than its maximum count.
        public static let validationRelationshipExceedsMaximumCount = Code("validationRelationshipExceedsMaximumCount", 1590)
        /// A relationship with the deny delete rule still points at objects.
        public static let validationRelationshipDeniedDelete = Code("validationRelationshipDeniedDelete", 1600)
        /// A number is above its maximum (or does not fit its integer type).
        public static let validationNumberTooLarge = Code("validationNumberTooLarge", 1610)
        /// A number is below its minimum (or does not fit its integer type).
        public static let validationNumberTooSmall = Code("validationNumberTooSmall", 1620)
        /// A date is after its maximum.
        public static let validationDateTooLate = Code("validationDateTooLate", 1630)
        /// A date is before its minimum.
        public static let validationDateTooSoon = Code("validationDateTooSoon", 1640)
        /// A string (or binary data) is longer than its maximum length.
        public static let validationStringTooLong = Code("validationStringTooLong", 1660)
        /// A string (or binary data) is shorter than its minimum length.
        public static let validationStringTooShort = Code("validationStringTooShort", 1670)
        /// A string does not match its attribute's regular expression.
        public static let validationStringPatternMatching = Code("validationStringPatternMatching", 1680)

        // Objects and contexts.

        /// The object can no longer load what it does not hold, or be changed: its context was
        /// reset or has ended (``ManagedObject/inaccessibility``; Core Data's
        /// `NSObjectInaccessibleException`, which has no number). Keep the object's ID and get
        /// the object again from a live context.
        public static let objectInaccessible = Code("objectInaccessible", 0)
        /// The object's row does not exist (a fault for a deleted or never-saved row fired, or
        /// `existingObject(with:)` found nothing) — Core Data's `NSManagedObjectReferentialIntegrityError`.
        public static let objectNotFound = Code("objectNotFound", 133000)
        /// Optimistic locking failed: another context changed or deleted what this save changes
        /// (`NSManagedObjectMergeError`).
        public static let mergeConflict = Code("mergeConflict", 133020)
        /// A uniqueness constraint would be violated (`NSManagedObjectConstraintMergeError`).
        public static let constraintConflict = Code("constraintConflict", 133021)
        /// A value's type does not match its attribute's (Core Data raises an exception; Arbor
        /// throws).
        public static let wrongValueType = Code("wrongValueType", 134000)
        /// The key names no property of the object's entity (KVC's "not key-value coding
        /// compliant").
        public static let unknownKey = Code("unknownKey", 134001)
        /// An abstract entity cannot be instantiated.
        public static let abstractEntity = Code("abstractEntity", 134002)
        /// The model has no entity of the name given (Core Data raises an exception instead, so
        /// there is no number).
        public static let unknownEntity = Code("unknownEntity", 0)
        /// A call that is not valid in the current state (an object of another context, a
        /// context without a coordinator, a destroyed object).
        public static let misuse = Code("misuse", 134003)

        // Models and stores.

        /// The model is inconsistent; the message lists every problem.
        public static let invalidModel = Code("invalidModel", 134010)
        /// The store was made with a model whose version hashes differ
        /// (`NSPersistentStoreIncompatibleVersionHashError`).
        public static let incompatibleModel = Code("incompatibleModel", 134100)
        /// A migration stage failed (a custom stage threw, or its result did not validate;
        /// `NSMigrationError`): the store is as it was; ``ArborError/detailedErrors`` holds the
        /// stage's error when it was an ``ArborError``.
        public static let migrationFailed = Code("migrationFailed", 134110)
        /// An object ID or URI does not belong to any store of the coordinator.
        public static let invalidObjectID = Code("invalidObjectID", 134060)
        /// The store failed to open (`NSPersistentStoreOpenError`); ``ArborError/storeError`` says why.
        public static let storeOpen = Code("storeOpen", 134080)
        /// A persistent history request named a token older than the history the store still
        /// holds: transactions after it were deleted (Core Data's
        /// `NSPersistentHistoryTokenExpiredError`). Fetch from the start instead, and rebuild
        /// what the token stood for.
        public static let persistentHistoryTokenExpired = Code("persistentHistoryTokenExpired", 134301)
        /// The store failed to save (`NSPersistentStoreSaveError`); ``ArborError/storeError`` says why.
        public static let storeSave = Code("storeSave", 134030)
        /// Any other failure of a store; ``ArborError/storeError`` says why.
        public static let store = Code("store", 134070)
        /// A request the store cannot carry out: it lacks the capability (persistent history,
        /// batch requests, grouping in the store, …) the request needs
        /// (`NSPersistentStoreUnsupportedRequestTypeError`). The message names the store and the
        /// request.
        public static let unsupported = Code("unsupported", 134091)

        // Fetching.

        /// A predicate format string is malformed; ``ArborError/position`` says where (Core Data
        /// raises an exception instead, so there is no number).
        public static let predicateSyntax = Code("predicateSyntax", 0)
        /// A fetch request cannot be run: an unknown entity, an unknown key in its predicate,
        /// sort descriptors or properties, or a value compared with an attribute of another type.
        public static let invalidFetchRequest = Code("invalidFetchRequest", 0)
    }

    /// What kind of failure this is.
    public var code: Code
    /// What failed and, where it helps, what to do about it.
    public var message: String
    /// The object involved, when there is one.
    public var objectID: ManagedObjectID?
    /// The entity involved, when there is one.
    public var entityName: String?
    /// The property involved, when there is one.
    public var key: String?
    /// A description of the value involved, when there is one.
    public var value: String?
    /// The individual failures, for ``Code/validationMultipleErrors`` (and save failures that
    /// gather several).
    public var detailedErrors: [ArborError] = []
    /// The engine's error underneath, for store failures.
    public var storeError: StoreError?
    /// For ``Code/mergeConflict``: the optimistic-locking conflicts the save found (the error
    /// merge policy's failure), to examine before choosing another policy.
    public var conflicts: [MergeConflict] = []
    /// For ``Code/constraintConflict``: the uniqueness conflicts the save found.
    public var constraintConflicts: [ConstraintConflict] = []
    /// For ``Code/incompatibleModel`` when a migration would drop data no plan allows: every
    /// loss it would cause (``MigrationLoss/isAllowed`` says which a stage allowed).
    public var migrationLosses: [MigrationLoss] = []
    /// For ``Code/predicateSyntax``: the offset (from 0, in Unicode scalars) in the format string where
    /// the problem is.
    public var position: Int?

    /// Creates an error.
    public init(_ code: Code, _ message: String, entity: String? = nil, key: String? = nil, value: String? = nil,
                objectID: ManagedObjectID? = nil, detailedErrors: [ArborError] = [], storeError: StoreError? = nil) {
        self.code = code
        self.message = message
        self.entityName = entity
        self.key = key
        self.value = value
        self.objectID = objectID
        self.detailedErrors = detailedErrors
        self.storeError = storeError
    }

    /// Several failures as one: the single failure itself when there is one, else
    /// ``Code/validationMultipleErrors`` carrying them all.
    public static func gathering(_ errors: [ArborError]) -> ArborError? {
        guard let first = errors.first else { return nil }
        if errors.count == 1 { return first }
        return ArborError(.validationMultipleErrors,
                          "\(errors.count) validation failures: " + errors.map(\.message).joined(separator: "; "),
                          detailedErrors: errors)
    }

    /// The code, its number and the message, with the engine's error when there is one:
    /// `mergeConflict (133020): … [busy: …]`.
    public var description: String {
        var text = "\(code) (\(code.number)): \(message)"
        if let storeError { text += " [\(storeError)]" }
        return text
    }

    /// The message (Foundation's `localizedDescription` of the error).
    public var errorDescription: String? { message }

    /// The engine's error underneath, when there is one.
    public var failureReason: String? { storeError?.description }

    /// A list of `items` for a message: the first few in full, then how many there are in all
    /// (`a, b, c and 97 more objects`), so that a message stays one readable line.
    static func listing(_ items: [String], of count: Int, noun: String, shown: Int = 3) -> String {
        guard count > shown else { return items.prefix(shown).joined(separator: ", ") }
        return items.prefix(shown).joined(separator: ", ") + " and \(count - shown) more \(noun)s (\(count) in all)"
    }
}

extension ArborError {
    /// Lets `catch ArborError.invalidModel` match by code.
    public static var invalidModel: Code { .invalidModel }
    /// Lets `catch ArborError.incompatibleModel` match by code.
    public static var incompatibleModel: Code { .incompatibleModel }
    /// Lets `catch ArborError.wrongValueType` match by code.
    public static var wrongValueType: Code { .wrongValueType }
    /// Lets `catch ArborError.unknownKey` match by code.
    public static var unknownKey: Code { .unknownKey }
    /// Lets `catch ArborError.validationMultipleErrors` match by code.
    public static var validationMultipleErrors: Code { .validationMultipleErrors }
    /// Lets `catch ArborError.objectNotFound` match by code.
    public static var objectNotFound: Code { .objectNotFound }
    /// Lets `catch ArborError.constraintConflict` match by code.
    public static var constraintConflict: Code { .constraintConflict }
    /// Lets `catch ArborError.mergeConflict` match by code.
    public static var mergeConflict: Code { .mergeConflict }
    /// Lets `catch ArborError.predicateSyntax` match by code.
    public static var predicateSyntax: Code { .predicateSyntax }
    /// Lets `catch ArborError.invalidFetchRequest` match by code.
    public static var invalidFetchRequest: Code { .invalidFetchRequest }
}
