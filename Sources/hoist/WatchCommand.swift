import ArgumentParser
import Foundation
import HoistHTTP
import HoistJobs
import HoistYAML

extension Hoist {
    /// `hoist watch JOB`: a run, then a run again each time the files changed have settled.
    struct Watch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run a job, then keep watching its roots and upload each file once it has settled.",
            discussion: """
                First a run as `hoist run` makes it (the journal makes a restart cheap), then every \
                folder of every root is watched (inotify). Each changed file settles on its own: when no \
                event has touched it for watch.settle (default 2s), or it has kept changing for \
                watch.maxWait (default 1m), the job runs again on the settled files (through its filters, \
                templates and hooks; the hooks' on_settle first), or on the whole tree, once every changed \
                file has settled, after lost events, a rescan, a new folder, or for a job that mirrors or \
                moves (unchanged files skipped through the journal). See docs/manifest.md, "Watching a \
                folder".

                The job stays locked while it watches: a `hoist run` of it meanwhile exits 2, saying a \
                watcher holds it; `hoist status` shows the watcher's state (since when, files waiting to \
                settle, last upload, last error). A metrics file is rewritten every 15 s while watching.

                Signals: SIGINT or SIGTERM stop the watcher within seconds (exit 0): uploads in flight are \
                checkpointed, their resumable sessions kept for the next start, which continues them. \
                SIGHUP reads the manifest again (one that does not load, or whose roots or storage do not \
                open, is said and the one loaded stays); a full pass follows.

                Exit status: 0 stopped by a signal, 2 the job could not start or a run stopped fatally.
                """
        )

        @Argument(help: "The job manifest (YAML).", completion: .file(extensions: ["yaml", "yml"]))
        var job: String

        @OptionGroup var outputOptions: OutputOptions

        @Option(name: .long, help: "Also append every event as a JSON line to this file.")
        var logFile: String?

        @Option(name: .long, help: "Write Prometheus text-format metrics here every 15 s and at the end (atomically).")
        var metricsFile: String?

        @OptionGroup var journalOptions: JournalOptions

        @OptionGroup var trustOptions: TrustOptions

        func run() async throws {
            let job = try loadJob(self.job)
            let events = outputOptions.json ? JSONEventLog(sink: .standardOutput) : nil
            let logs = try checkOutputFiles(log: logFile, metrics: metricsFile)
            let output = RunOutput(outputOptions)
            var options = sessionOptions(output, outputOptions, trustOptions)
            options.journalOverride = journalOptions.journal
            options.metricsFile = metricsFile
            let session = try await openSession(job, options: options, events: events)
            let watcher = JobWatcher(session: session, observers: (events.map { [$0] } ?? []) + logs + output.observers,
                                     metricsFile: metricsFile)
            let path = self.job
            let stop: @Sendable () -> Void = { watcher.stop() }
            let reload: @Sendable () -> Void = {
                // A manifest that no longer loads is said where it is wrong (file, line, column); the old one stays.
                do { watcher.reload(try Job(file: path)) } catch {
                    printError("hoist: \(path) was not reloaded, the manifest loaded stays: \((error as? YAMLError)?.description ?? "\(error)")")
                }
            }
            let signals = SignalSources([(SIGINT, stop), (SIGTERM, stop), (SIGHUP, reload)])
            defer { signals.cancel() }
            let quiet = outputOptions.quiet, json = outputOptions.json
            let last = await watcher.run(notice: { notice in
                if let text = notice.commandLineText(job: job.manifest.name), !(quiet && notice.isInformation) {
                    output.say(text, isError: !notice.isInformation || json)
                }
            }, pass: { runner in
                let summary = await runner.run()
                output.report(summary)
                return summary
            })
            if let last, let problem = watcher.session.finish(last) { printError("hoist: \(problem)") }
            guard let last else {
                if !watcher.isStopped { throw ExitCode(2) }   // no inotify: said
                return
            }
            if let fatal = last.fatal {
                printError("hoist: \(last.job) stopped: \(fatal)")
                throw ExitCode(2)
            }
        }
    }
}

extension JobWatcher.Notice {
    /// Said on standard output (unless --quiet), not as an error.
    var isInformation: Bool {
        switch self {
        case .watching, .reloaded: true
        default: false
        }
    }

    func commandLineText(job: String) -> String? {
        switch self {
        case .watching(let folders):
            "\(job): watching \(folders) folder\(folders == 1 ? "" : "s")"
        case .watchLimitReached:
            "hoist: warning: the inotify watch limit is reached: folders past it are seen only by full passes "
                + "(watch.rescan); raise it with sysctl fs.inotify.max_user_watches=524288"
        case .folderNotWatched(let folder, let reason):
            "hoist: warning: cannot watch \(folder) (\(reason)): a full pass follows"
        case .overflowed:
            "hoist: warning: the kernel dropped file events (its queue overflowed): a full pass follows"
        case .noInotify(let reason):
            "hoist: cannot watch: no inotify instance (\(reason)); raise fs.inotify.max_user_instances"
        case .reloaded:
            "\(job): manifest reloaded: a full pass follows"
        case .reloadFailed(let reason):
            "hoist: the manifest was not reloaded, the one loaded stays: \(reason)"
        case .metricsNotWritten(let reason):
            "hoist: \(reason)"
        }
    }
}

extension RunOutput {
    /// A pass's summary line and the failures not shown as they happened, without ending the
    /// process (`hoist watch` runs many).
    func report(_ summary: JobSummary) {
        if !json && !quiet { say(summary.line, isError: false) }
        reportProblems(summary)
    }
}
