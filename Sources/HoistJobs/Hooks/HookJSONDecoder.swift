import HoistLua

/// `json.decode`'s parser: JSON text straight to a `LuaValue`, each value's cost (as
/// `LuaRuntime.cost(of:)` counts it) taken from a byte allowance as it is built, so a text whose
/// value would not fit the hooks' memory limit fails partway, not after all of it was built
/// (`HostAPIAttackTests.jsonDecodeOfAHugeArrayStaysWithinTheMemoryLimit`); nesting deeper than
/// `LuaRuntime.maxDepth` fails at the first bracket too deep. RFC 8259 text, any value at the top.
struct HookJSONDecoder {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var allowance: Int
    private let limit: Int

    /// The value of `text`, which may cost at most `allowance` bytes (the memory limit is
    /// `limit`, for the message).
    static func decode(_ text: String, allowance: Int, limit: Int) throws(Failure) -> LuaValue {
        var text = text
        let result: Result<LuaValue, Failure> = text.withUTF8 { bytes in
            var decoder = HookJSONDecoder(bytes: bytes, allowance: allowance, limit: limit)
            do throws(Failure) {
                let value = try decoder.value(depth: 0)
                decoder.skipSpace()
                guard decoder.index == bytes.count else { throw decoder.invalid() }
                return .success(value)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    private init(bytes: UnsafeBufferPointer<UInt8>, allowance: Int, limit: Int) {
        self.bytes = bytes
        self.allowance = allowance
        self.limit = limit
    }

    private func invalid() -> Failure {
        Failure(description: "json.decode: not valid JSON (at byte \(min(index, bytes.count) + 1))")
    }

    private mutating func spend(_ cost: Int) throws(Failure) {
        allowance -= cost
        if allowance < 0 {
            throw Failure(description: "json.decode: the value would take more than the memory limit of \(limit) bytes")
        }
    }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipSpace() {
        while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
    }

    private mutating func expect(_ byte: UInt8) throws(Failure) {
        skipSpace()
        guard current == byte else { throw invalid() }
        index += 1
    }

    private mutating func value(depth: Int) throws(Failure) -> LuaValue {
        skipSpace()
        guard let byte = current else { throw invalid() }
        switch byte {
        case UInt8(ascii: "["), UInt8(ascii: "{"):
            guard depth < LuaRuntime.maxDepth else {
                throw Failure(description: "json.decode: nested deeper than \(LuaRuntime.maxDepth) levels")
            }
            return byte == UInt8(ascii: "[") ? try array(depth: depth + 1) : try object(depth: depth + 1)
        case UInt8(ascii: "\""):
            let text = try string()
            try spend(48 + text.utf8.count)
            return .string(text)
        case UInt8(ascii: "t"): return try literal("true", .boolean(true))
        case UInt8(ascii: "f"): return try literal("false", .boolean(false))
        case UInt8(ascii: "n"): return try literal("null", .nil)
        default: return try number()
        }
    }

    private mutating func literal(_ word: StaticString, _ value: LuaValue) throws(Failure) -> LuaValue {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count,
              hasWord(word.utf8Start, count) else { throw invalid() }
        index += count
        try spend(16)
        return value
    }

    private func hasWord(_ word: UnsafePointer<UInt8>, _ count: Int) -> Bool {
        (0..<count).allSatisfy { bytes[index + $0] == word[$0] }
    }

    private mutating func array(depth: Int) throws(Failure) -> LuaValue {
        index += 1
        try spend(64)
        var items: [LuaValue] = []
        skipSpace()
        if current == UInt8(ascii: "]") {
            index += 1
            return .array(items)
        }
        repeat {
            try spend(16)
            items.append(try value(depth: depth))
        } while try next(closing: UInt8(ascii: "]"))
        return .array(items)
    }

    /// After an element of a list: true at a comma (more follow), false at `closing` (the end).
    private mutating func next(closing: UInt8) throws(Failure) -> Bool {
        skipSpace()
        guard let byte = current, byte == closing || byte == UInt8(ascii: ",") else { throw invalid() }
        index += 1
        return byte != closing
    }

    private mutating func object(depth: Int) throws(Failure) -> LuaValue {
        index += 1
        try spend(64)
        var fields: [String: LuaValue] = [:]
        skipSpace()
        if current == UInt8(ascii: "}") {
            index += 1
            return .table(fields)
        }
        while true {
            skipSpace()
            guard current == UInt8(ascii: "\"") else { throw invalid() }
            let key = try string()
            try spend(40 + key.utf8.count)
            try expect(UInt8(ascii: ":"))
            fields[key] = try value(depth: depth)
            guard try next(closing: UInt8(ascii: "}")) else { return .table(fields) }
        }
    }

    /// A string from its opening quote: escapes decoded, a lone surrogate as U+FFFD.
    private mutating func string() throws(Failure) -> String {
        index += 1
        var scalars = String.UnicodeScalarView()
        var start = index
        while true {
            guard let byte = current else { throw invalid() }
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 {
                // The run of plain bytes before it (valid UTF-8: the text is a Swift string).
                scalars.append(contentsOf: String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self).unicodeScalars)
                guard byte >= 0x20 else { throw invalid() }
                index += 1
                if byte == UInt8(ascii: "\"") { return String(scalars) }
                scalars.append(try escape())
                start = index
            } else {
                index += 1
            }
        }
    }

    /// The character of the escape after a backslash.
    private mutating func escape() throws(Failure) -> Unicode.Scalar {
        guard let byte = current else { throw invalid() }
        index += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): return Unicode.Scalar(byte)
        case UInt8(ascii: "b"): return "\u{8}"
        case UInt8(ascii: "f"): return "\u{C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let unit = try hex4()
            if (0xD800..<0xDC00).contains(unit), index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
               bytes[index + 1] == UInt8(ascii: "u") {
                let mark = index
                index += 2
                let low = try hex4()
                if (0xDC00..<0xE000).contains(low) {
                    return Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)) ?? "\u{FFFD}"
                }
                index = mark
            }
            return Unicode.Scalar(unit) ?? "\u{FFFD}"
        default:
            index -= 1
            throw invalid()
        }
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard index + 4 <= bytes.count else { throw invalid() }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw invalid()
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    /// A number: an integer when it is one (`1`, `1.0`, `1e3`) and fits 64 bits, else a double.
    private mutating func number() throws(Failure) -> LuaValue {
        let start = index
        func digits(_ index: inout Int, _ bytes: UnsafeBufferPointer<UInt8>) -> Int {
            let first = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            return index - first
        }
        if current == UInt8(ascii: "-") { index += 1 }
        let leadingZero = current == UInt8(ascii: "0")
        let whole = digits(&index, bytes)
        guard whole > 0, !(leadingZero && whole > 1) else { throw invalid() }
        var integral = true
        if current == UInt8(ascii: ".") {
            index += 1
            integral = false
            guard digits(&index, bytes) > 0 else { throw invalid() }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            index += 1
            integral = false
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard digits(&index, bytes) > 0 else { throw invalid() }
        }
        try spend(16)
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if integral, let exact = Int64(text) { return .integer(exact) }
        guard let number = Double(text) else { throw invalid() }
        if number == number.rounded(), let exact = Int64(exactly: number) { return .integer(exact) }
        return .number(number)
    }
}
