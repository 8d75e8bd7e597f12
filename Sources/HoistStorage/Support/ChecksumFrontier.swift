import Foundation

/// The checksums of an object's bytes in order, fed as they are sent. Bytes sent again after a
/// resume (below the frontier) are not counted twice; bytes the server already holds but this
/// process never read are caught up from the source.
///
/// The first `inlineLimit` bytes are hashed where they are handed in. Past that (a large
/// object), a copy of each piece is queued and hashed in order on a worker thread, pipelined
/// with the transfer: the curl engine's thread, which feeds `add`, then only copies, and MD5 no
/// longer competes with TLS on it. The bytes hashed are still exactly the bytes handed to the
/// network; `digests` waits for the queue to drain, so a verification sees every byte. At most
/// `maxQueued` bytes wait: a caller adding more blocks until the worker catches up.
final class ChecksumFrontier: @unchecked Sendable {
    // Everything below is guarded by `condition`. While `worker` is true, inline hashing stops:
    // the worker hashes a copy of `sums` outside the lock and writes it back after each batch.
    private let condition = NSCondition()
    private var sums = Checksums()
    private var counted: Int64 = 0
    private var queue: [Data] = []
    private var queuedBytes = 0
    /// A worker thread exists (it lingers a moment when the queue is empty, then ends).
    private var worker = false
    /// Bytes are queued or being hashed: `sums` is not yet final.
    private var busy = false
    private let inlineLimit: Int64
    private let maxQueued: Int

    /// - Parameters:
    ///   - inlineLimit: bytes (from the object's start) hashed on the caller's thread; beyond, on
    ///     the worker. Small objects never start one.
    ///   - maxQueued: the most bytes copied and waiting for the worker.
    init(inlineLimit: Int64 = 1 << 20, maxQueued: Int = 8 << 20) {
        self.inlineLimit = inlineLimit
        self.maxQueued = maxQueued
    }

    /// How many leading bytes are counted (hashed, or queued to be).
    var frontier: Int64 {
        condition.lock()
        defer { condition.unlock() }
        return counted
    }

    /// Counts the part of `bytes` (at `position` in the object) beyond the frontier.
    func add(_ bytes: UnsafeRawBufferPointer, at position: Int64) {
        condition.lock()
        defer { condition.unlock() }
        let end = position + Int64(bytes.count)
        guard position <= counted, end > counted else { return }
        let piece = UnsafeRawBufferPointer(rebasing: bytes[Int(counted - position)...])
        counted = end
        if !worker, end <= inlineLimit {
            sums.update(piece)
            return
        }
        while queuedBytes > 0, queuedBytes + piece.count > maxQueued { condition.wait() }
        queue.append(Data(piece))
        queuedBytes += piece.count
        busy = true
        if worker {
            condition.broadcast()
        } else {
            worker = true
            let thread = Thread { [self] in drain() }
            thread.name = "hoist.checksum"
            thread.start()
        }
    }

    /// The worker: hashes queued pieces in order; ends after a moment with nothing queued.
    private func drain() {
        condition.lock()
        while true {
            if queue.isEmpty {
                busy = false
                condition.broadcast()
                _ = condition.wait(until: Date(timeIntervalSinceNow: 0.2))
                if queue.isEmpty { break }
                continue
            }
            let batch = queue
            queue.removeAll(keepingCapacity: true)
            var local = sums
            condition.unlock()
            var done = 0
            for piece in batch {
                piece.withUnsafeBytes { local.update($0) }
                done += piece.count
            }
            condition.lock()
            sums = local
            queuedBytes -= done
            condition.broadcast()
        }
        worker = false
        condition.unlock()
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

    /// The MD5 and CRC32C, base64 as GCS writes them, of every byte counted (waits for the worker).
    var digests: (md5: String, crc32c: String) {
        condition.lock()
        defer { condition.unlock() }
        while busy { condition.wait() }
        return (sums.md5Base64(), sums.crc32cBase64())
    }
}
