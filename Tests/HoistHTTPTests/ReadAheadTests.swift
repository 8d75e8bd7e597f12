import Foundation
@testable import HoistHTTP
import HoistTestSupport
import Synchronization
import Testing

/// A large file part of a request body is read and hashed on the CPU workers, ahead of its
/// connection (`ReadAhead`): the engine's thread only copies filled pieces. Against a
/// real server that reads slowly, the body arrives whole and in order, the content hook sees
/// every byte once, in order, off the engine's thread, and a transfer paused or cancelled with a
/// piece in flight ends right: resumed, the whole body; cancelled, a cancelled error and an
/// engine that goes on.
@Suite struct ReadAheadTests {
    /// A file of `count` bytes of a pattern, opened for `pread`.
    private final class PatternFile: BodyFile {
        let path: String
        let bytes: Data
        private let descriptor: Int32

        init(_ count: Int) throws {
            bytes = Data((0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 11) })
            path = NSTemporaryDirectory() + "/hoist-read-ahead-\(UUID().uuidString)"
            try bytes.write(to: URL(fileURLWithPath: path))
            descriptor = open(path, O_RDONLY | O_CLOEXEC)
            unlink(path)
        }

        deinit { close(descriptor) }

        func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int {
            var done = 0
            while done < buffer.count {
                let got = pread(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
                if got < 0, errno == EINTR { continue }
                if got < 0 { return -Int(errno) }
                if got == 0 { break }
                done += got
            }
            return done
        }
    }

    /// What the content hook saw: the bytes in order (a byte shown again at its offset after a
    /// rewind replaces nothing), whether any came out of order, and the threads it ran on.
    private final class Seen: Sendable {
        private let state = Mutex<(bytes: Data, outOfOrder: Bool, threads: Set<String>)>((Data(), false, []))
        var bytes: Data { state.withLock { $0.bytes } }
        var outOfOrder: Bool { state.withLock { $0.outOfOrder } }
        var threads: Set<String> { state.withLock { $0.threads } }

        func add(_ piece: UnsafeRawBufferPointer, at offset: Int64) {
            let thread = ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "").trimmingCharacters(in: .newlines)
            state.withLock { state in
                state.threads.insert(thread)
                if offset == Int64(state.bytes.count) {
                    state.bytes.append(contentsOf: piece)
                } else if offset > Int64(state.bytes.count) {
                    state.outOfOrder = true
                }
            }
        }
    }

    /// A gate a test pauses, resumes and cancels, and the body bytes sent so far.
    private final class Gate: TransferGate {
        let sent = Atomic<Int64>(0)
        let paused = Atomic<Bool>(false)
        let cancelled = Atomic<Bool>(false)
        var isPaused: Bool { paused.load(ordering: .relaxed) }
        var isCancelled: Bool { cancelled.load(ordering: .relaxed) }
        func takeCredit(_ count: Int) -> Bool { true }
        var hasCredit: Bool { true }
    }

    /// A server on loopback (Python) that reads each request's body slowly (64 KiB every
    /// `delay` seconds) and answers with its length and SHA-256.
    private static func slowServer(delay: Double) throws -> ServerProcess {
        try ServerProcess(testPython, testPythonArguments + ["-c", """
            import hashlib, socket, time
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            print("ready", listener.getsockname()[1], flush=True)
            def serve(connection):
                data = b""
                while b"\\r\\n\\r\\n" not in data:
                    piece = connection.recv(65536)
                    if not piece:
                        return
                    data += piece
                head, body = data.split(b"\\r\\n\\r\\n", 1)
                length = [int(l.split(b":")[1]) for l in head.split(b"\\r\\n") if l.lower().startswith(b"content-length:")][0]
                while len(body) < length:
                    time.sleep(\(delay))
                    piece = connection.recv(65536)
                    if not piece:
                        return
                    body += piece
                answer = f"{len(body)} {hashlib.sha256(body).hexdigest()}".encode()
                connection.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: " + str(len(answer)).encode() + b"\\r\\n\\r\\n" + answer)
            while True:
                connection, _ = listener.accept()
                try:
                    serve(connection)
                except OSError:
                    pass   # a client that went away (a cancelled transfer)
                connection.close()
            """])
    }

    private func put(_ file: PatternFile, port: Int, seen: Seen, gate: Gate? = nil) -> HTTPRequest {
        HTTPRequest(method: "PUT", url: "http://127.0.0.1:\(port)/object",
                    body: [.data(Data("head".utf8), contentOffset: nil), .file(file, offset: 0, length: Int64(file.bytes.count))])
    }

    private func expectedAnswer(_ file: PatternFile) -> String {
        "\(file.bytes.count + 4) \(sha256Hex(Data("head".utf8) + file.bytes))"
    }

    @Test func aLargeFilePartArrivesWholeAndIsHashedInOrderOffTheEngineThread() async throws {
        let server = try Self.slowServer(delay: 0.001)
        let port = try server.readyPort()
        let file = try PatternFile(5 << 20 + 12_345)
        let seen = Seen()
        let answer = try await CurlEngine.shared.perform(put(file, port: port, seen: seen),
                                                         hooks: TransferHooks(onContentBytes: { seen.add($0, at: $1) }))
        #expect(answer.bodyText == expectedAnswer(file))
        #expect(!seen.outOfOrder)
        #expect(seen.bytes == file.bytes)
        #expect(seen.threads == ["hoist.cpu"], "hashed on \(seen.threads)")
    }

    /// A transfer of a `size`-byte file to a slow server, with a gate, once its first MiB went out
    /// (pieces are then in flight on the workers).
    private struct Sending {
        let server: ServerProcess
        let port: Int
        let file: PatternFile
        let seen: Seen
        let gate: Gate
        let answer: Task<HTTPResponse, any Error>
    }

    private func sending(_ size: Int) async throws -> Sending {
        let server = try Self.slowServer(delay: 0.002)
        let port = try server.readyPort()
        let file = try PatternFile(size)
        let seen = Seen()
        let gate = Gate()
        let request = put(file, port: port, seen: seen)
        let hooks = TransferHooks(onContentBytes: { seen.add($0, at: $1) }, onUploadProgress: { gate.sent.store($0, ordering: .relaxed) },
                                  control: gate)
        let answer = Task { try await CurlEngine.shared.perform(request, hooks: hooks) }
        let sending = Sending(server: server, port: port, file: file, seen: seen, gate: gate, answer: answer)
        while gate.sent.load(ordering: .relaxed) < 1 << 20 { try await Task.sleep(for: .milliseconds(5)) }
        return sending
    }

    @Test func aTransferPausedWithAPieceInFlightSendsTheWholeBodyOnceResumed() async throws {
        let sending = try await sending(4 << 20)
        sending.gate.paused.store(true, ordering: .relaxed)
        // (curl reports progress about once a second when nothing moves: the count settles first.)
        try await Task.sleep(for: .milliseconds(1500))
        let whilePaused = sending.gate.sent.load(ordering: .relaxed)
        try await Task.sleep(for: .milliseconds(1200))
        #expect(sending.gate.sent.load(ordering: .relaxed) == whilePaused, "bytes went out while paused")
        #expect(whilePaused < Int64(sending.file.bytes.count))
        sending.gate.paused.store(false, ordering: .relaxed)
        #expect(try await sending.answer.value.bodyText == expectedAnswer(sending.file))
        #expect(sending.seen.bytes == sending.file.bytes && !sending.seen.outOfOrder)
    }

    @Test func aTransferCancelledWithAPieceInFlightEndsCancelledAndTheEngineGoesOn() async throws {
        let sending = try await sending(8 << 20)
        sending.gate.cancelled.store(true, ordering: .relaxed)
        var ended: (any Error)?
        do { _ = try await sending.answer.value } catch { ended = error }
        #expect((ended as? HTTPTransportError)?.isCancelled == true, "\(String(describing: ended))")
        let port = sending.port
        // The engine and the workers go on: the next large body arrives whole.
        let next = try PatternFile(2 << 20)
        let again = try await CurlEngine.shared.perform(put(next, port: port, seen: Seen()))
        #expect(again.bodyText == expectedAnswer(next))
    }
}

private func sha256Hex(_ data: Data) -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    try? process.run()
    input.fileHandleForWriting.write(data)
    try? input.fileHandleForWriting.close()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return String(text.prefix(64))
}
