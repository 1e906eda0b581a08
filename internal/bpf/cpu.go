package bpf

import (
	"fmt"
	"sync"

	"perfevent/internal/cpulist"
	"perfevent/internal/hostfs"
)

// PossibleCPU is the number of CPUs the kernel may ever bring up, which
// sizes per-CPU maps and perf event arrays: one more than the highest id
// in /sys/devices/system/cpu/possible.
func PossibleCPU() (int, error) {
	possible.once.Do(func() {
		possible.n, possible.err = possibleCPUs("/sys/devices/system/cpu/possible")
	})
	return possible.n, possible.err
}

// possible is PossibleCPU's answer, read once: a sync.Once rather than
// sync.OnceValues, whose closure a start would make at init.
var possible struct {
	once sync.Once
	n    int
	err  error
}

func possibleCPUs(path string) (int, error) {
	b, err := hostfs.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := cpuListEnd(string(b))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// cpuListEnd is one more than the highest CPU of a kernel CPU list such
// as "0-3,8,10-11".
func cpuListEnd(list string) (int, error) {
	cpus, err := cpulist.Parse(list)
	if err != nil {
		return 0, err
	}
	if len(cpus) == 0 {
		return 0, fmt.Errorf("%q is not a CPU list", list)
	}
	return cpus[len(cpus)-1] + 1, nil
}
