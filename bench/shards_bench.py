#!/usr/bin/env python3
"""Machines side by side: a 400 MiB job of 64 files, one `hoist run` limited to 5 MB/s (one
machine's network card), then four `hoist run --shard K/4` each limited to 5 MB/s, then four
`hoist run --worker` (one shared run, files claimed as they go), all on one PostgreSQL journal,
against fake-gcs-server. Prints the times, the ratios, and checks every object's MD5 against its
file; exits 1 when any differs or a run fails.

    bench/shards [--mib 400] [--files 64] [--rate 5MB/s] [--shards 4]
"""
import argparse
import base64
import hashlib
import json
import os
import shutil
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


def wait_port(port, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port}")


def postgres(work):
    """initdb into WORK/pg (as the postgres user when root) and start it; returns (process, url)."""
    binaries = "/usr/lib/postgresql/15/bin"
    folder = os.path.join(work, "pg")
    os.mkdir(folder)
    prefix = []
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
        prefix = ["setpriv", "--reuid", "postgres", "--regid", "postgres", "--init-groups", "--"]
    password_file = os.path.join(folder, "pw")
    with open(password_file, "w") as f:
        f.write("bench")
    if os.geteuid() == 0:
        shutil.chown(password_file, "postgres", "postgres")
    subprocess.run(prefix + [f"{binaries}/initdb", "-D", f"{folder}/data", "-U", "hoist", "--pwfile", password_file,
                             "-A", "scram-sha-256", "--no-sync"], check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    server = subprocess.Popen(prefix + [f"{binaries}/postgres", "-D", f"{folder}/data", "-p", str(port), "-k", folder,
                                        "-c", "listen_addresses=127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    time.sleep(1)
    return server, f"postgres://hoist:bench@127.0.0.1:{port}/postgres"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hoist", required=True)
    parser.add_argument("--fake-gcs", required=True)
    parser.add_argument("--mib", type=int, default=400)
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--rate", default="5MB/s")
    parser.add_argument("--shards", type=int, default=4)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="hoist-shards-")
    os.chmod(work, 0o755)  # the postgres user goes through it to its own folder
    gcs_port = free_port()
    servers = [subprocess.Popen([args.fake_gcs, "-scheme", "http", "-host", "127.0.0.1", "-port", str(gcs_port),
                                 "-backend", "memory", "-log-level", "error"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        wait_port(gcs_port)
        pg, url = postgres(work)
        servers.append(pg)
        src = os.path.join(work, "src")
        os.mkdir(src)
        size = args.mib * (1 << 20) // args.files
        digests = {}
        for index in range(args.files):
            data = os.urandom(size)
            name = f"file-{index:02d}.bin"
            with open(os.path.join(src, name), "wb") as f:
                f.write(data)
            digests[name] = base64.b64encode(hashlib.md5(data).digest()).decode()
        environment = dict(os.environ, STORAGE_EMULATOR_HOST=f"127.0.0.1:{gcs_port}")
        times = {}
        for label, shards in (("one", 1), ("shards", args.shards), ("workers", args.shards)):
            bucket = f"bench-{label}"
            urllib.request.urlopen(urllib.request.Request(
                f"http://127.0.0.1:{gcs_port}/storage/v1/b", data=json.dumps({"name": bucket}).encode(),
                headers={"Content-Type": "application/json"}, method="POST")).read()
            manifest = os.path.join(work, f"{label}.yaml")
            with open(manifest, "w") as f:
                f.write(f"version: 1\nname: bench-{label}\njournal: {url}\n"
                        f"storage: {{ url: 'gs://{bucket}', multipartThreshold: 1MiB }}\n"
                        f"files: [{{ root: src }}]\nupload: {{ bandwidth: {args.rate}, concurrency: 4 }}\n")
            started = time.time()
            if label == "workers":
                commands = [[args.hoist, "run", "--quiet", "--worker", manifest] for _ in range(shards)]
            else:
                commands = [[args.hoist, "run", "--quiet", manifest] + (["--shard", f"{k}/{shards}"] if shards > 1 else [])
                            for k in range(shards)]
            processes = [subprocess.Popen(c, env=environment, stderr=subprocess.PIPE) for c in commands]
            for process in processes:
                _, err = process.communicate()
                if process.returncode != 0:
                    raise SystemExit(f"a run failed ({process.returncode}): {err.decode()}")
            times[label] = time.time() - started
            listing = json.loads(urllib.request.urlopen(
                f"http://127.0.0.1:{gcs_port}/storage/v1/b/{bucket}/o?maxResults=1000").read())
            stored = {item["name"]: item.get("md5Hash") for item in listing.get("items", [])}
            bad = [name for name, digest in digests.items() if stored.get(name) != digest]
            if bad:
                raise SystemExit(f"{len(bad)} objects differ from their files in {bucket}: {bad[:5]}")
            print(f"{label}: {shards} process(es) x {args.rate}: {args.mib} MiB in {args.files} files in {times[label]:.1f} s, "
                  f"{args.mib / times[label]:.1f} MiB/s, every object's MD5 matches", flush=True)
        print(f"ratio: {args.shards} shards on one PostgreSQL journal were {times['one'] / times['shards']:.2f}x as fast as one process")
        print(f"ratio: {args.shards} workers of one shared run were {times['one'] / times['workers']:.2f}x as fast as one process")
    finally:
        for server in servers:
            server.terminate()
            server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
