/// MIME types by file extension, for uploads whose metadata names none.
public enum ContentType {
    /// What an object without a known type is stored as.
    public static let fallback = "application/octet-stream"

    /// The type for `path`'s extension (case-insensitive), or nil when unknown.
    public static func forPath(_ path: String) -> String? {
        // From the end: the last name's last dot (one short scan, every upload asks).
        let bytes = path.utf8
        var end = bytes.endIndex
        while end > bytes.startIndex, bytes[bytes.index(before: end)] == UInt8(ascii: "/") { end = bytes.index(before: end) }
        var index = end
        while index > bytes.startIndex {
            let before = bytes.index(before: index)
            switch bytes[before] {
            case UInt8(ascii: "/"):
                return nil
            case UInt8(ascii: "."):
                // A name that starts with its only dot (`.profile`) has no extension.
                guard before > bytes.startIndex, bytes[bytes.index(before: before)] != UInt8(ascii: "/") else { return nil }
                let suffix = Substring(bytes[index..<end])
                let lowercase = suffix.utf8.contains { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) } ? suffix.lowercased() : String(suffix)
                return byExtension[lowercase]
            default:
                index = before
            }
        }
        return nil
    }

    /// The table: web, image, audio, video, font, document, data and archive types.
    public static let byExtension: [String: String] = [
        // Web
        "html": "text/html", "htm": "text/html", "css": "text/css", "js": "text/javascript",
        "mjs": "text/javascript", "json": "application/json", "map": "application/json",
        "jsonld": "application/ld+json", "webmanifest": "application/manifest+json",
        "xml": "application/xml", "xhtml": "application/xhtml+xml", "rss": "application/rss+xml",
        "atom": "application/atom+xml", "wasm": "application/wasm", "txt": "text/plain",
        "md": "text/markdown", "csv": "text/csv", "tsv": "text/tab-separated-values", "ics": "text/calendar",
        "yaml": "application/yaml", "yml": "application/yaml", "toml": "application/toml",
        "log": "text/plain", "vtt": "text/vtt", "srt": "application/x-subrip",
        // Images
        "jpg": "image/jpeg", "jpeg": "image/jpeg", "jpe": "image/jpeg", "png": "image/png", "gif": "image/gif",
        "webp": "image/webp", "avif": "image/avif", "heic": "image/heic", "heif": "image/heif",
        "svg": "image/svg+xml", "svgz": "image/svg+xml", "ico": "image/vnd.microsoft.icon", "bmp": "image/bmp",
        "tif": "image/tiff", "tiff": "image/tiff", "jxl": "image/jxl", "psd": "image/vnd.adobe.photoshop",
        "raw": "image/x-raw", "dng": "image/x-adobe-dng", "cr2": "image/x-canon-cr2", "nef": "image/x-nikon-nef",
        // Audio
        "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "wav": "audio/wav", "flac": "audio/flac",
        "ogg": "audio/ogg", "oga": "audio/ogg", "opus": "audio/opus", "weba": "audio/webm", "mid": "audio/midi",
        "midi": "audio/midi", "aif": "audio/aiff", "aiff": "audio/aiff", "amr": "audio/amr",
        // Video
        "mp4": "video/mp4", "m4v": "video/mp4", "mov": "video/quicktime", "webm": "video/webm", "mkv": "video/x-matroska",
        "avi": "video/x-msvideo", "wmv": "video/x-ms-wmv", "mpeg": "video/mpeg", "mpg": "video/mpeg",
        "ogv": "video/ogg", "3gp": "video/3gpp", "3g2": "video/3gpp2", "ts": "video/mp2t", "m3u8": "application/vnd.apple.mpegurl",
        "mpd": "application/dash+xml", "flv": "video/x-flv",
        // Fonts
        "woff": "font/woff", "woff2": "font/woff2", "ttf": "font/ttf", "otf": "font/otf", "eot": "application/vnd.ms-fontobject",
        // Documents
        "pdf": "application/pdf", "doc": "application/msword", "rtf": "application/rtf",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls": "application/vnd.ms-excel",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "ppt": "application/vnd.ms-powerpoint",
        "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "odt": "application/vnd.oasis.opendocument.text", "ods": "application/vnd.oasis.opendocument.spreadsheet",
        "odp": "application/vnd.oasis.opendocument.presentation", "epub": "application/epub+zip",
        "key": "application/vnd.apple.keynote", "pages": "application/vnd.apple.pages",
        "numbers": "application/vnd.apple.numbers",
        // Data and code
        "sql": "application/sql", "sqlite": "application/vnd.sqlite3", "db": "application/vnd.sqlite3",
        "parquet": "application/vnd.apache.parquet", "avro": "application/avro", "pb": "application/x-protobuf",
        "sh": "application/x-sh", "py": "text/x-python", "swift": "text/x-swift", "lua": "text/x-lua",
        "c": "text/x-c", "h": "text/x-c", "java": "text/x-java", "go": "text/x-go", "rs": "text/x-rust",
        // Archives and packages
        "zip": "application/zip", "gz": "application/gzip", "tgz": "application/gzip", "bz2": "application/x-bzip2",
        "xz": "application/x-xz", "zst": "application/zstd", "7z": "application/x-7z-compressed",
        "rar": "application/vnd.rar", "tar": "application/x-tar", "lz4": "application/x-lz4",
        "br": "application/x-brotli", "jar": "application/java-archive", "apk": "application/vnd.android.package-archive",
        "ipa": "application/octet-stream", "deb": "application/vnd.debian.binary-package", "rpm": "application/x-rpm",
        "dmg": "application/x-apple-diskimage", "iso": "application/x-iso9660-image",
        "exe": "application/vnd.microsoft.portable-executable", "msi": "application/x-msi",
        "bin": "application/octet-stream",
    ]
}
