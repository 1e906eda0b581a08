package metrics

import (
	"net"
	"path/filepath"
	"testing"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/pdu"
	"perfevent/internal/pmda"
)

// fakeCgroups is a CgroupReader with scripted values.
type fakeCgroups struct {
	ids   []int32
	vals  [][]uint64 // per cgroup, per event
	reads int
	need  []bool
}

func (f *fakeCgroups) Read(need []bool) { f.reads++; f.need = append(f.need[:0], need...) }
func (f *fakeCgroups) Len() int         { return len(f.ids) }
func (f *fakeCgroups) Counted() int     { return len(f.ids) }
func (f *fakeCgroups) At(i, ev int) (int32, uint64, float64) {
	return f.ids[i], f.vals[i][ev], 1
}

func TestCgroupMetrics(t *testing.T) {
	set, err := counter.New([]counter.Spec{{Name: "cpu-clock", CPUs: []int{0}}}, counter.Config{Opener: countertest.New()})
	if err != nil {
		t.Fatal(err)
	}
	set.Open()
	live := pmda.NewInstances()
	if err := live.Set([]pmda.Instance{CgroupInstance(5, "/a.slice"), CgroupInstance(7, "/b.slice")}); err != nil {
		t.Fatal(err)
	}
	cg := &fakeCgroups{ids: []int32{5, 7}, vals: [][]uint64{{100, 1}, {200, 2}}}
	clusters, _ := LoadClusters(filepath.Join(t.TempDir(), "pmids"))
	table, src, err := Build(Spec{
		Version: "test", Set: set, Clusters: clusters,
		Counters: []Counter{{Event: 0, Metric: "cpu_clock"}},
		Cgroups: &Cgroups{
			Events:    []CgroupEvent{{Event: 0, Metric: "cpu_clock"}, {Event: 1, Metric: "context_switches"}},
			Reader:    cg,
			Instances: live,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := net.Pipe()
	agent := pmda.New(pmda.Config{Fetcher: src}, table)
	done := make(chan error, 1)
	go func() { done <- agent.Serve(theirs); theirs.Close() }()
	t.Cleanup(func() { ours.Close(); <-done })
	r := &rig{t: t, table: table, conn: ours, r: pdu.NewReader(ours)}
	r.next()
	r.send(r.b.Creds(1, pdu.VersionCred(0)))

	// The indom's cluster comes first ("cgroup"), then one per event.
	for name, want := range map[string]string{
		"perfevent.cgroup.cpu_clock.value":            "127.2050.0",
		"perfevent.cgroup.context_switches.dutycycle": "127.2051.1",
		"perfevent.cgroup.mode":                       "127.0.3",
		"perfevent.cgroup.counting":                   "127.0.4",
	} {
		if id, err := table.PMID(name); err != nil || id.String() != want {
			t.Errorf("%s = %v, %v; want %s", name, id, err, want)
		}
	}
	got := r.fetch("perfevent.cgroup.context_switches.value", "perfevent.hwcounters.cpu_clock.value", "perfevent.cgroup.counted")
	if want := map[int32]float64{5: 1, 7: 2}; !same(got[0], want) {
		t.Errorf("context_switches = %v, want %v", got[0], want)
	}
	if got[2][-1] != 2 {
		t.Errorf("perfevent.cgroup.counted = %v, want 2", got[2])
	}
	if cg.reads != 1 || cg.need[0] || !cg.need[1] {
		t.Errorf("%d reads needing %v; want 1 read of event 1 only", cg.reads, cg.need)
	}
	r.fetch("perfevent.hwcounters.cpu_clock.value")
	if cg.reads != 1 {
		t.Errorf("a fetch of no cgroup metric read the cgroups")
	}

	// The instance domain follows the live list, in the same table.
	m, _ := table.Metric(pdu.NewPMID(Domain, FirstOwn+2, 0))
	d, _ := table.InDom(m.Desc.InDom)
	if in, ok := d.Instance(7); !ok || in.Name != "/b.slice" {
		t.Errorf("instance 7 = %v, %v; want /b.slice", in, ok)
	}
	live.Set([]pmda.Instance{CgroupInstance(7, "/b.slice"), CgroupInstance(9, "/c.slice")})
	if _, ok := d.Instance(5); ok {
		t.Error("instance 5 is still there after it went")
	}
	if in, ok := d.Instance(9); !ok || in.Name != "/c.slice" || in.Labels["cgroup"] != "/c.slice" {
		t.Errorf("instance 9 = %v, %v; want /c.slice", in, ok)
	}
	if err := live.Set([]pmda.Instance{CgroupInstance(1, "/x"), CgroupInstance(1, "/y")}); err == nil {
		t.Error("a duplicate id was accepted")
	}
	if live.Len() != 2 {
		t.Errorf("a bad list replaced the good one")
	}
}
