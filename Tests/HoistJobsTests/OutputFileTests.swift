import Foundation
import HoistStorage
import HoistTestSupport
import Testing

/// Every file Hoist writes or replaces is a regular file or nothing yet: `/dev/null` means none
/// (never a file renamed over the machine's null device, as `--metrics-file /dev/null` did), and
/// anything else (a FIFO, a folder, a device) is refused with a message that says what it is.
/// The null device is a node of our own (`mknod`, as root): the old behaviour turns it into a
/// file, and the machine's `/dev/null` is never at stake.
@Suite(.serialized) struct OutputFileTests {
    /// A job of one file to a local bucket, and its manifest's path.
    func job() throws -> (JobFixture, String) {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nschedule: '0 3 * * *'\n")
        return (fixture, fixture.directory.url.appendingPathComponent("job.yaml").path)
    }

    /// A null device at `path`: a node of our own as root, else the machine's (which a user
    /// other than root cannot replace anyway).
    func nullDevice(at path: String) -> String {
        mknod(path, S_IFCHR | 0o666, 0x103) == 0 ? path : "/dev/null"
    }

    func isNullDevice(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && OutputFile.isNullDevice(info)
    }

    func hoistRun(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let run = try runProcess(hoist, arguments, environment: ["HOME": "/root", "PATH": "/usr/bin:/bin"])
        return (run.status, run.stdout + run.stderr)
    }

    @Test func theNullDeviceAsMetricsOrLogFileMeansNone() throws {
        let (fixture, manifest) = try job()
        let folder = fixture.directory.url.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let null = nullDevice(at: folder.appendingPathComponent("null").path)
        let run = try hoistRun(["run", manifest, "--metrics-file", null, "--log-file", null])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("1 uploaded"), "\(run.output)")
        #expect(isNullDevice(null), "\(null) is no longer the null device")
        let left = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        #expect(left == (null == "/dev/null" ? [] : ["null"]), "\(left)")
    }

    /// A FIFO or a folder where the metrics or log file goes: refused before anything is uploaded.
    @Test(arguments: ["--metrics-file", "--log-file"], ["FIFO", "folder"])
    func anythingElseIsRefusedBeforeTheRun(option: String, kind: String) throws {
        let (fixture, manifest) = try job()
        let path = fixture.directory.url.appendingPathComponent("target").path
        if kind == "FIFO" { #expect(mkfifo(path, 0o644) == 0) } else { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false) }
        let run = try hoistRun(["run", manifest, option, path])
        #expect(run.status == 2, "\(run.output)")
        #expect(run.output.contains("\(path) is a \(kind), not a regular file"), "\(run.output)")
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.url.appendingPathComponent("bucket/a.txt").path))
        var info = stat()
        #expect(lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == (kind == "FIFO" ? S_IFIFO : S_IFDIR))
    }

    /// The journal and its lock: a regular file only (a run needs a journal it can read back).
    @Test(arguments: ["journal.sqlite", "journal.sqlite.lock"])
    func aJournalOrLockThatIsNoFileIsRefused(name: String) throws {
        let (fixture, manifest) = try job()
        let path = fixture.directory.url.appendingPathComponent(name).path
        #expect(mkfifo(path, 0o600) == 0)
        let run = try hoistRun(["run", manifest])
        #expect(run.status != 0, "\(run.output)")
        #expect(run.output.contains("\(path) is a FIFO, not a regular file"), "\(run.output)")
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.url.appendingPathComponent("bucket/a.txt").path))
        let null = nullDevice(at: fixture.directory.url.appendingPathComponent("null").path)
        let again = try hoistRun(["run", manifest, "--journal", null])
        #expect(again.status != 0, "\(again.output)")
        #expect(again.output.contains("null device") || again.output.contains("may be written by other users"), "\(again.output)")
        #expect(isNullDevice(null))
    }

    /// `hoist systemd --output`: a unit the operator masked (a link to /dev/null) is not unmasked
    /// by writing over it.
    @Test func aMaskedUnitIsNotReplaced() throws {
        let (fixture, manifest) = try job()
        let units = fixture.directory.url.appendingPathComponent("units")
        try FileManager.default.createDirectory(at: units, withIntermediateDirectories: true)
        let service = units.appendingPathComponent("hoist-test.service").path
        try FileManager.default.createSymbolicLink(atPath: service, withDestinationPath: "/dev/null")
        let run = try hoistRun(["systemd", manifest, "--output", units.path])
        #expect(run.status == 2, "\(run.output)")
        #expect(run.output.contains("is masked") && run.output.contains("systemctl unmask hoist-test.service"), "\(run.output)")
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: service)) == "/dev/null")
    }
}
