import ArgumentParser
import Foundation
import HoistHTTP
import HoistJobs

extension Hoist {
    /// `hoist cron JOB...`: crontab lines from each job's `schedule:`.
    struct Cron: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print crontab lines that run each job on its schedule.",
            discussion: """
                Paths are quoted for the shell and '%' is escaped (cron turns a bare '%' into a \
                newline). Cron runs jobs with a bare environment: give a job the variables it needs \
                in its manifest's env: section (see docs/manifest.md).

                Exit status: 0; 2 when a manifest is invalid, or when no manifest given has a \
                schedule (one without a schedule among others is skipped with a note).
                """
        )

        @Argument(help: "Job manifests (YAML).", completion: .file(extensions: ["yaml", "yml"]))
        var jobs: [String]

        func validate() throws {
            guard !jobs.isEmpty else { throw ValidationError("Give at least one manifest.") }
        }

        func run() throws {
            let resolvedHoist = scheduledBinary(for: "cron")
            var invalid = false
            var printed = 0
            for path in jobs {
                let job: Job
                do { job = try loadJob(path) } catch {
                    invalid = true
                    continue
                }
                guard let schedule = job.manifest.schedule else {
                    let note = jobs.count > 1 ? "skipped: it has no schedule" : "no schedule"
                    FileHandle.standardError.write(Data(
                        "hoist: \(path): \(note); add one, such as schedule: \"0 3 * * *\"\n".utf8))
                    continue
                }
                let manifest = URL(fileURLWithPath: path).standardizedFileURL.path
                // A newline in a path would end the crontab line and start one of its own.
                if let bad = [manifest, resolvedHoist].first(where: { $0 != printable($0) }) {
                    FileHandle.standardError.write(Data(
                        "hoist: \(printable(bad)): cannot go in a crontab line: the path holds a control or invisible character; rename it\n".utf8))
                    invalid = true
                    continue
                }
                print("# \(job.manifest.name)")
                print(CronLine.command(schedule: schedule.text, arguments: [resolvedHoist, "run", "--quiet", manifest]))
                printed += 1
            }
            if invalid || printed == 0 { throw ExitCode(2) }
        }
    }

    /// `hoist status JOB`: what the journal knows.
    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a job's last runs, file counts, and failed or unfinished files.")

        @Argument(help: "The job manifest (YAML).", completion: .file(extensions: ["yaml", "yml"]))
        var job: String

        @OptionGroup var journalOptions: JournalOptions

        func run() throws {
            let job = try loadJob(self.job)
            // What the journal says (file names, a server's messages) is shown, never obeyed by
            // the terminal: escapes, forged lines and reordering characters come out escaped,
            // and a stored message is cut at `outsideTextLimit` characters.
            let path = job.journalPath(override: journalOptions.journal)
            do { try job.checkJournalOwner(override: journalOptions.journal, claim: false) } catch {
                FileHandle.standardError.write(Data((printable("hoist: \(error)") + "\n").utf8))
                throw ExitCode(2)
            }
            guard Journal.exists(path) else {
                show("\(job.manifest.name): no runs yet (journal \(path))")
                return
            }
            let journal: any JournalStore
            do { journal = try Journal.open(path, job: job.manifest.name) } catch {
                FileHandle.standardError.write(Data((printable("hoist: \(error)") + "\n").utf8))
                throw ExitCode(2)
            }
            show("\(job.manifest.name): journal \(journal.location)")
            printWatcher(journal: journal)
            let counts = (try? journal.fileCounts()) ?? [:]
            show("files: \((counts[.done] ?? 0) + (counts[.moved] ?? 0)) uploaded, \((counts[.uploading] ?? 0) + (counts[.pending] ?? 0)) pending, "
                  + "\(counts[.failed] ?? 0) failed" + ((counts[.deleted] ?? 0) > 0 ? ", \(counts[.deleted] ?? 0) deleted by mirror" : "")
                  + ((counts[.moved] ?? 0) > 0 ? ", \(counts[.moved] ?? 0) moved" : ""))
            if let shared = try? journal.sharedRunStatus() {
                printWorkers(shared)
            }
            show("last runs:")
            for run in (try? journal.runs(limit: 10)) ?? [] {
                let started = Date(timeIntervalSince1970: run.started).formatted(.iso8601)
                let seconds = run.finished.map { String(format: "%.1f s", $0 - run.started) } ?? "-"
                show("  \(started)  \(run.status.rawValue.padding(toLength: 11, withPad: " ", startingAt: 0)) \(run.uploaded) uploaded, "
                      + "\(run.skipped) skipped, \(run.failed) failed, " + (run.cancelled > 0 ? "\(run.cancelled) cancelled, " : "")
                      + "\(ByteFormatter.string(run.bytes)), \(seconds)"
                      + (run.error.map { ": " + printable($0, limit: outsideTextLimit) } ?? ""))
            }
            for file in (try? journal.files(state: .uploading, limit: 20)) ?? [] {
                show("pending: \(file.source) -> \(file.destination) (\(file.confirmedOffset) of \(file.size) bytes confirmed)")
            }
            for file in (try? journal.files(state: .failed, limit: 20)) ?? [] {
                show("failed:  \(file.source) -> \(file.destination): " + printable(file.error ?? "", limit: outsideTextLimit))
            }
        }
    }
}

/// The `hoist` a scheduler should run: this very binary, links resolved. `swift run hoist cron`
/// names a binary that `swift package clean` (or the next build) removes, so the schedule would
/// run nothing: a warning says so.
func scheduledBinary(for command: String) -> String {
    let hoist = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
    let resolved = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? hoist
    if resolved.split(separator: "/").contains(where: { $0.hasPrefix(".build") }) {
        FileHandle.standardError.write(Data(("hoist: warning: \(printable(resolved)) is inside a build folder, which a clean or "
            + "rebuild removes: install hoist (scripts/install, or the package) and run its hoist \(command)\n").utf8))
    }
    return resolved
}

/// The workers of a job's newest shared run: each one's state, files, bytes and rate.
func printWorkers(_ run: Journal.SharedRunStatus) {
    let plan = run.planned ? "\(run.pending) files pending" : "planning"
    show("shared run \(run.runID.prefix(8)) (\(run.status.rawValue), \(plan)), \(run.workers.count) worker\(run.workers.count == 1 ? "" : "s"):")
    for worker in run.workers {
        let seconds = max(0.001, worker.last - worker.started)
        let rate = ByteFormatter.string(Int64(Double(worker.bytes) / seconds)) + "/s"
        show("  \(worker.worker) pid \(worker.pid) on \(worker.host)  \(worker.status.padding(toLength: 11, withPad: " ", startingAt: 0))"
              + " \(worker.uploaded) uploaded, \(worker.failed) failed, \(ByteFormatter.string(worker.bytes)), \(rate), holding \(worker.holding)")
    }
}

/// The watcher holding the job (`hoist watch`), as its state file says: believed only for the
/// process the job's lock file names, while it lives; a PostgreSQL journal's, as its database
/// says, believed only while the session it names holds the job's run lock.
func printWatcher(journal store: any JournalStore) {
    let journal = store.location
    guard let statePath = WatchState.path(journal: journal) else {
        if let state = (try? store.watchState()) ?? nil { printWatcher(state) }
        return
    }
    guard FileManager.default.fileExists(atPath: statePath) else { return }
    guard let state = WatchState.ofHolder(JobLock.holder(journal + ".lock"), at: statePath) else {
        show("watcher: none running")
        return
    }
    printWatcher(state)
}

private func printWatcher(_ state: WatchState) {
    func time(_ seconds: Double) -> String { Date(timeIntervalSince1970: seconds).formatted(.iso8601) }
    let oldest = state.oldestUnsettled.map { String(format: ", the oldest for %.0f s", max(0, Date().timeIntervalSince1970 - $0)) } ?? ""
    show("watcher: pid \(state.pid), watching since \(time(state.since)), \(state.queue) file\(state.queue == 1 ? "" : "s") waiting to settle\(oldest)")
    if let file = state.lastUpload, let at = state.lastUploadAt { show("  last upload: \(file) at \(time(at))") }
    if let error = state.lastError, let at = state.lastErrorAt { show("  last error:  \(time(at)): \(error)") }
}

/// A line of `hoist status`, with what came from the journal made printable.
func show(_ line: String) { print(printable(line)) }

/// A crontab line: arguments quoted for `/bin/sh`, `%` escaped for cron.
enum CronLine {
    static func command(schedule: String, arguments: [String]) -> String {
        schedule + " " + arguments.map { escapePercent(shellQuote($0)) }.joined(separator: " ")
    }

    /// `text` as one word for `/bin/sh`: as it is when it holds only safe characters, else in
    /// single quotes (a `'` inside written as `'\''`).
    static func shellQuote(_ text: String) -> String {
        let safe = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-")
        if !text.isEmpty, text.allSatisfy({ safe.contains($0) }) { return text }
        return "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// Cron turns an unescaped `%` into a newline (and what follows into standard input); `\%`
    /// reaches the shell as `%`, inside quotes or not.
    static func escapePercent(_ text: String) -> String {
        text.replacingOccurrences(of: "%", with: "\\%")
    }
}
