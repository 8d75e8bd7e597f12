import Foundation
import HoistStorage

/// `mirror:` on a file set: make its destination match its files.
public enum MirrorMode: Decodable, Sendable, Equatable {
    /// `false` (the default): nothing is ever deleted.
    case off
    /// `true`: objects this job stored earlier (the journal knows them) whose files are gone are deleted.
    case journal
    /// `listed`: also list the destination prefix and delete the objects no file of this run
    /// went to (rclone `sync`).
    case listed

    public init(from decoder: any Decoder) throws {
        self = try parseScalar(decoder, MirrorMode.parse)
    }

    public static func parse(_ text: String) throws(ValueError) -> MirrorMode {
        switch text.trimmingCharacters(in: .whitespaces) {
        case "true": .journal
        case "false": .off
        case "listed": .listed
        default: throw ValueError("bad mirror '\(text)': use true (delete the objects of files that are gone), listed (also list the destination and delete strays) or false")
        }
    }
}

/// `upload.maxDelete`: the most objects one run may delete, a count (`50`) or a percentage of
/// the mirrored file sets' objects (`10%`); past it, nothing is deleted and the run fails.
public enum DeleteLimit: Decodable, Sendable, Equatable {
    case count(Int)
    case percent(Double)

    public init(from decoder: any Decoder) throws { self = try parseScalar(decoder, DeleteLimit.parse) }

    public static func parse(_ text: String) throws(ValueError) -> DeleteLimit {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.hasSuffix("%"), let value = Double(trimmed.dropLast().trimmingCharacters(in: .whitespaces)), value.isFinite,
           (0...100).contains(value) {
            return .percent(value)
        }
        if let value = Int(trimmed), value >= 0 { return .count(value) }
        throw ValueError("bad maxDelete '\(text)': write a count (50) or a percentage of the mirrored objects (10%)")
    }

    /// The most deletions allowed among `objects` objects.
    public func allows(_ deletions: Int, of objects: Int) -> Bool {
        switch self {
        case .count(let count): deletions <= count
        case .percent(let percent): Double(deletions) <= Double(objects) * percent / 100
        }
    }

    public var description: String {
        switch self {
        case .count(let count): "\(count)"
        case .percent(let percent): percent.rounded() == percent ? "\(Int(percent))%" : "\(percent)%"
        }
    }
}

extension Template {
    /// The fixed text a destination starts with (leading `/` dropped, as object names are
    /// normalized): every object of the file set's is under it. Empty for `{relpath}`.
    public var literalPrefix: String {
        guard case .literal(let text)? = parts.first else { return "" }
        return String(text.drop { $0 == "/" })
    }

    /// Whether some file could be given the object name `name` by this template: its literal
    /// text byte for byte (a leading `/` dropped, as object names are), `{relpath}` and `{name}`
    /// as text that is not empty, `{name}`, `{stem}` and `{ext}` as text without `/`, any other
    /// placeholder as any text. What a mirror may take for its own object in a listing.
    func couldMake(_ name: String) -> Bool {
        let target = Array(name.utf8)
        var pieces: [(literal: [UInt8]?, part: Part)] = []
        for (index, part) in parts.enumerated() {
            if case .literal(let text) = part {
                let bytes = Array((index == 0 ? String(text.drop { $0 == "/" }) : text).utf8)
                if !bytes.isEmpty { pieces.append((bytes, part)) }
            } else {
                pieces.append((nil, part))
            }
        }
        // Whether pieces[p...] can make target[i...]; memoized on (p, i).
        var known: [Int: Bool] = [:]
        func match(_ p: Int, _ i: Int) -> Bool {
            if p == pieces.count { return i == target.count }
            let key = p * (target.count + 1) + i
            if let answer = known[key] { return answer }
            var answer = false
            if let literal = pieces[p].literal {
                answer = target.count - i >= literal.count && target[i..<(i + literal.count)].elementsEqual(literal)
                    && match(p + 1, i + literal.count)
            } else {
                let part = pieces[p].part
                let noSlash = part == .name || part == .stem || part == .ext
                let least = part == .relpath || part == .name ? 1 : 0
                var end = i + least
                while end <= target.count, !answer {
                    if end > i, noSlash, target[end - 1] == UInt8(ascii: "/") { break }
                    answer = match(p + 1, end)
                    end += 1
                }
            }
            known[key] = answer
            return answer
        }
        return match(0, 0)
    }

    /// Whether `{relpath}` is in it: two files of one root never share a destination.
    var hasRelativePath: Bool { parts.contains(.relpath) }

    /// `PREFIX{relpath}` (or `{relpath}`): an object's name gives back its file's relative path.
    var isPrefixThenRelativePath: Bool {
        parts == [.relpath] || (parts.count == 2 && parts[1] == .relpath && { if case .literal = parts[0] { true } else { false } }())
    }
}
