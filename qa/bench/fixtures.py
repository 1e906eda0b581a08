#!/usr/bin/python3
"""Start-up and peak RSS of both agents on the sysfs and cpuinfo of real
machines: the fixtures of internal/pmu/testdata.

The script moves itself into a private mount namespace, then, fixture by
fixture, bind-mounts the fixture's sys/ over /sys and its proc/cpuinfo
over /proc/cpuinfo there, so that both agents, and libpfm4 inside the C
one, read that machine's PMUs and CPUs; the machine's own mounts are
never touched. Each start runs the agent in pipe mode, as pmcd does: it
starts up and sends its CREDS PDU (the end of start-up here); then its
stdin is closed, and it reads EOF and exits. Per start it records the
time from fork to that first byte, the CPU time of the whole run
(wait4's rusage: start-up and exit) and its peak RSS then (VmHWM).

What a fixture cannot give: the kernel below is this machine's. A fixture
lists more CPUs than this machine has, and every open on a CPU it lacks
fails at once, so counters are held on this machine's CPUs only, and the
RSS is less than on the real machine (internal/agent's scale benchmarks
give the cost per CPU); hardware events fail as they do on this VM.

libpfm4 detects the CPU by CPUID, not cpuinfo: in the C agent it sees
this VM's CPU (AMD family 0x1a, which Debian's libpfm4 4.13 does not
know) and activates its generic perf PMUs only, which is what both
configurations' [perf] sections need. Forcing the fixture's core PMU
(LIBPFM_FORCE_PMU=skx) activates that PMU alone, without the perf PMU,
and the C agent then counts no [perf] event at all. Ours detects the
fixture's core, uncore and RAPL PMUs from its cpuinfo and sysfs, as on
the real machine.

Usage: fixtures.py [--rounds N] [--fixtures a,b] [--go-agent PATH] [--c-agent PATH]
(BENCH_ROUNDS, BENCH_FIXTURES_LIST, BENCH_GO_AGENT, BENCH_C_AGENT). Needs root.
"""

import argparse
import ctypes
import ctypes.util
import json
import os
import select
import shutil
import statistics
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.normpath(os.path.join(here, "..", ".."))
TESTDATA = os.path.join(repo, "internal", "pmu", "testdata")
C_AGENT = "/var/lib/pcp/pmdas/perfevent/pmdaperfevent"

FIXTURES = {
    "skylake": "Skylake-SP, 36 CPUs, uncore IMC",
    "sapphirerapids": "Sapphire Rapids, 160 CPUs, uncore CHA, IMC, UPI, PCU",
    "zen5": "Zen 5, 2 CPUs, amd_df, amd_l3, amd_umc",
}
CONFIGS = {
    "stock": os.path.join(repo, "perfevent.conf"),
    "default": os.path.join(repo, "qa", "testdata", "vm.conf"),
}

# Ours as shipped, ours without the metric catalog's events (the C agent
# has no catalog), and the C agent, in this order in every round.
LABELS = ("go", "go_nocatalog", "c")

CLONE_NEWNS = 0x00020000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def check(rc, what):
    if rc != 0:
        e = ctypes.get_errno()
        sys.exit("fixtures.py: %s: %s" % (what, os.strerror(e)))


def private_namespace():
    check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making / private")


def bind(src, dst):
    check(libc.mount(src.encode(), dst.encode(), None, MS_BIND | MS_REC, None), "bind %s on %s" % (src, dst))


def unbind(dst):
    check(libc.umount2(dst.encode(), MNT_DETACH), "umount %s" % dst)


def vm_hwm(pid):
    """VmHWM of a live process, kB: its peak RSS since its exec (wait4's
    ru_maxrss would carry the forking Python's)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def start(argv, env, timeout=20.0):
    """One start: (ms to the first byte on stdout or None, CPU ms of the
    whole run, peak RSS kB at that byte, exit status). stdin stays open
    until the peak RSS is read, as pmcd's pipe would: the agent then
    reads end of file and exits."""
    r, w = os.pipe()
    r0, w0 = os.pipe()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            null = os.open("/dev/null", os.O_RDWR)
            os.dup2(r0, 0)
            os.dup2(w, 1)
            os.dup2(null, 2)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    os.close(w)
    os.close(r0)
    first = rss = None
    ready, _, _ = select.select([r], [], [], timeout)
    if ready and os.read(r, 1):
        first = (time.perf_counter() - t0) * 1000
        rss = vm_hwm(pid)
    os.close(w0)
    # Drain what else comes so that the agent never blocks on the pipe.
    while select.select([r], [], [], timeout)[0] and os.read(r, 65536):
        pass
    os.close(r)
    _, status, ru = os.wait4(pid, 0)
    return first, (ru.ru_utime + ru.ru_stime) * 1000, rss, status


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def spread(vals):
    vals = [v for v in vals if v is not None]
    return (min(vals), max(vals)) if vals else (None, None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("BENCH_ROUNDS", "5")))
    ap.add_argument("--fixtures", default=os.environ.get("BENCH_FIXTURES_LIST", ",".join(FIXTURES)))
    ap.add_argument("--go-agent", default=os.environ.get("BENCH_GO_AGENT") or os.path.join(repo, "bin", "pmdaperfevent"))
    ap.add_argument("--c-agent", default=os.environ.get("BENCH_C_AGENT", C_AGENT))
    ap.add_argument("--out", default=os.environ.get("BENCH_OUT"))
    o = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("fixtures.py: needs root (a private mount namespace, and both agents drop to pcp)")
    for a in (o.go_agent, o.c_agent):
        if not os.access(a, os.X_OK):
            sys.exit("fixtures.py: %s: not an executable file" % a)
    base = tempfile.mkdtemp(prefix="perfevent-fixtures-")
    os.chmod(base, 0o755)
    private_namespace()
    results = {}
    lines = []
    print("== start-up on real machines' sysfs and cpuinfo (internal/pmu/testdata): fork → CREDS, ms; "
          "CPU of start-up and exit, ms; peak RSS, kB; %d rounds, go, go --no-catalog, then c" % o.rounds)
    print("load at start: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
    try:
        for fx in o.fixtures.split(","):
            what = FIXTURES[fx]
            root = os.path.join(TESTDATA, fx)
            for cname, conf in CONFIGS.items():
                runs = {label: [] for label in LABELS}
                for label in LABELS:
                    d = os.path.join(base, fx, cname, label, "pmdas", "perfevent")
                    os.makedirs(d)
                    shutil.copy(conf, os.path.join(d, "perfevent.conf"))
                bind(os.path.join(root, "sys"), "/sys")
                bind(os.path.join(root, "proc", "cpuinfo"), "/proc/cpuinfo")
                try:
                    for r in range(o.rounds + 1):
                        for label in LABELS:
                            pmdas = os.path.join(base, fx, cname, label, "pmdas")
                            env = dict(os.environ, PCP_PMDAS_DIR=pmdas)
                            log = os.path.join(pmdas, "perfevent.log")
                            if label.startswith("go"):
                                argv = [o.go_agent, "-c", os.path.join(pmdas, "perfevent", "perfevent.conf"), "-l", log,
                                        "--pmids", os.path.join(pmdas, "pmids"), "--lockfile", os.path.join(pmdas, "perfevent", "perflock")]
                                if label == "go_nocatalog":
                                    argv.append("--no-catalog")
                            else:
                                argv = [o.c_agent, "-l", log]
                            x = start(argv, env)
                            if r > 0:  # the first round only warms the page cache
                                runs[label].append(x)
                finally:
                    unbind("/proc/cpuinfo")
                    unbind("/sys")
                row = {"fixture": fx, "machine": what, "config": cname}
                for label in LABELS:
                    rs = runs[label]
                    row[label] = {"startup_ms": [x[0] for x in rs], "cpu_ms": [x[1] for x in rs],
                                  "rss_kb": [x[2] for x in rs], "status": [x[3] for x in rs]}
                results["%s_%s" % (fx, cname)] = row
                g, n, c = row["go"], row["go_nocatalog"], row["c"]
                ratios = [a / b for a, b in zip(g["cpu_ms"], c["cpu_ms"]) if a and b]
                note = ""
                if not any(c["startup_ms"]):
                    note = " (C: no CREDS: it did not start)"
                line = ("fixture_%s_%s startup_ms go=%s c=%s cpu_ms go=%s c=%s ratio=%s spread=%s rss_kb go=%s c=%s "
                        "no_catalog: startup_ms=%s cpu_ms=%s rss_kb=%s%s" % (
                            fx, cname, fmt(med(g["startup_ms"])), fmt(med(c["startup_ms"])),
                            fmt(med(g["cpu_ms"])), fmt(med(c["cpu_ms"])), fmt(med(ratios)),
                            "-".join(fmt(v) for v in spread(ratios)), fmt(med(g["rss_kb"])), fmt(med(c["rss_kb"])),
                            fmt(med(n["startup_ms"])), fmt(med(n["cpu_ms"])), fmt(med(n["rss_kb"])), note))
                print(line)
                lines.append(line)
    finally:
        print("load at end: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
        if o.out:
            with open(os.path.join(o.out, "fixtures.json"), "w") as f:
                json.dump(results, f, indent=1)
        shutil.rmtree(base, ignore_errors=True)
    return 0


def fmt(v):
    if v is None:
        return "-"
    if v >= 100:
        return "%.0f" % v
    return "%.3g" % v


if __name__ == "__main__":
    sys.exit(main())
