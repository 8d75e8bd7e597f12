import Foundation
import HoistStorage
import HoistYAML

/// A job: what to upload, where, and how. See docs/manifest.md for every key.
public struct JobManifest: Decodable, Sendable {
    /// The manifest format; only 1 exists.
    public var version: Int
    /// The job's name: letters, digits, `.`, `_` and `-`.
    public var name: String
    public var storage: StorageSettings
    public var files: [FileSet]
    public var upload: UploadSettings
    public var hooks: [HookSource]
    /// How hooks run: sandbox openings, budgets, progress pacing.
    public var lua: LuaSettings
    public var schedule: CronExpression?
    /// Free text for people.
    public var description: String?
    /// The journal's path (relative to the manifest); default `$XDG_STATE_HOME/hoist/NAME.sqlite`.
    public var journal: String?
    /// Environment variables the job sets for itself (over the process's own, so that a run from
    /// cron's bare environment is the run of a terminal): `${VAR}` in the manifest, `{env:VAR}`,
    /// storage credentials and hooks' `os.getenv` all read them. See `Job.init`.
    public var env: [String: String]
    /// A file of `KEY=VALUE` lines (relative to the manifest) the job reads its environment from,
    /// under `env:` (which wins) and over the process's own. See `Job.init`.
    public var envFile: String?
    /// How `hoist watch` waits for files to settle.
    public var watch: WatchSettings

    enum CodingKeys: String, CodingKey, CaseIterable {
        case version, name, storage, files, upload, hooks, lua, schedule, description, journal, env, envFile, watch
    }

    /// A job made in code rather than read from YAML (`hoist cp`): no hooks, no schedule.
    public init(name: String, storage: StorageSettings, files: [FileSet], upload: UploadSettings = UploadSettings()) {
        version = 1
        self.name = name
        self.storage = storage
        self.files = files
        self.upload = upload
        hooks = []
        lua = LuaSettings()
        env = [:]
        watch = WatchSettings()
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        version = try c.decode(Int.self, forKey: .version, in: decoder, placeholder: 1)
        if version != 1 {
            try decoder.report(.dataCorruptedError(forKey: .version, in: c, debugDescription: "unsupported version \(version): this Hoist reads version 1"))
        }
        name = try c.decode(String.self, forKey: .name, in: decoder, placeholder: "placeholder")
        if name.isEmpty || !name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) {
            try decoder.report(.dataCorruptedError(forKey: .name, in: c,
                debugDescription: "bad job name '\(name)': use letters, digits, '.', '_' and '-'"))
        }
        storage = try c.decode(StorageSettings.self, forKey: .storage, in: decoder, placeholder: .placeholder)
        files = try c.decode([FileSet].self, forKey: .files, in: decoder, placeholder: [FileSet(root: ".", destination: .relativePath)])
        if files.isEmpty {
            try decoder.report(.dataCorruptedError(forKey: .files, in: c, debugDescription: "files is empty: list at least one file set"))
        }
        try Self.refuseMirrorsAcrossTheWholeBucket(storage: storage, files: files, c, decoder)
        upload = try c.decodeIfPresent(UploadSettings.self, forKey: .upload) ?? UploadSettings()
        hooks = try c.decodeIfPresent([HookSource].self, forKey: .hooks) ?? []
        lua = try c.decodeIfPresent(LuaSettings.self, forKey: .lua) ?? LuaSettings()
        schedule = try c.decodeIfPresent(CronExpression.self, forKey: .schedule)
        description = try c.decodeIfPresent(String.self, forKey: .description)
        journal = try c.decodeIfPresent(String.self, forKey: .journal)
        env = try c.decodeIfPresent([String: String].self, forKey: .env) ?? [:]
        envFile = try c.decodeIfPresent(String.self, forKey: .envFile)
        watch = try c.decodeIfPresent(WatchSettings.self, forKey: .watch) ?? WatchSettings()
        for key in env.keys.sorted() where key.isEmpty || key.first!.isNumber
            || !key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) {
            try decoder.report(.dataCorruptedError(forKey: .env, in: c,
                debugDescription: "bad variable name '\(key)' in env: use letters, digits and '_', not starting with a digit"))
        }
    }
}

/// `storage:` where the objects go: `url`, and the keys of the backend serving its scheme
/// (`BackendRegistration.options`, decoded from this same mapping: the GCS backend's
/// `credentials`, `caBundle`, ... sit flat beside `url`).
public struct StorageSettings: Decodable, Sendable {
    /// A URL of a registered backend: `gs://BUCKET`, `file:///ABS/DIR` or `file:REL/DIR`
    /// (relative to the manifest's folder).
    public var url: String
    /// `url`, parsed.
    public var location: StorageLocation
    /// The backend's own keys.
    public var options: any BackendOptions
    /// The backend serving `url`.
    public var registration: BackendRegistration

    enum CodingKeys: String, CodingKey, CaseIterable { case url }

    /// What a manifest whose `storage` has a mistake is read on with, to find the mistakes after it.
    static var placeholder: StorageSettings { try! StorageSettings(location: StorageLocation(parsing: "file:.")) }

    /// Storage made in code (`hoist cp`), with its backend's default options.
    /// - Throws: `StorageFailure` for a scheme no backend serves.
    public init(location: StorageLocation) throws {
        guard let registration = BackendRegistry.registration(for: location.scheme) else {
            throw StorageFailure(.invalidArgument, "No storage backend for \(location.url): use \(BackendRegistry.forms)")
        }
        url = location.url
        self.location = location
        self.registration = registration
        options = registration.options.init()
    }

    /// "a file: storage takes only url (region is a key of s3: storage)": what a storage whose
    /// manifest holds the unknown `key` takes, and which backends take that key.
    static func keysTaken(by registration: BackendRegistration, unknown key: String) -> String {
        let keys = CodingKeys.allCases.map(\.stringValue) + registration.options.keys
        let article = "aeiou".contains(registration.scheme.prefix(1)) ? "an" : "a"
        var text = "\(article) \(registration.scheme): storage takes " + (keys.count == 1 ? "only \(keys[0])" : keys.joined(separator: ", "))
        let others = BackendRegistry.all.filter { $0.scheme != registration.scheme && $0.options.keys.contains(key) }.map { "\($0.scheme):" }
        if !others.isEmpty { text += " (\(key) is a key of \(others.joined(separator: ", ")) storage)" }
        return text
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        url = try c.decode(String.self, forKey: .url)
        guard let location = try? StorageLocation(parsing: url), let registration = BackendRegistry.registration(for: location.scheme) else {
            let noBucket = url.hasSuffix("://") && BackendRegistry.registration(for: String(url.dropLast(3))) != nil
            throw DecodingError.dataCorruptedError(forKey: .url, in: c,
                debugDescription: "bad storage url '\(url)': " + (noBucket ? "no bucket name" : "use \(BackendRegistry.forms)"))
        }
        if registration.urlForm == .bucket, !location.path.isEmpty || url.dropFirst(registration.scheme.count + 3).contains("/") {
            throw DecodingError.dataCorruptedError(forKey: .url, in: c,
                debugDescription: "bad storage url '\(url)': a \(registration.scheme):// url names only a bucket (put paths in destination)")
        }
        self.location = location
        self.registration = registration
        decoder.explainUnknownKeys { key in Self.keysTaken(by: registration, unknown: key) }
        do {
            options = try registration.options.init(from: decoder)
        } catch let error as DecodingError {
            // As for any other key's bad value: said, and the decoding goes on to find more.
            try decoder.report(error)
            options = registration.options.init()
        }
    }
}

/// One entry of `files:`: a folder, which files of it, and where they go.
public struct FileSet: Decodable, Sendable {
    /// The folder to upload from, relative to the manifest's folder.
    public var root: String
    /// Files to take (default: all).
    public var include: [Glob]
    /// Files to leave out, even if included.
    public var exclude: [Glob]
    /// Where each file goes (default `{relpath}`).
    public var destination: Template
    public var metadata: MetadataSettings?
    /// Metadata for the files that match a glob, applied over `metadata` in order.
    public var rules: [MetadataRule]
    /// Take files and folders whose names start with '.' (default false).
    public var hidden: Bool
    /// Follow symbolic links (default false); loops are detected and skipped.
    public var followSymlinks: Bool
    public var minSize: ByteSize?
    public var maxSize: ByteSize?
    /// Skip files modified more recently than this (still being written).
    public var minAge: TimeSpan?
    /// A missing root is no error: the set is skipped with a note (default false: a missing or
    /// unreadable root stops the job with exit 2, so a mount that went away never looks like success).
    public var optional: Bool
    /// Globs (`include`, `exclude`, rules' `match`) match letters whatever their case (default
    /// false: `*.jpg` does not match `SCAN.JPG`).
    public var ignoreCase: Bool
    /// Delete the objects whose files are gone (`true`), and with `listed` also the strays a
    /// listing of the destination prefix finds (default false). See `MirrorPlan`.
    public var mirror: MirrorMode = .off
    /// Let `mirror` work on a destination with no fixed prefix: the whole bucket (default false).
    public var mirrorWholeBucket = false
    /// Remove each file once its object is verified and recorded done (default false). See `Mover`.
    public var move = false
    /// With `move`, remove the folders below the root that moving emptied (default false).
    public var removeEmptyFolders = false

    /// gzip the files on the way up (all of them, or those `include` names); nil: sent as they are.
    public var compress: Compression?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case root, include, exclude, destination, metadata, rules, hidden, followSymlinks, minSize, maxSize, minAge, optional, ignoreCase
        case mirror, mirrorWholeBucket, move, removeEmptyFolders
        case compress
    }

    /// A file set made in code (`hoist cp`). `root` may also be one file: the set is that file.
    public init(root: String, destination: Template, include: [Glob] = [], exclude: [Glob] = [], metadata: MetadataSettings? = nil,
                hidden: Bool = false) {
        self.root = root
        self.destination = destination
        self.include = include
        self.exclude = exclude
        self.metadata = metadata
        self.hidden = hidden
        rules = []
        followSymlinks = false
        optional = false
        ignoreCase = false
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        root = try c.decode(String.self, forKey: .root, in: decoder, placeholder: ".")
        include = try c.decodeIfPresent(GlobList.self, forKey: .include)?.globs ?? []
        exclude = try c.decodeIfPresent(GlobList.self, forKey: .exclude)?.globs ?? []
        destination = try c.decodeIfPresent(Template.self, forKey: .destination) ?? .relativePath
        if destination.hasLiteralParentSegment {
            // The planner refuses such a name for every file; say so where it is written.
            try decoder.report(.dataCorruptedError(forKey: .destination, in: c,
                debugDescription: "destination '\(destination.text)' has a '..' segment: object names stay below the bucket's root, and '..' cannot be normalized away"))
        }
        metadata = try c.decodeIfPresent(MetadataSettings.self, forKey: .metadata)
        rules = try c.decodeIfPresent([MetadataRule].self, forKey: .rules) ?? []
        hidden = try c.decodeIfPresent(Bool.self, forKey: .hidden) ?? false
        followSymlinks = try c.decodeIfPresent(Bool.self, forKey: .followSymlinks) ?? false
        minSize = try c.decodeIfPresent(ByteSize.self, forKey: .minSize)
        maxSize = try c.decodeIfPresent(ByteSize.self, forKey: .maxSize)
        minAge = try c.decodeIfPresent(TimeSpan.self, forKey: .minAge)
        optional = try c.decodeIfPresent(Bool.self, forKey: .optional) ?? false
        ignoreCase = try c.decodeIfPresent(Bool.self, forKey: .ignoreCase) ?? false
        compress = try c.decodeIfPresent(Compression.self, forKey: .compress)
        if ignoreCase {
            if var compressing = compress {
                compressing.include = compressing.include.map { $0.ignoringCase() }
                compress = compressing
            }
            include = include.map { $0.ignoringCase() }
            exclude = exclude.map { $0.ignoringCase() }
            for index in rules.indices { rules[index].match = rules[index].match.map { $0.ignoringCase() } }
        }
        try decodeMirrorAndMove(c, decoder)
        if let minSize, let maxSize, minSize > maxSize {
            try decoder.report(.dataCorruptedError(forKey: .maxSize, in: c,
                debugDescription: "maxSize (\(maxSize.bytes) B) is smaller than minSize (\(minSize.bytes) B)"))
        }
    }
}

extension JobManifest {
    /// A mirror whose destination has no fixed prefix deletes across the whole bucket: refused at
    /// its `mirror` key unless `mirrorWholeBucket` says so, or the storage URL's own prefix
    /// confines it (`s3://bucket/site` with `{relpath}`).
    private static func refuseMirrorsAcrossTheWholeBucket(storage: StorageSettings, files: [FileSet], _ c: KeyedDecodingContainer<CodingKeys>,
                                                          _ decoder: any Decoder) throws {
        let location = storage.location
        if !location.path.isEmpty, BackendRegistry.registration(for: location.scheme)?.urlForm == .bucketAndPrefix { return }
        guard files.contains(where: { $0.mirror != .off && $0.destination.literalPrefix.isEmpty && !$0.mirrorWholeBucket }),
              var list = try? c.nestedUnkeyedContainer(forKey: .files) else { return }
        for set in files {
            guard let element = try? list.nestedContainer(keyedBy: FileSet.CodingKeys.self) else { return }
            if set.mirror != .off, set.destination.literalPrefix.isEmpty, !set.mirrorWholeBucket {
                try decoder.report(.dataCorruptedError(forKey: .mirror, in: element,
                    debugDescription: "mirror on destination '\(set.destination.text)' would delete across the whole bucket: give the destination a fixed prefix (site/{relpath}), or set mirrorWholeBucket: true"))
            }
        }
    }
}

extension FileSet {
    /// `mirror`, `mirrorWholeBucket`, `move`, `removeEmptyFolders`, and what they refuse.
    private mutating func decodeMirrorAndMove(_ c: KeyedDecodingContainer<CodingKeys>, _ decoder: any Decoder) throws {
        mirror = try c.decodeIfPresent(MirrorMode.self, forKey: .mirror) ?? .off
        mirrorWholeBucket = try c.decodeIfPresent(Bool.self, forKey: .mirrorWholeBucket) ?? false
        move = try c.decodeIfPresent(Bool.self, forKey: .move) ?? false
        removeEmptyFolders = try c.decodeIfPresent(Bool.self, forKey: .removeEmptyFolders) ?? false
        if mirror != .off, move {
            try decoder.report(.dataCorruptedError(forKey: .move, in: c,
                debugDescription: "move and mirror together would delete every object whose file was moved: choose one"))
        }
        if removeEmptyFolders, !move {
            try decoder.report(.dataCorruptedError(forKey: .removeEmptyFolders, in: c,
                debugDescription: "removeEmptyFolders removes the folders move emptied: set move: true too"))
        }
    }
}

/// `compress:` on a file set: `gzip` for every file, or `{ format: gzip, level: 6, include: [GLOBS] }`.
/// Files are stored gzipped with `Content-Encoding: gzip` (their content type unchanged).
public struct Compression: Decodable, Sendable, Equatable {
    /// The only format: gzip.
    public var format = "gzip"
    /// zlib's level, 1 (fastest) to 9 (smallest); 6, gzip's own default, unless set.
    public var level = 6
    /// The files to compress, globs as `include`'s (default: every file of the set).
    public var include: [Glob] = []

    enum CodingKeys: String, CodingKey, CaseIterable { case format, level, include }

    public init(level: Int = 6, include: [Glob] = []) {
        self.level = level
        self.include = include
    }

    public init(from decoder: any Decoder) throws {
        if (try? decoder.container(keyedBy: AnyKey.self)) == nil {
            let text = try decoder.singleValueContainer().decode(String.self)
            guard text == "gzip" else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                    debugDescription: "compress '\(text)' is not a format: use gzip, or { format: gzip, level: 6, include: [GLOBS] }"))
            }
            return
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        format = try c.decodeIfPresent(String.self, forKey: .format) ?? "gzip"
        if format != "gzip" {
            try decoder.report(.dataCorruptedError(forKey: .format, in: c, debugDescription: "compress format '\(format)' is not known: use gzip"))
            format = "gzip"
        }
        level = try c.decodeIfPresent(Int.self, forKey: .level) ?? 6
        if !(1...9).contains(level) {
            try decoder.report(.dataCorruptedError(forKey: .level, in: c, debugDescription: "compress level \(level) is out of range 1-9"))
            level = 6
        }
        include = try c.decodeIfPresent(GlobList.self, forKey: .include)?.globs ?? []
    }

    /// Whether the file at `relativePath` (below the set's root) is compressed.
    public func applies(to relativePath: String) -> Bool {
        include.isEmpty || include.contains { $0.matches(relativePath) }
    }
}

/// A glob, or a list of globs. Each bad glob of a list is reported, and the reading goes on
/// (to the next glob, and to the keys after the list).
struct GlobList: Decodable {
    let globs: [Glob]
    init(from decoder: any Decoder) throws {
        func reading(_ decode: () throws -> Glob) throws -> [Glob] {
            do { return [try decode()] } catch let error as DecodingError {
                try decoder.report(error)
                return []
            }
        }
        if var items = try? decoder.unkeyedContainer() {
            var globs: [Glob] = []
            while !items.isAtEnd { globs += try reading { try items.decode(Glob.self) } }
            self.globs = globs
        } else if (try? decoder.container(keyedBy: AnyKey.self)) != nil {
            globs = try [Glob](from: decoder)   // reports "expected a list, found a mapping"
        } else {
            globs = try reading { try Glob(from: decoder) }
        }
    }
}

/// Any key, to ask whether a node is a mapping.
struct AnyKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// `metadata:` the writable `StorageMetadata` fields; values are templates.
public struct MetadataSettings: Decodable, Sendable {
    public var contentType: Template?
    public var cacheControl: Template?
    public var contentDisposition: Template?
    public var contentEncoding: Template?
    public var contentLanguage: Template?
    public var customMetadata: [String: Template]?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case contentType, cacheControl, contentDisposition, contentEncoding, contentLanguage, customMetadata
    }

    /// Each header field's template and the object field it fills, in `ObjectResource.headerFields`' order.
    static let fields: [(name: String, template: KeyPath<MetadataSettings, Template?> & Sendable,
                         keyPath: WritableKeyPath<ObjectResource, String?> & Sendable)] = [
        ("contentType", \.contentType, \.contentType),
        ("cacheControl", \.cacheControl, \.cacheControl),
        ("contentDisposition", \.contentDisposition, \.contentDisposition),
        ("contentEncoding", \.contentEncoding, \.contentEncoding),
        ("contentLanguage", \.contentLanguage, \.contentLanguage),
    ]

    public init(contentType: Template? = nil, cacheControl: Template? = nil, customMetadata: [String: Template]? = nil) {
        self.contentType = contentType
        self.cacheControl = cacheControl
        self.customMetadata = customMetadata
    }
}

/// `rules:` metadata for files matching `match`.
public struct MetadataRule: Decodable, Sendable {
    public var match: [Glob]
    public var metadata: MetadataSettings

    enum CodingKeys: String, CodingKey, CaseIterable { case match, metadata }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        match = try c.decode(GlobList.self, forKey: .match).globs
        metadata = try c.decode(MetadataSettings.self, forKey: .metadata)
    }
}

/// `upload:` how the scheduler runs.
public struct UploadSettings: Decodable, Sendable {
    /// Uploads in flight at once (default 4, at most 256).
    public var concurrency: Int = 4
    /// Threads that read and compress files for the uploads, ahead of the connections that
    /// send them (default: one per core, at most 256).
    public var cpu: Int?
    /// Attempts after the first for a transient failure (default 5).
    public var retries: Int = 5
    /// How long one upload may keep retrying (default 600 s).
    public var retryTime: TimeSpan = TimeSpan(seconds: 600)
    /// The most bytes per second all uploads send together (default: no limit).
    public var bandwidth: ByteRate?
    /// Skip files uploaded unchanged before (default true; needs the journal).
    public var skipUnchanged: Bool = true
    /// `skipUnchanged: checksum`: "unchanged" is decided by content (the file's CRC32C against
    /// the journal's), not by modification time; a file's hash is kept in the journal with its
    /// inode, size, mtime and ctime, so only files whose status changed are read again.
    public var skipByChecksum = false
    /// Before skipping a file as unchanged, ask the server: upload it again when the object is
    /// gone or its size or MD5 differ from what the journal recorded (default false).
    public var remoteCheck: Bool = false
    /// Stop starting uploads after this many failures (default: never).
    public var maxErrors: Int?
    /// Stop at the first failure, cancelling uploads in flight (default false).
    public var failFast: Bool = false
    /// Skip a file whose object already exists in the bucket, asking the server before each
    /// upload (default false; `hoist cp --no-clobber`).
    public var noClobber: Bool = false
    /// The most objects a run's `mirror` may delete: a count or a percentage (default: no limit).
    public var maxDelete: DeleteLimit?

    public init() {}

    enum CodingKeys: String, CodingKey, CaseIterable {
        case concurrency, retries, retryTime, bandwidth, skipUnchanged, remoteCheck, maxErrors, failFast, noClobber
        case maxDelete, cpu
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        concurrency = try c.decodeIfPresent(Int.self, forKey: .concurrency) ?? 4
        if !(1...256).contains(concurrency) {
            try decoder.report(.dataCorruptedError(forKey: .concurrency, in: c, debugDescription: "concurrency \(concurrency) is out of range 1-256"))
            concurrency = 4
        }
        cpu = try c.decodeIfPresent(Int.self, forKey: .cpu)
        if let cpu, !(1...256).contains(cpu) {
            try decoder.report(.dataCorruptedError(forKey: .cpu, in: c, debugDescription: "cpu \(cpu) is out of range 1-256"))
            self.cpu = nil
        }
        retries = try c.decodeIfPresent(Int.self, forKey: .retries) ?? 5
        if !(0...100).contains(retries) {
            try decoder.report(.dataCorruptedError(forKey: .retries, in: c, debugDescription: "retries \(retries) is out of range 0-100"))
            retries = 5
        }
        retryTime = try c.decodeIfPresent(TimeSpan.self, forKey: .retryTime) ?? TimeSpan(seconds: 600)
        bandwidth = try c.decodeIfPresent(ByteRate.self, forKey: .bandwidth)
        let skip = try c.decodeIfPresent(SkipUnchanged.self, forKey: .skipUnchanged) ?? .metadata
        skipUnchanged = skip != .no
        skipByChecksum = skip == .checksum
        remoteCheck = try c.decodeIfPresent(Bool.self, forKey: .remoteCheck) ?? false
        noClobber = try c.decodeIfPresent(Bool.self, forKey: .noClobber) ?? false
        maxErrors = try c.decodeIfPresent(Int.self, forKey: .maxErrors)
        if let maxErrors, maxErrors < 1 {
            try decoder.report(.dataCorruptedError(forKey: .maxErrors, in: c, debugDescription: "maxErrors must be at least 1"))
            self.maxErrors = nil
        }
        failFast = try c.decodeIfPresent(Bool.self, forKey: .failFast) ?? false
        maxDelete = try c.decodeIfPresent(DeleteLimit.self, forKey: .maxDelete)
    }
}

/// `upload.skipUnchanged`: `true` (size, mtime and metadata), `false`, or `checksum` (size,
/// content and metadata).
enum SkipUnchanged: Decodable {
    case no, metadata, checksum

    init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        switch text {
        case "checksum": self = .checksum
        case "true", "True", "TRUE", "yes", "on": self = .metadata
        case "false", "False", "FALSE", "no", "off": self = .no
        default:
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                debugDescription: "skipUnchanged is true, false or checksum, not '\(text)'"))
        }
    }
}

/// An entry of `hooks:`: a Lua file (relative to the manifest), `inline:` Lua, or a plugin by
/// name with its settings (`{ plugin: webhook, with: { url: ... } }`, see `PluginCatalog`).
public enum HookSource: Decodable, Sendable, Equatable {
    case file(String)
    case inline(String)
    case plugin(String, settings: [String: PluginSetting])

    enum CodingKeys: String, CodingKey, CaseIterable { case inline, plugin, with }

    public init(from decoder: any Decoder) throws {
        if let path = try? decoder.singleValueContainer().decode(String.self) {
            self = .file(path)
            return
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        if c.contains(.plugin) {
            let name = try c.decode(String.self, forKey: .plugin)
            self = .plugin(name, settings: try c.decodeIfPresent([String: PluginSetting].self, forKey: .with) ?? [:])
            return
        }
        self = .inline(try c.decode(String.self, forKey: .inline))
    }
}

/// A value under a plugin's `with:`: a scalar, or a list of scalars.
public enum PluginSetting: Decodable, Sendable, Equatable {
    case scalar(String)
    case list([String])

    public init(from decoder: any Decoder) throws {
        if (try? decoder.unkeyedContainer()) != nil {
            self = .list(try [String](from: decoder))
        } else {
            self = .scalar(try decoder.singleValueContainer().decode(String.self))
        }
    }
}

/// `lua:` how hooks run.
public struct LuaSettings: Decodable, Sendable {
    /// Libraries outside the sandbox to open, by name: `io`, `os`, `debug`, `require`, `load_binary`.
    public var allow: [String] = []
    /// VM instructions one hook call may run (default 10,000,000).
    public var instructionLimit: Int = 10_000_000
    /// Memory all of a job's hooks may hold (default 64MiB).
    public var memoryLimit = ByteSize(bytes: 64 << 20)
    /// The least time between two `on_progress` calls for one upload (default 250ms); the first and
    /// the last (100%) are always delivered.
    public var progressInterval = TimeSpan(seconds: 0.25)
    /// Events waiting for the hooks beyond which `on_progress` calls are dropped (default 1000);
    /// other events are never dropped.
    public var queueLimit: Int = 1000
    /// Wall-clock time one hook call may take, whatever it does (default 10s).
    public var timeLimit = TimeSpan(seconds: 10)
    /// The environment variables `os.getenv` shows hooks beyond the default set (see
    /// `HookEnvironment`): names, or a name's start and `*` (`HOIST_GUARD_*`). Their values are
    /// given whole.
    public var env: [String] = []
    /// Deprecated: variables granted as `env` grants them (a warning says so; see `Job.warnings`).
    public var secrets: [String] = []
    /// The one folder `hoist.append_file` writes below (relative to the manifest's folder, or
    /// absolute); it must hold nothing Hoist reads. nil: hooks write no files.
    public var output: String?

    public init() {}

    enum CodingKeys: String, CodingKey, CaseIterable { case allow, instructionLimit, memoryLimit, progressInterval, queueLimit, timeLimit, env, secrets, output }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        allow = try c.decodeIfPresent([String].self, forKey: .allow) ?? []
        let known: Set<String> = ["io", "os", "debug", "require", "load_binary"]
        if let bad = allow.first(where: { !known.contains($0) }) {
            throw DecodingError.dataCorruptedError(forKey: .allow, in: c,
                debugDescription: "cannot allow '\(bad)': choose from \(known.sorted().joined(separator: ", "))")
        }
        instructionLimit = try c.decodeIfPresent(Int.self, forKey: .instructionLimit) ?? 10_000_000
        guard instructionLimit >= 1000 else {
            throw DecodingError.dataCorruptedError(forKey: .instructionLimit, in: c, debugDescription: "instructionLimit must be at least 1000")
        }
        memoryLimit = try c.decodeIfPresent(ByteSize.self, forKey: .memoryLimit) ?? ByteSize(bytes: 64 << 20)
        guard memoryLimit.bytes >= 1 << 20 else {
            throw DecodingError.dataCorruptedError(forKey: .memoryLimit, in: c, debugDescription: "memoryLimit must be at least 1MiB")
        }
        progressInterval = try c.decodeIfPresent(TimeSpan.self, forKey: .progressInterval) ?? TimeSpan(seconds: 0.25)
        queueLimit = try c.decodeIfPresent(Int.self, forKey: .queueLimit) ?? 1000
        guard queueLimit >= 1 else {
            throw DecodingError.dataCorruptedError(forKey: .queueLimit, in: c, debugDescription: "queueLimit must be at least 1")
        }
        timeLimit = try c.decodeIfPresent(TimeSpan.self, forKey: .timeLimit) ?? TimeSpan(seconds: 10)
        guard (0.01...3600).contains(timeLimit.seconds) else {
            throw DecodingError.dataCorruptedError(forKey: .timeLimit, in: c, debugDescription: "timeLimit must be between 10ms and 1h")
        }
        env = try c.decodeIfPresent([String].self, forKey: .env) ?? []
        for grant in env {
            if let problem = Self.grantProblem(grant) {
                throw DecodingError.dataCorruptedError(forKey: .env, in: c, debugDescription: problem)
            }
        }
        secrets = try c.decodeIfPresent([String].self, forKey: .secrets) ?? []
        output = try c.decodeIfPresent(String.self, forKey: .output)
        if output?.isEmpty == true {
            throw DecodingError.dataCorruptedError(forKey: .output, in: c, debugDescription: "output names a folder for what hooks write, such as logs/")
        }
    }

    /// Why `grant` cannot be an entry of `lua.env`: a name (letters, digits and `_`, not starting
    /// with a digit), or the start of one and a final `*`. A glob that starts with `*` (`*`,
    /// `*_URL`) would grant variables nobody named, credentials among them, and is refused.
    static func grantProblem(_ grant: String) -> String? {
        let name = grant.hasSuffix("*") ? grant.dropLast() : Substring(grant)
        if name.isEmpty {
            return "lua.env cannot grant '\(grant)': that is every variable, credentials included; name each one, or the start of their names (HOIST_GUARD_*)"
        }
        guard !name.first!.isNumber, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
            return "lua.env cannot grant '\(grant.prefix(80))': give a variable's name (letters, digits and '_', not starting with a digit), "
                + "or the start of one and a final * (HOIST_GUARD_*)"
        }
        return nil
    }

    /// Whether `lua.env` (or the deprecated `lua.secrets`) grants hooks the variable `name`.
    public func grants(_ name: String) -> Bool {
        secrets.contains(name) || env.contains { $0.hasSuffix("*") ? name.hasPrefix($0.dropLast()) : name == $0 }
    }
}

/// `watch:` how `hoist watch` waits for files to settle before it uploads them.
public struct WatchSettings: Decodable, Sendable {
    /// A path is settled when no event touched it for this long (default 2s).
    public var settle = TimeSpan(seconds: 2)
    /// A path that keeps changing for longer than this is uploaded anyway (default 1m).
    public var maxWait = TimeSpan(seconds: 60)
    /// A full pass this often whatever the events say (file systems that deliver none: NFS,
    /// SMB, FUSE); nil: none.
    public var rescan: TimeSpan?
    /// A set that mirrors deletes what went (files deleted, renamed or moved away) once per
    /// window this long, after the window's uploads succeeded, `upload.maxDelete` counted over
    /// the window (default 1m).
    public var window = TimeSpan(seconds: 60)

    public init() {}

    enum CodingKeys: String, CodingKey, CaseIterable { case settle, maxWait, rescan, window }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        settle = try c.decodeIfPresent(TimeSpan.self, forKey: .settle) ?? TimeSpan(seconds: 2)
        guard (0.01...3600).contains(settle.seconds) else {
            throw DecodingError.dataCorruptedError(forKey: .settle, in: c, debugDescription: "settle must be between 10ms and 1h")
        }
        maxWait = try c.decodeIfPresent(TimeSpan.self, forKey: .maxWait) ?? TimeSpan(seconds: max(60, settle.seconds))
        guard maxWait.seconds >= settle.seconds else {
            throw DecodingError.dataCorruptedError(forKey: .maxWait, in: c,
                debugDescription: "maxWait (\(maxWait.seconds) s) is shorter than settle (\(settle.seconds) s): a file would never settle first")
        }
        rescan = try c.decodeIfPresent(TimeSpan.self, forKey: .rescan)
        if let rescan, rescan.seconds < 1 {
            throw DecodingError.dataCorruptedError(forKey: .rescan, in: c, debugDescription: "rescan must be at least 1s (a full pass each time)")
        }
        window = try c.decodeIfPresent(TimeSpan.self, forKey: .window) ?? TimeSpan(seconds: 60)
        guard (1...86_400).contains(window.seconds) else {
            throw DecodingError.dataCorruptedError(forKey: .window, in: c, debugDescription: "window must be between 1s and 1d")
        }
    }
}
