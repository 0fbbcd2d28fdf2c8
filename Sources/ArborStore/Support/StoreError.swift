import Foundation
import SystemPackage
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An error thrown by the storage engine.
///
/// Every failure the engine reports is a `StoreError`: a ``Code`` saying what kind of failure it
/// is, a message saying what failed and what to do about it, and, where there is one, the
/// operating-system error underneath and the page involved.
///
/// Match on the code:
///
/// ```swift
/// do {
///     try store.write { ... }
/// } catch StoreError.busy {
///     // another connection holds the write lock; try again later
/// } catch let error as StoreError where error.code == .corrupt {
///     print(error.page ?? 0, error.message)
/// }
/// ```
public struct StoreError: Error, Sendable, CustomStringConvertible, LocalizedError {
    /// The kind of failure. An extensible set of values: new codes may be added in later versions.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's stable name, as printed.
        public let name: String

        /// Creates a code with a stable name.
        public init(_ name: String) { self.name = name }

        public var description: String { name }

        /// Lets `catch StoreError.busy` match a `StoreError` by its code.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? StoreError)?.code == code
        }

        /// The operating system reported an I/O failure (EIO and friends).
        public static let ioError = Code("ioError")
        /// The disk or the file system is full (ENOSPC, EDQUOT, EFBIG).
        public static let full = Code("full")
        /// A page or structure in the file failed validation: a checksum mismatch, a number out of
        /// range, an impossible layout. The message names the page.
        public static let corrupt = Code("corrupt")
        /// The file is not an Arbor database: wrong magic, or too short to hold a header.
        public static let notADatabase = Code("notADatabase")
        /// The file was written by a newer format version this build cannot read (or write).
        public static let unsupportedVersion = Code("unsupportedVersion")
        /// The lock needed was held by another connection for longer than the busy timeout.
        public static let busy = Code("busy")
        /// An earlier failure made this handle unusable (a failed sync: the kernel may have dropped
        /// written pages). Close it and open the file again; opening recovers the file.
        public static let poisoned = Code("poisoned")
        /// The operation writes, but the handle was opened read-only.
        public static let readOnly = Code("readOnly")
        /// The file does not exist (and was not to be created).
        public static let notFound = Code("notFound")
        /// An argument is out of range: a page size that is not a power of two, a page number past
        /// the end of the file, a key that is too long.
        public static let invalidArgument = Code("invalidArgument")
        /// The call is not valid in the current state: writing inside a read transaction,
        /// committing with no transaction open.
        public static let misuse = Code("misuse")
        /// The operating system refused access (EACCES, EPERM, EROFS).
        public static let permissionDenied = Code("permissionDenied")
    }

    /// What kind of failure this is.
    public var code: Code
    /// What failed and, where it helps, what to do about it.
    public var message: String
    /// The operating-system error underneath, when there is one.
    public var errno: Errno?
    /// The page involved, when the failure concerns one page.
    public var page: UInt32?
    /// The path of the file involved, when known.
    public var path: String?

    /// Creates an error.
    public init(_ code: Code, _ message: String, errno: Errno? = nil, page: UInt32? = nil, path: String? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
        self.page = page
        self.path = path
    }

    /// The code and the message, with the file and the operating-system error when known:
    /// `busy: … [/path/to/file] (Resource temporarily unavailable)`.
    public var description: String {
        var text = "\(code): \(message)"
        if let path { text += " [\(path)]" }
        if let errno { text += " (\(errno))" }
        return text
    }

    /// The message, with the file when known (Foundation's `localizedDescription` of the error).
    public var errorDescription: String? { path.map { "\(message) [\($0)]" } ?? message }

    /// The operating-system error underneath, when there is one.
    public var failureReason: String? { errno.map { "\($0)" } }


    /// The I/O failure code.
    public static var ioError: Code { .ioError }
    /// The disk-full code.
    public static var full: Code { .full }
    /// The corruption code.
    public static var corrupt: Code { .corrupt }
    /// The not-a-database code.
    public static var notADatabase: Code { .notADatabase }
    /// The unsupported-version code.
    public static var unsupportedVersion: Code { .unsupportedVersion }
    /// The busy code.
    public static var busy: Code { .busy }
    /// The poisoned-handle code.
    public static var poisoned: Code { .poisoned }
    /// The read-only code.
    public static var readOnly: Code { .readOnly }
    /// The not-found code.
    public static var notFound: Code { .notFound }
    /// The invalid-argument code.
    public static var invalidArgument: Code { .invalidArgument }
    /// The misuse code.
    public static var misuse: Code { .misuse }
    /// The permission-denied code.
    public static var permissionDenied: Code { .permissionDenied }

    /// Maps an operating-system error from `operation` on `path` to a store error.
    static func system(_ errno: Errno, _ operation: String, path: String?) -> StoreError {
        let code: Code
        switch errno {
        case .noSpace, .fileTooLarge: code = .full
        case .noSuchFileOrDirectory: code = .notFound
        case Errno(rawValue: EACCES), Errno(rawValue: EPERM), Errno(rawValue: EROFS): code = .permissionDenied
        default:
            #if os(Linux)
            if errno.rawValue == 122 /* EDQUOT */ { code = .full; break }
            #endif
            code = .ioError
        }
        return StoreError(code, "\(operation) failed: \(errno)", errno: errno, path: path)
    }

    /// A corruption error naming the page.
    static func corrupt(page: UInt32, _ detail: String, path: String? = nil) -> StoreError {
        StoreError(.corrupt, corruptPrefix(page) + detail, page: page, path: path)
    }

    private static func corruptPrefix(_ page: UInt32) -> String { "page \(page) is corrupt: " }

    /// The message without the page it names, for reports that name the page themselves
    /// (``IntegrityProblem``): `checksum mismatch` for `page 5 is corrupt: checksum mismatch`.
    var detail: String {
        guard let page, message.hasPrefix(Self.corruptPrefix(page)) else { return message }
        return String(message.dropFirst(Self.corruptPrefix(page).count))
    }
}
