import Foundation

/// One HTTP request for the curl engine.
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: String
    /// Header lines in order; names as sent.
    public var headers: [(name: String, value: String)]
    public var body: [BodyPart]
    /// Seconds to wait for a connection.
    public var connectTimeout: Double = 30
    /// Seconds without a byte moving (while not paused) before the transfer is given up.
    public var stallTimeout: Double = 60
    /// Skip TLS certificate checks. Only ever set when a job asks for it by name.
    public var insecureSkipTLSVerify = false
    /// URL schemes curl may use, for the request and any redirect (`"http,https"`); nil: curl's default.
    public var allowedProtocols: String?
    /// The most response body bytes kept; a longer answer fails the transfer. nil: no limit.
    public var maxResponseBytes: Int?
    /// Seconds the whole transfer may take. nil: no limit (only `stallTimeout`).
    public var totalTimeout: Double?

    public init(method: String, url: String, headers: [(name: String, value: String)] = [], body: [BodyPart] = []) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// A piece of a request body: bytes in memory, or a range of a file read as it is sent.
    /// Content parts (a file range, or data with a `contentOffset`) are shown to
    /// `TransferHooks.onContentBytes` as they are sent; framing (`contentOffset` nil) is not.
    public enum BodyPart: Sendable {
        case data(Data, contentOffset: Int64? = nil)
        case file(path: String, offset: Int64, length: Int64)

        var length: Int64 {
            switch self {
            case .data(let data, _): Int64(data.count)
            case .file(_, _, let length): length
            }
        }
    }

    /// The body's total length.
    public var bodyLength: Int64 { body.reduce(0) { $0 + $1.length } }
}

/// The answer to an `HTTPRequest`.
public struct HTTPResponse: Sendable {
    public let status: Int
    /// Header values by lowercased name (the last one wins).
    public let headers: [String: String]
    public let body: Data

    public func header(_ name: String) -> String? { headers[name.lowercased()] }
    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}

/// A transfer that got no HTTP answer.
public struct HTTPTransportError: Error, CustomStringConvertible, Sendable {
    /// libcurl's error code.
    public let code: Int
    public let message: String
    /// True for failures worth retrying: refused or broken connections, timeouts, resets.
    public let isTransient: Bool
    public var description: String { message }
}

/// Hooks a transfer calls on the engine's thread.
public struct TransferHooks: Sendable {
    /// Content bytes as they are read for sending: the buffer and its offset in the content.
    public var onContentBytes: (@Sendable (UnsafeRawBufferPointer, Int64) -> Void)?
    /// Body bytes handed to the network so far.
    public var onUploadProgress: (@Sendable (Int64) -> Void)?
    /// Pause and cancel.
    public var control: TransferControl?

    public init(onContentBytes: (@Sendable (UnsafeRawBufferPointer, Int64) -> Void)? = nil,
                onUploadProgress: (@Sendable (Int64) -> Void)? = nil, control: TransferControl? = nil) {
        self.onContentBytes = onContentBytes
        self.onUploadProgress = onUploadProgress
        self.control = control
    }
}
