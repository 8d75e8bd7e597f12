import Foundation

/// A storage error as a Swift value, as FirebaseStorage defines it: what the `async` and
/// `Result` APIs throw, and what `reference(for:)` throws.
///
/// ```swift
/// do {
///     let metadata = try await ref.putFileAsync(from: localFile)
/// } catch let error as StorageError {
///     switch error {
///     case .objectNotFound(let object, _): print("no object \(object)")
///     case .cancelled: print("cancelled")
///     case .unknown(let message, let serverError): print(message, serverError["ResponseErrorCode"] ?? "")
///     default: print(error.localizedDescription)
///     }
/// }
/// ```
///
/// As a `CustomNSError` it bridges to an `NSError` in `StorageErrorDomain` with the
/// `StorageErrorCode` raw value and the SDK's `userInfo`: `serverError` entries plus
/// `NSLocalizedDescriptionKey`. Completion handlers and `StorageTaskSnapshot.error` receive the
/// `NSError` form, whose message can say more (the last error before `retryLimitExceeded`, the
/// checksums of `nonMatchingChecksum`); `StorageError(_:)` turns one into the other.
public enum StorageError: Error, CustomNSError, @unchecked Sendable {
    // @unchecked: `serverError` is `[String: Any]` as in the SDK; Hoist only puts strings,
    // numbers, `Data` and `NSError`s in it, and never mutates one after it is made.
    case unknown(message: String, serverError: [String: Any])
    case objectNotFound(object: String, serverError: [String: Any])
    case bucketNotFound(bucket: String)
    case projectNotFound(project: String)
    case quotaExceeded(bucket: String, serverError: [String: Any])
    case unauthenticated(serverError: [String: Any])
    case unauthorized(bucket: String, object: String, serverError: [String: Any])
    case retryLimitExceeded
    case nonMatchingChecksum
    case downloadSizeExceeded(total: Int64, maxSize: Int64)
    case cancelled
    case invalidArgument(message: String)
    case internalError(message: String)
    case bucketMismatch(message: String)
    case pathError(message: String)

    /// `StorageErrorDomain` (`"FIRStorageErrorDomain"`).
    public static var errorDomain: String { StorageErrorDomain }

    /// The `StorageErrorCode` raw value of the case.
    public var errorCode: Int { code.rawValue }

    /// The case's `StorageErrorCode`.
    public var code: StorageErrorCode {
        switch self {
        case .unknown: .unknown
        case .objectNotFound: .objectNotFound
        case .bucketNotFound: .bucketNotFound
        case .projectNotFound: .projectNotFound
        case .quotaExceeded: .quotaExceeded
        case .unauthenticated: .unauthenticated
        case .unauthorized: .unauthorized
        case .retryLimitExceeded: .retryLimitExceeded
        case .nonMatchingChecksum: .nonMatchingChecksum
        case .downloadSizeExceeded: .downloadSizeExceeded
        case .cancelled: .cancelled
        case .invalidArgument: .invalidArgument
        case .internalError: .internalError
        case .bucketMismatch: .bucketMismatch
        case .pathError: .pathError
        }
    }

    /// The SDK's `userInfo`: the server's entries and the message under `NSLocalizedDescriptionKey`.
    public var errorUserInfo: [String: Any] {
        func with(_ serverError: [String: Any], _ message: String) -> [String: Any] {
            var dictionary = serverError
            dictionary[NSLocalizedDescriptionKey] = message
            return dictionary
        }
        switch self {
        case let .unknown(message, serverError):
            return with(serverError, message)
        case let .objectNotFound(object, serverError):
            return with(serverError, "Object \(object) does not exist.")
        case let .bucketNotFound(bucket):
            return [NSLocalizedDescriptionKey: "Bucket \(bucket) does not exist."]
        case let .projectNotFound(project):
            return [NSLocalizedDescriptionKey: "Project \(project) does not exist."]
        case let .quotaExceeded(bucket, serverError):
            return with(serverError, "Quota for bucket \(bucket) exceeded, please view quota on firebase.google.com.")
        case let .unauthenticated(serverError):
            return with(serverError, "User is not authenticated, please authenticate using Firebase Authentication and try again.")
        case let .unauthorized(bucket, object, serverError):
            return with(serverError, "User does not have permission to access gs://\(bucket)/\(object).")
        case .retryLimitExceeded:
            return [NSLocalizedDescriptionKey: "Max retry time for operation exceeded, please try again."]
        case .nonMatchingChecksum:
            // The SDK's text has "TODO" where the checksums would go; Hoist's NSError form names them.
            return [NSLocalizedDescriptionKey:
                "Uploaded/downloaded object does not match the server's checksum. Please retry the upload/download."]
        case let .downloadSizeExceeded(total, maxSize):
            return [
                "totalSize": total, "maxAllowedSize": maxSize,
                NSLocalizedDescriptionKey: "Attempted to download object with size of \(total) bytes, which exceeds the "
                    + "maximum size of \(maxSize) bytes. Consider raising the maximum download maxSize, or using StorageReference.write",
            ]
        case .cancelled:
            return [NSLocalizedDescriptionKey: "User cancelled the upload/download."]
        case let .invalidArgument(message), let .internalError(message), let .bucketMismatch(message), let .pathError(message):
            return [NSLocalizedDescriptionKey: message]
        }
    }

    /// The Swift form of any error: a `StorageError` as it is; an `NSError` in `StorageErrorDomain`
    /// as the case of its code, with its `userInfo` (less the message) as `serverError`; anything
    /// else as `.unknown` with `ResponseErrorDomain` and `ResponseErrorCode`.
    public init(_ error: any Error) {
        if let error = error as? StorageError {
            self = error
            return
        }
        let nsError = (error as? StorageFailure)?.nsError ?? error as NSError
        var info = nsError.userInfo
        info[NSLocalizedDescriptionKey] = nil
        let message = nsError.localizedDescription
        guard nsError.domain == StorageErrorDomain, let code = StorageErrorCode(rawValue: nsError.code) else {
            self = .unknown(message: message, serverError: [
                "ResponseErrorDomain": nsError.domain, "ResponseErrorCode": nsError.code, NSUnderlyingErrorKey: nsError,
            ])
            return
        }
        let bucket = info["bucket"] as? String ?? ""
        let object = info["object"] as? String ?? ""
        switch code {
        case .unknown: self = .unknown(message: message, serverError: info)
        case .objectNotFound: self = .objectNotFound(object: object, serverError: info)
        case .bucketNotFound: self = .bucketNotFound(bucket: bucket)
        case .projectNotFound: self = .projectNotFound(project: info["project"] as? String ?? "")
        case .quotaExceeded: self = .quotaExceeded(bucket: bucket, serverError: info)
        case .unauthenticated: self = .unauthenticated(serverError: info)
        case .unauthorized: self = .unauthorized(bucket: bucket, object: object, serverError: info)
        case .retryLimitExceeded: self = .retryLimitExceeded
        case .nonMatchingChecksum: self = .nonMatchingChecksum
        case .downloadSizeExceeded:
            func int64(_ value: Any?) -> Int64 { value as? Int64 ?? (value as? Int).map(Int64.init) ?? 0 }
            self = .downloadSizeExceeded(total: int64(info["totalSize"]), maxSize: int64(info["maxAllowedSize"]))
        case .cancelled: self = .cancelled
        case .invalidArgument: self = .invalidArgument(message: message)
        case .internalError: self = .internalError(message: message)
        case .bucketMismatch: self = .bucketMismatch(message: message)
        case .pathError: self = .pathError(message: message)
        }
    }
}
