#!/usr/bin/python3
"""qa/bench/reaction.py: how fast the agent's lock-file watcher sees a
reservation start and end, per kind of holder, on the machine as it is and
with one busy process per CPU competing, over several runs.

It builds internal/reservation/lockwatch's test binary once and runs its
BenchmarkReaction and BenchmarkReactionBusy RUNS times with CYCLES lock and
unlock cycles per holder, then prints, per holder and metric, the median of
the runs with their min-max spread, and one summary line per p99 with the
5 ms target.  Each run records the 1-minute load average before it starts
(what other jobs put on the machine, before the benchmark's own busy
processes) and the share of all CPUs busy during it (/proc/stat).

    qa/bench/reaction.py [--runs 3] [--cycles 200] [--go go] [--binary reservation.test]

--binary runs a test binary built elsewhere (go test -c of another commit)
instead of building this tree's, to compare two versions on one machine.

qa/bench/run calls it (BENCH_REACTION=0 skips it; BENCH_REACTION_RUNS and
BENCH_REACTION_CYCLES set the counts).  No root needed.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

TARGET_MS = 5.0
# The "-N" suffix is GOMAXPROCS, absent when it is 1 (one CPU allowed).
LINE = re.compile(r"^Benchmark(Reaction(?:Busy)?)/(\w+)(?:-\d+)?\s+\d+\s+(.*)$")


def cpu_ticks():
    """(busy, total) clock ticks of the whole machine."""
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return sum(vals) - idle, sum(vals)


def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def parse(out):
    """{(machine, holder, metric): value} from one run's output."""
    got = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        machine = "busy" if m.group(1) == "ReactionBusy" else "as is"
        fields = m.group(3).split()
        for value, unit in zip(fields[0::2], fields[1::2]):
            if unit.endswith("-ms-p50") or unit.endswith("-ms-p99"):
                got[(machine, m.group(2), unit[: -len("-ms-p50")], unit[-3:])] = float(value)
    return got


def spread(vals):
    return "%.2f [%.2f-%.2f]" % (statistics.median(vals), min(vals), max(vals))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_REACTION_RUNS", "3")))
    ap.add_argument("--cycles", type=int, default=int(os.environ.get("BENCH_REACTION_CYCLES", "200")))
    ap.add_argument("--go", default=os.environ.get("GO", "go"))
    ap.add_argument("--binary", help="internal/reservation/lockwatch test binary to run instead of building one")
    args = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    pkg = os.path.join(repo, "internal", "reservation", "lockwatch")

    with tempfile.TemporaryDirectory(prefix="reaction-") as tmp:
        binary = os.path.abspath(args.binary) if args.binary else os.path.join(tmp, "reservation.test")
        if not args.binary:
            subprocess.run([args.go, "test", "-c", "-o", binary, "."], cwd=pkg, check=True)
        results = {}
        for i in range(args.runs):
            l0, (b0, t0) = load1(), cpu_ticks()
            p = subprocess.run([binary, "-test.run", "^$", "-test.bench", "^BenchmarkReaction(Busy)?$",
                                "-test.benchtime", "%dx" % args.cycles],
                               cwd=pkg, capture_output=True, text=True)
            b1, t1 = cpu_ticks()
            if p.returncode != 0:
                sys.stdout.write(p.stdout + p.stderr)
                sys.exit("qa/bench/reaction.py: run %d failed" % (i + 1))
            got = parse(p.stdout)
            print("run %d: 1-min load %.2f before it, %.2f after; all CPUs %.0f%% busy during it (%d cycles per holder, %d CPUs allowed)" % (
                i + 1, l0, load1(), 100.0 * (b1 - b0) / max(1, t1 - t0), args.cycles, len(os.sched_getaffinity(0))), flush=True)
            for k, v in got.items():
                results.setdefault(k, []).append(v)

    holders = sorted({k[1] for k in results}, key=lambda h: ("c", "ours", "samefd").index(h) if h in ("c", "ours", "samefd") else 9)
    cols = [("lock", "p50"), ("lock", "p99"), ("unlock", "p50"), ("unlock", "p99"), ("wake", "p99")]
    print("\nms, median of %d runs [min-max]" % args.runs)
    print("%-7s %-6s " % ("holder", "CPUs") + " ".join("%-20s" % ("%s %s" % c) for c in cols))
    summary = []
    for machine in ("as is", "busy"):
        for h in holders:
            row = []
            for what, q in cols:
                vals = results.get((machine, h, what, q))
                row.append("%-20s" % (spread(vals) if vals else "-"))
            print("%-7s %-6s " % (h, machine) + " ".join(row))
            for what in ("lock", "unlock"):
                vals = results.get((machine, h, what, "p99"))
                if not vals:
                    continue
                med = statistics.median(vals)
                if max(vals) <= TARGET_MS:
                    verdict = "ok"
                elif min(vals) > TARGET_MS:
                    verdict = "MISS"
                else:
                    verdict = "NOISY(median %s)" % ("ok" if med <= TARGET_MS else "MISS")
                summary.append("reaction_%s_p99_ms_%s%s median=%.2f spread=%.2f-%.2f runs=%d target<=%g %s" % (
                    what, h, "_busy" if machine == "busy" else "", med, min(vals), max(vals), len(vals), TARGET_MS, verdict))
    print()
    print("\n".join(summary))


if __name__ == "__main__":
    main()
