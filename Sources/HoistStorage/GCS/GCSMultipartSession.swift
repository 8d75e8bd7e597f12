import Foundation
import HoistHTTP

/// A small object sent in one `uploadType=multipart` request: the metadata JSON, then the bytes.
/// There is nothing on the server until the request completes, so nothing to resume or abandon.
struct GCSMultipartSession: UploadSession {
    let backend: GCSBackend
    let resource: ObjectResource
    let size: Int64
    let id = "multipart:" + RandomID.lowercased()
    private let frontier = ChecksumFrontier()

    init(backend: GCSBackend, resource: ObjectResource, size: Int64) {
        self.backend = backend
        self.resource = resource
        self.size = size
    }

    func confirmedOffset() async throws -> Int64 { 0 }

    func send(
        from source: ByteSource, at offset: Int64, control: TransferControl, progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> SendOutcome {
        let boundary = "hoist-" + RandomID.lowercased()
        // Built as bytes, made `Data` once (`Data(string.utf8)` takes a generic, casting path).
        var bytes = [UInt8]()
        bytes.reserveCapacity(1024)
        bytes += "--\(boundary)\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".utf8
        resource.appendJSON(to: &bytes)
        bytes += "\r\n--\(boundary)\r\nContent-Type: \(resource.contentType ?? ContentType.fallback)\r\n\r\n".utf8
        let head = Data(bytes)
        let tail = Data(Array("\r\n--\(boundary)--\r\n".utf8))
        let bucket = GCSBackend.encode(backend.bucket)
        var request = HTTPRequest(
            method: "POST", url: "\(backend.configuration.endpoint)/upload/storage/v1/b/\(bucket)/o?uploadType=multipart",
            headers: [("Content-Type", "multipart/related; boundary=\(boundary)")])
        request.body = [.data(head), source.bodyPart(from: 0), .data(tail)]
        let headLength = Int64(head.count)
        let size = self.size
        let frontier = self.frontier
        let hooks = TransferHooks(
            onContentBytes: { bytes, position in frontier.add(bytes, at: position) },
            onUploadProgress: { sent in progress(min(size, max(0, sent - headLength))) },
            control: control,
            beforeEnd: { source.unchangedOrWhy() })
        let response = try await backend.send(request, hooks: hooks)
        guard response.status == 200 || response.status == 201 else {
            throw backend.failure(response, object: resource.name, bucketLevel: true)
        }
        let stored = try await backend.verify(
            backend.decodeResource(response), against: frontier, source: source, path: resource.name)
        return .finished(stored)
    }

    func abandon() async {}
}
