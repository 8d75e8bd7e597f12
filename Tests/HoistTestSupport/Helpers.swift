import Crypto
import Foundation
import Synchronization

/// The 64 KiB block of `patternData` for each seed asked for.
private let patternBlocks = Mutex<[UInt8: Data]>([:])

/// Deterministic bytes that differ from block to block (each 64 KiB block starts with its index).
public func patternData(_ count: Int, seed: UInt8 = 7) -> Data {
    let blockSize = 1 << 16
    // Made once a seed: a debug build takes milliseconds for it, which thousands of small files
    // a test writes added up to seconds.
    let block = patternBlocks.withLock { blocks in
        if let block = blocks[seed] { return block }
        let block = Data((0..<blockSize).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) ^ seed })
        blocks[seed] = block
        return block
    }
    var data = Data(capacity: count)
    var index: UInt64 = 0
    while data.count < count {
        var piece = block.prefix(min(blockSize, count - data.count))
        withUnsafeBytes(of: index.littleEndian) { stamp in
            for i in 0..<min(8, piece.count) { piece[piece.startIndex + i] = stamp[i] }
        }
        data.append(piece)
        index += 1
    }
    return data
}

/// Text that compresses as logs do (gzip makes it about a tenth): request lines with counters.
public func logText(_ size: Int) -> Data {
    var text = Data(capacity: size + 100)
    var line = 0
    while text.count < size {
        text.append(contentsOf: "2026-11-26T12:\(line % 60):\(line % 7)Z app[\(line % 97)] GET /api/items/\(line * 7919 % 100_003) 200 \(line % 1000)ms\n".utf8)
        line += 1
    }
    return text.prefix(size)
}

/// `gzip -dc` of `data`: what any client that decompresses an object gets.
public func gunzip(_ data: Data) throws -> Data {
    let directory = try TemporaryDirectory()
    let compressed = try directory.write("stream.gz", data)
    let plain = directory.url.appendingPathComponent("plain")
    let result = try runProcess("/bin/sh", ["-c", "gzip -dc < '\(compressed.path)' > '\(plain.path)'"])
    guard result.status == 0 else { throw TestServerError("gzip -dc failed: \(result.stderr)") }
    return try Data(contentsOf: plain)
}

/// Base64 MD5, as GCS's md5Hash.
public func md5Base64(_ data: Data) -> String { Data(Insecure.MD5.hash(data: data)).base64EncodedString() }

/// The directory that holds the built products (`hoist`, the test bundle).
public var productsDirectory: URL {
    URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
}

/// The path of the built `hoist` binary, which the command tests run.
public let hoist = productsDirectory.appendingPathComponent("hoist").path

/// A URL scheme no backend serves, nor ever will (`BackendOptionsTests.builtInCapabilities`
/// checks that no registration takes it): what tests give for "a storage URL Hoist cannot store to".
public let unservedScheme = "nosuch"

/// Runs a program and returns its exit status, standard output and standard error.
public func runProcess(_ executable: String, _ arguments: [String], environment: [String: String]? = nil)
    throws -> (status: Int32, stdout: String, stderr: String)
{
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    let stderr = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
}

/// The files process `pid` holds open under `folder`, with their sizes now. A local bucket's
/// small uploads are unnamed files (`O_TMPFILE`) opened there: their links read
/// `FOLDER/#INODE (deleted)`, and `stat` through `/proc/PID/fd/N` gives their size.
public func openFiles(of pid: Int32, under folder: String) -> [(path: String, size: Int)] {
    let descriptors = "/proc/\(pid)/fd"
    return ((try? FileManager.default.contentsOfDirectory(atPath: descriptors)) ?? []).compactMap { fd in
        guard let path = try? FileManager.default.destinationOfSymbolicLink(atPath: descriptors + "/" + fd),
              path.hasPrefix(folder + "/") else { return nil }
        var status = stat()
        guard stat(descriptors + "/" + fd, &status) == 0 else { return nil }
        return (path, Int(status.st_size))
    }
}

/// Waits (at most `seconds`) until a part file in a local bucket's `uploads` folder holds more
/// than `bytes`: an upload is under way, bytes moving.
public func waitForAPart(in uploads: URL, holdingMoreThan bytes: Int, seconds: Double = 10) {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        let parts = (try? FileManager.default.contentsOfDirectory(atPath: uploads.path))?.filter { $0.hasSuffix(".part") } ?? []
        if let part = parts.first,
           let size = try? FileManager.default.attributesOfItem(atPath: uploads.appendingPathComponent(part).path)[.size] as? Int,
           size > bytes { return }
        usleep(20_000)
    }
}

/// Waits (at most `seconds`) until process `pid` is writing an upload of more than `bytes` into
/// a local bucket's `uploads` folder: an unnamed file it holds open (a small upload's) or a part
/// file. Whether it is: a test kills or signals a run once its bytes move, not after a guessed time.
@discardableResult
public func waitForAnUpload(by pid: Int32, in uploads: URL, holdingMoreThan bytes: Int, seconds: Double = 10) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if openFiles(of: pid, under: uploads.path).contains(where: { $0.size > bytes }) { return true }
        let parts = (try? FileManager.default.contentsOfDirectory(atPath: uploads.path))?.filter { $0.hasSuffix(".part") } ?? []
        for part in parts {
            if let size = try? FileManager.default.attributesOfItem(atPath: uploads.appendingPathComponent(part).path)[.size] as? Int,
               size > bytes { return true }
        }
        usleep(20_000)
    }
    return false
}

/// A program started in the background, its standard output and error read into one text as
/// they come (so a chatty program never blocks on a full pipe).
public final class StartedProcess: @unchecked Sendable {
    public let process: Process
    private let lock = NSLock()
    private var output = Data()
    private let read = DispatchSemaphore(value: 0)

    public var pid: Int32 { process.processIdentifier }

    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        DispatchQueue.global().async { [self] in
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            lock.withLock { output = data }
            read.signal()
        }
    }

    /// Waits for its end: its exit status (the signal's number when killed) and its output.
    public func finish() -> (status: Int32, output: String) {
        process.waitUntilExit()
        read.wait()
        read.signal()
        return (process.terminationStatus, lock.withLock { String(decoding: output, as: UTF8.self) })
    }

    /// Waits up to `seconds` for its end; a process still running then is killed (SIGKILL) and
    /// `ended` is false.
    public func finish(within seconds: Double) -> (ended: Bool, status: Int32, output: String) {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        let ended = !process.isRunning
        if !ended { kill(process.processIdentifier, SIGKILL) }
        let (status, output) = finish()
        return (ended, status, output)
    }
}

/// Reads a `hoist run --json` process's output until a `progress` event shows an upload of
/// `size` bytes under way (some bytes sent, not all), or the output ends; returns what it read.
/// What a test changes "during an upload" is changed then, not after a fixed sleep.
public func readUntilUploadUnderway(_ output: FileHandle, size: Int) -> String {
    var seen = ""
    while !seen.split(separator: "\n").contains(where: { line in
        guard let event = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return false }
        let completed = event["completed"] as? Int ?? 0
        return event["event"] as? String == "progress" && completed > 0 && completed < size
    }) {
        let data = output.availableData
        if data.isEmpty { break }   // the run ended first
        seen += String(decoding: data, as: UTF8.self)
    }
    return seen
}
