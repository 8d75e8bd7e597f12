import Foundation
import HoistTestSupport
import Testing

/// deploy/: what a Kubernetes or Slurm user starts from is a job Hoist accepts, started as
/// docs/scale.md says.
@Suite struct DeployTests {
    /// What a Kubernetes file says: its ConfigMap's manifest (checked with `hoist validate`) and
    /// the CronJob's Job, pod arguments and environment.
    func cronJob(_ name: String) throws -> [String: Any] {
        let file = packageRoot.appendingPathComponent("deploy/kubernetes/\(name)").path
        let facts = try python("""
            import yaml, json
            docs = {d['kind']: d for d in yaml.safe_load_all(open('\(file)'))}
            job = docs['CronJob']['spec']['jobTemplate']['spec']
            pod = job['template']['spec']['containers'][0]
            env = {e['name']: e for e in pod['env']}
            print(json.dumps({'manifest': docs['ConfigMap']['data']['job.yaml'], 'mode': job.get('completionMode'),
                'completions': job.get('completions'), 'parallelism': job['parallelism'],
                'count': int(env['HOIST_SHARD_COUNT']['value']) if 'HOIST_SHARD_COUNT' in env else None, 'args': pod['args'],
                'configmap': job['template']['spec']['volumes'][0]['configMap']['name'], 'name': docs['ConfigMap']['metadata']['name'],
                'password': env['PGPASSWORD']['valueFrom']['secretKeyRef']['name'],
                'policy': docs['CronJob']['spec']['concurrencyPolicy']}))
            """)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(facts.utf8)) as? [String: Any])
        #expect(object["policy"] as? String == "Forbid")
        #expect(object["password"] as? String == "hoist-postgres")
        #expect(object["configmap"] as? String == object["name"] as? String)
        let manifest = try #require(object["manifest"] as? String)
        #expect(manifest.contains("journal: postgres://hoist@"))
        // No secret in the ConfigMap: the URL names the user only (the password is PGPASSWORD, from the Secret).
        #expect(!manifest.contains("postgres://hoist:"))
        let directory = try TemporaryDirectory()
        let path = try directory.write("job.yaml", Data(manifest.utf8)).path
        let validated = try runProcess(hoist, ["validate", "--syntax-only", path])
        #expect(validated.status == 0, "\(validated.stdout)\(validated.stderr)")
        return object
    }

    @Test func theKubernetesCronJobRunsAValidManifestInNShards() throws {
        let object = try cronJob("hoist.yaml")
        #expect(object["mode"] as? String == "Indexed")
        #expect(object["completions"] as? Int == object["count"] as? Int)
        #expect(object["parallelism"] as? Int == object["count"] as? Int)
        #expect(object["args"] as? [String] == ["run", "--shard", "auto", "--wait", "/etc/hoist/job/job.yaml"])
    }

    /// The workers' CronJob: a work-queue Job of N pods (no completion count), each
    /// `hoist run --worker`.
    @Test func theKubernetesWorkersCronJobRunsNWorkersOfOneSharedRun() throws {
        let object = try cronJob("hoist-workers.yaml")
        #expect(object["completions"] is NSNull)
        #expect((object["parallelism"] as? Int ?? 0) > 1)
        #expect(object["args"] as? [String] == ["run", "--worker", "--lease", "30", "/etc/hoist/job/job.yaml"])
    }

    /// The watcher's Deployment: one pod, never two at once (Recreate), `hoist watch` on a valid
    /// manifest whose journal is on a volume that outlives the pod (sessions to continue).
    @Test func theKubernetesDeploymentWatchesAValidManifest() throws {
        let file = packageRoot.appendingPathComponent("deploy/kubernetes/hoist-watch.yaml").path
        let facts = try python("""
            import yaml, json
            docs = {d['kind']: d for d in yaml.safe_load_all(open('\(file)'))}
            spec = docs['Deployment']['spec']
            pod = spec['template']['spec']
            mounts = {m['name']: m['mountPath'] for m in pod['containers'][0]['volumeMounts']}
            volumes = {v['name']: v for v in pod['volumes']}
            print(json.dumps({'manifest': docs['ConfigMap']['data']['job.yaml'], 'replicas': spec['replicas'],
                'strategy': spec['strategy']['type'], 'args': pod['containers'][0]['args'],
                'grace': pod['terminationGracePeriodSeconds'], 'state': mounts.get('state'),
                'claim': volumes['state']['persistentVolumeClaim']['claimName'], 'pvc': docs['PersistentVolumeClaim']['metadata']['name'],
                'configmap': volumes['job']['configMap']['name'], 'name': docs['ConfigMap']['metadata']['name']}))
            """)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(facts.utf8)) as? [String: Any])
        #expect(object["replicas"] as? Int == 1)
        #expect(object["strategy"] as? String == "Recreate")
        #expect(object["args"] as? [String] == ["watch", "--quiet", "/etc/hoist/job/job.yaml"])
        #expect((object["grace"] as? Int ?? 0) > 10)
        #expect(object["configmap"] as? String == object["name"] as? String)
        #expect(object["claim"] as? String == object["pvc"] as? String)
        let manifest = try #require(object["manifest"] as? String)
        let state = try #require(object["state"] as? String)
        #expect(manifest.contains("journal: \(state)/"), "\(manifest)")
        #expect(manifest.contains("watch:"))
        let directory = try TemporaryDirectory()
        let path = try directory.write("job.yaml", Data(manifest.utf8)).path
        let validated = try runProcess(hoist, ["validate", "--syntax-only", path])
        #expect(validated.status == 0, "\(validated.stdout)\(validated.stderr)")
    }

    @Test func theSlurmWorkersScriptRunsAWorkerPerTask() throws {
        let file = packageRoot.appendingPathComponent("deploy/slurm/hoist-workers.sbatch").path
        #expect(try runProcess("/bin/bash", ["-n", file]).status == 0)
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(text.contains("exec srun --kill-on-bad-exit=0 hoist run --worker --quiet \"$manifest\""))
        #expect(FileManager.default.isExecutableFile(atPath: file))
    }

    @Test func theSlurmScriptParsesAndRunsAShardPerTask() throws {
        let file = packageRoot.appendingPathComponent("deploy/slurm/hoist-array.sbatch").path
        #expect(try runProcess("/bin/bash", ["-n", file]).status == 0)
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(text.contains("exec hoist run --shard auto --wait --quiet \"$manifest\""))
        #expect(FileManager.default.isExecutableFile(atPath: file))
    }
}
