import Foundation

/// `~/.aws/credentials` and `~/.aws/config` as the AWS CLI reads them: INI sections of
/// `key = value` lines; in the credentials file a profile's section is `[NAME]`, in the config
/// file `[profile NAME]` (`[default]` in both). Files are read whole up to `maxBytes`; a larger
/// one, or a line that is not a section, a comment or `key = value`, is refused with its line.
enum AWSSharedFiles {
    static let maxBytes = 256 << 10

    /// The keys of `profile` in the file at `path` (`[:]` when the file or the section is absent).
    static func section(_ profile: String, inFile path: String, isConfig: Bool) throws -> [String: String] {
        guard FileManager.default.fileExists(atPath: path) else { return [:] }
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        if let size = attributes?[.size] as? Int, size > maxBytes {
            throw StorageFailure(.invalidArgument, "\(path) is larger than \(maxBytes / 1024) KiB: not an AWS credentials or config file.")
        }
        guard let data = FileManager.default.contents(atPath: path), data.count <= maxBytes else {
            throw StorageFailure(.invalidArgument, "Cannot read \(path).")
        }
        let wanted = isConfig && profile != "default" ? "profile \(profile)" : profile
        return try parse(String(decoding: data, as: UTF8.self), path: path)[wanted] ?? [:]
    }

    /// Sections by name (inner white space made single), each its keys (lowercased) and values.
    static func parse(_ text: String, path: String) throws -> [String: [String: String]] {
        var sections: [String: [String: String]] = [:]
        var current: String?
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]") else { throw malformed(path, number) }
                current = line.dropFirst().dropLast().split(separator: " ").joined(separator: " ")
                continue
            }
            // An indented line continues a nested block (`s3 =` then `  addressing_style = path`): not read.
            if raw.first == " " || raw.first == "\t" { continue }
            guard let equals = line.firstIndex(of: "="), let section = current else { throw malformed(path, number) }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            sections[section, default: [:]][key] = value
        }
        return sections
    }

    private static func malformed(_ path: String, _ index: Int) -> StorageFailure {
        StorageFailure(.invalidArgument, "\(path):\(index + 1): not a [section] or a key = value line.")
    }
}
