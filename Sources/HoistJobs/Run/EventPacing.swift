import Foundation
import HoistStorage
import Synchronization

/// How often an observer hears of one upload's progress: the first event and the last always,
/// between them at most one per `interval`. One per observer that paces (the JSON log, the hooks,
/// the journal's offsets), keyed by object.
public final class ProgressPacer: Sendable {
    public let interval: TimeInterval
    private let last = Mutex<[Bytewise: Date]>([:])  // two names, two objects: keyed as bytes

    public init(interval: TimeInterval) { self.interval = interval }

    /// Whether this progress event of `object` is passed on (and, if so, it counts as the last).
    /// `allowed` false holds back every event but the first and the last (a hook queue that is full).
    public func admit(_ object: String, final: Bool, allowed: Bool = true, now: Date = Date()) -> Bool {
        last.withLock { last in admit(&last[Bytewise(object)], final: final, allowed: allowed, now: now) }
    }

    /// The decision on the object's entry, read and written in one lookup.
    private func admit(_ previous: inout Date?, final: Bool, allowed: Bool, now: Date) -> Bool {
        if let previous, !final, now.timeIntervalSince(previous) < interval || !allowed { return false }
        previous = now
        return true
    }

    /// Whether `object` has had an event admitted since it started.
    public func started(_ object: String) -> Bool { last.withLock { $0[Bytewise(object)] != nil } }

    /// Forgets `object` (its upload ended).
    public func finished(_ object: String) { last.withLock { _ = $0.removeValue(forKey: Bytewise(object)) } }
}

extension StorageTaskStatus {
    /// The status as events and hooks name it: `resume`, `progress`, `pause`, `success`, `failure`.
    public var name: String {
        switch self {
        case .unknown: "unknown"
        case .resume: "resume"
        case .progress: "progress"
        case .pause: "pause"
        case .success: "success"
        case .failure: "failure"
        }
    }
}

extension StorageTaskSnapshot {
    /// The error of a failed snapshot as events show it: its code and message (nil before a failure).
    public var failure: (code: StorageErrorCode, message: String)? {
        guard let error = error.map({ $0 as NSError }) else { return nil }
        return (StorageErrorCode(of: error), error.localizedDescription)
    }
}
