import Foundation
import Testing
@testable import HoistStorage

/// Backoff with jitter, `Retry-After`, and the limits that end retrying.
@Suite struct RetryPolicyTests {
    @Test func eachWaitIsARandomPointInTheUpperHalfOfItsDoublingStep() {
        let policy = RetryPolicy(initialDelay: 1, maximumDelay: 32)
        for attempt in 1...8 {
            let step = min(32, pow(2, Double(attempt - 1)))
            let waits = (0..<400).map { _ in policy.delay(attempt: attempt, retryAfter: nil) }
            #expect(waits.allSatisfy { $0 >= step / 2 && $0 <= step }, "attempt \(attempt): \(waits.min()!)...\(waits.max()!)")
            // Jittered, over the whole half step (400 draws all in one tenth of it would be a broken random source).
            #expect(waits.min()! < step * 0.6 && waits.max()! > step * 0.9, "attempt \(attempt)")
        }
    }

    @Test func waitsStopGrowingAtTheMaximum() {
        let policy = RetryPolicy(initialDelay: 0.5, maximumDelay: 4)
        for attempt in [4, 5, 20, 1000, Int.max] {
            let wait = policy.delay(attempt: attempt, retryAfter: nil)
            #expect(wait >= 2 && wait <= 4, "attempt \(attempt): \(wait)")
        }
        // Attempt 0 or below is treated as the first.
        #expect((0..<50).allSatisfy { _ in (0.25...0.5).contains(policy.delay(attempt: 0, retryAfter: nil)) })
    }

    @Test func retryAfterIsHonouredWhenItAsksForLonger() {
        let policy = RetryPolicy(initialDelay: 1, maximumDelay: 32)
        #expect(policy.delay(attempt: 1, retryAfter: 10) == 10)
        #expect(policy.delay(attempt: 6, retryAfter: 120) == 120)   // beyond the maximum too: the server knows
        // A shorter Retry-After does not shorten the backoff.
        #expect((0..<50).allSatisfy { _ in policy.delay(attempt: 3, retryAfter: 0.1) >= 2 })
        #expect((0..<50).allSatisfy { _ in policy.delay(attempt: 1, retryAfter: 0) >= 0.5 })
    }

    @Test func retryingStopsWhenTheBudgetIsSpent() {
        let policy = RetryPolicy(initialDelay: 1, maximumDelay: 32, budget: 10)
        let start = Date(timeIntervalSince1970: 1_000_000)
        let deadline = policy.deadline(from: start)
        #expect(deadline == start.addingTimeInterval(10))
        // Early on, a wait fits.
        let first = policy.delay(attempt: 1, retryAfter: nil, deadline: deadline, now: start)
        #expect(first.map { (0.5...1).contains($0) } == true)
        // A wait that would end at or past the deadline is refused, however small the attempt.
        #expect(policy.delay(attempt: 1, retryAfter: nil, deadline: deadline, now: start.addingTimeInterval(9.5)) == nil)
        #expect(policy.delay(attempt: 1, retryAfter: nil, deadline: deadline, now: start.addingTimeInterval(11)) == nil)
        // Attempt 5 waits 8-16 s: from the start, only up to 8 s fits in 10 s, so it is nil whenever it draws more than 10.
        let late = (0..<200).map { _ in policy.delay(attempt: 5, retryAfter: nil, deadline: deadline, now: start) }
        #expect(late.allSatisfy { $0 == nil || $0! < 10 })
        // A Retry-After past the deadline ends retrying.
        #expect(policy.delay(attempt: 1, retryAfter: 30, deadline: deadline, now: start) == nil)
    }

    @Test func retryingStopsAfterMaxRetries() {
        let policy = RetryPolicy(initialDelay: 0.01, maximumDelay: 0.01, budget: 600, maxRetries: 3)
        let deadline = policy.deadline()
        #expect((1...3).allSatisfy { policy.delay(attempt: $0, retryAfter: nil, deadline: deadline) != nil })
        #expect(policy.delay(attempt: 4, retryAfter: nil, deadline: deadline) == nil)
    }

    @Test func transientFailuresAreToldByTheBackendsTypedFailure() {
        let busy = StorageFailure(.unknown, "Cloud Storage answered 503.", retryable: true, retryAfter: 2.5, httpStatus: 503)
        #expect(RetryPolicy.isTransient(busy))
        #expect(RetryPolicy.retryAfter(busy) == 2.5)
        let refused = StorageFailure(.unauthorized, "403", httpStatus: 403)
        #expect(!RetryPolicy.isTransient(refused))
        #expect(RetryPolicy.retryAfter(refused) == nil)
        // Only a backend's verdict counts: a storage NSError, a cancel or a file error are final.
        #expect(!RetryPolicy.isTransient(busy.nsError))
        #expect(!RetryPolicy.isTransient(TransferControl.cancelledError))
        #expect(!RetryPolicy.isTransient(CocoaError(.fileReadNoSuchFile)))
    }

    /// The typed failure becomes the NSError users get only at the public API, with the SDK's keys.
    @Test func aFailureBecomesTheStorageNSError() throws {
        let failure = StorageFailure(.unauthorized, "User does not have permission to access gs://b/x.", retryable: false,
                                     httpStatus: 403, responseBody: "{}", details: ["bucket": "b", "object": "x"])
        let error = NSError.storage(failure)
        #expect(error.domain == StorageErrorDomain && error.code == StorageErrorCode.unauthorized.rawValue)
        #expect(error.localizedDescription == "User does not have permission to access gs://b/x.")
        #expect(error.userInfo["ResponseCode"] as? Int == 403 && error.userInfo["ResponseErrorCode"] as? Int == 403)
        #expect(error.userInfo["bucket"] as? String == "b" && error.userInfo["object"] as? String == "x")
        #expect(error.userInfo.keys.allSatisfy { !$0.hasPrefix("Hoist") })
        // Bridged, it is the same error, so codes read the same on both sides.
        #expect(StorageErrorCode(of: failure) == .unauthorized)
        guard case .unauthorized(let bucket, let object, _) = StorageError(failure) else {
            Issue.record("\(StorageError(failure))")
            return
        }
        #expect(bucket == "b" && object == "x")
    }

    @Test func retryAfterIsReadInSecondsOrAsADate() throws {
        #expect(GCSBackend.parseRetryAfter("7") == 7)
        #expect(GCSBackend.parseRetryAfter(" 1.5 ") == 1.5)
        #expect(GCSBackend.parseRetryAfter("-3") == 0)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        let inAMinute = try #require(GCSBackend.parseRetryAfter(formatter.string(from: Date().addingTimeInterval(60))))
        #expect(inAMinute > 55 && inAMinute <= 60)
        #expect(GCSBackend.parseRetryAfter(formatter.string(from: Date().addingTimeInterval(-60))) == 0)
        #expect(GCSBackend.parseRetryAfter("soon") == nil)
    }
}
