import HoistJobs

/// How the command line words what a `JobSession` reports: with `hoist:` prefixes, and naming
/// the flags that change it (HoistJobs names none).
extension JobSession.StartError {
    var commandLineText: String {
        switch reason {
        case .busy(let holder):
            "\(job) is already running (pid \(holder)); use --wait to wait for it"
        case .watched(let holder):
            "\(job) is being watched: a watcher (pid \(holder)) holds the job; stop it to run the job alone"
        case .sharedRunsUnsupported(let journal):
            "--worker shares a run through a PostgreSQL journal, and \(journal) is a file: name one with journal: postgres://... or --journal"
        case .workerOfAShard:
            "--worker and --shard split a job two ways: workers share one plan; choose one"
        case .failed(let message):
            message
        }
    }
}

extension JobSession.Message {
    var commandLineText: String {
        switch self {
        case .note(let text): "hoist: note: \(text)"
        case .warning(let text): "hoist: warning: \(text)"
        case .hook(let line): "hoist: [\(line.script)] \(line.level.rawValue): \(line.message)"
        case .problem(let text): "hoist: \(text)"
        }
    }
}
