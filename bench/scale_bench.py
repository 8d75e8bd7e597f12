#!/usr/bin/env python3
"""Per-file cost at the scale cron jobs run at: a tree of N one-byte files (folders of 1,000),
uploaded to a local bucket by Hoist and to a local folder by rclone, then run again with nothing
changed, then planned; `find -printf` walks the same tree as the floor. Optionally plans a tree
of a million files. Prints wall time, CPU seconds and peak RSS of each, and the ratios.

CPU and peak RSS come from GNU time (wait4 on the tool), so each tool is measured alike."""
import argparse
import os
import shutil
import subprocess
import sys
import time


def timed(command, cwd=None):
    """(wall s, cpu s, peak RSS MiB, stdout) of a command run under GNU time."""
    start = time.monotonic()
    result = subprocess.run(["/usr/bin/time", "-f", "TIME %U %S %M"] + command, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - start
    line = [l for l in result.stderr.splitlines() if l.startswith("TIME ")][-1].split()
    if result.returncode != 0:
        sys.exit(f"{command[0]} failed ({result.returncode}): {result.stderr[-2000:]}")
    return wall, float(line[1]) + float(line[2]), int(line[3]) / 1024, result.stdout


def make_tree(root, files, per=1000, size=1):
    marker = os.path.join(root, f".done-{files}")
    if os.path.exists(marker):
        return
    shutil.rmtree(root, ignore_errors=True)
    content = b"x" * size
    for d in range((files + per - 1) // per):
        folder = os.path.join(root, "src", f"d{d:04d}")
        os.makedirs(folder)
        for f in range(min(per, files - d * per)):
            with open(os.path.join(folder, f"f{f:04d}.txt"), "wb") as out:
                out.write(content)
    open(marker, "w").close()


def row(name, measured, peer=None):
    wall, cpu, rss, _ = measured
    text = f"  {name:<34} {wall:8.2f} s  CPU {cpu:7.2f} s  peak {rss:7.1f} MiB"
    if peer:
        text += f"   ({wall / peer[0]:.2f}x the peer's time, {cpu / max(peer[1], 0.01):.2f}x its CPU)"
    print(text, flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hoist", required=True)
    parser.add_argument("--rclone", required=True)
    parser.add_argument("--files", type=int, default=300_000)
    parser.add_argument("--million", type=int, default=1_000_000, help="files of the plan-only tree (0: skip)")
    parser.add_argument("--work", default="/tmp/hoist-scale")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--settle", type=float, default=40, help="seconds to wait after deleting the last run's output")
    args = parser.parse_args()

    tree = os.path.join(args.work, f"tree-{args.files}")
    print(f"building a tree of {args.files:,} one-byte files in {tree} ...", flush=True)
    make_tree(tree, args.files)
    job = os.path.join(tree, "job.yaml")
    for leftover in ["bucket", "journal.sqlite", "journal.sqlite-wal", "journal.sqlite-shm", "journal.sqlite.lock", "rclone-dest"]:
        path = os.path.join(tree, leftover)
        shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else (os.path.exists(path) and os.remove(path))
    with open(job, "w") as out:
        out.write(f"version: 1\nname: scale\njournal: journal.sqlite\nstorage: {{ url: 'file:bucket' }}\n"
                  f"files: [{{ root: src }}]\nupload: {{ concurrency: {args.concurrency} }}\n")
    # On ext4 without a journal, creating inodes soon after many were deleted scans past the
    # recently deleted ones: let the last run's deletions age so neither tool pays for them.
    subprocess.run(["sync"])
    time.sleep(args.settle)

    print(f"\n{args.files:,} files, concurrency {args.concurrency}, local bucket / local folder:")
    find = timed(["find", os.path.join(tree, "src"), "-type", "f", "-printf", "%p %s %T@\n"])
    row("find -printf", find)
    rclone = ["--transfers", str(args.concurrency), "--checkers", str(args.concurrency), "-q"]
    rclone_first = timed([args.rclone, "copy", os.path.join(tree, "src"), os.path.join(tree, "rclone-dest")] + rclone)
    hoist_first = timed([args.hoist, "run", "--quiet", job])
    row("first run: rclone copy", rclone_first)
    row("first run: hoist run", hoist_first, rclone_first)
    rclone_again = timed([args.rclone, "copy", os.path.join(tree, "src"), os.path.join(tree, "rclone-dest")] + rclone)
    hoist_again = timed([args.hoist, "run", "--quiet", job])
    row("no-change run: rclone copy", rclone_again)
    row("no-change run: hoist run", hoist_again, rclone_again)
    print(f"  {'':<34} hoist's no-change run is {hoist_again[0] / find[0]:.2f}x find's time")
    rclone_plan = timed([args.rclone, "copy", "--dry-run", os.path.join(tree, "src"), os.path.join(tree, "rclone-dest")] + rclone)
    hoist_plan = timed([args.hoist, "plan", "--summary", job])
    row("plan: rclone copy --dry-run", rclone_plan)
    row("plan: hoist plan --summary", hoist_plan, rclone_plan)

    if args.million:
        big = os.path.join(args.work, f"tree-{args.million}")
        print(f"\nbuilding a tree of {args.million:,} empty files in {big} ...", flush=True)
        make_tree(big, args.million, size=0)
        with open(os.path.join(big, "job.yaml"), "w") as out:
            out.write("version: 1\nname: million\nstorage: { url: 'file:bucket' }\n"
                      "files: [{ root: src, include: '**/*.txt', destination: 'p/{dir}/{name}' }]\n")
        subprocess.run(["sync"])
        find = timed(["find", os.path.join(big, "src"), "-type", "f", "-printf", "%p %s %T@\n"])
        plan = timed([args.hoist, "plan", "--summary", "--journal", os.path.join(big, "none.sqlite"), os.path.join(big, "job.yaml")])
        print(f"\nplan of {args.million:,} files:")
        row("find -printf", find)
        row("hoist plan --summary", plan)
        print(f"  {'':<34} {plan[0] / find[0]:.2f}x find's time, peak {plan[2]:.1f} MiB")


if __name__ == "__main__":
    main()
