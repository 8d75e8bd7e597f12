import ArgumentParser
import Foundation
import HoistHTTP
import HoistJobs
import HoistStorage

extension Hoist {
    /// `hoist systemd JOB`: a `.service` and `.timer` pair that run the job on its schedule;
    /// `hoist systemd --watch JOB`: a long-running service that watches it.
    struct Systemd: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print (or write) a systemd service and timer that run a job on its schedule, or a service that watches it.",
            discussion: """
                The timer fires on the manifest's schedule: (OnCalendar, with Persistent=true so a \
                run missed while the machine was off happens at boot); the service runs this hoist \
                with --quiet, with HOME as now (so the run finds the same journal, plugins and \
                credentials) and the job's env:, read-only everywhere but the journal's folder, the \
                local bucket and lua.output. Environment= lines are readable by every user: keep \
                secrets in the manifest's envFile.

                Install: hoist systemd --output /etc/systemd/system JOB.yaml, then \
                systemctl daemon-reload && systemctl enable --now hoist-NAME.timer.

                With --watch, one service instead, hoist-NAME-watch.service: it runs `hoist watch` for \
                as long as the machine runs (Restart=on-failure, the same hardening; systemctl reload \
                sends SIGHUP, which reads the manifest again; stop sends SIGTERM, which checkpoints \
                uploads in flight). No schedule is needed. Install it with systemctl enable --now \
                hoist-NAME-watch.service.

                Exit status: 0; 2 when the manifest is invalid, has no schedule (without --watch), or \
                names a path a unit file cannot hold.
                """
        )

        @Argument(help: "The job manifest (YAML).", completion: .file(extensions: ["yaml", "yml"]))
        var job: String

        @Option(name: .long, help: "Write hoist-NAME.service and hoist-NAME.timer into this folder instead of printing them.",
                completion: .directory)
        var output: String?

        @Flag(name: .long, help: "A long-running service that watches the job's roots (hoist watch) instead of a timer.")
        var watch = false

        func run() throws {
            let binary = scheduledBinary(for: "systemd")
            let job = try loadJob(self.job)
            let schedule = job.manifest.schedule
            guard schedule != nil || watch else {
                printError("hoist: \(printable(self.job)): no schedule; add one, such as schedule: \"0 3 * * *\"")
                throw ExitCode(2)
            }
            let environment = ProcessInfo.processInfo.environment
            let home = ["HOME", "XDG_STATE_HOME"].reduce(into: [String: String]()) { $0[$1] = environment[$1].flatMap { $0.isEmpty ? nil : $0 } }
            let units: SystemdUnits
            do {
                units = try SystemdUnits(job: job, schedule: watch ? nil : schedule, binary: binary,
                                         manifest: URL(fileURLWithPath: self.job).standardizedFileURL.path, home: home)
            } catch {
                FileHandle.standardError.write(Data("hoist: \(printable(error.value)): \(error)\n".utf8))
                throw ExitCode(2)
            }
            guard let output else {
                if let timer = units.timer {
                    print(units.service)
                    print(timer, terminator: "")
                } else {
                    print(units.service, terminator: "")
                }
                return
            }
            for (suffix, text) in [("service", units.service), ("timer", units.timer)] {
                guard let text else { continue }
                let path = URL(fileURLWithPath: output).appendingPathComponent("\(units.name).\(suffix)").path
                // A unit file is replaced only where a regular file (or nothing) is: a link to
                // /dev/null is a unit the operator masked.
                do {
                    if try OutputFile.state(of: path, what: "the unit file") == .nullDevice {
                        throw OutputFile.Refused(description: "\(path) is masked (it leads to /dev/null): run `systemctl unmask \(units.name).\(suffix)` first")
                    }
                } catch {
                    FileHandle.standardError.write(Data("hoist: \(printable("\(error)"))\n".utf8))
                    throw ExitCode(2)
                }
                do { try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic) } catch {
                    FileHandle.standardError.write(Data("hoist: cannot write \(printable(path)): \(error.localizedDescription)\n".utf8))
                    throw ExitCode(2)
                }
                FileHandle.standardError.write(Data("wrote \(printable(path))\n".utf8))
            }
            let unit = units.name + (units.timer == nil ? ".service" : ".timer")
            FileHandle.standardError.write(Data("then: systemctl daemon-reload && systemctl enable --now \(unit)\n".utf8))
        }
    }
}
