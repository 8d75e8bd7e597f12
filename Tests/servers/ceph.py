#!/usr/bin/env python3
"""A one-node Ceph cluster with its RADOS Gateway, for Hoist's S3 tests and benchmarks.

Debian's packages (`radosgw ceph-mon ceph-osd`, which `scripts/setup --test` installs): one
monitor, one OSD on memstore (objects in memory, at most --memory bytes), pools of size 1,
no cephx (auth none), no manager, and radosgw's beast frontend on 127.0.0.1:--port (a free port
when 0) without `rgw dns name`, so virtual-host requests are not told apart from path-style
ones (as in many real set-ups). An S3 user with the suite's test key is made with radosgw-admin.

Everything lives in a temporary folder and runs as the current user, no systemd. Prints
"ready PORT" once S3 answers (or "error MESSAGE", one line, and exits 1), then waits: SIGTERM,
SIGINT, or its parent going away (the test process, or the shell that started it) stops the
daemons and removes the folder. The daemons die with this process (PR_SET_PDEATHSIG) even
when it is killed with SIGKILL; the folder is then left, and the next start removes it.
"""
import argparse
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, default=0, help="radosgw's port (0: a free one)")
parser.add_argument("--access-key", default="AKIDHOISTTEST")
parser.add_argument("--secret-key", default="hoist/test+secret")
parser.add_argument("--memory", default=str(2 << 30), help="memstore's size in bytes")
parser.add_argument("--timeout", type=float, default=90, help="seconds to wait for the cluster")
args = parser.parse_args()

PREFIX = "hoist-ceph-"
NEEDED = ["ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph"]


def say_error(message):
    """The one line a test reads (stdout), and the whole on stderr."""
    print("error " + " | ".join(message.splitlines())[:2000], flush=True)
    print(f"ceph.py: {message}", file=sys.stderr, flush=True)


missing = [name for name in NEEDED if shutil.which(name) is None]
if missing:
    say_error("%s not found: install Debian's radosgw ceph-mon ceph-osd (scripts/setup --test does)" % ", ".join(missing))
    sys.exit(1)
# A test process's threads may block these; a child inherits that mask.
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def remove_stale_folders():
    """Folders of earlier clusters whose helper is gone (killed with SIGKILL)."""
    base = tempfile.gettempdir()
    for name in os.listdir(base):
        if not name.startswith(PREFIX):
            continue
        folder = os.path.join(base, name)
        try:
            pid = int(open(os.path.join(folder, "helper.pid")).read())
            os.kill(pid, 0)
            continue            # still running
        except ProcessLookupError:
            pass
        except (OSError, ValueError):
            # No pid file: a folder being made right now, or a broken one; only old ones go.
            if time.time() - os.path.getmtime(folder) < 600:
                continue
        shutil.rmtree(folder, ignore_errors=True)


remove_stale_folders()
root = tempfile.mkdtemp(prefix=PREFIX)
with open(os.path.join(root, "helper.pid"), "w") as f:
    f.write(str(os.getpid()))
parent = os.getppid()
port = args.port or free_port()
mon_port = free_port()
fsid = str(uuid.uuid4())
conf = os.path.join(root, "ceph.conf")
for sub in ("run", "log", "mon", "osd", "rgw"):
    os.mkdir(os.path.join(root, sub))
with open(conf, "w") as f:
    f.write(f"""[global]
fsid = {fsid}
mon host = [v2:127.0.0.1:{mon_port}]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = false
run dir = {root}/run
admin socket = {root}/run/$name.asok
pid file = {root}/run/$name.pid
log file = {root}/log/$name.log
log to stderr = false
err to stderr = true
mon cluster log file = {root}/log/cluster.log
keyring = /dev/null
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail crit = 1
mon data avail warn = 2
mon max pg per osd = 1000
osd crush chooseleaf type = 0

[mon]
mon data = {root}/mon/$id

[osd]
osd data = {root}/osd/$id
osd objectstore = memstore
memstore device bytes = {args.memory}
osd max object size = 1073741824

[client.rgw]
# radosgw asks for an encrypted link to the monitor (`secure`) by default; with no cephx
# there is none to have, and it retries forever.
ms mon client mode = crc
rgw data = {root}/rgw
rgw frontends = beast endpoint=127.0.0.1:{port}
rgw enable usage log = false
""")

libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent():
    libc.prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG: this helper's main thread started it


daemons = []


def stop(*_):
    for daemon in daemons:
        daemon.kill()
    for daemon in daemons:
        daemon.wait()
    shutil.rmtree(root, ignore_errors=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
deadline = time.monotonic() + args.timeout


def run(*command):
    try:
        done = subprocess.run(["/usr/bin/env", *command, "--conf", conf], capture_output=True, text=True,
                              timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        fail(f"{' '.join(command)} did not finish in {args.timeout} s")
    if done.returncode != 0:
        fail(f"{' '.join(command)} exited {done.returncode}: {(done.stderr or done.stdout).strip()[-2000:]}")
    return done.stdout


def daemon(*command):
    process = subprocess.Popen(["/usr/bin/env", *command, "--conf", conf, "-f"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=open(os.path.join(root, "log", "stderr"), "a"),
                               preexec_fn=die_with_parent)
    daemons.append(process)
    return process


def fail(message):
    logs = []
    for name in sorted(os.listdir(os.path.join(root, "log"))):
        with open(os.path.join(root, "log", name), errors="replace") as f:
            lines = f.read().splitlines()[-15:]
        logs.append(f"--- {name}\n" + "\n".join(lines))
    say_error(message)
    print("\n".join(logs), file=sys.stderr, flush=True)
    for process in daemons:
        process.kill()
    shutil.rmtree(root, ignore_errors=True)
    sys.exit(1)


def wait(check, what):
    while time.monotonic() < deadline:
        for process in daemons:
            if process.poll() is not None:
                fail(f"{' '.join(process.args[1:2])} exited {process.returncode} while waiting for {what}")
        if check():
            return
        time.sleep(0.1)
    fail(f"no {what} after {args.timeout} s")


def listens(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


started = time.monotonic()
run("monmaptool", "--create", "--fsid", fsid, "--addv", "a", f"[v2:127.0.0.1:{mon_port}]",
    os.path.join(root, "monmap"))
run("ceph-mon", "--mkfs", "-i", "a", "--monmap", os.path.join(root, "monmap"))
daemon("ceph-mon", "-i", "a")
wait(lambda: listens(mon_port), "monitor")
osd_uuid = str(uuid.uuid4())
osd_id = run("ceph", "osd", "new", osd_uuid).strip()
os.mkdir(os.path.join(root, "osd", osd_id))
run("ceph-osd", "-i", osd_id, "--mkfs", "--osd-uuid", osd_uuid)
daemon("ceph-osd", "-i", osd_id)
# radosgw makes its pools and zone on its first start, and waits for the OSD itself.
daemon("radosgw", "-n", "client.rgw")
wait(lambda: listens(port), "radosgw")
run("radosgw-admin", "user", "create", "--uid", "hoist", "--display-name", "Hoist tests",
    "--access-key", args.access_key, "--secret-key", args.secret_key)
print(f"ready {port}", flush=True)
print(f"ceph.py: up in {time.monotonic() - started:.1f} s in {root}", file=sys.stderr, flush=True)
while True:
    time.sleep(1)
    if os.getppid() != parent:
        stop()
    for process in daemons:
        if process.poll() is not None:
            fail(f"{' '.join(process.args[1:2])} exited {process.returncode}")
