import Foundation
import Testing
@testable import HoistStorage

/// The token bucket shared by a storage's transfers: the rate over a measured interval, debt,
/// the burst a quiet limiter saves, and the non-blocking form curl's callback uses.
@Suite struct BandwidthLimiterTests {
    /// Sends `total` bytes in `piece`-byte steps, sleeping as the limiter says; returns the seconds it took.
    private func send(_ total: Int, in piece: Int, through limiter: BandwidthLimiter) async throws -> TimeInterval {
        let started = Date()
        var sent = 0
        while sent < total {
            let wait = limiter.take(piece)
            if wait > 0 { try await Task.sleep(for: .seconds(wait)) }
            sent += piece
        }
        return Date().timeIntervalSince(started)
    }

    @Test func rateOverAMeasuredInterval() async throws {
        let limiter = BandwidthLimiter(bytesPerSecond: 4 << 20)
        // 2 MiB at 4 MiB/s: half a second (the limiter starts with no credit).
        let elapsed = try await send(2 << 20, in: 64 << 10, through: limiter)
        #expect(elapsed >= 0.48 && elapsed < 0.75, "\(elapsed) s")
    }

    @Test func transfersSharingALimiterShareTheRate() async throws {
        let limiter = BandwidthLimiter(bytesPerSecond: 4 << 20)
        let started = Date()
        try await withThrowingTaskGroup(of: TimeInterval.self) { group in
            for _ in 0..<2 { group.addTask { try await self.send(1 << 20, in: 64 << 10, through: limiter) } }
            try await group.waitForAll()
        }
        // 2 × 1 MiB together at 4 MiB/s: half a second, not a quarter.
        let elapsed = Date().timeIntervalSince(started)
        #expect(elapsed >= 0.48 && elapsed < 0.75, "\(elapsed) s")
    }

    @Test func aPieceLargerThanTheCreditGoesIntoDebt() {
        let limiter = BandwidthLimiter(bytesPerSecond: 1 << 20)
        // 1 MiB at 1 MiB/s from no credit: wait about a second; the debt is carried to the next taker.
        let wait = limiter.take(1 << 20)
        #expect(wait > 0.95 && wait <= 1.0, "\(wait)")
        let next = limiter.take(0)
        #expect(next > 0.9 && next <= wait, "\(next)")
        #expect(!limiter.hasCredit)
        #expect(!limiter.takeIfAvailable(1))
    }

    @Test func aQuietLimiterSavesAtMostATenthOfASecond() async throws {
        let limiter = BandwidthLimiter(bytesPerSecond: 1 << 20)
        try await Task.sleep(for: .milliseconds(400))
        // Saved: 0.1 s worth (104,857.6 bytes), not 0.4 s worth.
        #expect(limiter.take(100_000) == 0)
        let wait = limiter.take(100_000)
        let expected = (200_000 - Double(1 << 20) / 10) / Double(1 << 20)
        #expect(abs(wait - expected) < 0.01, "\(wait) s, expected about \(expected)")
    }

    @Test func takeIfAvailableRefusesWhileInDebtAndAcceptsOnceCreditReturns() async throws {
        let limiter = BandwidthLimiter(bytesPerSecond: 1 << 20)
        #expect(limiter.take(100 << 10) > 0.09)   // about 0.1 s of debt
        #expect(!limiter.hasCredit)
        #expect(!limiter.takeIfAvailable(1024))
        try await Task.sleep(for: .milliseconds(150))
        #expect(limiter.hasCredit)
        // Any credit lets a piece of any size through (then in debt again).
        #expect(limiter.takeIfAvailable(512 << 10))
        #expect(!limiter.hasCredit)
    }

    @Test func aZeroOrNegativeRateIsOneBytePerSecond() {
        #expect(BandwidthLimiter(bytesPerSecond: 0).bytesPerSecond == 1)
        #expect(BandwidthLimiter(bytesPerSecond: -5).bytesPerSecond == 1)
    }
}
