import Foundation
import HoistJobs
import HoistTestSupport
import Testing

/// A run walks its tree once: it uploads as it plans, counts as it goes, and stops at a plan
/// error where it finds it.
@Suite struct OnePassTests {
    func events(_ stdout: String) -> [[String: Any]] {
        stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    @Test func totalsArriveWhenTheWalkEnds() throws {
        let fixture = try JobFixture()
        for index in 0..<30 { try fixture.file("d\(index % 3)/f\(index).txt", 100 + index) }
        try fixture.file("skip.tmp", 5)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src, exclude: '**/*.tmp' }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let run = try runProcess(hoist, ["run", "--json", manifest])
        #expect(run.status == 0, "\(run.stderr)")
        let all = events(run.stdout)
        let start = try #require(all.first { $0["event"] as? String == "job_start" })
        #expect(start["files"] == nil)   // not counted yet: there is no second walk to count them
        let counted = try #require(all.first { $0["event"] as? String == "plan_counted" })
        #expect(counted["files"] as? Int == 30)
        #expect(counted["bytes"] as? Int == (0..<30).reduce(0) { $0 + 100 + $1 })
        let end = try #require(all.last)
        #expect(end["event"] as? String == "job_end")
        #expect(end["uploaded"] as? Int == 30)
    }

    /// 40 files of 1 MB at 8 MB/s showed no total for most of the run, since the walk moves
    /// only as slots free up. The totals are counted ahead while the walk waits: they come before
    /// the first upload ends (at 8 MB/s, four slots: half a second), and once.
    @Test func totalsArriveEarlyWhenUploadsHoldTheWalkBack() throws {
        let fixture = try JobFixture()
        for index in 0..<40 { try fixture.file("f\(index).bin", 1_000_000) }
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { concurrency: 4, bandwidth: 8MB/s }\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let run = try runProcess(hoist, ["run", "--json", manifest])
        #expect(run.status == 0, "\(run.stderr)")
        let all = events(run.stdout).compactMap { $0["event"] as? String == "plan_counted" || $0["event"] as? String == "success" ? $0 : nil }
        let counted = all.filter { $0["event"] as? String == "plan_counted" }
        #expect(counted.count == 1)
        #expect(counted.first?["files"] as? Int == 40)
        #expect(counted.first?["bytes"] as? Int == 40_000_000)
        #expect(all.first?["event"] as? String == "plan_counted", "the totals came after \(all.firstIndex { $0["event"] as? String == "plan_counted" } ?? -1) uploads")
        #expect(all.count == 41)
    }

    /// Counting ahead is a second walk of the tree (its filters, names and journal): a run whose
    /// observers show no totals as it goes (cron, `--quiet`) does not make it, and hears the
    /// totals once, when its only walk ends, after the first uploads; one that shows them hears
    /// them before the first upload ends.
    @Test func totalsAreCountedAheadOnlyForAnObserverThatShowsThem() async throws {
        for watching in [false, true] {
            let fixture = try JobFixture()
            for index in 0..<10 { try fixture.file("f\(index).bin", 1_000_000) }
            let job = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { concurrency: 2, bandwidth: 4MB/s }\n")
            let observer = RecordingObserver(wantsTotalsEarly: watching)
            let summary = await JobRunner(job: job, storage: try job.makeStorage(), observers: [observer]).run()
            #expect(summary.uploaded == 10)
            let events = observer.events.withLock { $0 }.filter { $0.hasPrefix("counted") || $0.hasPrefix("success") }
            #expect(events.filter { $0.hasPrefix("counted") } == ["counted 10 10000000"], "\(events)")
            let counted = try #require(events.firstIndex { $0.hasPrefix("counted") })
            if watching {
                #expect(counted == 0, "counted after \(counted) uploads: \(events)")
            } else {
                // The walk ends once the last file has a slot: the others but one are done by then.
                #expect(counted >= 10 - 2, "counted after \(counted) uploads: \(events)")
            }
        }
    }

    @Test func twoFilesForOneDestinationStopTheRunWhereFound() throws {
        let fixture = try JobFixture()
        try fixture.file("a/pic.jpg", 10)
        try fixture.file("b/pic.jpg", 20)
        try fixture.file("c/other.jpg", 30)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src, destination: 'all/{name}' }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let src = fixture.directory.url.appendingPathComponent("src").path
        let message = "\(src)/a/pic.jpg and \(src)/b/pic.jpg both go to 'all/pic.jpg': change the destination template"
        let plan = try runProcess(hoist, ["plan", manifest])
        #expect(plan.status == 2)
        #expect(plan.stderr.contains(message), "\(plan.stderr)")
        let run = try runProcess(hoist, ["run", manifest])
        #expect(run.status == 2)
        #expect(run.stderr.contains("stopped: \(message)"), "\(run.stderr)")
        // Nothing after the collision was uploaded, and the second file did not overwrite the first.
        let bucket = fixture.directory.url.appendingPathComponent("bucket")
        #expect(try Data(contentsOf: bucket.appendingPathComponent("all/pic.jpg")) == patternData(10))
        #expect(!FileManager.default.fileExists(atPath: bucket.appendingPathComponent("all/other.jpg").path))
    }
}
