import Foundation
import HoistHTTP
import HoistStorage
import HoistJobs
import ArgumentParser

/// One JSON object per line, for `--json`.
enum JSONLine {
    /// One JSON object on one line: keys sorted, `/` as it is (not `\/`), and the characters a
    /// terminal would obey that JSON leaves raw (C1 controls, bidirectional overrides, line
    /// separators) written as `\uXXXX` escapes, which decode to the same text.
    static func encode(_ fields: [String: any Sendable]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        let text = String(decoding: data, as: UTF8.self)
        guard text.unicodeScalars.contains(where: reordersOrControlsTerminal) else { return text }
        var escaped = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if reordersOrControlsTerminal(scalar) {
                escaped.append(contentsOf: String(format: "\\u%04X", scalar.value).unicodeScalars)
            } else {
                escaped.append(scalar)
            }
        }
        return String(escaped)
    }


}

/// The most memory this process held at once, in bytes: `VmHWM` of /proc/self/status.
/// (getrusage's ru_maxrss is no good here: Linux carries it across exec, so a child
/// started by a big process reports its parent's size.)
func peakResidentBytes() -> Int64 {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
          let kib = Int64(line.split(separator: " ").dropFirst().first ?? "")
    else { return 0 }
    return kib * 1024
}

/// `--json`, `--quiet`, `--verbose`: how `hoist run`, `hoist plan` and `hoist cp` print.
struct OutputOptions: ParsableArguments {
    @Flag(name: .long, help: "Print one JSON line per event or planned file (docs/events.md) instead of text.")
    var json = false

    @Flag(name: .shortAndLong, help: "Print nothing but errors (no progress, no file lines, no summary line).")
    var quiet = false

    @Flag(name: .shortAndLong, help: "Print a line per file: uploaded, failed, or skipped and why; a plan adds each object's metadata.")
    var verbose = false

    func validate() throws {
        if quiet && verbose { throw ValidationError("--quiet and --verbose say opposite things: choose one.") }
    }

    /// The flags again, for a command that hands its arguments on (`run --dry-run` to `plan`).
    var arguments: [String] { (json ? ["--json"] : []) + (quiet ? ["--quiet"] : []) + (verbose ? ["--verbose"] : []) }
}

/// What `hoist run` and `hoist cp` show while a run goes and when it ends: the progress display
/// on a terminal, a line per file with `-v`, failures, the summary line; and the exit status.
struct RunOutput: Sendable {
    let json: Bool
    let quiet: Bool
    let verbose: Bool
    let display: ProgressDisplay?
    /// Failures shown as they happen (on a terminal, or with -v), not after the summary.
    let liveFailures: Bool
    let observers: [any JobObserver]

    init(_ options: OutputOptions) {
        json = options.json
        quiet = options.quiet
        verbose = options.verbose
        display = !json && !quiet && isatty(STDERR_FILENO) != 0 ? ProgressDisplay() : nil
        liveFailures = !json && (display != nil || verbose)
        var observers: [any JobObserver] = display.map { [$0] } ?? []
        if liveFailures { observers.append(FileLines(verbose: verbose, say: { [display] text, isError in
            Self.say(text, isError: isError, display: display)
        })) }
        if !json && !quiet { observers.append(WarningLines { [display] text in Self.say(text, isError: true, display: display) }) }
        self.observers = observers
    }

    /// A line of the run: above the progress line on a terminal, else to standard error (errors)
    /// or standard output.
    func say(_ text: String, isError: Bool) { Self.say(text, isError: isError, display: display) }

    private static func say(_ text: String, isError: Bool, display: ProgressDisplay?) {
        let text = printable(text)
        if let display { return display.printAbove(text) }
        (isError ? FileHandle.standardError : FileHandle.standardOutput).write(Data((text + "\n").utf8))
    }

    /// Runs `runner` with the signals of a run handled (INT/TERM stop, TSTP/CONT/USR1 pause and
    /// resume, WINCH redraws).
    func run(_ runner: JobRunner) async -> JobSummary {
        display?.pausedBy { runner.isPaused }
        var resized: (@Sendable () -> Void)?
        if let display { resized = { display.draw() } }
        let signals = SignalSources.run(runner, resized: resized)
        defer { signals.cancel() }
        return await runner.run()
    }

    /// Prints the summary and failures; throws the exit status: 2 stopped (fatal), 130
    /// interrupted, 1 some files failed.
    func end(_ summary: JobSummary) throws {
        if !json && !quiet { print(summary.line) }
        reportProblems(summary)
        if let fatal = summary.fatal {
            FileHandle.standardError.write(Data((printable("hoist: \(summary.job) stopped: \(fatal)") + "\n").utf8))
            throw ExitCode(2)
        }
        if summary.interrupted { throw ExitCode(130) }
        if summary.failed > 0 || summary.deleteRefused > 0 { throw ExitCode(1) }
    }

    /// The failures not shown as they happened, and a deletion `maxDelete` refused: after a
    /// run's summary line (`end`) or a watcher's pass's (`report`).
    func reportProblems(_ summary: JobSummary) {
        if !json && !liveFailures {
            for failure in summary.failures { say("hoist: \(failure.file): \(failure.message)", isError: true) }
        }
        if let refusal = summary.deleteRefusal, !json { say("hoist: \(refusal)", isError: true) }
    }
}
