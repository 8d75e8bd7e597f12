import Foundation
import HoistJobs
import HoistTestSupport
import Testing

/// `--shard K/N`: a stable partition of a job's files.
@Suite struct ShardTests {
    @Test func theHashIsFNV1aAndTheSameInEveryProcess() throws {
        // FNV-1a 64 reference values: not Swift's per-process seeded hashValue.
        #expect(Shard.hash("") == 0xcbf2_9ce4_8422_2325)
        #expect(Shard.hash("a") == 0xaf63_dc4c_8601_ec8c)
        #expect(Shard.hash("foobar") == 0x8594_4171_f739_67e8)
        #expect(try Shard(parsing: "3/8").description == "3/8")
    }

    /// For random trees and shard counts, the shards of a plan are disjoint and together the
    /// whole plan, with each file in the shard its hash names.
    @Test(arguments: 0..<12) func shardsOfRandomTreesAreDisjointAndComplete(seed: Int) throws {
        var random = FuzzTests.Random(state: UInt64(seed) &* 0x9E37_79B9 &+ 17)
        let fixture = try JobFixture()
        let alphabet = Array("abcXYZ019_-. éß漢")
        var paths = Set<String>()
        for _ in 0..<(5 + Int(random.next() % 120)) {
            let depth = 1 + Int(random.next() % 4)
            let parts = (0..<depth).map { _ in String((0..<(1 + Int(random.next() % 6))).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }) }
            let path = parts.map { $0.hasPrefix(".") || $0.hasSuffix(".") ? "f" + $0 + "f" : $0 }.joined(separator: "/")
            // A name cannot be both a file and a folder.
            if paths.contains(where: { $0.hasPrefix(path + "/") || path.hasPrefix($0 + "/") }) { continue }
            paths.insert(path)
        }
        for path in paths { try fixture.file(path, 1 + Int(random.next() % 50)) }
        let job = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let all = Array(Planner(job: job)).map(\.file.relativePath)
        #expect(Set(all) == paths)
        let count = 1 + Int(random.next() % 9)
        var seen: [String: Int] = [:]
        for index in 0..<count {
            var sharded = job
            sharded.shard = try Shard(index: index, count: count)
            for item in Planner(job: sharded) {
                #expect(seen[item.file.relativePath] == nil, "\(item.file.relativePath) in shards \(seen[item.file.relativePath]!) and \(index)")
                seen[item.file.relativePath] = index
                #expect(Int(Shard.hash(item.file.relativePath) % UInt64(count)) == index)
            }
        }
        #expect(Set(seen.keys) == paths)
    }

    @Test func runAndPlanTakeAShard() throws {
        let fixture = try JobFixture()
        for index in 0..<40 { try fixture.file("d\(index % 3)/f\(index).txt", 10 + index) }
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        var planned: [Set<String>] = []
        for index in 0..<3 {
            let plan = try runProcess(hoist, ["plan", "--shard", "\(index)/3", manifest])
            #expect(plan.status == 0, "\(plan.stderr)")
            planned.append(Set(plan.stdout.split(separator: "\n").filter { $0.hasPrefix("upload  ") }
                .map { String($0.dropFirst("upload  ".count).split(separator: " ").first ?? "") }))
        }
        #expect(planned.map(\.count).reduce(0, +) == 40)
        #expect(planned[0].union(planned[1]).union(planned[2]).count == 40)
        // Runs of the three shards (here one after another, on one journal) upload everything once.
        for index in 0..<3 {
            let run = try runProcess(hoist, ["run", "--shard", "\(index)/3", manifest])
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.hasPrefix("test: \(planned[index].count) uploaded"), "\(run.stdout)")
        }
        for index in 0..<40 {
            let stored = fixture.directory.url.appendingPathComponent("bucket/d\(index % 3)/f\(index).txt")
            #expect(try Data(contentsOf: stored) == patternData(10 + index))
        }
        // --shard auto, as a Slurm array task and as a pod of a Kubernetes Indexed Job.
        var slurm = ProcessInfo.processInfo.environment
        slurm["SLURM_ARRAY_TASK_ID"] = "5"
        slurm["SLURM_ARRAY_TASK_MIN"] = "4"
        slurm["SLURM_ARRAY_TASK_COUNT"] = "3"
        let fromSlurm = try runProcess(hoist, ["plan", "--shard", "auto", "--force", "--summary", manifest], environment: slurm)
        #expect(fromSlurm.stdout.hasPrefix("test: \(planned[1].count) to upload"), "\(fromSlurm.stdout)")
        var kubernetes = ProcessInfo.processInfo.environment
        kubernetes["JOB_COMPLETION_INDEX"] = "2"
        kubernetes["HOIST_SHARD_COUNT"] = "3"
        let fromKubernetes = try runProcess(hoist, ["plan", "--shard", "auto", "--force", "--summary", manifest], environment: kubernetes)
        #expect(fromKubernetes.stdout.hasPrefix("test: \(planned[2].count) to upload"), "\(fromKubernetes.stdout)")
        kubernetes["HOIST_SHARD_COUNT"] = nil
        let noCount = try runProcess(hoist, ["run", "--shard", "auto", manifest], environment: kubernetes)
        #expect(noCount.status == 2)
        #expect(noCount.stderr.contains("set HOIST_SHARD_COUNT to the Job's completions too"), "\(noCount.stderr)")
        let bad = try runProcess(hoist, ["run", "--shard", "3/3", manifest])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("shard 3 of 3 does not exist: the index goes from 0 to 2."), "\(bad.stderr)")
    }
}
