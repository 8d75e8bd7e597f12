import Foundation
import HoistStorage

/// Joins a destination's segments and refuses to leave its prefix: empty and `.` segments
/// are dropped, `..` is an error.
public func normalizedObjectPath(_ path: String, checkingName: Bool = true) throws(ValueError) -> String {
    // Most destinations are normal already (one pass over the bytes, no new string).
    if isNormalObjectPath(path) {
        if checkingName, let problem = objectNameProblem(path) { throw ValueError(problem) }
        return path
    }
    var segments: [Substring] = []
    for segment in path.split(separator: "/", omittingEmptySubsequences: true) where segment != "." {
        if segment == ".." { throw ValueError("destination '\(path)' contains '..': a destination cannot leave its prefix") }
        segments.append(segment)
    }
    guard !segments.isEmpty else { throw ValueError("destination '\(path)' is empty") }
    let name = segments.joined(separator: "/")
    if checkingName, let problem = objectNameProblem(name) { throw ValueError(problem) }
    return name
}

/// True when `path` has no empty, `.` or `..` segment (and so no leading or trailing `/`).
private func isNormalObjectPath(_ path: String) -> Bool {
    var length = 0   // of the current segment
    var dots = 0     // how many of its bytes are '.'
    for byte in path.utf8 {
        if byte == UInt8(ascii: "/") {
            if length == 0 || (dots == length && length <= 2) { return false }
            length = 0
            dots = 0
        } else {
            length += 1
            if byte == UInt8(ascii: ".") { dots += 1 }
        }
    }
    return length > 0 && !(dots == length && length <= 2)
}

/// Why `name` breaks Cloud Storage's naming rules, or nil: no control characters (a NUL or a
/// newline would also make two names one file in a local bucket), at most 1024 bytes of UTF-8.
public func objectNameProblem(_ name: String) -> String? {
    if let control = name.unicodeScalars.first(where: { $0.value < 0x20 || $0.value == 0x7f }) {
        return "destination '\(name.debugDescription.dropFirst().dropLast())' contains the control character U+\(String(format: "%04X", control.value)): object names cannot hold control characters"
    }
    guard name.utf8.count <= 1024 else {
        return "destination '\(name.prefix(60))...' is \(name.utf8.count) bytes long: object names are at most 1024 bytes"
    }
    return nil
}

/// Why `value` cannot be sent as an HTTP header value or metadata (a control character, which
/// could start a header of its own), or nil when it can.
public func headerValueProblem(_ value: String) -> String? {
    guard let control = value.unicodeScalars.first(where: ObjectResource.isHeaderControlCharacter) else { return nil }
    return "contains the control character U+\(String(format: "%04X", control.value)): header values cannot hold control characters"
}
