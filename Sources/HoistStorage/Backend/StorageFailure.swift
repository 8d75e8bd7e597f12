import Foundation

/// Why a backend operation failed, as the backend knows it: what the task driver needs to
/// decide on a retry (`retryable`, `retryAfter`) travels as typed fields, not in a dictionary.
/// Backends throw it; the public API turns it into the `NSError` users get
/// (`NSError.storage(_:)`, through `nsError`) or a `StorageError`. It bridges to that same
/// `NSError` (`CustomNSError`), so `StorageErrorCode(of:)` reads its code.
public struct StorageFailure: Error, Sendable, CustomStringConvertible {
    public var code: StorageErrorCode
    public var message: String
    /// Worth another try: a connection that broke or never came, a timeout, 408, 429, 5xx.
    public var retryable: Bool
    /// The seconds a server's `Retry-After` asked to wait.
    public var retryAfter: TimeInterval?
    /// The HTTP status of the server's answer; nil when none came (see `noAnswer`).
    public var httpStatus: Int?
    /// The body of the server's answer.
    public var responseBody: String?
    /// No answer came at all: the host could not be reached or the connection broke.
    public var noAnswer: Bool
    /// More for the `NSError`'s `userInfo`: `bucket`, `object`, `file`, `session`, checksums.
    public var details: [String: String]
    /// The configuration option (a manifest's `storage:` key, like `region`) whose value, given
    /// by name, is what was refused; nil when the failure is not one option's (the environment's
    /// values, a server's answer).
    public var key: String?

    public init(_ code: StorageErrorCode, _ message: String, retryable: Bool = false, retryAfter: TimeInterval? = nil,
                httpStatus: Int? = nil, responseBody: String? = nil, noAnswer: Bool = false, details: [String: String] = [:]) {
        self.code = code
        self.message = message
        self.retryable = retryable
        self.retryAfter = retryAfter
        self.httpStatus = httpStatus
        self.responseBody = responseBody
        self.noAnswer = noAnswer
        self.details = details
    }

    public var description: String { message }

    /// The `NSError` in `StorageErrorDomain` the public API hands out: the message, `details`,
    /// and the server's status and body as `ResponseCode` and `ResponseBody`.
    public var nsError: NSError {
        var info: [String: any Sendable] = details
        if let httpStatus { info[StorageErrorResponseCodeKey] = httpStatus }
        if let responseBody { info[StorageErrorResponseBodyKey] = responseBody }
        return code.error(message, userInfo: info)
    }
}

extension StorageFailure: CustomNSError {
    public static var errorDomain: String { StorageErrorDomain }
    public var errorCode: Int { code.rawValue }
    public var errorUserInfo: [String: Any] { nsError.userInfo }
}

/// `userInfo` key: the HTTP status of the server's answer.
public let StorageErrorResponseCodeKey = "ResponseCode"
/// `userInfo` key: the body of the server's answer.
public let StorageErrorResponseBodyKey = "ResponseBody"
