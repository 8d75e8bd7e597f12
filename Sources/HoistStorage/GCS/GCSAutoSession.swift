import Foundation
import Synchronization

/// How `parallelUploads: auto` tells a slow stream: the first `bytes` of a file go as one chunk
/// of its resumable session, timed; below `bytesPerSecond` the file goes parallel.
public struct GCSParallelProbe: Sendable, Equatable {
    public var bytes: Int64
    public var bytesPerSecond: Double

    public init(bytes: Int64, bytesPerSecond: Double) {
        self.bytes = bytes
        self.bytesPerSecond = bytesPerSecond
    }

    /// 8 MiB at 32 MiB/s. Where one connection is capped (a WAN stream: 10 MB/s), parts at once
    /// are 4x faster; where one stream already reaches what the server or the machine takes
    /// (110 MiB/s to fake-gcs-server on this 2-core machine), parts and a compose only cost.
    /// 32 MiB/s (a quarter of a 1 Gbit/s card) lies well between. A slow file pays 8 MiB sent
    /// twice (under a second at 10 MB/s); a fast one an extra `PUT`.
    public static let standard = GCSParallelProbe(bytes: 8 << 20, bytesPerSecond: Double(32 << 20))
}

/// `parallelUploads: auto`: a file from the threshold on starts as one resumable upload of the
/// object, its first `probe.bytes` in one chunk. A stream at `probe.bytesPerSecond` or faster
/// carries on: no part, no compose. A slower one is given up (nothing of an unfinished session
/// is an object) and the file goes up from its first byte as a parallel composite upload
/// (`GCSParallelSession`): the session's `id` becomes the parallel upload's, which the upload
/// loop journals before any part's byte (`UploadDriver`, a `.partial` from a session whose id
/// changed), so a killed run continues and cleans the parts as any parallel upload's. A session
/// continued from a journal is the resumable or the parallel one, never this.
final class GCSAutoSession: UploadSession {
    private enum Phase {
        case probing(GCSResumableSession)
        case streaming(GCSResumableSession)
        /// Parallel, after a probe that had `floor` bytes confirmed (progress does not go back).
        case parallel(GCSParallelSession, floor: Int64)
    }
    private let backend: GCSBackend
    private let path: String
    private let resource: ObjectResource
    private let size: Int64
    private let partSize: Int64
    private let probe: GCSParallelProbe
    private let phase: Mutex<Phase>

    init(backend: GCSBackend, stream: GCSResumableSession, path: String, resource: ObjectResource, size: Int64, partSize: Int64,
         probe: GCSParallelProbe) {
        self.backend = backend
        self.path = path
        self.resource = resource
        self.size = size
        self.partSize = partSize
        self.probe = probe
        phase = Mutex(.probing(stream))
    }

    private var current: any UploadSession {
        phase.withLock { phase in
            switch phase {
            case .probing(let stream), .streaming(let stream): stream
            case .parallel(let parallel, _): parallel
            }
        }
    }

    var id: String { current.id }
    var continuesElsewhere: Bool { true }

    func confirmedOffset() async throws -> Int64 { try await current.confirmedOffset() }

    func abandon() async { await current.abandon() }

    func send(from source: ByteSource, at offset: Int64, control: TransferControl, progress: @escaping @Sendable (Int64) -> Void)
        async throws -> SendOutcome
    {
        switch phase.withLock({ $0 }) {
        case .streaming(let stream):
            return try await stream.send(from: source, at: offset, control: control, progress: progress)
        case .parallel(let parallel, let floor):
            return try await parallel.send(from: source, at: offset, control: control) { progress(max(floor, $0)) }
        case .probing(let stream):
            let clock = ContinuousClock()
            let start = clock.now
            let outcome = try await stream.send(from: source, at: offset, control: control, chunk: probe.bytes, progress: progress)
            guard case .partial(let confirmed) = outcome else { return outcome }
            let elapsed = clock.now - start
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            if Double(confirmed - offset) >= probe.bytesPerSecond * seconds {
                phase.withLock { $0 = .streaming(stream) }
                return outcome
            }
            // Slow: the parts' sessions first (a failure to start them leaves the stream to
            // probe again), then the stream given up.
            let parallel = try await GCSParallelSession.start(backend: backend, path: path, resource: resource, size: size, partSize: partSize)
            phase.withLock { $0 = .parallel(parallel, floor: confirmed) }
            await stream.abandon()
            return .partial(0)
        }
    }
}
