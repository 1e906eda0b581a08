package qa

import (
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"perfevent/internal/catalog"
	"perfevent/internal/ratio"
	"perfevent/internal/testexec"
)

// The dashboard grafana-pcp users import: install/grafana/perfevent.json.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		ID         int    `json:"id"`
		Title      string `json:"title"`
		Datasource struct {
			Type string `json:"type"`
		} `json:"datasource"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

const (
	redisDS  = "performancecopilot-redis-datasource"
	vectorDS = "performancecopilot-vector-datasource"
)

// loadDashboard reads the dashboard and checks its shape: valid JSON,
// grafana-pcp's two data sources only, unique panel ids, every target
// with a refId and a query.
func loadDashboard(t testing.TB) dashboard {
	t.Helper()
	path := filepath.Join(repoRoot(), "install", "grafana", "perfevent.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: no title, uid or panels", path)
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("%s: panel id %d twice", path, p.ID)
		}
		ids[p.ID] = true
		if p.Datasource.Type != redisDS && p.Datasource.Type != vectorDS {
			t.Errorf("%s: panel %q: data source %q, want grafana-pcp's", path, p.Title, p.Datasource.Type)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", path, p.Title)
		}
		for _, q := range p.Targets {
			if q.RefID == "" || q.Expr == "" {
				t.Errorf("%s: panel %q: a target without refId or expr", path, p.Title)
			}
		}
	}
	return d
}

// The dashboard is well formed without any PCP around.
func TestDashboardJSON(t *testing.T) { loadDashboard(t) }

// servedNow lists the perfevent metrics the host serves with values now
// (pmprobe: a positive count), whose panels must show data.
func servedNow(t *testing.T, l *Lab) []string {
	t.Helper()
	var names []string
	for _, line := range strings.Split(l.Run(t, "pmprobe", "perfevent"), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[1] != "0" && !strings.HasPrefix(f[1], "-") {
			names = append(names, f[0])
		}
	}
	return names
}

// served reports whether a query's metric (a name or a glob) matches a
// metric the host serves with values.
func served(metric string, names []string) bool {
	for _, n := range names {
		if ok, _ := path.Match(metric, n); ok || metric == n {
			return true
		}
		// pmseries' * also spans dots: perfevent.cgroup.*.value.
		if re, err := regexp.Compile("^" + strings.ReplaceAll(regexp.QuoteMeta(metric), `\*`, ".*") + "$"); err == nil && re.MatchString(n) {
			return true
		}
	}
	return false
}

// testDashboard runs every query of the dashboard against the fleet: a
// PCP Redis one through pmproxy's /series/query, with $host set to the
// hosts' hostname label; a PCP Vector one (a metric name) through pminfo
// against a lab agent. A query whose metric the host serves must return
// samples, and newer ones a few sampling intervals later: the panel keeps
// showing data. One the host does not serve (memory bandwidth or TopDown
// on a VM) may stay empty, and says so.
func testDashboard(t *testing.T, f *Fleet) {
	d := loadDashboard(t)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	names := servedNow(t, f.Hosts[0])
	newest := map[string]int64{}
	var live []string // the Redis queries that must keep returning data
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			expr := strings.ReplaceAll(q.Expr, "$host", host)
			metric := regexp.MustCompile(`^[\w.*]+`).FindString(expr)
			must := served(metric, names)
			switch p.Datasource.Type {
			case redisDS:
				latest := int64(0)
				for _, s := range f.samples(t, expr+"[count:2]") {
					latest = max(latest, s.ms)
				}
				switch {
				case latest == 0 && must:
					t.Errorf("panel %q: /series/query?expr=%s[count:2] finds no samples, though the host serves %s\n%s", p.Title, expr, metric, f.Logs())
				case latest == 0:
					t.Logf("panel %q: no data for %s: this host does not serve it", p.Title, expr)
				default:
					newest[expr] = latest
					live = append(live, expr)
				}
			case vectorDS:
				if r := f.Hosts[0].RunErr(t, "pminfo", "-f", expr); r.Err != nil || !strings.Contains(r.Stdout, "value ") {
					t.Errorf("panel %q: the agent serves no value of %q:\n%s", p.Title, expr, r)
				}
			}
		}
	}
	// The ratio panels show ratios, per CPU or for the whole machine, and
	// not the others nor the operands, which pmseries' * would match too.
	ratioRE := map[string]*regexp.Regexp{
		"Ratios, per CPU":       regexp.MustCompile(`^perfevent\.ratio\.[a-z0-9_]+$`),
		"Ratios, whole machine": regexp.MustCompile(`^perfevent\.ratio\.all\.[a-z0-9_]+$`),
	}
	all := f.metricNames(t, f.sids(t, "perfevent.ratio.*"))
	for _, p := range d.Panels {
		re, ok := ratioRE[p.Title]
		if !ok {
			continue
		}
		delete(ratioRE, p.Title)
		expr := strings.ReplaceAll(p.Targets[0].Expr, "$host", host)
		got := f.metricNames(t, f.sids(t, expr))
		if len(got) == 0 || slices.ContainsFunc(got, func(n string) bool {
			return !re.MatchString(n) || strings.Contains(n, ".numerator.") || strings.Contains(n, ".denominator.") || n == "perfevent.ratio.all"
		}) {
			t.Errorf("panel %q: %s finds %v; want those of %v that match %s", p.Title, expr, got, all, re)
		}
		t.Logf("panel %q: %v, of %v", p.Title, got, all)
	}
	for title := range ratioRE {
		t.Errorf("no panel %q", title)
	}
	// A few intervals on, every query that had data has newer data.
	for _, expr := range live {
		waitFor(t, 10*f.Interval+10*time.Second, "newer samples of "+expr, func() bool {
			for _, s := range f.samples(t, expr+"[count:2]") {
				if s.ms > newest[expr] {
					return true
				}
			}
			return false
		})
	}
}

// The per-CPU ratio panel leaves the whole machine's ratios out, and every
// panel that mixes quantities of different sizes gives each its own axis
// and unit.
func TestDashboardAxes(t *testing.T) {
	path := filepath.Join(repoRoot(), "install", "grafana", "perfevent.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title       string `json:"title"`
			FieldConfig struct {
				Overrides []struct {
					Matcher struct {
						Options string `json:"options"`
					} `json:"matcher"`
					Properties []struct {
						ID    string `json:"id"`
						Value any    `json:"value"`
					} `json:"properties"`
				} `json:"overrides"`
			} `json:"fieldConfig"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	// Each panel's series that need an axis of their own, by a metric name
	// that must match the override and the unit it must get there.
	apart := map[string]struct{ metric, unit string }{
		"Counter rates, per CPU":               {"perfevent.hwcounters.cpu_clock.value", "ns"},
		"Ratios, per CPU":                      {"perfevent.ratio.context_switches_per_cpu_second", "suffix:/s"},
		"Ratios, whole machine":                {"perfevent.ratio.all.context_switches_per_cpu_second", "suffix:/s"},
		"Live: active counters and duty cycle": {"perfevent.hwcounters.cpu_clock.dutycycle", "percentunit"},
		"Per cgroup":                           {"perfevent.cgroup.cpu_clock.value", "ns"},
	}
	seen := map[string]bool{}
	for _, p := range d.Panels {
		want, ok := apart[p.Title]
		if !ok {
			continue
		}
		seen[p.Title] = true
		found := false
		for _, o := range p.FieldConfig.Overrides {
			if re, err := regexp.Compile(o.Matcher.Options); err != nil || !re.MatchString(want.metric) {
				continue
			}
			props := map[string]any{}
			for _, pr := range o.Properties {
				props[pr.ID] = pr.Value
			}
			found = props["unit"] == want.unit && props["custom.axisPlacement"] == "right"
		}
		if !found {
			t.Errorf("panel %q: %s has no axis of its own with unit %s", p.Title, want.metric, want.unit)
		}
		if p.Title == "Ratios, per CPU" && (len(p.Targets) != 1 || !strings.Contains(p.Targets[0].Expr, `metric.name !~ "ratio[.](all|numerator|denominator)[.]"`)) {
			t.Errorf("panel %q: %v does not keep perfevent.ratio.all.* and the operands out", p.Title, p.Targets)
		}
	}
	for title := range apart {
		if !seen[title] {
			t.Errorf("no panel %q", title)
		}
	}
}

// make install ships the dashboard into the agent's own directory, and
// writes nothing outside it but the pmrep views and the pmieconf rule,
// which pmrep and pmieconf read only from their own directories (under
// names no PCP package uses), and the two commands' links in BINDIR.
func TestMakeInstallShipsDashboard(t *testing.T) {
	for _, tool := range []string{"make", "install"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	repo, stage := repoRoot(), t.TempDir()
	cmd := exec.Command("make", "-s", "-C", repo, "install", "DESTDIR="+stage, "PCP_PMDAS_DIR=/pmdas", "PCP_SYSCONF_DIR=/sysconf", "PCP_VAR_DIR=/var", "GO="+testexec.Go())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	want, err := os.ReadFile(filepath.Join(repo, "install", "grafana", "perfevent.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(stage, "pmdas", "perfevent-go", "grafana", "perfevent.json"))
	if err != nil || string(got) != string(want) {
		t.Fatalf("make install: the dashboard in the stage differs or is missing (%v)", err)
	}
	views := filepath.Join(stage, "sysconf", "pmrep", "perfevent-go.conf")
	if _, err := os.Stat(views); err != nil {
		t.Errorf("make install: no pmrep views: %v", err)
	}
	rule := filepath.Join(stage, "var", "config", "pmieconf", "perfevent", "reservation_held")
	if _, err := os.Stat(rule); err != nil {
		t.Errorf("make install: no pmieconf rule: %v", err)
	}
	links := map[string]bool{}
	for _, c := range []string{"perfalloc", "pmdaperfevent"} {
		l := filepath.Join(stage, "usr", "local", "bin", c)
		links[l] = true
		if target, err := os.Readlink(l); err != nil || target != "/pmdas/perfevent-go/"+c {
			t.Errorf("make install: %s links to %q (%v); want /pmdas/perfevent-go/%s", l, target, err, c)
		}
	}
	filepath.Walk(stage, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && p != views && p != rule && !links[p] && !strings.HasPrefix(p, filepath.Join(stage, "pmdas", "perfevent-go")+"/") {
			t.Errorf("make install wrote %s, outside the agent's directory", strings.TrimPrefix(p, stage))
		}
		return nil
	})
}

// TestViewsAnswerTheCatalogsQuestions: the dashboard has one panel per
// question the metric catalog answers (TopDown, bandwidth, energy,
// frequency), in that question's unit, and every ratio the pmrep views
// and those panels name is one the agent defines somewhere.
func TestViewsAnswerTheCatalogsQuestions(t *testing.T) {
	known := map[string]bool{}
	for _, d := range ratio.Builtin {
		known[d.Name] = true
	}
	for _, f := range catalog.Families() {
		for _, d := range f.Metrics {
			known[d.Name] = true
		}
	}
	data, err := os.ReadFile(filepath.Join(repoRoot(), "install", "grafana", "perfevent.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title       string
			FieldConfig struct {
				Defaults  struct{ Unit string }
				Overrides []struct {
					Properties []struct {
						ID    string
						Value any
					}
				}
			}
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	ratioRE := regexp.MustCompile(`^perfevent\.ratio\.(all\.)?([\w*]+)`)
	for _, q := range []struct{ question, metric, unit string }{
		{"TopDown", "topdown_retiring", "percentunit"},
		{"Memory bandwidth", "mem_read_bandwidth", "Bps"},
		{"Energy", "energy_package_watts", "watt"},
		{"Frequency", "frequency_average_hz", "hertz"},
	} {
		var found int
		for _, p := range d.Panels {
			if !strings.HasPrefix(p.Title, q.question) {
				continue
			}
			found++
			if p.FieldConfig.Defaults.Unit != q.unit {
				t.Errorf("panel %q: unit %q, want %q", p.Title, p.FieldConfig.Defaults.Unit, q.unit)
			}
			var matched bool
			for _, tg := range p.Targets {
				m := ratioRE.FindStringSubmatch(tg.Expr)
				if m == nil {
					t.Errorf("panel %q: %q is no ratio", p.Title, tg.Expr)
					continue
				}
				if ok, _ := path.Match(m[2], q.metric); ok {
					matched = true
				}
			}
			if !matched {
				t.Errorf("panel %q does not show %s", p.Title, q.metric)
			}
		}
		if found != 1 {
			t.Errorf("%d panels answer %s, want 1", found, q.question)
		}
	}
	// The frequency panel puts its shares on an axis of their own.
	for _, p := range d.Panels {
		if strings.HasPrefix(p.Title, "Frequency") {
			var right bool
			for _, o := range p.FieldConfig.Overrides {
				for _, pr := range o.Properties {
					right = right || (pr.ID == "custom.axisPlacement" && pr.Value == "right")
				}
			}
			if !right {
				t.Errorf("panel %q: busy_share and frequency_relative share the Hz axis", p.Title)
			}
		}
	}
	views, err := os.ReadFile(filepath.Join(repoRoot(), "install", "pcp", "pmrep-perfevent-go.conf"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(views), "\n") {
		m := ratioRE.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		if !known[m[2]] {
			t.Errorf("pmrep views name perfevent.ratio.%s, which the agent never serves", m[2])
		}
		seen[m[2]] = true
	}
	for _, want := range []string{"topdown_frontend_bound", "mem_read_bandwidth", "energy_package_watts", "frequency_average_hz", "busy_share"} {
		if !seen[want] {
			t.Errorf("no pmrep view shows perfevent.ratio.%s", want)
		}
	}
}
