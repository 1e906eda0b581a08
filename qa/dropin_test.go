package qa

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// pmidsOf is pminfo -m's answer: each metric's PMID, by name.
func pmidsOf(t *testing.T, out string) map[string]string {
	t.Helper()
	re := regexp.MustCompile(`^(\S+) PMID: (127\.\d+\.\d+)$`)
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if g := re.FindStringSubmatch(strings.TrimSpace(line)); g != nil {
			m[g[1]] = g[2]
		}
	}
	if len(m) == 0 {
		t.Fatalf("pminfo -m listed no perfevent metric:\n%s", out)
	}
	return m
}

// cStockConfig is the C agent's own perfevent.conf, as Debian's pcp
// installs it.
func cStockConfig(t *testing.T) (path, text string) {
	t.Helper()
	path = filepath.Join(filepath.Dir(CAgent), "perfevent.conf")
	data, err := os.ReadFile(path)
	if err != nil {
		unmet(t, "needs the C agent's perfevent.conf (%v): Debian's pcp installs it", err)
	}
	return path, string(data)
}

// Our default install serves every name the C agent's default install
// serves here with the C agent's PMID, and numbers what it adds where the
// C agent never does.
func TestDefaultsServeTheCAgentsPMIDs(t *testing.T) {
	cPath, cText := cStockConfig(t)
	ours, err := os.ReadFile(filepath.Join(repoRoot(), "perfevent.conf"))
	if err != nil {
		t.Fatal(err)
	}
	cLab := StartLab(t, Agent{Go: false, Config: cText})
	goLab := StartLab(t, Agent{Go: true, Config: string(ours), Args: []string{"-c-layout", cPath}})
	c := pmidsOf(t, cLab.Run(t, "pminfo", "-m", "perfevent"))
	g := pmidsOf(t, goLab.Run(t, "pminfo", "-m", "perfevent"))
	var missing []string
	for name, pmid := range c {
		if g[name] != pmid {
			missing = append(missing, name+" "+pmid+" (ours "+g[name]+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d of the C agent's %d names are not served with its PMID by ours:\n\t%s", len(missing), len(c), strings.Join(missing, "\n\t"))
	}
	// The C agent's names with values there have values here too.
	cVals := cLab.Run(t, "pminfo", "-f", "perfevent.hwcounters")
	gVals := goLab.Run(t, "pminfo", "-f", "perfevent.hwcounters")
	for _, name := range []string{"perfevent.hwcounters.software.page_faults.value", "perfevent.hwcounters.software.context_switches.value"} {
		if !strings.Contains(cVals, name+"\n    inst [0") {
			continue // the C agent has none either
		}
		if !strings.Contains(gVals, name+"\n    inst [0") {
			t.Errorf("%s has values under the C agent, none under ours:\n%s", name, gVals)
		}
	}
	used := map[string]string{}
	for name, pmid := range c {
		used[clusterOf(pmid)] = name
	}
	for name, pmid := range g {
		if _, ok := c[name]; ok {
			continue
		}
		cl := clusterOf(pmid)
		if n, _ := strconv.Atoi(cl); n >= 2 && n < 2048 {
			t.Errorf("ours adds %s as %s: cluster %s is below 2048, where the C agent numbers its own", name, pmid, cl)
		}
		if other, ok := used[cl]; ok {
			t.Errorf("ours adds %s as %s, a cluster the C agent gives %s", name, pmid, other)
		}
	}
	t.Logf("the C agent serves %d names, ours %d", len(c), len(g))
}

func clusterOf(pmid string) string {
	f := strings.Split(pmid, ".")
	if len(f) != 3 {
		return ""
	}
	if f[1] == "0" || f[1] == "1" {
		return "static"
	}
	return f[1]
}
