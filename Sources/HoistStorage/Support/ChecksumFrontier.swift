import Foundation
import Synchronization

/// The checksums of an object's bytes in order, fed as they are sent. Bytes sent again after a
/// resume (below the frontier) are not counted twice; bytes the server already holds but this
/// process never read are caught up from the source.
final class ChecksumFrontier: Sendable {
    private struct State {
        var sums = Checksums()
        var frontier: Int64 = 0
    }
    private let state = Mutex(State())

    /// How many leading bytes are counted.
    var frontier: Int64 { state.withLock { $0.frontier } }

    /// Counts the part of `bytes` (at `position` in the object) beyond the frontier.
    func add(_ bytes: UnsafeRawBufferPointer, at position: Int64) {
        state.withLock { state in
            let end = position + Int64(bytes.count)
            guard position <= state.frontier, end > state.frontier else { return }
            let skip = Int(state.frontier - position)
            state.sums.update(UnsafeRawBufferPointer(rebasing: bytes[skip...]))
            state.frontier = end
        }
    }

    /// Reads `source` from the frontier up to `offset` and counts it.
    func catchUp(to offset: Int64, from source: ByteSource) throws {
        let start = frontier
        guard offset > start else { return }
        let reader = try source.reader(from: start)
        var position = start
        while position < offset {
            let piece = try reader.read(upTo: Int(min(Int64(1 << 20), offset - position)))
            guard !piece.isEmpty else { break }
            piece.withUnsafeBytes { add($0, at: position) }
            position += Int64(piece.count)
        }
    }

    /// The MD5 and CRC32C, base64 as GCS writes them.
    var digests: (md5: String, crc32c: String) {
        state.withLock { ($0.sums.md5Base64(), $0.sums.crc32cBase64()) }
    }
}
