#!/usr/bin/env python3
"""Durability check at scale: kill -9 a job N times at random moments, then run it to the end,
and compare every object on the server with its local file (MD5 of the downloaded bytes).

    bench/kill-loop                       # 256 MiB + 300 small files, 8 kills, fake-gcs-server
    bench/kill-loop --big-mib 64 --kills 4

fake-gcs-server finalizes a truncated object whenever a session's status is asked: each resumed
run meets a short object, which Hoist must refuse, delete and upload again. Prints one line per
run and a verdict; exits 1 when any object differs.
"""
import argparse
import hashlib
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pattern(size, seed):
    block = bytes((i * 31 + seed) & 0xFF for i in range(65536))
    return (block * (size // len(block) + 1))[:size]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hoist", required=True)
    parser.add_argument("--fake-gcs", required=True)
    parser.add_argument("--big-mib", type=int, default=256)
    parser.add_argument("--small", type=int, default=300)
    parser.add_argument("--kills", type=int, default=8)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="hoist-kill-")
    port = free_port()
    server = subprocess.Popen([args.fake_gcs, "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
                               "-backend", "memory", "-log-level", "error"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        bucket = "kill-loop"
        request = urllib.request.Request(f"http://127.0.0.1:{port}/storage/v1/b", data=b'{"name":"kill-loop"}',
                                         headers={"Content-Type": "application/json"}, method="POST")
        urllib.request.urlopen(request).read()

        files = {}
        os.makedirs(f"{work}/src/small")
        big = pattern(args.big_mib << 20, 3)
        with open(f"{work}/src/big.bin", "wb") as f:
            f.write(big)
        files["big.bin"] = hashlib.md5(big).hexdigest()
        for i in range(args.small):
            data = pattern(1000 + 37 * i, i & 0xFF)
            with open(f"{work}/src/small/f{i:04}.txt", "wb") as f:
                f.write(data)
            files[f"small/f{i:04}.txt"] = hashlib.md5(data).hexdigest()
        with open(f"{work}/job.yaml", "w") as f:
            f.write(f"version: 1\nname: kill-loop\njournal: journal.sqlite\nstorage: {{ url: 'gs://{bucket}' }}\n"
                    "files: [{ root: src }]\nupload: { concurrency: 8, bandwidth: 40MB/s }\n")
        environment = dict(os.environ, STORAGE_EMULATOR_HOST=f"127.0.0.1:{port}")

        for kill in range(args.kills):
            process = subprocess.Popen([args.hoist, "run", "--quiet", f"{work}/job.yaml"], env=environment,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            delay = random.uniform(0.5, 4.0)
            time.sleep(delay)
            process.send_signal(signal.SIGKILL)
            process.wait()
            print(f"run {kill + 1}: killed after {delay:.2f} s", flush=True)
        started = time.monotonic()
        final = subprocess.run([args.hoist, "run", f"{work}/job.yaml"], env=environment, capture_output=True, text=True)
        print(f"final run: exit {final.returncode} in {time.monotonic() - started:.1f} s: {final.stdout.strip()} {final.stderr.strip()}")

        wrong = []
        for name, digest in files.items():
            url = f"http://127.0.0.1:{port}/download/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media"
            try:
                body = urllib.request.urlopen(url).read()
            except Exception as error:  # a missing object is a wrong one
                wrong.append(f"{name}: {error}")
                continue
            if hashlib.md5(body).hexdigest() != digest:
                wrong.append(f"{name}: {len(body)} bytes, md5 differs")
        print(f"{len(files) - len(wrong)} of {len(files)} objects byte-exact after {args.kills} kills")
        for line in wrong[:20]:
            print("  " + line)
        sys.exit(1 if wrong or final.returncode != 0 else 0)
    finally:
        server.terminate()


if __name__ == "__main__":
    import urllib.parse
    main()
