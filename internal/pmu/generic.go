package pmu

import (
	"strings"

	"golang.org/x/sys/unix"
)

// genericEvent is one row of the kernel's generic event tables
// (linux/perf_event.h): a perf tool name, its aliases and the
// PERF_COUNT_* constant name libpfm4 also accepts.
type genericEvent struct {
	Name    string   // perf's name, e.g. "cpu-cycles"
	Aliases []string // other perf/libpfm4 names, e.g. "cycles"
	Const   string   // e.g. "PERF_COUNT_HW_CPU_CYCLES"
	Type    uint32
	Config  uint64
	Desc    string
}

// perfCountSWCgroupSwitches is missing from x/sys/unix (kernel 5.13).
const perfCountSWCgroupSwitches = 0xb

var hardwareEvents = []genericEvent{
	{"cpu-cycles", []string{"cycles"}, "PERF_COUNT_HW_CPU_CYCLES", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CPU_CYCLES, "CPU cycles"},
	{"instructions", nil, "PERF_COUNT_HW_INSTRUCTIONS", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_INSTRUCTIONS, "retired instructions"},
	{"cache-references", nil, "PERF_COUNT_HW_CACHE_REFERENCES", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CACHE_REFERENCES, "last level cache accesses"},
	{"cache-misses", nil, "PERF_COUNT_HW_CACHE_MISSES", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CACHE_MISSES, "last level cache misses"},
	{"branch-instructions", []string{"branches"}, "PERF_COUNT_HW_BRANCH_INSTRUCTIONS", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_BRANCH_INSTRUCTIONS, "retired branch instructions"},
	{"branch-misses", nil, "PERF_COUNT_HW_BRANCH_MISSES", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_BRANCH_MISSES, "mispredicted branches"},
	{"bus-cycles", nil, "PERF_COUNT_HW_BUS_CYCLES", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_BUS_CYCLES, "bus cycles"},
	{"stalled-cycles-frontend", []string{"idle-cycles-frontend"}, "PERF_COUNT_HW_STALLED_CYCLES_FRONTEND", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_STALLED_CYCLES_FRONTEND, "cycles stalled in the frontend"},
	{"stalled-cycles-backend", []string{"idle-cycles-backend"}, "PERF_COUNT_HW_STALLED_CYCLES_BACKEND", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_STALLED_CYCLES_BACKEND, "cycles stalled in the backend"},
	{"ref-cycles", nil, "PERF_COUNT_HW_REF_CPU_CYCLES", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_REF_CPU_CYCLES, "reference cycles, not scaled by frequency"},
}

var softwareEvents = []genericEvent{
	{"cpu-clock", nil, "PERF_COUNT_SW_CPU_CLOCK", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_CLOCK, "CPU clock, nanoseconds"},
	{"task-clock", nil, "PERF_COUNT_SW_TASK_CLOCK", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_TASK_CLOCK, "task clock, nanoseconds"},
	{"page-faults", []string{"faults"}, "PERF_COUNT_SW_PAGE_FAULTS", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_PAGE_FAULTS, "page faults"},
	{"context-switches", []string{"cs"}, "PERF_COUNT_SW_CONTEXT_SWITCHES", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CONTEXT_SWITCHES, "context switches"},
	{"cpu-migrations", []string{"migrations"}, "PERF_COUNT_SW_CPU_MIGRATIONS", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_MIGRATIONS, "task migrations between CPUs"},
	{"minor-faults", nil, "PERF_COUNT_SW_PAGE_FAULTS_MIN", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_PAGE_FAULTS_MIN, "page faults served without I/O"},
	{"major-faults", nil, "PERF_COUNT_SW_PAGE_FAULTS_MAJ", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_PAGE_FAULTS_MAJ, "page faults that needed I/O"},
	{"alignment-faults", nil, "PERF_COUNT_SW_ALIGNMENT_FAULTS", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_ALIGNMENT_FAULTS, "alignment faults"},
	{"emulation-faults", nil, "PERF_COUNT_SW_EMULATION_FAULTS", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_EMULATION_FAULTS, "instruction emulation faults"},
	{"dummy", nil, "PERF_COUNT_SW_DUMMY", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_DUMMY, "counts nothing"},
	{"bpf-output", nil, "PERF_COUNT_SW_BPF_OUTPUT", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_BPF_OUTPUT, "BPF output, for sampling only"},
	{"cgroup-switches", nil, "PERF_COUNT_SW_CGROUP_SWITCHES", unix.PERF_TYPE_SOFTWARE, perfCountSWCgroupSwitches, "context switches to a task in another cgroup"},
}

// dynamicSoftware is the C agent's synthetic "software" PMU for [dynamic]
// sections: the kernel's software PMU has no events directory, so these
// nine are made up, and only these nine (parse_events.c, setup_sw_pmu).
var dynamicSoftware = []string{
	"cpu-clock", "task-clock", "page-faults", "context-switches", "cpu-migrations",
	"minor-faults", "major-faults", "alignment-faults", "emulation-faults",
}

// softwareNamed is the software event of perf's name, one of
// dynamicSoftware: a scan of a dozen rows, where genericNamed would build
// its index of every generic name, aliases and cache events included, on
// the first [dynamic] software event of a start.
func softwareNamed(name string) genericEvent {
	for _, e := range softwareEvents {
		if e.Name == name {
			return e
		}
	}
	return genericEvent{}
}

// cacheDef describes one PERF_COUNT_HW_CACHE_* cache and the operations the
// perf tool and libpfm4 offer for it.
type cacheDef struct {
	Perf   string // perf's prefix, e.g. "L1-dcache"
	Libpfm string // libpfm4's suffix, e.g. "L1D"
	ID     uint64
	Ops    []uint64 // allowed PERF_COUNT_HW_CACHE_OP_*, READ first
	Desc   string
}

var caches = []cacheDef{
	{"L1-dcache", "L1D", unix.PERF_COUNT_HW_CACHE_L1D, allOps, "level 1 data cache"},
	{"L1-icache", "L1I", unix.PERF_COUNT_HW_CACHE_L1I, []uint64{unix.PERF_COUNT_HW_CACHE_OP_READ, unix.PERF_COUNT_HW_CACHE_OP_PREFETCH}, "level 1 instruction cache"},
	{"LLC", "LL", unix.PERF_COUNT_HW_CACHE_LL, allOps, "last level cache"},
	{"dTLB", "DTLB", unix.PERF_COUNT_HW_CACHE_DTLB, allOps, "data TLB"},
	{"iTLB", "ITLB", unix.PERF_COUNT_HW_CACHE_ITLB, []uint64{unix.PERF_COUNT_HW_CACHE_OP_READ}, "instruction TLB"},
	{"branch", "BPU", unix.PERF_COUNT_HW_CACHE_BPU, []uint64{unix.PERF_COUNT_HW_CACHE_OP_READ}, "branch prediction unit"},
	{"node", "NODE", unix.PERF_COUNT_HW_CACHE_NODE, allOps, "local memory (NUMA node)"},
}

var allOps = []uint64{unix.PERF_COUNT_HW_CACHE_OP_READ, unix.PERF_COUNT_HW_CACHE_OP_WRITE, unix.PERF_COUNT_HW_CACHE_OP_PREFETCH}

// opWords are perf's words for an operation: "<cache>-loads",
// "<cache>-load-misses". It, opDesc and libpfmOp are arrays indexed by
// the operation, not maps, so that they are data in the binary rather
// than maps every start builds.
var opWords = [...][2]string{
	unix.PERF_COUNT_HW_CACHE_OP_READ:     {"loads", "load-misses"},
	unix.PERF_COUNT_HW_CACHE_OP_WRITE:    {"stores", "store-misses"},
	unix.PERF_COUNT_HW_CACHE_OP_PREFETCH: {"prefetches", "prefetch-misses"},
}

var opDesc = [...]string{
	unix.PERF_COUNT_HW_CACHE_OP_READ:     "load",
	unix.PERF_COUNT_HW_CACHE_OP_WRITE:    "store",
	unix.PERF_COUNT_HW_CACHE_OP_PREFETCH: "prefetch",
}

func cacheConfig(id, op, result uint64) uint64 { return id | op<<8 | result<<16 }

// cacheEvents expands the cache table into perf's named events
// ("L1-dcache-load-misses", ...), in perf list's order.
func cacheEvents() []genericEvent {
	var evs []genericEvent
	for _, c := range caches {
		for _, op := range c.Ops {
			evs = append(evs, cacheEvent(c, op, false), cacheEvent(c, op, true))
		}
	}
	return evs
}

// cacheEvent is perf's named event for one operation of cache c, of its
// accesses or its misses.
func cacheEvent(c cacheDef, op uint64, miss bool) genericEvent {
	w, res, result, what := opWords[op][0], "ACCESS", uint64(unix.PERF_COUNT_HW_CACHE_RESULT_ACCESS), " accesses"
	if miss {
		w, res, result, what = opWords[op][1], "MISS", unix.PERF_COUNT_HW_CACHE_RESULT_MISS, " misses"
	}
	return genericEvent{Name: c.Perf + "-" + w, Type: unix.PERF_TYPE_HW_CACHE,
		Const:  "PERF_COUNT_HW_CACHE_" + c.Libpfm + ":" + libpfmOp[op] + ":" + res,
		Config: cacheConfig(c.ID, op, result),
		Desc:   c.Desc + " " + opDesc[op] + what}
}

var libpfmOp = [...]string{
	unix.PERF_COUNT_HW_CACHE_OP_READ:     "READ",
	unix.PERF_COUNT_HW_CACHE_OP_WRITE:    "WRITE",
	unix.PERF_COUNT_HW_CACHE_OP_PREFETCH: "PREFETCH",
}

// genericNamed finds a plain generic name: perf's name, an alias or the
// PERF_COUNT_* constant, ignoring case as libpfm4 does. It scans the
// tables rather than index them: a start looks up a few names at most
// (most resolve through libpfm4 first), and an index of every name cost
// more to build than all the scans. Where two rows share a name the
// cache events win over the software ones, and those over the hardware
// ones.
func genericNamed(name string) (genericEvent, bool) {
	lower := strings.ToLower(name)
	if e, ok := cacheNamed(lower); ok {
		return e, true
	}
	for _, tab := range [...][]genericEvent{softwareEvents, hardwareEvents} {
		for i := len(tab) - 1; i >= 0; i-- {
			if e := tab[i]; e.named(lower) {
				return e, true
			}
		}
	}
	return genericEvent{}, false
}

// named reports whether lower, a lower-cased name, is e's name, one of
// its aliases, or its constant.
func (e genericEvent) named(lower string) bool {
	if lowerASCIIEqual(lower, e.Name) || (!strings.Contains(e.Const, ":") && lowerASCIIEqual(lower, e.Const)) {
		return true
	}
	for _, a := range e.Aliases {
		if lowerASCIIEqual(lower, a) {
			return true
		}
	}
	return false
}

// cacheNamed finds perf's name of a cache event ("l1-dcache-load-misses",
// lower-cased) without spelling every one out; the last of cacheEvents'
// order wins, as for the other tables.
func cacheNamed(lower string) (genericEvent, bool) {
	for i := len(caches) - 1; i >= 0; i-- {
		c := caches[i]
		if len(lower) <= len(c.Perf) || lower[len(c.Perf)] != '-' || !lowerASCIIEqual(lower[:len(c.Perf)], c.Perf) {
			continue
		}
		rest := lower[len(c.Perf)+1:]
		for j := len(c.Ops) - 1; j >= 0; j-- {
			op := c.Ops[j]
			if rest == opWords[op][1] {
				return cacheEvent(c, op, true), true
			}
			if rest == opWords[op][0] {
				return cacheEvent(c, op, false), true
			}
		}
	}
	return genericEvent{}, false
}

// lowerASCIIEqual reports whether lower equals key, an ASCII name, in
// lower case.
func lowerASCIIEqual(lower, key string) bool {
	if len(lower) != len(key) {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if lower[i] != c {
			return false
		}
	}
	return true
}
