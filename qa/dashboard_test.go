package qa

import (
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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

// optionalMetric names the metrics a panel may find absent: ratios are
// not served yet, and their panel stays empty until they are.
var optionalMetric = regexp.MustCompile(`^perfevent\.ratio\.`)

// testDashboard runs every query of the dashboard against the fleet: a
// PCP Redis one through pmproxy's /series/query, with $host set to the
// hosts' hostname label; a PCP Vector one (a metric name) through pminfo
// against a lab agent. Each must find something, but a ratio.
func testDashboard(t *testing.T, f *Fleet) {
	d := loadDashboard(t)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			expr := strings.ReplaceAll(q.Expr, "$host", host)
			metric := regexp.MustCompile(`^[\w.*]+`).FindString(expr)
			switch p.Datasource.Type {
			case redisDS:
				var sids []string
				f.getJSON(t, "/series/query", url.Values{"expr": {expr}}, &sids)
				if len(sids) == 0 && !optionalMetric.MatchString(metric) {
					t.Errorf("panel %q: /series/query?expr=%s finds no series", p.Title, expr)
				}
				if optionalMetric.MatchString(metric) {
					t.Logf("panel %q: %d series for %s (optional)", p.Title, len(sids), expr)
				}
			case vectorDS:
				if r := f.Hosts[0].RunErr(t, "pminfo", expr); r.Err != nil || strings.TrimSpace(r.Stdout) != expr {
					t.Errorf("panel %q: the agent does not serve %q:\n%s", p.Title, expr, r)
				}
			}
		}
	}
}

// make install ships the dashboard into the agent's own directory, and
// writes nothing outside it but the pmrep views, which pmrep reads only
// from its own directory (under a name no PCP package uses).
func TestMakeInstallShipsDashboard(t *testing.T) {
	for _, tool := range []string{"make", "install"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	repo, stage := repoRoot(), t.TempDir()
	cmd := exec.Command("make", "-s", "-C", repo, "install", "DESTDIR="+stage, "PCP_PMDAS_DIR=/pmdas", "PCP_SYSCONF_DIR=/sysconf", "GO="+testexec.Go())
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
	filepath.Walk(stage, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && p != views && !strings.HasPrefix(p, filepath.Join(stage, "pmdas", "perfevent-go")+"/") {
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
