import Foundation
import HoistJobs
import HoistTestSupport
import Testing

/// `hoist systemd`: a service and timer systemd accepts, whose timer fires when cron would.
@Suite struct SystemdTests {
    static let analyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// When cron would run `schedule`, from `start`, the first `count` times (minute by minute,
    /// Vixie cron's rule: day of month and day of week both restricted means either).
    func cronTimes(_ schedule: CronExpression, from start: Date, count: Int) -> [Date] {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let raw = schedule.text.split(separator: " ")
        let either = raw.count == 5 && !raw[2].hasPrefix("*") && !raw[4].hasPrefix("*")
        var times: [Date] = []
        var minute = start
        while times.count < count, minute < start.addingTimeInterval(800 * 86_400) {
            let c = calendar.dateComponents([.minute, .hour, .day, .month, .weekday], from: minute)
            let day = schedule.fields[2].contains(c.day!), weekday = schedule.fields[4].contains(c.weekday! - 1)
            if schedule.fields[0].contains(c.minute!), schedule.fields[1].contains(c.hour!), schedule.fields[3].contains(c.month!),
               either ? (day || weekday) : (day && weekday) {
                times.append(minute)
            }
            minute += 60
        }
        return times
    }

    /// What systemd-analyze says the calendar expressions fire at, merged.
    func systemdTimes(_ expressions: [String], from start: Date, count: Int) throws -> [Date] {
        let base = ISO8601DateFormatter().string(from: start.addingTimeInterval(-1)).replacingOccurrences(of: "T", with: " ").replacingOccurrences(of: "Z", with: " UTC")
        var times = Set<Date>()
        let parse = DateFormatter()
        parse.locale = Locale(identifier: "en_US_POSIX")
        parse.timeZone = TimeZone(identifier: "UTC")
        parse.dateFormat = "EEE yyyy-MM-dd HH:mm:ss 'UTC'"
        for expression in expressions {
            let run = try runProcess(Self.analyze!, ["calendar", "--iterations=\(count)", "--base-time=\(base)", expression], environment: ["TZ": "UTC"])
            #expect(run.status == 0, "\(expression): \(run.stderr)")
            for line in run.stdout.split(separator: "\n") where line.contains("Next elapse:") || line.contains("Iter. #") {
                let text = line.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces)
                if let date = parse.date(from: text) { times.insert(date) }
            }
        }
        return Array(times.sorted().prefix(count))
    }

    @Test(.enabled(if: analyze != nil), arguments: ["0 3 * * *", "*/15 9-17 * * 1-5", "30 2 1,15 * *", "0 0 13 * 5",
                                                    "5 4 * 2,7 sun", "0 12 */10 * *", "@weekly", "45 23 31 * *"])
    func theTimerFiresWhenCronWould(text: String) throws {
        let schedule = try CronExpression.parse(text)
        let start = Date(timeIntervalSince1970: 1_767_225_600)   // 2026-01-01 00:00 UTC, a Thursday
        let expected = cronTimes(schedule, from: start, count: 12)
        #expect(expected.count == 12)
        #expect(try systemdTimes(schedule.systemdCalendars, from: start, count: 12) == expected,
                "\(text) -> \(schedule.systemdCalendars)")
    }

    @Test func theUnitsRunTheJobReadOnlyButForWhatItWrites() throws {
        let directory = try TemporaryDirectory()
        let folder = directory.url.appendingPathComponent("my jobs/50% off")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("src"), withIntermediateDirectories: true)
        let manifest = folder.appendingPathComponent("job.yaml")
        try """
            version: 1
            name: nightly
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            journal: state/nightly.sqlite
            schedule: "0 3 * * 1-5"
            env: { REGION: "eu \\"west\\"", PRICE: "$5" }
            lua: { output: logs }
            """.write(to: manifest, atomically: true, encoding: .utf8)
        let out = try TemporaryDirectory()
        let run = try runProcess(hoist, ["systemd", "--output", out.path, manifest.path], environment: ["HOME": "/home/ops"])
        #expect(run.status == 0, "\(run.stderr)")
        let service = try String(contentsOf: out.url.appendingPathComponent("hoist-nightly.service"), encoding: .utf8)
        let timer = try String(contentsOf: out.url.appendingPathComponent("hoist-nightly.timer"), encoding: .utf8)
        let path = folder.path.replacingOccurrences(of: "%", with: "%%")
        #expect(service.contains("ExecStart=\"\(hoist)\" \"run\" \"--quiet\" \"\(path)/job.yaml\"\n"), "\(service)")
        #expect(service.contains("Environment=\"HOME=/home/ops\"\n"))
        #expect(service.contains("Environment=\"REGION=eu \\\"west\\\"\"\n"), "\(service)")
        #expect(service.contains("Environment=\"PRICE=$5\"\n"))
        for folder in ["\(path)/state", "\(path)/bucket", "\(path)/logs"] {
            #expect(service.contains("ReadWritePaths=\"-\(folder)\"\n"), "\(folder): \(service)")
        }
        // The job lives in /tmp (a TemporaryDirectory): a private /tmp would hide it.
        #expect(!service.contains("PrivateTmp=yes") && service.contains("# No PrivateTmp=: the job keeps files in /tmp"), "\(service)")
        for line in ["Type=oneshot", "ProtectSystem=strict", "NoNewPrivileges=yes"] {
            #expect(service.contains(line + "\n"), "\(line)")
        }
        #expect(timer.contains("OnCalendar=Mon..Fri *-*-* 3:0:00\n"), "\(timer)")
        #expect(timer.contains("Persistent=true\n") && timer.contains("WantedBy=timers.target\n"))
        if let analyze = Self.analyze {
            let verify = try runProcess(analyze, ["verify", out.url.appendingPathComponent("hoist-nightly.service").path,
                                                  out.url.appendingPathComponent("hoist-nightly.timer").path])
            #expect(verify.status == 0 && verify.stderr.isEmpty, "\(verify.stderr)")
        }
        // Printed, the same two units.
        let printed = try runProcess(hoist, ["systemd", manifest.path], environment: ["HOME": "/home/ops"])
        #expect(printed.status == 0)
        #expect(printed.stdout == service + "\n" + timer)
    }

    /// `--watch`: one long-running service that runs `hoist watch` (restarted on failure,
    /// reloaded by SIGHUP, stopped by SIGTERM), hardened as the timer's service is, and no timer;
    /// a job without a schedule may have one.
    @Test func aWatchersServiceRunsHoistWatchForAsLongAsTheMachineRuns() throws {
        let directory = try TemporaryDirectory()
        let manifest = try directory.write("job.yaml", Data(
            "version: 1\nname: camera\nstorage: { url: 'file:bucket' }\nfiles: [{ root: src }]\njournal: state/camera.sqlite\n".utf8))
        _ = try directory.write("src/scan.pdf", Data("x".utf8))
        let out = try TemporaryDirectory()
        let run = try runProcess(hoist, ["systemd", "--watch", "--output", out.path, manifest.path], environment: ["HOME": "/home/ops"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("systemctl enable --now hoist-camera-watch.service"), "\(run.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: out.path) == ["hoist-camera-watch.service"])
        let service = try String(contentsOf: out.url.appendingPathComponent("hoist-camera-watch.service"), encoding: .utf8)
        #expect(service.contains("ExecStart=\"\(hoist)\" \"watch\" \"--quiet\" \"\(manifest.path)\"\n"), "\(service)")
        for line in ["Type=simple", "Restart=on-failure", "ExecReload=/bin/kill -HUP $MAINPID", "KillSignal=SIGTERM",
                     "WantedBy=multi-user.target", "ProtectSystem=strict", "ProtectHome=read-only", "NoNewPrivileges=yes",
                     "ReadWritePaths=\"-\(directory.path)/state\"", "ReadWritePaths=\"-\(directory.path)/bucket\""] {
            #expect(service.contains(line + "\n"), "\(line): \(service)")
        }
        #expect(!service.contains("Type=oneshot"))
        if let analyze = Self.analyze {
            let verify = try runProcess(analyze, ["verify", out.url.appendingPathComponent("hoist-camera-watch.service").path])
            #expect(verify.status == 0 && verify.stderr.isEmpty, "\(verify.stderr)")
        }
        let printed = try runProcess(hoist, ["systemd", "--watch", manifest.path], environment: ["HOME": "/home/ops"])
        #expect(printed.status == 0)
        #expect(printed.stdout == service)
        // Without --watch, the job has no schedule for a timer.
        #expect(try runProcess(hoist, ["systemd", manifest.path]).status == 2)
    }

    /// Under `ProtectSystem=strict` a root left read-only is one the job never removes
    /// a file from, and the disk fills. Each root that moves is writable (a root that is one
    /// file: its folder); a root that only uploads stays read-only.
    @Test func theRootsOfFileSetsThatMoveAreWritable() throws {
        let directory = try TemporaryDirectory()
        let folder = directory.url.appendingPathComponent("job")
        for name in ["spool/in", "src", "logs"] {
            try FileManager.default.createDirectory(at: folder.appendingPathComponent(name), withIntermediateDirectories: true)
        }
        try Data("x".utf8).write(to: folder.appendingPathComponent("logs/app.log"))
        let manifest = try directory.write("job/job.yaml", Data("""
            version: 1
            name: shipper
            storage: { url: 'gs://b' }
            files:
              - { root: spool, move: true, removeEmptyFolders: true }
              - { root: src }
              - { root: logs/app.log, move: true }
            journal: /var/lib/hoist/shipper.sqlite
            schedule: "*/5 * * * *"
            """.utf8))
        let out = try TemporaryDirectory()
        let run = try runProcess(hoist, ["systemd", "--output", out.path, manifest.path], environment: ["HOME": "/home/ops"])
        #expect(run.status == 0, "\(run.stderr)")
        let service = try String(contentsOf: out.url.appendingPathComponent("hoist-shipper.service"), encoding: .utf8)
        let writable = service.split(separator: "\n").filter { $0.hasPrefix("ReadWritePaths=") }
        #expect(writable == ["ReadWritePaths=\"-/var/lib/hoist\"", "ReadWritePaths=\"-\(folder.path)/spool\"",
                             "ReadWritePaths=\"-\(folder.path)/logs\""], "\(service)")
        if let analyze = Self.analyze {
            let verify = try runProcess(analyze, ["verify", out.url.appendingPathComponent("hoist-shipper.service").path,
                                                  out.url.appendingPathComponent("hoist-shipper.timer").path])
            #expect(verify.status == 0 && verify.stderr.isEmpty, "\(verify.stderr)")
        }
    }

    @Test func aJobWithoutAScheduleOrWithAControlCharacterIsRefused() throws {
        let directory = try TemporaryDirectory()
        let manual = try directory.write("manual.yaml", Data("version: 1\nname: manual\nstorage: { url: 'file:bucket' }\nfiles: [{ root: ., optional: true }]\n".utf8))
        let run = try runProcess(hoist, ["systemd", manual.path])
        #expect(run.status == 2)
        #expect(run.stderr.contains("no schedule"), "\(run.stderr)")
        let forged = try directory.write("forged.yaml", Data("version: 1\nname: forged\nstorage: { url: 'file:bucket' }\nfiles: [{ root: ., optional: true }]\nschedule: '0 3 * * *'\nenv: { X: \"a\\nExecStartPre=/bin/evil\" }\n".utf8))
        let refused = try runProcess(hoist, ["systemd", forged.path])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("cannot go in a unit file"), "\(refused.stderr)")
        #expect(!refused.stdout.contains("ExecStartPre"))
    }
}
