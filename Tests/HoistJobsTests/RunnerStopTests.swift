import Foundation
import HoistJobs
import Testing

/// A run stopped because it cannot go on (a shared run's worker that lost its hold) ends by the
/// deadline it was given, even while something it waits for never returns: the summary says why,
/// and the caller (`hoist run --worker`) exits 2 instead of hanging.
@Suite struct RunnerStopTests {
    @Test func aStoppedRunEndsByItsDeadlineWhileAHookStillRuns() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt", 10)
        let started = Date()
        let summary = try await hooks.run("""
            function before_upload(f)
              while true do end
            end
            """, extra: "lua: { timeLimit: 20s, instructionLimit: 100000000000 }\n") { runner in
            try? await Task.sleep(for: .milliseconds(300))
            runner.stop(fatal: "lost this worker's hold", endWithin: 1)
        }
        let seconds = Date().timeIntervalSince(started)
        #expect(seconds < 10, "the run waited for the hook: \(seconds) s")
        #expect(summary.fatal == "lost this worker's hold The run did not end within 1 s of being stopped: what was in flight is left unfinished.",
                "\(summary.fatal ?? "no fatal")")
        #expect(summary.uploaded == 0)
    }
}
