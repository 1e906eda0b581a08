package qa

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"perfevent/internal/testwait"
)

// TestLabClients runs the PCP clients that people point at perfevent
// (pmval, pmrep, pmlogger with pmdumplog and pmrep -a, pmie, pmproxy's
// REST API) against our agent under a lab pmcd with VMConfig, and checks
// the names, numbers and rates they report. All of them come with
// Debian's pcp package (pmrep through its python3-pcp dependency).
func TestLabClients(t *testing.T) {
	l := StartLab(t, Agent{Go: true, Config: VMConfig})
	cpus := onlineCPUs(t)
	active := strconv.Itoa(12 * len(cpus)) // VMConfig: 12 counters per CPU

	t.Run("pmval", func(t *testing.T) {
		needClient(t, l, "pmval")
		out := l.Run(t, "pmval", "-h", l.HostSpec(), "-s", "3", "-t", "0.2", "perfevent.hwcounters.cpu_clock.value")
		requireLines(t, "pmval", out,
			`metric: +perfevent\.hwcounters\.cpu_clock\.value`,
			`semantics: cumulative counter \(converting to rate\)`,
			`units: +count \(converting to count / sec\)`,
			`samples: +3`,
		)
		header := regexp.MustCompile(`(?m)^ +cpu0 .*$`).FindString(out)
		if got := strings.Fields(header); len(got) != len(cpus) {
			t.Errorf("pmval: instance header %q, want %d CPUs:\n%s", header, len(cpus), out)
		}
		rows := regexp.MustCompile(`(?m)^( +[0-9.]+E[+-][0-9]+)+ *$`).FindAllString(out, -1)
		if len(rows) != 3 {
			t.Fatalf("pmval -s 3: %d sample rows, want 3:\n%s", len(rows), out)
		}
		for _, row := range rows {
			checkClockRates(t, "pmval", strings.Fields(row))
		}
		out = l.Run(t, "pmval", "-h", l.HostSpec(), "-s", "3", "-t", "0.2", "perfevent.active")
		if got := regexp.MustCompile(`(?m)^ +`+active+`$`).FindAllString(out, -1); len(got) != 3 {
			t.Errorf("pmval perfevent.active: want 3 samples of %s:\n%s", active, out)
		}
	})

	t.Run("pmrep", func(t *testing.T) {
		needClient(t, l, "pmrep")
		out := l.Run(t, "pmrep", "-h", l.HostSpec(), "-t", "0.5", "-s", "3", "-o", "csv",
			"perfevent.active", "perfevent.hwcounters.cpu_clock.value", "perfevent.hwcounters.cpu_clock.dutycycle")
		rows := readCSV(t, "pmrep -o csv", out)
		want := []string{"Time", `perfevent.active`}
		for _, m := range []string{"value", "dutycycle"} {
			for _, c := range cpus {
				want = append(want, fmt.Sprintf("perfevent.hwcounters.cpu_clock.%s-cpu%d", m, c))
			}
		}
		if got := strings.Join(rows[0], ","); got != strings.Join(want, ",") {
			t.Fatalf("pmrep -o csv header:\n got %s\nwant %s", got, strings.Join(want, ","))
		}
		if len(rows) != 4 {
			t.Fatalf("pmrep -s 3: %d rows, want a header and 3:\n%s", len(rows), out)
		}
		for _, row := range rows[2:] { // the first row has no rates yet
			checkRange(t, "pmrep perfevent.active", row[1], float64(12*len(cpus)), float64(12*len(cpus)))
			checkClockRates(t, "pmrep", row[2:2+len(cpus)])
			for i := range cpus {
				checkRange(t, "pmrep cpu_clock dutycycle", row[2+len(cpus)+i], 0.99, 1)
			}
		}
	})

	t.Run("pmlogger", func(t *testing.T) {
		// Three seconds of samples, however long a loaded machine takes
		// to give pmlogger them: pmrep -a below interpolates at the
		// logging interval, and has no rate for the first second.
		logger := l.StartLogger(t, "log mandatory on 500 msec {\n    perfevent\n}\n")
		for _, metric := range []string{"perfevent.active", "perfevent.hwcounters.cpu_clock.value", "perfevent.ratio.all.context_switches_per_cpu_second"} {
			logger.WaitRecords(t, metric, "six records", func(recs []Record) bool { return len(recs) >= 6 })
		}
		logger.Stop(t)
		archive := logger.Archive

		out := l.Run(t, "pmdumplog", "-z", archive, "perfevent.active", "perfevent.hwcounters.cpu_clock.value")
		if n := len(regexp.MustCompile(`(?m)^    127\.0\.1 \(perfevent\.active\): value `+active+`$`).FindAllString(out, -1)); n < 3 {
			t.Errorf("pmdumplog: %d records of perfevent.active = %s, want at least 3:\n%s", n, active, out)
		}
		for _, c := range cpus {
			// pmdumplog puts a lone instance on the metric's line.
			re := fmt.Sprintf(`(?m)(?:^        |\): )inst \[%d or "cpu%d"\] value [0-9]+$`, c, c)
			if n := len(regexp.MustCompile(re).FindAllString(out, -1)); n < 3 {
				t.Errorf("pmdumplog: %d values of cpu_clock for cpu%d, want at least 3:\n%s", n, c, out)
			}
		}
		// A ratio's interval is pmlogger's from its second sample on;
		// the first has the agent's (perfevent.conf(5), RATIOS): a
		// value in every record.
		out = l.Run(t, "pmdumplog", "-z", archive, "perfevent.ratio.all.context_switches_per_cpu_second")
		if n := len(regexp.MustCompile(`(?m)\(perfevent\.ratio\.all\.context_switches_per_cpu_second\): value [0-9.e+]+$`).FindAllString(out, -1)); n < 3 {
			t.Errorf("pmdumplog: %d values of the whole machine's context switches per CPU second, want at least 3:\n%s", n, out)
		}
		out = l.Run(t, "pmdumplog", "-d", archive)
		requireLines(t, "pmdumplog -d", out,
			`PMID: 127\.0\.1 \(perfevent\.active\)`,
			`    Data Type: 32-bit int  InDom: PM_INDOM_NULL 0xffffffff`,
			`PMID: 127\.[0-9]+\.0 \(perfevent\.derived\.sw_faults_cs\.value\)`,
			`PMID: 127\.[0-9]+\.1 \(perfevent\.hwcounters\.msr\.tsc\.dutycycle\)`,
		)

		needClient(t, l, "pmrep")
		out = l.Run(t, "pmrep", "-z", "-a", archive, "-t", "0.5", "-o", "csv", "perfevent.hwcounters.cpu_clock.value")
		rows := readCSV(t, "pmrep -a", out)
		rates := 0
		for _, row := range rows[1:] {
			if strings.Join(row[1:], "") != "" {
				checkClockRates(t, "pmrep -a", row[1:])
				rates += len(row) - 1
			}
		}
		if rates < 2*len(cpus) {
			t.Errorf("pmrep -a: %d rates of cpu_clock, want at least %d:\n%s", rates, 2*len(cpus), out)
		}
	})

	t.Run("pmproxy", func(t *testing.T) {
		testPMProxy(t, l, cpus)
	})

	// Last: it takes the counters away for a moment.
	t.Run("pmie", func(t *testing.T) {
		needClient(t, l, "pmie")
		dir := t.TempDir()
		counting, released := filepath.Join(dir, "counting"), filepath.Join(dir, "released")
		rules := filepath.Join(dir, "rules")
		writeFile(t, rules, fmt.Sprintf(`delta = 200 msec;
counting = perfevent.active > 0 -> shell "touch %s";
released = perfevent.active == 0 -> shell "touch %s";
`, counting, released))
		out := filepath.Join(dir, "pmie.out")
		// -f and -U root: no daemon, and no switch to user pcp (which
		// could not write here).
		l.Background(t, Cmd{Args: []string{"pmie", "-f", "-U", "root", "-h", l.HostSpec(), "-c", rules, "-v", "-e"}}, out)

		waitFile(t, counting, 15*time.Second, out)
		if _, err := os.Stat(released); err == nil {
			t.Fatalf("pmie saw perfevent.active == 0 before anyone reserved the counters:\n%s", tail(out, 20))
		}
		unlock := l.ReadLock(t)
		os.Remove(counting)
		waitFile(t, released, Settle, out)
		unlock()
		os.Remove(released)
		os.Remove(counting)
		waitFile(t, counting, Settle, out)
	})
}

func readCSV(t *testing.T, what, out string) [][]string {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) < 2 {
		t.Fatalf("%s: want CSV with a header and rows (%v):\n%s", what, err, out)
	}
	return rows
}

// checkClockRates checks one sample of cpu_clock's rate, one value per
// CPU. Each is about 1e9 ns/s, but the window is wide: a client divides
// by the interval between pmcd's timestamps, and on a loaded machine
// that is hundreds of milliseconds away from the interval between the
// agent's reads (1.73e9 seen over 0.5 s at a load of 12 on 2 CPUs, with
// either agent); TestCompareWithCAgent/rates checks the clock against the
// test's own. The window still catches a wrong scale or a raw count, and
// all CPUs share the interval, so they must agree closely.
func checkClockRates(t *testing.T, what string, row []string) {
	t.Helper()
	var first float64
	for i, s := range row {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0.3e9 || v > 3e9 {
			t.Errorf("%s: cpu_clock rates %q: want about 1e9 ns/s each", what, row)
			return
		}
		if i == 0 {
			first = v
		} else if math.Abs(v/first-1) > 0.01 {
			t.Errorf("%s: cpu_clock rates %q: want the same on every CPU", what, row)
		}
	}
}

func checkRange(t *testing.T, what, s string, lo, hi float64) {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < lo || v > hi {
		t.Errorf("%s: %q, want a number in [%g, %g]", what, s, lo, hi)
	}
}

// waitFile waits for a file that a client's action creates; on timeout
// it shows the client's output.
func waitFile(t *testing.T, path string, timeout time.Duration, log string) {
	t.Helper()
	if !testwait.Until(timeout, func() bool { _, err := os.Stat(path); return err == nil }) {
		t.Fatalf("no %s after %v; the client said:\n%s", path, timeout, tail(log, 30))
	}
}

// pmproxy's answers, as far as the test reads them.
type pmapiContext struct {
	Context  int64  `json:"context"`
	Hostspec string `json:"hostspec"`
}

type pmapiMetrics struct {
	Metrics []struct {
		Name    string         `json:"name"`
		PMID    string         `json:"pmid"`
		InDom   string         `json:"indom"`
		Type    string         `json:"type"`
		Sem     string         `json:"sem"`
		Units   string         `json:"units"`
		Labels  map[string]any `json:"labels"`
		OneLine string         `json:"text-oneline"`
		Help    string         `json:"text-help"`
	} `json:"metrics"`
}

type pmapiFetch struct {
	Timestamp float64 `json:"timestamp"`
	Values    []struct {
		PMID      string `json:"pmid"`
		Name      string `json:"name"`
		Instances []struct {
			Instance *int    `json:"instance"`
			Value    float64 `json:"value"`
		} `json:"instances"`
	} `json:"values"`
}

// testPMProxy starts pmproxy (startLabPMProxy) and reads our metrics
// through its REST API.
func testPMProxy(t *testing.T, l *Lab, cpus []int) {
	port, dir := startLabPMProxy(t, l)
	base := fmt.Sprintf("http://127.0.0.1:%d/pmapi/", port)
	get := func(path string, q url.Values, v any) {
		t.Helper()
		u := base + path + "?" + q.Encode()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v\n%s", u, err, tail(filepath.Join(dir, "pmproxy.log"), 20))
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", u, resp.Status, body)
		}
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v in\n%s", u, err, body)
		}
	}
	// Until pmproxy listens.
	var ctx pmapiContext
	waitFor(t, 15*time.Second, "pmproxy to listen on port "+strconv.Itoa(port), func() bool {
		resp, err := http.Get(base + "context?" + url.Values{"hostspec": {l.HostSpec()}}.Encode())
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&ctx) == nil && ctx.Context != 0
	})
	context := url.Values{"context": {strconv.FormatInt(ctx.Context, 10)}}

	names := "perfevent.active,perfevent.hwcounters.cpu_clock.value"
	var m pmapiMetrics
	get("metric", url.Values{"context": context["context"], "names": {names}}, &m)
	if len(m.Metrics) != 2 {
		t.Fatalf("/pmapi/metric: %d metrics, want 2: %+v", len(m.Metrics), m)
	}
	a, c := m.Metrics[0], m.Metrics[1]
	if a.Name != "perfevent.active" || a.PMID != "127.0.1" || a.Type != "32" || a.Sem != "discrete" || a.Units != "none" ||
		a.OneLine != "The number of active counters." || a.Labels["agent"] != "perfevent" {
		t.Errorf("/pmapi/metric perfevent.active: %+v", a)
	}
	if c.Name != "perfevent.hwcounters.cpu_clock.value" || !strings.HasPrefix(c.InDom, "127.") || c.Type != "64" ||
		c.Sem != "counter" || c.Units != "count" || c.OneLine != "The values of the counter" ||
		c.Labels["device_type"] != "cpu" || c.Labels["indom_name"] != "per cpu" || c.Help == "" {
		t.Errorf("/pmapi/metric cpu_clock.value: %+v", c)
	}

	// Through pmproxy, the timestamp of a fetch and the moment the agent
	// read its counters can be far apart on a loaded machine (seen with
	// both agents: 0.67 then 2.0 ns per ns), so the counts are checked
	// against the test's own clock around the requests.
	fetch := func() (active float64, clock map[int]float64, before, after time.Time) {
		t.Helper()
		var f pmapiFetch
		before = time.Now()
		get("fetch", url.Values{"context": context["context"], "names": {names}}, &f)
		after = time.Now()
		if len(f.Values) != 2 || f.Values[0].Name != "perfevent.active" || f.Values[1].Name != "perfevent.hwcounters.cpu_clock.value" {
			t.Fatalf("/pmapi/fetch: want perfevent.active and cpu_clock.value: %+v", f)
		}
		if in := f.Values[0].Instances; len(in) != 1 || in[0].Instance != nil {
			t.Fatalf("/pmapi/fetch perfevent.active: want one value without an instance: %+v", in)
		}
		clock = map[int]float64{}
		for _, in := range f.Values[1].Instances {
			if in.Instance == nil {
				t.Fatalf("/pmapi/fetch cpu_clock.value: a value without an instance: %+v", f.Values[1])
			}
			clock[*in.Instance] = in.Value
		}
		return f.Values[0].Instances[0].Value, clock, before, after
	}
	a0, c0, s0, e0 := fetch()
	time.Sleep(500 * time.Millisecond)
	a1, c1, s1, e1 := fetch()
	for _, v := range []float64{a0, a1} {
		if v != float64(12*len(cpus)) {
			t.Errorf("/pmapi/fetch perfevent.active = %v, want %d", v, 12*len(cpus))
		}
	}
	if len(c0) != len(cpus) || len(c1) != len(cpus) {
		t.Fatalf("/pmapi/fetch cpu_clock.value: instances %v then %v, want CPUs %v", c0, c1, cpus)
	}
	// cpu_clock counts nanoseconds; between the two reads passed at
	// least s1-e0 and at most e1-s0.
	lo, hi := 0.95*float64(s1.Sub(e0)), 1.05*float64(e1.Sub(s0))
	for _, cpu := range cpus {
		if d := c1[cpu] - c0[cpu]; d < lo || d > hi {
			t.Errorf("/pmapi/fetch cpu_clock.value cpu%d: %v then %v: +%v ns, want within [%v, %v] by the test's clock", cpu, c0[cpu], c1[cpu], d, lo, hi)
		}
	}

	// A ratio through pmproxy: the interval is that of the REST context,
	// so its second fetch has a value per CPU.
	ratio := url.Values{"context": context["context"], "names": {"perfevent.ratio.context_switches_per_cpu_second"}}
	var r0, r1 pmapiFetch
	get("fetch", ratio, &r0)
	time.Sleep(300 * time.Millisecond)
	get("fetch", ratio, &r1)
	if len(r1.Values) != 1 || len(r1.Values[0].Instances) != len(cpus) {
		t.Errorf("/pmapi/fetch of a ratio, second time: %+v, want a value per CPU", r1)
	} else {
		for _, in := range r1.Values[0].Instances {
			if !(in.Value > 0) {
				t.Errorf("/pmapi/fetch of context switches per CPU second: %+v", r1.Values[0])
			}
		}
	}

	// The one-shot form, a hostspec instead of a context.
	var f pmapiFetch
	get("fetch", url.Values{"hostspec": {l.HostSpec()}, "names": {"perfevent.derived.active"}}, &f)
	if len(f.Values) != 1 || len(f.Values[0].Instances) != 1 || f.Values[0].Instances[0].Value != 1 {
		t.Errorf("/pmapi/fetch?hostspec=...&names=perfevent.derived.active: %+v, want 1", f)
	}
}

// startLabPMProxy starts pmproxy on loopback with a configuration of its
// own (no Redis, no time series: the /pmapi REST endpoints and /metrics
// need neither), for clients of l; it returns its port and directory,
// which holds its log. It may not listen yet when this returns.
func startLabPMProxy(t *testing.T, l *Lab) (port int, dir string) {
	t.Helper()
	needClient(t, l, "pmproxy")
	dir = t.TempDir()
	config := filepath.Join(dir, "pmproxy.conf")
	writeFile(t, config, `[pmproxy]
pcp.enabled = true
http.enabled = true
redis.enabled = false
secure.enabled = false
[redis]
enabled = false
[discover]
enabled = false
[pmseries]
enabled = false
[pmsearch]
enabled = false
`)
	port = freePort(t)
	l.Background(t, Cmd{
		Args: []string{"pmproxy", "-f", "-A", "-U", "root", "-c", config, "-i", "127.0.0.1", "-p", strconv.Itoa(port),
			"-s", filepath.Join(dir, "pmproxy.socket"), "-l", filepath.Join(dir, "pmproxy.log")},
		// Its pid file goes here, not over the system pmproxy's.
		Env: []string{"PCP_RUN_DIR=" + dir},
	}, filepath.Join(dir, "pmproxy.out"))
	return port, dir
}
