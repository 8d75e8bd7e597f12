import Foundation
import HoistHTTP
import HoistStorage

/// The one way a run removes anything: a file `move` removes, a folder `removeEmptyFolders`
/// removes, an object `mirror` deletes. Each removal comes with the evidence that justifies it,
/// checked at the moment of the removal; nothing remembered or told (a journal row, a listing, an
/// empty folder, a missing value in an answer) is enough alone. `ConcreteNamesTests` keeps every
/// unlink, folder removal and object delete of `HoistJobs` in this file.
enum RemovalGate {
    /// Why `move` may remove a file: checked again by `removeFile` when it happens.
    enum FileEvidence: Sendable, Equatable {
        /// This run read the file and stored exactly those bytes: the upload's checksums of the
        /// bytes read equal the verified object's (the upload succeeded only so).
        case uploaded
        /// Skipped as unchanged: the object, read now, holds the checksum of the file as hashed now.
        case storedNow

        /// As the `remove` event and `on_remove` name it.
        var name: String {
            switch self {
            case .uploaded: "uploaded"
            case .storedNow: "verified"
            }
        }
    }

    /// Removes `item`'s file through `root` only while it is still the file that was read or
    /// hashed: same device, inode, size, mtime and ctime (a content written and its mtime set
    /// back moves the ctime on), located beneath the root with no link followed.
    static func removeFile(_ item: PlanItem, from root: RootFolder) -> RootFolder.Removal {
        let file = item.file
        let identity = RootFolder.Identity(device: file.device, inode: file.inode, size: file.size,
                                                      mtime: file.modified.timeIntervalSince1970, ctimeNanoseconds: file.changedNanoseconds)
        return root.remove(file.relativePath, ifStill: identity)
    }

    /// Removes the folder at `relative` below `root` if it is empty (an `rmdir`, which a file
    /// put there since makes fail): never the root, never through a link.
    static func removeEmptyFolder(_ relative: String, from root: RootFolder) -> Bool {
        root.removeEmptyFolder(relative)
    }

    /// Whether `key` may be a mirror's to delete for a file set whose destination is `template`
    /// under `prefix`: byte for byte below the prefix (no canonical equivalence: the NFD form of
    /// the prefix is another name), no empty, `.` or `..` segment (a server or a proxy would
    /// resolve `site/../victim.txt` outside it), not a folder marker (`dir/`), a name the
    /// template could have made from a relative path, and under none of `others`, the prefixes
    /// of the job's other file sets that lie below this one.
    static func isMirrorCandidate(_ key: String, prefix: String, template: Template, others: [String]) -> Bool {
        MirrorCandidates(prefix: prefix, template: template, others: others).contains(key)
    }

    /// `isMirrorCandidate` for one file set, its template's shape worked out once (a mirror asks
    /// it once per journal row and listed key).
    struct MirrorCandidates {
        let prefix: String
        let template: Template
        let others: [String]
        /// `PREFIX{relpath}`: any key longer than the prefix is one it makes (no matching needed).
        let prefixThenRelativePath: Bool

        init(prefix: String, template: Template, others: [String]) {
            self.prefix = prefix
            self.template = template
            self.others = others
            prefixThenRelativePath = template.isPrefixThenRelativePath
        }

        /// File set `index`'s: under its destination's fixed prefix, made by its template, and
        /// under none of the job's other sets' fixed prefixes that lie below it (or equal it):
        /// their objects are theirs.
        init(set index: Int, of sets: [FileSet]) {
            let prefix = sets[index].destination.literalPrefix
            let others = sets.enumerated().compactMap { other, set in
                other != index && set.destination.literalPrefix.hasPrefixBytewise(prefix) ? set.destination.literalPrefix : nil
            }
            self.init(prefix: prefix, template: sets[index].destination, others: others)
        }

        func contains(_ key: String) -> Bool {
            guard key.hasPrefixBytewise(prefix), RemovalGate.hasOnlyNamedSegments(key) else { return false }
            if !others.isEmpty, others.contains(where: { key.hasPrefixBytewise($0) }) { return false }
            return prefixThenRelativePath ? key.utf8.count > prefix.utf8.count : template.couldMake(key)
        }
    }

    /// Whether every `/`-separated segment of `key` is a name: not empty (no leading, trailing
    /// or doubled `/`), not `.` nor `..`. One pass over the bytes, nothing allocated.
    static func hasOnlyNamedSegments(_ key: String) -> Bool {
        let bytes = key.utf8Span.span
        guard !bytes.isEmpty else { return false }
        var length = 0   // of the segment so far
        var dots = 0     // how many of its bytes are dots
        for index in bytes.indices {
            let byte = bytes[index]
            if byte == UInt8(ascii: "/") {
                guard length > 0, !(length <= 2 && dots == length) else { return false }
                length = 0
                dots = 0
            } else {
                length += 1
                if byte == UInt8(ascii: ".") { dots += 1 }
            }
        }
        return length > 0 && !(length <= 2 && dots == length)
    }

    /// Deletes a mirror's object only while it is still the generation found, its key still a
    /// candidate, and (for an object the journal knows) its file still gone, all checked now.
    static func deleteObject(_ deletion: Deletion, runner: JobRunner) async throws -> DeleteOutcome? {
        let sets = runner.job.manifest.files
        guard sets.indices.contains(deletion.fileSetIndex),
              MirrorCandidates(set: deletion.fileSetIndex, of: sets).contains(deletion.object) else { return nil }
        if let source = deletion.source, !isNothingAt(source) { return nil }
        return try await runner.storage.reference(withPath: deletion.object).delete(ifGeneration: deletion.generation)
    }

    /// Ends the unfinished upload session `id` an earlier run began for `item`'s object, whose
    /// file changed since (its journal row named it: the job's own), only while the server still
    /// has it (a status query first). The object's path when it was ended, else nil.
    static func abortReplacedSession(_ id: String, of item: PlanItem, runner: JobRunner) async -> String? {
        let path = runner.storage.reference(withPath: item.destination).fullPath
        guard let session = try? await runner.storage.backend.resumeUpload(id: id, for: path),
              (try? await session.confirmedOffset()) != nil else { return nil }
        await session.abandon()
        return path
    }

    /// Ends the unfinished uploads over `age` old that the job's journal records as its own
    /// (never another application's upload under the same prefix): the keys ended, or nil.
    static func abortStaleUploads(olderThan age: TimeInterval, runner: JobRunner) async -> [String]? {
        guard runner.storage.backend.capabilities.leavesStaleUploads, let ours = try? runner.journal?.unfinishedSessions(), !ours.isEmpty else { return nil }
        return try? await runner.storage.backend.endStaleUploads(olderThan: age, startedBy: ours)
    }

    /// Whether the object `item` goes to holds the file's bytes now, for a file `move` would
    /// remove without uploading it (skipped as unchanged): the object is read now (stat, HEAD,
    /// GET metadata) and the file hashed now, and its size and CRC32C (else MD5) must agree. A
    /// bucket whose objects are local files (`file:`) has its object's bytes hashed, not the
    /// checksums recorded beside them. A compressed file is never proven so (what its object
    /// was made from is known only to the journal, which says what to check, never that the
    /// check is done): it is uploaded again. Nil when proven, else why not.
    static func unprovenStored(_ item: PlanItem, runner: JobRunner) async -> String? {
        if item.compression != nil { return "a compressed object cannot be compared with the file without its journal's word" }
        let reference = runner.storage.reference(withPath: item.destination)
        let stored: StorageMetadata
        do {
            stored = try await reference.getMetadata()
        } catch StorageError.objectNotFound {
            return "its object '\(printable(item.destination))' is no longer in the bucket"
        } catch {
            return "its object could not be read to prove it holds the file (\(describe(error)))"
        }
        let followingLinks = runner.job.followsLinks(at: item.file.path, inSet: item.fileSetIndex)
        let file: (crc32c: String, md5: String, size: Int64)
        do { file = try ByteSource.contentDigests(ofFileAt: item.file.path, followingLinks: followingLinks) } catch {
            return "it could not be read to prove its object holds it (\(describe(error)))"
        }
        guard file.size == item.file.size else { return "it changed since the walk found it" }
        guard stored.size == file.size else { return "its object holds \(stored.size) bytes, the file \(file.size)" }
        if let url = try? await reference.downloadURL(), url.isFileURL {
            // A local bucket: its metadata says what was stored, the object's bytes what is there.
            guard let object = try? ByteSource.contentDigests(ofFileAt: url.path, followingLinks: false) else {
                return "its object could not be read to prove it holds the file"
            }
            return object.crc32c == file.crc32c && object.size == file.size ? nil : "its object holds other bytes"
        }
        if let crc = stored.resource.crc32c { return crc == file.crc32c ? nil : "its object holds other bytes (CRC32C)" }
        if let md5 = stored.md5Hash { return md5 == file.md5 ? nil : "its object holds other bytes (MD5)" }
        return "its object's description has no checksum to compare with the file's"
    }
}
