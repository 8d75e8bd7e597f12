import ArgumentParser
import Foundation
import HoistJobs
import HoistStorage

extension Hoist {
    /// `hoist cp SRC... DEST`: ad-hoc uploads with the same engine as jobs.
    struct Copy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "cp",
            abstract: "Upload files and directories to a bucket.",
            discussion: """
                As gsutil cp: a DEST ending in '/' is a prefix, and each file goes under it by its \
                name; a directory's files go under PREFIX/DIRNAME/ by their paths inside it. One file \
                to a DEST without '/' at the end is stored under exactly that name.

                DEST is gs://BUCKET/PATH, or a path in the bucket named by --storage (a local \
                directory bucket by default). gs:// uses $STORAGE_EMULATOR_HOST, \
                $GOOGLE_OAUTH_ACCESS_TOKEN or $GOOGLE_APPLICATION_CREDENTIALS as Google's tools do, \
                and $HTTPS_PROXY, $NO_PROXY, $CURL_CA_BUNDLE, $SSL_CERT_FILE and $SSL_CERT_DIR as curl does.

                Exit status: 0 all uploaded, 1 some failed, 2 could not start.
                """
        )

        @Option(name: .long, help: "The bucket for a DEST without gs://: file:///ABS/DIR, file:REL/DIR or gs://BUCKET. Default: $HOIST_STORAGE_URL, else file:.hoist/bucket.")
        var storage: String?

        @Option(name: [.customShort("j"), .customLong("concurrency")], help: "How many uploads run at once.")
        var concurrency: Int = 4

        @Option(name: .long, help: "The Content-Type of every object (default: from each file's extension).")
        var contentType: String?

        @Option(name: .long, help: "The Cache-Control of every object.")
        var cacheControl: String?

        @Option(name: .long, help: "Custom metadata KEY=VALUE; repeat for more.")
        var metadata: [String] = []

        @Flag(name: .long, help: "Print one JSON line per event (resume, progress, success, failure) and a summary line.")
        var json = false

        @Flag(name: .shortAndLong, help: "Print nothing but errors (no progress line, no summary).")
        var quiet = false

        @Flag(name: .shortAndLong, help: "Print a line per uploaded file.")
        var verbose = false

        @Flag(name: .long, help: "Upload nothing: print each file and the object it would become.")
        var dryRun = false

        @OptionGroup var trustOptions: TrustOptions

        @Argument(help: "Files or directories to upload, then the destination.", completion: .file())
        var paths: [String] = []

        func validate() throws {
            guard paths.count >= 2 else { throw ValidationError("Give at least one file and a destination.") }
            guard concurrency >= 1 else { throw ValidationError("--concurrency must be at least 1.") }
            if quiet && verbose { throw ValidationError("--quiet and --verbose say opposite things: choose one.") }
            for pair in metadata where !pair.contains("=") {
                throw ValidationError("--metadata takes KEY=VALUE, not '\(pair)'.")
            }
        }

        func run() async throws {
            let target = try Destination(paths.last!, storage: storage, caBundle: trustOptions.caBundlePath)
            let plan = try CopyPlan(sources: Array(paths.dropLast()), destination: target)
            if dryRun {
                var output = BufferedOutput()
                for item in plan.items {
                    output.write(json
                        ? JSONLine.encode(["action": "upload", "file": item.file, "object": item.object, "size": item.size])
                        : "upload  \(item.file) -> \(item.object) (\(ByteFormatter.string(item.size)))")
                }
                output.write(json
                    ? JSONLine.encode(["action": "total", "upload": plan.items.count, "bytes": plan.totalBytes])
                    : "\(plan.items.count) files to upload (\(ByteFormatter.string(plan.totalBytes))); nothing was uploaded (--dry-run)")
                output.flush()
                return
            }
            let reporter = CopyReporter(json: json, terminal: !json && !quiet && isatty(STDERR_FILENO) != 0,
                                        verbose: verbose && !json, files: plan.items.count, bytes: plan.totalBytes)
            let custom = makeMetadata()
            do {
                try await target.storage.backend.checkAccess()
            } catch {
                FileHandle.standardError.write(Data("hoist: \(describe(error))\n".utf8))
                throw ExitCode(2)
            }
            let signals = SignalSources.termination { reporter.cancelAll() }
            defer { signals.cancel() }
            reporter.start()
            await withTaskGroup(of: Void.self) { group in
                var next = plan.items.makeIterator()
                func addNext() {
                    guard !reporter.isStopped, let item = next.next() else { return }
                    let ref = target.storage.reference(withPath: item.object)
                    let metadata = metadataFor(custom)
                    group.addTask { await reporter.upload(item, to: ref, metadata: metadata) }
                }
                for _ in 0..<concurrency { addNext() }
                for await _ in group { addNext() }
            }
            let failed = reporter.finish()
            if reporter.isStopped { throw ExitCode(130) }
            if failed > 0 { throw ExitCode(1) }
        }

        private func makeMetadata() -> [String: String]? {
            guard !metadata.isEmpty else { return nil }
            return Dictionary(metadata.map { pair in
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                return (String(parts[0]), String(parts[1]))
            }, uniquingKeysWith: { _, last in last })
        }

        /// Each upload's metadata, fresh (metadata objects are not shared between tasks).
        func metadataFor(_ custom: [String: String]?) -> StorageMetadata {
            let result = StorageMetadata()
            result.contentType = contentType
            result.cacheControl = cacheControl
            result.customMetadata = custom
            return result
        }
    }
}

/// Where `hoist cp` puts things: a storage and a path (or prefix) in it.
struct Destination {
    let storage: Storage
    let path: String
    var isPrefix: Bool { path.isEmpty || path.hasSuffix("/") }

    init(_ text: String, storage: String?, caBundle: String? = nil) throws {
        /// The storage for a URL; a gs:// one with `caBundle` trusts it (over the environment's).
        func open(_ url: String) throws -> Storage {
            guard let caBundle, url.hasPrefix("gs://") else { return Storage.storage(url: url) }
            let bucket = String(url.dropFirst("gs://".count).split(separator: "/").first ?? "")
            do {
                return Storage(url: url, backend: GCSBackend(try GCSBackend.Configuration.fromEnvironment(bucket: bucket, caBundle: caBundle)))
            } catch {
                FileHandle.standardError.write(Data("hoist: \(describe(error))\n".utf8))
                throw ExitCode(2)
            }
        }
        if text.hasPrefix("gs://") {
            let rest = text.dropFirst("gs://".count)
            let bucket = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            guard !bucket.isEmpty else { throw ValidationError("'\(text)' names no bucket: use gs://BUCKET/PATH.") }
            self.storage = try open("gs://\(bucket)")
            path = String(rest.dropFirst(bucket.count).drop { $0 == "/" })
        } else if text.hasPrefix("file:") {
            // A local bucket's directory: objects go at its root.
            self.storage = Storage.storage(url: text)
            path = ""
        } else {
            if let storage, storage.hasPrefix("gs://"),
               storage.dropFirst("gs://".count).split(separator: "/", omittingEmptySubsequences: false).first?.isEmpty ?? true {
                throw ValidationError("--storage '\(storage)' names no bucket: use gs://BUCKET.")
            }
            self.storage = try open(storage ?? ProcessInfo.processInfo.environment["HOIST_STORAGE_URL"] ?? "file:.hoist/bucket")
            path = text.hasPrefix("/") ? String(text.drop { $0 == "/" }) : text
        }
    }
}

/// The files to upload and their object names, found before the first byte moves.
struct CopyPlan {
    struct Item: Sendable {
        let file: String
        let object: String
        let size: Int64
    }

    private(set) var items: [Item] = []
    var totalBytes: Int64 { items.reduce(0) { $0 + $1.size } }

    init(sources: [String], destination: Destination) throws {
        let fm = FileManager.default
        // A local bucket inside a folder being copied (`hoist cp . web/` beside `.hoist/bucket`)
        // is not copied into itself.
        let bucketFolder = (destination.storage.backend as? LocalBucket)
            .map { URL(fileURLWithPath: $0.directory.path).resolvingSymlinksInPath().path + "/" }
        for source in sources {
            var isDirectory: ObjCBool = false
            let exists = fm.fileExists(atPath: source, isDirectory: &isDirectory)
            if exists, isDirectory.boolValue {
                guard destination.isPrefix else {
                    throw ValidationError("'\(source)' is a directory: give a destination ending in '/'.")
                }
                let root = URL(fileURLWithPath: source).standardizedFileURL
                let base = destination.path + root.lastPathComponent + "/"
                // The job walker: a name that is not UTF-8 or a folder that cannot be listed is an
                // error, never a file silently left out.
                var walker = FileWalker(root: root.path, hidden: true)
                var found: [Item] = []
                let realRoot = root.resolvingSymlinksInPath().path
                while let file = walker.next() {
                    if let bucketFolder, (realRoot + "/" + file.relativePath).hasPrefix(bucketFolder) { continue }
                    found.append(Item(file: file.path, object: base + file.relativePath, size: file.size))
                }
                if let problem = walker.problems.first(where: \.isFailure) {
                    throw ValidationError("\(problem). Nothing was uploaded.")
                }
                items += found.sorted { $0.object < $1.object }
            } else {
                let name = URL(fileURLWithPath: source).lastPathComponent
                if !destination.isPrefix, sources.count > 1 {
                    throw ValidationError("Several sources need a destination ending in '/'.")
                }
                let object = destination.isPrefix ? destination.path + name : destination.path
                let size = (try? fm.attributesOfItem(atPath: source)[.size] as? NSNumber)?.int64Value ?? 0
                items.append(Item(file: source, object: object, size: size))
            }
        }
        if let problem = items.lazy.compactMap({ objectNameProblem($0.object) }).first {
            throw ValidationError("\(problem). Nothing was uploaded.")
        }
    }
}
