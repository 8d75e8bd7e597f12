import Foundation

/// A storage URL, parsed once: its scheme, its bucket and a path.
///
/// - `gs://BUCKET[/PATH]`: the bucket, and an object path (empty for the bucket itself).
/// - `file:///ABS/DIR`, `file:/ABS/DIR`, `file:REL/DIR`: a local bucket; `path` is the folder as
///   written (percent-decoded, absolute or relative), `bucket` its last component.
///
/// Every other `SCHEME:REST` parses too (the backend registry says whether a backend serves it);
/// `url` keeps the text as it was given.
public struct StorageLocation: Sendable, Hashable, CustomStringConvertible {
    public let url: String
    /// Lowercased, without the colon: `gs`, `file`.
    public let scheme: String
    public let bucket: String
    public let path: String

    /// The rest of the URL is read in the form its backend's registration gives
    /// (`StorageURLForm`); a scheme no backend serves is read as `SCHEME://BUCKET[/PATH]`.
    /// - Throws: `StorageFailure` (`invalidArgument`) for text with no scheme, a bucket URL
    ///   without `//BUCKET`, and a folder URL without a folder.
    public init(parsing url: String) throws {
        self.url = url
        guard let colon = url.firstIndex(of: ":"), colon > url.startIndex,
              url[..<colon].allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) })
        else {
            throw StorageFailure(.invalidArgument, "Storage URL '\(url)' has no scheme: use \(Self.forms).", details: ["url": url])
        }
        scheme = url[..<colon].lowercased()
        var rest = String(url[url.index(after: colon)...])
        let form = BackendRegistry.registration(for: scheme)?.urlForm
        switch form {
        case .folder:
            if rest.hasPrefix("//") { rest = String(rest.dropFirst(2)) }
            rest = rest.removingPercentEncoding ?? rest
            let folder = rest.count > 1 && rest.hasSuffix("/") ? String(rest.dropLast()) : rest
            guard !folder.isEmpty else {
                throw StorageFailure(.invalidArgument, "Storage URL '\(url)' names no folder: use \(Self.forms).", details: ["url": url])
            }
            path = folder
            bucket = URL(fileURLWithPath: folder).lastPathComponent
        default:
            let authority = rest.hasPrefix("//")
            if authority { rest = String(rest.dropFirst(2)) }
            let parts = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: true)
            bucket = parts.first.map(String.init) ?? ""
            path = parts.count > 1 ? StoragePath.normalize(String(parts[1])) : ""
            if form != nil, bucket.isEmpty || !authority {
                throw StorageFailure(.invalidArgument, "Storage URL '\(url)' names no bucket: use \(Self.forms).", details: ["url": url])
            }
        }
    }

    /// The URL forms the registered backends serve, for messages.
    public static var forms: String { BackendRegistry.forms }

    /// For a folder location (`file:`), the folder as an absolute path: a relative one is taken from
    /// `base` (the current directory when nil).
    public func directory(relativeTo base: String? = nil) -> String {
        if path.hasPrefix("/") { return URL(fileURLWithPath: path).standardizedFileURL.path }
        return URL(fileURLWithPath: base ?? FileManager.default.currentDirectoryPath)
            .appendingPathComponent(path).standardizedFileURL.path
    }

    public var description: String { url }
}
