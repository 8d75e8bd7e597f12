import Foundation
import HoistStorage
import HoistYAML

/// A manifest read from its file, with what it needs from around it: its folder (roots and
/// hooks are relative to it) and the environment (`${VAR}`, `{env:VAR}`, credentials).
public struct Job: Sendable {
    public let manifest: JobManifest
    /// The manifest's path as given.
    public let file: String
    /// The folder holding the manifest, absolute.
    public let directory: URL
    public let environment: [String: String]

    /// Reads and checks a manifest.
    /// - Throws: `YAMLError` (`FILE:LINE:COL: message` with the line and a caret) for anything wrong in it.
    public init(file: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        let text: String
        do {
            text = try String(contentsOfFile: file, encoding: .utf8)
        } catch {
            throw YAMLError(file: file, mark: YAMLMark(line: 1, column: 1), message: "cannot read the manifest: \(error.localizedDescription)")
        }
        try self.init(text: text, file: file, environment: environment)
    }

    public init(text: String, file: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        manifest = try YAMLDecoder(environment: environment).decode(JobManifest.self, from: text, file: file)
        self.file = file
        directory = URL(fileURLWithPath: file).standardizedFileURL.deletingLastPathComponent()
        self.environment = environment
    }

    /// A file set's root, absolute.
    public func root(of set: FileSet) -> String {
        resolve(set.root)
    }

    /// A path from the manifest, made absolute against the manifest's folder.
    public func resolve(_ path: String) -> String {
        if path.hasPrefix("/") { return URL(fileURLWithPath: path).standardizedFileURL.path }
        return directory.appendingPathComponent(path).standardizedFileURL.path
    }

    /// The journal's path: `override`, else `journal:` in the manifest, else the default.
    public func journalPath(override: String? = nil) -> String {
        if let override { return URL(fileURLWithPath: override).standardizedFileURL.path }
        if let path = manifest.journal { return resolve(path) }
        return Journal.defaultPath(job: manifest.name, environment: environment)
    }

    /// The storage the job uploads to, configured from `storage:` and `upload:`.
    public func makeStorage() throws -> Storage {
        let settings = manifest.storage
        let backend: any StorageBackend
        if settings.url.hasPrefix("file:") {
            var rest = String(settings.url.dropFirst("file:".count))
            if rest.hasPrefix("//") { rest = String(rest.dropFirst(2)) }
            backend = LocalBucket(directory: resolve(rest.removingPercentEncoding ?? rest))
        } else {
            let bucket = String(settings.url.dropFirst("gs://".count))
            var environment = self.environment
            if let credentials = settings.credentials { environment["GOOGLE_APPLICATION_CREDENTIALS"] = resolve(credentials) }
            var configuration = try GCSBackend.Configuration.fromEnvironment(bucket: bucket, environment)
            if let threshold = settings.multipartThreshold { configuration.multipartThreshold = threshold.bytes }
            if let tokens = settings.downloadTokens { configuration.setsDownloadTokens = tokens }
            if let insecure = settings.insecureSkipTLSVerify { configuration.insecureSkipTLSVerify = insecure }
            backend = GCSBackend(configuration)
        }
        let storage = Storage(url: settings.url, backend: backend)
        storage.maxUploadRetryTime = manifest.upload.retryTime.seconds
        storage.maxUploadRetries = manifest.upload.retries
        if let rate = manifest.upload.bandwidth { storage.bandwidthLimiter = BandwidthLimiter(bytesPerSecond: rate.bytesPerSecond) }
        return storage
    }
}
