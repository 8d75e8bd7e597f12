import ArgumentParser
import Foundation
import HoistHTTP
import HoistJobs
import HoistStorage

extension Hoist {
    /// `hoist cp SRC... DEST`: ad-hoc uploads, run by the engine of `hoist run` (a job made from
    /// the command line, without a journal).
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

                It runs as `hoist run` does (the same display, JSON events and signals: SIGINT or \
                SIGTERM cancel the uploads in flight, which leave nothing behind; SIGTSTP and SIGUSR1 \
                pause), keeping no journal. Options carry the manifest's names (docs/manifest.md).

                Exit status: 0 all uploaded, 1 some failed, 2 could not start, 130 interrupted.
                """
        )

        @Option(name: .long, help: "The bucket for a DEST without gs://: file:///ABS/DIR, file:REL/DIR or gs://BUCKET. Default: $HOIST_STORAGE_URL, else file:.hoist/bucket.")
        var storage: String?

        @Option(name: [.customShort("j"), .customLong("concurrency")], help: "How many uploads run at once (1-256).")
        var concurrency: Int = 4

        @Option(name: .long, help: ArgumentHelp("The most bytes per second all uploads send together, such as 10MB/s.", valueName: "rate"))
        var bandwidth: String?

        @Option(name: .long, help: ArgumentHelp("Upload only files of a directory whose path below it matches; repeat for more.", valueName: "glob"))
        var include: [String] = []

        @Option(name: .long, help: ArgumentHelp("Leave out files whose path below their directory matches; repeat for more.", valueName: "glob"))
        var exclude: [String] = []

        @Flag(name: .long, help: "Skip a file whose object already exists (checked before each upload).")
        var noClobber = false

        @Option(name: .long, help: "The Content-Type of every object (default: from each file's extension).")
        var contentType: String?

        @Option(name: .long, help: "The Cache-Control of every object.")
        var cacheControl: String?

        @Option(name: .long, help: "Custom metadata KEY=VALUE; repeat for more.")
        var metadata: [String] = []

        @Option(name: .long, help: ArgumentHelp("Files up to this size go up in one request, larger ones in parts (gs://, s3://), such as 64MiB.",
                                                valueName: "size"))
        var multipartThreshold: String?

        @Option(name: .long, help: ArgumentHelp("The size of a multipart upload's parts (s3://: 5MiB to 5GiB; default 8MiB).", valueName: "size"))
        var partSize: String?

        @Flag(name: .long, help: "Send requests unsigned, for a bucket that takes them (s3://).")
        var anonymous = false

        @OptionGroup var outputOptions: OutputOptions

        @Flag(name: .long, help: "Upload nothing: print each file and the object it would become.")
        var dryRun = false

        @OptionGroup var trustOptions: TrustOptions

        @Argument(help: "Files or directories to upload, then the destination.", completion: .file())
        var paths: [String] = []

        func validate() throws {
            guard paths.count >= 2 else { throw ValidationError("Give at least one file and a destination.") }
            guard (1...256).contains(concurrency) else { throw ValidationError("--concurrency must be 1 to 256.") }
            for pair in metadata where !pair.contains("=") || pair.hasPrefix("=") {
                throw ValidationError("--metadata takes KEY=VALUE with a KEY, not '\(pair)'.")
            }
            if storage != nil, let dest = paths.last, Destination.registration(of: dest) != nil {
                throw ValidationError("--storage names a bucket, and so does '\(dest)': give one of them.")
            }
        }

        func run() async throws {
            let job = try makeJob()
            if dryRun {
                try await printPlan(job, journal: nil, output: outputOptions, totalsOnly: false, suffix: "; nothing was uploaded (--dry-run)")
                return
            }
            let output = RunOutput(outputOptions)
            var options = sessionOptions(output, outputOptions, trustOptions)
            options.journal = false
            let events = outputOptions.json ? JSONEventLog(sink: .standardOutput) : nil
            let session = try await openSession(job, options: options, events: events)
            let observers: [any JobObserver] = events.map { [$0] } ?? []
            let summary = await output.run(session.makeRunner(observers: observers + output.observers))
            _ = session.finish(summary)
            try output.end(summary)
        }

        /// The job the command line describes: one file set per source (a directory, or one file),
        /// in the bucket DEST names, with the flags' metadata and upload settings.
        func makeJob() throws -> Job {
            let here = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
            let target = try Destination(paths.last!, storage: storage)
            var upload = UploadSettings()
            upload.concurrency = concurrency
            upload.skipUnchanged = false
            upload.noClobber = noClobber
            do {
                upload.bandwidth = try bandwidth.map { rate throws(ValueError) in try ByteRate.parse(rate) }
            } catch { throw ValidationError("--bandwidth: \(error.message).") }
            let includes = try globs(include, "--include")
            let excludes = try globs(exclude, "--exclude")
            let settings = metadataSettings()
            let sources = paths.dropLast()
            var sets: [FileSet] = []
            // Files named on the command line: the same file twice is uploaded once; two files
            // with one object name stop cp before any upload.
            var named = Set<String>()
            var objects: [String: String] = [:]
            for source in sources {
                let root = URL(fileURLWithPath: source, relativeTo: here).standardizedFileURL.path
                var info = stat()
                guard stat(root, &info) == 0 else {
                    let reason = String(cString: strerror(errno))
                    printError("hoist: \(printable(source)): \(reason). Nothing was uploaded.")
                    throw ExitCode(2)
                }
                let name = (root as NSString).lastPathComponent
                if (info.st_mode & S_IFMT) == S_IFDIR {
                    guard target.isPrefix else { throw ValidationError("'\(source)' is a directory: give a destination ending in '/'.") }
                    sets.append(FileSet(root: root, destination: Template(literal: target.path + name + "/", relpath: true),
                                        include: includes, exclude: excludes, metadata: settings, hidden: true))
                } else {
                    if !target.isPrefix, sources.count > 1 { throw ValidationError("Several sources need a destination ending in '/'.") }
                    let object = target.isPrefix ? target.path + name : target.path
                    // --include/--exclude choose among a directory's files; a file named is uploaded.
                    guard named.insert(root + "\n" + object).inserted else { continue }
                    if let other = objects[object] {
                        throw ValidationError("\(other) and \(source) would both be stored as '\(object)'. Nothing was uploaded.")
                    }
                    objects[object] = source
                    sets.append(FileSet(root: root, destination: Template(literal: object), metadata: settings, hidden: true))
                }
            }
            var storageSettings: StorageSettings
            do { storageSettings = try StorageSettings(location: StorageLocation(parsing: target.storageURL)) } catch {
                throw ValidationError(describe(error))
            }
            storageSettings.options = try backendOptions(for: storageSettings.registration)
            let manifest = JobManifest(name: "cp", storage: storageSettings, files: sets, upload: upload)
            return Job(manifest: manifest, file: "hoist cp", directory: here)
        }

        /// The backend's options with `--multipart-threshold` and `--part-size`, read as the
        /// manifest's keys of the same names are (a backend that has no such key refuses the flag).
        private func backendOptions(for registration: BackendRegistration) throws -> any BackendOptions {
            let given: [(key: String, flag: String, value: any Sendable)] =
                [("multipartThreshold", "--multipart-threshold", multipartThreshold), ("partSize", "--part-size", partSize)]
                    .compactMap { key, flag, value in value.map { (key: key, flag: flag, value: $0) } }
                + (anonymous ? [(key: "anonymous", flag: "--anonymous", value: true)] : [])
            for option in given where !registration.options.keys.contains(option.key) {
                let takers = BackendRegistry.all.filter { $0.options.keys.contains(option.key) }.map { "\($0.scheme)://" }
                throw ValidationError("\(option.flag) applies to \(takers.joined(separator: " and ")) destinations, not \(registration.scheme):.")
            }
            guard !given.isEmpty else { return registration.options.init() }
            let json = try JSONSerialization.data(withJSONObject: Dictionary(uniqueKeysWithValues: given.map { ($0.key, $0.value) }))
            let decoder = JSONDecoder()
            decoder.userInfo[OptionsFromFlags.type] = registration.options
            do { return try decoder.decode(OptionsFromFlags.self, from: json).options } catch let DecodingError.dataCorrupted(context) {
                let flag = given.first { option in context.codingPath.contains { $0.stringValue == option.key } }?.flag ?? given[0].flag
                throw ValidationError("\(flag): \(context.debugDescription)")
            } catch {
                throw ValidationError("\(given.map(\.flag).joined(separator: ", ")): \(describe(error))")
            }
        }

        private func globs(_ patterns: [String], _ flag: String) throws -> [Glob] {
            try patterns.map { pattern in
                do { return try Glob(parsing: pattern) } catch let error as ValueError { throw ValidationError("\(flag): \(error.message).") }
            }
        }

        private func metadataSettings() -> MetadataSettings? {
            guard contentType != nil || cacheControl != nil || !metadata.isEmpty else { return nil }
            let custom = Dictionary(metadata.map { pair in
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                return (String(parts[0]), Template(literal: String(parts[1])))
            }, uniquingKeysWith: { _, last in last })
            return MetadataSettings(contentType: contentType.map { Template(literal: $0) },
                                    cacheControl: cacheControl.map { Template(literal: $0) },
                                    customMetadata: custom.isEmpty ? nil : custom)
        }
    }
}

/// Where `hoist cp` puts things: a bucket (its storage URL) and a path, or a prefix, in it.
struct Destination {
    let storageURL: String
    let path: String
    var isPrefix: Bool { path.isEmpty || path.hasSuffix("/") }

    /// `text` as a URL of a registered backend (`SCHEME://...`, or `SCHEME:...` for a folder
    /// form such as `file:`) split by its registration; else a path in `storage`'s bucket
    /// (`--storage`, `$HOIST_STORAGE_URL`, else `file:.hoist/bucket`).
    init(_ text: String, storage: String?) throws {
        if let registration = Self.registration(of: text) {
            do { (storageURL, path) = try registration.splitCopyDestination(text) } catch { throw ValidationError(describe(error)) }
        } else if let scheme = Self.urlScheme(text) {
            // `s3://b/x` is not an object named `s3:/b/x` in the default bucket.
            throw ValidationError("'\(text)': no storage backend serves \(scheme):// URLs; Hoist stores to \(BackendRegistry.copyForms): "
                + "name one of those, or a path in --storage's bucket.")
        } else {
            let url = storage ?? ProcessInfo.processInfo.environment["HOIST_STORAGE_URL"] ?? "file:.hoist/bucket"
            guard let registration = Self.registration(of: url) else {
                throw ValidationError("--storage '\(url)': use \(BackendRegistry.forms).")
            }
            if let problem = registration.problemAsCopyStorage(url) { throw ValidationError("--storage '\(url)' \(problem)") }
            storageURL = url
            path = text.hasPrefix("/") ? String(text.drop { $0 == "/" }) : text
        }
    }

    /// The registration serving `text` as a storage URL: `SCHEME://...`, or `SCHEME:...` of a
    /// folder form (`file:REL/DIR`); nil for a plain path or a scheme no backend serves.
    static func registration(of text: String) -> BackendRegistration? {
        guard let colon = text.firstIndex(of: ":"), let registration = BackendRegistry.registration(for: String(text[..<colon])) else {
            return nil
        }
        return registration.urlForm == .folder || text[colon...].hasPrefix("://") ? registration : nil
    }

    /// The scheme of text that starts like a URL (`NAME://`, NAME a letter then letters,
    /// digits, `+`, `-` or `.`), or nil.
    static func urlScheme(_ text: String) -> String? {
        guard let range = text.range(of: "://") else { return nil }
        let scheme = text[..<range.lowerBound]
        guard let first = scheme.first, first.isASCII, first.isLetter,
              scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }) else { return nil }
        return String(scheme)
    }
}

/// A backend's options read from `hoist cp`'s flags, its type passed in the decoder's `userInfo`.
private struct OptionsFromFlags: Decodable {
    static let type = CodingUserInfoKey(rawValue: "hoist.backendOptionsType")!
    let options: any BackendOptions

    init(from decoder: any Decoder) throws {
        guard let type = decoder.userInfo[Self.type] as? any BackendOptions.Type else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "no options type given"))
        }
        options = try type.init(from: decoder)
    }
}
