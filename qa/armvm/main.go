// Command armvm stands in for pmcd inside the emulated arm64 machine of
// qa's TestARMVM tests, where there is no PCP: it starts pmdaperfevent as
// pmcd starts a pipe agent, fetches every metric below the given names at
// the given times, and prints what it got as one JSON line, prefixed
// "armvm: ", for the test on the host to check.
//
//	armvm -dir /s/fits -at 100ms,1.1s perfevent.hwcounters perfevent.ratio
//
// The directory holds the agent's perfevent.conf (and ratios.conf, if any);
// the agent's log, PMID map and lock file go there too, and the log is part
// of the output. Times are counted from the handshake.
//
// With -kernel there is no agent: armvm opens the events of the
// perfevent.conf itself, each on its own on every CPU, as perf stat -a
// would, and reports at each time what the kernel says: the raw count and
// the enabled and running times. The test compares the agent's scaling with
// that.
//
// Meanwhile one goroutine keeps a CPU busy, at the lowest priority. Under
// QEMU's -icount the emulated clock (and with it the cycle counter) is the
// instruction count scaled, but when every CPU is idle QEMU moves the clock
// on without instructions; the busy CPU keeps the two in step, so that
// instructions per cycle is the emulator's fixed ratio.
//
// armvm exits 0 when it has printed its report, which says what went
// wrong if anything did.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/config"
	"perfevent/internal/pdu"
	"perfevent/internal/perf"
	"perfevent/internal/pmda/pmcdtest"
	"perfevent/internal/pmu"
	"perfevent/internal/setup"
)

// Report is the JSON line; qa's test decodes it.
type Report struct {
	Dir     string
	Fetches []Fetch
	Log     string // the agent's log
	Error   string // why the run stopped early, if it did
}

// Fetch is one FETCH of every metric, or with -kernel one read of every
// event.
type Fetch struct {
	At     time.Duration                   // since the start
	Values map[string]map[int32]float64    // metric → instance → value
	Errors map[string]string               // metrics whose set failed
	Counts map[string]map[int32]perf.Count `json:",omitempty"` // -kernel: event → CPU → reading
}

func main() {
	agent := flag.String("agent", "/bin/pmdaperfevent", "the agent `binary`")
	dir := flag.String("dir", "", "the agent's `directory`: perfevent.conf, ratios.conf, its log")
	at := flag.String("at", "100ms,1.1s", "fetch at these `times` after the start, comma-separated")
	kernel := flag.Bool("kernel", false, "open perfevent.conf's events directly instead of running the agent")
	withCatalog := flag.Bool("catalog", false, "let the agent serve the metric catalog (otherwise --no-catalog: perfevent.conf's events only)")
	flag.Parse()
	r := Report{Dir: *dir}
	times, err := parseTimes(*at)
	if err == nil {
		var stop atomic.Bool
		go spin(&stop)
		if *kernel {
			err = readKernel(&r, times)
		} else {
			err = runAgent(&r, *agent, *withCatalog, times, flag.Args())
		}
		stop.Store(true)
	}
	if err != nil {
		r.Error = err.Error()
	}
	if !*kernel {
		log, _ := os.ReadFile(filepath.Join(*dir, "perfevent.log"))
		r.Log = string(log)
	}
	out, err := json.Marshal(r)
	if err != nil {
		fmt.Fprintln(os.Stderr, "armvm:", err)
		os.Exit(1)
	}
	fmt.Printf("armvm: %s\n", out)
}

func parseTimes(at string) ([]time.Duration, error) {
	var times []time.Duration
	for _, s := range strings.Split(at, ",") {
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("-at: %v", err)
		}
		times = append(times, d)
	}
	return times, nil
}

func runAgent(r *Report, agent string, withCatalog bool, times []time.Duration, subtrees []string) error {
	if len(subtrees) == 0 {
		return errors.New("name the metrics to fetch (subtrees such as perfevent.hwcounters)")
	}
	args := []string{"-d", "127", "-U", "root",
		"-c", filepath.Join(r.Dir, "perfevent.conf"), "-l", filepath.Join(r.Dir, "perfevent.log"),
		"--pmids", filepath.Join(r.Dir, "pmids"), "--lockfile", filepath.Join(r.Dir, "perflock")}
	if !withCatalog {
		args = append(args, "--no-catalog")
	}
	c, err := pmcdtest.StartCommand(exec.Command(agent, args...))
	if err != nil {
		return err
	}
	start := time.Now()
	if err := fetchAll(r, c, start, times, subtrees); err != nil {
		c.Close()
		return err
	}
	return c.Close()
}

// fetchAll fetches every metric below subtrees at each of times.
func fetchAll(r *Report, c *pmcdtest.Client, start time.Time, times []time.Duration, subtrees []string) error {
	var names []string
	var ids []pdu.PMID
	for _, sub := range subtrees {
		below, err := c.Traverse(sub)
		if err != nil {
			return fmt.Errorf("traversing %s: %v", sub, err)
		}
		for _, n := range below {
			id, err := c.PMID(n)
			if err != nil {
				return fmt.Errorf("PMID of %s: %v", n, err)
			}
			names, ids = append(names, n), append(ids, id)
		}
	}
	for _, t := range times {
		time.Sleep(time.Until(start.Add(t)))
		res, err := c.Fetch(ids...)
		if err != nil {
			return fmt.Errorf("fetch at %v: %v", t, err)
		}
		f := Fetch{At: time.Since(start), Values: map[string]map[int32]float64{}, Errors: map[string]string{}}
		for i, set := range res.Sets {
			if err := set.Err(); err != nil {
				f.Errors[names[i]] = err.Error()
				continue
			}
			vals := map[int32]float64{}
			for _, v := range set.Values {
				if x := v.Float64(); !math.IsNaN(x) && !math.IsInf(x, 0) {
					vals[v.Inst] = x
				}
			}
			f.Values[names[i]] = vals
		}
		r.Fetches = append(r.Fetches, f)
	}
	return nil
}

// readKernel opens the events of the directory's perfevent.conf, as the
// agent's planner resolves them, each on its own descriptor per CPU, and
// reads them all at each of times.
func readKernel(r *Report, times []time.Duration) error {
	f, perr := config.ParseFile(filepath.Join(r.Dir, "perfevent.conf"))
	if f == nil {
		return perr
	}
	m, err := setup.ReadMachine(pmu.Default())
	if err != nil {
		return err
	}
	type counter struct {
		event string
		cpu   int
		fd    *perf.FD
	}
	var open []counter
	defer func() {
		for _, c := range open {
			c.fd.Close()
		}
	}()
	for _, sp := range setup.Make(f, perr, m, false).Specs() {
		attr := sp.Attr
		attr.Size = perf.AttrSize
		attr.Read_format = perf.ReadFormat
		attr.Bits &^= unix.PerfBitDisabled | unix.PerfBitInherit
		for _, cpu := range sp.CPUs {
			fd, err := perf.OpenCPU(&attr, cpu)
			if err != nil {
				return fmt.Errorf("opening %s on cpu%d: %v", sp.Name, cpu, err)
			}
			open = append(open, counter{sp.Name, cpu, fd})
		}
	}
	start := time.Now()
	for _, t := range times {
		time.Sleep(time.Until(start.Add(t)))
		f := Fetch{At: time.Since(start), Counts: map[string]map[int32]perf.Count{}}
		for _, c := range open {
			n, err := c.fd.Read()
			if err != nil {
				return fmt.Errorf("reading %s on cpu%d: %v", c.event, c.cpu, err)
			}
			if f.Counts[c.event] == nil {
				f.Counts[c.event] = map[int32]perf.Count{}
			}
			f.Counts[c.event][int32(c.cpu)] = n
		}
		r.Fetches = append(r.Fetches, f)
	}
	return nil
}

// spin keeps one CPU executing instructions until stop is set. It runs
// as SCHED_IDLE, so that it never keeps the agent waiting: reads that the
// guest's scheduler put off would be taken tens of emulated ms apart.
func spin(stop *atomic.Bool) {
	runtime.LockOSThread()
	unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0) // best effort
	x := uint64(1)
	for !stop.Load() {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink = x
}

var sink uint64
