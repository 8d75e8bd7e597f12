import Foundation
import Synchronization

/// Makes the backend for a storage URL by its scheme: one factory per scheme. The built-in
/// backends are listed in `builtIn`, one line each; a program can add its own (`register`).
public enum BackendRegistry {
    /// Makes a backend for a parsed location, or throws a `StorageFailure` naming what is wrong.
    public typealias Factory = @Sendable (StorageLocation) throws -> any StorageBackend

    /// The backends Hoist ships, by scheme.
    static let builtIn: [String: Factory] = [
        "file": { location in LocalBucket(directory: location.directory()) },
        "gs": { location in GCSBackend(try GCSBackend.Configuration.fromEnvironment(bucket: location.bucket)) },
        "s3": { location in S3Backend(try S3Backend.Configuration.fromEnvironment(bucket: location.bucket, prefix: location.path)) },
    ]

    private static let factories = Mutex<[String: Factory]>(builtIn)

    /// Serves URLs of `scheme` (lowercase, no colon) with `factory` from now on; a built-in
    /// scheme can be taken over, as a test double or a different client would.
    public static func register(scheme: String, _ factory: @escaping Factory) {
        factories.withLock { $0[scheme.lowercased()] = factory }
    }

    /// The backend for `url`; for a URL no backend serves, or one a factory refuses, a backend
    /// whose every operation fails with that reason.
    static func backend(for url: String) -> any StorageBackend {
        let location: StorageLocation
        do {
            location = try StorageLocation(parsing: url)
        } catch {
            return UnsupportedBackend(url: url, reason: "\(error)")
        }
        guard let factory = factories.withLock({ $0[location.scheme] }) else {
            return UnsupportedBackend(url: url, bucket: location.bucket)
        }
        do {
            return try factory(location)
        } catch {
            return UnsupportedBackend(url: url, bucket: location.bucket,
                                      reason: (error as? StorageFailure)?.message ?? error.localizedDescription)
        }
    }
}

/// The backend of a URL whose scheme Hoist cannot serve: every operation fails clearly.
struct UnsupportedBackend: StorageBackend {
    let url: String
    var bucket: String = ""
    var reason: String?

    private var error: StorageFailure {
        StorageFailure(
            .invalidArgument, reason ?? "No storage backend for \(url): use \(StorageLocation.forms)", details: ["url": url])
    }

    func startUpload(to path: String, attributes: ObjectResource, size: Int64) async throws -> any UploadSession {
        throw error
    }
    func resumeUpload(id: String) async throws -> any UploadSession { throw error }
    func delete(_ path: String, generation: Int64?) async throws { throw error }
    func metadata(of path: String) async throws -> ObjectResource { throw error }
    func downloadURL(for path: String) async throws -> URL { throw error }
}
