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
    /// The stall window, in seconds: a transfer (while not paused) that moves no byte for this
    /// long, or fewer than `stallMinimumBytes` bytes (sent and received, headers included) in a
    /// window this long, has stalled and is given up (a transient `HTTPTransportError`, retried as
    /// a timeout). A server dripping a byte now and then cannot hold a request for ever.
    public var stallTimeout: Double = 60
    /// Send over a TCP connection carrying no other transfer at the time (HTTP/1.1): the parts of
    /// a parallel upload each get their own, since one stream across a WAN is capped by its
    /// round-trip time and window however many HTTP/2 streams share it.
    public var ownConnection = false
    /// The fewest bytes a transfer must move in each `stallTimeout` window (see there).
    public var stallMinimumBytes: Int64 = 1024
    /// Skip TLS certificate checks. Only ever set when a job asks for it by name.
    public var insecureSkipTLSVerify = false
    /// A PEM file of CA certificates to trust instead of the system store (`CURLOPT_CAINFO`), or
    /// a folder of them named by their hashes, as `openssl rehash` (c_rehash) makes it
    /// (`CURLOPT_CAPATH`, as OpenSSL's `SSL_CERT_DIR`); nil: the system store.
    public var caBundle: String?
    /// URL schemes curl may use, for the request and any redirect (`CURLOPT_PROTOCOLS_STR`,
    /// `CURLOPT_REDIR_PROTOCOLS_STR`): http and https unless a caller widens it on purpose (a
    /// test reading a `file:` URL). A URL a server or a journal chose never reaches `file:`,
    /// `ftp:`, `gopher:` or the others through the engine.
    public var allowedProtocols = "http,https"
    /// The most bytes of an answer kept (its headers and, apart, its body); a longer answer
    /// fails the transfer, naming the limit. nil: no limit (tests reading large objects back).
    public var maxResponseBytes: Int? = HTTPRequest.defaultMaxResponseBytes
    /// 1 MiB: Cloud Storage's JSON answers (object metadata, errors, session answers) and token
    /// answers are a few kilobytes; nothing Hoist asks for is larger.
    public static let defaultMaxResponseBytes = 1 << 20
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
        case file(any BodyFile, offset: Int64, length: Int64)

        var length: Int64 {
            switch self {
            case .data(let data, _): Int64(data.count)
            case .file(_, _, let length): length
            }
        }
    }

    /// The body's total length.
    public var bodyLength: Int64 { body.reduce(0) { $0 + $1.length } }

    /// The CA bundle the environment names, read as curl's own tool reads it
    /// (`HTTPEnvironment.caBundleVariables`, first set first); nil: the system store.
    public static func caBundle(fromEnvironment environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        for name in HTTPEnvironment.caBundleVariables {
            if let path = environment[name], !path.isEmpty { return path }
        }
        return nil
    }
}

/// The answer to an `HTTPRequest`.
public struct HTTPResponse: Sendable {
    public let status: Int
    /// The header lines as they came (after the status line of the last answer): none is made a
    /// `String` before it is asked for. (Empty when the answer was made from a dictionary.)
    private let headerLines: [UInt8]
    /// Where each `name: value` line's name and trimmed value lie in `headerLines`, found in one
    /// scan when the answer is made: an S3 `PutObject`'s answer is asked for seven headers, and
    /// each look-up scanned every line again (7% of a small-file job's instructions).
    private let fields: [HeaderField]
    private let given: [String: String]?
    public let body: Data
    /// The protocol the answer came over: `"1.1"`, `"2"` (or `"1.0"`).
    public var httpVersion: String = "1.1"

    /// An answer with `headers` by lowercased name, as `headers` gives them back.
    public init(status: Int, headers: [String: String], body: Data, httpVersion: String = "1.1") {
        self.status = status
        headerLines = []
        fields = []
        given = headers
        self.body = body
        self.httpVersion = httpVersion
    }

    /// `headerLines`: `Name: value` lines, each ended by a line feed (CR LF as on the wire).
    package init(status: Int, headerLines: [UInt8], body: Data, httpVersion: String) {
        self.status = status
        self.headerLines = headerLines
        fields = Self.fields(of: headerLines)
        given = nil
        self.body = body
        self.httpVersion = httpVersion
    }

    /// Header values by lowercased name (the last one wins).
    public var headers: [String: String] {
        if let given { return given }
        var all: [String: String] = [:]
        forEachHeader { name, value in all[String(decoding: name.map(Self.lowercase), as: UTF8.self)] = String(decoding: value, as: UTF8.self) }
        return all
    }

    /// The value of the last `name` header (any case), without the white space around it.
    public func header(_ name: String) -> String? {
        if let given { return given[name.lowercased()] }
        let wanted = name.utf8
        for field in fields.reversed() where field.name.count == wanted.count {
            if zip(headerLines[field.name], wanted).allSatisfy({ Self.lowercase($0) == Self.lowercase($1) }) {
                return String(decoding: headerLines[field.value], as: UTF8.self)
            }
        }
        return nil
    }

    public var bodyText: String { String(decoding: body, as: UTF8.self) }

    private static func lowercase(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }

    /// Each `name: value` line's name and trimmed value, in order.
    private func forEachHeader(_ body: (ArraySlice<UInt8>, ArraySlice<UInt8>) -> Void) {
        for field in fields { body(headerLines[field.name], headerLines[field.value]) }
    }

    /// A header line's name and its value without the white space around it.
    private struct HeaderField: Sendable {
        var name: Range<Int>
        var value: Range<Int>
    }

    /// The `name: value` lines of `lines`; lines without a colon are passed over.
    private static func fields(of lines: [UInt8]) -> [HeaderField] {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        var fields: [HeaderField] = []
        var lineStart = lines.startIndex
        while lineStart < lines.endIndex {
            let lineEnd = lines[lineStart...].firstIndex(of: 0x0A).map { $0 + 1 } ?? lines.endIndex
            if let colon = lines[lineStart..<lineEnd].firstIndex(of: UInt8(ascii: ":")) {
                var start = colon + 1
                var end = lineEnd
                while start < end, isSpace(lines[start]) { start += 1 }
                while end > start, isSpace(lines[end - 1]) { end -= 1 }
                fields.append(HeaderField(name: lineStart..<colon, value: start..<end))
            }
            lineStart = lineEnd
        }
        return fields
    }
}

/// A transfer that got no HTTP answer.
public struct HTTPTransportError: Error, CustomStringConvertible, Sendable {
    /// libcurl's error code.
    public let code: Int
    public let message: String
    /// True for failures worth retrying: refused or broken connections, timeouts, resets.
    public let isTransient: Bool
    /// True when the server's TLS certificate was not trusted (unknown issuer, wrong name,
    /// expired) or the CA bundle could not be read: retrying cannot help, naming a CA bundle can.
    public var isCertificateProblem = false
    /// True when the transfer stopped because its `TransferGate` was cancelled.
    public var isCancelled = false
    public var description: String { message }

    public init(code: Int, message: String, isTransient: Bool, isCertificateProblem: Bool = false, isCancelled: Bool = false) {
        self.code = code
        self.message = message
        self.isTransient = isTransient
        self.isCertificateProblem = isCertificateProblem
        self.isCancelled = isCancelled
    }
}

/// A file of the request's body could not be read as it was sent (it ended before the part's
/// length, a read failed, or `beforeEnd` found it changed): the request was not made.
public struct HTTPBodyReadError: Error, CustomStringConvertible, Sendable {
    public let path: String
    public let message: String
    public var description: String { message }

    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }
}

/// A file a request body reads (HoistStorage's open source files are): `read` fills a buffer
/// from an offset, retrying short reads, and returns the count read (short only at the end of
/// the file) or `-errno`. The engine never opens a path itself.
public protocol BodyFile: AnyObject, Sendable {
    /// The file's path, for messages.
    var path: String { get }
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int
}

/// What a transfer asks of whoever controls it, on the engine's thread (it cannot wait): pause,
/// cancel, and credit to send under a bandwidth limit.
public protocol TransferGate: Sendable {
    var isPaused: Bool { get }
    var isCancelled: Bool { get }
    /// Takes `count` bytes of sending credit and returns true if there is any; false means
    /// pause and ask again (`hasCredit`) later.
    func takeCredit(_ count: Int) -> Bool
    /// True when `takeCredit` would succeed now.
    var hasCredit: Bool { get }
}

/// Hooks a transfer calls on the engine's thread (`onContentBytes` of a large file part: on the
/// CPU worker that reads it ahead, `ReadAhead`).
public struct TransferHooks: Sendable {
    /// Content bytes as they are read for sending: the buffer and its offset in the content, in
    /// order (a piece read ahead is shown once it is read, before it is sent; bytes sent again
    /// after a rewind are shown again, at their offset).
    public var onContentBytes: (@Sendable (UnsafeRawBufferPointer, Int64) -> Void)?
    /// Body bytes handed to the network so far.
    public var onUploadProgress: (@Sendable (Int64) -> Void)?
    /// Pause, cancel and bandwidth.
    public var control: (any TransferGate)?
    /// Asked right before the last bytes of the body go to the network: a message stops the
    /// transfer there (an `HTTPBodyReadError`, `.changed`), so the server never gets a whole body
    /// and stores nothing. A file that changed while it was read is caught this way, before an
    /// object made of it could replace the one stored.
    public var beforeEnd: (@Sendable () -> String?)?

    public init(onContentBytes: (@Sendable (UnsafeRawBufferPointer, Int64) -> Void)? = nil,
                onUploadProgress: (@Sendable (Int64) -> Void)? = nil, control: (any TransferGate)? = nil,
                beforeEnd: (@Sendable () -> String?)? = nil) {
        self.onContentBytes = onContentBytes
        self.onUploadProgress = onUploadProgress
        self.control = control
        self.beforeEnd = beforeEnd
    }
}

/// The proxy libcurl takes from the environment for a URL, as it reads it: `https_proxy` or
/// `HTTPS_PROXY` for https (`http_proxy` for http), else `all_proxy`/`ALL_PROXY`; none when
/// `no_proxy`/`NO_PROXY` is `*` or names the host (or a domain it is in).
public enum EnvironmentProxy {
    /// The proxy for `url` with its credentials hidden (`http://***@proxy:3128`), and the variable
    /// that named it; nil when the request goes direct. For messages: never print a proxy URL unredacted.
    public static func describe(for url: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        guard let target = URLComponents(string: url), let scheme = target.scheme?.lowercased() else { return nil }
        let names = (scheme == "https" ? ["https_proxy", "HTTPS_PROXY"] : ["http_proxy"]) + ["all_proxy", "ALL_PROXY"]
        guard let name = names.first(where: { !(environment[$0] ?? "").isEmpty }), let proxy = environment[name] else { return nil }
        let host = (target.host ?? "").lowercased()
        let exceptions = (environment["no_proxy"] ?? environment["NO_PROXY"] ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
        for entry in exceptions {
            let domain = entry.hasPrefix(".") ? String(entry.dropFirst()) : entry
            if entry == "*" || host == domain || host.hasSuffix("." + domain) { return nil }
        }
        return "\(redacted(proxy)) (\(name))"
    }

    /// A proxy URL without its user and password.
    public static func redacted(_ proxy: String) -> String {
        guard let at = proxy.lastIndex(of: "@") else { return proxy }
        let start = proxy.range(of: "://").map(\.upperBound) ?? proxy.startIndex
        guard start <= at else { return proxy }
        return String(proxy[..<start]) + "***" + String(proxy[at...])
    }
}

extension HTTPRequest {
    /// Whether `path` is a folder: a CA "bundle" that is a folder of hashed certificates
    /// (`SSL_CERT_DIR`, `openssl rehash`) goes to curl as `CURLOPT_CAPATH`, a file as `CURLOPT_CAINFO`.
    static func isFolder(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }
}

/// The scheme, host and port of an http(s) URL, read strictly: a URL a server or a journal hands
/// over (a session URL) is used only when its origin is the one a client talks to. Nil for any
/// other scheme, a user or password in the authority (`http://a@b/`), a backslash, a space, a
/// control or non-ASCII byte anywhere, or an authority not followed by `/` (or the end).
public struct HTTPOrigin: Sendable, CustomStringConvertible {
    public let scheme: String
    public let host: String
    public let port: Int
    /// What follows the authority: the path and query (`/upload/...?upload_id=...`), or "".
    public let target: String

    /// Parsed on the URL's bytes (every one printable ASCII, or nil): a storage request parses
    /// its URL to decide whether the token goes with it, and Foundation's `range(of:)` and
    /// Character-wise slicing cost 45,000 instructions a request.
    public init?(_ url: String) {
        let bytes = Array(url.utf8)
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") }) else { return nil }
        func text(_ range: Range<Int>) -> String { String(decoding: bytes[range], as: UTF8.self) }
        guard let separator = bytes.indices.dropLast(2).first(where: {
            bytes[$0] == UInt8(ascii: ":") && bytes[$0 + 1] == UInt8(ascii: "/") && bytes[$0 + 2] == UInt8(ascii: "/")
        }) else { return nil }
        let scheme = text(0..<separator).lowercased()
        guard scheme == "http" || scheme == "https" else { return nil }
        let start = separator + 3
        let end = bytes[start...].firstIndex(of: UInt8(ascii: "/")) ?? bytes.endIndex
        let authority = bytes[start..<end]
        guard !authority.isEmpty, !authority.contains(where: { $0 == UInt8(ascii: "@") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") })
        else { return nil }
        var host = start..<end
        var port = scheme == "https" ? 443 : 80
        func portNumber(_ range: Range<Int>) -> Int? { Int(text(range)).flatMap { (1...65535).contains($0) ? $0 : nil } }
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            if close + 1 < end {
                guard bytes[close + 1] == UInt8(ascii: ":"), let number = portNumber(close + 2..<end) else { return nil }
                port = number
            }
            host = start..<close + 1
        } else if let colon = authority.lastIndex(of: UInt8(ascii: ":")) {
            guard let number = portNumber(colon + 1..<end) else { return nil }
            port = number
            host = start..<colon
        }
        guard !host.isEmpty, !bytes[host].contains(UInt8(ascii: ":")) || bytes[host.lowerBound] == UInt8(ascii: "[") else { return nil }
        self.scheme = scheme
        self.host = text(host).lowercased()
        self.port = port
        target = text(end..<bytes.endIndex)
    }

    /// The same scheme, host and port.
    public func sameOrigin(_ other: HTTPOrigin?) -> Bool {
        guard let other else { return false }
        return scheme == other.scheme && host == other.host && port == other.port
    }

    /// `scheme://host:port`.
    public var description: String { "\(scheme)://\(host):\(port)" }
}
