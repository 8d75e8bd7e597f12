import HoistJobs
import Foundation

/// A job's systemd units: a oneshot `.service` that runs it and a `.timer` that starts the
/// service on the job's `schedule:` (`hoist systemd`), or, for a watcher (`hoist systemd
/// --watch`), one long-running `.service` (`hoist watch`, restarted on failure) and no timer.
public struct SystemdUnits: Sendable {
    /// `hoist-NAME` (`hoist-NAME-watch` for a watcher): the units' name without the suffix.
    public let name: String
    public let service: String
    /// Nil for a watcher's service, which runs for as long as the machine does.
    public let timer: String?

    /// A value a unit file cannot hold (a control character would end its line).
    public struct Unwritable: Error, CustomStringConvertible {
        public let value: String
        public var description: String { "cannot go in a unit file: it holds a control character" }
    }

    /// - Parameters:
    ///   - schedule: the timer's; nil for a watcher's service.
    ///   - binary: the `hoist` to run, absolute.
    ///   - manifest: the job's manifest, absolute.
    ///   - home: `HOME` (and `XDG_STATE_HOME`) as the job should see them, so the run finds the
    ///     same default journal, plugins and credentials as the user who made the units.
    public init(job: Job, schedule: CronExpression?, binary: String, manifest: String, home: [String: String]) throws(Unwritable) {
        let watches = schedule == nil
        name = "hoist-\(job.manifest.name)" + (watches ? "-watch" : "")
        let writable = Self.writableFolders(of: job)
        var service = """
            # \(name).service: made by `hoist systemd\(watches ? " --watch" : "")` from \(manifest)
            [Unit]
            Description=Hoist job \(job.manifest.name)\(watches ? ", watching its roots" : "")
            Wants=network-online.target
            After=network-online.target

            [Service]

            """
        if watches {
            service += """
                Type=simple
                ExecStart=\(try Self.quotedCommand([binary, "watch", "--quiet", manifest]))
                # SIGHUP reads the manifest again (one that does not load is said, and the old one stays).
                ExecReload=/bin/kill -HUP $MAINPID
                # SIGTERM checkpoints the uploads in flight (continued at the next start) and exits 0 within 10 s.
                KillSignal=SIGTERM
                TimeoutStopSec=30s
                Restart=on-failure
                RestartSec=10s

                """
        } else {
            service += """
                Type=oneshot
                ExecStart=\(try Self.quotedCommand([binary, "run", "--quiet", manifest]))

                """
        }
        // Readable by every user (systemctl show): keep secrets in the manifest's envFile.
        for (key, value) in home.sorted(by: { $0.key < $1.key }) + job.manifest.env.sorted(by: { $0.key < $1.key }) {
            service += "Environment=\(try Self.quoted("\(key)=\(value)"))\n"
        }
        service += """
            # Hardening a batch uploader lives with: the whole file system read-only (the roots
            # included) but for what the job writes, no new privileges, a private /tmp.
            ProtectSystem=strict
            ProtectHome=read-only
            NoNewPrivileges=yes
            ProtectKernelTunables=yes
            ProtectKernelModules=yes
            ProtectControlGroups=yes
            RestrictSUIDSGID=yes
            LockPersonality=yes

            """
        // A private /tmp hides what the job keeps there (a manifest, a root, the journal).
        let usesTmp = ([manifest, job.journalPath()] + writable + job.manifest.files.map { job.root(of: $0) })
            .contains { path in ["/tmp", "/var/tmp"].contains { path == $0 || path.hasPrefix($0 + "/") } }
        service += usesTmp ? "# No PrivateTmp=: the job keeps files in /tmp or /var/tmp.\n" : "PrivateTmp=yes\n"
        // '-': a folder not made yet does not stop the unit (the run says what it cannot write).
        for folder in writable { service += "ReadWritePaths=\(try Self.quoted("-" + folder))\n" }
        if watches {
            service += """

                [Install]
                WantedBy=multi-user.target

                """
        }
        self.service = service
        guard let schedule else {
            timer = nil
            return
        }
        var timer = """
            # \(name).timer: made by `hoist systemd` from \(manifest)
            [Unit]
            Description=Run hoist job \(job.manifest.name) on its schedule (\(schedule.text))

            [Timer]

            """
        for calendar in schedule.systemdCalendars { timer += "OnCalendar=\(calendar)\n" }
        timer += """
            # A run missed while the machine was off happens at boot.
            Persistent=true

            [Install]
            WantedBy=timers.target

            """
        self.timer = timer
    }

    /// Folders the job writes: its journal's (a SQLite file, its lock and WAL beside it), the
    /// local bucket's, the hooks' output folder, and the root of each file set that moves (its
    /// files are removed, and with `removeEmptyFolders` its folders; a root that is one file,
    /// the folder holding it): read-only, the run never removes a file and the disk fills.
    static func writableFolders(of job: Job) -> [String] {
        var folders: [String] = []
        let journal = job.journalPath()
        if !PostgresLocation.isPostgres(journal) { folders.append(URL(fileURLWithPath: journal).deletingLastPathComponent().path) }
        if let bucket = job.localBucketFolder { folders.append(bucket) }
        if let output = job.manifest.lua.output { folders.append(job.resolve(output)) }
        for set in job.manifest.files where set.move {
            let root = job.root(of: set)
            var info = stat()
            let isFile = stat(root, &info) == 0 && (info.st_mode & S_IFMT) != S_IFDIR
            folders.append(isFile ? URL(fileURLWithPath: root).deletingLastPathComponent().path : root)
        }
        var seen = Set<String>()
        return folders.filter { seen.insert($0).inserted }
    }

    /// A word of a unit file in double quotes: `\` and `"` escaped, `%` (a specifier) doubled.
    static func quoted(_ text: String) throws(Unwritable) -> String {
        guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { throw Unwritable(value: text) }
        return "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "%", with: "%%") + "\""
    }

    /// A command line for `ExecStart=`: each word quoted, `$` doubled (systemd expands `$VAR`).
    static func quotedCommand(_ words: [String]) throws(Unwritable) -> String {
        var line: [String] = []
        for word in words { line.append(try quoted(word).replacingOccurrences(of: "$", with: "$$")) }
        return line.joined(separator: " ")
    }
}
