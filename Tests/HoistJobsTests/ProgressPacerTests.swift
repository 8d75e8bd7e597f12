import Foundation
import HoistJobs
import Testing

/// `ProgressPacer` (the JSON log's, the hooks' and the journal's pacing of progress events):
/// per object, the first event and the last always pass, between them one per interval; a full
/// hook queue holds back all but the first and the last; names are keyed as bytes.
@Suite struct ProgressPacerTests {
    @Test func firstAndLastPassAndOnePerIntervalBetween() {
        let pacer = ProgressPacer(interval: 1)
        let start = Date(timeIntervalSince1970: 1_000)
        #expect(pacer.admit("a", final: false, now: start))
        #expect(pacer.started("a"))
        #expect(!pacer.admit("a", final: false, now: start.addingTimeInterval(0.5)))
        #expect(pacer.admit("b", final: false, now: start.addingTimeInterval(0.5)))   // another object has its own pace
        #expect(pacer.admit("a", final: false, now: start.addingTimeInterval(1.1)))
        #expect(!pacer.admit("a", final: false, allowed: false, now: start.addingTimeInterval(5)))   // a full queue
        #expect(pacer.admit("a", final: true, allowed: false, now: start.addingTimeInterval(5.1)))   // the last always
        pacer.finished("a")
        #expect(!pacer.started("a"))
        #expect(pacer.admit("a", final: false, allowed: false, now: start.addingTimeInterval(5.2)))   // started anew: the first
    }

    @Test func canonicallyEquivalentNamesAreTwoObjects() {
        let pacer = ProgressPacer(interval: 60)
        let now = Date()
        #expect(pacer.admit("caf\u{E9}", final: false, now: now))
        #expect(pacer.admit("cafe\u{301}", final: false, now: now))
        pacer.finished("cafe\u{301}")
        #expect(pacer.started("caf\u{E9}") && !pacer.started("cafe\u{301}"))
    }
}
