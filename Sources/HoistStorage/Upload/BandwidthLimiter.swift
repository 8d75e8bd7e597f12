import Foundation
import Synchronization

/// A limit on the bytes per second that every transfer sharing it sends together: a token
/// bucket that may go into debt, so pieces of any size keep the average rate exact.
public final class BandwidthLimiter: Sendable {
    public let bytesPerSecond: Int64
    private struct State {
        var tokens: Double
        var refilled: Date
    }
    private let state: Mutex<State>
    /// The most a quiet limiter saves up: a tenth of a second's worth.
    private let burst: Double

    public init(bytesPerSecond: Int64) {
        self.bytesPerSecond = max(1, bytesPerSecond)
        burst = max(Double(bytesPerSecond) / 10, 16 * 1024)
        state = Mutex(State(tokens: 0, refilled: Date()))
    }

    private func refill(_ state: inout State, now: Date) {
        state.tokens = min(burst, state.tokens + now.timeIntervalSince(state.refilled) * Double(bytesPerSecond))
        state.refilled = now
    }

    /// Takes `count` bytes' worth now; returns how long to wait before sending them.
    public func take(_ count: Int) -> TimeInterval {
        state.withLock { state in
            refill(&state, now: Date())
            state.tokens -= Double(count)
            return state.tokens < 0 ? -state.tokens / Double(bytesPerSecond) : 0
        }
    }

    /// For callers that cannot wait (curl's read callback): takes `count` bytes if any credit is
    /// left and returns true, else returns false (pause and ask again later).
    public func takeIfAvailable(_ count: Int) -> Bool {
        state.withLock { state in
            refill(&state, now: Date())
            guard state.tokens > 0 else { return false }
            state.tokens -= Double(count)
            return true
        }
    }

    /// True when a `takeIfAvailable` would succeed now.
    public var hasCredit: Bool {
        state.withLock { state in
            refill(&state, now: Date())
            return state.tokens > 0
        }
    }
}
