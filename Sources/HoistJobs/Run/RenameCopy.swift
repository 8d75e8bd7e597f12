import Foundation
import HoistHTTP
import HoistStorage

/// `hoist watch`'s renames: a file renamed within its root is stored under its new name by a
/// copy on the server from its earlier name's object, no byte sent, when that object holds the
/// file's bytes now.
extension JobRunner {
    /// Copies the object `earlier`'s file was stored as to `item`'s destination, and records
    /// `item`'s file done, when every check holds; else nothing is written and the file is
    /// uploaded (nil). What is read back is hostile input, each part checked:
    /// - the earlier name, as the walk would plan it in the same file set with the file's status
    ///   now (a rename keeps inode, size and mtime), has a `done` journal row of this size, with
    ///   a CRC32C that is one (4 bytes, base64), a generation, and the metadata the job gives the
    ///   new name (else the copy, which keeps the source's metadata, would not be what an upload
    ///   makes: uploaded);
    /// - the object, read now, has that size and CRC32C, and the content type an upload of the
    ///   new name would have (`photo.jpg` renamed `photo.txt` is uploaded);
    /// - the file, hashed now, has them too, and is still the file planned (device, inode, size,
    ///   mtime) once hashed;
    /// - the copy is conditional on the journal's generation (a backend reads the source's first:
    ///   an object another writer replaced since, even with the same bytes, is not copied), and
    ///   the copy's size and CRC32C must be the file's.
    /// Not for a compressed file (its object is its gzip stream), a set that moves, a storage
    /// that cannot copy, a run without a journal, or a new name whose object is the earlier
    /// name's (a template without the name).
    /// - Returns: the bytes the copy holds, when copied.
    func copyRenamed(_ item: PlanItem, from earlier: String) async -> Int64? {
        let set = job.manifest.files[item.fileSetIndex]
        guard item.compression == nil, !set.move, storage.backend.capabilities.copiesObjects, let journal,
              let source = earlierObject(item, from: earlier), source != item.destination,
              let record = try? journal.record(source: earlier, destination: source),
              record.state == .done, record.size == item.file.size, record.attributes == item.attributesText,
              let crc32c = record.crc32c, Self.isCRC32C(crc32c), let generation = record.generation, generation > 0
        else { return nil }
        // The object as the server describes it now (the content type an upload would give the
        // new name among what it holds), and the file as it is now.
        guard let stored = try? await storage.reference(withPath: source).getMetadata(),
              stored.size == record.size, stored.resource.crc32c == crc32c,
              hasUploadsContentType(stored.resource, item, earlier: earlier, source: source),
              await fileHolds(item, crc32c: crc32c)
        else { return nil }
        let outcome: CopyOutcome
        do {
            outcome = try await storage.reference(withPath: source).copy(to: storage.reference(withPath: item.destination),
                                                                        ifSourceGeneration: generation)
        } catch {
            warn(item, "could not be copied from '\(printable(source))' on the server (\(describe(error))): uploading it")
            return nil
        }
        guard case .copied(let copied) = outcome else {
            warn(item, "'\(printable(source))' changed on the server since the journal recorded it: uploading it instead of copying it")
            return nil
        }
        guard copied.size == item.file.size, copied.crc32c == nil || copied.crc32c == crc32c else {
            warn(item, "its copy from '\(printable(source))' does not hold its bytes: uploading it")
            return nil
        }
        await tellCopied(item, from: source, copied)
        return item.file.size
    }

    /// The object `earlier` would have been stored as: the destination the walk gives it in
    /// `item`'s file set (with the file's status, which a rename keeps); nil when it is outside
    /// the set's root or the set leaves it out.
    private func earlierObject(_ item: PlanItem, from earlier: String) -> String? {
        let root = job.root(of: job.manifest.files[item.fileSetIndex])
        let prefix = root == "/" ? "/" : root + "/"
        // Paths are bytes: compared and cut as such (an NFD twin of the root is another folder).
        guard earlier.hasPrefixBytewise(prefix), earlier.utf8.count > prefix.utf8.count else { return nil }
        let relative = String(decoding: earlier.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
        var file = WalkedFile(path: earlier, relativePath: relative, size: item.file.size, modified: item.file.modified)
        (file.device, file.inode) = (item.file.device, item.file.inode)
        (file.modifiedNanoseconds, file.changedNanoseconds) = (item.file.modifiedNanoseconds, item.file.changedNanoseconds)
        guard case .success(let planned) = Planner(job: job).item(for: file, set: item.fileSetIndex), case .upload = planned.decision
        else { return nil }
        return planned.destination
    }

    /// Whether the object `source` (`earlier`'s), as read, has the content type an upload of
    /// `item` would give it: the job's, else the one its file's or object's name says
    /// (`StorageUploadTask`); with none, the earlier name must have said none either.
    private func hasUploadsContentType(_ stored: ObjectResource, _ item: PlanItem, earlier: String, source: String) -> Bool {
        guard let wanted = item.attributes.contentType ?? ContentType.forPath(item.file.path) ?? ContentType.forPath(item.destination) else {
            return item.attributes.contentType == nil && (ContentType.forPath(earlier) ?? ContentType.forPath(source)) == nil
        }
        return stored.contentType == wanted
    }

    /// Whether `item`'s file, hashed now (off the caller's executor), has `crc32c`, and is still
    /// the file planned once read.
    private func fileHolds(_ item: PlanItem, crc32c: String) async -> Bool {
        let followingLinks = job.followsLinks(at: item.file.path, inSet: item.fileSetIndex)
        let path = item.file.path
        let hashed = await Task.detached { try? ByteSource.contentDigests(ofFileAt: path, followingLinks: followingLinks) }.value
        guard let hashed, hashed.crc32c == crc32c, hashed.size == item.file.size else { return false }
        var info = stat()
        guard (followingLinks ? stat(path, &info) : lstat(path, &info)) == 0 else { return false }
        var now = item.file
        now.update(from: info)
        return now.device == item.file.device && now.inode == item.file.inode && now.size == item.file.size
            && now.modifiedNanoseconds == item.file.modifiedNanoseconds
    }

    /// A CRC32C as Cloud Storage and the journal write it: 4 bytes in base64.
    static func isCRC32C(_ text: String) -> Bool {
        text.utf8.count == 8 && text.hasSuffix("==") && Data(base64Encoded: text)?.count == 4
    }

    /// The journal records the file done with the copy's checksums and generation; observers
    /// hear of the copy (those on the callback queue there, in order with the upload events).
    private func tellCopied(_ item: PlanItem, from source: String, _ copied: ObjectResource) async {
        for observer in inPlaceObservers { observer.fileCopied(item, from: source, copied) }
        let queued = queuedObservers
        await withCheckedContinuation { (told: CheckedContinuation<Void, Never>) in
            storage.callbackQueue.async {
                for observer in queued { observer.fileCopied(item, from: source, copied) }
                told.resume()
            }
        }
    }

    private func warn(_ item: PlanItem, _ message: String) {
        for observer in observers { observer.walkWarning(path: item.file.path, message: message) }
    }
}
