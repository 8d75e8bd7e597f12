import Crypto
import Foundation
import HoistStorage

/// A fresh local bucket in its own temporary directory.
final class LocalBucketFixture {
    let directory: TemporaryDirectory
    let storage: Storage
    var bucketPath: String { directory.url.appendingPathComponent("bucket").path }

    init() throws {
        directory = try TemporaryDirectory()
        storage = Storage.storage(url: "file://" + directory.url.appendingPathComponent("bucket").path)
    }

    /// The bytes stored for `object`, read straight from the bucket's directory.
    func storedBytes(_ object: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: bucketPath).appendingPathComponent(object))
    }

    /// Every file under the bucket's directory, relative paths, sorted (Hoist's state included).
    func allFiles() -> [String] {
        let root = URL(fileURLWithPath: bucketPath)
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey]) else { return [] }
        var files: [String] = []
        for case let url as URL in walker where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
            files.append(String(url.standardizedFileURL.path.dropFirst(root.standardizedFileURL.path.count + 1)))
        }
        return files.sorted()
    }
}

/// Deterministic bytes that differ from block to block (each 64 KiB block starts with its index).
func patternData(_ count: Int, seed: UInt8 = 7) -> Data {
    let blockSize = 1 << 16
    let block = Data((0..<blockSize).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) ^ seed })
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

/// Base64 MD5, as GCS's md5Hash.
func md5Base64(_ data: Data) -> String { Data(Insecure.MD5.hash(data: data)).base64EncodedString() }

/// The directory that holds the built products (`hoist`, the test bundle).
var productsDirectory: URL {
    URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
}

/// Runs a program and returns its exit status, standard output and standard error.
func runProcess(_ executable: String, _ arguments: [String], environment: [String: String]? = nil)
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
