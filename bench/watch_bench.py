#!/usr/bin/env python3
"""`hoist watch` beside what people run instead, in one run, on the same disk:

- hoist: `hoist watch` of a job storing into a local bucket (watch.settle as given, default 100ms);
- loop: `inotifywait -m -r -e close_write,moved_to | while read f; do hoist cp "$f" ...; done`
  (inotify-tools), one `hoist cp` a file, into a local bucket;
- lsyncd: Debian's lsyncd, `default.rsync` to a local folder, `delay = 0`.

With `--storage gcs`, hoist and the loop store into a fresh in-memory fake-gcs-server for each
rate (hoist's `gs://` storage and `hoist cp` pointed at it by STORAGE_EMULATOR_HOST); lsyncd,
which copies to rsync targets only, still copies to a local folder. An object counts as stored
at the time of the `success` event its uploader writes once the server answered (`hoist watch
--log-file`, `hoist cp --json`), against the writer's wall clock at the close: listing the
bucket every few milliseconds, as the local runs do with the folder, would load the server with
listings of thousands of objects and slow what it measures.

Latency: a writer makes files of 4 KiB at 10, 100 and 1,000 files/s; each file's latency is from
its close to its name appearing in the destination (a poller lists the destination every 5 ms;
all three write a temporary name and rename it into place, so a name seen is whole). p50 and
p99, the files not stored 30 s after the last write, and the tool's CPU seconds over the rate's
run (its processes and their reaped children).

Idle: a tree of 100,000 one-byte files in 10,000 folders; each tool starts on it (hoist's
catch-up and lsyncd's first rsync copy it; the loop copies nothing), a probe file shows it is
watching, then its CPU seconds and RSS (summed over its processes) over 60 s of nothing."""
import argparse
import datetime
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale_bench import make_tree  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def tree_pids(pid):
    """`pid` and its descendants."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append(int(entry))
            except OSError:
                pass
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def cpu_seconds(pid):
    """CPU seconds of `pid`'s tree, with the children it reaped."""
    total = 0
    for member in tree_pids(pid):
        try:
            with open(f"/proc/{member}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += sum(int(value) for value in fields[11:15])
        except OSError:
            pass
    return total / TICK


def rss_mib(pid):
    """Resident MiB of `pid`'s tree now."""
    total = 0
    for member in tree_pids(pid):
        try:
            with open(f"/proc/{member}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


class Tool:
    """One watcher of `src` into `dest` (a folder), or into `server`'s bucket (fake-gcs-server,
    for hoist and the loop), started and stopped."""

    def __init__(self, kind, hoist, folder, src, settle, server=None):
        self.kind, self.folder, self.src = kind, folder, src
        self.server = server if kind != "lsyncd" else None
        os.makedirs(folder, exist_ok=True)
        self.log = open(os.path.join(folder, f"{kind}.log"), "w")
        env = dict(os.environ, STORAGE_EMULATOR_HOST=f"127.0.0.1:{server.port}") if self.server else None
        storage = f"gs://{server.bucket}" if self.server else None
        # On a server, the uploaders' `success` events say when each file was stored.
        self.events = os.path.join(folder, "events.jsonl") if self.server else None
        if kind == "hoist":
            self.dest = os.path.join(folder, "bucket")
            manifest = os.path.join(folder, "job.yaml")
            with open(manifest, "w") as out:
                out.write(f"version: 1\nname: watch\njournal: journal.sqlite\nstorage: {{ url: '{storage or 'file:bucket'}' }}\n"
                          f"files: [{{ root: {src} }}]\nwatch: {{ settle: {settle} }}\n")
            command = [hoist, "watch", "--quiet"] + (["--log-file", self.events] if self.events else []) + [manifest]
        elif kind == "loop":
            self.dest = os.path.join(folder, "bucket")
            os.makedirs(self.dest, exist_ok=True)
            output = '--json >> "$4"' if self.events else "--quiet"
            script = ('inotifywait -q -m -r -e close_write,moved_to --format "%w%f" "$1" | '
                      f'while IFS= read -r f; do "$2" cp --storage "$3" "$f" "${{f#$1/}}" {output}; done')
            command = ["bash", "-c", script, "loop", src, hoist, storage or f"file://{self.dest}", self.events or ""]
        else:
            self.dest = os.path.join(folder, "dest")
            os.makedirs(self.dest, exist_ok=True)
            config = os.path.join(folder, "lsyncd.lua")
            with open(config, "w") as out:
                out.write('settings { nodaemon = true, insist = true }\n'
                          f'sync {{ default.rsync, source = "{src}/", target = "{self.dest}/", delay = 0 }}\n')
            command = ["lsyncd", config]
        self.process = subprocess.Popen(command, cwd=folder, stdout=self.log, stderr=subprocess.STDOUT,
                                        start_new_session=True, env=env)

    def exists(self, name):
        """Whether `name` is stored."""
        if not self.server:
            return os.path.exists(os.path.join(self.dest, name))
        url = f"{self.server.base}/storage/v1/b/{self.server.bucket}/o/{urllib.parse.quote(name, safe='')}"
        try:
            urllib.request.urlopen(url).read()
            return True
        except OSError:
            return False

    def successes(self):
        """Each file's first `success` event: its name and the event's time (seconds since 1970)."""
        found = {}
        try:
            with open(self.events) as events:
                for line in events:
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if event.get("event") != "success":
                        continue
                    at = datetime.datetime.strptime(event["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
                    found.setdefault(os.path.basename(event["file"]),
                                     at.replace(tzinfo=datetime.timezone.utc).timestamp())
        except OSError:
            pass
        return found

    def stored(self, after):
        """The names stored, from `after` on (in name order on a server, which lists from it)."""
        if not self.server:
            try:
                return [entry.name for entry in os.scandir(self.dest)]
            except OSError:
                return []
        url = (f"{self.server.base}/storage/v1/b/{self.server.bucket}/o?fields=items(name)&maxResults=100000"
               f"&startOffset={urllib.parse.quote(after, safe='')}")
        try:
            return [item["name"] for item in json.load(urllib.request.urlopen(url)).get("items", [])]
        except OSError:
            return []

    def wait_ready(self, timeout):
        """Writes probe files until one reaches the destination: the tool watches."""
        deadline = time.monotonic() + timeout
        attempt = 0
        while time.monotonic() < deadline:
            name = f"probe-{attempt}"
            with open(os.path.join(self.src, name), "wb") as out:
                out.write(b"probe")
            until = time.monotonic() + 1
            while time.monotonic() < until:
                if self.exists(name):
                    return time.monotonic()
                if self.process.poll() is not None:
                    sys.exit(f"{self.kind} ended ({self.process.returncode}): see {self.log.name}")
                time.sleep(0.05)
            attempt += 1
        sys.exit(f"{self.kind} did not store a probe file within {timeout} s: see {self.log.name}")

    def stop(self):
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.log.close()


def latency_run(kind, hoist, work, rate, seconds, settle, size=4096, gcs=False):
    folder = os.path.join(work, f"latency-{kind}-{rate}")
    shutil.rmtree(folder, ignore_errors=True)
    src = os.path.join(folder, "src")
    os.makedirs(src)
    server = None
    if gcs and kind != "lsyncd":
        from upload_bench import Server  # noqa: E402 (fake-gcs-server: .venv-test's Python)
        server = Server()
    tool = Tool(kind, hoist, folder, src, settle, server)
    tool.wait_ready(60)
    count = int(rate * seconds)
    names = [f"w{index:06d}.bin" for index in range(count)]
    closed, seen = {}, {}
    closed_wall = {}
    done = threading.Event()

    def poll():
        if server:
            # Counted from the uploaders' events (10 times a second), not by listing the bucket.
            while not done.is_set():
                for name in tool.successes():
                    if name in closed:
                        seen.setdefault(name, 0)
                time.sleep(0.1)
            return
        first = 0   # names before it are all seen
        while not done.is_set():
            now = time.monotonic()
            while first < count - 1 and names[first] in seen:
                first += 1
            for name in tool.stored(names[first]):
                if name in closed and name not in seen:
                    seen[name] = now
            time.sleep(0.01 if server else 0.005)

    poller = threading.Thread(target=poll)
    poller.start()
    payload = os.urandom(size)
    cpu_before = cpu_seconds(tool.process.pid)
    start = time.monotonic()
    for index, name in enumerate(names):
        delay = start + index / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        with open(os.path.join(src, name), "wb") as out:
            out.write(payload)
        closed[name] = time.monotonic()
        closed_wall[name] = time.time()
    last = time.monotonic()
    while len(seen) < count and time.monotonic() < last + 30:
        time.sleep(0.05)
    done.set()
    poller.join()
    cpu = cpu_seconds(tool.process.pid) - cpu_before
    rss = rss_mib(tool.process.pid)
    tool.stop()
    if server:
        server.stop()
        stored = tool.successes()
        latencies = sorted(stored[name] - closed_wall[name] for name in stored if name in closed_wall)
    else:
        latencies = sorted(seen[name] - closed[name] for name in seen if name in closed)
    shutil.rmtree(folder, ignore_errors=True)

    def quantile(q):
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else float("nan")
    return {"files": count, "stored": len(seen), "p50": quantile(0.5), "p99": quantile(0.99), "cpu": cpu, "rss": rss}


def idle_run(kind, hoist, work, tree, seconds, settle):
    folder = os.path.join(work, f"idle-{kind}")
    shutil.rmtree(folder, ignore_errors=True)
    src = os.path.join(tree, "src")
    started = time.monotonic()
    tool = Tool(kind, hoist, folder, src, settle)
    ready = tool.wait_ready(900) - started
    time.sleep(2)   # the probe's own pass and its writes end
    cpu_before = cpu_seconds(tool.process.pid)
    time.sleep(seconds)
    cpu = cpu_seconds(tool.process.pid) - cpu_before
    rss = rss_mib(tool.process.pid)
    tool.stop()
    for name in os.listdir(src):
        if name.startswith("probe-"):
            os.unlink(os.path.join(src, name))
    shutil.rmtree(folder, ignore_errors=True)
    return {"ready": ready, "cpu": cpu, "rss": rss}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hoist", required=True)
    parser.add_argument("--work", default="/tmp/hoist-bench-watch")
    parser.add_argument("--tools", default="hoist,loop,lsyncd")
    parser.add_argument("--rates", default="10,100,1000")
    parser.add_argument("--seconds", type=float, default=5, help="writing time at each rate")
    parser.add_argument("--settle", default="100ms", help="hoist's watch.settle")
    parser.add_argument("--idle-files", type=int, default=100_000)
    parser.add_argument("--idle-per-folder", type=int, default=10)
    parser.add_argument("--idle-seconds", type=float, default=60)
    parser.add_argument("--skip-idle", action="store_true")
    parser.add_argument("--storage", choices=["local", "gcs"], default="local",
                        help="gcs: hoist and the loop store into fake-gcs-server (lsyncd into a local folder)")
    arguments = parser.parse_args()
    arguments.hoist = os.path.abspath(arguments.hoist)
    os.makedirs(arguments.work, exist_ok=True)
    tools = arguments.tools.split(",")
    print(f"load average before: {os.getloadavg()[0]:.2f}; hoist watch.settle {arguments.settle}; "
          f"lsyncd delay 0; {arguments.seconds:g} s of writing at each rate")
    print(f"latency from close to stored ({'fake-gcs-server, lsyncd a local folder' if arguments.storage == 'gcs' else 'local destination'}), ms")
    print(f"{'rate':>10} {'tool':>7} {'stored':>12} {'p50':>8} {'p99':>8} {'CPU s':>7} {'RSS MiB':>8}")
    for rate in [float(r) for r in arguments.rates.split(",")]:
        results = {}
        for kind in tools:
            results[kind] = latency_run(kind, arguments.hoist, arguments.work, rate, arguments.seconds, arguments.settle,
                                        gcs=arguments.storage == "gcs")
            r = results[kind]
            print(f"{rate:>8g}/s {kind:>7} {r['stored']:>6}/{r['files']:<5} {r['p50']:>8.0f} {r['p99']:>8.0f} "
                  f"{r['cpu']:>7.2f} {r['rss']:>8.1f}", flush=True)
        if "hoist" in results:
            for kind in tools:
                if kind != "hoist" and results[kind]["p50"] == results[kind]["p50"]:
                    print(f"{'':>10} {kind}/hoist p50 {results[kind]['p50'] / results['hoist']['p50']:.2f}x, "
                          f"p99 {results[kind]['p99'] / results['hoist']['p99']:.2f}x")
    if arguments.skip_idle:
        return
    tree = os.path.join(arguments.work, "tree")
    make_tree(tree, arguments.idle_files, per=arguments.idle_per_folder)
    print(f"idle over {arguments.idle_seconds:g} s, {arguments.idle_files} files in "
          f"{arguments.idle_files // arguments.idle_per_folder} folders watched")
    print(f"{'tool':>7} {'ready s':>8} {'CPU s':>7} {'RSS MiB':>8}")
    for kind in tools:
        r = idle_run(kind, arguments.hoist, arguments.work, tree, arguments.idle_seconds, arguments.settle)
        print(f"{kind:>7} {r['ready']:>8.1f} {r['cpu']:>7.2f} {r['rss']:>8.1f}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
