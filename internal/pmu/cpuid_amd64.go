package pmu

import (
	"encoding/binary"

	"perfevent/internal/pfm"
)

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

// hostIntelArch reads CPUID leaf 0xa, which /proc/cpuinfo does not show
// and which decides what libpfm4's ix86arch PMU offers: the perfmon
// version and the architectural events the CPU lacks. Nil off Intel.
func hostIntelArch() *pfm.IntelArchPerfmon {
	max, b, c, d := cpuid(0, 0)
	var vendor [12]byte
	binary.LittleEndian.PutUint32(vendor[0:], b)
	binary.LittleEndian.PutUint32(vendor[4:], d)
	binary.LittleEndian.PutUint32(vendor[8:], c)
	if string(vendor[:]) != "GenuineIntel" || max < 0xa {
		return nil
	}
	// libpfm4 takes EBX as it is, without EAX's count of the events it
	// describes.
	a, b, _, _ := cpuid(0xa, 0)
	return &pfm.IntelArchPerfmon{Version: int(a & 0xff), Unavailable: b}
}
