#!/usr/bin/python3
"""Side-by-side benchmarks of two perfevent agents, ours (Go) and PCP's (C).

Each agent runs under its own private pmcd: the real pmcd binary, on its
own port and unix socket, with a pmcd.conf that holds only that agent, a
PMNS with only perfevent, and its own $PCP_PMDAS_DIR (so its own
perfevent.conf and perflock).  The system pmcd, its pmcd.conf and its PMNS
are never touched.  A PMAPI client in this process drives both, so process
start-up never enters a measurement.

See qa/bench/README.md for what each measure means and its caveats.
"""

import argparse
import datetime
import fcntl
import json
import math
import os
import random
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

try:
    from pcp import pmapi
    import cpmapi as c_api
except ImportError:
    sys.exit("pcpbench: the PCP python module is missing: apt-get install -y python3-pcp, "
             "and run this with /usr/bin/python3 (a pyenv python3 lacks it)")

PMCD = "/usr/lib/pcp/bin/pmcd"
C_AGENT = "/var/lib/pcp/pmdas/perfevent/pmdaperfevent"
PMCD_DSO = "/var/lib/pcp/pmdas/pmcd/pmda_pmcd.so"
DOMAIN = 127

# VMConfig of qa/lab.go, from the file it embeds: every line but cycles
# counts on a VM without a hardware PMU, and both agents leave cycles out
# there.  The derived section precedes [dynamic] for the C agent 6.0.3 to
# honour it.
VM_CONF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "vm.conf")
with open(VM_CONF) as _f:
    PERFEVENT_CONF = _f.read()

# Numeric domain, so that pmcd needs neither <stdpmid> nor domain.h.
PMNS_ROOT = """\
root { perfevent pmcd }
pmcd {
    version\t2:0:7
}
perfevent {
    version\t%d:0:0
    active\t%d:0:1
    hwcounters\t%d:*:*
    derived\t%d:*:*
}
""" % (DOMAIN, DOMAIN, DOMAIN, DOMAIN)

ONE_METRIC = "perfevent.hwcounters.cpu_clock.value"
# The floor of a fetch round trip: a metric pmcd answers from its own DSO,
# with no agent behind it.
FLOOR_METRIC = "pmcd.version"
SOFTWARE_EVENTS = ("cpu-clock", "task-clock", "page-faults", "context-switches", "cpu-migrations",
                   "minor-faults", "major-faults", "alignment-faults", "emulation-faults")
TRACEFS = ("/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events")

# Targets, as ratios go/c unless absolute.
TARGETS = {
    "fetch_all_median_us": ("ratio", 0.5),
    "fetch_one_median_us": ("ratio", 0.5),
    "cpu_per_fetch_flat_us": ("ratio", 0.5),
    "cpu_per_fetch_1hz_us": ("ratio", 0.5),
    "cpu_per_fetch_10hz_us": ("ratio", 0.5),
    "switches_per_fetch_10hz": ("ratio", 1.0),
    "idle_cpu_pct": ("ratio", 1.0),
    "idle_switches_per_s": ("ratio", 1.0),
    "rss_kb": ("ratio", 1.25),
    "perfalloc_release_p99_ms": ("go", 5.0),
    "perfalloc_resume_p99_ms": ("go", 5.0),
    "perfalloc_release_p99_ms_busy": ("go", 5.0),
}

CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    pass


def log(msg):
    print(msg, flush=True)


def env_num(name, default, quick_default, quick, kind=float):
    v = os.environ.get(name)
    if v not in (None, ""):
        try:
            return kind(v)
        except ValueError:
            raise BenchError("%s=%r: not a number" % (name, v))
    return quick_default if quick else default


def pct(sorted_vals, p):
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_vals:
        return float("nan")
    k = max(0, math.ceil(p / 100.0 * len(sorted_vals)) - 1)
    return sorted_vals[k]


def stats(vals):
    s = sorted(vals)
    return {
        "n": len(s),
        "min": s[0] if s else float("nan"),
        "median": statistics.median(s) if s else float("nan"),
        "p95": pct(s, 95),
        "p99": pct(s, 99),
        "max": s[-1] if s else float("nan"),
    }


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError as e:
        return "(cannot read %s: %s)" % (path, e)


# ---------------------------------------------------------------- /proc

def proc_cpu_ns(pid):
    """CPU time of every thread of pid, in ns, from schedstat (ns resolution).

    Threads that exit between two samples take their time with them; neither
    agent retires threads in steady state, and proc_stat_ns cross-checks."""
    total = 0
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError as e:
        raise BenchError("agent pid %d: /proc/%d/task: %s" % (pid, pid, e))
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # the thread went away between listdir and open
    return total


def proc_switches(pid):
    """Context switches of every thread of pid, (voluntary, involuntary): a
    count, so unlike CPU time it does not blur on a busy machine.  A
    voluntary one is a thread going to sleep (and being woken again), a VM
    exit here; involuntary ones are preemptions, which grow with the load."""
    vol = invol = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        vol += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        invol += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass  # the thread went away between listdir and open
    return vol, invol


def cpu_ticks():
    """(busy, total) clock ticks of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest time is in user)
    idle = v[3] + v[4]
    total = sum(v[:8])
    return total - idle, total


class Background:
    """What else the machine did during a measure: the 1-minute load average
    at its end, and the share of all CPUs that processes other than the
    harness, the pmcds and the agents kept busy (/proc/stat busy time less
    our own utime+stime)."""

    def __init__(self, pids):
        self.pids = pids  # callable: the pids that are ours
        self.t0 = time.monotonic()
        self.ticks0 = cpu_ticks()
        self.own0 = self.own()

    def own(self):
        """CPU of the harness, its live pmcds and agents, and of the ones it
        has already stopped and reaped (the start-up measure's)."""
        t = os.times()
        total = int((t.children_user + t.children_system) * 1e9)
        for pid in [os.getpid()] + list(self.pids()):
            try:
                total += proc_stat_ns(pid)
            except (OSError, ValueError, IndexError):
                pass
        return total

    def done(self):
        busy1, total1 = cpu_ticks()
        dbusy, dtotal = busy1 - self.ticks0[0], total1 - self.ticks0[1]
        own = (self.own() - self.own0) / 1e9 * CLK_TCK
        with open("/proc/loadavg") as f:
            load = float(f.read().split()[0])
        other = max(0.0, (dbusy - own) / dtotal) if dtotal > 0 else float("nan")
        return {"load1": load, "other_cpu_pct": 100.0 * other,
                "seconds": time.monotonic() - self.t0}


def bg_note(b):
    return "load=%.2f other_cpu=%.0f%%" % (b["load1"], b["other_cpu_pct"])


def proc_stat_ns(pid):
    """utime+stime of the whole process (exited threads included), in ns,
    at clock-tick resolution."""
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) * 1_000_000_000 // CLK_TCK


def proc_status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "VmSize", "Threads"):
                out[k] = int(v.split()[0])
    return out


def children(pid):
    kids = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                    kids += [int(x) for x in f.read().split()]
            except OSError:
                pass
    except OSError:
        pass
    return kids


def exe_of(pid):
    try:
        return os.path.realpath("/proc/%d/exe" % pid)
    except OSError:
        return None


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def start_time(pid):
    """The process's start time in clock ticks since boot (/proc/PID/stat
    field 22): with the pid, it names one process even after pid reuse."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def torn_down(pid, started):
    """Whether the process that was pid has released everything it held.
    A process stops being "running" for the harness (its exe link goes)
    before the kernel closes its descriptors, and the last thread out does
    that: for a multi-threaded agent the leader sits as a zombie while
    another thread closes its perf events. With tracepoints that close
    takes seconds (see BENCHMARKS.md), and holds the lock every tracepoint
    open takes. So: gone, reused, or a zombie with no other thread left."""
    if start_time(pid) != started:
        return True
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X") and tasks == [str(pid)]


def parse_cpus(spec):
    cpus = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        try:
            cpus.update(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise BenchError("BENCH_PIN=%r: want a CPU list such as 0 or 0-1" % spec)
    return cpus


def pin_process(pid, cpus):
    """Every thread of pid; threads and children created later inherit it."""
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:
            pass


def last_cpu(pid):
    """The CPU pid last ran on (/proc/PID/stat field 39)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
        return int(s[s.rindex(")") + 2:].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def die_with_parent():
    """In the child before exec: SIGTERM when the harness dies, however it
    dies, so that no private pmcd (and through it no agent) outlives it."""
    import ctypes
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- agents

class Slot:
    """One agent under its own private pmcd."""

    def __init__(self, label, agent, args, base, transport):
        self.label = label
        self.agent = os.path.abspath(agent)
        self.args = args  # list, with {log} {conf} {lock} {pmdas} placeholders
        self.dir = os.path.join(base, label)
        self.pmdas = os.path.join(self.dir, "pmdas")
        self.conf = os.path.join(self.pmdas, "perfevent", "perfevent.conf")
        self.lock = os.path.join(self.pmdas, "perfevent", "perflock")
        self.rundir = os.path.join(self.dir, "run")
        self.sock = os.path.join(self.rundir, "pmcd.socket")
        self.pmcdconf = os.path.join(self.dir, "pmcd.conf")
        self.root = os.path.join(self.dir, "root")
        self.pmcdlog = os.path.join(self.dir, "pmcd.log")
        self.agentlog = os.path.join(self.dir, "perfevent.log")
        self.transport = transport
        self.perfconf = PERFEVENT_CONF
        self.wrap = []  # a command the private pmcd runs under (the start-up measure)
        self.port = None
        self.pmcd = None
        self.pid = None
        self.pid_start = None  # with pid, names the agent process (start_time)
        self.teardown = None  # seconds from stop() to the agent's descriptors all closed
        self.client = None
        self.argv = None
        self.exe = None

    def expand(self, a):
        return a.format(log=self.agentlog, conf=self.conf, lock=self.lock, pmdas=self.pmdas,
                        pmids=os.path.join(self.pmdas, "perfevent", "pmids"), domain=DOMAIN)

    def start(self, timeout=20.0, timing=False):
        """Start the private pmcd and wait until the agent counts.  With
        timing, return (seconds from the agent's fork to its first answered
        fetch of ONE_METRIC, seconds from pmcd's start to the same)."""
        if not os.access(self.agent, os.X_OK):
            raise BenchError("%s agent %s: not an executable file" % (self.label, self.agent))
        for d in (self.rundir, os.path.dirname(self.conf)):
            os.makedirs(d, mode=0o755, exist_ok=True)
        with open(self.conf, "w") as f:
            f.write(self.perfconf)
        with open(self.root, "w") as f:
            f.write(PMNS_ROOT)
        # Run a private copy under a name of its own: PCP's Install and
        # Remove scripts (which other jobs may run meanwhile) TERM every
        # process whose argv[0] ends in /pmdaperfevent.
        bindir = os.path.join(self.dir, "bin")
        os.makedirs(bindir, mode=0o755, exist_ok=True)
        self.exe = os.path.join(bindir, "pmdaperfevent-" + self.label)
        # By rename: the agent of the same slot stopped just before may
        # still be exiting from the old copy (the restart measure).
        shutil.copy2(self.agent, self.exe + ".new")
        os.replace(self.exe + ".new", self.exe)
        self.argv = [self.exe] + [self.expand(a) for a in self.args]
        for a in self.argv:
            if re.search(r'[\s"#\\]', a):
                raise BenchError("%s agent argument %r: pmcd.conf cannot carry spaces, quotes, # or \\ here" % (self.label, a))
        with open(self.pmcdconf, "w") as f:
            f.write("# private pmcd for qa/bench: only the agent under test\n")
            f.write("perfevent %d pipe binary %s\n" % (DOMAIN, " ".join(self.argv)))
            if os.path.exists(PMCD_DSO):
                # pmcd's own metrics (the round trip's floor) come from a DSO.
                f.write("pmcd 2 dso pmcd_init %s\n" % PMCD_DSO)
        self.port = free_port()
        env = dict(os.environ)
        env.update({
            # pmcd would otherwise ask the system's pmdaroot to start the
            # agent, which makes it the system pmcd's grandchild.
            "PMCD_ROOT_AGENT": "0",
            "PCP_RUN_DIR": self.rundir,
            # Both agents take perfevent.conf and perflock from here.
            "PCP_PMDAS_DIR": self.pmdas,
        })
        # pmcd too runs under a name of its own: /etc/init.d/pmcd stop waits
        # for every process called pmcd to go, and Install SIGHUPs them all.
        self.pmcd_exe = os.path.join(bindir, "pmcd-bench-" + self.label)
        shutil.copy2(PMCD, self.pmcd_exe)
        cmd = [self.pmcd_exe, "-f", "-A", "-U", "root", "-p", str(self.port), "-i", "127.0.0.1",
               "-c", self.pmcdconf, "-n", self.root, "-s", self.sock,
               "-l", self.pmcdlog, "-x", os.path.join(self.dir, "pmcd.fatal")]
        out = open(os.path.join(self.dir, "pmcd.stdout"), "w")
        t_pmcd = time.perf_counter()
        self.pmcd = subprocess.Popen(self.wrap + cmd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=die_with_parent)
        out.close()
        deadline = time.monotonic() + timeout
        want = os.path.realpath(self.exe)
        last = None
        if timing:
            t_fork, t_answer, cpu = self.time_first_answer(deadline, want)
        while time.monotonic() < deadline:
            if self.pmcd.poll() is not None:
                raise BenchError("%s: pmcd exited with %s\n--- %s\n%s--- %s\n%s" % (
                    self.label, self.pmcd.returncode, self.pmcdlog, tail(self.pmcdlog),
                    self.agentlog, tail(self.agentlog)))
            if self.pid is None:
                for k in children(self.pmcd.pid):
                    if exe_of(k) == want:
                        self.pid, self.pid_start = k, start_time(k)
            if self.pid is not None and os.path.exists(self.sock):
                try:
                    self.client = Client(self.spec())
                    # Both agents open their counters disabled and enable
                    # them a moment later: wait for "counting".
                    if (self.client.probe()[0] or 0) > 0:
                        break
                except pmapi.pmErr as e:
                    last = e
                self.client = None
            time.sleep(0.05)
        else:
            raise BenchError("%s: no answer from perfevent through pmcd (port %s) within %.0f s: %s\n--- %s\n%s--- %s\n%s" % (
                self.label, self.port, timeout, last or "agent process not found among pmcd's children",
                self.pmcdlog, tail(self.pmcdlog), self.agentlog, tail(self.agentlog)))
        self.lock = self.find_lock() or self.lock
        if timing:
            return t_answer - t_fork, t_answer - t_pmcd, cpu

    def time_first_answer(self, deadline, want):
        """Watch pmcd fork its agent (pmcd forks nothing else here), then
        fetch ONE_METRIC as fast as possible until it has a value. Returns
        the fork's time, the answer's, and the agent's CPU time (all its
        threads, seconds) at the answer: on a shared machine the CPU time
        says what the start-up costs where the wall time says how long the
        agent waited for a CPU."""
        t_fork = None
        ctx = ids = None
        while time.monotonic() < deadline:
            if self.pmcd.poll() is not None:
                raise BenchError("%s: pmcd exited with %s\n--- %s\n%s" % (self.label, self.pmcd.returncode, self.pmcdlog, tail(self.pmcdlog)))
            if t_fork is None:
                # Before its exec the agent is a copy of pmcd; a wrapper's
                # own commands (mount) are neither.
                if any(exe_of(k) in (want, os.path.realpath(self.pmcd_exe)) for k in children(self.pmcd.pid)):
                    t_fork = time.perf_counter()
                else:
                    time.sleep(0.0005)
                    continue
            try:
                if ctx is None:
                    if not os.path.exists(self.sock):
                        time.sleep(0.0005)
                        continue
                    ctx = pmapi.pmContext(c_api.PM_CONTEXT_HOST, self.spec())
                    ids = ctx.pmLookupName([ONE_METRIC])
                r = ctx.pmFetch(ids)
                try:
                    ok = r.contents.get_numval(0) > 0
                finally:
                    ctx.pmFreeResult(r)
                if ok:
                    t = time.perf_counter()
                    cpu = None
                    for k in children(self.pmcd.pid):
                        if exe_of(k) == want:
                            try:
                                cpu = proc_cpu_ns(k) / 1e9
                            except BenchError:
                                pass
                    return t_fork, t, cpu
            except pmapi.pmErr:
                ctx = None
            time.sleep(0.0005)
        raise BenchError("%s: no value of %s within the start-up timeout\n--- %s\n%s" % (self.label, ONE_METRIC, self.agentlog, tail(self.agentlog)))

    def spec(self):
        if self.transport == "unix":
            return "unix:" + self.sock
        return "localhost:%d" % self.port

    def find_lock(self):
        """The lock file the agent really holds open, from /proc/PID/fd."""
        fddir = "/proc/%d/fd" % self.pid
        try:
            for fd in os.listdir(fddir):
                try:
                    t = os.readlink(os.path.join(fddir, fd))
                except OSError:
                    continue
                if os.path.basename(t).startswith("perflock") and not t.endswith(".state"):
                    return t
        except OSError:
            pass
        return None

    def stop(self, wait=True, timeout=120.0):
        """Stop pmcd and the agent. With wait, return only when the kernel
        has closed all the agent's descriptors (torn_down), so that the next
        agent started does not pay for this one's teardown; self.teardown is
        then the time that took, from here."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.pmcd is None:
            return
        t0 = time.perf_counter()
        self.teardown = None
        if self.pmcd.poll() is None:
            self.pmcd.send_signal(signal.SIGTERM)
            try:
                self.pmcd.wait(5)
            except subprocess.TimeoutExpired:
                self.pmcd.kill()
                self.pmcd.wait(5)
        # pmcd normally takes its agent down; make sure, by pid.
        if self.pid is not None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                deadline = time.monotonic() + 2
                while self.running() and time.monotonic() < deadline:
                    time.sleep(0.05)
                if not self.running():
                    break
                try:
                    os.kill(self.pid, sig)
                except ProcessLookupError:
                    break
        self.pmcd = None
        if wait and self.wait_torn_down(timeout):
            self.teardown = time.perf_counter() - t0

    def wait_torn_down(self, timeout=120.0):
        """Wait until the kernel has closed all the stopped agent's
        descriptors; False (and a note) if that takes longer than timeout."""
        if self.pid is None:
            return True
        deadline = time.monotonic() + timeout
        while not torn_down(self.pid, self.pid_start):
            if time.monotonic() > deadline:
                log("note: %s agent (pid %d) still closing its descriptors %.0f s after stop" % (self.label, self.pid, timeout))
                return False
            time.sleep(0.002)
        return True

    def running(self):
        return self.pid is not None and alive(self.pid) and exe_of(self.pid) == os.path.realpath(self.exe)

    def refind(self, timeout=15.0):
        """After pmcd restarted a dead agent: its new pid and a new context."""
        deadline = time.monotonic() + timeout
        want = os.path.realpath(self.exe)
        while time.monotonic() < deadline:
            if self.pmcd.poll() is not None:
                raise BenchError("%s: pmcd exited with %s\n--- %s\n%s" % (self.label, self.pmcd.returncode, self.pmcdlog, tail(self.pmcdlog)))
            for k in children(self.pmcd.pid):
                if exe_of(k) == want:
                    try:
                        client = Client(self.spec())
                        if (client.probe()[0] or 0) > 0:
                            if self.client is not None:
                                client.use_names(self.client.names)
                            self.pid, self.pid_start, self.client = k, start_time(k), client
                            return
                    except pmapi.pmErr:
                        pass
            time.sleep(0.1)
        raise BenchError("%s: pmcd did not restart the agent within %.0f s\n--- %s\n%s" % (self.label, timeout, self.pmcdlog, tail(self.pmcdlog)))

    def cpu_ns(self):
        return proc_cpu_ns(self.pid)

    def pmcd_cpu_ns(self):
        return proc_cpu_ns(self.pmcd.pid)

    def own_pids(self):
        return [p for p in (self.pid, self.pmcd.pid if self.pmcd else None) if p]


class Client:
    """An in-process PMAPI context on one private pmcd."""

    def __init__(self, spec):
        self.ctx = pmapi.pmContext(c_api.PM_CONTEXT_HOST, spec)
        names = []
        self.ctx.pmTraversePMNS("perfevent.hwcounters", names.append)
        if not names:
            raise BenchError("%s: perfevent.hwcounters has no leaves" % spec)
        self.names = names
        self.all = self.ctx.pmLookupName(names)
        self.one = self.ctx.pmLookupName([ONE_METRIC])
        self.floor = self.ctx.pmLookupName([FLOOR_METRIC])
        self.probe_ids = self.ctx.pmLookupName(["perfevent.active", ONE_METRIC])

    def use_names(self, names):
        self.names = list(names)
        self.all = self.ctx.pmLookupName(self.names)

    def fetch(self, pmids):
        r = self.ctx.pmFetch(pmids)
        self.ctx.pmFreeResult(r)

    def probe(self):
        """(perfevent.active, cpu_clock of the first instance); None where
        there is no value."""
        return self.sample()[:2]

    def sample(self):
        """probe() with its times, in ns of the wall clock (pmcd stamps its
        results with gettimeofday): (active, value, sent, stamp, received).
        sent is taken just before the request goes out, received just after
        the answer is decoded, and stamp is pmcd's timestamp of the result,
        which pmcd takes after the agent has answered and before it replies,
        so that it bounds from above when the agent's answer was made
        without the time this process takes to be scheduled and read it."""
        t0 = time.time_ns()
        r = self.ctx.pmFetch(self.probe_ids)
        try:
            res = r.contents
            stamp = res.timestamp.tv_sec * 1000000000 + res.timestamp.tv_usec * 1000
            active = value = None
            if res.get_numval(0) > 0:
                active = res.get_vlist(0, 0).value.lval
            if res.get_numval(1) > 0:
                value = self.ctx.pmExtractValue(res.get_valfmt(1), res.get_vlist(1, 0),
                                                c_api.PM_TYPE_64, c_api.PM_TYPE_64).ll
            return active, value, t0, stamp, time.time_ns()
        finally:
            self.ctx.pmFreeResult(r)

    def close(self):
        # pmContext destroys its PMAPI context when collected.
        self.ctx = None


# ---------------------------------------------------------------- measures

def count_values(res):
    return sum(max(0, res.get_numval(i)) for i in range(res.numpmid))


def fetch_block(client, ids, n, samples=None):
    """n timed fetches of ids; returns how many came back with fewer values
    than the first (pmcd answers an error much faster than the agent
    answers values)."""
    fetch, free = client.ctx.pmFetch, client.ctx.pmFreeResult
    r = fetch(ids)
    want = count_values(r.contents)
    free(r)
    if want == 0:
        raise BenchError("a fetch gave no values")
    short = 0
    for _ in range(n):
        t0 = time.perf_counter_ns()
        r = fetch(ids)
        t1 = time.perf_counter_ns()
        if count_values(r.contents) < want:
            short += 1
        free(r)
        if samples is not None:
            samples.append((t1 - t0) / 1000.0)
    return short


def measure_roundtrip(slots, n):
    """One round of the pmFetch round trip: all hwcounters leaves, one
    metric, and pmcd's own pmcd.version (the floor: pmcd with no agent
    behind it), n fetches each, one agent after the other."""
    out = {}
    for s in slots:
        for kind in ("all", "one", "floor"):
            ids = getattr(s.client, kind)
            fetch_block(s.client, ids, 20)  # warm-up
            samples = []
            short = fetch_block(s.client, ids, n, samples)
            st = stats(samples)
            st["short"] = short
            st["samples"] = samples
            # A released agent (active=0) answers from stale values, and
            # fast: note it.
            st["inactive"] = (s.client.probe()[0] or 0) == 0 and kind != "floor"
            out[(kind, s.label)] = st
    return out


def measure_flat(slot, seconds):
    """One round of agent CPU per fetch with the client fetching all leaves
    flat out."""
    ids, fetch = slot.client.all, slot.client.fetch
    c0, st0, p0 = slot.cpu_ns(), proc_stat_ns(slot.pid), slot.pmcd_cpu_ns()
    t0 = time.monotonic()
    end = t0 + seconds
    n = 0
    while True:
        for _ in range(20):
            fetch(ids)
        n += 20
        if time.monotonic() >= end:
            break
    wall = time.monotonic() - t0
    return {"fetches": n, "seconds": wall, "rate": n / wall,
            "cpu_us_per_fetch": (slot.cpu_ns() - c0) / n / 1000.0,
            "cpu_us_per_fetch_stat": (proc_stat_ns(slot.pid) - st0) / n / 1000.0,
            "pmcd_us_per_fetch": (slot.pmcd_cpu_ns() - p0) / n / 1000.0,
            "cpu_pct": 100.0 * (slot.cpu_ns() - c0) / 1e9 / wall}


def measure_rate(slot, seconds, hz):
    """One round of agent CPU and context switches per fetch at a fixed
    rate; whatever the agent does between fetches (timers, polls) is part
    of what a fetch at that rate costs."""
    c0, p0, (v0, i0) = slot.cpu_ns(), slot.pmcd_cpu_ns(), proc_switches(slot.pid)
    t0 = time.monotonic()
    period = 1.0 / hz
    n = 0
    next_t = t0
    while True:
        slot.client.fetch(slot.client.all)
        n += 1
        next_t += period
        if next_t - t0 >= seconds:
            break
        d = next_t - time.monotonic()
        if d > 0:
            time.sleep(d)
    # The time after the last fetch belongs to it too.
    d = next_t - time.monotonic()
    if d > 0:
        time.sleep(d)
    wall = time.monotonic() - t0
    cpu = slot.cpu_ns() - c0
    v1, i1 = proc_switches(slot.pid)
    return {"fetches": n, "seconds": wall, "cpu_us_per_fetch": cpu / n / 1000.0,
            "pmcd_us_per_fetch": (slot.pmcd_cpu_ns() - p0) / n / 1000.0,
            "cpu_pct": 100.0 * cpu / 1e9 / wall,
            "switches_per_fetch": (v1 - v0 + i1 - i0) / n,
            "voluntary_per_fetch": (v1 - v0) / n}


def tracepoints(n):
    """Up to n tracepoints of this host, "subsystem:event", from tracefs."""
    for root in TRACEFS:
        if os.path.isdir(root):
            break
    else:
        return []
    # Common, low-rate subsystems first; the syscalls ones fire on every
    # system call of the machine.
    first = ("sched", "timer", "irq", "workqueue", "signal", "task", "kmem", "writeback", "block", "power")
    subs = sorted(os.listdir(root), key=lambda x: (first.index(x) if x in first else len(first), x))
    out = []
    for sub in subs:
        if sub in ("syscalls", "raw_syscalls", "ftrace", "header_page", "header_event") or not os.path.isdir(os.path.join(root, sub)):
            continue
        for ev in sorted(os.listdir(os.path.join(root, sub))):
            if os.path.exists(os.path.join(root, sub, ev, "id")):
                out.append("%s:%s" % (sub, ev))
                if len(out) >= n:
                    return out
    return out


def many_events_conf(n):
    """A perfevent.conf of n software events and tracepoints."""
    evs = list(SOFTWARE_EVENTS) + tracepoints(n - len(SOFTWARE_EVENTS))
    return "[perf]\n" + "\n".join(evs[:n]) + "\n", len(evs[:n])


def measure_startup(o, go_agent, go_args, c_args, base, conf, rounds, restart=False):
    """Time from pmcd forking the agent to the agent's first answered fetch
    (a value of ONE_METRIC), a fresh pmcd each time, go and c alternating.
    Each agent keeps its directory from one start to the next, as across
    restarts on a real host (our agent writes its PMID map, with an fsync,
    only the first time), and one untimed start comes first, so that
    neither agent's first start reads its binary and libraries from disk.

    Every start waits until the agent before it, of either kind, has had
    all its descriptors closed by the kernel: a tracepoint's last close
    waits for an RCU grace period holding the lock that every tracepoint
    open takes, so a start during the other agent's teardown would time
    that agent's exit. With restart, each timed start instead follows a
    stop of the same agent at once, as when pmcd is restarted: it runs
    during its own predecessor's teardown.
    Returns {label: [(fork→answer, pmcd start→answer, agent CPU) or None
    for a failed start, per round], "teardown_"+label: [seconds from stop to
    all descriptors closed, per round], "failed_"+label: [rounds]}."""
    out = {"go": [], "c": [], "teardown_go": [], "teardown_c": []}
    wrap = []
    if conf.count("\n") > 20 and not os.path.isdir(TRACEFS[1]) and shutil.which("unshare"):
        # libpfm4 (the C agent) finds tracepoints only under debugfs: give
        # each pmcd of this measure a private mount namespace with debugfs
        # mounted, so the machine's mounts stay as they are.
        wrap = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                "mount -t debugfs none /sys/kernel/debug && exec \"$0\" \"$@\""]
    dirs = []
    try:
        for r in range(rounds + 1):
            for label, agent, args in (("go", go_agent, go_args), ("c", o.c_agent, c_args)):
                s = Slot(label, agent, args, base, o.transport)
                s.perfconf = conf
                s.wrap = wrap
                dirs.append(s.dir)
                before = None
                t = None
                try:
                    if restart and r > 0:
                        before = s
                        try:
                            s.start()
                        finally:
                            s.stop(wait=False)
                        s = Slot(label, agent, args, base, o.transport)
                        s.perfconf = conf
                        s.wrap = wrap
                    t = s.start(timing=True)
                    out["leaves_" + label] = len(s.client.names)
                except BenchError as e:
                    # pmcd gives up on an agent that sends nothing for a
                    # few seconds, which another process's tracepoint
                    # teardown can cause: a failed start is a result of
                    # this round, not the end of the run.
                    log("note: %s start failed in round %d: %s" % (label, r, str(e).splitlines()[0]))
                    out.setdefault("failed_" + label, []).append(r)
                finally:
                    s.stop()
                    if before is not None:
                        before.wait_torn_down()
                if r > 0:
                    # None for a failed start; the summary pairs rounds.
                    out[label].append(t)
                    out["teardown_" + label].append(s.teardown if t else None)
    finally:
        if not o.keep:
            shutil.rmtree(base, ignore_errors=True)
    return out


def measure_idle(slots, seconds):
    """Agent CPU and wake-ups with no client traffic at all (contexts stay
    open): the context switches of all its threads a second, voluntary
    ones (its own sleeps and wake-ups) apart."""
    c0 = {s.label: (s.cpu_ns(), proc_stat_ns(s.pid), proc_switches(s.pid)) for s in slots}
    t0 = time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - t0
    out = {}
    for s in slots:
        cpu = s.cpu_ns() - c0[s.label][0]
        st = proc_stat_ns(s.pid) - c0[s.label][1]
        vol, invol = proc_switches(s.pid)
        vol, invol = vol - c0[s.label][2][0], invol - c0[s.label][2][1]
        out[s.label] = {"seconds": wall, "cpu_ms": cpu / 1e6, "cpu_pct": 100.0 * cpu / 1e9 / wall,
                        "cpu_pct_stat": 100.0 * st / 1e9 / wall,
                        "switches_per_s": (vol + invol) / wall, "voluntary_per_s": vol / wall,
                        "threads": proc_status(s.pid).get("Threads")}
    return out


def measure_rss(slots, warmup=1000):
    out = {}
    for s in slots:
        for _ in range(warmup):
            s.client.fetch(s.client.all)
        out[s.label] = proc_status(s.pid)
    return out


def parse_go_time(v):
    """Seconds since the epoch from a Go time.Time JSON (RFC 3339, up to ns)."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", v or "")
    if not m:
        return None
    base = datetime.datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) == "Z" else m.group(3)))
    frac = float("0." + m.group(2)) if m.group(2) else 0.0
    return base.timestamp() + frac


def read_state(lock):
    """Our agent's state file: <lock>.d/state (older builds: <lock>.state)."""
    for path in (os.path.join(lock + ".d", "state"), lock + ".state"):
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            continue
    return None


def measure_perfalloc(slot, cycles, timeout, rng, gap=0.1, pace_ns=0):
    """Take and drop an F_RDLCK on byte 0 of the agent's lock file, as
    perfalloc does, at random moments (0 to gap seconds apart), and time
    from outside (through pmcd) how long the agent takes to release its
    counters and to count again.

    Released: perfevent.active == 0.  Counting again: active > 0, or the
    cpu_clock value moved off the value seen while released (the C agent's
    first fetch after re-enabling still says active=0).

    Each transition is bracketed by two samples of the probe: the last one
    that still showed the old state (the agent answered it after it was
    sent) and the first that shows the new one (the agent answered it
    before pmcd stamped its result).  So the agent changed its answer
    after max(lock or unlock time, the last old sample's send time) and no
    later than pmcd's stamp of the first new one: "seen" is that upper
    bound, "width" the bracket, the probe's resolution for that cycle, and
    "answer" the time the first new answer reached this process, which is
    what the bench reported before and includes this process's own
    scheduling after pmcd replied.

    The probe asks flat out unless pace_ns is set: then it sleeps until
    pace_ns after its last request, as a client that is not a busy loop
    would."""
    c = slot.client
    lock = slot.lock
    if not os.path.exists(lock):
        raise BenchError("%s: lock file %s does not exist" % (slot.label, lock))
    parts = {"request": [], "reply": [], "loop": []}
    # The same for the samples between transitions, when the agent has
    # nothing to do but answer: a baseline for the parts above.
    steady = {"request": [], "reply": []}
    periods = []

    last_sent = [0]

    def sample():
        if pace_ns:
            wait = last_sent[0] + pace_ns - time.time_ns()
            if wait > 0:
                time.sleep(wait / 1e9)
        try:
            st = c.sample()
        except pmapi.pmErr:
            t = time.time_ns()
            st = None, None, t, t, t
        last_sent[0] = st[2]
        return st

    def poll_until(pred, t_ref):
        """Samples until pred holds: (seen, lower, answer, the last sample,
        its request's send time), times in ms after t_ref (ns, wall clock);
        the times are None on a timeout."""
        lower = t_ref
        prev = None
        while True:
            st = sample()
            _, _, sent, stamp, got = st
            parts["request"].append(stamp - sent)
            parts["reply"].append(got - stamp)
            if prev is not None:
                parts["loop"].append(sent - prev[4])
                periods.append(sent - prev[2])
            if pred(st):
                seen = min(max(stamp, sent), got)
                return (seen - t_ref) / 1e6, (lower - t_ref) / 1e6, (got - t_ref) / 1e6, st, (sent - t_ref) / 1e6
            lower = max(lower, sent)
            prev = st
            if got - t_ref > timeout * 1e9:
                return None, None, None, st, None

    def poll_for(seconds):
        end = time.perf_counter() + seconds
        last = None
        while time.perf_counter() < end:
            last = sample()
            steady["request"].append(last[3] - last[2])
            steady["reply"].append(last[4] - last[3])
        return last

    def counting(st):
        return st[0] is not None and st[0] > 0

    seen = {"release": [], "resume": []}
    mid = {"release": [], "resume": []}
    width = {"release": [], "resume": []}
    answer = {"release": [], "resume": []}
    agent = {"release": [], "resume": []}
    timeouts = {"release": 0, "resume": 0}

    raw, latest = [], {}

    def record(k, r):
        hi, lo, got, _, sent = r
        if hi is None:
            timeouts[k] += 1
            return
        # For results.json: where a slow cycle's time went.
        latest[k] = [k, round(lo, 3), round(sent, 3), round(hi, 3), round(got, 3), None]
        raw.append(latest[k])
        seen[k].append(hi)
        mid[k].append((hi + lo) / 2)
        width[k].append(hi - lo)
        answer[k].append(got)

    def agent_view(k, want, t_ref):
        """The agent's own time of the transition, from its state file; read
        a while after the transition was seen, as the agent may write the
        file after it has changed its answers."""
        state = read_state(lock)
        if state and state.get("counters") == want:
            since = parse_go_time(state.get("since"))
            if since is not None:
                agent[k].append(since * 1000.0 - t_ref / 1e6)
                if latest.get(k):
                    latest[k][5] = round(agent[k][-1], 3)
        latest[k] = None

    if poll_until(counting, time.time_ns())[0] is None:
        raise BenchError("%s: perfevent.active never became > 0 before the perfalloc cycles" % slot.label)
    w_unlock = None
    for _ in range(cycles):
        poll_for(rng.uniform(0.0, gap))
        if w_unlock is not None:
            agent_view("resume", "open", w_unlock)
        fd = os.open(lock, os.O_RDONLY)
        # The times are taken before the calls: the agent, woken by the
        # call, may well run before this process gets its CPU back.
        w_lock = time.time_ns()
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, 0, os.SEEK_SET)
        except OSError:
            os.close(fd)
            raise
        r = poll_until(lambda s: s[0] == 0, w_lock)
        record("release", r)
        frozen = r[3][1]
        poll_for(rng.uniform(0.0, gap))
        agent_view("release", "released", w_lock)
        w_unlock = time.time_ns()
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0, os.SEEK_SET)
        os.close(fd)
        record("resume", poll_until(lambda s: counting(s) or (s[1] is not None and s[1] != frozen), w_unlock))
        # The C agent reports active=0 on its first fetch after re-enabling;
        # settle so that the next cycle starts from "counting".
        poll_until(counting, time.time_ns())
    if w_unlock is not None:
        poll_for(gap / 2)
        agent_view("resume", "open", w_unlock)
    out = {
        "lock": lock,
        "cycles": cycles,
        "timeouts": timeouts,
        "poll_us": stats([p / 1e3 for p in periods]),
        "probe_us": {k: stats([v / 1e3 for v in vals]) for k, vals in parts.items()},
        "steady_us": {k: stats([v / 1e3 for v in vals]) for k, vals in steady.items()},
        "cycles_ms": {"columns": ["transition", "lower", "request sent", "seen (pmcd's stamp)", "answer", "agent's view"], "rows": raw},
    }
    for k in ("release", "resume"):
        out[k] = stats(seen[k])
        out[k + "_mid"] = stats(mid[k])
        out[k + "_width"] = stats(width[k])
        out[k + "_answer"] = stats(answer[k])
        if agent[k]:
            out["agent_view_" + k] = stats(agent[k])
    return out


def busy_processes():
    """One CPU-bound process per CPU, at normal priority, to compete with
    the agent while it reacts (the perfalloc-busy measure)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=die_with_parent)
            for _ in range(os.cpu_count() or 1)]


def stop_processes(procs):
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def fetch_for(slot, seconds):
    ids, fetch = slot.client.all, slot.client.fetch
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        for _ in range(20):
            fetch(ids)
        n += 20
    return n


def parse_strace_c(path, fetches):
    """strace -c's table as [(syscall, calls per fetch, µs per call, % time)]."""
    rows = []
    try:
        with open(path) as f:
            for line in f:
                p = line.split()
                # % time, seconds, usecs/call, calls, [errors], syscall
                if len(p) >= 5 and re.match(r"^[0-9.]+$", p[0]) and p[-1] != "total":
                    rows.append((p[-1], int(p[3]) / max(1, fetches), float(p[2]), float(p[0])))
    except OSError:
        pass
    return rows


def profile(slot, seconds, out):
    """Where an agent's time goes while fetching flat out: syscall counts
    (strace -c) and, separately, CPU samples (perf record -e cpu-clock)."""
    res = {}
    if shutil.which("strace"):
        path = os.path.join(out, "strace-%s.txt" % slot.label)
        p = subprocess.Popen(["strace", "-c", "-f", "-o", path, "-p", str(slot.pid)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        n = fetch_for(slot, seconds)
        p.send_signal(signal.SIGINT)
        p.wait(10)
        res["strace"] = {"file": path, "fetches": n, "rows": parse_strace_c(path, n)}
    if shutil.which("perf"):
        data = os.path.join(out, "perf-%s.data" % slot.label)
        p = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "2999", "-g",
                              "-o", data, "-p", str(slot.pid)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        n = fetch_for(slot, seconds)
        p.send_signal(signal.SIGINT)
        p.wait(20)
        report = os.path.join(out, "perf-%s.txt" % slot.label)
        with open(report, "w") as f:
            subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children",
                            "--sort", "dso,sym", "--percent-limit", "2", "-g", "none"],
                           stdout=f, stderr=subprocess.DEVNULL)
        top = []
        with open(report) as f:
            for line in f:
                m = re.match(r"\s*([0-9.]+)%\s+(\S+)\s+\[[.k]\]\s+(.*)", line)
                if m:
                    top.append((float(m.group(1)), m.group(2), m.group(3).strip()))
        res["perf"] = {"file": report, "fetches": n, "top": top}
    return res


# ---------------------------------------------------------------- report

def fmt(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "nan"
    if abs(v) >= 100:
        return "%.0f" % v
    if abs(v) >= 10:
        return "%.1f" % v
    return "%.3g" % v


def rounds_line(name, go_vals, c_vals, bg=None):
    """One summary line from per-round values: the medians, the median of
    the per-round ratios and their min-max spread, and a verdict that is
    NOISY when the spread straddles the target."""
    ratios = [g / c for g, c in zip(go_vals, c_vals) if c]
    if not ratios:
        return "%s go=%s c=%s ratio=nan" % (name, fmt(statistics.median(go_vals)), fmt(statistics.median(c_vals)))
    r, lo, hi = statistics.median(ratios), min(ratios), max(ratios)
    line = "%s go=%s c=%s ratio=%.2f spread=%.2f-%.2f rounds=%d" % (
        name, fmt(statistics.median(go_vals)), fmt(statistics.median(c_vals)), r, lo, hi, len(ratios))
    t = TARGETS.get(name)
    if t and t[0] == "ratio":
        limit = t[1]
        if hi <= limit:
            verdict = "ok"
        elif lo > limit:
            verdict = "MISS"
        else:
            verdict = "NOISY(median %s)" % ("ok" if r <= limit else "MISS")
        line += " target=ratio<=%g %s" % (limit, verdict)
    if bg:
        line += " " + bg_note(bg)
    return line


def summary_line(name, go, c):
    ratio = go / c if c else float("nan")
    line = "%s go=%s c=%s ratio=%.2f" % (name, fmt(go), fmt(c), ratio)
    t = TARGETS.get(name)
    if t:
        kind, limit = t
        if kind == "ratio":
            ok = ratio <= limit
            line += " target=ratio<=%g %s" % (limit, "ok" if ok else "MISS")
        else:
            ok = go <= limit
            line += " target=go<=%g %s" % (limit, "ok" if ok else "MISS")
    return line


def default_go_args(agent):
    """Ask our agent which flags it takes: -c for the config and a lock-file
    flag if it has one.  PCP_PMDAS_DIR already points both at the private
    copies, so these are belt and braces."""
    args = ["-d", str(DOMAIN), "-l", "{log}"]
    try:
        p = subprocess.run([agent, "-h"], capture_output=True, text=True, timeout=10)
        helptext = p.stdout + p.stderr
    except (OSError, subprocess.TimeoutExpired):
        return args
    if re.search(r"(^|\s)-c[\s,=]", helptext):
        args += ["-c", "{conf}"]
    m = re.search(r"(^|\s)(--?lock(?:file)?)\b", helptext) or re.search(r"(^|\s)(-L)[\s,=]", helptext)
    if m:
        args += [m.group(2), "{lock}"]
    # Our agent keeps its PMIDs in a file; a private run must not share the
    # installed agent's.
    m = re.search(r"(^|\s)(--?pmids)\b", helptext)
    if m:
        args += [m.group(2), "{pmids}"]
    return args


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", default=os.environ.get("BENCH_QUICK") not in (None, "", "0"),
                    help="short durations, for a smoke test (or BENCH_QUICK=1)")
    ap.add_argument("--go-agent", default=os.environ.get("BENCH_GO_AGENT"),
                    help="our agent (default bin/pmdaperfevent; BENCH_GO_AGENT)")
    ap.add_argument("--c-agent", default=os.environ.get("BENCH_C_AGENT", C_AGENT),
                    help="the C agent (default %s; BENCH_C_AGENT)" % C_AGENT)
    ap.add_argument("--go-args", default=os.environ.get("BENCH_GO_ARGS"),
                    help="our agent's arguments, with {log} {conf} {lock} {pmdas} placeholders (BENCH_GO_ARGS)")
    ap.add_argument("--c-args", default=os.environ.get("BENCH_C_ARGS", "-d 127 -l {log}"),
                    help="the C agent's arguments (BENCH_C_ARGS)")
    ap.add_argument("--transport", choices=("unix", "inet"), default=os.environ.get("BENCH_TRANSPORT", "unix"),
                    help="how the client reaches pmcd (BENCH_TRANSPORT; default unix, like 'local:')")
    ap.add_argument("--pin", default=os.environ.get("BENCH_PIN", ""),
                    help="CPU list (e.g. 0) for the client, both pmcds and both agents, so that both agents "
                         "read their per-CPU counters from the same place (BENCH_PIN; default: not pinned)")
    ap.add_argument("--profile", type=float, default=float(os.environ.get("BENCH_PROFILE") or 0),
                    help="after the measures, profile each agent flat out for this many seconds with strace -c "
                         "and perf record (BENCH_PROFILE=3; default off)")
    ap.add_argument("--measures", default=os.environ.get("BENCH_MEASURES", "fetch,flat,rate,idle,rss,perfalloc,perfalloc-busy,startup"),
                    help="comma list of fetch,flat,rate,idle,rss,perfalloc,perfalloc-busy,startup,restart (BENCH_MEASURES; restart is not in the default)")
    ap.add_argument("--out", default=os.environ.get("BENCH_OUT"),
                    help="directory for results.json, summary.txt and the logs (BENCH_OUT; default a new /tmp dir)")
    ap.add_argument("--keep", action="store_true", default=bool(os.environ.get("BENCH_KEEP")),
                    help="keep the private pmcd directories (BENCH_KEEP=1)")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("BENCH_SEED", "0")) or None)
    ap.add_argument("--print-config", action="store_true",
                    help="print the perfevent.conf both agents run (%s) and exit" % VM_CONF)
    o = ap.parse_args()
    if o.print_config:
        sys.stdout.write(PERFEVENT_CONF)
        return

    if os.geteuid() != 0:
        raise BenchError("needs root: the agents open system-wide perf counters and pmcd runs with -U root")
    if not os.access(PMCD, os.X_OK):
        raise BenchError("%s not found: install Debian's pcp" % PMCD)

    q = o.quick
    rounds = env_num("BENCH_ROUNDS", 5, 5, q, int)
    if rounds < 1:
        raise BenchError("BENCH_ROUNDS=%d: want at least 1" % rounds)
    n_fetch = env_num("BENCH_FETCHES", 200, 50, q, int)  # per agent per round
    flat_s = env_num("BENCH_FLAT_SECONDS", 1.0, 0.3, q)  # per agent per round
    rate_s = env_num("BENCH_RATE_SECONDS", 6.0, 2.0, q)  # 10 Hz, per agent per round
    rate1_s = env_num("BENCH_RATE1_SECONDS", 10.0, 3.0, q)  # 1 Hz, per agent per round
    start_rounds = env_num("BENCH_START_ROUNDS", rounds, 2, q, int)
    many = env_num("BENCH_START_EVENTS", 100, 100, q, int)
    idle_s = env_num("BENCH_IDLE_SECONDS", 30.0, 5.0, q)
    cycles = env_num("BENCH_PERFALLOC_CYCLES", 200, 10, q, int)
    # Long enough to put each lock and unlock at a uniformly random phase
    # of the C agent's 100 ms check.
    perfalloc_gap = env_num("BENCH_PERFALLOC_GAP_MS", 100, 100, q) / 1000.0
    probe_nice = env_num("BENCH_PROBE_NICE", 0, 0, q, int)
    probe_pace_ns = int(env_num("BENCH_PROBE_PACE_US", 0, 0, q) * 1000)
    warm = env_num("BENCH_RSS_WARMUP", 1000, 1000, q, int)
    measures = [m.strip() for m in o.measures.split(",") if m.strip()]
    for m in measures:
        if m not in ("fetch", "flat", "rate", "idle", "rss", "perfalloc", "perfalloc-busy", "startup", "restart"):
            raise BenchError("--measures: unknown measure %r" % m)

    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    go_agent = o.go_agent or os.path.join(repo, "bin", "pmdaperfevent")
    if not os.access(go_agent, os.X_OK):
        raise BenchError("our agent %s is missing: run `make build`, or set BENCH_GO_AGENT "
                         "(e.g. BENCH_GO_AGENT=%s to check the harness with the C agent in both slots)" % (go_agent, C_AGENT))
    go_args = shlex.split(o.go_args) if o.go_args else default_go_args(go_agent)
    if os.path.realpath(go_agent) == os.path.realpath(o.c_agent) and not o.go_args:
        go_args = shlex.split(o.c_args)  # C agent in both slots: C's flags
    c_args = shlex.split(o.c_args)

    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = o.out or tempfile.mkdtemp(prefix="perfevent-bench-%s-" % stamp)
    os.makedirs(out, exist_ok=True)
    os.chmod(out, 0o755)
    rng = random.Random(o.seed)

    slots = [Slot("go", go_agent, go_args, out, o.transport), Slot("c", o.c_agent, c_args, out, o.transport)]
    results = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "quick": q, "transport": o.transport}
    lines = []

    def stop_all(*_):
        for s in slots:
            s.stop()

    def on_signal(signum, _frame):
        raise KeyboardInterrupt("signal %d" % signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    def run(name, fn):
        """Run one measure; if an agent died or was restarted under it (other
        jobs on a shared machine signal processes by name), repeat it."""
        for attempt in range(3):
            for s in slots:
                if not s.running():
                    log("note: %s agent (pid %d) was gone before %s; waiting for pmcd to restart it" % (s.label, s.pid, name))
                    s.refind()
            r = err = None
            try:
                r = fn()
            except (pmapi.pmErr, BenchError, OSError) as e:
                err = e
            lost = [s for s in slots if not s.running()]
            if r is not None and not lost:
                return r
            if not lost and not isinstance(err, pmapi.pmErr):
                raise err
            why = "%s agent restarted" % "/".join(x.label for x in lost) if lost else "PMAPI error: %s" % err
            log("note: %s during %s; repeating it (attempt %d)" % (why, name, attempt + 2))
            for s in lost:
                s.refind()
        raise BenchError("%s: failed three times; see the logs in %s" % (name, out))

    try:
        for s in slots:
            s.start()
            log("%-2s agent pid %d  %s\n   pmcd pid %d  %s  lock %s" % (
                s.label, s.pid, " ".join(s.argv), s.pmcd.pid, s.spec(), s.lock))
        if o.pin:
            cpus = parse_cpus(o.pin)
            for pid in [os.getpid()] + [p for s in slots for p in (s.pmcd.pid, s.pid)]:
                pin_process(pid, cpus)
            log("pinned this client, both pmcds and both agents to CPU(s) %s" % o.pin)
        results["pin"] = o.pin
        results["agents"] = {s.label: {"agent": s.agent, "argv": s.argv, "pid": s.pid, "lock": s.lock,
                                       "leaves": len(s.client.names)} for s in slots}
        names = {s.label: set(s.client.names) for s in slots}
        if names["go"] != names["c"]:
            # e.g. the C agent lists all nine software.* events, configured
            # or not.  Fetch the same names from both.
            common = sorted(names["go"] & names["c"])
            log("note: go has %d hwcounters leaves, c has %d; 'all' fetches the %d they share (only in c: %s; only in go: %s)" % (
                len(names["go"]), len(names["c"]), len(common),
                " ".join(n.replace("perfevent.hwcounters.", "") for n in sorted(names["c"] - names["go"])) or "-",
                " ".join(n.replace("perfevent.hwcounters.", "") for n in sorted(names["go"] - names["c"])) or "-"))
            for s in slots:
                s.client.use_names(common)
            results["leaves_only_in"] = {"c": sorted(names["c"] - names["go"]), "go": sorted(names["go"] - names["c"])}

        def ours():
            return [p for x in slots for p in x.own_pids()]

        def each_round(name, fn):
            """fn(slot) for go then c, rounds times: go, c, go, c, ..."""
            per = {x.label: [] for x in slots}
            bg = Background(ours)
            for _ in range(rounds):
                for x in slots:
                    per[x.label].append(run("%s (%s)" % (name, x.label), lambda: fn(x)))
            return per, bg.done()

        if "fetch" in measures:
            log("\n== 1. pmFetch round trip through pmcd, %d rounds of n=%d per agent, µs (floor: %s, pmcd alone)" % (rounds, n_fetch, FLOOR_METRIC))
            per = {x.label: [] for x in slots}
            bg = Background(ours)
            for _ in range(rounds):
                r = run("the fetch round trip", lambda: measure_roundtrip(slots, n_fetch))
                for x in slots:
                    per[x.label].append(r)
            bg = bg.done()
            rs = per["go"]  # each round holds both agents
            log("%-5s %-3s %8s %8s %8s %8s %8s   per-round medians" % ("set", "", "min", "median", "p95", "p99", "max"))
            results["fetch"] = {"rounds": []}
            for kind in ("all", "one", "floor"):
                for x in slots:
                    pooled = stats([v for r in rs for v in r[(kind, x.label)]["samples"]])
                    meds = [r[(kind, x.label)]["median"] for r in rs]
                    short = sum(r[(kind, x.label)]["short"] for r in rs)
                    inact = sum(1 for r in rs if r[(kind, x.label)]["inactive"])
                    log("%-5s %-3s %8.0f %8.0f %8.0f %8.0f %8.0f   %s%s%s" % (
                        kind, x.label, pooled["min"], pooled["median"], pooled["p95"], pooled["p99"], pooled["max"],
                        " ".join("%.0f" % m for m in meds), ("  %d SHORT" % short) if short else "",
                        ("  active=0 after %d rounds" % inact) if inact else ""))
                    results["fetch"].setdefault(kind, {})[x.label] = pooled
            for r in rs:
                results["fetch"]["rounds"].append({"%s_%s" % k: {m: v for m, v in st.items() if m != "samples"}
                                                   for k, st in r.items()})
            for kind in ("all", "one"):
                for m in ("median", "p95"):
                    lines.append(rounds_line("fetch_%s_%s_us" % (kind, m), [r[(kind, "go")][m] for r in rs],
                                             [r[(kind, "c")][m] for r in rs], bg if m == "median" else None))
            lines.append(rounds_line("pmcd_floor_median_us", [r[("floor", "go")]["median"] for r in rs],
                                     [r[("floor", "c")]["median"] for r in rs]))
            for kind in ("all", "one"):
                lines.append(rounds_line("fetch_%s_above_floor_us" % kind,
                                         [r[(kind, "go")]["median"] - r[("floor", "go")]["median"] for r in rs],
                                         [r[(kind, "c")]["median"] - r[("floor", "c")]["median"] for r in rs]))
            log("(all = %d perfevent.hwcounters leaves, one = %s, floor = %s answered by pmcd itself; %s)" % (
                len(slots[0].client.all), ONE_METRIC, FLOOR_METRIC, bg_note(bg)))

        if "flat" in measures:
            log("\n== 2a. agent CPU per fetch, flat out, all leaves, %d rounds of %.1f s per agent" % (rounds, flat_s))
            per, bg = each_round("the flat-out CPU measure", lambda x: measure_flat(x, flat_s))
            for x in slots:
                v = per[x.label]
                log("%-3s %7d fetches %6.0f/s  agent µs/fetch by round: %s  (stat %5.1f)  pmcd %5.1f µs/fetch" % (
                    x.label, sum(a["fetches"] for a in v), statistics.median(a["rate"] for a in v),
                    " ".join("%.0f" % a["cpu_us_per_fetch"] for a in v),
                    statistics.median(a["cpu_us_per_fetch_stat"] for a in v),
                    statistics.median(a["pmcd_us_per_fetch"] for a in v)))
            results["flat"] = per
            lines.append(rounds_line("cpu_per_fetch_flat_us", [a["cpu_us_per_fetch"] for a in per["go"]],
                                     [a["cpu_us_per_fetch"] for a in per["c"]], bg))

        if "rate" in measures:
            for hz, secs in ((10, rate_s), (1, rate1_s)):
                log("\n== 2b. agent CPU and context switches per fetch at %d Hz, all leaves, %d rounds of %.0f s per agent" % (hz, rounds, secs))
                per, bg = each_round("the %d Hz measure" % hz, lambda x: measure_rate(x, secs, hz))
                for x in slots:
                    v = per[x.label]
                    log("%-3s %4d fetches  agent µs/fetch by round: %s   switches/fetch: %s (voluntary %s)   pmcd %6.1f µs/fetch" % (
                        x.label, sum(a["fetches"] for a in v),
                        " ".join("%.0f" % a["cpu_us_per_fetch"] for a in v),
                        " ".join("%.2f" % a["switches_per_fetch"] for a in v),
                        " ".join("%.2f" % a["voluntary_per_fetch"] for a in v),
                        statistics.median(a["pmcd_us_per_fetch"] for a in v)))
                results["rate%dhz" % hz] = per
                for k, name in (("cpu_us_per_fetch", "cpu_per_fetch_%dhz_us"), ("switches_per_fetch", "switches_per_fetch_%dhz"),
                                ("voluntary_per_fetch", "voluntary_switches_per_fetch_%dhz")):
                    lines.append(rounds_line(name % hz, [a[k] for a in per["go"]], [a[k] for a in per["c"]],
                                             bg if k == "cpu_us_per_fetch" else None))

        if "idle" in measures:
            log("\n== 3. idle CPU, no fetches, %.0f s, both agents at once" % idle_s)
            r = run("the idle measure", lambda: measure_idle(slots, idle_s))
            for s in slots:
                x = r[s.label]
                log("%-3s %7.2f ms CPU in %.1f s = %.3f%% of one core (stat %.3f%%), %.2f switches/s (voluntary %.2f), %s threads" % (
                    s.label, x["cpu_ms"], x["seconds"], x["cpu_pct"], x["cpu_pct_stat"],
                    x["switches_per_s"], x["voluntary_per_s"], x["threads"]))
            results["idle"] = r
            lines.append(summary_line("idle_cpu_pct", r["go"]["cpu_pct"], r["c"]["cpu_pct"]) + " duration=%.0fs" % idle_s)
            lines.append(summary_line("idle_switches_per_s", r["go"]["switches_per_s"], r["c"]["switches_per_s"]) + " duration=%.0fs" % idle_s)

        if "rss" in measures:
            log("\n== 4. memory after %d more fetches of all leaves, kB" % warm)
            r = run("the memory measure", lambda: measure_rss(slots, warm))
            for s in slots:
                x = r[s.label]
                log("%-3s VmRSS %6d  VmHWM %6d  RssAnon %6d  RssFile %6d  VmSize %7d  threads %s" % (
                    s.label, x["VmRSS"], x["VmHWM"], x["RssAnon"], x["RssFile"], x["VmSize"], x["Threads"]))
            results["rss"] = r
            lines.append(summary_line("rss_kb", r["go"]["VmRSS"], r["c"]["VmRSS"]))
            lines.append(summary_line("hwm_kb", r["go"]["VmHWM"], r["c"]["VmHWM"]))

        for measure in ("perfalloc", "perfalloc-busy"):
            if measure not in measures:
                continue
            busy = measure == "perfalloc-busy"
            suffix = "_busy" if busy else ""
            log("\n== 5%s. perfalloc reaction%s, %d cycles per agent, ms (lock → active=0; unlock → counting)%s%s" % (
                "b" if busy else "", ", one busy process per CPU competing" if busy else "", cycles,
                "; the probe at nice %d" % probe_nice if probe_nice else "",
                "; the probe asks every %.0f µs" % (probe_pace_ns / 1e3) if probe_pace_ns else ""))
            r = {}
            for s in slots:  # one at a time: the poll loop is the resolution
                spin = busy_processes() if busy else []
                try:
                    # This thread only (setpriority is per thread on Linux),
                    # after the busy processes have been started.
                    if probe_nice:
                        os.setpriority(os.PRIO_PROCESS, 0, probe_nice)
                    try:
                        r[s.label] = run("the %s measure (%s)" % (measure, s.label),
                                         lambda: measure_perfalloc(s, cycles, 3.0, rng, perfalloc_gap, probe_pace_ns))
                    finally:
                        if probe_nice:
                            os.setpriority(os.PRIO_PROCESS, 0, 0)
                finally:
                    stop_processes(spin)
            log("seen: pmcd's stamp of the first answer in the new state; width: from the later of the lock/unlock and\n"
                "the last old answer's request to it (the probe's resolution); answer: when that answer reached the bench")
            log("%-3s %-8s %4s %7s %7s %7s %7s  %7s %7s  %7s %7s  %s" % (
                "", "", "n", "min", "median", "p99", "max", "width50", "width99", "answ99", "answmax", "timeouts"))
            for s in slots:
                x = r[s.label]
                for k in ("release", "resume"):
                    st, w, a = x[k], x[k + "_width"], x[k + "_answer"]
                    log("%-3s %-8s %4d %7.2f %7.2f %7.2f %7.2f  %7.2f %7.2f  %7.2f %7.2f  %d" % (
                        s.label, k, st["n"], st["min"], st["median"], st["p99"], st["max"],
                        w["median"], w["p99"], a["p99"], a["max"], x["timeouts"][k]))
                pu = x["probe_us"]
                log("%-3s probe, µs median/p99: period %.0f/%.0f = request→stamp %.0f/%.0f + stamp→answer %.0f/%.0f"
                    " + answer→next request %.0f/%.0f; lock %s" % (
                        s.label, x["poll_us"]["median"], x["poll_us"]["p99"], pu["request"]["median"], pu["request"]["p99"],
                        pu["reply"]["median"], pu["reply"]["p99"], pu["loop"]["median"], pu["loop"]["p99"], x["lock"]))
                su = x["steady_us"]
                log("%-3s between transitions, µs median/p99: request→stamp %.0f/%.0f, stamp→answer %.0f/%.0f" % (
                    s.label, su["request"]["median"], su["request"]["p99"], su["reply"]["median"], su["reply"]["p99"]))
                for k in ("agent_view_release", "agent_view_resume"):
                    if k in x and x[k]["n"]:
                        st = x[k]
                        log("%-3s %s (state file 'since' − our lock/unlock time): n=%d median %.2f p99 %.2f max %.2f" % (
                            s.label, k, st["n"], st["median"], st["p99"], st["max"]))
            results[measure] = r
            for k in ("release", "resume"):
                for m in ("median", "p99"):
                    go, c = r["go"][k][m], r["c"][k][m]
                    if r["go"]["timeouts"][k]:
                        go = float("inf")
                    lines.append(summary_line("perfalloc_%s_%s_ms%s" % (k, m, suffix), go, c))
                for part in ("width", "answer"):
                    lines.append("perfalloc_%s_%s_p99_ms%s go=%s c=%s" % (
                        k, part, suffix, fmt(r["go"][k + "_" + part]["p99"]), fmt(r["c"][k + "_" + part]["p99"])))
                av = [r[l].get("agent_view_" + k) for l in ("go", "c")]
                if any(v and v["n"] for v in av):
                    lines.append("perfalloc_%s_agent_p99_ms%s %s" % (k, suffix, " ".join(
                        "%s=%s(n=%d)" % (l, fmt(v["p99"]), v["n"]) for l, v in zip(("go", "c"), av) if v and v["n"])))
            lines.append("perfalloc_request_p99_us%s go=%s c=%s (request→pmcd's stamp near the transitions; between them go=%s c=%s)" % (
                suffix, fmt(r["go"]["probe_us"]["request"]["p99"]), fmt(r["c"]["probe_us"]["request"]["p99"]),
                fmt(r["go"]["steady_us"]["request"]["p99"]), fmt(r["c"]["steady_us"]["request"]["p99"])))
            lines.append("perfalloc_probe_period_p99_us%s go=%s c=%s cycles=%d%s%s" % (
                suffix, fmt(r["go"]["poll_us"]["p99"]), fmt(r["c"]["poll_us"]["p99"]), cycles,
                " probe_nice=%d" % probe_nice if probe_nice else "",
                " probe_pace_us=%.0f" % (probe_pace_ns / 1e3) if probe_pace_ns else ""))
        for measure in ("startup", "restart"):
            if measure not in measures:
                continue
            restart = measure == "restart"
            confs = [("default", PERFEVENT_CONF)]
            conf100, got = many_events_conf(many)
            confs.append(("%devents" % got, conf100))
            for cname, conf in confs:
                log("\n== 6%s. %s, %s config: pmcd forks the agent → first answered fetch of %s, %d rounds, ms" % (
                    "b" if restart else "", "restart (each start right after a stop of the same agent)" if restart else "start-up",
                    cname, ONE_METRIC, start_rounds))
                bg = Background(ours)
                r = measure_startup(o, go_agent, go_args, c_args, os.path.join(out, measure + "-" + cname), conf, start_rounds, restart)
                bg = bg.done()
                def ms(v, f="%.0f", none="failed"):
                    return none if v is None else f % (v * 1000)
                for label in ("go", "c"):
                    log("%-3s fork→answer: %s   pmcd start→answer: %s   CPU: %s   teardown: %s   (%s leaves)" % (
                        label, " ".join(ms(x and x[0]) for x in r[label]),
                        " ".join(ms(x and x[1]) for x in r[label]),
                        " ".join("failed" if x is None else ms(x[2], "%.1f", "?") for x in r[label]),
                        " ".join(ms(t) for t in r["teardown_" + label]), r.get("leaves_" + label)))
                results[measure + "_" + cname] = r

                def paired(key, i=None):
                    """Per-round go and c values in ms, rounds where both have one."""
                    pick = (lambda x: x) if i is None else (lambda x: x and x[i])
                    pairs = [(pick(g), pick(c)) for g, c in zip(r[key % "go"], r[key % "c"])]
                    pairs = [(g * 1000, c * 1000) for g, c in pairs if g is not None and c is not None]
                    return [g for g, _ in pairs], [c for _, c in pairs]
                failed = ["%s failed in rounds %s" % (label, ",".join(str(x) for x in r["failed_" + label]))
                          for label in ("go", "c") if r.get("failed_" + label)]
                go_ms, c_ms = paired("%s", 0)
                if go_ms:
                    line = rounds_line("%s_%s_ms" % (measure, cname), go_ms, c_ms, bg)
                    lines.append(line + ("" if not failed else " (" + "; ".join(failed) + ")"))
                else:
                    lines.append("%s_%s_ms no round where both agents answered (%s)" % (measure, cname, "; ".join(failed)))
                go_cpu, c_cpu = paired("%s", 2)
                if go_cpu:
                    lines.append(rounds_line("%s_cpu_%s_ms" % (measure, cname), go_cpu, c_cpu))
                go_td, c_td = paired("teardown_%s")
                if not restart and go_td:
                    lines.append(rounds_line("teardown_%s_ms" % cname, go_td, c_td))

        if o.profile:
            log("\n== where the time goes, flat out, %.0f s per agent per tool (strace slows the agent: counts, not times)" % o.profile)
            r = {}
            for s in slots:
                r[s.label] = run("profiling (%s)" % s.label, lambda: profile(s, o.profile, out))
                x = r[s.label]
                if "strace" in x:
                    log("%-3s syscalls per fetch (strace -c, %d fetches):" % (s.label, x["strace"]["fetches"]))
                    for name, per, us, pc in sorted(x["strace"]["rows"], key=lambda t: -t[1])[:8]:
                        log("      %-20s %7.2f/fetch  %5.1f%% of syscall time" % (name, per, pc))
                if "perf" in x:
                    log("%-3s CPU samples (perf record -e cpu-clock), symbols over 2%%:" % s.label)
                    for pc, dso, sym in x["perf"]["top"][:12]:
                        log("      %5.1f%%  %-18s %s" % (pc, dso[:18], sym[:70]))
            results["profile"] = r
    except KeyboardInterrupt as e:
        stop_all()
        raise BenchError("interrupted (%s)" % e)
    finally:
        stop_all()

    log("\n== summary (go = %s, c = %s)" % (go_agent, o.c_agent))
    for l in lines:
        log(l)
    results["summary"] = lines
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if not o.keep:
        for s in slots:
            for p in (s.pmdas, s.rundir, os.path.dirname(s.exe or s.dir + "/bin/x")):
                shutil.rmtree(p, ignore_errors=True)
    log("results: %s" % out)
    if os.environ.get("BENCH_STRICT") and any(l.endswith("MISS") for l in lines):
        return 3
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        sys.exit("pcpbench: %s" % e)
