package pfm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"perfevent/internal/emulator"
)

// armCores are the ARM cores whose libpfm4 4.13 core PMU this test knows,
// by /proc/cpuinfo's "CPU implementer" and "CPU part" (libpfm4 detects
// them so).
var armCores = map[[2]int64]string{
	{0x41, 0xd03}: "arm_ac53",
	{0x41, 0xd07}: "arm_ac57",
	{0x41, 0xd0c}: "arm_n1",
	{0x41, 0xd40}: "arm_v1",
	{0x41, 0xd49}: "arm_n2",
	{0x41, 0xd4f}: "arm_v2",
	{0x43, 0xaf}:  "arm_thunderx2",
	{0x46, 0x1}:   "arm_a64fx",
	{0x48, 0xd01}: "arm_kunpeng",
}

// armCorePMU names the libpfm4 PMU of the first CPU in /proc/cpuinfo.
func armCorePMU() (string, error) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	var impl, part int64 = -1, -1
	sc := bufio.NewScanner(f)
	for sc.Scan() && (impl < 0 || part < 0) {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 0, 64)
		switch strings.TrimSpace(k) {
		case "CPU implementer":
			impl = n
		case "CPU part":
			part = n
		default:
			continue
		}
		if err != nil {
			return "", err
		}
	}
	if p, ok := armCores[[2]int64{impl, part}]; ok {
		return p, nil
	}
	return "", errors.New("no ARM core libpfm4 knows")
}

// TestKernelAcceptsARMCatalog opens, on this arm64 machine's own core
// PMU, every event of its catalog table as Encode encodes it, counting
// this process: the kernel must take each encoding, or refuse it only as
// an event this PMU does not implement (ENOENT, EOPNOTSUPP), never as a
// malformed attribute. CPU_CYCLES and INST_RETIRED must count.
func TestKernelAcceptsARMCatalog(t *testing.T) {
	if runtime.GOARCH != "arm64" {
		t.Skip("needs an arm64 machine")
	}
	emulator.SkipWithoutPerfEvents(t)
	name, err := armCorePMU()
	if err != nil {
		t.Skipf("needs an ARM core of libpfm4's arm64 tables: /proc/cpuinfo: %v", err)
	}
	if _, err := os.Stat("/sys/bus/event_source/devices/armv8_pmuv3"); err != nil {
		if _, err := os.Stat("/sys/devices/armv8_pmuv3_0"); err != nil {
			t.Skip("needs the kernel's armv8_pmuv3 PMU (a machine or VM with a hardware PMU)")
		}
	}
	p, err := Load(name)
	if err != nil {
		t.Fatal(err)
	}
	accepted, unimplemented := 0, 0
	fds := map[string]int{}
	for _, ev := range p.Events {
		if ev.Equiv != "" {
			continue // the same code as its target
		}
		enc, err := Encode(p.Name+"::"+ev.Name, Env{Arch: "arm64"}, []string{p.Name})
		if err != nil {
			t.Errorf("%s: %v", ev.Name, err)
			continue
		}
		a := enc.Attr
		a.Size = uint32(unsafe.Sizeof(a))
		a.Read_format = unix.PERF_FORMAT_TOTAL_TIME_ENABLED | unix.PERF_FORMAT_TOTAL_TIME_RUNNING
		fd, err := unix.PerfEventOpen(&a, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
		switch {
		case err == nil:
			accepted++
			if ev.Name == "CPU_CYCLES" || ev.Name == "INST_RETIRED" {
				fds[ev.Name] = fd
				continue
			}
			unix.Close(fd)
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EOPNOTSUPP):
			unimplemented++
		case errors.Is(err, unix.EACCES):
			t.Skipf("%s: perf_event_open: %v (needs root or kernel.perf_event_paranoid <= 1)", enc.FullName, err)
		default:
			t.Errorf("%s = type %d config %#x bits %#x: perf_event_open: %v", enc.FullName, a.Type, a.Config, a.Bits, err)
		}
	}
	t.Logf("%s: %d events accepted, %d refused as not implemented by this PMU", p.Name, accepted, unimplemented)

	deadline := time.Now().Add(20 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
	}
	for _, ev := range []string{"CPU_CYCLES", "INST_RETIRED"} {
		fd, ok := fds[ev]
		if !ok {
			t.Errorf("%s: not opened", ev)
			continue
		}
		var buf [24]byte
		if _, err := unix.Read(fd, buf[:]); err != nil {
			t.Errorf("%s: read: %v", ev, err)
		} else if v := binary.NativeEndian.Uint64(buf[:8]); v == 0 {
			t.Errorf("%s: counted nothing in 20 ms of busy loop", ev)
		} else {
			t.Logf("%s: %d in 20 ms", ev, v)
		}
		unix.Close(fd)
	}
}
