import Foundation

/// Picks the backend for a storage URL by its scheme.
enum BackendRegistry {
    static func backend(for url: String) -> any StorageBackend {
        if url.hasPrefix("file:") {
            return LocalBucket(directory: localPath(of: url))
        }
        if url.hasPrefix("gs://") {
            let bucket = String(url.dropFirst("gs://".count).split(separator: "/").first ?? "")
            do {
                return GCSBackend(try GCSBackend.Configuration.fromEnvironment(bucket: bucket))
            } catch {
                return UnsupportedBackend(url: url, reason: error.localizedDescription)
            }
        }
        return UnsupportedBackend(url: url)
    }

    /// `file:///abs/dir` is `/abs/dir`; `file:rel/dir` is relative to the current directory.
    static func localPath(of url: String) -> String {
        var rest = String(url.dropFirst("file:".count))
        if rest.hasPrefix("//") { rest = String(rest.dropFirst(2)) }
        rest = rest.removingPercentEncoding ?? rest
        if rest.hasPrefix("/") { return URL(fileURLWithPath: rest).standardizedFileURL.path }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
            .appendingPathComponent(rest).standardizedFileURL.path
    }
}

/// The backend of a URL whose scheme Hoist cannot serve: every operation fails clearly.
struct UnsupportedBackend: StorageBackend {
    let url: String
    var reason: String?
    var bucket: String {
        let rest = url.split(separator: ":", maxSplits: 1).last.map(String.init) ?? url
        return rest.trimmingCharacters(in: ["/"]).split(separator: "/").first.map(String.init) ?? rest
    }

    private var error: NSError {
        StorageErrorCode.invalidArgument.error(
            reason ?? "No storage backend for \(url): use gs://BUCKET, file:///ABS/DIR or file:REL/DIR", userInfo: ["url": url])
    }

    func startUpload(to path: String, attributes: ObjectResource, size: Int64) async throws -> any UploadSession {
        throw error
    }
    func resumeUpload(id: String) async throws -> any UploadSession { throw error }
    func delete(_ path: String, generation: Int64?) async throws { throw error }
    func metadata(of path: String) async throws -> ObjectResource { throw error }
    func downloadURL(for path: String) async throws -> URL { throw error }
}
