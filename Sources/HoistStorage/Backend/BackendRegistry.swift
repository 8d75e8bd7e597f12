import Foundation
import Synchronization

/// The backends Hoist can make, by URL scheme: each a `BackendRegistration` carrying its URL
/// forms, manifest options, factory and capabilities. The built-in ones are `builtIn`, one line
/// each; a program can add its own (`register`).
public enum BackendRegistry {
    /// The backends Hoist ships, in the order messages list them. The composition of defaults:
    /// the one place above their folders that names them.
    static let builtIn: [BackendRegistration] = [
        GCSBackend.registration,
        LocalBucket.registration,
        S3Backend.registration,
    ]

    private static let registrations = Mutex<[BackendRegistration]>(builtIn)

    /// Serves URLs of `registration.scheme` with it from now on; a built-in scheme can be taken
    /// over, as a test double or a different client would.
    public static func register(_ registration: BackendRegistration) {
        registrations.withLock { all in
            if let index = all.firstIndex(where: { $0.scheme == registration.scheme }) {
                all[index] = registration
            } else {
                all.append(registration)
            }
        }
    }

    /// Serves `SCHEME://BUCKET` URLs with `factory`, which reads no manifest option.
    public static func register(scheme: String, _ factory: @escaping @Sendable (StorageLocation) throws -> any StorageBackend) {
        let scheme = scheme.lowercased()
        register(BackendRegistration(scheme: scheme, urlForm: .bucketAndPrefix, forms: ["\(scheme)://BUCKET"],
                                     copyForm: "\(scheme)://BUCKET/PATH", options: NoBackendOptions.self,
                                     capabilities: BackendCapabilities()) { context in try factory(context.location) })
    }

    /// Every registration, built-in first.
    public static var all: [BackendRegistration] { registrations.withLock { $0 } }

    /// The registration serving `scheme` (lowercase, no colon), or nil.
    public static func registration(for scheme: String) -> BackendRegistration? {
        let scheme = scheme.lowercased()
        return registrations.withLock { all in all.first { $0.scheme == scheme } }
    }

    /// The storage URL forms Hoist ships, for messages: "gs://BUCKET, file:///ABS/DIR or
    /// file:REL/DIR" (what a program registers itself is its own to document).
    public static var forms: String { listing(builtIn.flatMap(\.forms)) }

    /// The `hoist cp` destination forms Hoist ships, for messages: "gs://BUCKET/PATH or file: folders".
    public static var copyForms: String { listing(builtIn.map(\.copyForm)) }

    /// "a", "a or b", "a, b or c".
    static func listing(_ items: [String]) -> String {
        items.count <= 1 ? items.joined() : items.dropLast().joined(separator: ", ") + " or " + items.last!
    }

    /// Makes the backend for `context.location` by its scheme.
    /// - Throws: `StorageFailure` (`invalidArgument`) for a scheme no backend serves; what the
    ///   factory throws.
    public static func makeBackend(_ context: BackendContext) throws -> any StorageBackend {
        guard let registration = registration(for: context.location.scheme) else {
            throw StorageFailure(.invalidArgument, "No storage backend for \(context.location.url): use \(forms)",
                                 details: ["url": context.location.url])
        }
        return try registration.factory(context)
    }

    /// The backend for `url`, with its backend's default options and the process's environment;
    /// for a URL no backend serves, or one a factory refuses, a backend whose every operation
    /// fails with that reason.
    static func backend(for url: String) -> any StorageBackend {
        let location: StorageLocation
        do {
            location = try StorageLocation(parsing: url)
        } catch {
            return UnsupportedBackend(url: url, reason: "\(error)")
        }
        guard let registration = registration(for: location.scheme) else {
            return UnsupportedBackend(url: url, bucket: location.bucket)
        }
        do {
            return try registration.factory(BackendContext(location: location, options: registration.options.init()))
        } catch {
            let reason = (error as? StorageFailure)?.message ?? (error as? BackendOptionError)?.message ?? error.localizedDescription
            return UnsupportedBackend(url: url, bucket: location.bucket, reason: reason)
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
            .invalidArgument, reason ?? "No storage backend for \(url): use \(BackendRegistry.forms)", details: ["url": url])
    }

    func startUpload(to path: String, attributes: ObjectResource, size: Int64) async throws -> any UploadSession {
        throw error
    }
    func resumeUpload(id: String) async throws -> any UploadSession { throw error }
    func delete(_ path: String, generation: Int64?) async throws { throw error }
    func metadata(of path: String) async throws -> ObjectResource { throw error }
    func downloadURL(for path: String) async throws -> URL { throw error }
}
