import Foundation
import HoistStorage

/// One file of a plan: where it goes and with what metadata, or why it is skipped.
public struct PlanItem: Sendable {
    public enum Decision: Sendable, Equatable {
        case upload
        case skip(SkipReason)
    }

    public internal(set) var file: WalkedFile
    /// The object path in the bucket (empty for a file skipped before its destination was made).
    public let destination: String
    /// The object's metadata.
    public var attributes: ObjectResource { metadata.value }
    /// Held by reference: the items of a file set share one (the planner reuses it while the
    /// metadata is the same), and an item, handed from stage to stage of a run, copies a pointer
    /// rather than its sixteen fields.
    let metadata: SharedMetadata
    public var decision: Decision
    /// Which entry of `files:` it came from.
    public let fileSetIndex: Int
    /// An upload session an earlier run left unfinished for this very file, to continue.
    public var resumeSession: String?
    /// A session the journal records for this file that this upload does not continue (the
    /// file changed since a killed run began it): the job's, ended when the file's upload
    /// starts, before its row forgets it (`JobRunner.endReplacedSession`).
    public var replacedSession: String?
    /// Another process may have stored it without recording it (a shared run's worker that
    /// died, a run killed between storing a file and recording it): an object already stored
    /// with the file's bytes and metadata is taken as its upload.
    public var mayBeStored = false
    /// The gzip level the file is compressed at on its way up (`compress:`); nil: sent as it is.
    public let compression: Int?
    /// The CRC32C of the file's content as it was uploaded (a compressed file's, computed as it
    /// was compressed), for the journal's content hash.
    public var contentCRC32C: String?
    /// The content hash `skipUnchanged: checksum` read anew for a file it found unchanged: the
    /// journal keeps it, so the next run need not read the file.
    public var rehashed: Journal.ContentHash?

    public init(file: WalkedFile, destination: String, attributes: ObjectResource, decision: Decision, fileSetIndex: Int,
                resumeSession: String? = nil, compression: Int? = nil) {
        self.init(file: file, destination: destination, metadata: SharedMetadata(attributes), decision: decision,
                  fileSetIndex: fileSetIndex, resumeSession: resumeSession, compression: compression)
    }

    init(file: WalkedFile, destination: String, metadata: SharedMetadata, decision: Decision, fileSetIndex: Int,
         resumeSession: String? = nil, compression: Int? = nil) {
        self.compression = compression
        self.file = file
        self.destination = destination
        self.metadata = metadata
        self.decision = decision
        self.fileSetIndex = fileSetIndex
        self.resumeSession = resumeSession
    }

    /// The journal's text of its metadata (and compression).
    public var attributesText: String { Journal.attributesText(attributes, compressed: compression != nil) }
}

/// An object's metadata, shared by the plan items that have the same.
final class SharedMetadata: Sendable {
    let value: ObjectResource
    init(_ value: ObjectResource) { self.value = value }
    /// No metadata (skipped items).
    static let none = SharedMetadata(ObjectResource())
}

/// A problem that stops a job before it starts: names the files involved.
public struct PlanError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public var description: String { message }
}

/// Turns a job's file sets into plan items, streamed: files are walked, filtered, named and
/// given metadata one at a time.
public struct Planner: Sequence, Sendable {
    let job: Job
    let now: Date
    /// What earlier runs did: unchanged files are skipped, unfinished ones resumed.
    let journal: (any JournalStore)?
    /// Upload everything, whatever the journal says.
    let force: Bool
    /// The files to plan instead of walking the roots (`hoist watch`'s settled files), each with
    /// its file set; nil: walk.
    let listed: [(file: WalkedFile, set: Int)]?

    public init(job: Job, now: Date = Date(), journal: (any JournalStore)? = nil, force: Bool = false) {
        self.init(job: job, now: now, journal: journal, force: force, listed: nil)
    }

    init(job: Job, now: Date, journal: (any JournalStore)?, force: Bool, listed: [(file: WalkedFile, set: Int)]?) {
        self.job = job
        self.now = now
        self.journal = journal
        self.force = force
        self.listed = listed
    }

    /// This planner for `files` only, each planned as the walk would plan it (filters,
    /// template, metadata, journal), in place of a walk; nil: walk as before.
    func listing(_ files: [(file: WalkedFile, set: Int)]?) -> Planner {
        Planner(job: job, now: now, journal: journal, force: force, listed: files)
    }

    public func makeIterator() -> Iterator { Iterator(planner: self) }

    /// Sets `item`'s decision from the journal, for its destination and metadata as they are
    /// now: unchanged since a finished upload (skip), or unfinished (its session, to resume).
    /// The runner asks again after `before_upload` changed an item, so the journal is looked up
    /// under the same destination it is recorded under.
    /// - Throws: the journal's error when it cannot be read.
    /// - Parameter attributesText: the journal's text of `item.attributes`, when already known.
    public func consultJournal(_ item: inout PlanItem, attributesText: String? = nil) throws {
        guard let journal, !force else {
            decide(&item, nil, attributesText: attributesText)
            return
        }
        decide(&item, try journal.lookup(source: item.file.path, destination: item.destination), attributesText: attributesText)
    }

    /// Skip a file the journal knows done with the same size, mtime and metadata (or, with
    /// `skipUnchanged: checksum`, size, content and metadata); resume one it knows half-sent with
    /// the same size and mtime; upload anything else.
    func decide(_ item: inout PlanItem, _ known: Journal.Known?, attributesText: String?) {
        item.decision = .upload
        item.resumeSession = nil
        item.replacedSession = nil
        item.rehashed = nil
        defer {
            if item.decision == .upload, item.resumeSession == nil, let known, known.state == .uploading || known.state == .pending {
                item.replacedSession = known.session
            }
        }
        guard !force, let record = known, record.size == item.file.size,
              record.attributes == attributesText ?? item.attributesText else { return }
        let sameTime = abs(record.mtime - item.file.modified.timeIntervalSince1970) < 0.001
        if record.state == .done, job.manifest.upload.skipUnchanged {
            if job.manifest.upload.skipByChecksum ? unchangedContent(&item, record) : sameTime { item.decision = .skip(.unchanged) }
        } else if sameTime, record.state == .uploading || record.state == .pending, let session = record.session {
            item.resumeSession = session
        } else if record.state == .uploading {
            // Begun with no session known (a small file, or killed before its session was
            // saved): it may be stored already. An object with these very bytes and metadata is
            // taken as its upload rather than sent again (`SharedRunFencingTests`).
            item.mayBeStored = true
        }
    }

    /// Whether a file holds the content the journal recorded (`skipUnchanged: checksum`): the
    /// hash kept with the file's status, while that status is unchanged (nothing is read), else
    /// the file's CRC32C read now, which the journal then keeps with the new status (`rehashed`).
    func unchangedContent(_ item: inout PlanItem, _ record: Journal.Known) -> Bool {
        guard let kept = record.content.flatMap(Journal.ContentHash.init(text:)) else { return false }
        let status = item.file.statusKey
        if kept.status == status { return true }
        let followingLinks = job.followsLinks(at: item.file.path, inSet: item.fileSetIndex)
        guard let crc = try? ByteSource.contentCRC32C(ofFileAt: item.file.path, followingLinks: followingLinks), crc == kept.crc32c
        else { return false }
        item.rehashed = Journal.ContentHash(crc32c: crc, status: status)
        return true
    }

    public struct Iterator: IteratorProtocol {
        let planner: Planner
        var setIndex = 0
        var walker: FileWalker?
        /// The root of the set being walked, absolute (resolved once per set, not per file).
        var root = ""
        /// The first error met (a template that cannot be filled, two files with one
        /// destination); iteration stops there.
        public private(set) var error: PlanError?
        public private(set) var problems: [WalkProblem] = []
        /// A hash of each destination planned so far (8 bytes a file): a second file with the
        /// same destination stops the plan, naming both.
        private var destinations = Set<Int>()
        /// The journal's rows, read in walk order a thousand at a time.
        private var merge = JournalMerge()
        /// The metadata last compared with the journal, as its text: files of one set share it.
        private var lastAttributes: (compressed: Bool, text: String, problem: String?, shared: SharedMetadata)?
        /// The files of each file set planned so far (uploaded or skipped as unchanged, not
        /// those its filters left out): a mirror's root that held files and now yields none
        /// deletes nothing.
        public private(set) var filesPerSet: [Int] = []
        /// Files and bytes to upload so far.
        public private(set) var uploadCount = 0
        public private(set) var uploadBytes: Int64 = 0

        init(planner: Planner) { self.planner = planner }

        /// Whether a file of this plan went to `destination` so far (by its hash: a collision
        /// keeps an object a mirror would delete, never the other way).
        public func planned(_ destination: String) -> Bool { destinations.contains(Bytewise(destination).hashValue) }

        public mutating func next() -> PlanItem? {
            var next = nextPlanned()
            while let item = next, !item.destination.isEmpty, !destinations.insert(Bytewise(item.destination).hashValue).inserted,
                  let first = planner.firstSource(for: item.destination, before: item.file.path, in: item.fileSetIndex) {
                // The same file, reached through two file sets, to the same object: one upload.
                guard first.hasSameBytes(as: item.file.path) else {
                    error = PlanError(message: "\(first) and \(item.file.path) both go to '\(item.destination)': change the destination template")
                    return nil
                }
                next = nextPlanned()
            }
            guard let item = next else { return nil }
            if case .skip(let reason) = item.decision, reason.isFilter {} else {
                if filesPerSet.count <= item.fileSetIndex { filesPerSet += Array(repeating: 0, count: item.fileSetIndex + 1 - filesPerSet.count) }
                filesPerSet[item.fileSetIndex] += 1
            }
            if item.decision == .upload {
                uploadCount += 1
                uploadBytes += item.file.size
            }
            return item
        }

        /// The next listed file planned (`Planner.listed`).
        private var listedIndex = 0

        /// The next file's plan item, without the check for a shared destination.
        mutating func nextPlanned() -> PlanItem? {
            let sets = planner.job.manifest.files
            if let listed = planner.listed {
                while listedIndex < listed.count, error == nil {
                    let (file, index) = listed[listedIndex]
                    listedIndex += 1
                    guard sets.indices.contains(index) else { continue }
                    root = planner.job.root(of: sets[index])
                    if let item = plan(file, sets[index], index) { return item }
                }
                return nil
            }
            while setIndex < sets.count, error == nil {
                if walker == nil {
                    root = planner.job.root(of: sets[setIndex])
                    if let bucket = planner.bucketHolding(root) {
                        error = PlanError(message: "\(root) is inside the job's local bucket \(bucket): its objects and Hoist's own files "
                            + "would be uploaded into it. Name another folder, or another bucket")
                        return nil
                    }
                    walker = FileWalker(root: root, hidden: sets[setIndex].hidden, followSymlinks: sets[setIndex].followSymlinks,
                                        skipping: planner.bucketInside(root), fencedOff: planner.job.fencedOffFolders)
                }
                if let file = walker!.next() {
                    // Another shard's file is not this process's: not planned, not counted.
                    if let shard = planner.job.shard, !shard.contains(file.relativePath) { continue }
                    if let item = plan(file, sets[setIndex], setIndex) { return item }
                    continue
                }
                problems += walker!.problems
                walker = nil
                setIndex += 1
            }
            return nil
        }

        mutating func plan(_ file: WalkedFile, _ set: FileSet, _ index: Int) -> PlanItem? {
            let path = file.relativePath
            func skipped(_ reason: SkipReason) -> PlanItem {
                PlanItem(file: file, destination: "", metadata: .none, decision: .skip(reason), fileSetIndex: index)
            }
            if !set.include.isEmpty, !set.include.contains(where: { $0.matches(path) }) {
                return skipped(.notIncluded)
            }
            if let glob = set.exclude.first(where: { $0.matches(path) }) { return skipped(.excluded("\(glob)")) }
            if let min = set.minSize, file.size < min.bytes { return skipped(.smallerThanMinSize) }
            if let max = set.maxSize, file.size > max.bytes { return skipped(.largerThanMaxSize) }
            if let age = set.minAge, planner.now.timeIntervalSince(file.modified) < age.seconds {
                return skipped(.newerThanMinAge)
            }
            let context = Template.Context(relativePath: path, modified: file.modified, job: planner.job.manifest.name,
                                           now: planner.now, environment: planner.job.environment)
            do {
                let destination = try normalizedObjectPath(try set.destination.render(context), checkingName: false)
                var attributes = ObjectResource()
                for settings in [set.metadata] + set.rules.filter({ $0.match.contains { $0.matches(path) } }).map(\.metadata) {
                    guard let settings else { continue }
                    try apply(settings, to: &attributes, context)
                }
                // Stored gzipped, served decompressed to clients that do not take gzip (GCS).
                let compression = set.compress.flatMap { $0.applies(to: path) ? $0.level : nil }
                if compression != nil { attributes.contentEncoding = "gzip" }
                // A name or a header this one file makes impossible (from its own name): that file
                // fails, the others go on.
                let checked = check(attributes, compressed: compression != nil)
                if let problem = objectNameProblem(destination) ?? checked.problem {
                    problems.append(WalkProblem(path: file.path, message: problem, isFailure: true))
                    return nil
                }
                var item = PlanItem(file: file, destination: destination, metadata: checked.shared, decision: .upload, fileSetIndex: index,
                                    compression: compression)
                if let journal = planner.journal, !planner.force {
                    let text = checked.text
                    // Read alongside the walk; a file the merge does not find (new, or reached
                    // through a followed link, out of order) is looked up on its own.
                    // A file the rows prove absent (new) is not looked up: over a network journal
                    // that is a round trip per new file.
                    // Listed files come in no walk order: each is looked up on its own.
                    let known = planner.listed != nil ? try journal.lookup(source: file.path, destination: destination)
                        : try merge.find(source: file.path, destination: destination, set: index, root: root, in: journal)
                            ?? (merge.provedAbsent ? nil : journal.lookup(source: file.path, destination: destination))
                    planner.decide(&item, known, attributesText: text)
                }
                return item
            } catch let error as ValueError {
                self.error = PlanError(message: "\(file.path): \(error.message)")
                return nil
            } catch {
                self.error = PlanError(message: "\(error)")
                return nil
            }
        }

        /// The first metadata value that cannot be an HTTP header (a control character), or nil.
        static func headerProblem(_ attributes: ObjectResource) -> String? {
            let fields: [(String, String?)] = ObjectResource.headerFields.map { ($0.name, attributes[keyPath: $0.keyPath]) }
                + (attributes.metadata ?? [:]).sorted { $0.key < $1.key }.flatMap { [("customMetadata key", $0.key), ("customMetadata.\($0.key)", $0.value)] }
            for (name, value) in fields {
                if let value, let problem = headerValueProblem(value) { return "\(name) \(problem)" }
            }
            return nil
        }

        /// The journal's text of `attributes` and what makes them impossible as headers, worked
        /// out once for a run of equal ones (the files of a set mostly share their metadata).
        private mutating func check(_ attributes: ObjectResource, compressed: Bool) -> (text: String, problem: String?, shared: SharedMetadata) {
            if let last = lastAttributes, last.shared.value == attributes, last.compressed == compressed {
                return (last.text, last.problem, last.shared)
            }
            let checked = (text: Journal.attributesText(attributes, compressed: compressed), problem: Self.headerProblem(attributes),
                           shared: SharedMetadata(attributes))
            lastAttributes = (compressed, checked.text, checked.problem, checked.shared)
            return checked
        }

        private func apply(_ settings: MetadataSettings, to attributes: inout ObjectResource, _ context: Template.Context) throws(ValueError) {
            for field in MetadataSettings.fields {
                if let value = settings[keyPath: field.template] { attributes[keyPath: field.keyPath] = try value.render(context) }
            }
            if let custom = settings.customMetadata {
                var merged = attributes.metadata ?? [:]
                for (key, template) in custom { merged[key] = try template.render(context) }
                attributes.metadata = merged
            }
        }
    }

    /// The plan item of one file of file set `index` found otherwise than by a walk (a shared
    /// run's claim): filtered, named and given metadata as the walk would, without the journal.
    /// - Returns: the item (perhaps a skip: the set's filters leave it out), or why it has none.
    func item(for file: WalkedFile, set index: Int) -> Result<PlanItem, PlanError> {
        var iterator = Planner(job: job, now: now, journal: nil, force: true).makeIterator()
        if let item = iterator.plan(file, job.manifest.files[index], index) { return .success(item) }
        return .failure(iterator.error ?? PlanError(message: iterator.problems.last?.message ?? "\(file.path) cannot be planned"))
    }

    /// Walks the whole plan once to find what would stop the job: a template that cannot be
    /// filled, or two files with one destination. Returns the files and bytes to upload.
    /// Memory: one 64-bit hash per destination.
    public func check() throws -> (files: Int, bytes: Int64) {
        var iterator = makeIterator()
        while iterator.next() != nil {}
        if let error = iterator.error { throw error }
        return (iterator.uploadCount, iterator.uploadBytes)
    }

    /// The job's local bucket's path below `root`, when the bucket is inside it: never uploaded
    /// into itself (`hoist cp . web/` beside `.hoist/bucket`).
    func bucketInside(_ root: String) -> String? {
        guard let folder = job.localBucketFolder else { return nil }
        let bucket = URL(fileURLWithPath: folder).resolvingSymlinksInPath().path
        let real = URL(fileURLWithPath: root).resolvingSymlinksInPath().path
        let prefix = real == "/" ? "/" : real + "/"
        return bucket.hasPrefix(prefix) ? String(bucket.dropFirst(prefix.count)) : nil
    }

    /// The job's local bucket when `root` is it or lies inside it.
    func bucketHolding(_ root: String) -> String? {
        guard let folder = job.localBucketFolder else { return nil }
        let bucket = URL(fileURLWithPath: folder).resolvingSymlinksInPath().path
        let real = URL(fileURLWithPath: root).resolvingSymlinksInPath().path
        return real == bucket || real.hasPrefix(bucket + "/") ? folder : nil
    }

    /// The first file planned to `destination` before `path` (of file set `set`), walking again
    /// from the start (only when a destination's hash was seen twice: rare): another file's path,
    /// or `path` itself when an earlier file set reached the same file and sent it there; nil
    /// when none did (a hash collision, not the same destination).
    func firstSource(for destination: String, before path: String, in set: Int) -> String? {
        var iterator = Planner(job: job, now: now, journal: nil, force: true).makeIterator()
        while let item = iterator.nextPlanned() {
            if item.fileSetIndex == set, item.file.path.hasSameBytes(as: path) { return nil }
            if item.destination.hasSameBytes(as: destination) { return item.file.path }
        }
        return nil
    }
}

/// Reads a journal's rows for a file set in the walk's order (full paths in byte order), a
/// thousand per query, and finds each walked file's row among them.
struct JournalMerge {
    private var root = ""
    private var set = -1
    private var buffer: [Journal.KnownRow] = []
    private var index = 0
    private var exhausted = false
    /// The last source asked for: while the walk's sources only grow, no row of the current one
    /// was passed over, so a row missing where it would be is missing.
    private var lastSource: String?
    /// Whether the last `find` that returned nil proved the row absent (rather than not knowing).
    private(set) var provedAbsent = false
    static let chunk = 1000

    /// The row for (`source`, `destination`), or nil when the rows in walk order do not have it.
    /// `set` is the file set being walked: each walk reads the rows from the start.
    mutating func find(source: String, destination: String, set: Int, root: String, in journal: any JournalStore) throws -> Journal.Known? {
        if set != self.set {
            self = JournalMerge()
            self.set = set
            self.root = root
        }
        let inOrder = lastSource.map { !source.precedesBytewise($0) } ?? true
        lastSource = source
        provedAbsent = false
        // A nil below, reached in walk order, is a proof.
        func absent() -> Journal.Known? {
            provedAbsent = inOrder
            return nil
        }
        while true {
            if index == buffer.count {
                if exhausted { return absent() }
                let after = buffer.last.map { ($0.source, $0.destination) }
                buffer = try journal.rows(from: root + "/", below: root + "0", after: after, limit: Self.chunk)
                index = 0
                exhausted = buffer.count < Self.chunk
                if buffer.isEmpty { return absent() }
            }
            let row = buffer[index]
            // Mostly the walk's next file is the next row (equal strings compare as bytes, fast).
            if !row.source.hasSameBytes(as: source) {
                if row.source.precedesBytewise(source) {
                    index += 1
                    continue
                }
                return absent()
            }
            // The rows of this source (one per destination) follow each other.
            var probe = index
            repeat {
                if buffer[probe].destination.hasSameBytes(as: destination) {
                    // The walk never comes back to this row (one file, one destination per set).
                    index = probe + 1
                    return buffer[probe].known
                }
                probe += 1
            } while probe < buffer.count && buffer[probe].source.hasSameBytes(as: source)
            if probe < buffer.count || exhausted { return absent() }
            // The source's rows run past this chunk: rare; ask for this one directly.
            return try journal.lookup(source: source, destination: destination)
        }
    }
}
