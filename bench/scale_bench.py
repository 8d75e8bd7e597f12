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
    parser.add_argument("--hoist-before", help="another hoist build: no-change runs of both, interleaved, beside find's")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the interleaved no-change runs")
    args = parser.parse_args()

    tree = os.path.join(args.work, f"tree-{args.files}")
    print(f"building a tree of {args.files:,} one-byte files in {tree} ...", flush=True)
    make_tree(tree, args.files)
    rclone = ["--transfers", str(args.concurrency), "--checkers", str(args.concurrency), "-q"]

    def fresh(names, settle=None):
        for leftover in names:
            path = os.path.join(tree, leftover)
            shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else (os.path.exists(path) and os.remove(path))
        # On ext4 without a journal, creating inodes soon after many were deleted scans past the
        # recently deleted ones: let the last run's deletions age so neither tool pays for them.
        subprocess.run(["sync"])
        time.sleep(args.settle if settle is None else settle)

    print(f"\n{args.files:,} files, concurrency {args.concurrency}, local bucket / local folder:")
    find_command = ["find", os.path.join(tree, "src"), "-type", "f", "-printf", "%p %s %T@\n"]
    find = timed(find_command)
    row("find -printf", find)
    # First runs A B B A (rclone, hoist, hoist, rclone), each into a destination of its own: none
    # is deleted between runs (on ext4, creating inodes soon after many were deleted scans past
    # the deleted ones, and deleting 300,000 files loads the disk for minutes).
    firsts = {"rclone": [], "hoist": []}
    for number, tool in enumerate(["rclone", "hoist", "hoist", "rclone"]):
        fresh([f"bucket-{number}", f"journal-{number}.sqlite", f"journal-{number}.sqlite-wal", f"journal-{number}.sqlite-shm",
               f"journal-{number}.sqlite.lock", f"rclone-dest-{number}"])
        if tool == "hoist":
            job = os.path.join(tree, f"job-{number}.yaml")
            with open(job, "w") as out:
                out.write(f"version: 1\nname: scale\njournal: journal-{number}.sqlite\nstorage: {{ url: 'file:bucket-{number}' }}\n"
                          f"files: [{{ root: src }}]\nupload: {{ concurrency: {args.concurrency} }}\n")
            measured = timed([args.hoist, "run", "--quiet", job])
        else:
            rclone_copy = [args.rclone, "copy", os.path.join(tree, "src"), os.path.join(tree, f"rclone-dest-{number}")] + rclone
            measured = timed(rclone_copy)
        firsts[tool].append(measured)
        row(f"first run: {'hoist run' if tool == 'hoist' else 'rclone copy'}", measured,
            firsts["rclone"][-1] if tool == "hoist" and firsts["rclone"] else None)
    mean = {tool: tuple(sum(m[i] for m in runs) / len(runs) for i in range(3)) + ("",) for tool, runs in firsts.items()}
    row("first run: rclone copy, mean of 2", mean["rclone"])
    row("first run: hoist run, mean of 2", mean["hoist"], mean["rclone"])
    rclone_again = timed(rclone_copy)
    hoist_again = timed([args.hoist, "run", "--quiet", job])
    row("no-change run: rclone copy", rclone_again)
    row("no-change run: hoist run", hoist_again, rclone_again)
    print(f"  {'':<34} hoist's no-change run is {hoist_again[0] / find[0]:.2f}x find's time")
    if args.hoist_before:
        # The no-change walk of two builds, rounds interleaved (find, before, after, after, before).
        walls = {"find": [], "before": [], "after": []}
        for round in range(args.rounds):
            for name in ["find", "before", "after", "after", "before"] if round % 2 == 0 else ["find", "after", "before", "before", "after"]:
                command = find_command if name == "find" else [args.hoist_before if name == "before" else args.hoist, "run", "--quiet", job]
                measured = timed(command)
                walls[name].append(measured)
        for name, runs in walls.items():
            runs.sort(key=lambda m: m[0])
            median = runs[len(runs) // 2]
            row(f"no-change, median of {len(runs)}: {name}", median)
        find_median = walls["find"][len(walls["find"]) // 2][0]
        for name in ["before", "after"]:
            print(f"  {name}: {walls[name][len(walls[name]) // 2][0] / find_median:.2f}x find's time "
                  f"(CPU {walls[name][len(walls[name]) // 2][1]:.2f} s)", flush=True)
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
