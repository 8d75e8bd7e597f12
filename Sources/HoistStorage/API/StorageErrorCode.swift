import Foundation

/// The error domain of every error HoistStorage reports, as in FirebaseStorage.
public let StorageErrorDomain: String = "FIRStorageErrorDomain"

/// Why a storage operation failed. Completion handlers and snapshots get an `NSError` in
/// `StorageErrorDomain` whose `code` is one of these raw values; the `async` and `Result` APIs
/// throw the same error as a `StorageError`:
///
/// ```swift
/// if let error = snapshot.error as? NSError {
///     switch StorageErrorCode(rawValue: error.code)! {
///     case .objectNotFound: print("no such file")
///     default: print(error.localizedDescription)
///     }
/// }
/// ```
public enum StorageErrorCode: Int, Error, Sendable, CaseIterable {
    case unknown = -13000
    case objectNotFound = -13010
    case bucketNotFound = -13011
    case projectNotFound = -13012
    case quotaExceeded = -13013
    case unauthenticated = -13020
    case unauthorized = -13021
    case retryLimitExceeded = -13030
    case nonMatchingChecksum = -13031
    case downloadSizeExceeded = -13032
    case cancelled = -13040
    case invalidArgument = -13050
    case bucketMismatch = -13051
    case internalError = -13052
    case pathError = -13053

    /// The case's name, such as `"objectNotFound"`: what logs, JSON and hooks show.
    public var name: String {
        switch self {
        case .unknown: "unknown"
        case .objectNotFound: "objectNotFound"
        case .bucketNotFound: "bucketNotFound"
        case .projectNotFound: "projectNotFound"
        case .quotaExceeded: "quotaExceeded"
        case .unauthenticated: "unauthenticated"
        case .unauthorized: "unauthorized"
        case .retryLimitExceeded: "retryLimitExceeded"
        case .nonMatchingChecksum: "nonMatchingChecksum"
        case .downloadSizeExceeded: "downloadSizeExceeded"
        case .cancelled: "cancelled"
        case .invalidArgument: "invalidArgument"
        case .bucketMismatch: "bucketMismatch"
        case .internalError: "internalError"
        case .pathError: "pathError"
        }
    }

    /// An `NSError` in `StorageErrorDomain` with this code.
    /// - Parameters:
    ///   - message: the `localizedDescription`.
    ///   - userInfo: more keys, such as `bucket`, `object`, `ResponseCode` and `ResponseBody`
    ///     (a task adds the SDK's `ResponseErrorCode` and `ResponseErrorDomain` to these).
    public func error(_ message: String, userInfo: [String: any Sendable] = [:]) -> NSError {
        var info: [String: Any] = userInfo
        info[NSLocalizedDescriptionKey] = message
        return NSError(domain: StorageErrorDomain, code: rawValue, userInfo: info)
    }

    /// The `StorageErrorCode` of any error: its own code in `StorageErrorDomain`, else `.unknown`.
    public init(of error: any Error) {
        let nsError = error as NSError
        if nsError.domain == StorageErrorDomain, let code = StorageErrorCode(rawValue: nsError.code) {
            self = code
        } else {
            self = .unknown
        }
    }
}

extension NSError {
    /// Wraps any error as a storage error: a backend's `StorageFailure` becomes its `NSError`; a
    /// storage error is returned as it is, with the
    /// server's answer described as the SDK describes it (`withServerResponseKeys`).
    static func storage(_ error: any Error) -> NSError {
        if let error = error as? StorageError { return error as NSError }
        if let failure = error as? StorageFailure { return failure.nsError.withServerResponseKeys() }
        let nsError = error as NSError
        if nsError.domain == StorageErrorDomain { return nsError.withServerResponseKeys() }
        return StorageErrorCode.unknown.error(
            "\(error)", userInfo: ["ResponseErrorDomain": nsError.domain, "ResponseErrorCode": nsError.code])
    }

    /// The domain FirebaseStorage gives an HTTP status as an error (GTMSessionFetcher's).
    static let httpStatusDomain = "com.google.HTTPStatus"

    /// A storage error that carries a server's status (`ResponseCode`) also carries it as the
    /// SDK does: `ResponseErrorCode` (the status), `ResponseErrorDomain` ("com.google.HTTPStatus"),
    /// `NSUnderlyingErrorKey` (an error in that domain whose `data` is the body), `data` (the
    /// body's bytes) beside `ResponseBody` (its text).
    func withServerResponseKeys() -> NSError {
        guard let status = userInfo[StorageErrorResponseCodeKey] as? Int, userInfo["ResponseErrorCode"] == nil else {
            return self
        }
        var info = userInfo
        let body = (userInfo[StorageErrorResponseBodyKey] as? String).map { Data($0.utf8) } ?? Data()
        info["ResponseErrorCode"] = status
        info["ResponseErrorDomain"] = Self.httpStatusDomain
        info["data"] = body
        info[NSUnderlyingErrorKey] = NSError(domain: Self.httpStatusDomain, code: status, userInfo: ["data": body])
        return NSError(domain: domain, code: code, userInfo: info)
    }
}
