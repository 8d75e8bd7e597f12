#!/usr/bin/env python3
"""Log shipping with and without `compress: gzip`: 2,000 files of 64 KiB of text (--text: access-log
lines, or short repeated lines of numbers and a few words, on which zlib's level 6 works hardest)
uploaded by `hoist run` to a fresh fake-gcs-server each time, interleaved for --rounds rounds
(plain, gzip at each of --levels, rclone as the peer, then `gzip -N` and `pigz -N` over the same
bytes, then the next round). Prints each run's wall time, files/s, CPU seconds, peak RSS and the
bytes the server stores, and the medians of the rounds' ratios. The targets: compression keeps
at least 80% of the plain run's files/s and stores at most a quarter of its bytes, and each level
takes at most 1.25x its limit, max(the plain run, single-core `gzip -N` CPU time / cores), every figure from the same round."""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from upload_bench import Server, median, timed, warm  # noqa: E402

AGENTS = ["curl/7.88.1", "Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0", "Go-http-client/2.0", "kube-probe/1.28"]
PATHS = ["/api/items/{}", "/api/users/{}/orders", "/static/app.{}.js", "/healthz", "/api/search?q=term{}"]


def log_file(path, size, rng):
    """`size` bytes of access-log lines: what log shipping sends (gzip takes it to about a sixth)."""
    lines = []
    total = 0
    while total < size:
        line = (f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)} - - [26/Nov/2026:12:{rng.randrange(60):02d}:"
                f"{rng.randrange(60):02d} +0000] \"GET {rng.choice(PATHS).format(rng.randrange(100000))} HTTP/1.1\" "
                f"{rng.choice([200, 200, 200, 304, 404, 500])} {rng.randrange(50000)} \"-\" \"{rng.choice(AGENTS)}\" "
                f"rt={rng.random():.3f}\n")
        lines.append(line)
        total += len(line)
    with open(path, "w") as f:
        f.write("".join(lines)[:size])


WORDS = ["ok", "retry", "done", "queued", "sent", "read", "wrote", "user", "item", "batch"]


def repeated_file(path, size, rng):
    """`size` bytes of short lines of numbers and a few words (`76926 queued item 155`): zlib's
    lazy matching finds many candidates in them, so `gzip -6` takes about four times level 1's
    CPU."""
    lines = []
    total = 0
    while total < size:
        line = f"{rng.randrange(100000)} {rng.choice(WORDS)} {rng.choice(WORDS)} {rng.randrange(1000)}\n"
        lines.append(line)
        total += len(line)
    with open(path, "w") as f:
        f.write("".join(lines)[:size])


def gzip_cpu(tool, level, logs):
    """CPU seconds `tool -LEVEL` (gzip, or pigz on every core) takes over the files' bytes, read
    from a pipe as one stream, and the bytes it makes."""
    names = sorted(os.listdir(logs))
    command = f"cat {' '.join(names)} | /usr/bin/time -f 'TIME %e %U %S' {tool} -{level} -c | wc -c"
    result = subprocess.run(["bash", "-c", command], cwd=logs, capture_output=True, text=True, check=True)
    line = [l for l in result.stderr.splitlines() if l.startswith("TIME ")][-1].split()
    return float(line[1]), float(line[2]) + float(line[3]), int(result.stdout)


def stored_bytes(server, prefix):
    url = f"{server.base}/storage/v1/b/{server.bucket}/o?prefix={prefix}&maxResults=100000"
    items = json.load(urllib.request.urlopen(url)).get("items", [])
    return len(items), sum(int(item["size"]) for item in items)


def hoist_run(args, work, logs, level):
    """One `hoist run` of the log-shipping job (a fresh journal), gzipped at `level` (None: not
    compressed): (wall, cpu, rss, bytes stored)."""
    server = Server()
    name = f"gzip{level}" if level else "plain"
    manifest = os.path.join(work, f"{name}.yaml")
    with open(manifest, "w") as f:
        f.write(f"""version: 1
name: bench-{name}
journal: {work}/{name}-{server.port}.sqlite
storage: {{ url: "gs://{server.bucket}" }}
files:
  - root: {logs}
    destination: "{name}/{{relpath}}"
    metadata: {{ contentType: text/plain }}
{f"    compress: {{ format: gzip, level: {level} }}" if level else ""}
upload: {{ concurrency: {args.concurrency} }}
""")
    warm(logs)
    env = dict(os.environ, STORAGE_EMULATOR_HOST=f"127.0.0.1:{server.port}")
    wall, cpu, rss, _ = timed([args.hoist, "run", "--quiet", manifest], env=env)
    objects, size = stored_bytes(server, f"{name}/")
    server.stop()
    if objects != args.files:
        sys.exit(f"hoist ({name}) stored {objects} of {args.files} files")
    return wall, cpu, rss, size


def rclone_run(args, logs):
    server = Server()
    warm(logs)
    wall, cpu, rss, _ = timed([args.rclone, "copy", logs, f":gcs:{server.bucket}/rclone", "--gcs-endpoint",
                               f"{server.base}/storage/v1/", "--gcs-anonymous",
                               "--transfers", str(args.concurrency), "--checkers", str(args.concurrency)])
    objects, size = stored_bytes(server, "rclone/")
    server.stop()
    if objects != args.files:
        sys.exit(f"rclone stored {objects} of {args.files} files")
    return wall, cpu, rss, size


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hoist", required=True)
    parser.add_argument("--rclone", required=True)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--kib", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--levels", default="1,6", help="gzip levels to run, comma-separated (compress: gzip is 6)")
    parser.add_argument("--text", choices=["access", "repeated"], default="access",
                        help="access-log lines, or short repeated lines of numbers and a few words")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="hoist-compress-bench-")
    logs = os.path.join(work, "logs")
    os.makedirs(logs)
    rng = random.Random(32)
    for i in range(args.files):
        (log_file if args.text == "access" else repeated_file)(os.path.join(logs, f"app-{i:05d}.log"), args.kib << 10, rng)
    source = args.files * (args.kib << 10)
    print(os.popen("uptime").read().strip())
    cores = os.cpu_count()
    pigz = shutil.which("pigz")
    print(f"{args.files} x {args.kib} KiB of {'access-log' if args.text == 'access' else 'short repeated'} text ({source / 1e6:.1f} MB), concurrency {args.concurrency}, "
          f"fake-gcs-server, gzip levels {args.levels}, {args.rounds} rounds")
    levels = [int(level) for level in args.levels.split(",")]
    rounds = []
    for round_index in range(args.rounds):
        results = {"plain": hoist_run(args, work, logs, None)}
        for level in levels:
            results[f"gzip{level}"] = hoist_run(args, work, logs, level)
        results["rclone"] = rclone_run(args, logs)
        for level in levels:
            wall, cpu, size = gzip_cpu("gzip", level, logs)
            results[f"gzip -{level}"] = (wall, cpu, 0, size)
            if pigz:
                wall, cpu, size = gzip_cpu(f"pigz -p {cores}", level, logs)
                results[f"pigz -{level}"] = (wall, cpu, 0, size)
        rounds.append(results)
        for name, (wall, cpu, rss, size) in results.items():
            print(f"  round {round_index + 1} {name:7}: {wall:6.2f} s  {args.files / wall:7.1f} files/s  CPU {cpu:5.2f} s  "
                  f"RSS {rss / 1e6:5.1f} MB  {'stored' if rss else 'made  '} {size / 1e6:7.2f} MB")
        for level in levels:
            limit = max(results["plain"][0], results[f"gzip -{level}"][1] / cores)
            print(f"  round {round_index + 1} gzip{level} limit max(plain, gzip -{level} CPU / {cores}) {limit:.2f} s: "
                  f"hoist takes {results[f'gzip{level}'][0] / limit:.2f}x (at most 1.25 asked)")
    for level in levels:
        speed = [r["plain"][0] / r[f"gzip{level}"][0] for r in rounds]
        bytes_ratio = [r[f"gzip{level}"][3] / r["plain"][3] for r in rounds]
        print(f"  gzip level {level}/plain files/s: {median(speed):.2f} (each: {', '.join(f'{v:.2f}' for v in speed)}; "
              f"at least 0.80 asked)   bytes stored: {median(bytes_ratio):.3f} (at most 0.25 asked)")
    for level in levels:
        over = [r[f"gzip{level}"][0] / max(r["plain"][0], r[f"gzip -{level}"][1] / cores) for r in rounds]
        print(f"  gzip level {level} against its limit: {median(over):.2f}x (each: {', '.join(f'{v:.2f}' for v in over)}; "
              f"at most 1.25 asked)")
    versus_rclone = [r["rclone"][0] / r["plain"][0] for r in rounds]
    print(f"  plain hoist/rclone files/s: {median(versus_rclone):.2f}")
    print(os.popen("uptime").read().strip())
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
