package qa

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFleet runs three labs as three hosts of a fleet, logged by
// pmlogger into one archive directory that pmproxy ingests into a
// private redis-server, and checks what pmseries, pmproxy's REST API and
// its OpenMetrics endpoint say about perfevent on each host.
func TestFleet(t *testing.T) {
	const interval = time.Second
	f := StartFleet(t, 3, VMConfig, interval)
	cpus := onlineCPUs(t)
	active := float64(12 * len(cpus)) // VMConfig: 12 counters per CPU
	// The hwcounters value metrics each agent serves with values.
	values := servedValues(t, f.Hosts[0])

	// Until every host has a few samples in redis.
	waitFor(t, 60*time.Second, "pmproxy to ingest five samples of every host", func() bool {
		for _, n := range f.Names {
			if s := f.samples(t, fmt.Sprintf(`perfevent.active{fleet_host:%q}[count:5]`, n)); len(s) < 5 {
				return false
			}
		}
		return true
	})

	t.Run("series", func(t *testing.T) {
		all := f.sids(t, "perfevent.active")
		if len(all) != len(f.Names) {
			t.Fatalf("pmseries perfevent.active: %d series, want one per host (%d): %v\n%s", len(all), len(f.Names), all, f.Logs())
		}
		for _, n := range f.Names {
			sids := f.sids(t, fmt.Sprintf(`perfevent.hwcounters.*.value{fleet_host:%q}`, n))
			names := f.metricNames(t, sids)
			if strings.Join(names, " ") != strings.Join(values, " ") {
				t.Errorf("%s: pmseries finds\n %v\nthe agent serves\n %v", n, names, values)
			}
		}
		r := f.PMSeries(t, "-v", "fleet_host")
		got := strings.Split(strings.TrimPrefix(strings.TrimSpace(r.Stdout), "fleet_host: "), ", ")
		sort.Strings(got)
		if strings.Join(got, " ") != `"node1" "node2" "node3"` {
			t.Errorf("pmseries -v fleet_host: %q", r.Stdout)
		}
	})

	t.Run("by-label", func(t *testing.T) {
		all := f.sids(t, "perfevent.active")
		seen := map[string]string{}
		for _, n := range f.Names {
			sids := f.sids(t, fmt.Sprintf(`perfevent.active{fleet_host:%q}`, n))
			if len(sids) != 1 || !contains(all, sids[0]) {
				t.Fatalf("perfevent.active{fleet_host:%q}: %v, want one of %v", n, sids, all)
			}
			if other, dup := seen[sids[0]]; dup {
				t.Errorf("%s and %s share the series %s", other, n, sids[0])
			}
			seen[sids[0]] = n
			if l := f.labels(t, sids[0]); l["fleet_host"] != n || l["agent"] != "perfevent" {
				t.Errorf("%s: /series/labels of perfevent.active: %v", n, l)
			}
		}
	})

	t.Run("values", func(t *testing.T) {
		for i, n := range f.Names {
			for _, s := range f.samples(t, fmt.Sprintf(`perfevent.active{fleet_host:%q}[count:3]`, n)) {
				if s.value != active {
					t.Errorf("%s: perfevent.active = %v at %v, want %v", n, s.value, s.ms, active)
				}
			}
			// A string round-trips exactly.
			want := strings.TrimSpace(f.Hosts[i].Run(t, "pmprobe", "-v", "perfevent.version"))
			ver := f.samples(t, fmt.Sprintf(`perfevent.version{fleet_host:%q}[count:1]`, n))
			if len(ver) != 1 || want != "perfevent.version 1 "+ver[0].text {
				t.Errorf("%s: perfevent.version from pmseries %+v, from pmcd %q", n, ver, want)
			}
			// cpu_clock counts ns: a rate of about 1e9 on every CPU.
			rates := f.samples(t, fmt.Sprintf(`rate(perfevent.hwcounters.cpu_clock.value{fleet_host:%q}[count:4])`, n))
			if len(rates) != 3*len(cpus) {
				t.Fatalf("%s: rate(cpu_clock[count:4]): %d values, want %d", n, len(rates), 3*len(cpus))
			}
			for _, s := range rates {
				checkRange(t, n+" rate(cpu_clock)", s.text, 0.3e9, 3e9)
			}
		}
	})

	t.Run("labels", func(t *testing.T) {
		for _, n := range f.Names {
			sids := f.sids(t, fmt.Sprintf(`perfevent.hwcounters.cpu_clock.value{fleet_host:%q}`, n))
			if len(sids) != 1 {
				t.Fatalf("%s: cpu_clock.value: series %v, want one", n, sids)
			}
			r := f.PMSeries(t, "-a", sids[0])
			insts := regexp.MustCompile(`(?m)^\s+inst \[(\d+) or "cpu(\d+)"\] labels (\{.*\})$`).FindAllStringSubmatch(r.Stdout, -1)
			if len(insts) != len(cpus) {
				t.Fatalf("%s: pmseries -a: %d instances with labels, want %d:\n%s", n, len(insts), len(cpus), r)
			}
			for _, m := range insts {
				var l map[string]any
				if err := json.Unmarshal([]byte(m[3]), &l); err != nil {
					t.Fatalf("%s: instance labels %s: %v", n, m[3], err)
				}
				// pmproxy 6.0.3 keeps the instance's name and the
				// metric's, indom's, domain's and context's labels, but
				// drops the instance's own ({"cpu":N}): the archive has
				// them (checked below) and /metrics serves them live.
				if cpu, ok := l["cpu"]; (ok && fmt.Sprint(cpu) != m[1]) || m[1] != m[2] || l["agent"] != "perfevent" ||
					l["device_type"] != "cpu" || l["indom_name"] != "per cpu" || l["fleet_host"] != n {
					t.Errorf("%s: instance %s: labels %v", n, m[1], l)
				}
			}
			dump := f.Hosts[0].Run(t, "pmdumplog", "-e", filepath.Join(f.Archives, n, "perfevent"))
			for _, c := range cpus {
				if !regexp.MustCompile(fmt.Sprintf(`(?m)^\s+InDom 127\.\d+\[%d\] labels \(\d+ bytes\): \{"cpu":%d\}$`, c, c)).MatchString(dump) {
					t.Errorf("%s: the archive has no label {\"cpu\":%d}:\n%s", n, c, head(dump, 40))
				}
			}
			if !strings.Contains(dump, `"fleet_host":"`+n+`"`) || !strings.Contains(dump, `Domain 127 labels (21 bytes): {"agent":"perfevent"}`) {
				t.Errorf("%s: the archive lacks the host's or the agent's labels:\n%s", n, head(dump, 20))
			}
			requireLines(t, "pmseries -a cpu_clock.value", r.Stdout,
				`\s+Metric: perfevent\.hwcounters\.cpu_clock\.value`,
				`\s+Semantics: counter  Units: count`,
				`\s+Data Type: 64-bit int  InDom: 127\.[0-9]+ 0x[0-9a-f]+`)
		}
	})

	t.Run("openmetrics", func(t *testing.T) {
		testOpenMetrics(t, f, cpus)
	})

	t.Run("dashboard", func(t *testing.T) {
		testDashboard(t, f)
	})

	// The last two change what a host serves; they look at time windows.
	t.Run("perfalloc", func(t *testing.T) {
		l, n := f.Hosts[1], f.Names[1]
		perfalloc := filepath.Join(f.Hosts[0].env.Repo, "bin", "perfalloc")
		if _, err := os.Stat(perfalloc); err != nil {
			unmet(t, "needs %s (make build)", perfalloc)
		}
		start := time.Now()
		l.Run(t, perfalloc, "-f", l.LockFile(), "sleep", strconv.Itoa(int(4*interval/time.Second)))
		end := time.Now()
		f.waitSamples(t, n, end, 2)
		for _, host := range f.Names {
			s := f.window(t, fmt.Sprintf(`perfevent.active{fleet_host:%q}[count:60]`, host), start, end)
			zero := 0
			for _, v := range s {
				if v.value == 0 {
					zero++
				}
			}
			if host == n && zero < 2 {
				t.Errorf("%s: %d samples of perfevent.active == 0 during a 4 s reservation, want 2 or more: %+v", host, zero, s)
			}
			if host != n && (zero > 0 || len(s) < 2) {
				t.Errorf("%s: perfevent.active during %s's reservation: %+v, want %v throughout", host, n, s, active)
			}
		}
	})

	// Last: a host whose agent is down for a while. pmlogger records the
	// failed fetches, pmproxy stores each as an error marker in the
	// series' stream, and Debian's PCP 6.0.3 cannot read that back:
	// pmseries and pmproxy's /series/query both crash on a window that
	// holds one. So the stream is read with redis-cli, and pmproxy only
	// over samples after the restart.
	t.Run("gap", func(t *testing.T) {
		l, n := f.Hosts[2], f.Names[2]
		before := f.sids(t, fmt.Sprintf(`perfevent.active{fleet_host:%q}`, n))
		if len(before) != 1 {
			t.Fatalf("%s: perfevent.active series %v", n, before)
		}
		stopped := time.Now()
		old := l.StopAgent(t)
		time.Sleep(4 * interval)
		l.StartAgent(t, old)
		restarted := time.Now()
		f.waitSamples(t, n, restarted, 3)
		if after := f.sids(t, fmt.Sprintf(`perfevent.active{fleet_host:%q}`, n)); strings.Join(after, ",") != strings.Join(before, ",") {
			t.Errorf("%s: perfevent.active's series %v before the restart, %v after: a new series", n, before, after)
		}
		entries := f.stream(t, before[0])
		var markers, zeros, counting int
		var lastGood, firstAfter int64
		for _, e := range entries {
			if e.ms < stopped.Add(-2*interval).UnixMilli() {
				continue
			}
			switch {
			case e.err:
				markers++
			case e.value == 0:
				zeros++
			case e.value == active:
				counting++
				if e.ms < restarted.UnixMilli() && firstAfter == 0 {
					lastGood = e.ms
				} else if firstAfter == 0 {
					firstAfter = e.ms
				}
			default:
				t.Errorf("%s: perfevent.active = %v at %d: neither %v nor 0", n, e.value, e.ms, active)
			}
		}
		// The outage is missing data: error markers or no samples at all
		// for its length; never made-up values.
		if markers == 0 && time.Duration(firstAfter-lastGood)*time.Millisecond < 3*interval {
			t.Errorf("%s: no gap across a %v outage: %+v", n, restarted.Sub(stopped), entries)
		}
		if counting < 3 {
			t.Errorf("%s: %d samples of perfevent.active = %v around the restart, want some before and 3 after: %+v", n, counting, active, entries)
		}
		t.Logf("%s: %d error markers, %d zeros (the first fetch after the restart), %d good samples since %v before the stop",
			n, markers, zeros, counting, 2*interval)
		// The other hosts went on sampling, with their values, while
		// this one had none. Their pmloggers run on the same machine as
		// the test, so a busy machine delays their samples too: a bound
		// on the step between two of them (2.5 s, once) failed on a
		// loaded machine with every host right. What tells a broken
		// fleet (every agent stopped, or pmproxy no longer ingesting)
		// from a slow one is whether they have samples at all inside
		// the outage, which lasts at least 4 intervals.
		for _, host := range f.Names[:2] {
			s := f.window(t, fmt.Sprintf(`perfevent.active{fleet_host:%q}[count:30]`, host), stopped, restarted)
			if len(s) < 2 {
				t.Errorf("%s: %d samples in the %v while only %s's agent was down, want 2 or more: %+v", host, len(s), restarted.Sub(stopped), n, s)
			}
			for _, v := range s {
				if v.value != active {
					t.Errorf("%s: perfevent.active = %v at %d while only %s's agent was down, want %v", host, v.value, v.ms, n, active)
				}
			}
			t.Logf("%s: %d samples, largest step %v, while %s's agent was down", host, len(s), largestGap(s), n)
		}
		// After the restart the counters start again from zero and only
		// go up: three samples of cpu_clock, rising on each CPU.
		c := f.samples(t, fmt.Sprintf(`perfevent.hwcounters.cpu_clock.value{fleet_host:%q}[count:3]`, n))
		sort.SliceStable(c, func(i, j int) bool { return c[i].ms < c[j].ms })
		last := map[string]float64{}
		for _, v := range c {
			if v.ms < restarted.Add(-interval).UnixMilli() {
				t.Errorf("%s: cpu_clock sample at %d from before the restart", n, v.ms)
			}
			if p, ok := last[v.inst]; ok && v.value <= p {
				t.Errorf("%s: cpu_clock instance %s went from %v to %v", n, v.inst, p, v.value)
			}
			last[v.inst] = v.value
		}
		if len(last) != len(cpus) {
			t.Errorf("%s: cpu_clock after the restart on %d CPUs, want %d", n, len(last), len(cpus))
		}
	})
}

// servedValues lists the perfevent.hwcounters.*.value metrics that have
// values through the lab's pmcd, sorted.
func servedValues(t *testing.T, l *Lab) []string {
	t.Helper()
	var names []string
	for _, line := range strings.Split(l.Run(t, "pmprobe", "perfevent.hwcounters"), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && strings.HasSuffix(f[0], ".value") && f[1] != "0" && !strings.HasPrefix(f[1], "-") {
			names = append(names, f[0])
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		t.Fatal("the lab agent serves no perfevent.hwcounters.*.value with values")
	}
	return names
}

type sample struct {
	ms    int64
	value float64
	text  string // the value as pmproxy gives it
	inst  string // the instance's series, "" for a metric without instances
}

var sidRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// sids runs a pmseries query without a time window: the matching series.
func (f *Fleet) sids(t testing.TB, query string) []string {
	t.Helper()
	r := f.PMSeries(t, query)
	if r.Err != nil {
		t.Fatalf("pmseries failed:\n%s\n%s", r, f.Logs())
	}
	var sids []string
	for _, line := range strings.Split(r.Stdout, "\n") {
		if sidRE.MatchString(line) {
			sids = append(sids, line)
		}
	}
	sort.Strings(sids)
	return sids
}

// samples runs a query with a time window through pmproxy's
// /series/query, which answers the same as pmseries in JSON (and stays
// up where Debian's pmseries 6.0.3 crashes on a window over a restart).
func (f *Fleet) samples(t testing.TB, query string) []sample {
	t.Helper()
	var out []struct {
		Series    string  `json:"series"`
		Instance  string  `json:"instance"`
		Timestamp float64 `json:"timestamp"`
		Value     string  `json:"value"`
	}
	f.getJSON(t, "/series/query", url.Values{"expr": {query}}, &out)
	var s []sample
	for _, o := range out {
		v, _ := strconv.ParseFloat(o.Value, 64)
		s = append(s, sample{ms: int64(o.Timestamp), value: v, text: o.Value, inst: o.Instance})
	}
	return s
}

// window is samples between two moments, oldest first.
func (f *Fleet) window(t testing.TB, query string, from, to time.Time) []sample {
	t.Helper()
	var s []sample
	for _, v := range f.samples(t, query) {
		if v.ms >= from.UnixMilli() && v.ms <= to.UnixMilli() {
			s = append(s, v)
		}
	}
	sort.SliceStable(s, func(i, j int) bool { return s[i].ms < s[j].ms })
	return s
}

// waitSamples waits until redis holds n samples of a host's
// perfevent.active taken after since. It reads the stream itself, not
// through pmproxy, which may hold an error marker (see the gap test).
func (f *Fleet) waitSamples(t testing.TB, host string, since time.Time, n int) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("%d samples of %s after %v", n, host, since.Format(time.StampMilli)), func() bool {
		sids := f.sids(t, fmt.Sprintf(`perfevent.active{fleet_host:%q}`, host))
		if len(sids) != 1 {
			return false
		}
		got := 0
		for _, e := range f.stream(t, sids[0]) {
			if e.ms >= since.UnixMilli() && !e.err {
				got++
			}
		}
		return got >= n
	})
}

// largestGap is the longest step between consecutive distinct times.
func largestGap(s []sample) time.Duration {
	var gap int64
	for i := 1; i < len(s); i++ {
		if d := s[i].ms - s[i-1].ms; d > gap {
			gap = d
		}
	}
	return time.Duration(gap) * time.Millisecond
}

// metricNames asks pmproxy which metric names the series carry, sorted
// and without repeats.
func (f *Fleet) metricNames(t testing.TB, sids []string) []string {
	t.Helper()
	var out []struct {
		Series string `json:"series"`
		Name   string `json:"name"`
	}
	f.getJSON(t, "/series/metrics", url.Values{"series": {strings.Join(sids, ",")}}, &out)
	set := map[string]bool{}
	for _, m := range out {
		set[m.Name] = true
	}
	var names []string
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// labels asks pmproxy for the labels of one series.
func (f *Fleet) labels(t testing.TB, sid string) map[string]any {
	t.Helper()
	var out []struct {
		Series string         `json:"series"`
		Labels map[string]any `json:"labels"`
	}
	f.getJSON(t, "/series/labels", url.Values{"series": {sid}}, &out)
	if len(out) != 1 {
		t.Fatalf("/series/labels?series=%s: %+v", sid, out)
	}
	return out[0].Labels
}

func (f *Fleet) getJSON(t testing.TB, path string, q url.Values, v any) {
	t.Helper()
	u := f.URL(path) + "?" + q.Encode()
	body, err := httpGet(u)
	if err != nil {
		t.Fatalf("%v\n%s", err, f.Logs())
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in\n%s", u, err, body)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// entry is one sample in a series' redis stream.
type entry struct {
	ms    int64
	value float64
	err   bool // an error marker: the fetch failed
}

// stream reads a metric's stream of values from redis (XRANGE), for a
// metric without instances.
func (f *Fleet) stream(t testing.TB, sid string) []entry {
	t.Helper()
	r := f.Hosts[0].RunErr(t, "redis-cli", "-h", "127.0.0.1", "-p", strconv.Itoa(f.RedisPort), "xrange", "pcp:values:series:"+sid, "-", "+")
	if r.Err != nil {
		t.Fatalf("redis-cli failed:\n%s", r)
	}
	id := regexp.MustCompile(`^(\d+)-\d+$`)
	var es []entry
	var fields []string
	flush := func() {
		if len(es) == 0 {
			return
		}
		e := &es[len(es)-1]
		// A value is the pair ("", value); a marker has other fields.
		if len(fields) == 2 && fields[0] == "" {
			v, err := strconv.ParseFloat(fields[1], 64)
			e.value, e.err = v, err != nil
		} else {
			e.err = true
		}
		fields = nil
	}
	for _, line := range strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n") {
		if m := id.FindStringSubmatch(line); m != nil {
			flush()
			ms, _ := strconv.ParseInt(m[1], 10, 64)
			es = append(es, entry{ms: ms})
			continue
		}
		fields = append(fields, line)
	}
	flush()
	return es
}
