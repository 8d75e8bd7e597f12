import Foundation

/// Reads a scalar and parses it, or throws a located `DecodingError` with `problem`'s message.
package func parseScalar<T>(_ decoder: any Decoder, _ parse: (String) throws(ValueError) -> T) throws -> T {
    let container = try decoder.singleValueContainer()
    let text = try container.decode(String.self)
    do {
        return try parse(text)
    } catch {
        throw DecodingError.dataCorruptedError(in: container, debugDescription: error.message)
    }
}

/// Why a value in a manifest does not parse, or a template cannot be filled.
public struct ValueError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
