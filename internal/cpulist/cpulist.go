// Package cpulist reads and writes the kernel's CPU list format, "0-3,8,10-11",
// used by sysfs files such as devices/system/cpu/online, a PMU's cpumask and a
// NUMA node's cpulist, and by the agent's messages.
package cpulist

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Parse parses the kernel's CPU list format ("0-3,8,10-11"), used by
// cpumask, cpus and devices/system/cpu/online. The result is sorted and
// has no duplicates. An empty list yields nil.
func Parse(s string) ([]int, error) {
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

// Format renders ascending CPU ids in the kernel's list format, e.g.
// "0-3,5", the inverse of Parse.
func Format(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// Describe names CPUs for a message: "cpu3", "cpus 0-3,5" (in the given
// order, which Format keeps), or "no CPUs".
func Describe(cpus []int) string {
	switch len(cpus) {
	case 0:
		return "no CPUs"
	case 1:
		return "cpu" + strconv.Itoa(cpus[0])
	}
	return "cpus " + Format(cpus)
}
