/// The metadata fields a writer sets, each a header of the upload: one list, so every place
/// that copies, checks or shows them (StorageMetadata's dictionary, plans, hooks) names them all.
extension ObjectResource {
    public static let headerFields: [(name: String, keyPath: WritableKeyPath<ObjectResource, String?> & Sendable)] = [
        ("contentType", \.contentType),
        ("cacheControl", \.cacheControl),
        ("contentDisposition", \.contentDisposition),
        ("contentEncoding", \.contentEncoding),
        ("contentLanguage", \.contentLanguage),
    ]
}
