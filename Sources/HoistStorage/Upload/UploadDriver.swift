import Foundation

/// The retry and resume loop of one upload, apart from the public task that reports it: start or
/// continue a session, send from the confirmed offset, retry what the backend marks transient
/// (backoff, `Retry-After`, the policy's time budget), upload again from zero after
/// `nonMatchingChecksum`, and take an object an earlier process stored as this upload. It speaks
/// `StorageFailure` only; `StorageUploadTask` turns its failure into the public `NSError`.
struct UploadDriver {
    let backend: any StorageBackend
    let policy: RetryPolicy
    let control: TransferControl
    let source: ByteSource
    let path: String
    let attributes: ObjectResource
    /// A session an earlier process started, to continue.
    let resumeID: String?
    /// Whether an object already stored with these bytes counts as the upload (`finishedEarlier`).
    let unlessStored: Bool
    /// What the driver tells as it goes: a session started or continued (its id), bytes the
    /// backend took, and a wait before a retry.
    struct Reports {
        var session: (String) -> Void = { _ in }
        /// A session another process can continue has started: awaited before its first byte.
        var sessionStarted: @Sendable (String) async -> Void = { _ in }
        var progress: @Sendable (Int64) -> Void = { _ in }
        var retry: (_ attempt: Int, _ delay: TimeInterval, _ failure: StorageFailure) -> Void = { _, _, _ in }
        /// The session a checkpoint left on the server for a later process (its id).
        var kept: (String) -> Void = { _ in }
    }
    var reports = Reports()

    /// How many times an upload starts again from zero after the stored object did not match it
    /// (a corrupted transfer, a truncated or stale object from an earlier run).
    static let checksumRestarts = 2

    /// Where a run of the loop stands.
    private struct Attempt {
        var session: (any UploadSession)?
        var failures = 0
        var restarts = 0
        var offset: Int64 = 0
        var resumable: String?
        /// An earlier process may have stored it: asked once, before a new session starts.
        var mayBeStored: Bool
    }

    /// Uploads to its end: the stored object, once the callback queue caught up with what was
    /// reported (`commitCheckpoint`). A session left behind by a failure is abandoned.
    func run() async throws(StorageFailure) -> ObjectResource {
        var attempt = Attempt(resumable: resumeID, mayBeStored: unlessStored)
        let deadline = policy.deadline()
        do {
            while true {
                do {
                    if let stored = try await step(&attempt) {
                        try await control.commitCheckpoint()
                        return stored
                    }
                } catch {
                    let failure = Self.failure(error)
                    if failure.code == .nonMatchingChecksum, attempt.restarts < Self.checksumRestarts, !control.isCancelled {
                        // What was stored did not match (GCS deleted that generation; S3 left it,
                        // as its keys have none and it may be an earlier good version); send the
                        // whole file again.
                        attempt = Attempt(session: nil, restarts: attempt.restarts + 1, mayBeStored: false)
                        continue
                    }
                    guard failure.retryable, !control.isCancelled else { throw failure }
                    attempt.failures += 1
                    guard let delay = policy.delay(attempt: attempt.failures, retryAfter: failure.retryAfter, deadline: deadline)
                    else { throw Self.retryLimitExceeded(after: failure) }
                    reports.retry(attempt.failures, delay, failure)
                    try await control.sleep(delay)
                }
            }
        } catch {
            if control.keepsSession, let kept = attempt.session.map({ $0.continuesLater ? $0.id : nil }) ?? attempt.resumable {
                // Checkpointed: a later process continues it from what the server holds.
                reports.kept(kept)
            } else if let session = attempt.session {
                await session.abandon()
            }
            throw control.isCancelled ? StorageFailure(.cancelled, TransferControl.cancelledError.localizedDescription) : Self.failure(error)
        }
    }

    /// One try: the object when stored, nil when more is to be sent.
    private func step(_ attempt: inout Attempt) async throws -> ObjectResource? {
        try await control.checkpoint()
        if attempt.session == nil, let id = attempt.resumable {
            // A session an earlier process started: continue from what the server holds.
            attempt.resumable = nil
            if let resumed = try? await backend.resumeUpload(id: id, for: path, attributes: attributes), let confirmed = try? await resumed.confirmedOffset() {
                attempt.session = resumed
                reports.session(resumed.id)
                attempt.offset = confirmed
            } else {
                // Gone: perhaps that process finished it and died before it could say so.
                attempt.mayBeStored = true
            }
        }
        if attempt.session == nil, attempt.mayBeStored {
            attempt.mayBeStored = false
            // Sending it again would store the object twice.
            if let stored = await Self.finishedEarlier(source, attributes, at: path, backend: backend) { return stored }
        }
        if let current = attempt.session {
            if attempt.failures > 0 { attempt.offset = try await current.confirmedOffset() }
        } else {
            let started = try await backend.startUpload(to: path, attributes: attributes, size: source.size, chunkSize: control.chunkSize)
            attempt.session = started
            reports.session(started.id)
            if started.continuesElsewhere { await reports.sessionStarted(started.id) }
            attempt.offset = 0
        }
        let sending = attempt.session!
        let sentID = sending.id
        switch try await sending.send(from: source, at: attempt.offset, control: control, progress: reports.progress) {
        case .partial(let confirmed) where sending.id != sentID:
            // The session became another (`parallelUploads: auto` going parallel): its id is
            // told, and journaled before its first byte, as a new session's is; it holds
            // `confirmed` bytes, perhaps fewer than the one it replaced.
            reports.session(sending.id)
            if sending.continuesElsewhere { await reports.sessionStarted(sending.id) }
            attempt.offset = confirmed
            return nil
        case .partial(let confirmed):
            guard confirmed > attempt.offset else {
                // Nothing taken: a server answering so for ever would keep the task sending at
                // once, again and again. A transient failure: the retry policy spaces the
                // attempts and bounds them.
                throw StorageFailure(.unknown, "The server took none of the bytes sent from offset \(attempt.offset) "
                                        + "(it holds \(confirmed)).", retryable: true)
            }
            attempt.failures = 0
            attempt.offset = confirmed
            return nil
        case .finished(let resource):
            // A file that changed while it was read never gets here: a backend checks it before
            // the last bytes, so nothing replaces the stored object (the conformance suite's
            // changedWhileReadLeavesTheStoredObject). A change after that check is a newer
            // version, for the next run: the object holds the bytes read, which its checksums
            // matched. A backend whose object is stored by the server's last answer (GCS): a
            // cancel from a handler of the last progress event still wins (`commitCheckpoint`).
            return resource
        }
    }

    /// Any error met as a `StorageFailure`: a backend's as it is, a storage `NSError` by its code
    /// and message, anything else `unknown`.
    static func failure(_ error: any Error) -> StorageFailure {
        if let failure = error as? StorageFailure { return failure }
        let nsError = error as NSError
        guard nsError.domain == StorageErrorDomain, let code = StorageErrorCode(rawValue: nsError.code) else {
            return StorageFailure(.unknown, "\(error)", details: ["ResponseErrorDomain": nsError.domain, "ResponseErrorCode": "\(nsError.code)"])
        }
        var failure = StorageFailure(code, nsError.localizedDescription, httpStatus: nsError.userInfo[StorageErrorResponseCodeKey] as? Int,
                                     responseBody: nsError.userInfo[StorageErrorResponseBodyKey] as? String)
        for (key, value) in nsError.userInfo {
            if let value = value as? String, key != StorageErrorResponseBodyKey, key != NSLocalizedDescriptionKey { failure.details[key] = value }
        }
        return failure
    }

    /// The failure once retrying has taken all its time: the last failure's words, status, body,
    /// bucket and object.
    static func retryLimitExceeded(after error: any Error) -> StorageFailure {
        let last = failure(error)
        var details = ["LastError": last.message]
        for key in ["bucket", "object"] { details[key] = last.details[key] }
        return StorageFailure(.retryLimitExceeded, "Max retry time for operation exceeded, please try again. Last error: \(last.message)",
                              httpStatus: last.httpStatus, responseBody: last.responseBody, details: details)
    }

    /// Whether a session another process started and the server no longer knows (servers may
    /// forget a session once it finished) was finished: the object is stored with these very
    /// bytes (size, then MD5 read from the source; CRC32C for a composite object, which has no
    /// MD5) and this metadata. Nil: send it anew.
    static func finishedEarlier(_ source: ByteSource, _ attributes: ObjectResource, at path: String,
                                backend: any StorageBackend) async -> ObjectResource? {
        // MD5, or CRC32C for an object that has none (a composite object: a parallel upload's).
        guard let stored = try? await backend.metadata(of: path), stored.size == source.size, stored.md5Hash != nil || stored.crc32c != nil,
              attributes.contentType == nil || stored.contentType == attributes.contentType,
              customMetadata(attributes) == customMetadata(stored),
              attributes.cacheControl == stored.cacheControl, attributes.contentDisposition == stored.contentDisposition,
              attributes.contentEncoding == stored.contentEncoding, attributes.contentLanguage == stored.contentLanguage
        else { return nil }
        // Read and hashed whole, off the caller's executor: a job's uploads run on the HTTP
        // engine's thread, and a large file hashed there would hold up every transfer
        // (`VerificationTests.aStoredFileIsHashedOffTheEnginesThread`).
        let matches = await Task.detached {
            guard let reader = try? source.reader(from: 0) else { return false }
            var sums = Checksums()
            while let piece = try? reader.read(upTo: 1 << 20), !piece.isEmpty { sums.update(piece) }
            let same = stored.md5Hash.map { sums.md5Base64() == $0 } ?? (sums.crc32cBase64() == stored.crc32c)
            return reader.offset == source.size && same && source.unchangedOrWhy() == nil
        }.value
        return matches ? stored : nil
    }

    /// Custom metadata as a user set it (without the download token an upload adds).
    private static func customMetadata(_ resource: ObjectResource) -> [String: String] {
        (resource.metadata ?? [:]).filter { $0.key != ObjectResource.downloadTokensKey }
    }
}
