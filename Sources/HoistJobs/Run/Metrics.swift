import Foundation
import HoistStorage

/// Prometheus text-format metrics for node_exporter's textfile collector, written atomically.
public enum Metrics {
    /// What a watcher adds to its last pass's metrics: the files waiting to settle.
    public struct Watching: Sendable {
        public var queue: Int
        public var oldestUnsettledSeconds: Double
        public init(queue: Int, oldestUnsettledSeconds: Double) {
            self.queue = queue
            self.oldestUnsettledSeconds = oldestUnsettledSeconds
        }
    }

    /// The metrics of a run that ended; a watcher's (`hoist watch`) also give its queue.
    public static func write(_ summary: JobSummary, watching: Watching? = nil, to path: String) throws {
        let job = label(summary.job)
        let success = summary.succeeded
        let text = head(job: job, success: success) + """
            # HELP hoist_last_run_duration_seconds How long the last run took.
            # TYPE hoist_last_run_duration_seconds gauge
            hoist_last_run_duration_seconds{job="\(job)"} \(String(format: "%.3f", summary.seconds))
            # HELP hoist_last_run_files Files of the last run by outcome.
            # TYPE hoist_last_run_files gauge
            hoist_last_run_files{job="\(job)",outcome="uploaded"} \(summary.uploaded)
            hoist_last_run_files{job="\(job)",outcome="skipped"} \(summary.skipped)
            hoist_last_run_files{job="\(job)",outcome="failed"} \(summary.failed)
            hoist_last_run_files{job="\(job)",outcome="cancelled"} \(summary.cancelled)
            hoist_last_run_files{job="\(job)",outcome="moved"} \(summary.moved)
            # HELP hoist_last_run_objects_deleted Objects the last run's mirror deleted, and left (replaced by another writer, or kept by a hook).
            # TYPE hoist_last_run_objects_deleted gauge
            hoist_last_run_objects_deleted{job="\(job)",outcome="deleted"} \(summary.deleted)
            hoist_last_run_objects_deleted{job="\(job)",outcome="kept"} \(summary.deleteKept)
            hoist_last_run_objects_deleted{job="\(job)",outcome="refused"} \(summary.deleteRefused)
            # HELP hoist_last_run_bytes Bytes uploaded by the last run.
            # TYPE hoist_last_run_bytes gauge
            hoist_last_run_bytes{job="\(job)"} \(summary.bytes)

            """ + (watching.map { watching in """
                # HELP hoist_watch_queue_files Files a watcher saw change that wait to settle.
                # TYPE hoist_watch_queue_files gauge
                hoist_watch_queue_files{job="\(job)"} \(watching.queue)
                # HELP hoist_watch_oldest_unsettled_seconds How long the oldest file waiting to settle has waited (0: none waits).
                # TYPE hoist_watch_oldest_unsettled_seconds gauge
                hoist_watch_oldest_unsettled_seconds{job="\(job)"} \(String(format: "%.3f", watching.oldestUnsettledSeconds))

                """ } ?? "")
        try writeAtomically(text, to: path)
    }

    /// A run that could not start: success 0, so an earlier success does not stand.
    public static func writeFailure(job: String, to path: String) throws {
        try writeAtomically(head(job: label(job), success: false), to: path)
    }

    /// When the run ended and whether it succeeded: what every metrics file says.
    private static func head(job: String, success: Bool) -> String {
        """
        # HELP hoist_last_run_timestamp_seconds When the last run of the job ended.
        # TYPE hoist_last_run_timestamp_seconds gauge
        hoist_last_run_timestamp_seconds{job="\(job)"} \(Int(Date().timeIntervalSince1970))
        # HELP hoist_last_run_success 1 when the last run uploaded everything it should.
        # TYPE hoist_last_run_success gauge
        hoist_last_run_success{job="\(job)"} \(success ? 1 : 0)

        """
    }

    /// A job name as a label value (names are letters, digits, `.`, `_`, `-`; quotes dropped anyway).
    private static func label(_ job: String) -> String { job.replacingOccurrences(of: "\"", with: "") }

    /// A new temporary file beside `path` (created with `O_EXCL | O_NOFOLLOW`, so a link planted
    /// at its name is never followed), renamed over it: over a regular file or nothing only. The
    /// null device (`--metrics-file /dev/null`) means no metrics; anything else is refused.
    private static func writeAtomically(_ text: String, to path: String) throws {
        if try OutputFile.state(of: path, what: "the metrics file") == .nullDevice { return }
        let temporary = path + ".tmp.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw MetricsError(description: "cannot write the metrics file \(path): \(String(cString: strerror(errno)))")
        }
        do {
            try FileHandle(fileDescriptor: descriptor, closeOnDealloc: true).write(contentsOf: Data(text.utf8))
        } catch {
            unlink(temporary)
            throw MetricsError(description: "cannot write the metrics file \(path): \((error as NSError).localizedDescription)")
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(atPath: temporary)
            throw MetricsError(description: "cannot write the metrics file \(path): \(reason)")
        }
    }
}

struct MetricsError: Error, CustomStringConvertible {
    let description: String
}
