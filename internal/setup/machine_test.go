package setup

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"perfevent/internal/hostfs"
	"perfevent/internal/pmu"
)

// sysTree returns a new directory standing for /sys, and a function that
// writes a file of one line below it, making its directories.
func sysTree(t *testing.T) (string, func(path, text string)) {
	sys := t.TempDir()
	return sys, func(path, text string) {
		t.Helper()
		path = filepath.Join(sys, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// ReadMachine reads one CPU's topology per package, where the kernel
// lists the package's CPUs (package_cpus_list), and each CPU's without;
// offline CPUs get no socket.
func TestReadMachineReadsAPackageOnce(t *testing.T) {
	sys, write := sysTree(t)
	cpu := func(n int) string { return filepath.Join("devices/system/cpu", "cpu"+string(rune('0'+n)), "topology") }
	write("devices/system/cpu/online", "0-3,5-7")
	// Package 0 is CPUs 0-3 and 4 (offline); only CPU 0's files are there,
	// so a read of CPU 1, 2 or 3 would find nothing.
	write(filepath.Join(cpu(0), "physical_package_id"), "0")
	write(filepath.Join(cpu(0), "package_cpus_list"), "0-4")
	// Package 1: CPUs 5 and 6 list it; 7 has an id but an older kernel's
	// files, without the list.
	write(filepath.Join(cpu(5), "physical_package_id"), "1")
	write(filepath.Join(cpu(5), "package_cpus_list"), "5-6")
	write(filepath.Join(cpu(7), "physical_package_id"), "3")
	m, err := ReadMachine(&pmu.FS{FS: hostfs.FS{Sys: sys}})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int]int{0: 0, 1: 0, 2: 0, 3: 0, 5: 1, 6: 1, 7: 3}; !maps.Equal(m.Sockets, want) {
		t.Errorf("sockets %v, want %v", m.Sockets, want)
	}
}

// A plan made with no operands shares the counters and names of the one
// it was made from, and a plan made from it in turn leaves both as they
// were.
func TestWithNoOperandsShares(t *testing.T) {
	p := plan(t, fixture(t, "vm"), "[perf]\ncpu-clock\n")
	q := p.WithOperands(nil, Note{Text: "catalog: nothing usable"})
	if len(q.Counters) != 1 || len(q.Notes) != len(p.Notes)+1 {
		t.Fatalf("q: %d counters, %d notes", len(q.Counters), len(q.Notes))
	}
	r := q.WithOperands([]Operand{{Term: "page-faults", For: []string{"faults"}}})
	if len(r.Counters) != 2 || len(q.Counters) != 1 || len(p.Counters) != 1 {
		t.Errorf("counters: r %d, q %d, p %d; want 2, 1, 1", len(r.Counters), len(q.Counters), len(p.Counters))
	}
	if _, ok := p.taken["page_faults"]; ok {
		t.Error("r's name was taken in p")
	}
	if q.WithOperands([]Operand{{Term: "page-faults", For: []string{"again"}}}).Counters[1].For != "for perfevent.ratio.again" {
		t.Error("a second plan from q did not get page-faults for itself")
	}
}

// ReadMachine finds the nodes from one listing of the node directory:
// node<N> directories only, numerically ordered, as the glob node[0-9]*
// and the C agent's versionsort give them.
func TestReadMachineNodes(t *testing.T) {
	sys, write := sysTree(t)
	write("devices/system/cpu/online", "0-3")
	write("devices/system/node/possible", "0-10")
	write("devices/system/node/node0/cpulist", "0")
	write("devices/system/node/node10/cpulist", "3")
	write("devices/system/node/node2/cpulist", "2")
	write("devices/system/node/node1/cpulist", "1")
	write("devices/system/node/nodeX/cpulist", "9")
	write("devices/system/node/node/cpulist", "8")
	m, err := ReadMachine(&pmu.FS{FS: hostfs.FS{Sys: sys}})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int{{0}, {1}, {2}, {3}}
	if len(m.Topology.Nodes) != len(want) {
		t.Fatalf("nodes %v, want %v", m.Topology.Nodes, want)
	}
	for i := range want {
		if !slices.Equal(m.Topology.Nodes[i], want[i]) {
			t.Errorf("nodes %v, want %v", m.Topology.Nodes, want)
			break
		}
	}
	if got := nodeDirs(filepath.Join(sys, "devices/system/nosuch")); got != nil {
		t.Errorf("nodeDirs of no directory = %q", got)
	}
}
