package pfm

import (
	"errors"
	"fmt"
	"testing"
)

// perfTypes is an Env.PerfType over a fixed set of kernel PMUs.
func perfTypes(types map[string]uint32) func(string) (uint32, error) {
	return func(name string) (uint32, error) {
		if t, ok := types[name]; ok {
			return t, nil
		}
		return 0, fmt.Errorf("no kernel PMU %s", name)
	}
}

// An ARM core with a perf_name list opens through the first of its kernel
// PMUs that the kernel has, and is refused without any; one without a
// perf_name stays PERF_TYPE_RAW. (libpfm4 upstream; 4.13 gave RAW to all.)
func TestARMPerfNameList(t *testing.T) {
	for _, tc := range []struct {
		name  string
		types map[string]uint32
		typ   uint32
		err   error
	}{
		{"arm_ac57::INST_RETIRED", map[string]uint32{"armv8_cortex_a57": 9, "armv8_pmuv3": 8}, 9, nil},
		{"arm_ac57::INST_RETIRED", map[string]uint32{"armv8_pmuv3": 8}, 8, nil},
		{"arm_ac57::INST_RETIRED", map[string]uint32{"armv8_pmuv3_0": 10, "armv8_pmuv3": 8}, 10, nil},
		{"arm_ac57::INST_RETIRED", nil, 0, ErrNotSupported},
		{"arm_n1::INST_RETIRED", nil, 4, nil},
	} {
		enc, err := Encode(tc.name, Env{Arch: "arm64", EncodeInactive: true, PerfType: perfTypes(tc.types)}, nil)
		switch {
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("%s with %v: got %v, want %v", tc.name, tc.types, err, tc.err)
		case tc.err == nil && (err != nil || enc.Attr.Type != tc.typ || enc.Attr.Config != 0x8):
			t.Errorf("%s with %v: type %d config %#x, %v; want type %d config 0x8", tc.name, tc.types, enc.Attr.Type, enc.Attr.Config, err, tc.typ)
		}
	}
}

// TOPDOWN_M's metrics take no modifier but pinned, and have no canonical
// name; SLOTS is an ordinary umask.
func TestTopdownM(t *testing.T) {
	env := Env{Arch: "amd64"}
	for _, tc := range []struct {
		name   string
		config uint64
		full   string
		err    error
	}{
		{"TOPDOWN_M:RETIRING", 0x8000, "", nil},
		{"TOPDOWN_M:MEMORY_BOUND", 0x8700, "", nil},
		{"TOPDOWN_M:RETIRING:pinned", 0x8000, "", nil},
		{"TOPDOWN_M:RETIRING:u=0", 0x8000, "", nil},
		{"TOPDOWN_M:RETIRING:u", 0, "", ErrAttrVal},
		{"TOPDOWN_M:RETIRING:period=1000", 0, "", ErrAttrVal},
		{"TOPDOWN_M:SLOTS", 0x400, "spr::TOPDOWN_M:SLOTS:u=1:k=1:excl=0:mg=0:mh=1:hw_smpl=0", nil},
		{"TOPDOWN_M", 0, "", ErrUmask},
	} {
		enc, err := Encode(tc.name, env, []string{"spr"})
		switch {
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.err)
		case tc.err == nil && (err != nil || enc.Attr.Type != 4 || enc.Attr.Config != tc.config || enc.FullName != tc.full):
			t.Errorf("%s: type %d config %#x %q, %v; want type 4 config %#x %q", tc.name, enc.Attr.Type, enc.Attr.Config, enc.FullName, err, tc.config, tc.full)
		}
	}
}
