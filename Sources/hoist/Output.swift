import Foundation
import HoistStorage

/// One JSON object per line, for `--json`.
enum JSONLine {
    static func encode(_ fields: [String: any Sendable]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    static func success(file: String, object: String, size: Int64) -> String {
        encode(["event": "success", "file": file, "object": object, "size": size])
    }

    static func failure(file: String, object: String, code: StorageErrorCode, message: String) -> String {
        encode(["event": "failure", "file": file, "object": object, "code": code.name, "rawValue": code.rawValue,
                "message": message])
    }
}

/// The end of a run: counts, bytes, time and the process's peak memory.
struct Summary {
    let files: Int
    let failed: Int
    let bytes: Int64
    let seconds: Double

    /// The most memory this process held at once, in bytes (getrusage's ru_maxrss).
    static var peakResidentBytes: Int64 {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Int64(usage.ru_maxrss) * 1024
    }

    var line: String {
        let rate = seconds > 0 ? Double(bytes) / seconds / 1_048_576 : 0
        return "\(files - failed) of \(files) files uploaded, \(bytes) bytes in \(String(format: "%.2f", seconds)) s (\(String(format: "%.1f", rate)) MiB/s)"
    }

    var json: String {
        JSONLine.encode(["event": "summary", "files": files, "failed": failed, "bytes": bytes,
                         "seconds": seconds, "peakRSSBytes": Summary.peakResidentBytes])
    }
}
