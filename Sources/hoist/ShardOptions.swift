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
        do { return try Shard(parsing: shard) } catch {
            FileHandle.standardError.write(Data("hoist: \(error)\n".utf8))
            throw ExitCode(2)
        }
    }

    /// The option again, for a command that hands its arguments on (`run --dry-run` to `plan`).
    var arguments: [String] { shard.map { ["--shard", $0] } ?? [] }
}
