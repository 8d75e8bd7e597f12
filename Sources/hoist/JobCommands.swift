import ArgumentParser
import Foundation
import HoistHTTP
import HoistJobs
import HoistStorage
import HoistYAML

/// Loads a manifest for a command; a bad one prints its located error and exits 2.
func loadJob(_ path: String) throws -> Job {
    do {
        return try Job(file: path)
    } catch let error as YAMLError {
        printError(error.description)
        throw ExitCode(2)
    }
}

/// A message on standard error, its lines kept and everything else a terminal would obey
/// (escapes, carriage returns, reordering characters) shown escaped: messages quote manifests,
/// hook scripts and file names, which are others' text.
func printError(_ text: String) {
    FileHandle.standardError.write(Data((printable(text, keepingNewlines: true) + "\n").utf8))
}

/// The session options `run`, `watch` and `cp` share: the CA bundle given, messages said through
/// `output` as errors, and `--quiet`.
func sessionOptions(_ output: RunOutput, _ outputOptions: OutputOptions, _ trust: TrustOptions) -> JobSession.Options {
    var options = JobSession.Options()
    options.caBundle = trust.caBundlePath
    options.log = { output.say($0.commandLineText, isError: true) }
    options.quiet = outputOptions.quiet
    return options
}

/// `job`'s session opened; a job that cannot start is said on standard error (and as a
/// `start_failed` event with --json) and ends the command with exit status 2.
func openSession(_ job: Job, options: JobSession.Options, events: JSONEventLog?) async throws -> JobSession {
    do { return try await JobSession.open(job, options: options) } catch {
        printError("hoist: \(error.commandLineText)")
        events?.startFailed(job: job.manifest.name, reason: error.commandLineText)
        throw ExitCode(2)
    }
}

extension Hoist {
    /// `hoist run JOB`: upload what the job describes.
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run a job: upload the files its manifest describes.",
            discussion: """
                On a terminal, a progress display shows files and bytes done, the rate, the ETA and the \
                files in flight; elsewhere only the summary line (and errors) are printed.

                Signals: SIGINT or SIGTERM stop the run (uploads in flight are cancelled and leave \
                nothing behind; exit 130). SIGTSTP (Ctrl-Z) pauses every upload and stops the process; \
                SIGCONT (fg) resumes them. SIGUSR1 pauses or resumes without stopping the process.

                Hooks (Lua scripts that react to each upload, and the bundled plugins) are described \
                in docs/hooks.md.

                Exit status: 0 all uploaded, 1 some files failed, 2 the job could not start, 130 interrupted.
                """
        )

        @Argument(help: "The job manifest (YAML).", completion: .file(extensions: ["yaml", "yml"]))
        var job: String

        @OptionGroup var outputOptions: OutputOptions

        @Option(name: .long, help: "Also append every event as a JSON line to this file.")
        var logFile: String?

        @Flag(name: .long, help: "Upload nothing: print what a run would do (as hoist plan).")
        var dryRun = false

        @OptionGroup var journalOptions: JournalOptions

        @OptionGroup var shardOptions: ShardOptions

        @OptionGroup var trustOptions: TrustOptions

        @Flag(name: .long, help: "Upload every file, even those the journal knows unchanged.")
        var force = false

        @Flag(name: .long, help: "Wait for another run of the job to end instead of exiting 2.")
        var wait = false

        @Flag(name: .long, help: ArgumentHelp(
            "Work on the job's shared run with other workers (a PostgreSQL journal): the first plans, all upload.",
            discussion: "See docs/scale.md."))
        var worker = false

        @Option(name: .long, help: ArgumentHelp("With --worker: seconds without a heartbeat before other workers take this one's files.",
                                                valueName: "seconds"))
        var lease: Int = 30

        @Flag(name: .long, help: "Before skipping a file as unchanged, check the server still holds it with the recorded size and MD5.")
        var remoteCheck = false

        @Option(name: .long, help: "Write Prometheus text-format metrics here at the end (atomically).")
        var metricsFile: String?

        func validate() throws {
            if !(lease >= 1 && lease <= 3600) { throw ValidationError("--lease takes 1 to 3600 seconds.") }
            if lease != 30 && !worker { throw ValidationError("--lease is a worker's (--worker): without it, nothing holds a lease.") }
        }

        func run() async throws {
            if dryRun {
                let plan = try Plan.parse([job] + (journalOptions.journal.map { ["--journal", $0] } ?? [])
                    + shardOptions.arguments + (force ? ["--force"] : []) + outputOptions.arguments)
                try await plan.run()
                return
            }
            var job: Job
            do { job = try Job(file: self.job) } catch let error as YAMLError {
                printError(error.description)
                // A manifest that does not load: the metrics and --json say so too, under the name it gives.
                let name = Self.nameInManifest(self.job)
                if let metricsFile, let name { try? Metrics.writeFailure(job: name, to: metricsFile) }
                if outputOptions.json {
                    JSONEventLog(sink: .standardOutput).startFailed(job: name ?? URL(fileURLWithPath: self.job).deletingPathExtension().lastPathComponent,
                                                                    reason: redactingURLPasswords(error.summary).text)
                }
                throw ExitCode(2)
            }
            job.shard = try shardOptions.resolve()
            var observers: [any JobObserver] = []
            let events = outputOptions.json ? JSONEventLog(sink: .standardOutput) : nil
            if let events { observers.append(events) }
            observers += try checkOutputFiles(log: logFile, metrics: metricsFile)
            let output = RunOutput(outputOptions)
            var options = sessionOptions(output, outputOptions, trustOptions)
            options.journalOverride = journalOptions.journal
            options.wait = wait
            options.worker = worker
            options.lease = Double(lease)
            options.force = force
            options.remoteCheck = remoteCheck
            options.metricsFile = metricsFile
            let session = try await openSession(job, options: options, events: events)
            let summary = await output.run(session.makeRunner(observers: observers + output.observers))
            if let problem = session.finish(summary) { FileHandle.standardError.write(Data((printable("hoist: \(problem)") + "\n").utf8)) }
            try output.end(summary)
        }

        /// The `name:` a manifest that does not load gives, when it gives one.
        static func nameInManifest(_ path: String) -> String? {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8),
                  let root = try? YAMLDecoder().composeUninterpolated(text, file: path),
                  let name = root["name"]?.scalar, !name.isEmpty,
                  name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) })
            else { return nil }
            return name
        }
    }

    /// `hoist validate JOB...`: check manifests without running them.
    struct Validate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check job manifests; report each mistake as FILE:LINE:COL: message.",
            discussion: "Exit status: 0 when every manifest is valid, 2 otherwise."
        )

        @Argument(help: "Job manifests (YAML).", completion: .file(extensions: ["yaml", "yml"]))
        var jobs: [String]

        @Flag(name: .long, help: "Check the manifest and its hooks only, not this machine (roots may be missing here).")
        var syntaxOnly = false

        func validate() throws {
            guard !jobs.isEmpty else { throw ValidationError("Give at least one manifest.") }
        }

        func run() throws {
            var failed = false
            for path in jobs {
                let job: Job
                do {
                    job = try Job(file: path)
                } catch let error as YAMLError {
                    printError(error.description)
                    failed = true
                    continue
                }
                var valid = true
                // Loading the hooks and checking the roots both refuse a hook output folder inside
                // a root: one mistake, said once.
                var said: Set<String> = []
                func refuse(_ text: String) {
                    if said.insert(text).inserted { printError(text) }
                    valid = false
                }
                for warning in job.warnings() { printError("\(path): warning: \(warning)") }
                do {
                    try HookSources.check(job)
                    // Loaded as a run loads them, in their sandbox: a script whose top-level code
                    // fails (or that runs out of a budget) fails here as it would fail the run.
                    if !job.manifest.hooks.isEmpty, let storage = try? job.makeStorage() {
                        _ = try HookBus(job: job, storage: storage) { _ in }
                    }
                } catch {
                    refuse("\(error)")
                }
                if !syntaxOnly {
                    do {
                        for note in try job.checkRoots() { printError("\(path): note: \(note)") }
                    } catch {
                        refuse(describe(error))
                    }
                }
                if valid {
                    print("\(path): ok (job \(job.manifest.name), \(job.manifest.files.count) file set\(job.manifest.files.count == 1 ? "" : "s"))")
                }
                failed = failed || !valid
            }
            if failed { throw ExitCode(2) }
        }
    }

    /// `hoist plan JOB`: what a run would do, file by file, without uploading.
    struct Plan: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show what a run would upload or skip, and why, without uploading.",
            discussion: """
                With --hooks, the job's before_upload hooks run for each file to upload, so a file \
                they skip or move shows as a run would see it (no other hook event fires; a hook \
                that posts from before_upload posts from plan too).

                Exit status: 0, or 2 when the job could not start.
                """
        )

        @Argument(help: "The job manifest (YAML).", completion: .file(extensions: ["yaml", "yml"]))
        var job: String

        @OptionGroup var outputOptions: OutputOptions

        @Flag(name: .long, help: "Print only the totals.")
        var summary = false

        @OptionGroup var journalOptions: JournalOptions

        @OptionGroup var shardOptions: ShardOptions

        @Flag(name: .long, help: "Plan to upload every file, whatever the journal says.")
        var force = false

        @Flag(name: .long, help: "Run the job's before_upload hooks: show the files they skip or move.")
        var hooks = false

        func run() async throws {
            var job = try loadJob(self.job)
            job.shard = try shardOptions.resolve()
            do {
                for note in try job.checkRoots() { printError("hoist: note: \(note)") }
            } catch let error as YAMLError {
                printError(error.description)
                throw ExitCode(2)
            }
            let journalPath = job.journalPath(override: journalOptions.journal)
            do { try job.checkJournalOwner(override: journalOptions.journal, claim: false) } catch {
                FileHandle.standardError.write(Data((printable("hoist: \(error)") + "\n").utf8))
                throw ExitCode(2)
            }
            var journal: (any JournalStore)?
            if Journal.exists(journalPath) {
                do { journal = try Journal.open(journalPath, job: job.manifest.name) } catch {
                    FileHandle.standardError.write(Data((printable("hoist: \(error)") + "\n").utf8))
                    throw ExitCode(2)
                }
            }
            var bus: HookBus?
            if hooks, !job.manifest.hooks.isEmpty {
                do {
                    bus = try HookBus(job: job, storage: try job.makeStorage()) { line in
                        FileHandle.standardError.write(Data("hoist: [\(line.script)] \(line.level.rawValue): \(line.message)\n".utf8))
                    }
                } catch {
                    FileHandle.standardError.write(Data((printable("hoist: \(describe(error))") + "\n").utf8))
                    throw ExitCode(2)
                }
            }
            try await printPlan(job, journal: journal, force: force, hooks: bus, output: outputOptions, totalsOnly: summary)
        }
    }
}

/// Prints what a run of `job` would do, file by file (unless `totalsOnly`), then the totals:
/// `hoist plan`, `hoist run --dry-run` and `hoist cp --dry-run`. With `hooks`, each file to upload
/// goes through `before_upload` first. Exits 2 on a plan error.
func printPlan(_ job: Job, journal: (any JournalStore)?, force: Bool = false, hooks bus: HookBus? = nil, output options: OutputOptions,
               totalsOnly: Bool, suffix: String = "") async throws {
    let json = options.json, summary = totalsOnly || options.quiet
    let planner = Planner(job: job, journal: journal, force: force)
    var iterator = planner.makeIterator()
    var uploads = 0, skips = 0, failures = 0
    var bytes: Int64 = 0
    var output = BufferedOutput()
    // The key an object gets: an s3://BUCKET/PREFIX url's prefix, then the destination.
    let storage = job.manifest.storage
    let folders = storage.location.path.split(separator: "/").joined(separator: "/")
    let keyPrefix = storage.registration.urlForm == .bucketAndPrefix && !folders.isEmpty ? folders + "/" : ""
    while var item = iterator.next() {
        if let bus, item.decision == .upload {
            let planned = item
            do {
                item = try await bus.beforeUpload(item)
                if item.decision == .upload, item.destination != planned.destination || item.attributes != planned.attributes {
                    try planner.consultJournal(&item)
                }
            } catch {
                failures += 1
                if !summary {
                    output.write(json
                        ? JSONLine.encode(["action": "fail", "file": item.file.path, "reason": "\(error)"])
                        : "fail    \(item.file.relativePath) (\(error))")
                }
                continue
            }
        }
        switch item.decision {
        case .upload:
            uploads += 1
            bytes += item.file.size
            if summary { continue }
            output.write(json
                ? JSONLine.encode(["action": "upload", "file": item.file.path, "object": item.destination, "size": item.file.size])
                : printable("upload  \(item.file.relativePath) -> \(keyPrefix)\(item.destination) (\(ByteFormatter.string(item.file.size)))"
                + (item.resumeSession != nil ? " (resume)" : "") + (job.manifest.files[item.fileSetIndex].move ? " (then removed: move)" : "")
                + (options.verbose ? planned(item.attributes) : "")))
        case .skip(let reason):
            skips += 1
            if summary { continue }
            output.write(json
                ? JSONLine.encode(["action": "skip", "file": item.file.path, "reason": reason.description])
                : printable("skip    \(item.file.relativePath) (\(reason))"))
        }
    }
    output.flush()
    if let error = iterator.error {
        FileHandle.standardError.write(Data((printable("hoist: \(error.message)") + "\n").utf8))
        throw ExitCode(2)
    }
    for problem in iterator.problems { FileHandle.standardError.write(Data((printable("hoist: warning: \(problem)") + "\n").utf8)) }
    let walked = iterator
    let deletes = await plannedDeletes(job, journal: journal, planned: { walked.planned($0) }, json: json, quiet: summary)
    let total = "\(job.manifest.name): \(uploads) to upload (\(ByteFormatter.string(bytes))), \(skips) to skip"
        + (deletes.map { ", \($0) to delete" } ?? "")
        + (failures > 0 ? ", \(failures) failed in before_upload" : "")
        + (job.manifest.upload.noClobber && uploads > 0 ? ", each upload unless its object exists (noClobber)" : "") + suffix
    var fields: [String: any Sendable] = ["action": "total", "upload": uploads, "skip": skips, "bytes": bytes]
    if let deletes { fields["delete"] = deletes }
    if failures > 0 { fields["fail"] = failures }
    if !options.quiet { print(json ? JSONLine.encode(fields) : total) }
}

/// The deletions of the job's `mirror` file sets, printed (`delete  OBJECT (file gone: PATH)`,
/// or `{"action":"delete",...}`) as a run would make them if every upload succeeded; nil when no
/// set mirrors. A listing that fails, or a `maxDelete` passed, is said on standard error.
private func plannedDeletes(_ job: Job, journal: (any JournalStore)?, planned: @escaping (String) -> Bool, json: Bool,
                            quiet: Bool) async -> Int? {
    guard job.manifest.files.contains(where: { $0.mirror != .off }) else { return nil }
    let backend = job.manifest.files.contains { $0.mirror == .listed } ? (try? job.makeStorage())?.backend : nil
    let found: MirrorPlan.Found
    do { found = try await MirrorPlan(job: job, journal: journal, backend: backend, planned: planned).deletions() } catch {
        FileHandle.standardError.write(Data((printable("hoist: mirror: \(describe(error)): a run would delete nothing") + "\n").utf8))
        return 0
    }
    var output = BufferedOutput()
    for deletion in found.deletions where !quiet {
        output.write(json
            ? JSONLine.encode(["action": "delete", "object": deletion.object, "reason": deletion.reason, "file": deletion.source ?? ""])
            : printable("delete  \(deletion.object) (" + (deletion.source.map { "file gone: \($0)" } ?? "stray: no file goes there") + ")"))
    }
    output.flush()
    if let refusal = found.refusal(maxDelete: job.manifest.upload.maxDelete) {
        printError("hoist: \(refusal): a run would delete nothing and exit 1")
    }
    return found.deletions.count
}

/// With `--verbose`, what an upload's object gets besides its bytes: " [contentType=image/png, ...]".
private func planned(_ attributes: ObjectResource) -> String {
    var fields = ObjectResource.headerFields.compactMap { field in attributes[keyPath: field.keyPath].map { "\(field.name)=\($0)" } }
    fields += (attributes.metadata ?? [:]).sorted { $0.key < $1.key }.map { "customMetadata.\($0.key)=\($0.value)" }
    return fields.isEmpty ? "" : " [" + fields.joined(separator: ", ") + "]"
}

/// `--journal`, shared by the commands that read a job's journal.
struct JournalOptions: ParsableArguments {
    @Option(name: .long, help: "The journal: a SQLite file, or postgres://USER@HOST/DATABASE shared by many machines (default: the manifest's journal:, else $XDG_STATE_HOME/hoist/JOB.sqlite).")
    var journal: String?
}

/// Which TLS certificates `gs://` trusts, for `run` and `cp`.
struct TrustOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "A PEM file of CA certificates to trust for gs:// (a private CA, or a proxy's that re-signs TLS), or a folder of them hashed by `openssl rehash`, over storage.caBundle, $CURL_CA_BUNDLE, $SSL_CERT_FILE and $SSL_CERT_DIR. Default: the system store.",
        valueName: "file"))
    var caBundle: String?

    func validate() throws {
        if let caBundle, !FileManager.default.isReadableFile(atPath: caBundle) {
            throw ValidationError("--ca-bundle \(caBundle) cannot be read: name a PEM file of CA certificates, or a folder of them hashed by `openssl rehash`.")
        }
    }

    /// The bundle as an absolute path (curl resolves relative ones against the working directory too,
    /// but errors read better with the whole path).
    var caBundlePath: String? { caBundle.map { URL(fileURLWithPath: $0).standardizedFileURL.path } }
}

/// Checks a `--log-file` and a `--metrics-file` before a run starts: each a regular file or
/// none (/dev/null); a bad one is said and exits 2.
/// - Returns: the observer appending events to the log file, if one is to be written.
func checkOutputFiles(log logFile: String?, metrics metricsFile: String?) throws -> [any JobObserver] {
    do {
        if let metricsFile { _ = try OutputFile.state(of: metricsFile, what: "the metrics file") }
        if let logFile, try OutputFile.state(of: logFile, what: "the log file") != .nullDevice {
            guard let log = JSONEventLog(appendingTo: logFile) else {
                throw OutputFile.Refused(description: "cannot open the log file \(logFile): \(String(cString: strerror(errno)))")
            }
            return [log]
        }
        return []
    } catch {
        printError("hoist: \(error)")
        throw ExitCode(2)
    }
}

/// Lines to standard output, written in large blocks (a plan can have millions).
struct BufferedOutput {
    private var buffer = Data()
    mutating func write(_ line: String) {
        buffer.append(contentsOf: line.utf8)
        buffer.append(10)
        if buffer.count > 1 << 16 { flush() }
    }
    mutating func flush() {
        FileHandle.standardOutput.write(buffer)
        buffer.removeAll(keepingCapacity: true)
    }
}

/// Signals handled on a queue of their own instead of by their default action, until `cancel()`.
final class SignalSources {
    private let sources: [any DispatchSourceSignal]

    init(_ actions: [(Int32, @Sendable () -> Void)]) {
        let queue = DispatchQueue(label: "hoist.signals")
        sources = actions.map { number, action in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler(handler: action)
            source.resume()
            return source
        }
    }

    /// SIGINT and SIGTERM call `stop` instead of ending the process, so uploads in flight can be
    /// cancelled and leave nothing behind (`hoist cp`).
    static func termination(stop: @escaping @Sendable () -> Void) -> SignalSources {
        SignalSources([(SIGINT, stop), (SIGTERM, stop)])
    }

    /// Signals during `hoist run`: INT/TERM stop, TSTP pauses and stops the process, CONT
    /// resumes, USR1 toggles pause, WINCH redraws.
    static func run(_ runner: JobRunner, resized: (@Sendable () -> Void)? = nil) -> SignalSources {
        var actions: [(Int32, @Sendable () -> Void)] = [
            (SIGINT, { runner.cancelAll() }),
            (SIGTERM, { runner.cancelAll() }),
            (SIGTSTP, {
                runner.pauseAll()
                kill(getpid(), SIGSTOP)
            }),
            (SIGCONT, { if runner.isPaused { runner.resumeAll() } }),
            (SIGUSR1, { runner.isPaused ? runner.resumeAll() : runner.pauseAll() }),
        ]
        if let resized { actions.append((SIGWINCH, resized)) }
        return SignalSources(actions)
    }

    func cancel() {
        for source in sources { source.cancel() }
    }
}
