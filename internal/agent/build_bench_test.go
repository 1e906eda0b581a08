package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/hostfs"
	"perfevent/internal/metrics"
	"perfevent/internal/pmu"
)

// benchConfigs are the bench's two start-up configurations (qa/bench):
// the default one, and 100 events, the software ones then this host's
// tracepoints.
func benchConfigs(b *testing.B) map[string]string {
	b.Helper()
	vm, err := os.ReadFile(filepath.Join("..", "..", "qa", "testdata", "vm.conf"))
	if err != nil {
		b.Fatal(err)
	}
	confs := map[string]string{"vm": string(vm)}
	if many := manyEventsConf(100); many != "" {
		confs["100events"] = many
	}
	return confs
}

// manyEventsConf is a [perf] section of n events as qa/bench's start-up
// measure writes it: the nine software events, then tracepoints of the
// common, low-rate subsystems first, never the syscalls ones; "" when
// this host has no readable tracefs.
func manyEventsConf(n int) string {
	evs := []string{"cpu-clock", "task-clock", "page-faults", "context-switches", "cpu-migrations",
		"minor-faults", "major-faults", "alignment-faults", "emulation-faults"}
	var root string
	for _, d := range []string{"/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"} {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			root = d
			break
		}
	}
	if root == "" {
		return ""
	}
	first := []string{"sched", "timer", "irq", "workqueue", "signal", "task", "kmem", "writeback", "block", "power"}
	ents, err := os.ReadDir(root)
	if err != nil {
		return ""
	}
	var subs []string
	for _, e := range ents {
		subs = append(subs, e.Name())
	}
	rank := func(s string) int {
		if i := slices.Index(first, s); i >= 0 {
			return i
		}
		return len(first)
	}
	slices.SortFunc(subs, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	for _, sub := range subs {
		switch sub {
		case "syscalls", "raw_syscalls", "ftrace", "header_page", "header_event":
			continue
		}
		tps, err := os.ReadDir(filepath.Join(root, sub))
		if err != nil {
			continue
		}
		for _, tp := range tps {
			if _, err := os.Stat(filepath.Join(root, sub, tp.Name(), "id")); err != nil {
				continue
			}
			evs = append(evs, sub+":"+tp.Name())
			if len(evs) >= n {
				return "[perf]\n" + strings.Join(evs, "\n") + "\n"
			}
		}
	}
	return ""
}

// benchOptions are the agent's options on this host for conf, as
// qa/bench starts it: the configuration is also the C agent's layout.
func benchOptions(b *testing.B, conf string) *Options {
	b.Helper()
	dir := b.TempDir()
	path := filepath.Join(dir, "perfevent.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	return &Options{Config: path, CLayout: path, PMIDs: filepath.Join(dir, "pmids")}
}

// BenchmarkReady is the start-up's reading and planning of the
// configuration on this host (ready: setup.Make, the C layout, the
// catalog), each time with a fresh view of sysfs, as a start has.
func BenchmarkReady(b *testing.B) {
	for name, conf := range benchConfigs(b) {
		b.Run(name, func(b *testing.B) {
			o := benchOptions(b, conf)
			files := holdFiles(o)
			defer files.Close()
			b.ReportAllocs()
			for b.Loop() {
				o.FS = pmu.Default()
				if _, err := ready(o, files); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchOpened is conf readied on this host and opened through the fake
// opener.
func benchOpened(b *testing.B, conf string) (*Options, *readied) {
	b.Helper()
	o := benchOptions(b, conf)
	files := holdFiles(o)
	b.Cleanup(func() { files.Close() })
	r, err := ready(o, files)
	if err != nil {
		b.Fatal(err)
	}
	return o, r
}

// BenchmarkOpenRecord is what follows opening the counters: recording
// what opened (recordOpen), the derived metrics and choosing the ratios.
// The fake opener opens every event.
func BenchmarkOpenRecord(b *testing.B) {
	for name, conf := range benchConfigs(b) {
		b.Run(name, func(b *testing.B) {
			o, r := benchOpened(b, conf)
			b.ReportAllocs()
			for b.Loop() {
				c, err := r.open(o, counter.Config{Opener: countertest.New()})
				if err != nil {
					b.Fatal(err)
				}
				c.set.Close()
			}
		})
	}
}

// BenchmarkBuildTable is the generation's table (metrics.Build) with the
// C agent's names, from counters opened through the fake opener.
func BenchmarkBuildTable(b *testing.B) {
	for name, conf := range benchConfigs(b) {
		b.Run(name, func(b *testing.B) {
			o, r := benchOpened(b, conf)
			fake := countertest.New()
			c, err := r.open(o, counter.Config{Opener: fake})
			if err != nil {
				b.Fatal(err)
			}
			defer c.set.Close()
			a := &Agent{holds: newHolds(0, hostfs.Default())}
			b.ReportAllocs()
			for b.Loop() {
				keys, extra := cLayout(c, fake)
				clusters := metrics.NewClusters()
				clusters.Prefer(keys)
				if _, _, err := buildTable(o, c, clusters, nil, a.reservations(), extra...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
