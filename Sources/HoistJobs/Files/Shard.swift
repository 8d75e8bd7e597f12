import Foundation

/// One of `count` static parts of a job (`--shard K/N`), for engines that start N copies of a
/// job and hand each an index: a Kubernetes Indexed Job (`JOB_COMPLETION_INDEX`), a Slurm array
/// (`SLURM_ARRAY_TASK_ID`). A file belongs to shard `FNV-1a-64(relative path) mod N`: the same on
/// every machine and every run (not Swift's `hashValue`, which is seeded per process), whatever
/// folder the tree is mounted at. The N shards are disjoint and together hold every file
/// (`ShardTests`); they need no shared state, and may share a journal or not.
public struct Shard: Sendable, Equatable, CustomStringConvertible {
    /// 0-based: 0 ..< count.
    public let index: Int
    public let count: Int

    public var description: String { "\(index)/\(count)" }

    public init(index: Int, count: Int) throws {
        guard count >= 1, count <= 1_000_000 else {
            throw ShardError.countOutOfRange(count)
        }
        guard index >= 0, index < count else {
            throw ShardError.noSuchShard(index: index, count: count)
        }
        self.index = index
        self.count = count
    }

    /// `K/N`, or `auto`: the index and count a Slurm array (`SLURM_ARRAY_TASK_ID` less
    /// `SLURM_ARRAY_TASK_MIN`, `SLURM_ARRAY_TASK_COUNT`) or a Kubernetes Indexed Job
    /// (`JOB_COMPLETION_INDEX`, with the count in `HOIST_SHARD_COUNT`: Kubernetes does not
    /// give the pod its job's completions) gives the process.
    public init(parsing text: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        if text == "auto" {
            if let id = environment["SLURM_ARRAY_TASK_ID"].flatMap(Int.init) {
                guard let count = environment["SLURM_ARRAY_TASK_COUNT"].flatMap(Int.init) else {
                    throw ShardError.slurmCountMissing
                }
                let first = environment["SLURM_ARRAY_TASK_MIN"].flatMap(Int.init) ?? 0
                try self.init(index: id - first, count: count)
                return
            }
            if let index = environment["JOB_COMPLETION_INDEX"].flatMap(Int.init) {
                guard let count = environment["HOIST_SHARD_COUNT"].flatMap(Int.init) else {
                    throw ShardError.kubernetesCountMissing
                }
                try self.init(index: index, count: count)
                return
            }
            throw ShardError.noIndexInTheEnvironment
        }
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]) else {
            throw ShardError.malformed(text)
        }
        try self.init(index: index, count: count)
    }

    /// Whether the file at `relativePath` (relative to its file set's root) is this shard's.
    public func contains(_ relativePath: String) -> Bool {
        count == 1 || Int(Self.hash(relativePath) % UInt64(count)) == index
    }

    /// FNV-1a, 64 bits, over the path's UTF-8 bytes.
    public static func hash(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }
}

/// Why a shard cannot be had, as a value: the caller words it (`description` names no flag).
public enum ShardError: Error, CustomStringConvertible, Sendable, Equatable {
    /// A count outside 1...1000000.
    case countOutOfRange(Int)
    /// An index outside 0..<count.
    case noSuchShard(index: Int, count: Int)
    /// `auto` in a Slurm array without `SLURM_ARRAY_TASK_COUNT`.
    case slurmCountMissing
    /// `auto` in a Kubernetes Indexed Job without `HOIST_SHARD_COUNT`.
    case kubernetesCountMissing
    /// `auto` with neither a Slurm array's nor a Kubernetes Indexed Job's variables.
    case noIndexInTheEnvironment
    /// Text that is neither `K/N` nor `auto`.
    case malformed(String)

    public var description: String {
        switch self {
        case .countOutOfRange(let count): "a shard count must be 1 to 1000000, not \(count)."
        case .noSuchShard(let index, let count): "shard \(index) of \(count) does not exist: the index goes from 0 to \(count - 1)."
        case .slurmCountMissing: "SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not."
        case .kubernetesCountMissing: "JOB_COMPLETION_INDEX is set; set HOIST_SHARD_COUNT to the Job's completions too."
        case .noIndexInTheEnvironment: "an automatic shard needs SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT (a Slurm array), "
            + "or JOB_COMPLETION_INDEX and HOIST_SHARD_COUNT (a Kubernetes Indexed Job)."
        case .malformed(let text): "a shard is K/N (shard K of N, K from 0 to N-1) or auto, not '\(text)'."
        }
    }
}
