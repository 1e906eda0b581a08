package qa

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkFleetIngest measures what a fleet costs the central pmproxy
// and redis-server: the values each host's pmlogger writes per second,
// pmproxy's and redis's CPU time per value ingested, and redis's memory
// per value kept (its growth over the window, and what its value streams
// take in the end). Run it alone, once:
//
//	go test ./qa -run '^$' -bench FleetIngest -benchtime 1x
//
// PERFEVENT_FLEET_HOSTS (default 3) and PERFEVENT_FLEET_SECONDS (default
// 20) size it; BENCHMARKS.md projects the figures to a large fleet.
func BenchmarkFleetIngest(b *testing.B) {
	hosts := envInt("PERFEVENT_FLEET_HOSTS", 3)
	window := time.Duration(envInt("PERFEVENT_FLEET_SECONDS", 20)) * time.Second
	const interval = time.Second
	f := StartFleet(b, hosts, VMConfig, interval)
	for _, n := range f.Names {
		f.waitSamples(b, n, time.Now(), 2)
	}
	// Each pmlogger record holds one value per instance of each metric.
	perRecord := 0
	for _, line := range strings.Split(f.Hosts[0].Run(b, "pmprobe", "perfevent"), "\n") {
		if fs := strings.Fields(line); len(fs) == 2 {
			if n, err := strconv.Atoi(fs[1]); err == nil && n > 0 {
				perRecord += n
			}
		}
	}
	metricSeries := len(f.sids(b, "perfevent.*"))
	active := f.sids(b, "perfevent.active")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cpu0, rcpu0, mem0, len0 := cpuTime(b, f.ProxyPID), cpuTime(b, f.RedisPID), f.redisMemory(b), f.streamLen(b, active)
		start := time.Now()
		time.Sleep(window)
		elapsed := time.Since(start)
		cpu1, rcpu1, mem1, len1 := cpuTime(b, f.ProxyPID), cpuTime(b, f.RedisPID), f.redisMemory(b), f.streamLen(b, active)
		records := len1 - len0 // pmlogger records ingested, over all hosts
		values := float64(records * perRecord)
		b.ReportMetric(float64(hosts), "hosts")
		b.ReportMetric(float64(metricSeries), "metric-series")
		b.ReportMetric(float64(perRecord*hosts), "instance-series")
		b.ReportMetric(values/elapsed.Seconds(), "values/s")
		b.ReportMetric(float64(cpu1-cpu0)/float64(time.Microsecond)/values, "pmproxy-µs/value")
		b.ReportMetric(float64(rcpu1-rcpu0)/float64(time.Microsecond)/values, "redis-µs/value")
		b.ReportMetric(float64(mem1-mem0)/values, "redis-growth-B/value")
		streams, stored := f.streamMemory(b), f.streamLen(b, active)*perRecord
		b.ReportMetric(float64(streams)/float64(stored), "stream-B/value")
		b.Logf("%d hosts, %d values per record, %d records in %v; pmproxy %v CPU, redis %v CPU, redis memory %d -> %d bytes; value streams %d bytes for %d values",
			hosts, perRecord, records, elapsed.Round(time.Millisecond), cpu1-cpu0, rcpu1-rcpu0, mem0, mem1, streams, stored)
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// cpuTime is a process's user and system time, from /proc/PID/stat.
func cpuTime(t testing.TB, pid int) time.Duration {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// Fields after the command: state is [0], utime [11], stime [12].
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
}

// redisMemory is redis's used_memory, in bytes.
func (f *Fleet) redisMemory(t testing.TB) int64 {
	t.Helper()
	r := f.Hosts[0].RunErr(t, "redis-cli", "-h", "127.0.0.1", "-p", strconv.Itoa(f.RedisPort), "info", "memory")
	m := regexp.MustCompile(`(?m)^used_memory:(\d+)\r?$`).FindStringSubmatch(r.Stdout)
	if m == nil {
		t.Fatalf("redis-cli info memory:\n%s", r)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// streamLen is the total length of the series' redis streams.
func (f *Fleet) streamLen(t testing.TB, sids []string) int {
	t.Helper()
	total := 0
	for _, sid := range sids {
		r := f.Hosts[0].RunErr(t, "redis-cli", "-h", "127.0.0.1", "-p", strconv.Itoa(f.RedisPort), "xlen", "pcp:values:series:"+sid)
		n, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
		if err != nil {
			t.Fatalf("redis-cli xlen:\n%s", r)
		}
		total += n
	}
	return total
}

// streamMemory is what redis says all value streams take (MEMORY USAGE,
// every node counted), in bytes.
func (f *Fleet) streamMemory(t testing.TB) int64 {
	t.Helper()
	cli := []string{"redis-cli", "-h", "127.0.0.1", "-p", strconv.Itoa(f.RedisPort)}
	keys := f.Hosts[0].Run(t, cli[0], append(cli[1:], "--scan", "--pattern", "pcp:values:series:*")...)
	var script strings.Builder
	for _, k := range strings.Fields(keys) {
		fmt.Fprintf(&script, "MEMORY USAGE %s SAMPLES 0\n", k)
	}
	r := f.Hosts[0].Exec(Cmd{Stdin: script.String(), Args: cli})
	if r.Err != nil {
		t.Fatalf("redis-cli:\n%s", r)
	}
	var total int64
	for _, line := range strings.Fields(r.Stdout) {
		n, _ := strconv.ParseInt(line, 10, 64)
		total += n
	}
	return total
}
