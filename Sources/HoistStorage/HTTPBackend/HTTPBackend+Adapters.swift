import Foundation
import HoistHTTP

// What the backends that speak HTTP (GCS, S3) hand the engine: Backend/ does not use HoistHTTP,
// so its types meet the engine's protocols here.

/// A task's switch is what the curl engine asks between reads: pause, cancel, bandwidth credit
/// (none while the fence is closed: the transfer pauses on the wire until it opens).
extension TransferControl: TransferGate {
    public func takeCredit(_ count: Int) -> Bool { isFenceOpen && (limiter?.takeIfAvailable(count) ?? true) }
    public var hasCredit: Bool { isFenceOpen && (limiter?.hasCredit ?? true) }
}

/// A source's open file is what a request body reads.
extension OpenFile: BodyFile {}

extension ByteSource {
    /// The bytes from `offset` to the end, as an HTTP body part read while it is sent. Its
    /// content offsets (what `TransferHooks.onContentBytes` is told) are the file's or data's:
    /// less `base` for a slice's own.
    func bodyPart(from offset: Int64) -> HTTPRequest.BodyPart {
        if let file = openFile { return .file(file, offset: base + offset, length: size - offset) }
        let data = memoryData ?? Data()
        let start = data.startIndex + Int(base + offset)
        return .data(data.subdata(in: start..<start + Int(size - offset)), contentOffset: base + offset)
    }

    /// `length` bytes from `offset`, as an HTTP body part read while it is sent.
    func bodyPart(from offset: Int64, length: Int64) -> HTTPRequest.BodyPart {
        switch bodyPart(from: offset) {
        case .file(let file, let start, _): .file(file, offset: start, length: length)
        case .data(let data, _): .data(data.prefix(Int(length)), contentOffset: offset)
        }
    }
}
