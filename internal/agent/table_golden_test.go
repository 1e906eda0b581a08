package agent

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/hostfs"
	"perfevent/internal/metrics"
	"perfevent/internal/pdu"
	"perfevent/internal/pmda"
	"perfevent/internal/testgolden"
)

var updateTables = flag.Bool("update-tables", false, "rewrite testdata/table-*.txt from the tables built now")

// tableText is everything a client can learn of a table: each metric's
// names, descriptor, labels and texts, each instance domain's instances,
// labels and texts. The configuration's directory reads DIR.
func tableText(t *pmda.Table) string {
	var b strings.Builder
	for i := range t.Metrics() {
		m := &t.Metrics()[i]
		fmt.Fprintf(&b, "metric %s %+v labels %v\n  oneline %q\n  help %q\n", m.Name, m.Desc, m.Labels, m.OneLine, m.LongHelp())
		if m.Desc.InDom == pdu.InDomNull {
			continue
		}
		if d, ok := t.InDom(m.Desc.InDom); ok {
			fmt.Fprintf(&b, "  indom %v labels %v oneline %q help %q live %v\n", d.InDom, d.Labels, d.OneLine, d.Help, d.Live != nil)
			for _, in := range d.Instances {
				fmt.Fprintf(&b, "    %d %q %v\n", in.ID, in.Name, in.Labels)
			}
		}
	}
	return b.String()
}

// The table of a generation, texts and all, is the one in testdata: on
// the skylake fixture (the catalog's ratios, a user's ratio, a derived
// metric, per-cgroup metrics) and on the vm fixture with qa's vm.conf
// (the C agent's names of events not configured).
func TestTableTexts(t *testing.T) {
	vm, err := os.ReadFile(filepath.Join("..", "..", "qa", "testdata", "vm.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, fx := range []struct{ name, conf string }{{"skylake", ""}, {"vm", string(vm)}} {
		t.Run(fx.name, func(t *testing.T) {
			dir := confDir(t)
			if fx.conf != "" {
				if err := os.WriteFile(filepath.Join(dir, "perfevent.conf"), []byte(fx.conf), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			o := &Options{Config: filepath.Join(dir, "perfevent.conf"), CLayout: filepath.Join(dir, "perfevent.conf"),
				FS: fixtureFS(fx.name, filepath.Join("..", "pmu", "testdata", fx.name, "tracing"))}
			files := holdFiles(o)
			defer files.Close()
			r, err := ready(o, files)
			if err != nil {
				t.Fatal(err)
			}
			fake := countertest.New()
			c, err := r.open(o, counter.Config{Opener: fake})
			if err != nil {
				t.Fatal(err)
			}
			defer c.set.Close()
			keys, extra := cLayout(c, fake)
			clusters := metrics.NewClusters()
			clusters.Prefer(keys)
			cg := &metrics.Cgroups{Instances: pmda.NewInstances(), Events: []metrics.CgroupEvent{{Event: 0, Metric: "cpu_clock", About: "Configured as \"cpu-clock\" in cgroups.conf."}}}
			a := &Agent{holds: newHolds(0, hostfs.Default())}
			table, _, err := buildTable(o, c, clusters, cg, a.reservations(), extra...)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.ReplaceAll(tableText(table), dir, "DIR")
			testgolden.Check(t, filepath.Join("testdata", "table-"+fx.name+".txt"), got, *updateTables)
		})
	}
}
