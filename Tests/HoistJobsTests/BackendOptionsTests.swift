import Foundation
import HoistJobs
import HoistStorage
import HoistTestSupport
import HoistYAML
import Testing

/// A backend registered by scheme owns its `storage:` keys: a manifest's job reads them through
/// the registration (decoded and checked with `FILE:LINE:COL` like every key, with "did you
/// mean"), and hands them to the backend's factory. The backend here exists only in this test:
/// HoistJobs has never heard of it, as it will never hear of the next real one.
@Suite struct BackendOptionsTests {
    /// The options of a test family: a folder below the test's directory, and a number to check.
    struct ShelfOptions: BackendOptions {
        var shelf: String?
        var depth: Int?

        enum CodingKeys: String, CodingKey, CaseIterable { case shelf, depth }
        static var keys: [String] { CodingKeys.allCases.map(\.stringValue) }

        init() {}
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            shelf = try c.decodeIfPresent(String.self, forKey: .shelf)
            depth = try c.decodeIfPresent(Int.self, forKey: .depth)
            if let depth, depth < 1 {
                throw DecodingError.dataCorruptedError(forKey: .depth, in: c, debugDescription: "depth must be at least 1, not \(depth)")
            }
        }

        func check(in context: BackendContext) throws {
            guard let shelf else { return }
            if !FileManager.default.fileExists(atPath: context.resolve(shelf)) {
                throw BackendOptionError(key: CodingKeys.shelf.stringValue, "shelf \(context.resolve(shelf)) does not exist")
            }
        }
    }

    /// One registration line: a local bucket in the folder `shelf:` names, for `SCHEME://BUCKET`.
    static let scheme: String = {
        let scheme = "shelf\(UUID().uuidString.prefix(6).lowercased())"
        BackendRegistry.register(BackendRegistration(
            scheme: scheme, urlForm: .bucket, forms: ["\(scheme)://BUCKET"], copyForm: "\(scheme)://BUCKET/PATH",
            options: ShelfOptions.self, capabilities: BackendCapabilities()) { context in
                let options = context.options(as: ShelfOptions.self)
                return LocalBucket(directory: context.resolve(options.shelf ?? ".") + "/" + context.location.bucket)
            })
        return scheme
    }()

    func manifest(_ storage: String) -> String {
        "version: 1\nname: shelf\nstorage:\n  url: \(Self.scheme)://b\n\(storage)files:\n  - root: .\n"
    }

    /// The job's storage is the registered backend, made from the options the manifest gave,
    /// relative to the manifest's folder; an upload lands where they say.
    @Test func aRegisteredBackendIsMadeFromItsManifestOptions() async throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path + "/racks", withIntermediateDirectories: true)
        let job = try Job(text: manifest("  shelf: racks\n  depth: 2\n"), file: directory.path + "/job.yaml")
        try job.checkRoots()
        let storage = try job.makeStorage()
        let backend = try #require(storage.backend as? LocalBucket)
        #expect(backend.directory.path == directory.path + "/racks/b")
        _ = try await storage.reference(withPath: "a.txt").putDataAsync(Data("shelved".utf8))
        #expect(try String(contentsOfFile: directory.path + "/racks/b/a.txt", encoding: .utf8) == "shelved")
    }

    /// A misspelt key of the backend is unknown, with the nearest of its keys suggested; a bad
    /// value the options throw is reported at its line; both in one pass.
    @Test func itsKeysAreCheckedWithLineAndSuggestion() throws {
        let text = manifest("  shelv: racks\n  depth: 0\n")
        #expect { try Job(text: text, file: "job.yaml") } throws: { error in
            let all = (error as? YAMLError)?.all.map(\.summary) ?? []
            #expect(all.count == 2 && all[0].hasPrefix("job.yaml:5:3: unknown key 'shelv' (did you mean 'shelf'?): ")
                    && all[0].hasSuffix(": storage takes url, shelf, depth") && all[1] == "job.yaml:6:10: depth must be at least 1, not 0",
                    "\(all)")
            return true
        }
    }

    /// What the options' own check finds (a folder that is not there) points at the key's line,
    /// as `hoist validate` shows it.
    @Test func itsCheckPointsAtTheKey() throws {
        let directory = try TemporaryDirectory()
        let job = try Job(text: manifest("  depth: 1\n  shelf: nowhere\n"), file: directory.path + "/job.yaml")
        #expect { try job.checkRoots() } throws: { error in
            let summary = (error as? YAMLError)?.summary ?? "\(error)"
            #expect(summary == "\(directory.path)/job.yaml:6:10: shelf \(directory.path)/nowhere does not exist", "\(summary)")
            return true
        }
    }

    /// The GCS backend's keys are its own: a local bucket's storage does not take them, and a
    /// misspelt one under `gs://` is suggested from them.
    @Test func gcsKeysBelongToTheGCSBackend() throws {
        let local = "version: 1\nname: n\nstorage:\n  url: file:bucket\n  caBundle: ca.pem\nfiles:\n  - root: .\n"
        #expect { try Job(text: local, file: "j.yaml") } throws: { error in
            (error as? YAMLError)?.summary == "j.yaml:5:3: unknown key 'caBundle': a file: storage takes only url (caBundle is a key of gs:, s3: storage)"
        }
        let gcs = "version: 1\nname: n\nstorage:\n  url: gs://b\n  credentails: k.json\nfiles:\n  - root: .\n"
        #expect { try Job(text: gcs, file: "j.yaml") } throws: { error in
            (error as? YAMLError)?.summary.hasPrefix("j.yaml:5:3: unknown key 'credentails' (did you mean 'credentials'?): a gs: storage takes url, credentials,") == true
        }
    }

    /// `hoist cp`'s URL form, from the registration: a bucket URL splits into the storage and
    /// the path in it; a folder's URL is the storage, objects at its root; no bucket is refused.
    @Test func copyDestinationsSplitByTheirRegistration() throws {
        func split(_ registration: BackendRegistration, _ text: String) throws -> [String] {
            let (storage, path) = try registration.splitCopyDestination(text)
            return [storage, path]
        }
        let gcs = try #require(BackendRegistry.registration(for: "gs"))
        #expect(try split(gcs, "gs://b/x/y/") == ["gs://b", "x/y/"])
        #expect(try split(gcs, "gs://b") == ["gs://b", ""])
        #expect(throws: StorageFailure.self) { try gcs.splitCopyDestination("gs:///x") }
        #expect(gcs.problemAsCopyStorage("gs://b/p") == "names a path: use gs://BUCKET, and put the path in DEST.")
        #expect(gcs.problemAsCopyStorage("gs://") == "names no bucket: use gs://BUCKET.")
        let local = try #require(BackendRegistry.registration(for: "FILE"))
        #expect(try split(local, "file:out/dir") == ["file:out/dir", ""])
        #expect(local.problemAsCopyStorage("file:x") == nil)
    }

    /// What each built-in family says it can do, which the runner and hooks ask instead of
    /// downcasting: GCS uploads prefer the HTTP engine's thread; the local bucket has no transport.
    @Test func builtInCapabilities() throws {
        let gcs = try #require(BackendRegistry.registration(for: "gs")).capabilities
        let local = try #require(BackendRegistry.registration(for: "file")).capabilities
        #expect(gcs.preferredExecutor != nil && local.preferredExecutor == nil)
        #expect(gcs.checksums == [.md5, .crc32c] && gcs.resumesAcrossProcesses)
        // Messages list the forms Hoist ships, whatever a program (this test) registers.
        _ = Self.scheme
        #expect(!BackendRegistry.forms.contains(Self.scheme))
        // The scheme tests use for "no backend serves it" is served by none, even here.
        #expect(BackendRegistry.registration(for: unservedScheme) == nil && !BackendRegistry.forms.contains(unservedScheme))
    }
}
