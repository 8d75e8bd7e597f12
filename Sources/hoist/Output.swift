import Foundation
import HoistStorage

/// One JSON object per line, for `--json`.
enum JSONLine {
    static func encode(_ fields: [String: any Sendable]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

}

/// The most memory this process held at once, in bytes: `VmHWM` of /proc/self/status.
/// (getrusage's ru_maxrss is no good here: Linux carries it across exec, so a child
/// started by a big process reports its parent's size.)
func peakResidentBytes() -> Int64 {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
          let kib = Int64(line.split(separator: " ").dropFirst().first ?? "")
    else { return 0 }
    return kib * 1024
}
