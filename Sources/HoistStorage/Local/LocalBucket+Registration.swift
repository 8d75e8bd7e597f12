import Foundation

extension LocalBucket {
    /// `file:` URLs: a folder of this machine whose files are the objects (relative to the
    /// manifest's folder, or the current one).
    static let registration = BackendRegistration(
        scheme: "file", urlForm: .folder, forms: ["file:///ABS/DIR", "file:REL/DIR"], copyForm: "file: folders",
        options: NoBackendOptions.self, capabilities: capabilities) { context in
            LocalBucket(directory: context.location.directory(relativeTo: context.directory))
        }

    /// Objects carry MD5 and CRC32C; a large upload's session file lets another process continue it.
    static let capabilities = BackendCapabilities(checksums: [.md5, .crc32c], resumesAcrossProcesses: true,
                                                  copiesObjects: true)

    public var capabilities: BackendCapabilities { Self.capabilities }
}
