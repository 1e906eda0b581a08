package main

import (
	"slices"
	"strconv"
	"testing"
)

// BenchmarkConfirmation runs "perfalloc true" against a fake agent built on
// internal/reservation/lockwatch and reports the "released ... after X ms" that
// perfalloc prints: from the lock taken to the agent's report read.
func BenchmarkConfirmation(b *testing.B) {
	lock := lockFile(b)
	fakeAgent(b, lock, true)
	var ms []float64
	for range b.N {
		r := perfalloc(b, nil, "-f", lock, "true")
		m := confirmed.FindStringSubmatch(r.stderr)
		if r.rc != 0 || m == nil {
			b.Fatalf("%+v", r)
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		ms = append(ms, v)
	}
	slices.Sort(ms)
	b.ReportMetric(ms[len(ms)/2], "ms-median")
	b.ReportMetric(ms[len(ms)*99/100], "ms-p99")
}
