import Foundation
import HoistHTTP
import Synchronization

/// A parallel composite upload (gcloud's): a large file in parts, each a temporary component
/// object under `hoist-parallel-uploads/TOKEN/` sent through its own resumable session, up to
/// `parallelUploadStreams` at once; then joined by `compose`, 32 sources a request, into the
/// object; then the components are deleted. The object is checked by size and by the CRC32C
/// combined from the parts' (composite objects have no MD5). Its `id` names every part's
/// session: a later process continues each part from the offset its server confirms.
final class GCSParallelSession: UploadSession {
    /// What the session is: the object, its size, the parts' size, the components' token, and one
    /// resumable session URL per part. Its text is the `id` a journal keeps.
    struct Plan: Sendable, Equatable {
        static let prefix = "gcs-parallel1 "
        /// Where components live: a prefix users recognise (and may give a lifecycle rule).
        static let folder = "hoist-parallel-uploads/"
        static let maximumParts = 1024
        let path: String
        let size: Int64
        let partSize: Int64
        let token: String
        var urls: [String]

        var partCount: Int { Self.partCount(size: size, partSize: partSize) }

        static func partCount(size: Int64, partSize: Int64) -> Int {
            partSize > 0 ? Int((size + partSize - 1) / partSize) : 0
        }

        func range(of part: Int) -> (offset: Int64, length: Int64) {
            let offset = Int64(part) * partSize
            return (offset, min(partSize, size - offset))
        }

        func component(_ part: Int) -> String { "\(Self.folder)\(token)/\(String(format: "%04d", part))" }

        var id: String { Self.prefix + (["\(size)", "\(partSize)", token, GCSBackend.encode(path)] + urls).joined(separator: " ") }

        /// A journal's id read back: every field checked (sizes in bounds, a token of `[a-z0-9-]`,
        /// one URL per part); nil for anything else. The URLs are checked by the backend.
        init?(id: String) {
            guard id.hasPrefix(Self.prefix), id.utf8.count <= 1 << 20 else { return nil }
            let fields = id.dropFirst(Self.prefix.count).split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            // Sizes within Cloud Storage's 5 TiB: no sum below can overflow.
            guard fields.count >= 6, let size = Int64(fields[0]), let partSize = Int64(fields[1]), size > 0, size <= 5 << 40, partSize >= 1,
                  partSize <= size, let path = fields[3].removingPercentEncoding, !path.isEmpty,
                  (1...64).contains(fields[2].count), fields[2].utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) || $0 == 0x2D })
            else { return nil }
            let count = Self.partCount(size: size, partSize: partSize)
            guard (2...Self.maximumParts).contains(count), fields.count == 4 + count else { return nil }
            self.init(path: path, size: size, partSize: partSize, token: fields[2], urls: Array(fields[4...]))
        }

        init(path: String, size: Int64, partSize: Int64, token: String, urls: [String]) {
            self.path = path
            self.size = size
            self.partSize = partSize
            self.token = token
            self.urls = urls
        }
    }

    private struct State {
        var plan: Plan
        var parts: [GCSResumableSession]
        /// Each part's confirmed offset, when known (nil: ask its session).
        var offsets: [Int64?]
        /// Finished components and the CRC32C of their bytes.
        var done: [Int: (resource: ObjectResource, crc32c: UInt32)] = [:]
        /// Intermediate objects of a compose in rounds (more than 32 parts).
        var intermediates: [String] = []
        /// Components found stored whole for parts whose session the server forgot (it does
        /// once a session finished): taken once their bytes' CRC32C is the slice's.
        var found: [Int: ObjectResource] = [:]
    }
    private let backend: GCSBackend
    var continuesElsewhere: Bool { true }
    /// The object's metadata, download token included (the components' lack it).
    private let resource: ObjectResource
    private let state: Mutex<State>

    var id: String { state.withLock { $0.plan.id } }

    init(backend: GCSBackend, plan: Plan, resource: ObjectResource, started: Bool) {
        self.backend = backend
        self.resource = resource
        let parts = plan.urls.indices.map { part in
            GCSResumableSession(backend: backend, id: plan.urls[part], path: plan.component(part), size: plan.range(of: part).length,
                                contentType: resource.contentType, ownConnection: true)
        }
        state = Mutex(State(plan: plan, parts: parts, offsets: plan.urls.map { _ in started ? 0 : nil }))
    }

    /// The components' metadata: the object's, without its download token (a component is
    /// readable by no Firebase link) and under its own name.
    static func componentResource(_ resource: ObjectResource, name: String) -> ObjectResource {
        var component = resource
        component.name = name
        component.metadata?[ObjectResource.downloadTokensKey] = nil
        if component.metadata?.isEmpty == true { component.metadata = nil }
        return component
    }

    /// Starts a session per part, all at once.
    static func start(backend: GCSBackend, path: String, resource: ObjectResource, size: Int64, partSize: Int64) async throws
        -> GCSParallelSession
    {
        var plan = Plan(path: path, size: size, partSize: partSize, token: RandomID.lowercased(), urls: [])
        let count = plan.partCount
        plan.urls = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for part in 0..<count {
                let name = plan.component(part)
                let length = plan.range(of: part).length
                group.addTask {
                    (part, try await backend.startSession(to: name, resource: componentResource(resource, name: name), size: length))
                }
            }
            var urls = [String](repeating: "", count: count)
            for try await (part, url) in group { urls[part] = url }
            return urls
        }
        return GCSParallelSession(backend: backend, plan: plan, resource: resource, started: true)
    }

    /// The bytes the parts' servers hold, in all: each part's session asked (a part whose session
    /// is gone is found stored whole as its component, or sent again in a new session).
    func confirmedOffset() async throws -> Int64 {
        let (plan, pending) = state.withLock { state in (state.plan, state.plan.urls.indices.filter { state.done[$0] == nil }) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for part in pending { group.addTask { try await self.refresh(part) } }
            try await group.waitForAll()
        }
        return state.withLock { state in
            plan.urls.indices.reduce(Int64(0)) { sum, part in sum + (state.done[part] != nil ? plan.range(of: part).length : state.offsets[part] ?? 0) }
        }
    }

    /// Asks one part's session where it stands.
    private func refresh(_ part: Int) async throws {
        let (session, plan) = state.withLock { ($0.parts[part], $0.plan) }
        do {
            let offset = try await session.confirmedOffset()
            state.withLock { $0.offsets[part] = offset }
        } catch let failure as StorageFailure where failure.code == .objectNotFound || failure.httpStatus == 410 {
            // The session is gone: finished (servers forget a finished session) or expired.
            let name = plan.component(part)
            let length = plan.range(of: part).length
            if let stored = try? await backend.metadata(of: name), stored.size == length, stored.crc32c != nil {
                state.withLock { state in
                    state.found[part] = stored
                    state.offsets[part] = length
                }
                return
            }
            try await restart(part)
        }
    }

    /// A new session for one part, from its first byte.
    private func restart(_ part: Int) async throws {
        let plan = state.withLock { $0.plan }
        let name = plan.component(part)
        let length = plan.range(of: part).length
        let url = try await backend.startSession(to: name, resource: Self.componentResource(resource, name: name), size: length)
        state.withLock { state in
            state.plan.urls[part] = url
            state.parts[part] = GCSResumableSession(backend: backend, id: url, path: name, size: length, contentType: resource.contentType,
                                                    ownConnection: true)
            state.offsets[part] = 0
            state.found[part] = nil
        }
    }

    /// A component found stored for a part: taken when its CRC32C is the slice's (read here);
    /// otherwise deleted, and the part sent again.
    private func takeFound(_ part: Int, slice: ByteSource, meter: PartMeter) async throws -> Bool {
        guard let stored = state.withLock({ $0.found[part] }) else { return false }
        let frontier = ChecksumFrontier()
        try frontier.catchUp(to: slice.size, from: slice)
        if stored.crc32c == frontier.crc32c {
            state.withLock { state in
                state.done[part] = (stored, frontier.crc32cValue)
                state.found[part] = nil
            }
            meter.finished(part, length: slice.size)
            return true
        }
        try? await backend.delete(stored.name ?? state.withLock { $0.plan.component(part) }, generation: stored.generation)
        try await restart(part)
        return false
    }

    func send(from source: ByteSource, at offset: Int64, control: TransferControl, progress: @escaping @Sendable (Int64) -> Void)
        async throws -> SendOutcome
    {
        let plan = state.withLock { $0.plan }
        guard source.size == plan.size else {
            await abandon()
            throw StorageFailure(.nonMatchingChecksum, "The parallel upload of \(plan.path) was for \(plan.size) bytes; the file has "
                                    + "\(source.size). Its components were deleted; uploading again from zero.",
                                 details: ["bucket": backend.bucket, "object": plan.path])
        }
        let meter = PartMeter(base: state.withLock { state in state.done.keys.reduce(0) { $0 + plan.range(of: $1).length } },
                              report: progress)
        for part in plan.urls.indices { if let held = state.withLock({ $0.done[part] == nil ? $0.offsets[part] : nil }) { meter.sent(part, held) } }
        do {
            try await sendParts(plan, source: source, control: control, meter: meter)
        } catch let failure as StorageFailure where failure.code == .nonMatchingChecksum {
            // A component is not the file's bytes (they changed, or the wire flipped one): the
            // task starts again from zero, so no component of this session may stay.
            await abandon()
            throw failure
        }
        return .finished(try await composeAndVerify(source: source, control: control))
    }

    /// Every part not yet stored, up to the streams' count at once. A part that fails is tried
    /// again alone (`partRetries`) while the others go on; the first failure that remains ends
    /// the `send` once the parts in flight have ended (what they sent stays, for the next try).
    private func sendParts(_ plan: Plan, source: ByteSource, control: TransferControl, meter: PartMeter) async throws {
        let streams = max(1, backend.configuration.parallelUploadStreams)
        var failure: (any Error)?
        await withTaskGroup(of: (any Error)?.self) { group in
            var running = 0
            for part in plan.urls.indices where state.withLock({ $0.done[part] == nil }) {
                if running >= streams, let ended = await group.next() {
                    running -= 1
                    if let ended { failure = failure ?? ended }
                }
                if failure != nil || control.isCancelled { break }
                group.addTask {
                    do { try await self.sendPartRetrying(part, source: source, control: control, meter: meter) } catch { return error }
                    return nil
                }
                running += 1
            }
            for await ended in group { if let ended { failure = failure ?? ended } }
        }
        if control.isCancelled { throw TransferControl.cancelledError }
        if let failure { throw failure }
    }

    /// How often one part is tried again before its failure ends the `send` (and the task's
    /// own retries take over).
    static let partRetries = 3

    private func sendPartRetrying(_ part: Int, source: ByteSource, control: TransferControl, meter: PartMeter) async throws {
        let policy = RetryPolicy(initialDelay: 0.25, maximumDelay: 4)
        var attempt = 0
        while true {
            do {
                return try await sendPart(part, source: source, control: control, meter: meter)
            } catch let failure as StorageFailure where failure.retryable && attempt < Self.partRetries && !control.isCancelled {
                attempt += 1
                state.withLock { $0.offsets[part] = nil }
                try await control.sleep(policy.delay(attempt: attempt, retryAfter: failure.retryAfter.map { min($0, 30) }))
            }
        }
    }

    /// Sends one part to its end: its component stored, checked by size and CRC32C.
    private func sendPart(_ part: Int, source: ByteSource, control: TransferControl, meter: PartMeter) async throws {
        if state.withLock({ $0.offsets[part] }) == nil { try await refresh(part) }
        let (start, length) = state.withLock { $0.plan.range(of: part) }
        let slice = source.slice(from: start, length: length)
        if try await takeFound(part, slice: slice, meter: meter) { return }
        let session = state.withLock { $0.parts[part] }
        var offset = state.withLock { $0.offsets[part] } ?? 0
        while true {
            try await control.checkpoint()
            switch try await session.send(from: slice, at: offset, control: control, progress: { meter.sent(part, $0) }) {
            case .partial(let confirmed):
                guard confirmed > offset else {
                    throw StorageFailure(.unknown, "The server took none of part \(part + 1)'s bytes from offset \(offset).", retryable: true)
                }
                offset = confirmed
                state.withLock { $0.offsets[part] = confirmed }
            case .finished(let component):
                state.withLock { $0.done[part] = (component, session.crc32cValue) }
                meter.finished(part, length: length)
                return
            }
        }
    }

    /// Joins the components (32 at a time; in rounds through intermediate objects when there are
    /// more), checks the object against the parts' combined CRC32C, and deletes the components.
    private func composeAndVerify(source: ByteSource, control: TransferControl) async throws -> ObjectResource {
        let (plan, done) = state.withLock { ($0.plan, $0.done) }
        var crc: UInt32 = 0
        for part in plan.urls.indices { crc = Checksums.crc32cCombine(crc, done[part]?.crc32c ?? 0, secondLength: plan.range(of: part).length) }
        let expected = Checksums.base64(crc32c: crc)
        if let why = source.unchangedOrWhy() {
            await abandon()
            throw StorageFailure(.invalidArgument, why, details: ["bucket": backend.bucket, "object": plan.path])
        }
        try await control.checkpoint()
        var sources = plan.urls.indices.map { plan.component($0) }
        var round = 0
        let composed: ObjectResource
        do {
            while sources.count > 32 {
                var next: [String] = []
                for (index, start) in stride(from: 0, to: sources.count, by: 32).enumerated() {
                    let name = "\(Plan.folder)\(plan.token)/r\(round)-\(String(format: "%04d", index))"
                    state.withLock { $0.intermediates.append(name) }
                    _ = try await backend.compose(Array(sources[start..<min(start + 32, sources.count)]), into: name,
                                                  resource: Self.componentResource(resource, name: name))
                    next.append(name)
                }
                sources = next
                round += 1
            }
            var final = resource
            final.name = plan.path
            composed = try await backend.compose(sources, into: plan.path, resource: final)
        } catch let failure as StorageFailure where failure.code == .objectNotFound {
            // A component is gone: an earlier process composed the object, then died deleting them.
            guard let stored = try? await backend.metadata(of: plan.path), stored.size == plan.size, stored.crc32c == expected else {
                await abandon()
                throw StorageFailure(.nonMatchingChecksum, "A component of the parallel upload of \(plan.path) is gone; uploading again.",
                                     details: ["bucket": backend.bucket, "object": plan.path])
            }
            await deleteComponents()
            return stored
        }
        await deleteComponents()
        return try await backend.verify(composed, crc32c: expected, size: plan.size, path: plan.path)
    }

    /// Deletes every component and intermediate object (each tried twice; what is left is
    /// named in the docs: a lifecycle rule on the prefix ends it).
    private func deleteComponents() async {
        let (plan, intermediates) = state.withLock { ($0.plan, $0.intermediates) }
        let names = plan.urls.indices.map { plan.component($0) } + intermediates
        await withTaskGroup(of: Void.self) { group in
            for name in names {
                group.addTask {
                    for _ in 0..<2 {
                        if (try? await self.backend.delete(name, generation: nil)) != nil { return }
                    }
                }
            }
        }
    }

    /// Gives every part's session up and deletes the components stored: nothing is left. A part
    /// cut off by a cancel after its last byte left may still become a component as the server
    /// finishes reading it: those parts' components are deleted once more, a moment later.
    func abandon() async {
        let (parts, unfinished) = state.withLock { state in (state.parts, state.plan.urls.indices.filter { state.done[$0] == nil }) }
        await withTaskGroup(of: Void.self) { group in
            for part in parts { group.addTask { await part.abandon() } }
        }
        await deleteComponents()
        guard !unfinished.isEmpty else { return }
        try? await Task.sleep(for: .milliseconds(250))
        let plan = state.withLock { $0.plan }
        await withTaskGroup(of: Void.self) { group in
            for part in unfinished { group.addTask { try? await self.backend.delete(plan.component(part), generation: nil) } }
        }
    }
}

extension GCSBackend {
    /// Opens a resumable session for `path` (`POST ...?uploadType=resumable` with the metadata):
    /// its URL, checked as every session URL is (`sessionURLProblem`).
    func startSession(to path: String, resource: ObjectResource, size: Int64) async throws -> String {
        var request = HTTPRequest(
            method: "POST", url: "\(configuration.endpoint)/upload/storage/v1/b/\(Self.encode(bucket))/o?uploadType=resumable",
            headers: [("Content-Type", "application/json; charset=UTF-8"), ("X-Upload-Content-Type", resource.contentType ?? ContentType.fallback),
                      ("X-Upload-Content-Length", "\(size)")])
        request.body = [.data(try JSONEncoder().encode(resource))]
        let response = try await send(request)
        guard response.status == 200 || response.status == 201, let location = response.header("Location") else {
            throw failure(response, object: path, bucketLevel: true)
        }
        if let problem = sessionURLProblem(location) {
            throw StorageFailure(.unknown, "Cloud Storage answered a session URL that Hoist does not use: \(problem)",
                                 details: ["bucket": bucket, "object": path])
        }
        return location
    }

    /// Joins `sources` (at most 32 objects of this bucket, in order) into `name` with `resource`'s
    /// metadata (`POST .../o/NAME/compose`): the new object's resource.
    func compose(_ sources: [String], into name: String, resource: ObjectResource) async throws -> ObjectResource {
        struct Source: Encodable { let name: String }
        struct Body: Encodable {
            let sourceObjects: [Source]
            let destination: ObjectResource
        }
        var request = HTTPRequest(method: "POST", url: objectURL(name) + "/compose", headers: [("Content-Type", "application/json; charset=UTF-8")])
        request.body = [.data(try JSONEncoder().encode(Body(sourceObjects: sources.map(Source.init), destination: resource.writable)))]
        let response = try await send(request)
        guard response.status == 200 else { throw failure(response, object: name, bucketLevel: false) }
        return try decodeResource(response)
    }

    /// The part size of a parallel upload of `size` bytes, or nil for one stream: at or above
    /// `parallelUploadThreshold`, `parallelUploadParts` parts (by default one per stream), each
    /// a multiple of 256 KiB, at most `Plan.maximumParts`.
    func parallelPartSize(for size: Int64) -> Int64? {
        guard let threshold = configuration.parallelUploadThreshold, size >= threshold, size > 1 else { return nil }
        let parts = Int64(min(GCSParallelSession.Plan.maximumParts, max(2, configuration.parallelUploadParts ?? configuration.parallelUploadStreams)))
        let quantum: Int64 = 256 << 10
        let partSize = max(quantum, ((size + parts - 1) / parts + quantum - 1) / quantum * quantum)
        let count = GCSParallelSession.Plan.partCount(size: size, partSize: partSize)
        return (2...GCSParallelSession.Plan.maximumParts).contains(count) ? partSize : nil
    }
}
