import Foundation
import Synchronization
import Testing
@testable import HoistStorage

/// The pause and cancel switch of one transfer.
@Suite struct TransferControlTests {
    /// Runs `checkpoint()` in a task and records when it returned or what it threw.
    private final class Waiter: Sendable {
        let outcome = Mutex<Result<Void, any Error>?>(nil)
        init(_ control: TransferControl) {
            Task {
                let result: Result<Void, any Error>
                do { try await control.checkpoint(); result = .success(()) } catch { result = .failure(error) }
                outcome.withLock { $0 = result }
            }
        }
        var done: Bool { outcome.withLock { $0 != nil } }
        func wait(upTo seconds: Double = 2) async throws {
            let deadline = Date().addingTimeInterval(seconds)
            while !done, Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
        }
    }

    @Test func aRunningControlLetsCheckpointsThrough() async throws {
        let control = TransferControl()
        try await control.checkpoint()
        #expect(!control.isPaused && !control.isCancelled)
    }

    @Test func pauseHoldsCheckpointsUntilResume() async throws {
        let control = TransferControl()
        control.pause()
        #expect(control.isPaused)
        let waiters = [Waiter(control), Waiter(control)]
        try await Task.sleep(for: .milliseconds(300))
        #expect(waiters.allSatisfy { !$0.done })
        control.resume()
        for waiter in waiters {
            try await waiter.wait()
            #expect(waiter.outcome.withLock { if case .success? = $0 { true } else { false } })
        }
        #expect(!control.isPaused)
        try await control.checkpoint()
    }

    @Test func cancelReleasesPausedCheckpointsWithCancelled() async throws {
        let control = TransferControl()
        control.pause()
        let waiter = Waiter(control)
        try await Task.sleep(for: .milliseconds(100))
        #expect(!waiter.done)
        control.cancel()
        try await waiter.wait()
        let error = try #require(waiter.outcome.withLock { if case .failure(let error)? = $0 { error } else { nil } })
        #expect(StorageErrorCode(of: error) == .cancelled)
        #expect(control.isCancelled)
    }

    @Test func cancelIsFinal() async throws {
        let control = TransferControl()
        control.cancel()
        await #expect { try await control.checkpoint() } throws: { StorageErrorCode(of: $0) == .cancelled }
        control.resume()
        await #expect { try await control.checkpoint() } throws: { StorageErrorCode(of: $0) == .cancelled }
        await #expect { try await control.commitCheckpoint() } throws: { StorageErrorCode(of: $0) == .cancelled }
    }

    @Test func afterTheCommitCheckpointCancelIsTooLate() async throws {
        let control = TransferControl()
        try await control.commitCheckpoint()
        control.cancel()
        #expect(!control.isCancelled)
        try await control.checkpoint()
        try await control.commitCheckpoint()   // a second call returns at once
    }

    /// `commitCheckpoint` lets the observers of events already reported run first, so a cancel
    /// from the handler of the last progress event still wins.
    @Test func commitCheckpointWaitsForTheObserverQueue() async throws {
        let queue = DispatchQueue(label: "observers")
        let control = TransferControl(observerQueue: { queue })
        let handlerRan = Mutex(false)
        queue.async {
            Thread.sleep(forTimeInterval: 0.2)   // a slow handler of the last progress event
            handlerRan.withLock { $0 = true }
            control.cancel()
        }
        await #expect { try await control.commitCheckpoint() } throws: { StorageErrorCode(of: $0) == .cancelled }
        #expect(handlerRan.withLock { $0 })
    }

    @Test func sleepEndsEarlyOnCancel() async throws {
        let control = TransferControl()
        let started = Date()
        Task {
            try await Task.sleep(for: .milliseconds(100))
            control.cancel()
        }
        await #expect { try await control.sleep(5) } throws: { StorageErrorCode(of: $0) == .cancelled }
        #expect(Date().timeIntervalSince(started) < 1)
        // Uncancelled, it sleeps the time asked.
        let other = TransferControl()
        let start = Date()
        try await other.sleep(0.2)
        #expect(Date().timeIntervalSince(start) >= 0.2)
    }

    @Test func throttleWaitsForTheSharedLimit() async throws {
        let unlimited = TransferControl()
        var start = Date()
        try await unlimited.throttle(100 << 20)
        #expect(Date().timeIntervalSince(start) < 0.05)

        let limited = TransferControl(limiter: BandwidthLimiter(bytesPerSecond: 1 << 20))
        start = Date()
        try await limited.throttle(300 << 10)   // 0.3 s at 1 MiB/s
        let elapsed = Date().timeIntervalSince(start)
        #expect(elapsed >= 0.27 && elapsed < 0.6, "\(elapsed)")
    }
}
