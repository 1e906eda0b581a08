package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/cpuhotplug"
	"perfevent/internal/hostfs"
	"perfevent/internal/pmda"
	"perfevent/internal/pmda/pmcdtest"
	"perfevent/internal/pmu"
	"perfevent/internal/reservation/reservationtest"
	"perfevent/internal/testlog"
	"perfevent/internal/testwait"
)

func TestMain(m *testing.M) {
	reservationtest.Main(nil) // the lock holders of the reservation tests
	os.Exit(m.Run())
}

// fakes are the countertest fakes of an agent, one per generation (a fake
// refuses a second open of an event on a CPU, which a rebuild does before
// it closes the old generation).
type fakes struct {
	mu  sync.Mutex
	all []*countertest.Opener
}

func (f *fakes) open() counter.Opener {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := countertest.New()
	f.all = append(f.all, o)
	return o
}

// AddAll counts on every counter open now, whichever generation holds it.
func (f *fakes) AddAll(value, enabled, running uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range f.all {
		o.AddAll(value, enabled, running)
	}
}

// OpenNow and CountingNow are the number of counters open, and of those
// counting, in every generation.
func (f *fakes) OpenNow() int     { return f.total((*countertest.Opener).OpenNow) }
func (f *fakes) CountingNow() int { return f.total((*countertest.Opener).CountingNow) }

func (f *fakes) total(count func(*countertest.Opener) int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, o := range f.all {
		n += count(o)
	}
	return n
}

// tester is an Agent started in this process as pmdaperfevent starts it,
// with its files in a directory of the test's, over the vm fixture's sysfs
// (whose online list the test may rewrite) and the countertest fake, and a
// fake pmcd talking to it.
type tester struct {
	a      *Agent
	c      *pmcdtest.Client
	fake   *fakes
	log    *testlog.Buffer
	dir    string
	conf   string // perfevent.conf
	lock   string // perfalloc's lock file
	online string // the fixture's list of online CPUs
	closed sync.Once
}

// close closes the agent once, whoever asks first: a benchmark, or the
// test's cleanup.
func (h *tester) close() { h.closed.Do(h.a.Close) }

func startAgent(t *testing.T, online, conf string) *tester {
	t.Helper()
	return startAgentWith(t, online, conf, nil)
}

// startAgentWith lets the test change the agent before it starts.
func startAgentWith(t *testing.T, online, conf string, before func(*Agent)) *tester {
	t.Helper()
	return startAgentOn(t, "vm", online, conf, before)
}

// startAgentOn starts the agent over another of internal/pmu's fixtures,
// such as skylake for a machine with a hardware PMU.
func startAgentOn(t *testing.T, fixture, online, conf string, before func(*Agent)) *tester {
	t.Helper()
	h := newAgentOn(t, fixture, online, conf, before)
	c, err := pmcdtest.Connect(h.a.Serve)
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return h
}

// newAgentOn starts the agent as startAgentOn does, with nothing connected
// to it yet; the agent closes when the test ends.
func newAgentOn(t testing.TB, fixture, online, conf string, before func(*Agent)) *tester {
	t.Helper()
	dir := t.TempDir()
	sys := filepath.Join(dir, "sys")
	// Copied in-process: a fork of cp from a test under qemu-user can
	// deadlock in the child before its exec, in qemu.
	if err := os.CopyFS(sys, os.DirFS(filepath.Join("..", "pmu", "testdata", fixture, "sys"))); err != nil {
		t.Fatalf("copying the %s fixture: %v", fixture, err)
	}
	h := &tester{fake: &fakes{}, log: &testlog.Buffer{}, dir: dir,
		conf:   filepath.Join(dir, "perfevent.conf"),
		lock:   filepath.Join(dir, "perflock"),
		online: filepath.Join(sys, "devices", "system", "cpu", "online")}
	writeOnline(t, h.online, online)
	if err := os.WriteFile(h.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	h.a = New(Options{
		Config:    h.conf,
		PMIDs:     filepath.Join(dir, "pmids"),
		LockFile:  h.lock,
		Poll:      10 * time.Millisecond,
		FS:        &pmu.FS{FS: hostfs.FS{Sys: sys, CPUInfo: filepath.Join("..", "pmu", "testdata", fixture, "proc", "cpuinfo")}, Tracing: []string{filepath.Join(dir, "no-tracing")}},
		Log:       pmda.NewLogger(h.log, Program),
		NewOpener: h.fake.open,
		Hotplug:   cpuhotplug.Options{Poll: 10 * time.Millisecond, NoUevent: true},
		// These tests count the counters of their own configuration;
		// the catalog's are TestCheckShowsTheCatalog's.
		NoCatalog: true,
	})
	if before != nil {
		before(h.a)
	}
	if err := h.a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.close()
		if t.Failed() {
			t.Logf("agent log:\n%s", h.log)
		}
	})
	return h
}

// waitLog waits for the log to say text.
func (h *tester) waitLog(t *testing.T, text string) {
	t.Helper()
	testwait.Eventually(t, testwait.Settle, fmt.Sprintf("the log to say %q", text), func() bool {
		return strings.Contains(h.log.String(), text)
	})
}

// values fetches a metric by name, through the fake pmcd: instance → value.
func (h *tester) values(t *testing.T, name string) map[int32]float64 {
	t.Helper()
	return h.fetchSet(t, name).Map()
}

// fetchSet fetches a metric by name, through the fake pmcd, and fails the
// test unless its value set came back whole.
func (h *tester) fetchSet(t *testing.T, name string) pmcdtest.Set {
	t.Helper()
	id, err := h.c.PMID(name)
	if err != nil {
		t.Fatalf("PMID of %s: %v", name, err)
	}
	r, err := h.c.Fetch(id)
	if err != nil {
		t.Fatalf("fetching %s: %v", name, err)
	}
	if err := r.Sets[0].Err(); err != nil {
		t.Fatalf("fetching %s: %v", name, err)
	}
	return r.Sets[0]
}

// writeOnline replaces the fixture's online list in one step, as the
// kernel's changes: the watcher polling it must never read it half written.
func writeOnline(t testing.TB, path, list string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(list+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
