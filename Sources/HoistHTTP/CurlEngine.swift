import Foundation
import Synchronization
private import CCurl

/// Many HTTP transfers on one thread, over libcurl's multi interface.
///
/// Connections are kept and reused between requests. Over TLS, HTTP/2 is asked for by ALPN:
/// transfers wait for a connection being set up (`CURLOPT_PIPEWAIT`) and then run as streams over
/// it, so a batch of small uploads shares one or a few connections; a server that answers with
/// HTTP/1.1 gets one connection per transfer in flight, at most `maxConnectionsPerHost`. TLS
/// sessions are shared between handles (a share handle), so a new connection resumes one.
/// Request bodies are read from their files as they are sent (never loaded whole; a body of at
/// most 64 KiB is read just before its request, to go out with the head), and a
/// transfer can be paused and resumed on the wire through its `TransferGate`. Only this file
/// imports libcurl.
///
/// Proxies come from the environment as libcurl reads it: `https_proxy`/`HTTPS_PROXY` for https
/// URLs (a `CONNECT` tunnel), `http_proxy` for http, `ALL_PROXY`, and `NO_PROXY`/`no_proxy`.
///
/// ```swift
/// let response = try await CurlEngine.shared.perform(HTTPRequest(method: "GET", url: "http://127.0.0.1:4443/"))
/// ```
public final class CurlEngine: @unchecked Sendable {
    /// The libcurl release, such as "7.88.1" (from `curl_version()`: "libcurl/7.88.1 OpenSSL/...").
    public static var libraryVersion: String {
        String(String(cString: curl_version()).split(separator: " ").first?.dropFirst("libcurl/".count) ?? "")
    }

    // Thread confinement: `multi` and `active` are touched only on the engine's
    // own thread; other threads reach it through `inbox` and `hoist_curl_loop_wakeup` (thread-safe).
    public static let shared = CurlEngine()

    private let multi: UnsafeMutableRawPointer
    /// Drives `multi` with `curl_multi_socket_action` on epoll: each turn acts only on the
    /// sockets that are ready (`curl_multi_perform` polled every transfer's socket each turn).
    private let events: UnsafeMutablePointer<hoist_curl_loop>
    /// TLS sessions shared by every handle. Only the engine thread uses it, so it needs no lock.
    private let share: UnsafeMutableRawPointer
    private let inbox = Mutex<[Transfer]>([])
    /// The engine's thread (0 until it runs).
    private let engineThread = Atomic<pthread_t>(0)
    /// Whether the caller runs on the engine's thread.
    package var isCurrentThread: Bool { pthread_equal(pthread_self(), engineThread.load(ordering: .acquiring)) != 0 }
    /// Swift jobs enqueued on the engine as a task executor, run by its thread between turns.
    private let jobs = Mutex<[UnownedJob]>([])
    /// True while the engine thread is (about to be) blocked waiting for sockets: only then does
    /// a new request need `hoist_curl_loop_wakeup` (a write to an eventfd and a read back).
    /// Set before the engine's last look at `inbox`, so a request appended after that look sees it.
    private let polling = Atomic<Bool>(false)
    private var active: [UnsafeMutableRawPointer: Transfer] = [:]
    /// Whether each CA bundle named is a folder (`HTTPRequest.isFolder`), asked once per bundle
    /// rather than with a `stat` per transfer.
    private var bundleIsFolder: [String: Bool] = [:]

    /// libcurl's version line, such as `libcurl/7.88.1 OpenSSL/3.0.17 ...`.
    public static var version: String { String(cString: curl_version()) }

    /// The most connections open to one host at once. Over HTTP/2, PIPEWAIT keeps the count at
    /// one or a few (a connection holds as many streams as its server allows); the bound is for
    /// HTTP/1.1, where each transfer needs a connection of its own. It is no lower than the most
    /// uploads a job runs at once (256): a transfer waiting in curl's queue moves no bytes, and
    /// the stall watchdog would count its wait.
    public static let maxConnectionsPerHost = 256

    private init() {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        multi = curl_multi_init()!
        _ = hoist_curl_multi_setopt_long(multi, CURLMOPT_PIPELINING, hoist_curl_pipe_multiplex())
        _ = hoist_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, Self.maxConnectionsPerHost)
        guard let events = hoist_curl_loop_create(multi) else { fatalError("epoll or eventfd unavailable: \(String(cString: strerror(errno)))") }
        self.events = events
        share = curl_share_init()!
        _ = hoist_curl_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_SSL_SESSION.rawValue))
        let thread = Thread { [unowned self] in
            // Named for top -H and perf with the kernel's own call, not Foundation's Thread.name:
            // one full test run saw the engine's work on a thread named as a dispatch worker.
            hoist_curl_name_thread("hoist.curl")
            self.engineThread.store(pthread_self(), ordering: .releasing)
            self.loop()
        }
        thread.start()
    }

    /// Sends `request` and returns the server's answer, whatever its status.
    /// - Throws: `HTTPTransportError` when no answer came (`isCancelled` when the hooks' gate
    ///   was cancelled), `CancellationError` when the calling `Task` is, `HTTPBodyReadError` when
    ///   a body file could not be read.
    public func perform(_ request: HTTPRequest, hooks: TransferHooks = TransferHooks()) async throws -> HTTPResponse {
        let transfer = Transfer(request: request, hooks: hooks, wake: { [unowned self] in hoist_curl_loop_wakeup(events) })
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.continuation = continuation
                inbox.withLock { $0.append(transfer) }
                if polling.load(ordering: .sequentiallyConsistent) { hoist_curl_loop_wakeup(events) }
            }
        } onCancel: {
            transfer.abandoned.store(true, ordering: .relaxed)
            hoist_curl_loop_wakeup(events)
        }
    }

    // MARK: - The engine thread

    private func loop() {
        let executor = asUnownedTaskExecutor()
        while true {
            for job in jobs.withLock({ queue -> [UnownedJob] in defer { queue.removeAll(keepingCapacity: true) }; return queue }) {
                job.runSynchronously(on: executor)
            }
            for transfer in inbox.withLock({ queue -> [Transfer] in defer { queue.removeAll() }; return queue }) {
                start(transfer)
            }
            let now = Date()
            var anyPaused = false
            for (handle, transfer) in active {
                if let failure = transfer.checkControl(now: now) {
                    finish(handle, transfer, .failure(failure))
                } else if transfer.pausedOnWire, !(transfer.hooks.control?.isPaused ?? false),
                          transfer.hooks.control?.hasCredit ?? true, transfer.bodyIsReady {
                    transfer.pausedOnWire = false
                    transfer.lastMovement = now
                    transfer.restartWindow(now)
                    curl_easy_pause(handle, hoist_curl_pause_cont())
                }
                anyPaused = anyPaused || transfer.pausedOnWire
            }
            let timeout: Int32 = anyPaused ? 20 : (active.isEmpty ? 1000 : 100)
            polling.store(true, ordering: .sequentiallyConsistent)
            let idle = inbox.withLock({ $0.isEmpty }) && jobs.withLock({ $0.isEmpty })
            hoist_curl_loop_step(events, idle ? timeout : 0)
            polling.store(false, ordering: .sequentiallyConsistent)
            var remaining: Int32 = 0
            while let message = curl_multi_info_read(multi, &remaining) {
                guard hoist_curl_msg_is_done(message) != 0, let handle = message.pointee.easy_handle,
                      let transfer = active[handle] else { continue }
                finish(handle, transfer, transfer.outcome(code: hoist_curl_msg_result(message), handle: handle))
            }
        }
    }

    private func start(_ transfer: Transfer) {
        // A new easy handle per transfer, never one reused after `curl_easy_reset`: libcurl 7.88
        // keeps a pointer to the last answer's last header across a reset, and a server whose
        // next answer starts with a folded header line made it read that freed header
        // (a crash, found by HTTPFuzzTests). Connections are kept by the multi handle, not here.
        let handle = curl_easy_init()!
        do {
            let caPath = transfer.request.caBundle.map { bundle in
                if let known = bundleIsFolder[bundle] { return known }
                let folder = HTTPRequest.isFolder(bundle)
                bundleIsFolder[bundle] = folder
                return folder
            } ?? false
            try transfer.configure(handle, share: share, caPath: caPath)
        } catch {
            curl_easy_cleanup(handle)
            transfer.complete(.failure(error))
            return
        }
        active[handle] = transfer
        curl_multi_add_handle(multi, handle)
    }

    private func finish(_ handle: UnsafeMutableRawPointer, _ transfer: Transfer, _ result: Result<HTTPResponse, any Error>) {
        curl_multi_remove_handle(multi, handle)
        active[handle] = nil
        curl_easy_cleanup(handle)
        transfer.complete(result)
    }
}

/// The engine's thread as a task executor: tasks that prefer it
/// (`withTaskExecutorPreference(CurlEngine.shared)`) run their code on the thread that moves
/// their bytes, between its turns. A request's answer then resumes its task without waking
/// another thread, which for small requests is a good part of their cost (a futex wake and two
/// context switches per resume). Such tasks must not block for long: every transfer waits.
extension CurlEngine: TaskExecutor {
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        jobs.withLock { $0.append(job) }
        if polling.load(ordering: .sequentiallyConsistent) { hoist_curl_loop_wakeup(events) }
    }
}

/// One request in flight: its curl settings, body reader and collected answer.
private final class Transfer: @unchecked Sendable {
    // Everything but `abandoned` and `continuation` (set before the engine sees the transfer)
    // is touched only on the engine thread.
    let request: HTTPRequest
    let hooks: TransferHooks
    let abandoned = Atomic<Bool>(false)
    var continuation: CheckedContinuation<HTTPResponse, any Error>?

    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var responseHeaderLines: [UInt8] = []
    private var responseBody = Data()
    /// Which part of the answer passed its limit, if one did: "headers" or "body".
    private var tooLarge: String?
    private var headerBytes = 0
    private var partIndex = 0
    /// Body bytes handed to curl since the start (or the last seek).
    private var delivered: Int64 = 0
    /// `hooks.beforeEnd` was asked for this pass over the body.
    private var endChecked = false
    private var partOffset: Int64 = 0
    private var readFailure: (any Error)?
    private var uploaded: Int64 = 0
    var pausedOnWire = false
    /// When a byte last moved, either way (or the transfer started or was resumed).
    var lastMovement = Date()
    /// The current stall window: when it started, and the bytes moved in it (sent, and received
    /// headers and body). Restarted when the transfer is continued after a pause.
    private var windowStart = Date()
    private var windowBytes: Int64 = 0
    private var retained: Unmanaged<Transfer>?
    /// A small body sent from memory (`smallBody`), freed when the transfer completes.
    private var postFields: UnsafeMutableRawBufferPointer?
    /// The large file part being sent (`readAheadPart`), read ahead on the CPU workers.
    private var readAhead: ReadAhead?
    private var readAheadPart = -1
    /// Wakes the engine's thread (a piece a paused transfer waits for is ready).
    private let wake: @Sendable () -> Void

    init(request: HTTPRequest, hooks: TransferHooks, wake: @escaping @Sendable () -> Void = {}) {
        self.request = request
        self.hooks = hooks
        self.wake = wake
    }

    /// File parts of at least this many bytes are read ahead of the connection on the CPU
    /// workers (`ReadAhead`); smaller ones are read in place, where a hop to a worker and back
    /// would cost more than the read.
    static let readAheadLength: Int64 = 1 << 20

    /// The read-ahead of the current body part, made at its first read when it is a large file
    /// part; nil for any other part.
    private func currentReadAhead() -> ReadAhead? {
        guard partIndex < request.body.count, case .file(let file, let offset, let length) = request.body[partIndex],
              length >= Self.readAheadLength, partOffset < length else {
            return nil
        }
        if readAheadPart == partIndex, let readAhead { return readAhead }
        readAhead?.close()
        readAhead = ReadAhead(file: file, from: offset + partOffset, to: offset + length, workers: .shared,
                              onContentBytes: hooks.onContentBytes, wake: wake)
        readAheadPart = partIndex
        return readAhead
    }

    /// Whether the body's next bytes can be handed out: false while the piece a large file part
    /// needs next is still being read (the transfer stays paused on the wire until it is).
    var bodyIsReady: Bool {
        guard let readAhead, readAheadPart == partIndex, partIndex < request.body.count,
              partOffset < request.body[partIndex].length else { return true }
        return readAhead.hasBytes
    }

    /// - Parameter caPath: the request's CA bundle is a folder (`CURLOPT_CAPATH`), not a file.
    func configure(_ handle: UnsafeMutableRawPointer, share: UnsafeMutableRawPointer, caPath: Bool) throws {
        func set(_ option: CURLoption, _ value: Int) throws {
            try check(hoist_curl_easy_setopt_long(handle, option, value))
        }
        func set(_ option: CURLoption, _ value: String) throws {
            try check(hoist_curl_easy_setopt_string(handle, option, value))
        }
        let context = Unmanaged.passRetained(self)
        retained = context
        try set(CURLOPT_URL, request.url)
        // The path byte for byte: an object key with `..` or `.` segments (`site/../victim.txt`)
        // is not folded into another key's path, where a mirror's DELETE would land.
        try set(CURLOPT_PATH_AS_IS, 1)
        if request.ownConnection {
            // A TCP connection of its own (a part of a parallel upload): HTTP/1.1, which carries
            // one transfer at a time, and no waiting to become another connection's stream.
            try set(CURLOPT_HTTP_VERSION, hoist_curl_http_version_1_1())
        } else {
            try set(CURLOPT_HTTP_VERSION, hoist_curl_http_version_2tls())
            // Wait for a connection being set up rather than open another: if it speaks HTTP/2, this
            // transfer becomes one of its streams.
            try set(CURLOPT_PIPEWAIT, 1)
        }
        try check(hoist_curl_easy_setopt_pointer(handle, CURLOPT_SHARE, share))
        try set(CURLOPT_CONNECTTIMEOUT_MS, Int(request.connectTimeout * 1000))
        try set(CURLOPT_NOSIGNAL, 1)
        try set(CURLOPT_TCP_KEEPALIVE, 1)
        // Every request: a URL a server chose (a session's Location) or a journal handed back
        // never reaches file:, ftp:, gopher: and the rest (redirects are not followed either).
        try set(CURLOPT_PROTOCOLS_STR, request.allowedProtocols)
        try set(CURLOPT_REDIR_PROTOCOLS_STR, request.allowedProtocols)
        if let total = request.totalTimeout { try set(CURLOPT_TIMEOUT_MS, max(1, Int(total * 1000))) }
        if let bundle = request.caBundle { try set(caPath ? CURLOPT_CAPATH : CURLOPT_CAINFO, bundle) }
        if request.insecureSkipTLSVerify {
            try set(CURLOPT_SSL_VERIFYPEER, 0)
            try set(CURLOPT_SSL_VERIFYHOST, 0)
        }
        let bodyLength = request.bodyLength
        switch request.method {
        case "GET": try set(CURLOPT_HTTPGET, 1)
        case "HEAD": try set(CURLOPT_NOBODY, 1)
        default:
            try set(CURLOPT_CUSTOMREQUEST, request.method)
            if let body = try smallBody() {
                // Sent from memory: curl writes it with the request head, in one `send`.
                postFields = body
                try check(hoist_curl_easy_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)))
                try check(hoist_curl_easy_setopt_pointer(handle, CURLOPT_POSTFIELDS, body.baseAddress))
            } else if request.method != "DELETE" || bodyLength > 0 {
                try set(CURLOPT_UPLOAD, 1)
                try check(hoist_curl_easy_setopt_off(handle, CURLOPT_INFILESIZE_LARGE, curl_off_t(bodyLength)))
                // 64 KiB, as curl's own default: each piece is read and sent while it is still in
                // the CPU's cache. (512 KiB, a whole L2 here, cost a 512 MiB upload 25% more CPU.)
                try set(CURLOPT_UPLOAD_BUFFERSIZE, 64 << 10)
                try check(hoist_curl_easy_setopt_read(handle, Transfer.readCallback))
                try check(hoist_curl_easy_setopt_pointer(handle, CURLOPT_READDATA, context.toOpaque()))
                // A reused connection that turns out dead makes curl send the request again on a
                // new one: the body must rewind.
                try check(hoist_curl_easy_setopt_seek(handle, Transfer.seekCallback))
                try check(hoist_curl_easy_setopt_pointer(handle, CURLOPT_SEEKDATA, context.toOpaque()))
            }
        }
        var list: UnsafeMutablePointer<curl_slist>?
        for header in request.headers { list = curl_slist_append(list, "\(header.name): \(header.value)") }
        list = curl_slist_append(list, "Expect:")   // no 100-continue round trip
        headerList = list
        try check(hoist_curl_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, list))
        try check(hoist_curl_easy_setopt_header(handle, Transfer.headerCallback))
        try check(hoist_curl_easy_setopt_pointer(handle, CURLOPT_HEADERDATA, context.toOpaque()))
        try check(hoist_curl_easy_setopt_write(handle, Transfer.writeCallback))
        try check(hoist_curl_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, context.toOpaque()))
        try set(CURLOPT_NOPROGRESS, 0)
        try check(hoist_curl_easy_setopt_xferinfo(handle, Transfer.progressCallback))
        try check(hoist_curl_easy_setopt_pointer(handle, CURLOPT_XFERINFODATA, context.toOpaque()))
        lastMovement = Date()
        restartWindow(lastMovement)
    }

    /// The largest body read whole before the request starts (`smallBody`).
    static let smallBodyLimit: Int64 = 64 << 10

    /// The whole body, read now, for a small body curl can send with the request head (fewer
    /// system calls per small upload than the read callback, which sends it after the head):
    /// nil when it is larger than `smallBodyLimit`, when there is no `Content-Type` header (curl
    /// would add one to a body given this way), or when the transfer is paused or out of
    /// bandwidth credit (the read callback pauses it). Content bytes are shown to
    /// `onContentBytes` as they are read and `beforeEnd` is asked after the last one, as the read
    /// callback does: the bytes sent are the bytes hashed, and a file that changed is never sent.
    private func smallBody() throws -> UnsafeMutableRawBufferPointer? {
        let length = request.bodyLength
        guard length > 0, length <= Self.smallBodyLimit,
              request.headers.contains(where: { $0.name.utf8.count == 12 && $0.name.lowercased() == "content-type" }) else { return nil }
        if let control = hooks.control {
            if control.isPaused || control.isCancelled || !control.takeCredit(Int(length)) { return nil }
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(length), alignment: 16)
        var filled = 0
        do {
            for part in request.body {
                let target = UnsafeMutableRawBufferPointer(rebasing: buffer[filled..<filled + Int(part.length)])
                switch part {
                case .data(let data, let contentOffset):
                    data.withUnsafeBytes { target.copyMemory(from: $0) }   // (not DataProtocol's generic copy)
                    if let contentOffset { hooks.onContentBytes?(UnsafeRawBufferPointer(target), contentOffset) }
                case .file(let file, let offset, _):
                    let got = file.read(into: target, at: offset)
                    guard got == target.count else { throw Self.readError(file, got) }
                    hooks.onContentBytes?(UnsafeRawBufferPointer(target), offset)
                }
                filled += Int(part.length)
            }
            if let beforeEnd = hooks.beforeEnd, let problem = beforeEnd() {
                throw HTTPBodyReadError(path: bodyFilePath, message: problem)
            }
        } catch {
            buffer.deallocate()
            throw error
        }
        return buffer
    }

    /// A body file that gave fewer bytes than its part's length (`got`), or `-errno`.
    private static func readError(_ file: any BodyFile, _ got: Int) -> HTTPBodyReadError {
        HTTPBodyReadError(path: file.path, message: "\(file.path) changed while uploading: "
            + (got < 0 ? String(cString: strerror(Int32(-got))) : "it ended early") + ".")
    }

    /// The path of the body's file, for a message; empty when the body is all in memory.
    private var bodyFilePath: String {
        for part in request.body { if case .file(let file, _, _) = part { return file.path } }
        return ""
    }

    /// A reason to stop now: cancelled, or stalled while not paused: no byte for a stall
    /// window, or fewer than `stallMinimumBytes` in one (a server dripping its answer, or
    /// taking the body a byte at a time). Our own watchdog, not curl's LOW_SPEED_LIMIT: curl
    /// 7.88's trips on a send paused for bandwidth, which this one does not count.
    func checkControl(now: Date) -> (any Error)? {
        if hooks.control?.isCancelled == true { return cancelled }
        if abandoned.load(ordering: .relaxed) { return CancellationError() }
        if pausedOnWire {
            restartWindow(now)
            return nil
        }
        let window = request.stallTimeout
        if now.timeIntervalSince(lastMovement) > window {
            return stalled("no bytes moved for \(Self.seconds(window))")
        }
        if now.timeIntervalSince(windowStart) >= window {
            if windowBytes < request.stallMinimumBytes {
                return stalled("\(windowBytes) bytes moved in \(Self.seconds(window)), fewer than \(request.stallMinimumBytes)")
            }
            restartWindow(now)
        }
        return nil
    }

    /// Starts a new stall window at `now` (a transfer continued after a pause starts afresh).
    func restartWindow(_ now: Date) {
        windowStart = now
        windowBytes = 0
    }

    /// Bytes moved, either way, now.
    private func moved(_ count: Int) {
        guard count > 0 else { return }
        windowBytes += Int64(count)
        lastMovement = Date()
    }

    private func stalled(_ why: String) -> HTTPTransportError {
        HTTPTransportError(code: Int(CURLE_OPERATION_TIMEDOUT.rawValue), message: "stalled (\(why)): \(request.url)", isTransient: true)
    }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }

    /// The most header bytes kept with a body limit of `limit`: 256 KiB at most (below curl's
    /// own 300 KiB, so the error says which limit it was).
    private static func headerLimit(_ limit: Int) -> Int { min(limit, 256 << 10) }

    /// A byte count as a limit reads best: `1 MiB`, `256 KiB`, or bytes.
    private static func size(_ bytes: Int) -> String {
        bytes >= 1 << 20 && bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB"
            : bytes >= 1 << 10 && bytes % (1 << 10) == 0 ? "\(bytes >> 10) KiB" : "\(bytes) B"
    }

    /// The error of a transfer its gate cancelled.
    private var cancelled: HTTPTransportError {
        HTTPTransportError(code: Int(CURLE_ABORTED_BY_CALLBACK.rawValue), message: "cancelled: \(request.url)",
                           isTransient: false, isCancelled: true)
    }

    func outcome(code: CURLcode, handle: UnsafeMutableRawPointer) -> Result<HTTPResponse, any Error> {
        if let readFailure { return .failure(readFailure) }
        if let tooLarge, let limit = request.maxResponseBytes {
            let most = tooLarge == "headers" ? Self.headerLimit(limit) : limit
            return .failure(HTTPTransportError(code: Int(CURLE_WRITE_ERROR.rawValue),
                                               message: "the response\(tooLarge == "headers" ? "'s headers are" : " is") larger than \(most) bytes (\(Self.size(most))), "
                                                   + "the most Hoist reads: \(request.url)",
                                               isTransient: false))
        }
        if code == CURLE_ABORTED_BY_CALLBACK, hooks.control?.isCancelled == true {
            return .failure(cancelled)
        }
        guard code == CURLE_OK else {
            return .failure(HTTPTransportError(
                code: Int(code.rawValue), message: "\(String(cString: curl_easy_strerror(code))): \(request.url)",
                isTransient: Self.transientCodes.contains(code), isCertificateProblem: Self.certificateCodes.contains(code)))
        }
        var status = 0
        _ = hoist_curl_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        var version = 0
        _ = hoist_curl_easy_getinfo_long(handle, CURLINFO_HTTP_VERSION, &version)
        let versionName = switch version {   // CURL_HTTP_VERSION_1_0, _2_0, _3
        case 1: "1.0"
        case 3: "2"
        case 30: "3"
        default: "1.1"
        }
        return .success(HTTPResponse(status: status, headerLines: responseHeaderLines, body: responseBody, httpVersion: versionName))
    }

    func complete(_ result: Result<HTTPResponse, any Error>) {
        readAhead?.close()
        readAhead = nil
        curl_slist_free_all(headerList)
        headerList = nil
        postFields?.deallocate()
        postFields = nil
        retained?.release()
        retained = nil
        continuation?.resume(with: result)
        continuation = nil
    }

    private static let transientCodes: Set<CURLcode> = [
        CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_OPERATION_TIMEDOUT, CURLE_SEND_ERROR,
        CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_SSL_CONNECT_ERROR, CURLE_HTTP2,
        CURLE_HTTP2_STREAM, CURLE_WEIRD_SERVER_REPLY, CURLE_READ_ERROR, CURLE_SEND_FAIL_REWIND,
    ]

    /// The server's certificate was not trusted, or the CA bundle could not be used.
    private static let certificateCodes: Set<CURLcode> = [
        CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
    ]

    private func check(_ code: CURLcode) throws {
        if code != CURLE_OK {
            throw HTTPTransportError(code: Int(code.rawValue), message: String(cString: curl_easy_strerror(code)), isTransient: false)
        }
    }

    // MARK: - Callbacks, on the engine thread

    private static func from(_ context: UnsafeMutableRawPointer?) -> Transfer {
        Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
    }

    private static let readCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
        buffer, size, count, context in
        from(context).read(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
    }

    private static let seekCallback: @convention(c) (UnsafeMutableRawPointer?, curl_off_t, Int32) -> Int32 = {
        context, offset, origin in
        from(context).seek(to: Int64(offset), origin: origin)
    }

    private static let headerCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
        buffer, size, count, context in
        let line = UnsafeRawBufferPointer(start: buffer, count: size * count)
        let transfer = from(context)
        // Headers (of every interim answer too) have a limit of their own: a server sending
        // endless headers stops there.
        transfer.headerBytes += size * count
        transfer.moved(size * count)
        if let limit = transfer.request.maxResponseBytes, transfer.headerBytes > headerLimit(limit) {
            transfer.tooLarge = "headers"
            return 0
        }
        transfer.header(line)
        return size * count
    }

    private static let writeCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
        buffer, size, count, context in
        let transfer = from(context)
        if let limit = transfer.request.maxResponseBytes, transfer.responseBody.count + size * count > limit {
            transfer.tooLarge = "body"
            return 0   // curl stops the transfer (CURLE_WRITE_ERROR)
        }
        transfer.moved(size * count)
        transfer.responseBody.append(contentsOf: UnsafeRawBufferPointer(start: buffer, count: size * count))
        return size * count
    }

    /// Upload progress. (Received bytes are counted as they arrive, in the header and write
    /// callbacks: curl calls this about once a second whatever moved, with running totals, so
    /// "some bytes were received once" is no sign of movement now.)
    private static let progressCallback: @convention(c) (UnsafeMutableRawPointer?, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> Int32 = {
        context, _, _, _, uploaded in
        let transfer = from(context)
        if transfer.hooks.control?.isCancelled == true || transfer.abandoned.load(ordering: .relaxed) { return 1 }
        if Int64(uploaded) > transfer.uploaded {
            transfer.moved(Int(Int64(uploaded) - transfer.uploaded))
            transfer.uploaded = Int64(uploaded)
            transfer.hooks.onUploadProgress?(Int64(uploaded))
        }
        return 0
    }

    /// One header line, kept as bytes (`HTTPResponse.header` reads the few asked for); a status
    /// line starts the headers of another answer (after a redirect or a `100 Continue`).
    private func header(_ line: UnsafeRawBufferPointer) {
        if line.starts(with: "HTTP/".utf8) {
            responseHeaderLines.removeAll(keepingCapacity: true)
            return
        }
        responseHeaderLines.append(contentsOf: line)
    }

    /// Moves the body back (or forward) to `offset` from its start, for a request sent again.
    private func seek(to offset: Int64, origin: Int32) -> Int32 {
        guard origin == SEEK_SET, offset >= 0, offset <= request.bodyLength else { return hoist_curl_seekfunc_cantseek() }
        var index = 0
        var start: Int64 = 0
        while index < request.body.count, start + request.body[index].length <= offset {
            start += request.body[index].length
            index += 1
        }
        partIndex = index
        partOffset = offset - start
        delivered = offset
        endChecked = false
        // What was read ahead is for the old position: read again from the new one.
        readAhead?.close()
        readAhead = nil
        return hoist_curl_seekfunc_ok()
    }

    /// Fills curl's buffer from the body parts; pauses while the control says so.
    private func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        if hooks.control?.isCancelled == true { return hoist_curl_readfunc_abort() }
        if hooks.control?.isPaused == true {
            pausedOnWire = true
            return hoist_curl_readfunc_pause()
        }
        if let readAhead = currentReadAhead(), !readAhead.isReadyElseWait() {
            pausedOnWire = true   // the next piece is being read: the engine continues it when the worker wakes it
            return hoist_curl_readfunc_pause()
        }
        if let control = hooks.control, !control.takeCredit(min(buffer.count, Int(request.bodyLength))) {
            pausedOnWire = true   // out of bandwidth: the engine loop continues it when credit returns
            return hoist_curl_readfunc_pause()
        }
        if !endChecked, let beforeEnd = hooks.beforeEnd, request.bodyLength - delivered <= Int64(buffer.count) {
            // This call hands out the end of the body: the last moment to stop it.
            endChecked = true
            if let problem = beforeEnd() {
                readFailure = HTTPBodyReadError(path: bodyFilePath, message: problem)
                return hoist_curl_readfunc_abort()
            }
        }
        var filled = 0
        defer { delivered += Int64(filled) }
        while filled < buffer.count, partIndex < request.body.count {
            let part = request.body[partIndex]
            let left = part.length - partOffset
            if left == 0 {
                partIndex += 1
                partOffset = 0
                continue
            }
            let want = min(buffer.count - filled, Int(left))
            let target = UnsafeMutableRawBufferPointer(rebasing: buffer[filled..<filled + want])
            switch part {
            case .data(let data, let contentOffset):
                let start = Int(partOffset)
                data.withUnsafeBytes { target.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[start..<start + want])) }
                if let contentOffset { hooks.onContentBytes?(UnsafeRawBufferPointer(target), contentOffset + partOffset) }
                filled += want
                partOffset += Int64(want)
            case .file(let file, let offset, _):
                if let readAhead = currentReadAhead() {
                    // Read and hashed on a worker: only copied here.
                    switch readAhead.take(into: target, at: offset + partOffset) {
                    case .copied(let got):
                        filled += got
                        partOffset += Int64(got)
                    case .notReady:
                        // The next piece is still being read (0 would end the body: pause instead).
                        if filled > 0 { return filled }
                        pausedOnWire = true
                        return hoist_curl_readfunc_pause()
                    case .failed(let got):
                        readFailure = Self.readError(file, got)
                        return hoist_curl_readfunc_abort()
                    }
                    continue
                }
                let got = file.read(into: target, at: offset + partOffset)
                if got <= 0 {
                    readFailure = Self.readError(file, got)
                    return hoist_curl_readfunc_abort()
                }
                hooks.onContentBytes?(UnsafeRawBufferPointer(rebasing: target[0..<got]), offset + partOffset)
                filled += got
                partOffset += Int64(got)
            }
        }
        return filled
    }
}
