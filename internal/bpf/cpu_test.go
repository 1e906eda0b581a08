package bpf

import "testing"

func TestCPUListEnd(t *testing.T) {
	for _, c := range []struct {
		list string
		want int
	}{
		{"0", 1}, {"0-1", 2}, {"0-3,8,10-11", 12}, {"0,2", 3}, {"0-767", 768},
	} {
		if got, err := cpuListEnd(c.list); err != nil || got != c.want {
			t.Errorf("cpuListEnd(%q) = %d, %v; want %d", c.list, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "0-", "-1"} {
		if got, err := cpuListEnd(bad); err == nil {
			t.Errorf("cpuListEnd(%q) = %d, want an error", bad, got)
		}
	}
}
