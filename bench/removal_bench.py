#!/usr/bin/env python3
"""What the removal gate costs, as an A/B of two hoist builds in one run, rounds
interleaved A B B A: a move job's first run (N small files to a fresh prefix of fake-gcs-server,
each removed once stored; the gate adds one journal look-up per upload and the ctime check), and
a mirror job's no-change run of a tree of M one-byte files on a local bucket (the gate adds a
candidate check per journal row). Prints each round and the medians: files/s, wall and CPU
seconds, peak RSS, and B/A.

CPU and peak RSS come from GNU time (wait4 on the tool), as in bench/scale."""
import argparse
import os
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale_bench import make_tree, timed  # noqa: E402
from upload_bench import Server  # noqa: E402


def write_small(folder, count, size):
    os.makedirs(folder)
    for index in range(count):
        sub = os.path.join(folder, f"d{index % 20:02d}")
        os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, f"f{index:05d}.log"), "wb") as out:
            out.write(os.urandom(size))


def move_run(hoist, server, work, label, count, size, round_number):
    """One move job's first run: a fresh tree, journal and prefix."""
    folder = os.path.join(work, f"move-{label}-{round_number}")
    shutil.rmtree(folder, ignore_errors=True)
    write_small(os.path.join(folder, "src"), count, size)
    manifest = os.path.join(folder, "job.yaml")
    with open(manifest, "w") as out:
        out.write(f"version: 1\nname: move\njournal: journal.sqlite\nstorage: {{ url: 'gs://{server.bucket}' }}\n"
                  f"files: [{{ root: src, destination: 'm-{label}-{round_number}/{{relpath}}', move: true }}]\n"
                  "upload: { concurrency: 8 }\n")
    env = dict(os.environ, STORAGE_EMULATOR_HOST=f"127.0.0.1:{server.port}")
    result = timed_env([hoist, "run", "--quiet", manifest], env)
    left = sum(len(files) for _, _, files in os.walk(os.path.join(folder, "src")))
    if left:
        sys.exit(f"{label}: {left} files were not moved")
    shutil.rmtree(folder, ignore_errors=True)
    return result


def timed_env(command, env):
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        return timed(command)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def mirror_state(hoist, work, label, tree):
    """A mirror job of `tree` on its own local bucket and journal, its first run done."""
    folder = os.path.join(work, f"mirror-{label}")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    manifest = os.path.join(folder, "job.yaml")
    with open(manifest, "w") as out:
        out.write(f"version: 1\nname: mirror\njournal: journal.sqlite\nstorage: {{ url: 'file:bucket' }}\n"
                  f"files: [{{ root: {tree}, destination: 'site/{{relpath}}', mirror: true }}]\n"
                  "upload: { concurrency: 8 }\n")
    timed([hoist, "run", "--quiet", manifest])
    return manifest


def report(name, count, rounds):
    """Rounds are [(a, b)] of timed() results."""
    print(f"{name} (medians of {len(rounds)} rounds)")
    for label, index in (("A", 0), ("B", 1)):
        walls = [r[index][0] for r in rounds]
        cpus = [r[index][1] for r in rounds]
        rss = [r[index][2] for r in rounds]
        print(f"  {label}: {statistics.median(walls):7.2f} s  {count / statistics.median(walls):9.0f} files/s  "
              f"CPU {statistics.median(cpus):6.2f} s  peak {statistics.median(rss):6.1f} MiB")
    ratios = [r[0][0] / r[1][0] for r in rounds]
    print(f"  B's rate / A's: {statistics.median(ratios):.3f}x (rounds: {', '.join(f'{x:.3f}' for x in ratios)})", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--a", required=True, help="hoist before (A)")
    parser.add_argument("--b", required=True, help="hoist after (B)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--move-files", type=int, default=2000)
    parser.add_argument("--move-size", type=int, default=4096)
    parser.add_argument("--mirror-files", type=int, default=300_000)
    parser.add_argument("--work", default="/tmp/hoist-removal-bench")
    parser.add_argument("--only", choices=("move", "mirror"), help="run one of the two")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)

    rounds = []
    for number in range(args.rounds if args.only != "mirror" else 0):
        order = ("a", "b") if number % 2 == 0 else ("b", "a")
        got = {}
        for label in order:
            # A fresh server each run: fake-gcs-server's memory backend slows as objects pile up.
            server = Server()
            try:
                got[label] = move_run(getattr(args, label), server, args.work, label, args.move_files, args.move_size, number)
            finally:
                server.stop()
        rounds.append((got["a"], got["b"]))
        print(f"  move round {number + 1}: A {got['a'][0]:.2f} s, B {got['b'][0]:.2f} s", flush=True)
    if rounds:
        report(f"move job, first run, {args.move_files} x {args.move_size} B to fake-gcs-server", args.move_files, rounds)

    if args.mirror_files and args.only != "move":
        tree = os.path.join(args.work, "tree")
        make_tree(tree, args.mirror_files)
        manifests = {label: mirror_state(getattr(args, label), args.work, label, os.path.join(tree, "src")) for label in ("a", "b")}
        rounds = []
        for number in range(args.rounds):
            order = ("a", "b") if number % 2 == 0 else ("b", "a")
            got = {label: timed([getattr(args, label), "run", "--quiet", manifests[label]]) for label in order}
            rounds.append((got["a"], got["b"]))
            print(f"  mirror round {number + 1}: A {got['a'][0]:.2f} s, B {got['b'][0]:.2f} s", flush=True)
        report(f"mirror job, no-change run, {args.mirror_files} files on a local bucket", args.mirror_files, rounds)


if __name__ == "__main__":
    main()
