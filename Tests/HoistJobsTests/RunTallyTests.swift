@testable import HoistJobs
import HoistStorage
import Testing

/// The run's counts and failure policy, without uploads: what a summary line, `--json`'s
/// `job_end` and the metrics say is what the tally counted.
@Suite struct RunTallyTests {
    @Test func skipsAreCountedByReason() {
        var tally = RunTally(job: "j", failFast: false, maxErrors: nil)
        for reason: SkipReason in [.unchanged, .unchanged, .vetoed, .exists, .notIncluded, .excluded("*.tmp"), .smallerThanMinSize] {
            tally.skipped(reason)
        }
        let summary = tally.summary
        #expect((summary.skipped, summary.unchanged, summary.vetoed, summary.existing) == (7, 2, 1, 1))
        #expect(summary.line.hasPrefix("j: 0 uploaded (0 B), 2 unchanged, 3 not included, 1 vetoed by a hook, 1 already in the bucket"))
    }

    @Test func aFatalFailureStopsEverythingOnceAndKeepsTheFirstReason() {
        var tally = RunTally(job: "j", failFast: false, maxErrors: nil)
        #expect(tally.uploadEnded(file: "a", destination: "a", .failure(.unauthenticated, "token refused"), stopping: false) == .stopAll)
        #expect(tally.uploadEnded(file: "b", destination: "b", .failure(.bucketNotFound, "no bucket"), stopping: true) == .goOn)
        #expect(tally.summary.fatal == "token refused")
        #expect(tally.summary.failed == 2)
        #expect(tally.fatal("journal gone") == .stopAll)
        #expect(tally.summary.fatal == "token refused")
    }

    @Test func maxErrorsStopsStartingAndFailFastCancels() {
        var tally = RunTally(job: "j", failFast: false, maxErrors: 2)
        #expect(tally.uploadEnded(file: "a", destination: "a", .failure(.unknown, "503"), stopping: false) == .goOn)
        #expect(tally.failedBeforeStart(file: "b", destination: "b", message: "hook failed", interrupted: false) == (true, .stopStarting))
        var fast = RunTally(job: "j", failFast: true, maxErrors: nil)
        #expect(fast.uploadEnded(file: "a", destination: "a", .failure(.unknown, "503"), stopping: false) == .stopAll)
        #expect(fast.failedBeforeStart(file: "b", destination: "b", message: "hook failed", interrupted: false) == (true, .stopStarting))
    }

    @Test func whatAStopCancelsIsCancelledNotFailed() {
        var tally = RunTally(job: "j", failFast: false, maxErrors: nil)
        #expect(tally.uploadEnded(file: "a", destination: "a", .failure(.cancelled, "cancelled"), stopping: true) == .goOn)
        #expect(tally.failedBeforeStart(file: "b", destination: "b", message: "hook stopped", interrupted: true) == (false, .goOn))
        tally.notStarted(interrupted: true)
        tally.notStarted(interrupted: false)
        // A cancel the run did not ask for (a hook's own) is a failure.
        _ = tally.uploadEnded(file: "c", destination: "c", .failure(.cancelled, "cancelled by a hook"), stopping: false)
        #expect((tally.summary.cancelled, tally.summary.failed) == (3, 1))
    }

    @Test func atMostAHundredFailuresAreKeptButAllAreCounted() {
        var tally = RunTally(job: "j", failFast: false, maxErrors: nil)
        for index in 0..<150 { tally.walkFailed(path: "f\(index)", message: "cannot read") }
        tally.planFailed(manifest: "job.yaml", message: "two files for one object")
        #expect(tally.summary.failed == 151)
        #expect(tally.summary.failures.count == 101)
        #expect(tally.summary.failures.last?.file == "job.yaml")
        #expect(tally.summary.fatal == "two files for one object")
    }

    @Test func uploadsCountTheirBytes() {
        var tally = RunTally(job: "j", failFast: false, maxErrors: nil)
        _ = tally.uploadEnded(file: "a", destination: "a", .success(bytes: 1000), stopping: false)
        _ = tally.uploadEnded(file: "b", destination: "b", .success(bytes: 24), stopping: true)
        #expect((tally.summary.uploaded, tally.summary.bytes) == (2, 1024))
    }
}
