import Foundation
import HoistStorage

/// One file of a plan: where it goes and with what metadata, or why it is skipped.
public struct PlanItem: Sendable {
    public enum Decision: Sendable, Equatable {
        case upload
        case skip(String)
    }

    public let file: WalkedFile
    /// The object path in the bucket (empty for a file skipped before its destination was made).
    public let destination: String
    public let attributes: ObjectResource
    public var decision: Decision
    /// Which entry of `files:` it came from.
    public let fileSetIndex: Int
    /// An upload session an earlier run left unfinished for this very file, to continue.
    public var resumeSession: String?

    public init(file: WalkedFile, destination: String, attributes: ObjectResource, decision: Decision, fileSetIndex: Int,
                resumeSession: String? = nil) {
        self.file = file
        self.destination = destination
        self.attributes = attributes
        self.decision = decision
        self.fileSetIndex = fileSetIndex
        self.resumeSession = resumeSession
    }
}

/// A problem that stops a job before it starts: names the files involved.
public struct PlanError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public var description: String { message }
}

/// Turns a job's file sets into plan items, streamed: files are walked, filtered, named and
/// given metadata one at a time.
public struct Planner: Sequence {
    let job: Job
    let now: Date
    /// What earlier runs did: unchanged files are skipped, unfinished ones resumed.
    let journal: Journal?
    /// Upload everything, whatever the journal says.
    let force: Bool

    public init(job: Job, now: Date = Date(), journal: Journal? = nil, force: Bool = false) {
        self.job = job
        self.now = now
        self.journal = journal
        self.force = force
    }

    public func makeIterator() -> Iterator { Iterator(planner: self) }

    /// Sets `item`'s decision from the journal, for its destination and metadata as they are
    /// now: unchanged since a finished upload (skip), or unfinished (its session, to resume).
    /// The runner asks again after `before_upload` changed an item, so the journal is looked up
    /// under the same destination it is recorded under.
    public func consultJournal(_ item: inout PlanItem) {
        item.decision = .upload
        item.resumeSession = nil
        guard let journal, !force,
              let record = journal.record(source: item.file.path, destination: item.destination),
              record.size == item.file.size, abs(record.mtime - item.file.modified.timeIntervalSince1970) < 0.001,
              record.attributes == Journal.attributesText(item.attributes) else { return }
        if record.state == "done", job.manifest.upload.skipUnchanged {
            item.decision = Planner.unchanged
        } else if record.state == "uploading", let session = record.session {
            item.resumeSession = session
        }
    }

    /// The decision for a file the journal knows unchanged.
    public static let unchanged = PlanItem.Decision.skip("unchanged since the last upload")

    public struct Iterator: IteratorProtocol {
        let planner: Planner
        var setIndex = 0
        var walker: FileWalker?
        /// The first error met (a template that cannot be filled); iteration stops there.
        public private(set) var error: PlanError?
        public private(set) var problems: [WalkProblem] = []

        init(planner: Planner) { self.planner = planner }

        public mutating func next() -> PlanItem? {
            let sets = planner.job.manifest.files
            while setIndex < sets.count, error == nil {
                if walker == nil {
                    walker = FileWalker(root: planner.job.root(of: sets[setIndex]), hidden: sets[setIndex].hidden,
                                        followSymlinks: sets[setIndex].followSymlinks)
                }
                if let file = walker!.next() {
                    if let item = plan(file, sets[setIndex], setIndex) { return item }
                    continue
                }
                problems += walker!.problems
                walker = nil
                setIndex += 1
            }
            return nil
        }

        private mutating func plan(_ file: WalkedFile, _ set: FileSet, _ index: Int) -> PlanItem? {
            let path = file.relativePath
            func skipped(_ reason: String) -> PlanItem {
                PlanItem(file: file, destination: "", attributes: ObjectResource(), decision: .skip(reason), fileSetIndex: index)
            }
            if !set.include.isEmpty, !set.include.contains(where: { $0.matches(path) }) {
                return skipped("not included")
            }
            if let glob = set.exclude.first(where: { $0.matches(path) }) { return skipped("excluded by \(glob)") }
            if let min = set.minSize, file.size < min.bytes { return skipped("smaller than minSize") }
            if let max = set.maxSize, file.size > max.bytes { return skipped("larger than maxSize") }
            if let age = set.minAge, planner.now.timeIntervalSince(file.modified) < age.seconds {
                return skipped("modified less than minAge ago")
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
                // A name or a header this one file makes impossible (from its own name): that file
                // fails, the others go on.
                if let problem = objectNameProblem(destination) ?? Self.headerProblem(attributes) {
                    problems.append(WalkProblem(path: file.path, message: problem, isFailure: true))
                    return nil
                }
                var item = PlanItem(file: file, destination: destination, attributes: attributes, decision: .upload, fileSetIndex: index)
                planner.consultJournal(&item)
                return item
            } catch {
                self.error = PlanError(message: "\(file.path): \(error.message)")
                return nil
            }
        }

        /// The first metadata value that cannot be an HTTP header (a control character), or nil.
        static func headerProblem(_ attributes: ObjectResource) -> String? {
            let fields: [(String, String?)] = [("contentType", attributes.contentType), ("cacheControl", attributes.cacheControl),
                                               ("contentDisposition", attributes.contentDisposition),
                                               ("contentEncoding", attributes.contentEncoding), ("contentLanguage", attributes.contentLanguage)]
                + (attributes.metadata ?? [:]).sorted { $0.key < $1.key }.flatMap { [("customMetadata key", $0.key), ("customMetadata.\($0.key)", $0.value)] }
            for (name, value) in fields {
                if let value, let problem = headerValueProblem(value) { return "\(name) \(problem)" }
            }
            return nil
        }

        private func apply(_ settings: MetadataSettings, to attributes: inout ObjectResource, _ context: Template.Context) throws(ValueError) {
            if let value = settings.contentType { attributes.contentType = try value.render(context) }
            if let value = settings.cacheControl { attributes.cacheControl = try value.render(context) }
            if let value = settings.contentDisposition { attributes.contentDisposition = try value.render(context) }
            if let value = settings.contentEncoding { attributes.contentEncoding = try value.render(context) }
            if let value = settings.contentLanguage { attributes.contentLanguage = try value.render(context) }
            if let custom = settings.customMetadata {
                var merged = attributes.metadata ?? [:]
                for (key, template) in custom { merged[key] = try template.render(context) }
                attributes.metadata = merged
            }
        }
    }

    /// Walks the whole plan once to find what would stop the job: a template that cannot be
    /// filled, or two files with one destination. Returns the counts for progress totals.
    /// Memory: one 64-bit hash per destination.
    public func check() throws -> (files: Int, bytes: Int64) {
        var seen = Set<Int>()
        var suspects = Set<String>()
        var files = 0
        var bytes: Int64 = 0
        var iterator = makeIterator()
        while let item = iterator.next() {
            guard item.decision == .upload else { continue }
            if !seen.insert(item.destination.hashValue).inserted { suspects.insert(item.destination) }
            files += 1
            bytes += item.file.size
        }
        if let error = iterator.error { throw error }
        if !suspects.isEmpty {
            // A hash seen twice: find whether two files really share a destination.
            var sources: [String: [String]] = [:]
            for item in self where item.decision == .upload && suspects.contains(item.destination) {
                sources[item.destination, default: []].append(item.file.path)
                if let both = sources[item.destination], both.count == 2 {
                    throw PlanError(message: "\(both[0]) and \(both[1]) both go to '\(item.destination)': change the destination template")
                }
            }
        }
        return (files, bytes)
    }
}
