import Foundation
import Synchronization

/// A file part of a request body read ahead of its connection, on the CPU workers
/// (`CPUWorkers.shared`): double buffering. A worker reads the next piece (`pieceSize`) while
/// curl sends the one before, and shows it to `onContentBytes` (the hashes) as it is read, so the
/// engine's thread only copies filled pieces into curl's buffer, or pauses the transfer on the
/// wire when the next piece is not there yet (`CURL_READFUNC_PAUSE`) and continues it when the
/// worker says it is (a wakeup of the engine). At most `pieces` pieces are held (filled or being
/// filled): 512 KiB per transfer. Pieces are read one after the other, never two at once, so the
/// hashes see the bytes in order; a request sent again from an offset (`restart(at:)`) drops
/// what was read ahead, and a piece a worker was reading for the old position is thrown away.
final class ReadAhead: Sendable {
    static let pieceSize = 256 << 10
    static let pieces = 2

    private let file: any BodyFile
    /// Where the part ends in the file.
    private let end: Int64
    private let onContentBytes: (@Sendable (UnsafeRawBufferPointer, Int64) -> Void)?
    /// Called on a worker when a piece is ready that a paused transfer waits for.
    private let wake: @Sendable () -> Void
    private let workers: CPUWorkers

    private struct Piece {
        let data: Data
        /// Where it starts in the file.
        let offset: Int64
        /// What the read gave when it gave less than the piece (-errno or the count): the file
        /// changed or failed there.
        let failure: Int?
    }

    private struct State {
        /// Filled pieces, in file order; the first is being handed out.
        var pieces: [Piece] = []
        /// Bytes of the first piece already handed out.
        var consumed = 0
        /// Where the next piece is read from.
        var next: Int64
        var filling = false
        /// Counts restarts: a piece read for an earlier position is dropped.
        var generation = 0
        var closed = false
        /// The engine paused its transfer waiting for a piece.
        var waiting = false
    }
    private let state: Mutex<State>

    /// Starts reading the part of `file` from `offset` to `end` at once.
    init(file: any BodyFile, from offset: Int64, to end: Int64, workers: CPUWorkers,
         onContentBytes: (@Sendable (UnsafeRawBufferPointer, Int64) -> Void)?, wake: @escaping @Sendable () -> Void) {
        self.file = file
        self.end = end
        self.workers = workers
        self.onContentBytes = onContentBytes
        self.wake = wake
        state = Mutex(State(next: offset))
        fillIfRoom()
    }

    /// What `take` did.
    enum Taken {
        /// This many bytes were copied.
        case copied(Int)
        /// The piece at that offset is not read yet: the transfer waits (a wake comes when it is).
        case notReady
        /// The file gave this (`BodyFile.read`'s count or -errno) where the piece should be.
        case failed(Int)
    }

    /// Whether bytes are ready to hand out (the engine continues a transfer paused for them).
    var hasBytes: Bool { state.withLock { !$0.pieces.isEmpty } }

    /// Whether bytes are ready; if not, the worker that reads them wakes the engine.
    func isReadyElseWait() -> Bool {
        state.withLock { state in
            if state.pieces.isEmpty { state.waiting = true }
            return !state.pieces.isEmpty
        }
    }

    /// Copies the bytes at `position` in the file into `target`, as many as the first filled
    /// piece holds (on the engine's thread).
    func take(into target: UnsafeMutableRawBufferPointer, at position: Int64) -> Taken {
        let head = state.withLock { state -> (Piece, Int)? in
            guard let first = state.pieces.first else {
                state.waiting = true
                return nil
            }
            return (first, state.consumed)
        }
        guard let (piece, consumed) = head else { return .notReady }
        guard piece.offset + Int64(consumed) == position else {
            restart(at: position)
            return take(into: target, at: position)
        }
        if let failure = piece.failure { return .failed(failure) }
        let count = min(target.count, piece.data.count - consumed)
        piece.data.withUnsafeBytes { target.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[consumed..<consumed + count])) }
        let emptied = state.withLock { state -> Bool in
            state.consumed += count
            guard state.consumed == piece.data.count else { return false }
            state.pieces.removeFirst()
            state.consumed = 0
            return true
        }
        if emptied { fillIfRoom() }
        return .copied(count)
    }

    /// Reads from `position` on, dropping what was read ahead (a request sent again).
    func restart(at position: Int64) {
        state.withLock { state in
            state.pieces.removeAll()
            state.consumed = 0
            state.next = position
            state.generation += 1
            state.filling = false
        }
        fillIfRoom()
    }

    /// Reads nothing more; a piece being read is dropped when it ends.
    func close() {
        state.withLock { state in
            state.closed = true
            state.pieces.removeAll()
        }
    }

    private func fillIfRoom() {
        let job = state.withLock { state -> (generation: Int, offset: Int64, count: Int)? in
            guard !state.closed, !state.filling, state.pieces.count < Self.pieces, state.next < end else { return nil }
            state.filling = true
            return (state.generation, state.next, Int(min(Int64(Self.pieceSize), end - state.next)))
        }
        guard let job else { return }
        workers.start { [self] in fill(generation: job.generation, offset: job.offset, count: job.count) }
    }

    /// On a worker: reads one piece and shows it to the hashes.
    private func fill(generation: Int, offset: Int64, count: Int) {
        var data = Data(count: count)
        let got = data.withUnsafeMutableBytes { file.read(into: $0, at: offset) }
        let failure = got == count ? nil : got
        if failure == nil, let onContentBytes { data.withUnsafeBytes { onContentBytes($0, offset) } }
        let waiting = state.withLock { state -> Bool? in
            guard generation == state.generation, !state.closed else { return nil }
            state.filling = false
            state.pieces.append(Piece(data: data, offset: offset, failure: failure))
            state.next = offset + Int64(count)
            defer { state.waiting = false }
            return state.waiting
        }
        guard let waiting else { return }
        if waiting { wake() }
        if failure == nil { fillIfRoom() }
    }
}
