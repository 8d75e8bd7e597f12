import ArgumentParser
import Foundation
import HoistJobs

/// `--shard K/N` (or `auto`), shared by `run` and `plan`.
struct ShardOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Only the files of shard K of N (K from 0 to N-1), by a stable hash of their path; auto: from SLURM_ARRAY_TASK_ID/_COUNT, or JOB_COMPLETION_INDEX and HOIST_SHARD_COUNT.",
        valueName: "K/N|auto"))
    var shard: String?

    /// The shard asked for, or nil; a wrong one prints its sentence and exits 2.
    func resolve() throws -> Shard? {
        guard let shard else { return nil }
        do { return try Shard(parsing: shard) } catch let error as ShardError {
            FileHandle.standardError.write(Data("hoist: \(Self.words(error))\n".utf8))
            throw ExitCode(2)
        }
    }

    /// The sentence for a shard that cannot be had, naming the flag.
    static func words(_ error: ShardError) -> String {
        switch error {
        case .slurmCountMissing, .kubernetesCountMissing: "--shard auto: \(error)"
        case .noIndexInTheEnvironment: "--shard auto needs SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT (a Slurm array), "
            + "or JOB_COMPLETION_INDEX and HOIST_SHARD_COUNT (a Kubernetes Indexed Job)."
        case .malformed(let text): "--shard takes K/N (shard K of N, K from 0 to N-1) or auto, not '\(text)'."
        case .countOutOfRange, .noSuchShard: "\(error)"
        }
    }

    /// The option again, for a command that hands its arguments on (`run --dry-run` to `plan`).
    var arguments: [String] { shard.map { ["--shard", $0] } ?? [] }
}
