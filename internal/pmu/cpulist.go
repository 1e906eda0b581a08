package pmu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ParseCPUList parses the kernel's CPU list format ("0-3,8,10-11"), used by
// cpumask, cpus and devices/system/cpu/online. The result is sorted and
// has no duplicates. An empty list yields nil.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	seen := map[int]bool{}
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil || first < 0 {
			return nil, fmt.Errorf("bad CPU number %q in list %q", lo, s)
		}
		last := first
		if isRange {
			last, err = strconv.Atoi(hi)
			if err != nil || last < first {
				return nil, fmt.Errorf("bad CPU range %q in list %q", part, s)
			}
		}
		// Kernel CPU ids are bounded well below this; a larger range
		// means a corrupt file, not a big machine.
		if last >= 1<<16 {
			return nil, fmt.Errorf("CPU %d out of range in list %q", last, s)
		}
		for c := first; c <= last; c++ {
			if !seen[c] {
				seen[c] = true
				cpus = append(cpus, c)
			}
		}
	}
	slices.Sort(cpus)
	return cpus, nil
}

// OnlineCPUs returns the kernel ids of the online CPUs, from
// <Sys>/devices/system/cpu/online.
func (fs *FS) OnlineCPUs() ([]int, error) {
	path := fs.sysPath("devices", "system", "cpu", "online")
	s, err := readTrimmed(path)
	if err != nil {
		return nil, err
	}
	cpus, err := ParseCPUList(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cpus, nil
}
