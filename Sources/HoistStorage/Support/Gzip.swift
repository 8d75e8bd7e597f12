import Foundation
private import CHoistGzip
private import CHoistSystem

/// A gzip stream on the system's zlib (`CHoistGzip`): deterministic, so the same bytes at the
/// same level compress to the same stream every time (no time, no name, a fixed OS byte in the
/// header), which is what lets a resumed upload of a compressed file continue from the server's
/// offset: compressing it again gives the bytes the server already holds.
final class GzipStream {
    private let handle: OpaquePointer
    /// Where zlib writes, reused for every call.
    private var output: [UInt8]

    /// A stream at `level` (1-9) that hands out its output `outputSize` bytes at a time at most
    /// (a small file's stream needs no large buffer); nil for another level.
    init?(level: Int, outputSize: Int = 256 << 10) {
        guard let handle = hoist_gzip_new(Int32(level)) else { return nil }
        self.handle = handle
        output = [UInt8](repeating: 0, count: max(1 << 10, outputSize))
    }

    deinit { hoist_gzip_free(handle) }

    /// Compresses `input` (the stream's last piece when `finish`), handing each piece of output
    /// to `emit` as it is made.
    func compress(_ input: Data, finish: Bool, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        try input.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            var offset = 0
            while true {
                var consumed = 0
                var produced = 0
                let result = output.withUnsafeMutableBytes { out in
                    hoist_gzip_deflate(handle, bytes.baseAddress.map { $0 + offset }, bytes.count - offset, &consumed,
                                       out.baseAddress, out.count, &produced, finish ? 1 : 0)
                }
                offset += consumed
                if produced > 0 { try output.withUnsafeBytes { try emit(UnsafeRawBufferPointer(rebasing: $0[..<produced])) } }
                guard result >= 0 else { throw StorageFailure(.internalError, "zlib failed to compress (deflate returned an error).") }
                if result == 1 { return }
                // Without `finish`, done once every byte is taken and zlib had room to spare.
                if !finish, offset == bytes.count, produced < output.count { return }
            }
        }
    }
}

extension ByteSource {
    /// A source's gzip stream, and the CRC32C of the bytes it compresses (the file's content).
    package struct Gzipped: Sendable {
        /// The compressed bytes: what is uploaded, verified and resumed.
        package let source: ByteSource
        /// Base64 of the big-endian CRC32C of the uncompressed bytes, as GCS writes checksums.
        package let contentCRC32C: String
    }

    /// Sources up to this size are compressed in memory (a run holds at most one per upload in
    /// flight); larger ones into an unnamed temporary file, so no whole file sits in memory.
    package static let gzipInMemoryLimit: Int64 = 1 << 20

    /// Compresses the source, read 1 MiB at a time, at `level`: into memory when it is small,
    /// else into an unnamed file (`O_TMPFILE`) in `temporaryFolder`, gone when the upload lets
    /// it go (or its process dies). The result knows its size before a byte is sent, so every
    /// backend sends, resumes and verifies it as any file: its checksums are the compressed
    /// bytes', and whether the file changed while it was read is still asked of the file.
    /// - Throws: `StorageFailure` when the file cannot be read or the temporary file written.
    package func gzipped(level: Int, temporaryFolder: String) throws -> Gzipped {
        guard let stream = GzipStream(level: level, outputSize: Int(min(256 << 10, size / 2))) else {
            throw StorageFailure(.invalidArgument, "gzip level \(level) is out of range 1-9.")
        }
        let name = filePath ?? "data"
        let sink = size <= Self.gzipInMemoryLimit ? GzipSink.memory : try GzipSink.temporaryFile(in: temporaryFolder, for: name)
        let reader = try reader(from: 0)
        var crc = Checksums.CRC32C()
        while true {
            let piece = try reader.read(upTo: 1 << 20)
            piece.withUnsafeBytes { crc.update($0) }
            let last = piece.isEmpty || reader.offset >= size
            try stream.compress(piece, finish: last) { try sink.write($0) }
            if last { break }
        }
        return Gzipped(source: try sink.source(compressing: self, name: name), contentCRC32C: crc.base64())
    }
}

/// Where a gzip stream goes: memory, or an unnamed temporary file.
private final class GzipSink {
    private var data = Data()
    /// The temporary file, open for writing and for reading (-1: memory).
    private let writing: Int32
    private let reading: Int32
    private let folder: String
    private var written: Int64 = 0

    static var memory: GzipSink { GzipSink(writing: -1, reading: -1, folder: "") }

    private init(writing: Int32, reading: Int32, folder: String) {
        self.writing = writing
        self.reading = reading
        self.folder = folder
    }

    deinit {
        if writing >= 0 { close(writing) }
        if reading >= 0 { close(reading) }
    }

    /// An unnamed file in `folder` (`O_TMPFILE`, read through /proc/self/fd); where the file
    /// system or the kernel has none, a named one made with `mkstemp` and removed at once.
    static func temporaryFile(in folder: String, for name: String) throws -> GzipSink {
        let unnamed = hoist_open_unnamed(folder, 0o600)
        if unnamed >= 0 {
            let reading = hoist_reopen_for_reading(unnamed)
            if reading >= 0 { return GzipSink(writing: unnamed, reading: reading, folder: folder) }
            close(unnamed)
        }
        var template = Array((folder + "/hoist-gzip-XXXXXX").utf8CString)
        let named = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard named >= 0 else {
            throw StorageFailure(.unknown, "Cannot compress \(name): no temporary file in \(folder): \(String(cString: strerror(errno))).",
                                 details: ["file": name])
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        _ = fcntl(named, F_SETFD, FD_CLOEXEC)
        return GzipSink(writing: named, reading: dup(named), folder: folder)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard writing >= 0 else { return data.append(contentsOf: bytes) }
        var done = 0
        while done < bytes.count {
            let count = pwrite(writing, bytes.baseAddress! + done, bytes.count - done, off_t(written) + off_t(done))
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                throw StorageFailure(.unknown, "Cannot write the compressed copy in \(folder): \(String(cString: strerror(errno))).")
            }
            done += count
        }
        written += Int64(done)
    }

    /// The stream as the source of an upload of `original`.
    func source(compressing original: ByteSource, name: String) throws -> ByteSource {
        guard writing >= 0 else { return ByteSource(compressed: data, of: original) }
        let copy = dup(reading)
        guard copy >= 0 else { throw StorageFailure(.unknown, "Cannot reopen the compressed copy of \(name): \(String(cString: strerror(errno))).") }
        return ByteSource(compressed: OpenFile(path: "\(name) (compressed in \(folder))", descriptor: copy), size: written, of: original)
    }
}
