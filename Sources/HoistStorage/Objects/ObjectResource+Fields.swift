/// The metadata fields a writer sets, each a header of the upload: one list, so every place
/// that copies, checks or shows them (StorageMetadata's dictionary, plans, hooks) names them all.
extension ObjectResource {
    /// The custom metadata key that holds Firebase download tokens (comma-separated), which
    /// Firebase's download URLs carry; not metadata a user set.
    public static let downloadTokensKey = "firebaseStorageDownloadTokens"

    public static let headerFields: [(name: String, keyPath: WritableKeyPath<ObjectResource, String?> & Sendable)] = [
        ("contentType", \.contentType),
        ("cacheControl", \.cacheControl),
        ("contentDisposition", \.contentDisposition),
        ("contentEncoding", \.contentEncoding),
        ("contentLanguage", \.contentLanguage),
    ]
}

extension ObjectResource {
    /// A character no header value may hold (it could end the header and start another): the
    /// C0 controls but tab, and DEL.
    public static func isHeaderControlCharacter(_ scalar: Unicode.Scalar) -> Bool {
        (scalar.value < 0x20 && scalar != "\t") || scalar.value == 0x7f
    }

    /// The first field sent as an HTTP header or stored as a header value (content type, cache
    /// control, disposition, encoding, language, custom metadata) holding a control character,
    /// by name; nil when none does. Metadata read back from elsewhere (a session descriptor in a
    /// bucket's folder) is checked with it before it is stored.
    public var headerFieldWithControlCharacter: String? {
        func bad(_ value: String?) -> Bool { value?.unicodeScalars.contains(where: Self.isHeaderControlCharacter) ?? false }
        let fields = [("contentType", contentType), ("cacheControl", cacheControl), ("contentDisposition", contentDisposition),
                      ("contentEncoding", contentEncoding), ("contentLanguage", contentLanguage)]
        if let (name, _) = fields.first(where: { bad($0.1) }) { return name }
        if let (key, _) = (metadata ?? [:]).first(where: { bad($0.key) || bad($0.value) }) { return "metadata \(key)" }
        return nil
    }
}
