package pfm

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

const (
	exUser   = unix.PerfBitExcludeUser
	exKernel = unix.PerfBitExcludeKernel
	exHv     = unix.PerfBitExcludeHv
	exGuest  = unix.PerfBitExcludeGuest
	exAll    = exUser | exKernel | exHv | unix.PerfBitExcludeIdle | unix.PerfBitExcludeHost | exGuest
)

// The perf PMUs as the machine's libpfm4 sees them, beyond the goldens
// (which force perf alone): the expectations are what Debian's libpfm4
// 4.13 answered with the PMUs it detected on an AMD Zen 3 and, under
// qemu-user (QEMU_CPU=Skylake-Server), on a Skylake-X.
func TestPerfPMUWithCore(t *testing.T) {
	zen3 := []string{"perf", "perf_raw", "amd64_fam19h_zen3", "amd64_rapl", "amd64_fam19h_zen3_l3"}
	skx := []string{"perf", "perf_raw", "skx"}
	const (
		cyc    = "perf::PERF_COUNT_HW_CPU_CYCLES:u=1:k=1:h=0:precise=0:excl=0:mg=0:mh=1"
		cycSKX = "perf::PERF_COUNT_HW_CPU_CYCLES:u=1:k=1:precise=0:excl=0:mg=0:mh=1"
		raw    = "perf_raw:::u=1:k=1:h=0:precise=0:excl=0:mg=0:mh=1:hw_smpl=0"
	)
	for _, tc := range []struct {
		active           []string
		name, full       string
		typ              uint32
		config, excludes uint64
		err              error
	}{
		{active: zen3, name: "perf::CYCLES", full: cyc, excludes: exHv | exGuest},
		{active: zen3, name: "CYCLES", full: cyc, excludes: exHv | exGuest},
		{active: zen3, name: "perf::CYCLES:h", full: "perf::PERF_COUNT_HW_CPU_CYCLES:u=0:k=0:h=1:precise=0:excl=0:mg=0:mh=1",
			excludes: exUser | exKernel | exGuest},
		{active: zen3, name: "r1c2", full: raw, typ: 4, config: 0x1c2, excludes: exHv | exGuest},
		// Skylake-X filters no hypervisor level, so neither does perf.
		{active: skx, name: "perf::CYCLES", full: cycSKX, excludes: exGuest},
		{active: skx, name: "CYCLES", full: cycSKX, excludes: exGuest},
		{active: skx, name: "perf::CYCLES:h", err: ErrAttr},
		{active: skx, name: "r1c2", full: raw, typ: 4, config: 0x1c2, excludes: exHv | exGuest},
		{active: skx, name: "perf::L1-DCACHE-LOADS:MISS", err: ErrUmask},
		{active: skx, name: "perf::PERF_COUNT_HW_CACHE_L1D:READ:WRITE", err: ErrUmask},
		{active: skx, name: "perf::CPU-CLOCK:precise=1", err: ErrAttr},
		{active: skx, name: "perf_raw::R1c2", err: ErrNotFound},
		{active: skx, name: "perf::slots", err: ErrNotFound},
	} {
		enc, err := Encode(tc.name, Env{Arch: "amd64"}, tc.active)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%v %s: error %v, want %v", tc.active[2], tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v %s: %v", tc.active[2], tc.name, err)
			continue
		}
		if enc.FullName != tc.full || enc.Attr.Type != tc.typ || enc.Attr.Config != tc.config || enc.Attr.Bits&exAll != tc.excludes {
			t.Errorf("%s %s: %s type %d config %#x excludes %#x, want %s %d %#x %#x", tc.active[2], tc.name,
				enc.FullName, enc.Attr.Type, enc.Attr.Config, enc.Attr.Bits&exAll, tc.full, tc.typ, tc.config, tc.excludes)
		}
	}
}

// The optional events exist where the kernel's core PMU lists them. As
// libpfm4 answered on the AMD Zen 3 with a /sys/devices/cpu/events that
// listed slots and topdown-retiring only.
func TestPerfOptionalEvents(t *testing.T) {
	env := Env{Arch: "amd64", KernelEvent: func(pmu, event string) bool {
		return pmu == "cpu" && (event == "slots" || event == "topdown-retiring")
	}}
	zen3 := []string{"perf", "perf_raw", "amd64_fam19h_zen3", "amd64_rapl", "amd64_fam19h_zen3_l3"}
	for _, tc := range []struct {
		name, full       string
		config, excludes uint64
	}{
		{"perf::topdown-retiring:u", "perf::topdown-retiring:u=1:k=0:excl=0:mg=0:mh=1", 0x8000, exKernel | exHv | exGuest},
		{"slots", "perf::slots:u=1:k=1:excl=0:mg=0:mh=1", 0x400, exHv | exGuest},
	} {
		enc, err := Encode(tc.name, env, zen3)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if enc.FullName != tc.full || enc.Attr.Type != unix.PERF_TYPE_RAW || enc.Attr.Config != tc.config || enc.Attr.Bits&exAll != tc.excludes {
			t.Errorf("%s: %s type %d config %#x excludes %#x, want %s type 4 config %#x excludes %#x", tc.name,
				enc.FullName, enc.Attr.Type, enc.Attr.Config, enc.Attr.Bits&exAll, tc.full, tc.config, tc.excludes)
		}
	}
	// Named while inactive (libpfm4 with LIBPFM_ENCODE_INACTIVE=1 and
	// skx forced), perf is not initialised: no optional events, and the
	// levels of no core PMU.
	env.EncodeInactive = true
	if _, err := Encode("perf::slots", env, []string{"skx"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("perf::slots on an inactive perf: %v, want %v", err, ErrNotFound)
	}
	want := "perf::PERF_COUNT_HW_CPU_CYCLES:u=0:k=0:h=1:precise=0:excl=0:mg=0:mh=1"
	if enc, err := Encode("perf::CYCLES:h", env, []string{"skx"}); err != nil || enc.FullName != want {
		t.Errorf("perf::CYCLES:h on an inactive perf: %s, %v; want %s", enc.FullName, err, want)
	}
	env.EncodeInactive = false
	for name, want := range map[string]error{"perf::topdown-fe-bound": ErrNotFound, "perf::slots:precise=1": ErrAttr} {
		if _, err := Encode(name, env, zen3); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
}

func TestPerfRawCode(t *testing.T) {
	for name, want := range map[string]int64{
		"r0": 0, "r1c2": 0x1c2, "r0x1c2": 0x1c2, "rDEADbeef": 0xdeadbeef, "rfffffffffffffffe": -2,
		"r": -1, "rx1": -1, "r0x": -1, "r1g": -1, "R1": -1, "rffffffffffffffff": -1, "r10000000000000000": -1,
	} {
		v, ok := perfRawCode(name)
		if want == -1 && ok || want != -1 && (!ok || v != uint64(want)) {
			t.Errorf("perfRawCode(%q) = %#x, %v; want %#x", name, v, ok, uint64(want))
		}
	}
}
