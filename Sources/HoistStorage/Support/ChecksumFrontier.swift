import Synchronization

/// The CRC32C of an object's bytes in order, fed as they are handed to the network. Bytes sent
/// again after a resume (below the frontier) are not counted twice; bytes the server already
/// holds but this process never read are caught up from the source.
///
/// CRC32C only: it is what the verification compares (GCS reports it for every object, composite
/// ones included, and recommends it), and on the CPU's `crc32` instruction it costs about a
/// twentieth of MD5, so it is computed where the bytes are read for sending, with no copy: on
/// the CPU worker that reads a large part ahead of its connection (`ReadAhead`), on the curl
/// engine's thread for a small one.
final class ChecksumFrontier: Sendable {
    private let state = Mutex<(counted: Int64, sums: Checksums.CRC32C)>((0, Checksums.CRC32C()))

    /// How many leading bytes are counted.
    var frontier: Int64 { state.withLock { $0.counted } }

    /// Counts the part of `bytes` (at `position` in the object) beyond the frontier.
    func add(_ bytes: UnsafeRawBufferPointer, at position: Int64) {
        state.withLock { state in
            let end = position + Int64(bytes.count)
            guard position <= state.counted, end > state.counted else { return }
            state.sums.update(UnsafeRawBufferPointer(rebasing: bytes[Int(state.counted - position)...]))
            state.counted = end
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

    /// The CRC32C, base64 as GCS writes it, of every byte counted.
    var crc32c: String { state.withLock { $0.sums.base64() } }

    /// The CRC32C of every byte counted, as a number (to combine with others').
    var crc32cValue: UInt32 { state.withLock { $0.sums.value } }
}
