import Foundation

/// What is left to decide about a planned file before it starts, in order: no-clobber (the
/// object exists: skip), `before_upload` (skip, fail, or a new destination or metadata, which
/// the journal is asked about again), and two files sent to one object after a hook renamed
/// them. Its I/O comes in as closures, so it is tested without a server (`AdmissionTests`).
struct Admission {
    enum Verdict {
        case upload(PlanItem)
        case skip(PlanItem, SkipReason)
        case fail(PlanItem, String)
        /// The run stopped while a hook ran: the file is not started (whatever the hook answered).
        case stopped
    }

    /// `upload.noClobber`: ask `objectExists` before each upload.
    let noClobber: Bool
    /// Whether the bucket holds an object (an error other than "not found" counts as yes).
    let objectExists: (String) async -> Bool
    /// The job's hooks' `before_upload`, when the job has hooks.
    let beforeUpload: ((PlanItem) async throws -> PlanItem)?
    /// Whether `before_upload` is defined: destinations are then known only after it, so the
    /// run's destinations are kept to refuse a second file sent to one of them.
    let rewrites: Bool
    /// Sets an item's decision from the journal for its destination and metadata.
    let consultJournal: (inout PlanItem) throws -> Void
    let isStopping: () -> Bool
    /// The source of each destination given so far (only with `rewrites`).
    private var claimed: [Bytewise: String] = [:]   // names are bytes: NFC and NFD twins are two objects

    init(noClobber: Bool, objectExists: @escaping (String) async -> Bool, beforeUpload: ((PlanItem) async throws -> PlanItem)?,
         rewrites: Bool, consultJournal: @escaping (inout PlanItem) throws -> Void, isStopping: @escaping () -> Bool) {
        self.noClobber = noClobber
        self.objectExists = objectExists
        self.beforeUpload = beforeUpload
        self.rewrites = rewrites
        self.consultJournal = consultJournal
        self.isStopping = isStopping
    }

    mutating func admit(_ planned: PlanItem) async -> Verdict {
        var item = planned
        if noClobber, item.decision == .upload, await objectExists(item.destination) {
            item.decision = .skip(.exists)
        }
        if item.decision == .upload, let beforeUpload {
            do { item = try await beforeUpload(item) } catch { return .fail(item, "\(error)") }
            if isStopping() { return .stopped }
            if item.destination != planned.destination || item.attributes != planned.attributes {
                do { try consultJournal(&item) } catch { return .fail(item, "\(error)") }
            }
        }
        if rewrites, item.decision == .upload || item.decision == .skip(.unchanged) {
            if let other = claimed[Bytewise(item.destination)], !other.hasSameBytes(as: item.file.path) {
                return .fail(item, "\(other) and \(item.file.path) both go to '\(item.destination)' after before_upload: "
                    + "nothing uploaded for the second")
            }
            claimed[Bytewise(item.destination)] = item.file.path
        }
        if case .skip(let reason) = item.decision { return .skip(item, reason) }
        return .upload(item)
    }
}
