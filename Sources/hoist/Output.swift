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

    /// The most memory this process held at once, in bytes: `VmHWM` of /proc/self/status.
    /// (getrusage's ru_maxrss is no good here: Linux carries it across exec, so a child
    /// started by a big process reports its parent's size.)
    static var peakResidentBytes: Int64 {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kib = Int64(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kib * 1024
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
