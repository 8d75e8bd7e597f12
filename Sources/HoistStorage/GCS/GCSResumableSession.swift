import Foundation
import HoistHTTP
import Synchronization

/// A resumable upload session: its `id` is the session URL, which survives a restart.
/// The rest of the object goes up in one streamed `PUT` (or `chunkSize` pieces); after a broken
/// connection, a status query says how much the server holds, and sending continues from there.
final class GCSResumableSession: UploadSession {
    let id: String
    private let backend: GCSBackend
    var continuesElsewhere: Bool { true }
    private let frontier = ChecksumFrontier()
    private struct State {
        var path: String?
        var size: Int64?
        var contentType: String?
        /// The object, when a status query found the upload already complete.
        var completed: ObjectResource?
        /// The last status query answered `bytes=0-0`: one byte held, or (gcp-storage-emulator,
        /// for a session that got none) nothing.
        var oneOrNothing = false
    }
    private let state: Mutex<State>

    /// Its data `PUT`s go over a connection of their own (a part of a parallel upload).
    private let ownConnection: Bool

    init(backend: GCSBackend, id: String, path: String?, size: Int64?, contentType: String?, ownConnection: Bool = false) {
        self.backend = backend
        self.id = id
        self.ownConnection = ownConnection
        state = Mutex(State(path: path, size: size, contentType: contentType))
    }

    /// The CRC32C of the bytes counted so far (all of them once the session finished).
    var crc32cValue: UInt32 { frontier.crc32cValue }

    /// Asks the server how many bytes it holds (`PUT` with `Content-Range: bytes */TOTAL`).
    func confirmedOffset() async throws -> Int64 {
        let size = state.withLock { $0.size }
        var request = HTTPRequest(method: "PUT", url: id, headers: [("Content-Range", "bytes */\(size.map(String.init) ?? "*")")])
        request.body = []
        let response = try await backend.send(request)
        switch response.status {
        case 308:
            return try confirmed(response, size: size)
        case 200, 201:
            // Finished already: `send` checks it is this object, with the file's bytes.
            let resource = try backend.decodeResource(response)
            state.withLock { $0.completed = resource }
            return min(max(0, resource.size ?? size ?? 0), size ?? .max)
        default:
            throw backend.failure(response, object: state.withLock { $0.path }, bucketLevel: false)
        }
    }

    func send(
        from source: ByteSource, at held: Int64, control: TransferControl, progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> SendOutcome {
        try await send(from: source, at: held, control: control, chunk: nil, progress: progress)
    }

    /// `send`, its `PUT` at most `chunk` bytes when given (rounded down to 256 KiB, as a
    /// configured chunk size is).
    func send(
        from source: ByteSource, at held: Int64, control: TransferControl, chunk: Int64?, progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> SendOutcome {
        let (path, completed, contentType, oneOrNothing) = state.withLock { state in
            state.size = state.size ?? source.size
            defer { state.oneOrNothing = false }
            return (state.path, state.completed, state.contentType, state.oneOrNothing)
        }
        // `bytes=0-0` is sent from the first byte again: a session that got nothing answers so
        // on gcp-storage-emulator (Cloud Storage leaves the header out), and the server takes a
        // first byte it already holds, as it takes any resent bytes below what it persisted.
        let offset = oneOrNothing && held == 1 ? 0 : held
        guard offset >= 0, offset <= source.size else {
            throw StorageFailure(.unknown, "Cloud Storage confirmed \(offset) bytes of a file of \(source.size).",
                                 details: ["bucket": backend.bucket, "object": path ?? ""])
        }
        // Bytes the server holds that this process never read (a resume after a restart).
        try frontier.catchUp(to: offset, from: source)
        if let completed {
            // The server says the object is finished (perhaps truncated: some servers finalize a
            // session on a status query): it must equal the whole local file.
            return .finished(try await backend.verify(completed, against: frontier, source: source, path: path, madeHere: false))
        }
        let size = source.size
        var length = size - offset
        if let chunk = chunk ?? control.chunkSize ?? backend.configuration.chunkSize, chunk > 0 {
            let rounded = max(256 << 10, chunk / (256 << 10) * (256 << 10))
            if length > rounded { length = rounded }
        }
        let range = size == 0 ? "bytes */0" : "bytes \(offset)-\(offset + length - 1)/\(size)"
        var request = HTTPRequest(method: "PUT", url: id, headers: [
            ("Content-Range", range), ("Content-Type", contentType ?? ContentType.fallback),
        ])
        request.ownConnection = ownConnection
        if length > 0 {
            switch source.bodyPart(from: offset) {
            case .file(let file, let start, _): request.body = [.file(file, offset: start, length: length)]
            case .data(let data, _): request.body = [.data(data.prefix(Int(length)), contentOffset: offset)]
            }
        }
        let frontier = self.frontier
        let base = source.base
        var hooks = TransferHooks(
            onContentBytes: { bytes, position in frontier.add(bytes, at: position - base) },
            onUploadProgress: { sent in progress(offset + sent) },
            control: control)
        if offset + length == size {
            // The last chunk finishes the object: not when the file changed while it was read.
            hooks.beforeEnd = { source.unchangedOrWhy() }
        }
        let response = try await backend.send(request, hooks: hooks)
        switch response.status {
        case 200, 201:
            let stored = try backend.decodeResource(response)
            return .finished(try await backend.verify(stored, against: frontier, source: source, path: path))
        case 308:
            return .partial(try confirmed(response, size: size))
        default:
            throw backend.failure(response, object: path, bucketLevel: false)
        }
    }

    /// Abandons the session (`DELETE` of its URL); nothing is left behind. Errors are ignored:
    /// an unfinished session never becomes an object, and expires on its own.
    func abandon() async {
        _ = try? await backend.send(HTTPRequest(method: "DELETE", url: id))
    }

    /// `Range: bytes=0-N` means N+1 bytes are held; no header means none; nil for anything else.
    static func confirmedBytes(_ range: String?) -> Int64? {
        guard let range else { return 0 }
        guard range.hasPrefix("bytes=0-"), let last = Int64(range.dropFirst("bytes=0-".count)), last >= 0, last < .max else {
            return nil
        }
        return last + 1
    }

    /// The bytes a `308` answer says the server holds: at most the file's `size`. A `Range`
    /// that is not `bytes=0-N`, or says more than the file, is a server's error, not an offset.
    private func confirmed(_ response: HTTPResponse, size: Int64?) throws -> Int64 {
        let range = response.header("Range")
        state.withLock { $0.oneOrNothing = range == "bytes=0-0" }
        guard let held = Self.confirmedBytes(range), held <= size ?? .max else {
            throw StorageFailure(.unknown, "Cloud Storage answered a session's status with Range \(range.map { "\"\(printable($0, limit: 60))\"" } ?? "")"
                                    + (size.map { " for a file of \($0) bytes" } ?? "") + ".",
                                 httpStatus: response.status, details: ["bucket": backend.bucket, "object": state.withLock { $0.path } ?? ""])
        }
        return held
    }
}
