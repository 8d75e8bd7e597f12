import Foundation
import Synchronization

/// The totals of a run (files and bytes to upload) before its walk ends.
///
/// A run walks its tree once, uploading as it goes, so the walk moves only as fast as slots free
/// up: on a tree of big files the totals (and with them the percent and the ETA) would come only
/// near the end. When the walk first waits for a slot, a second planner counts the whole plan on
/// a thread of its own (the walk's filters, names and journal; nothing kept but two numbers), and
/// tells observers as soon as it is done. A run whose walk never waits (a no-change run, a small
/// one) never starts it; when the walk ends first, the counter stops and the walk's count is told.
/// Observers hear `planCounted` once, or twice when the walk found other totals than the counter
/// (files changed in between): the walk's count is the last word. Nothing is counted ahead
/// unless an observer shows totals as the run goes (`JobObserver.wantsTotalsEarly`).
final class CountAhead: Sendable {
    private struct State {
        var started = false
        var walkEnded = false
        var told: (files: Int, bytes: Int64)?
    }
    private let state = Mutex(State())
    private let planner: Planner
    private let observers: [any JobObserver]

    init(planner: Planner, observers: [any JobObserver]) {
        self.planner = planner
        self.observers = observers
    }

    /// The walk waits for a slot: counting starts (once) unless the walk has ended.
    func walkWaits() {
        let start = state.withLock { state -> Bool in
            guard !state.started, !state.walkEnded, observers.contains(where: \.wantsTotalsEarly) else { return false }
            state.started = true
            return true
        }
        guard start else { return }
        let thread = Thread { [self] in count() }
        thread.name = "hoist-count"
        thread.start()
    }

    /// The walk ended with these totals: any count under way stops, and observers hear them
    /// unless the counter already told the same.
    func walkEnded(files: Int, bytes: Int64) {
        state.withLock { state in
            state.walkEnded = true
            if let told = state.told, told == (files, bytes) { return }
            state.told = (files, bytes)
            for observer in observers { observer.planCounted(files: files, bytes: bytes) }
        }
    }

    private func count() {
        var iterator = planner.makeIterator()
        var planned = 0
        while iterator.next() != nil {
            planned += 1
            if planned % 1024 == 0, state.withLock({ $0.walkEnded }) { return }
        }
        guard iterator.error == nil else { return }
        state.withLock { state in
            guard !state.walkEnded else { return }
            state.told = (iterator.uploadCount, iterator.uploadBytes)
            for observer in observers { observer.planCounted(files: iterator.uploadCount, bytes: iterator.uploadBytes) }
        }
    }
}
