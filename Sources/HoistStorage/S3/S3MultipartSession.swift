import Crypto
import Foundation
import HoistHTTP
import Synchronization

/// A multipart upload: the object in parts of `partSize` bytes, up to `partConcurrency` of them
/// in flight at once, each with `Content-MD5` and `x-amz-checksum-crc32c` (the server refuses a
/// part whose bytes do not match) and its returned ETag compared with the MD5 sent (unless the
/// answer says SSE-KMS or SSE-C, whose ETags are no MD5s: `S3Headers.etagIsMD5`). Complete when
/// every part is there, with the whole object's CRC32C (`FULL_OBJECT`); the object's ETag (the
/// MD5 of the parts' MD5s, and their count) and any whole-object CRC32C the server reports are
/// then checked against the local source before `.finished`, and its size too where the object
/// is read back (`Configuration.readsBackMultipartObjects`, an answer without an ETag, an
/// encrypted object's).
///
/// Its `id` (`Plan.id`) survives a restart: a later process lists the parts the server holds
/// (`ListParts`), keeps those whose ETag is the MD5 (or whose CRC32C is the CRC32C) of its own
/// bytes at that place, and sends only the rest; a held part with other bytes (the file changed
/// between the runs) ends the upload with `nonMatchingChecksum`. `abandon` is `AbortMultipartUpload`.
final class S3MultipartSession: UploadSession {
    let backend: S3Backend
    let plan: Plan
    let path: String
    /// The fields the object was given (nil: a session resumed from its id alone).
    let attributes: ObjectResource?
    let frontier = ChecksumFrontier()
    private struct State {
        /// Parts the server said it holds (from `ListParts`), not yet compared with the source.
        var held: [Int: HeldPart] = [:]
        /// Parts known to hold the source's bytes: their MD5 and CRC32C, and the server's ETag.
        var done: [Int: DonePart] = [:]
        var listed = false
    }

    /// A part the server holds with the source's bytes: their checksums, and the ETag it gave
    /// the part (Complete names it; an encrypted object's is no MD5).
    struct DonePart: Sendable, Equatable {
        var sums: S3Checksums
        var etag: String
    }

    /// A part as `ListParts` describes it: its ETag (an MD5, unless the object is encrypted with
    /// KMS or a customer's key) and the CRC32C the server checked, when it keeps one.
    struct HeldPart: Equatable {
        var etag: S3ETag?
        var crc32c: String?

        /// The ETag's MD5, when it has the form of one.
        var md5: [UInt8]? { etag?.parts == nil ? etag?.digest : nil }

        /// Whether it holds the bytes whose checksums are `sums`: nil when it cannot tell.
        func holds(_ sums: S3Checksums) -> Bool? {
            if md5 == sums.md5 { return true }
            if let crc32c { return crc32c == sums.crc32c }
            return md5 == nil ? nil : false
        }
    }
    private let state: Mutex<State>

    var id: String { plan.id }
    var continuesElsewhere: Bool { true }

    init(backend: S3Backend, plan: Plan, path: String, attributes: ObjectResource?, fresh: Bool) {
        self.backend = backend
        self.plan = plan
        self.path = path
        self.attributes = attributes
        state = Mutex(State(listed: fresh))
    }

    /// Lists the parts the server holds; the confirmed offset is where the first missing part
    /// starts (parts after it may be held too: `send` keeps them).
    func confirmedOffset() async throws -> Int64 {
        let held = try await listParts()
        let prefix = state.withLock { state in
            state.held = held
            state.listed = true
            state.done = state.done.filter { held[$0.key]?.holds($0.value.sums) == true }
            var number = 1
            while number <= plan.partCount, state.done[number] != nil || state.held[number] != nil { number += 1 }
            return number
        }
        return min(plan.size, Int64(prefix - 1) * plan.partSize)
    }

    func send(
        from source: ByteSource, at offset: Int64, control: TransferControl, progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> SendOutcome {
        guard source.size == plan.size else {
            throw StorageFailure(.nonMatchingChecksum, "The upload of \(path) was started for \(plan.size) bytes; the local "
                                    + "file has \(source.size). Uploading again from zero.", details: ["bucket": backend.bucket, "object": path])
        }
        if !state.withLock({ $0.listed }) { _ = try await confirmedOffset() }
        try await sendParts(from: source, control: control, progress: progress)
        // Past this point the object is being made visible: a cancel comes too late.
        try await control.commitCheckpoint()
        return .finished(try await complete(source, parts: state.withLock { $0.done }, path: path, frontier: frontier))
    }

    /// `AbortMultipartUpload`: the parts are removed and the id is no longer known. Errors are
    /// ignored (a lifecycle rule, or a later run's clean-up, ends uploads left behind).
    func abandon() async {
        _ = try? await backend.send("DELETE", key: plan.key, query: [("uploadId", plan.uploadID)])
    }

    // MARK: - Parts

    /// Hashes the source part by part, in order (so the CRC32C frontier counts every byte once),
    /// and sends each part the server lacks, at most `partConcurrency` at once. A part is hashed
    /// off the thread that moves the transfers (`hoist.curl` runs the upload tasks), on the
    /// global concurrent executor, so the parts in flight keep moving meanwhile.
    private func sendParts(from source: ByteSource, control: TransferControl, progress: @escaping @Sendable (Int64) -> Void) async throws {
        let meter = PartMeter(base: state.withLock { state in state.done.keys.reduce(0) { $0 + plan.range(of: $1).length } },
                              report: progress)
        let concurrency = max(1, backend.configuration.partConcurrency)
        try await withThrowingTaskGroup(of: (Int, DonePart).self) { group in
            var running = 0
            for number in 1...plan.partCount {
                if state.withLock({ $0.done[number] != nil }) { continue }
                try await control.checkpoint()
                let (offset, length) = plan.range(of: number)
                let sums = try await withTaskExecutorPreference(globalConcurrentExecutor) { [frontier] in
                    try S3Checksums.part(of: source, from: offset, length: length, frontier: frontier)
                }
                let held = state.withLock { $0.held[number] }
                switch held?.holds(sums) {
                case true?:
                    markDone(number, DonePart(sums: sums, etag: held?.etag?.value ?? SigV4.hex(sums.md5)), meter: meter)
                    continue
                case false?:
                    // The file is not the one this upload began with (and not every server lets
                    // a part be replaced): end the upload; the task starts again from zero.
                    await abandon()
                    throw StorageFailure(
                        .nonMatchingChecksum, "Part \(number) of the upload of \(path) holds other bytes than the local file "
                            + "(it changed since the upload began); the upload was aborted. Uploading again from zero.",
                        details: ["bucket": backend.bucket, "object": path])
                case nil:
                    break
                }
                if running >= concurrency, let (finished, part) = try await group.next() {
                    markDone(finished, part, meter: meter)
                    running -= 1
                }
                group.addTask { [self] in
                    let etag = try await uploadPartRetrying(number, sums: sums, from: source, control: control, meter: meter)
                    return (number, DonePart(sums: sums, etag: etag))
                }
                running += 1
            }
            while let (finished, part) = try await group.next() { markDone(finished, part, meter: meter) }
        }
    }

    private func markDone(_ number: Int, _ part: DonePart, meter: PartMeter) {
        state.withLock { $0.done[number] = part }
        meter.finished(number, length: plan.range(of: number).length)
    }

    /// How often one part is tried again (a 5xx, `SlowDown`, a reset) before the failure ends the
    /// `send` (and the task's own retries take over): the other parts in flight go on meanwhile.
    static let partRetries = 3

    private func uploadPartRetrying(_ number: Int, sums: S3Checksums, from source: ByteSource, control: TransferControl,
                                    meter: PartMeter) async throws -> String {
        let policy = RetryPolicy(initialDelay: 0.25, maximumDelay: 4)
        var attempt = 0
        while true {
            do {
                return try await uploadPart(number, sums: sums, from: source, control: control, meter: meter)
            } catch let failure as StorageFailure where failure.retryable && attempt < Self.partRetries && !control.isCancelled {
                attempt += 1
                try await control.sleep(policy.delay(attempt: attempt, retryAfter: failure.retryAfter.map { min($0, 30) }))
            }
        }
    }

    /// `UploadPart`: the part's bytes with their MD5 (and CRC32C, for an upload created with
    /// them); the ETag answered must be that MD5 unless the answer says it is none (SSE-KMS,
    /// SSE-C: the server checked `Content-MD5` before its 200), and a CRC32C answered ours. The ETag.
    private func uploadPart(_ number: Int, sums: S3Checksums, from source: ByteSource, control: TransferControl, meter: PartMeter) async throws
        -> String
    {
        let (offset, length) = plan.range(of: number)
        let hooks = TransferHooks(onUploadProgress: { sent in meter.sent(number, min(sent, length)) }, control: control,
                                  beforeEnd: { source.unchangedOrWhy() })
        let response = try await backend.send(
            "PUT", key: plan.key, query: [("partNumber", "\(number)"), ("uploadId", plan.uploadID)],
            headers: [("Content-MD5", Data(sums.md5).base64EncodedString())] + (plan.checksummed ? [("x-amz-checksum-crc32c", sums.crc32c)] : []),
            body: [source.bodyPart(from: offset, length: length)],
            hooks: hooks, ownConnection: true)   // each part a TCP stream of its own, not one HTTP/2 connection's stream
        guard response.status == 200 else {
            var failure = backend.failure(response, object: path, bucketLevel: false)
            if failure.code == .nonMatchingChecksum {
                // Bytes changed on the way: this part alone is sent again.
                failure.code = .unknown
                failure.retryable = true
                failure.message = "Part \(number) of \(path) arrived damaged (the server's MD5 differs); sending it again."
            }
            throw failure
        }
        let etag = response.header("ETag").flatMap(S3ETag.init)
        let crc32c = S3Headers.objectCRC32C(response.header("x-amz-checksum-crc32c"), type: nil)
        guard let etag, !S3Headers.etagIsMD5(response) || etag.digest == sums.md5, crc32c == nil || crc32c == sums.crc32c else {
            throw StorageFailure(.unknown, "S3 stored part \(number) of \(path) with an ETag or CRC32C that is not its bytes'; "
                                    + "sending it again.", retryable: true, httpStatus: 200, details: ["bucket": backend.bucket, "object": path])
        }
        return etag.value
    }

    /// Every part the server holds for this upload, by number: those with a number in the plan,
    /// the size the plan gives it, and an ETag, of an MD5's form or with a CRC32C (anything else
    /// is sent again).
    private func listParts() async throws -> [Int: HeldPart] {
        var held: [Int: HeldPart] = [:]
        var marker = 0
        for _ in 0...(plan.partCount / 1000 + 1) {
            let response = try await backend.send("GET", key: plan.key, query: [
                ("uploadId", plan.uploadID), ("max-parts", "1000"), ("part-number-marker", "\(marker)"),
            ])
            guard response.status == 200 else { throw backend.failure(response, object: path, bucketLevel: false) }
            let xml = try backend.parse(response)
            for part in xml.records("*/Part") {
                guard let number = part["PartNumber"].flatMap({ Int($0) }), (1...plan.partCount).contains(number),
                      part["Size"].flatMap({ Int64($0) }) == plan.range(of: number).length
                else { continue }
                let found = HeldPart(etag: part["ETag"].flatMap(S3ETag.init), crc32c: S3Headers.objectCRC32C(part["ChecksumCRC32C"], type: nil))
                guard found.etag != nil, found.md5 != nil || found.crc32c != nil else { continue }
                held[number] = found
            }
            guard xml.first("*/IsTruncated") == "true",
                  let next = xml.first("*/NextPartNumberMarker").flatMap({ Int($0) }), next > marker
            else { break }
            marker = next
        }
        return held
    }
}
