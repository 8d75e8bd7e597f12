import Foundation
@testable import HoistStorage
import Testing

/// The upload driver's failures are typed (`StorageFailure`); the public `NSError` is made from
/// them at the task's end, with the keys the SDK gives.
@Suite struct UploadDriverTests {
    @Test func aStorageNSErrorBecomesTheFailureItSays() {
        let error = StorageErrorCode.unauthorized.error("no access", userInfo: [StorageErrorResponseCodeKey: 403, "bucket": "b",
                                                                                StorageErrorResponseBodyKey: "denied"])
        let failure = UploadDriver.failure(error)
        #expect(failure.code == .unauthorized && failure.message == "no access" && !failure.retryable)
        #expect(failure.httpStatus == 403 && failure.responseBody == "denied" && failure.details["bucket"] == "b")
        let unknown = UploadDriver.failure(CocoaError(.fileReadNoPermission))
        #expect(unknown.code == .unknown)
    }

    @Test func runningOutOfRetriesKeepsTheLastFailuresStatusBodyAndObject() {
        let last = StorageFailure(.unknown, "Service Unavailable", retryable: true, httpStatus: 503, responseBody: "busy",
                                  details: ["bucket": "b", "object": "o", "session": "https://secret"])
        let failure = UploadDriver.retryLimitExceeded(after: last)
        #expect(failure.code == .retryLimitExceeded && !failure.retryable)
        #expect(failure.message == "Max retry time for operation exceeded, please try again. Last error: Service Unavailable")
        #expect(failure.details == ["LastError": "Service Unavailable", "bucket": "b", "object": "o"])
        let public_ = NSError.storage(failure)
        #expect(public_.domain == StorageErrorDomain && public_.code == StorageErrorCode.retryLimitExceeded.rawValue)
        #expect(public_.userInfo[StorageErrorResponseCodeKey] as? Int == 503)
        #expect(public_.userInfo["ResponseErrorCode"] as? Int == 503)
        #expect(public_.userInfo[StorageErrorResponseBodyKey] as? String == "busy")
    }
}
