@testable import HoistJobs
import Testing

/// The runner's slots as a state machine, in async-http-client's style: feed it events
/// (`next`, `admit`, `finished`) and check the actions it returns. No upload, no server.
@Suite struct UploadSlotsStateMachineTests {
    /// Files over 100 bytes are large here.
    static func slots(_ concurrency: Int) -> UploadSlots<String> { UploadSlots(concurrency: concurrency, largeFile: 100) }

    @Test func smallFilesFillEverySlotThenTheRunWaits() {
        var slots = Self.slots(3)
        for name in ["a", "b", "c"] {
            #expect(slots.next(stopping: false) == .takeWork)
            #expect(slots.admit(name, size: 10) == .start(name, large: false))
        }
        #expect(slots.next(stopping: false) == .awaitUploads)
        slots.finished(large: false)
        #expect(slots.next(stopping: false) == .takeWork)
    }

    @Test func largeFilesTakeAllSlotsButOneAndSmallFilesPassThem() {
        var slots = Self.slots(3)
        #expect(slots.admit("L1", size: 500) == .start("L1", large: true))
        #expect(slots.admit("L2", size: 500) == .start("L2", large: true))
        // The lane is full: the third large file waits, and a small one still starts.
        #expect(slots.admit("L3", size: 500) == .awaitUploads)
        #expect(slots.deferred == ["L3"])
        #expect(slots.next(stopping: false) == .takeWork)
        #expect(slots.admit("s", size: 10) == .start("s", large: false))
        #expect(slots.next(stopping: false) == .awaitUploads)
        // A small file ending frees no lane slot: the deferred file still waits, new work is taken.
        slots.finished(large: false)
        #expect(slots.next(stopping: false) == .takeWork)
        #expect(slots.admit("s2", size: 10) == .start("s2", large: false))
        // A large file ending: the deferred one starts before any new work.
        slots.finished(large: true)
        #expect(slots.next(stopping: false) == .start("L3", large: true))
        #expect(slots.deferred.isEmpty)
        #expect(slots.next(stopping: false) == .awaitUploads)
    }

    @Test func aFileOfExactlyTheThresholdIsSmall() {
        var slots = Self.slots(2)
        #expect(slots.admit("edge", size: 100) == .start("edge", large: false))
        #expect(slots.admit("over", size: 101) == .start("over", large: true))
    }

    @Test func withOneSlotALargeFileStillRuns() {
        var slots = Self.slots(1)
        #expect(slots.largeSlots == 1)
        #expect(slots.admit("L", size: 500) == .start("L", large: true))
        #expect(slots.next(stopping: false) == .awaitUploads)
        slots.finished(large: true)
        #expect(slots.isIdle)
    }

    @Test func deferredFilesStartInTheOrderTheyCame() {
        var slots = Self.slots(2)
        #expect(slots.admit("L0", size: 500) == .start("L0", large: true))
        for name in ["L1", "L2", "L3"] { #expect(slots.admit(name, size: 500) == .awaitUploads) }
        var started: [String] = []
        for _ in 0..<3 {
            slots.finished(large: true)
            if case .start(let name, large: true) = slots.next(stopping: false) { started.append(name) }
        }
        #expect(started == ["L1", "L2", "L3"])
    }

    @Test func tooManyDeferredFilesStopNewWork() {
        var slots = Self.slots(4)
        for index in 0..<3 { #expect(slots.admit("L\(index)", size: 500) == .start("L\(index)", large: true)) }
        for index in 0..<UploadSlots<String>.deferLimit { #expect(slots.admit("W\(index)", size: 500) == .awaitUploads) }
        // One slot is free, but the waiting list is full: no new work until a large file ends.
        #expect(slots.running == 3)
        #expect(slots.next(stopping: false) == .awaitUploads)
        slots.finished(large: true)
        #expect(slots.next(stopping: false) == .start("W0", large: true))
        #expect(slots.next(stopping: false) == .takeWork)
    }

    @Test func nothingStartsOnceTheRunIsStopping() {
        var slots = Self.slots(2)
        #expect(slots.admit("L0", size: 500) == .start("L0", large: true))
        #expect(slots.admit("L1", size: 500) == .awaitUploads)
        slots.finished(large: true)
        #expect(slots.next(stopping: true) == .awaitUploads)
        #expect(slots.deferred == ["L1"])
        #expect(slots.isIdle)
    }
}

extension UploadSlots.Action: Equatable where Item: Equatable {
    public static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.start(let a, let x), .start(let b, let y)): a == b && x == y
        case (.takeWork, .takeWork), (.awaitUploads, .awaitUploads): true
        default: false
        }
    }
}
