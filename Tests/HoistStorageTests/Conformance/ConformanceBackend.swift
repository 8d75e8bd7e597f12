import Foundation
import HoistTestSupport
@testable import HoistStorage

/// One backend the conformance suite runs against: how to make a fresh place to upload to,
/// and what the backend can do. A new backend is a folder in Sources/HoistStorage, its factory
/// in `BackendRegistry.builtIn`, and one entry in `all`.
struct ConformanceBackend: Sendable, CustomStringConvertible {
    let name: String
    /// A session interrupted after some bytes keeps them, and a status query reports exactly
    /// what the server holds without finishing the object. fake-gcs-server finalizes a truncated
    /// object on any status query (`Content-Range: bytes */*` or
    /// `bytes */TOTAL`), so it has not.
    let resumesFromConfirmedOffset: Bool
    /// An abandoned session is gone: reopening it fails with `objectNotFound`. Both emulators
    /// ignore the `DELETE` of a session URL that Cloud Storage answers by ending the session:
    /// gcp-storage-emulator keeps its bytes, and fake-gcs-server finalizes them as an object on the
    /// next status query, so the suite does not ask them.
    let abandonEndsSession: Bool
    /// Requests go over HTTP, so the fault proxy can stand in front (flipped bytes, cut connections).
    let speaksHTTP: Bool
    /// A one-request (multipart) upload whose body stops short stores nothing, as Cloud Storage
    /// does. gcp-storage-emulator stores what arrived (the body less its end) as the object.
    var refusesShortBodies = true
    /// The method of an upload sent in one request: GCS's multipart `POST`, S3's `PutObject` `PUT`.
    var oneRequestMethod = "POST"
    /// The server checks a one-request upload's bytes against the checksum sent with them and
    /// refuses them (rclone's S3 server, Cloud Storage with an MD5 sent): nothing was stored to
    /// delete. Otherwise the backend finds the mismatch in the answer and deletes the object,
    /// where it can name the generation it made (`deletesWhatFailsItsCheck`).
    var refusesDamagedBodies = false
    /// An object that fails its check is deleted: that generation only (GCS, a local bucket). An
    /// S3 key has no generation, so the object there may be an earlier good version: S3 leaves
    /// it in place and fails the file, which the next run sends again.
    var deletesWhatFailsItsCheck = true
    /// The object's description (`metadata(of:)`) carries its CRC32C: GCS's `crc32c`, a local
    /// bucket's sidecar, S3's `x-amz-checksum-crc32c` kept from the `PutObject` that sent it.
    /// Ceph's radosgw 16.2 neither keeps nor reports `x-amz-checksum-*`.
    var reportsCRC32C = true
    /// A fresh target: an empty bucket, or a unique folder of a shared one. `faults` are fault
    /// proxy rules (only for a backend that `speaksHTTP`).
    let makeTarget: @Sendable (_ faults: [String]) async throws -> ConformanceTarget
    /// A storage for a bucket that does not exist.
    let missingBucket: @Sendable () async throws -> Storage

    var description: String { name }

    /// The CRC32C `metadata(of:)` gives for an object of `data`: nil where the server reports none.
    func reportedCRC32C(of data: Data) -> String? { reportsCRC32C ? crc32cBase64(data) : nil }

    /// Every backend the suite runs on.
    static let all: [ConformanceBackend] = [.local, .fakeGCS, .gcsEmulator, .s3(.moto), .s3(.rclone), .s3(.rcloneTLS), .s3(.ceph)]

    static let local = ConformanceBackend(
        name: "local", resumesFromConfirmedOffset: true, abandonEndsSession: true, speaksHTTP: false,
        makeTarget: { faults in
            precondition(faults.isEmpty, "the local bucket has no wire to put faults on")
            let fixture = try LocalBucketFixture()
            return ConformanceTarget(storage: fixture.storage, prefix: "", keepAlive: fixture, proxy: nil) { object in
                let url = URL(fileURLWithPath: fixture.bucketPath).appendingPathComponent(object)
                return FileManager.default.fileExists(atPath: url.path) ? try Data(contentsOf: url) : nil
            } leftovers: {
                fixture.allFiles().filter { $0.hasPrefix(".hoist/uploads/") }
            }
        },
        missingBucket: {
            // A bucket folder that cannot exist or be made: its parent is a device, not a folder.
            Storage(url: "file:///dev/null/bucket", backend: LocalBucket(directory: "/dev/null/bucket"))
        })

    static let fakeGCS = ConformanceBackend(
        name: "fake-gcs-server", resumesFromConfirmedOffset: false, abandonEndsSession: false, speaksHTTP: true,
        makeTarget: { faults in
            try await gcsTarget(bucket: try await FakeGCS.makeBucket(), port: try FakeGCS.port(), prefix: "", faults: faults)
        },
        missingBucket: {
            gcsStorage(bucket: "no-such-bucket-\(UUID().uuidString.prefix(8).lowercased())", port: try FakeGCS.port())
        })

    static let gcsEmulator: ConformanceBackend = {
        var backend = ConformanceBackend(
            name: "gcp-storage-emulator", resumesFromConfirmedOffset: true, abandonEndsSession: false, speaksHTTP: true,
            makeTarget: { faults in
                // One bucket for the process: each target is a folder of its own.
                try await gcsTarget(bucket: StorageEmulator.bucket, port: try StorageEmulator.port(),
                                    prefix: "t-\(UUID().uuidString.prefix(8).lowercased())/", faults: faults)
            },
            missingBucket: {
                gcsStorage(bucket: "no-such-bucket-\(UUID().uuidString.prefix(8).lowercased())", port: try StorageEmulator.port())
            })
        backend.refusesShortBodies = false
        return backend
    }()

    /// An S3 server: a bucket per target, bytes read back with a signed `GET` of the test
    /// support's own. A session is a multipart upload, which resumes by parts (5 MiB at least),
    /// not from any byte: `S3BackendTests` tests its resume.
    static func s3(_ server: S3TestServer) -> ConformanceBackend {
        var backend = ConformanceBackend(
            name: "s3-\(server.rawValue)", resumesFromConfirmedOffset: false, abandonEndsSession: true,
            speaksHTTP: server != .rcloneTLS,
            makeTarget: { faults in
                let bucket = try await server.makeBucket()
                let proxy = faults.isEmpty ? nil : try FaultProxy(upstreamPort: try server.port(), faults)
                let storage = try s3Storage(server, bucket: bucket, port: proxy?.port)
                return ConformanceTarget(storage: storage, prefix: "", keepAlive: nil, proxy: proxy) { object in
                    try await server.storedBytes(bucket: bucket, key: object)
                } leftovers: { [] }
            },
            missingBucket: { try s3Storage(server, bucket: "no-such-bucket-\(UUID().uuidString.prefix(8).lowercased())") })
        backend.oneRequestMethod = "PUT"
        backend.refusesDamagedBodies = server != .moto   // moto does not check Content-MD5; rclone and radosgw do
        backend.deletesWhatFailsItsCheck = false
        backend.reportsCRC32C = server != .ceph
        return backend
    }

    /// A GCS target, behind the fault proxy when there are faults; bytes are read back from the
    /// server itself (not through the proxy, not through Hoist's upload code).
    private static func gcsTarget(bucket: String, port: Int, prefix: String, faults: [String]) async throws -> ConformanceTarget {
        let proxy = faults.isEmpty ? nil : try FaultProxy(upstreamPort: port, faults)
        let storage = gcsStorage(bucket: bucket, port: proxy?.port ?? port)
        return ConformanceTarget(storage: storage, prefix: prefix, keepAlive: nil, proxy: proxy) { object in
            try await FakeGCS.exists(bucket: bucket, object: object, port: port)
                ? try await FakeGCS.download(bucket: bucket, object: object, port: port) : nil
        } leftovers: { [] }
    }
}

/// A place to upload to, for one test.
final class ConformanceTarget: Sendable {
    let storage: Storage
    /// Prepended to every object name (a folder of its own in a shared bucket).
    let prefix: String
    private let keepAlive: (any Sendable)?
    /// The fault proxy in front of the server, when the target was made with faults.
    let proxy: FaultProxy?
    private let readStored: @Sendable (String) async throws -> Data?
    private let readLeftovers: @Sendable () -> [String]

    init(storage: Storage, prefix: String, keepAlive: (any Sendable)?, proxy: FaultProxy?,
         stored: @escaping @Sendable (String) async throws -> Data?, leftovers: @escaping @Sendable () -> [String]) {
        self.storage = storage
        self.prefix = prefix
        self.keepAlive = keepAlive
        self.proxy = proxy
        readStored = stored
        readLeftovers = leftovers
    }

    var backend: any StorageBackend { storage.backend }

    /// The full object name for `name`.
    func object(_ name: String) -> String { prefix + name }

    /// The bytes the server (or folder) holds for `name`, nil when there is no such object.
    func storedBytes(_ name: String) async throws -> Data? { try await readStored(object(name)) }

    /// Session state the backend keeps beside its objects (the local bucket's part files):
    /// empty once every session finished or was abandoned.
    var leftovers: [String] { readLeftovers() }
}
