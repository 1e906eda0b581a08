//go:build !amd64

package pmu

import "perfevent/internal/pfm"

// hostIntelArch: only amd64 builds run on Intel CPUs.
func hostIntelArch() *pfm.IntelArchPerfmon { return nil }
