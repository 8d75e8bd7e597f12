import Foundation

/// Two manifests with one `name:` would share one default journal (it is named after the job):
/// each run's plan would trust the other job's uploads and `hoist status` would mix their runs.
/// The manifest that owns a default journal is recorded beside it, in `JOURNAL.manifest`.
public struct JournalOwnerError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

extension Job {
    /// The manifest's absolute path, symbolic links resolved: what a journal's owner file records.
    public var absoluteFile: String {
        URL(fileURLWithPath: file).standardizedFileURL.resolvingSymlinksInPath().path
    }

    /// Checks that the default journal belongs to this manifest and, when `claim`, records that
    /// it does. A journal chosen by `journal:` or `--journal` (`override`) is the user's choice
    /// and is not checked. A recorded manifest that is gone, or that now names another job, hands
    /// the journal over (a manifest that moved keeps its journal).
    /// - Throws: `JournalOwnerError` naming both manifests when another one with this name owns it.
    public func checkJournalOwner(override: String?, claim: Bool) throws {
        guard override == nil, manifest.journal == nil else { return }
        let journal = journalPath()
        let ownerFile = journal + ".manifest"
        let me = absoluteFile
        if let recorded = try? String(contentsOfFile: ownerFile, encoding: .utf8) {
            let owner = recorded.trimmingCharacters(in: .whitespacesAndNewlines)
            if !owner.isEmpty, owner != me, FileManager.default.fileExists(atPath: owner) {
                let ownerName = (try? Job(file: owner, environment: environment))?.manifest.name
                if ownerName == nil || ownerName == manifest.name {
                    throw JournalOwnerError(description: """
                        \(me) and \(owner) both name their job '\(manifest.name)', and would share the journal \
                        \(journal) (it belongs to \(owner)). Rename one job (name:), or give one its own \
                        journal: in its manifest. If \(owner) is no longer used, delete \(ownerFile).
                        """)
                }
            }
            if owner == me || !claim { return }
        } else if !claim {
            return
        }
        try? PrivateFiles.makeFolder((journal as NSString).deletingLastPathComponent)
        // Atomic: a new file renamed over the name (a link there is replaced, not followed); 0600 as the journal.
        try? Data((me + "\n").utf8).write(to: URL(fileURLWithPath: ownerFile), options: .atomic)
        chmod(ownerFile, 0o600)
    }
}
