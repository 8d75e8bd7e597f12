import Synchronization

/// The bytes of an upload in parts (S3 multipart, GCS parallel composite) the server holds or
/// is being sent, for progress: parts finished plus what each part in flight has sent, reported
/// only when it grows, so progress from all parts adds up to one that never goes back.
final class PartMeter: Sendable {
    private let state: Mutex<(base: Int64, inFlight: [Int: Int64], reported: Int64)>
    private let report: @Sendable (Int64) -> Void

    init(base: Int64, report: @escaping @Sendable (Int64) -> Void) {
        state = Mutex((base, [:], base))
        self.report = report
    }

    func sent(_ part: Int, _ bytes: Int64) {
        update { $0.inFlight[part] = max($0.inFlight[part] ?? 0, bytes) }
    }

    func finished(_ part: Int, length: Int64) {
        update { state in
            state.inFlight[part] = nil
            state.base += length
        }
    }

    private func update(_ change: (inout (base: Int64, inFlight: [Int: Int64], reported: Int64)) -> Void) {
        // Reported inside the lock: parts finish on several threads, and progress must only grow.
        state.withLock { state in
            change(&state)
            let now = state.base + state.inFlight.values.reduce(0, +)
            guard now > state.reported else { return }
            state.reported = now
            report(now)
        }
    }
}
