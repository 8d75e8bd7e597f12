#!/usr/bin/env python3
"""The removal gate under kill -9 and faults: one job with a `move` set (logs) and a
`mirror: listed` set (a site) on moto's S3 server, behind the fault proxy, run N times with a fresh random
fault each run (PUT, Complete, DELETE, HEAD answered 500/503, a PUT cut, a connection reset) and
killed with SIGKILL at a random moment; between runs logs are added and site files added and
removed. After every run: each log file that is gone from disk has its object byte for byte, and
no object of a site file that exists and was stored before is gone. A last run without faults or
kill must move every log and mirror the site exactly. Prints one line a run and a verdict; exits
1 on any loss.

    bench/removal-kill-loop [--runs 40] [--seed N]
"""
import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import boto3

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VENV = os.path.join(ROOT, ".venv-test", "bin")
sys.path.insert(0, HERE)
from kill_loop import free_port  # noqa: E402
from s3_bench import wait_for_port  # noqa: E402


FAULTS = [
    ["--fail", "503:2:PUT"], ["--fail", "500:1:PUT"], ["--fail", "503:1:POST"], ["--fail", "500:1:DELETE"],
    ["--fail", "503:2:HEAD"], ["--cut-after", "70000:1:PUT"], ["--reset", "1:PUT"], ["--reset", "1:DELETE"],
    ["--reset", "1:HEAD"], ["--stall", "1:1:PUT"], [],
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hoist", required=True)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="hoist-removal-kill-")
    moto_port = free_port()
    moto = subprocess.Popen([os.path.join(VENV, "moto_server"), "-H", "127.0.0.1", "-p", str(moto_port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proxy = None
    lost = []
    try:
        wait_for_port(moto_port, moto, "moto")
        s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{moto_port}", region_name="us-east-1",
                          aws_access_key_id="test", aws_secret_access_key="test")
        s3.create_bucket(Bucket="kill")
        logs, site = os.path.join(work, "logs"), os.path.join(work, "site")
        os.makedirs(logs)
        os.makedirs(site)
        written = {}      # log relative path -> bytes (what must be stored once it is gone)
        stored_site = set()   # site files a complete run stored
        serial = 0

        def add_logs(count):
            nonlocal serial
            for _ in range(count):
                serial += 1
                name = f"d{serial % 5}/app-{serial:05d}.log"
                data = os.urandom(rng.choice([100, 5000, 70_000, 300_000]))
                os.makedirs(os.path.dirname(os.path.join(logs, name)), exist_ok=True)
                with open(os.path.join(logs, name), "wb") as out:
                    out.write(data)
                written[name] = data

        def object_bytes(key):
            try:
                return s3.get_object(Bucket="kill", Key=key)["Body"].read()
            except s3.exceptions.NoSuchKey:
                return None

        def check(label):
            for name, data in written.items():
                if not os.path.exists(os.path.join(logs, name)) and object_bytes("logs/" + name) != data:
                    lost.append(f"{label}: logs/{name} removed, its object is not its bytes")
            for name in sorted(stored_site):
                if os.path.exists(os.path.join(site, name)) and object_bytes("site/" + name) is None:
                    lost.append(f"{label}: site/{name} exists, its object was deleted")

        for index in range(40):
            with open(os.path.join(site, f"p{index:03d}.html"), "w") as out:
                out.write(f"page {index}\n" * (index + 1))
        add_logs(20)
        manifest = os.path.join(work, "job.yaml")
        env = dict(os.environ, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test")
        for run in range(args.runs + 1):
            last = run == args.runs
            fault = [] if last else rng.choice(FAULTS)
            proxy_port = free_port()
            proxy = subprocess.Popen([os.path.join(VENV, "python3"), os.path.join(ROOT, "Tests/servers/faultproxy.py"),
                                      "--upstream", f"127.0.0.1:{moto_port}", "--port", str(proxy_port)] + fault,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_for_port(proxy_port, proxy, "the fault proxy")
            with open(manifest, "w") as out:
                out.write(f"""version: 1
name: kill
journal: journal.sqlite
storage: {{ url: 's3://kill', endpoint: 'http://127.0.0.1:{proxy_port}', region: us-east-1, pathStyle: true }}
files:
  - {{ root: logs, destination: 'logs/{{relpath}}', move: true, removeEmptyFolders: true }}
  - {{ root: site, destination: 'site/{{relpath}}', mirror: listed }}
upload: {{ concurrency: 4, retries: 1, maxDelete: 100% }}
""")
            started = time.monotonic()
            process = subprocess.Popen([args.hoist, "run", "--quiet", manifest], env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT)
            killed = False
            if not last:
                try:
                    process.wait(timeout=rng.uniform(0.05, 0.8))
                except subprocess.TimeoutExpired:
                    process.send_signal(signal.SIGKILL)
                    killed = True
            output = process.communicate(timeout=300)[0].decode(errors="replace")
            proxy.kill()
            proxy.wait()
            proxy = None
            label = f"run {run + 1}"
            print(f"{label}: fault {' '.join(fault) or 'none'}, {'killed' if killed else f'exit {process.returncode}'} "
                  f"after {time.monotonic() - started:.2f} s", flush=True)
            if not killed and process.returncode == 0:
                stored_site = {os.path.relpath(os.path.join(d, f), site) for d, _, fs in os.walk(site) for f in fs}
            check(label)
            if last:
                if process.returncode != 0:
                    lost.append(f"the last run failed: {output[-2000:]}")
                left = [os.path.join(d, f) for d, _, fs in os.walk(logs) for f in fs]
                if left:
                    lost.append(f"the last run left {len(left)} logs")
                keys = {o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket="kill", Prefix="site/")
                        for o in page.get("Contents", [])}
                if keys != {"site/" + name for name in stored_site}:
                    lost.append(f"the site's objects are not its files: {sorted(keys ^ {'site/' + n for n in stored_site})[:5]}")
                break
            # Between runs: new logs, a page removed, a page added.
            add_logs(rng.randint(1, 6))
            pages = sorted(os.listdir(site))
            if pages and rng.random() < 0.5:
                os.remove(os.path.join(site, rng.choice(pages)))
            with open(os.path.join(site, f"n{run:03d}.html"), "w") as out:
                out.write(f"new page {run}\n")
        print(f"seed {args.seed}: {args.runs} runs with faults and kill -9, {len(written)} logs moved, "
              f"{len(stored_site)} pages mirrored: " + ("nothing lost" if not lost else f"{len(lost)} LOSSES"))
        for line in lost[:20]:
            print("  " + line)
        return 1 if lost else 0
    finally:
        if proxy:
            proxy.kill()
        moto.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
