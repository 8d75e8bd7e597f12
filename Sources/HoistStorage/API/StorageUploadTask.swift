import Foundation

/// One upload: started by `putData` or `putFile`, controlled with `pause()`, `resume()` and
/// `cancel()`, watched with `observe(_:handler:)`.
///
/// Events: `.resume` when the task starts and on every resume; `.progress` while bytes move
/// (never while paused) and once at 100%; `.pause`; then `.success` with the stored object's
/// metadata, or `.failure` with the error (`cancelled` after `cancel()`).
///
/// Before its object becomes visible, a task waits until the handlers of the events it has
/// reported so far have run on the callback queue, so a `cancel()` from a `.progress` handler,
/// even of the last piece, fails the task with `cancelled` (a local bucket then stores nothing).
public final class StorageUploadTask: StorageObservableTask, StorageTaskManagement, @unchecked Sendable {
    enum Content {
        case data(Data)
        case file(URL)
        /// A job's file, opened and checked by the job (`ByteSource.openWalked`), or why it could
        /// not be opened (the task fails with it, as its observers and journal hear); its path.
        case source(Result<ByteSource, StorageFailure>, path: String)
    }

    private let content: Content
    private let attributes: ObjectResource
    private let control: TransferControl
    /// The backend's session id once started: what a journal keeps to resume after a crash.
    public private(set) var sessionID: String? {
        get { lock.withLock { _sessionID } }
        set { lock.withLock { _sessionID = newValue } }
    }
    private var _sessionID: String?
    /// The session `checkpoint()` left on the server for a later process, once the task ended so.
    public private(set) var keptSession: String? {
        get { lock.withLock { _keptSession } }
        set { lock.withLock { _keptSession = newValue } }
    }
    private var _keptSession: String?
    /// Awaited once a session another process can continue has started, before its first byte
    /// moves (`onSessionStarted`).
    private var sessionStarted: (@Sendable (String) async -> Void)?
    /// The byte count of the last progress event; -1 before the first.
    private var reported: Int64 = -1
    override var hasReportedProgress: Bool { reported >= 0 }

    /// Has the upload wait for `handler` once it has started a session another process can
    /// continue (its id), before the first byte is sent: a journal commits the id there, so a
    /// process killed from then on leaves the session to the next (a shared run's worker taking
    /// the file over continues it). Package API, for the job runner; set before the task starts.
    package func onSessionStarted(_ handler: @escaping @Sendable (String) async -> Void) {
        lock.withLock { sessionStarted = handler }
    }

    /// A session to continue instead of starting one (Hoist: resume after a crash).
    private let resumeID: String?

    /// Whether an object already stored with these bytes counts as the upload (see `finishedEarlier`).
    private let unlessStored: Bool

    /// - Parameter size: the file's size when the caller has just read it (no `stat` to ask).
    init(reference: StorageReference, content: Content, metadata: StorageMetadata?, resuming resumeID: String? = nil,
         unlessStored: Bool = false, size: Int64? = nil) {
        self.unlessStored = unlessStored
        self.content = content
        self.resumeID = resumeID
        self.attributes = metadata?.resource.writable ?? ObjectResource()
        let storage = reference.storage
        let deliveries = PendingDeliveries()
        // Before the object is stored, the queue catches up only when it has something of this
        // task's still to run.
        control = TransferControl(
            limiter: storage.bandwidthLimiter, fence: storage.transferFence, chunkSize: storage.effectiveChunkSize,
            observerQueue: { deliveries.any ? storage.callbackQueue : nil })
        super.init(reference: reference, deliveries: deliveries)
        // Known from the start, so a progress observer added early sees the real total.
        switch content {
        case .data(let data): total = Int64(data.count)
        // The size the caller gave, else one stat (the checks come when the task starts: `prepare`).
        case .file(let url):
            total = size ?? (try? Self.localPath(of: url)).flatMap { FileStatus($0) }.flatMap { $0.isRegular ? $0.size : nil } ?? 0
        case .source(let source, _):
            total = size ?? (try? source.get().size) ?? 0
        }
    }

    /// Starts the task: `.resume` fires, then bytes move. `putData` and `putFile` call it;
    /// calling it again does nothing.
    public func enqueue() {
        guard begin() else { return }
        Task.detached { [self] in await run() }
    }

    /// Starts the task in the caller's own task and returns its last snapshot (`.success` or
    /// `.failure`) once it has ended; the task must not have been started. For a scheduler
    /// that runs many uploads: `enqueue` hands the task to a task of its own, and an observer
    /// of its end hears of it on the callback queue, two thread hand-offs per file that this
    /// skips. Observers still get every event on the callback queue, in order; the caller may
    /// learn of the end before they do (`JobRunner` waits for the queue before the job ends).
    /// `started` runs once the task is running, before any byte moves (a scheduler pauses it
    /// there when it must).
    package func runToEnd(started: () -> Void = {}) async -> StorageTaskSnapshot {
        guard begin() else { preconditionFailure("runToEnd() of an upload task that had been started") }
        started()
        await run()
        return snapshot
    }

    /// Moves from not started to running, telling `.resume`; false when already started.
    private func begin() -> Bool {
        transition(.resume) {
            guard state == .unknown else { return false }
            state = .running
            return true
        }
    }

    /// Stops moving bytes until `resume()`. Does nothing unless the task is running.
    public func pause() {
        transition(.pause) {
            guard state == .running else { return false }
            state = .paused
            control.pause()
            return true
        }
    }

    /// Continues a paused task from where it stopped. Does nothing unless paused.
    public func resume() {
        transition(.resume) {
            guard state == .paused else { return false }
            state = .running
            control.resume()
            return true
        }
    }

    /// Ends the task: nothing is left in the bucket and it fails with `cancelled`.
    /// Does nothing once the task has finished, or once its object is being stored.
    public func cancel() {
        control.cancel()
    }

    /// Ends the task as `cancel()` does, but leaves its session on the server (when a later
    /// process can continue it: `keptSession`), for the next process to resume: a watcher
    /// stopped by SIGTERM. Package API, for the job runner.
    package func checkpoint() {
        control.cancel(keepingSession: true)
    }

    // MARK: - The transfer

    /// How many times a task uploads its file again from zero after the stored object did not match it.
    static var checksumRestarts: Int { UploadDriver.checksumRestarts }

    /// Prepares the upload and hands it to its driver (`UploadDriver`: retries and resume, in
    /// `StorageFailure`s); the public `NSError` is made here, at the end.
    private func run() async {
        let driver: UploadDriver
        do {
            let (source, path, attributes) = try await prepare()
            lock.withLock { total = source.size }
            driver = UploadDriver(backend: reference.storage.backend, policy: reference.storage.uploadRetryPolicy, control: control,
                                  source: source, path: path, attributes: attributes, resumeID: resumeID, unlessStored: unlessStored,
                                  reports: .init(session: { [weak self] in self?.sessionID = $0 },
                                                 sessionStarted: { [weak self] id in await self?.lock.withLock({ self?.sessionStarted })?(id) },
                                                 progress: { [weak self] sent in self?.report(sent) },
                                                 retry: { [weak self] in self?.reportRetry(attempt: $0, delay: $1, after: $2) },
                                                 kept: { [weak self] in self?.keptSession = $0 }))
        } catch {
            return fail(control.isCancelled ? TransferControl.cancelledError : NSError.storage(error))
        }
        do throws(StorageFailure) {
            succeed(try await driver.run())
        } catch {
            fail(control.isCancelled ? TransferControl.cancelledError : NSError.storage(error))
        }
    }

    /// The bytes, the object path and the metadata to send.
    private func prepare() async throws -> (ByteSource, String, ObjectResource) {
        try await control.checkpoint()
        guard let path = reference.path.object else {
            throw StorageErrorCode.invalidArgument.error(
                "Cannot upload to the root of bucket \(reference.bucket): create a reference below it, "
                    + "such as storage.reference().child(\"file.png\").",
                userInfo: ["bucket": reference.bucket])
        }
        // Cloud Storage's naming rules, for every backend: a NUL would also make `a\0b` the local
        // file `a`, a newline a second header line.
        if let control = path.unicodeScalars.first(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw StorageErrorCode.invalidArgument.error(
                "Object name \(path.debugDescription) contains the control character U+\(String(format: "%04X", control.value)): "
                    + "Cloud Storage object names cannot.", userInfo: ["bucket": reference.bucket])
        }
        guard path.utf8.count <= 1024 else {
            throw StorageErrorCode.invalidArgument.error(
                "Object name '\(path.prefix(60))...' is \(path.utf8.count) bytes long: Cloud Storage object names are at most 1024 bytes.",
                userInfo: ["bucket": reference.bucket])
        }
        let source: ByteSource
        let filePath: String
        switch content {
        case .data(let data):
            return (ByteSource(data: data), path, attributes)
        case .file(let url):
            do {
                filePath = try Self.localPath(of: url)
                source = try ByteSource(regularFileAt: filePath)
            } catch let failure as StorageFailure where failure.code == .objectNotFound || failure.code == .invalidArgument {
                // Missing, not a regular file (a folder, a link): FirebaseStorage's one error.
                throw Self.unreachable(url)
            } catch let error as NSError where StorageErrorCode(of: error) == .objectNotFound
                || StorageErrorCode(of: error) == .invalidArgument {
                throw Self.unreachable(url)
            }
        case .source(let opened, let openedPath):
            source = try opened.get()
            filePath = openedPath
        }
        var attributes = self.attributes
        if attributes.contentType == nil {
            attributes.contentType = ContentType.forPath(filePath) ?? ContentType.forPath(path)
        }
        return (source, path, attributes)
    }

    /// Whether an absolute path is in standard form already: no "." or ".." part, no empty part
    /// (a "//" or a trailing "/"), so standardizing it would give it back unchanged.
    static func isStandard(_ path: String) -> Bool {
        var bytes = path.utf8.makeIterator()
        guard bytes.next() == UInt8(ascii: "/") else { return false }
        var length = 0
        var dots = 0
        while true {
            let byte = bytes.next()
            if byte == nil || byte == UInt8(ascii: "/") {
                if length == 0 { return byte == nil && path.utf8.count == 1 }
                if dots == length, length <= 2 { return false }
                if byte == nil { return true }
                length = 0
                dots = 0
            } else {
                length += 1
                if byte == UInt8(ascii: ".") { dots += 1 }
            }
        }
    }

    /// FirebaseStorage's error for a file URL that is missing, a directory, a symbolic link or
    /// not a file URL at all.
    static func unreachable(_ url: URL) -> NSError {
        StorageError.unknown(
            message: "File at URL: \(url.absoluteString) is not reachable. "
                + "Ensure file URL is not a directory, symbolic link, or invalid url.",
            serverError: [:]) as NSError
    }

    /// A progress event, unless paused; bytes moved while paused are reported on resume's next event.
    private func report(_ sent: Int64) {
        transition(.progress) {
            completed = max(completed, sent)
            // Coalesced: an event per 1/1000 of the object (at least 256 KiB, the smallest chunk)
            // and at the end, however the engine hands bytes over (64 KiB at a time).
            let step = max(256 << 10, total / 1000)
            guard state == .running, completed > reported,
                  completed - reported >= step || completed == total || reported < 0 else { return false }
            reported = completed
            return true
        }
    }

    private func succeed(_ resource: ObjectResource) {
        // The 100% event fires exactly once, also for an empty object.
        transition(.progress) {
            guard !state.isFinished, reported != total else { return false }
            completed = total
            reported = total
            return true
        }
        transition(.success) {
            guard !state.isFinished else { return false }
            state = .success
            result = resource
            return true
        }
    }

    private func fail(_ error: NSError) {
        transition(.failure) {
            guard !state.isFinished else { return false }
            state = .failed
            self.error = error
            return true
        }
    }

    /// The local path of a `file:` URL or a relative URL such as `URL(string: "path/to/image")`.
    static func localPath(of url: URL) throws -> String {
        if url.isFileURL {
            // Standardizing costs 3% of a small upload's CPU; a job's paths are standard already.
            let path = url.path
            return isStandard(path) ? path : url.standardizedFileURL.path
        }
        guard url.scheme == nil else {
            throw StorageErrorCode.invalidArgument.error("putFile needs a file URL, not \(url.absoluteString).")
        }
        let relative = url.path.removingPercentEncoding ?? url.path
        if relative.hasPrefix("/") { return relative }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
            .appendingPathComponent(relative).standardizedFileURL.path
    }
}
