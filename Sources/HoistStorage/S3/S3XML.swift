import Foundation

/// The little of XML that S3's answers use, read without trusting them: elements, text and the
/// five predefined entities (and numeric ones). No DTD, no external entity, no namespace
/// processing; at most `maxElements` elements, `maxDepth` deep, from a body the engine already
/// bounded (`HTTPRequest.maxResponseBytes`). Anything else (a `<!DOCTYPE`, an unclosed tag) is
/// refused as not S3's.
struct S3XML {
    /// Each element that holds text: its path from the root (`ListPartsResult/Part/ETag`) and text.
    private(set) var leaves: [(path: String, text: String)] = []

    static let maxDepth = 16
    static let maxElements = 50_000

    struct Malformed: Error, CustomStringConvertible {
        let description: String
    }

    init(_ data: Data) throws {
        var stack: [String] = []
        var text = [UInt8]()
        var elements = 0
        let bytes = [UInt8](data)
        var index = 0
        while index < bytes.count {
            guard bytes[index] == UInt8(ascii: "<") else {
                text.append(bytes[index])
                index += 1
                continue
            }
            guard let close = bytes[index...].firstIndex(of: UInt8(ascii: ">")) else { throw Malformed(description: "an unclosed tag") }
            let tag = String(decoding: bytes[(index + 1)..<close], as: UTF8.self)
            index = close + 1
            if tag.hasPrefix("?") { continue }   // the XML declaration
            if tag.hasPrefix("!") { throw Malformed(description: "a declaration or comment (<!...>)") }
            if tag.hasPrefix("/") {
                let name = String(tag.dropFirst()).trimmingCharacters(in: .whitespaces)
                guard stack.last == name else { throw Malformed(description: "</\(name.prefix(40))> closes nothing open") }
                if leafOpen { leaves.append((stack.joined(separator: "/"), try Self.decode(text))) }
                stack.removeLast()
                leafOpen = false
                text.removeAll()
                continue
            }
            elements += 1
            guard elements <= Self.maxElements, stack.count < Self.maxDepth else {
                throw Malformed(description: "more than \(Self.maxElements) elements or \(Self.maxDepth) levels")
            }
            let selfClosing = tag.hasSuffix("/")
            let name = String(tag.split(whereSeparator: { $0 == " " || $0 == "/" || $0 == "\t" || $0 == "\n" }).first ?? "")
            guard !name.isEmpty else { throw Malformed(description: "an element without a name") }
            text.removeAll()
            if selfClosing {
                leaves.append(((stack + [name]).joined(separator: "/"), ""))
            } else {
                stack.append(name)
                leafOpen = true
            }
        }
        guard stack.isEmpty else { throw Malformed(description: "<\(stack.last!.prefix(40))> is never closed") }
    }

    /// True between an element's start and the next tag: its text is a leaf's.
    private var leafOpen = false

    /// Whether `leafPath` is at `path`, where a first segment `*` stands for any root element
    /// (servers name the roots of some answers differently: rclone's `InitiateMultipartUpload`
    /// is AWS's `InitiateMultipartUploadResult`).
    private static func matches(_ leafPath: Substring, _ path: String) -> Bool {
        guard path.hasPrefix("*/") else { return leafPath == path }
        guard let slash = leafPath.firstIndex(of: "/") else { return false }
        return leafPath[leafPath.index(after: slash)...] == path.dropFirst(2)
    }

    /// The root element's name, as far as an element with text shows it.
    var rootName: String? { leaves.first.map { String($0.path.prefix { $0 != "/" }) } }

    /// The text of the first element at `path`.
    func first(_ path: String) -> String? { leaves.first { Self.matches($0.path[...], path) }?.text }

    /// The texts of every element at `path`, in order.
    func all(_ path: String) -> [String] { leaves.filter { Self.matches($0.path[...], path) }.map(\.text) }

    /// Texts under each repeated element: for `ListPartsResult/Part`, one dictionary per part
    /// (`PartNumber`, `ETag`, `Size`), in order.
    func records(_ path: String) -> [[String: String]] {
        var records: [[String: String]] = []
        var current: [String: String] = [:]
        for (leafPath, text) in leaves {
            guard let slash = leafPath.lastIndex(of: "/"), Self.matches(leafPath[..<slash], path) else { continue }
            let key = String(leafPath[leafPath.index(after: slash)...])
            if current[key] != nil {
                records.append(current)
                current = [:]
            }
            current[key] = text
        }
        if !current.isEmpty { records.append(current) }
        return records
    }

    /// Text with `&lt;` `&gt;` `&amp;` `&quot;` `&apos;` and `&#N;`/`&#xN;` decoded.
    static func decode(_ bytes: [UInt8]) throws -> String {
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.contains("&") else { return text }
        var out = ""
        var rest = Substring(text)
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            guard let semi = rest[amp...].firstIndex(of: ";"), rest.distance(from: amp, to: semi) <= 10 else {
                throw Malformed(description: "a bare &")
            }
            let entity = rest[rest.index(after: amp)..<semi]
            switch entity {
            case "lt": out += "<"
            case "gt": out += ">"
            case "amp": out += "&"
            case "quot": out += "\""
            case "apos": out += "'"
            default:
                let number = entity.hasPrefix("#x") ? UInt32(entity.dropFirst(2), radix: 16)
                    : entity.hasPrefix("#") ? UInt32(entity.dropFirst()) : nil
                guard let number, let scalar = Unicode.Scalar(number) else { throw Malformed(description: "an unknown entity") }
                out.unicodeScalars.append(scalar)
            }
            rest = rest[rest.index(after: semi)...]
        }
        return out + rest
    }
}
