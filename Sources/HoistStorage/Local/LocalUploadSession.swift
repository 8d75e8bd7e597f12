import Foundation

/// An upload into a local bucket: bytes are checksummed as they are written, to an unnamed file
/// in `uploads/` for a small upload just started, to `uploads/<id>.part` for a large or resumed
/// one; the commit links or renames them into place.
actor LocalUploadSession: UploadSession {
    nonisolated let id: String
    /// The object this session stores.
    nonisolated var objectPath: String { descriptor.path }
    private let bucket: LocalBucket
    nonisolated private let descriptor: LocalSessionDescriptor
    private let partFile: String
    private let descriptorFile: String
    private var checksums = Checksums()
    private var written: Int64 = 0
    private var finished = false
    /// The bytes an earlier process wrote, with their checksums: compared with the local file
    /// before this process adds to them.
    private var earlier: (length: Int64, md5: String, crc32c: String)?
    /// A small upload just started writes to an unnamed file, open from its first piece until
    /// its commit or `abandon`: a killed process leaves nothing behind, and no folder entry is
    /// made and removed per object.
    private let mayBeUnnamed: Bool
    private var unnamed: Int32 = -1

    /// A large upload's part file and descriptor stay in `uploads/` for a later process (a small
    /// one's unnamed file goes with this one).
    nonisolated var continuesLater: Bool { descriptor.size > LocalBucket.sessionFileThreshold }

    /// Bytes copied per piece: the most a pause or cancel waits for.
    static let pieceSize = 1 << 20

    /// - Parameter fresh: a session just started, with no part file yet (nothing to read back).
    init(bucket: LocalBucket, id: String, descriptor: LocalSessionDescriptor, fresh: Bool = false) throws {
        self.id = id
        self.bucket = bucket
        self.descriptor = descriptor
        partFile = bucket.uploadsPath + "/\(id).part"
        descriptorFile = bucket.uploadsPath + "/\(id).json"
        mayBeUnnamed = fresh && descriptor.size <= LocalBucket.sessionFileThreshold
        if fresh { return }
        // The part file is opened where it is, never through a link put in its place.
        let made = open(partFile, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o644)
        guard made >= 0 else {
            throw LocalBucket.ioError(LocalBucket.lastError, doing: "opening upload \(id)'s part file \(partFile)")
        }
        close(made)
        // Bytes kept from an earlier process: checksum them again so the digest covers the whole object.
        let existing = try ByteSource(regularFileAt: partFile)
        if existing.size > 0 {
            let reader = try existing.reader(from: 0)
            var piece = try reader.read(upTo: Self.pieceSize)
            while !piece.isEmpty {
                checksums.update(piece)
                piece = try reader.read(upTo: Self.pieceSize)
            }
            written = reader.offset
            earlier = (written, checksums.md5Base64(), checksums.crc32cBase64())
        }
    }

    deinit {
        if unnamed >= 0 { close(unnamed) }
    }

    func confirmedOffset() async throws -> Int64 { written }

    func send(
        from source: ByteSource, at offset: Int64, control: TransferControl,
        progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> SendOutcome {
        guard offset == written else {
            throw StorageFailure(.internalError, "Upload session \(id) holds \(written) bytes; cannot continue from \(offset).")
        }
        guard source.size == descriptor.size else {
            throw StorageFailure(
                .invalidArgument, "The source has \(source.size) bytes; session \(id) was started for \(descriptor.size).")
        }
        if let earlier {
            self.earlier = nil
            try checkEarlierBytes(earlier, against: source)
        }
        let reader = try source.reader(from: offset)
        let output = try openOutput()
        let ownsOutput = output != unnamed   // the unnamed file stays open until the commit or abandon
        defer { if ownsOutput { close(output) } }

        while written < descriptor.size {
            try await control.checkpoint()
            let want = min(Self.pieceSize, Int(control.chunkSize ?? Int64(Self.pieceSize)), Int(descriptor.size - written))
            try await control.throttle(want)
            let piece = try reader.read(upTo: want)
            guard !piece.isEmpty else {
                throw StorageFailure(
                    .invalidArgument, "\(source.filePath ?? "The source") shrank while uploading: \(written) of \(descriptor.size) bytes read.")
            }
            do {
                try LocalBucket.writeAll(piece, to: output)
            } catch {
                throw LocalBucket.ioError(error, doing: "writing upload \(id)")
            }
            checksums.update(piece)
            written += Int64(piece.count)
            progress(written)
        }
        // The object replaces whatever the path held: not when the file changed while it was read.
        if let change = source.unchangedOrWhy() {
            throw StorageFailure(.invalidArgument, change, details: ["file": source.filePath ?? "", "object": descriptor.path])
        }
        try await control.commitCheckpoint()
        if bucket.syncsEachObject {
            guard fsync(output) == 0 else {
                throw LocalBucket.ioError(LocalBucket.lastError, doing: "writing upload \(id)")
            }
        }
        let resource = try bucket.commit(
            unnamed >= 0 ? .unnamed(unnamed, spare: partFile) : .named(partFile, descriptor: output), path: descriptor.path,
            attributes: descriptor.attributes, size: written, md5Hash: checksums.md5Base64(), crc32c: checksums.crc32cBase64())
        finished = true
        if unnamed >= 0 {
            close(unnamed)
            unnamed = -1
        }
        if descriptor.size > LocalBucket.sessionFileThreshold { unlink(descriptorFile) }
        return .finished(resource)
    }

    func abandon() async {
        discard()
    }

    /// The file the next bytes go to, at offset `written`: the unnamed file (opened on the first
    /// piece of a small upload where the file system has them), or the part file.
    private func openOutput() throws -> Int32 {
        var atStart = false   // a file just made: no seek to offset 0
        if unnamed < 0, mayBeUnnamed, written == 0, let descriptor = try bucket.openUnnamedFile() {
            unnamed = descriptor
            atStart = true
        }
        let output = unnamed >= 0 ? unnamed : open(partFile, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o644)
        var info = stat()
        if output >= 0, output != unnamed, fstat(output, &info) != 0 || (info.st_mode & S_IFMT) != S_IFREG {
            close(output)   // a FIFO or a device put at the part file's name: written only as a regular file
            throw LocalBucket.ioError(POSIXError(.EINVAL), doing: "writing upload \(id): its part file \(partFile) is \(OutputFile.kind(info.st_mode))")
        }
        guard output >= 0, atStart || lseek(output, off_t(written), SEEK_SET) == off_t(written) else {
            let error = LocalBucket.lastError
            if output >= 0, output != unnamed { close(output) }
            throw LocalBucket.ioError(error, doing: "writing upload \(id)")
        }
        return output
    }

    private func discard() {
        guard !finished else { return }
        if unnamed >= 0 {
            close(unnamed)
            unnamed = -1
        }
        unlink(partFile)
        unlink(descriptorFile)
    }

    /// The part file's bytes from an earlier process must be the local file's first bytes; when
    /// they are not (the file changed between runs), the session is discarded and the upload
    /// starts again from zero.
    private func checkEarlierBytes(_ earlier: (length: Int64, md5: String, crc32c: String), against source: ByteSource) throws {
        var local = Checksums()
        let reader = try source.reader(from: 0)
        while reader.offset < earlier.length {
            let piece = try reader.read(upTo: min(Self.pieceSize, Int(earlier.length - reader.offset)))
            if piece.isEmpty { break }
            local.update(piece)
        }
        guard reader.offset != earlier.length || local.md5Base64() != earlier.md5 || local.crc32cBase64() != earlier.crc32c
        else { return }
        discard()
        throw StorageFailure(
            .nonMatchingChecksum,
            "The \(earlier.length) bytes an earlier run stored for \(descriptor.path) differ from the local file; "
                + "the session was discarded; retry the upload.",
            details: ["object": descriptor.path, "session": id])
    }
}
