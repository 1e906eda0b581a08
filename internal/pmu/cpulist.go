package pmu

import (
	"fmt"

	"perfevent/internal/cpulist"
)

// OnlineCPUs returns the kernel ids of the online CPUs, from
// <Sys>/devices/system/cpu/online.
func (fs *FS) OnlineCPUs() ([]int, error) {
	path := fs.sysPath("devices", "system", "cpu", "online")
	s, err := readTrimmed(path)
	if err != nil {
		return nil, err
	}
	cpus, err := cpulist.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cpus, nil
}
