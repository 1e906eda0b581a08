package qa

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// promtoolLint is what `promtool check metrics` says of PCP's names that
// is advice, not a parse error: PCP counters have no _total suffix, and
// its label names (instname, instid) are its own.
var promtoolLint = regexp.MustCompile(`^\S+ (counter metrics should have "_total" suffix|non-histogram and non-summary metrics should not have "_\w+" suffix|metric names should be written in 'snake_case' not 'camelCase')$`)

// testOpenMetrics scrapes pmproxy's /metrics for one host of the fleet,
// has Prometheus's own parser (promtool, Debian's prometheus package)
// read it, and checks the names, types, help and per-CPU labels.
func testOpenMetrics(t *testing.T, f *Fleet, cpus []int) {
	promtool := lookPathIn(f.Hosts[0].Environ(), "promtool")
	if promtool == "" {
		unmet(t, "needs promtool (Debian package prometheus; scripts/setup installs it)")
	}
	l := f.Hosts[0]
	body, err := httpGet(f.URL("/metrics?" + url.Values{"hostspec": {l.HostSpec()}, "names": {"perfevent"}}.Encode()))
	if err != nil {
		t.Fatalf("%v\n%s", err, f.Logs())
	}
	text := string(body)
	scrape := filepath.Join(t.TempDir(), "metrics.txt")
	writeFile(t, scrape, text)
	r := l.Exec(Cmd{Args: []string{"sh", "-c", `exec "$0" check metrics < "$1"`, promtool, scrape}})
	// Exit 1 with only lint advice is a clean parse; anything else is not.
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout+r.Stderr), "\n") {
		if line != "" && !promtoolLint.MatchString(line) {
			t.Errorf("promtool check metrics: %q\nscrape:\n%s", line, head(text, 40))
		}
	}

	types := map[string]string{}
	helps := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`).FindAllStringSubmatch(text, -1) {
		types[m[1]] = m[2]
	}
	for _, m := range regexp.MustCompile(`(?m)^# HELP (\S+) (.*)$`).FindAllStringSubmatch(text, -1) {
		helps[m[1]] = m[2]
	}
	want := map[string][2]string{
		"perfevent_active":                         {"gauge", "The number of active counters."},
		"perfevent_derived_active":                 {"gauge", ""},
		"perfevent_hwcounters_cpu_clock_value":     {"counter", "The values of the counter"},
		"perfevent_hwcounters_cpu_clock_dutycycle": {"gauge", ""},
		"perfevent_hwcounters_msr_tsc_value":       {"counter", "The values of the counter"},
		"perfevent_derived_sw_faults_cs_value":     {"counter", ""},
	}
	for name, w := range want {
		if types[name] != w[0] {
			t.Errorf("/metrics: # TYPE %s %q, want %q", name, types[name], w[0])
		}
		if helps[name] == "" || (w[1] != "" && helps[name] != w[1]) {
			t.Errorf("/metrics: # HELP %s %q, want %q", name, helps[name], w[1])
		}
	}
	// OpenMetrics has no strings: pmproxy leaves perfevent.version out.
	if _, ok := types["perfevent_version"]; ok || strings.Contains(text, "\nperfevent_version") {
		t.Errorf("/metrics serves the string perfevent.version:\n%s", head(text, 40))
	}
	// Every metric with a type has a help, and every value metric is a
	// counter, every dutycycle a gauge.
	for name, typ := range types {
		if helps[name] == "" {
			t.Errorf("/metrics: %s has no # HELP", name)
		}
		if strings.HasSuffix(name, "_value") && typ != "counter" || strings.HasSuffix(name, "_dutycycle") && typ != "gauge" {
			t.Errorf("/metrics: # TYPE %s %s", name, typ)
		}
	}

	// Per-CPU samples: one per online CPU, labelled cpu="N",
	// instname="cpuN", with the host's labels.
	sampleRE := regexp.MustCompile(`(?m)^perfevent_hwcounters_cpu_clock_value\{(.*)\} ([0-9.e+]+)$`)
	var got []string
	for _, m := range sampleRE.FindAllStringSubmatch(text, -1) {
		labels := map[string]string{}
		for _, kv := range regexp.MustCompile(`(\w+)="([^"]*)"`).FindAllStringSubmatch(m[1], -1) {
			labels[kv[1]] = kv[2]
		}
		if labels["instname"] != "cpu"+labels["cpu"] || labels["instid"] != labels["cpu"] ||
			labels["device_type"] != "cpu" || labels["fleet_host"] != f.Names[0] {
			t.Errorf("/metrics: cpu_clock sample labels %v", labels)
		}
		got = append(got, labels["cpu"])
	}
	sort.Strings(got)
	var wantCPUs []string
	for _, c := range cpus {
		wantCPUs = append(wantCPUs, fmt.Sprint(c))
	}
	sort.Strings(wantCPUs)
	if strings.Join(got, ",") != strings.Join(wantCPUs, ",") {
		t.Errorf("/metrics: cpu_clock samples for CPUs %v, want %v:\n%s", got, wantCPUs, head(text, 40))
	}
}

func head(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "")
}
