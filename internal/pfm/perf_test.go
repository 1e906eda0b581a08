package pfm

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// miniSKX is a few of Skylake-X's events, as libpfm4 4.13 tables them,
// enough to exercise the perf layer and the Intel encoder without the
// generated tables. The expectations below are what Debian's libpfm4
// 4.13 answered for the same names with LIBPFM_FORCE_PMU=skx.
func miniSKX() *PMU {
	const v4 = 1<<intelModK | 1<<intelModU | 1<<intelModE | 1<<intelModI | 1<<intelModC |
		1<<intelModT | 1<<intelModIntx | 1<<intelModIntxCP
	return &PMU{
		Name: "skx", ID: 427, Order: 100, Family: FamilyIntelX86, Type: PMUTypeCore,
		Flags:        pmuFlagRawUmask | intelPMUECMask,
		SupportedPLM: PLM0 | PLM3,
		Modifiers: []Modifier{
			{Name: "k", Type: ModBool}, {Name: "u", Type: ModBool}, {Name: "e", Type: ModBool},
			{Name: "i", Type: ModBool}, {Name: "c", Type: ModInteger}, {Name: "t", Type: ModBool},
			{Name: "ldlat", Type: ModInteger}, {Name: "intx", Type: ModBool}, {Name: "intxcp", Type: ModBool},
			{Name: "fe_thres", Type: ModInteger},
		},
		Events: []Event{
			{
				Name: "INST_RETIRED", Code: 0xc0, NumGroups: 1, Flags: intelPEBS, ModMask: v4,
				Umasks: []Umask{
					{Name: "ANY_P", Code: 0x000, Flags: intelNCombo | intelDFL},
					{Name: "ALL", Code: 0x100, Equiv: "PREC_DIST", Flags: intelNCombo | intelPEBS},
					{Name: "TOTAL_CYCLES", Code: 0x100 | selInv | 10<<cmaskShift, Equiv: "PREC_DIST:i=1:c=10",
						Flags: intelNCombo | intelPEBS, ModHW: 1<<intelModI | 1<<intelModC},
					{Name: "PREC_DIST", Code: 0x100, Flags: intelNCombo | intelPEBS},
				},
			},
			{
				Name: "MEM_TRANS_RETIRED", Code: 0xcd, NumGroups: 1, Flags: intelPEBS,
				ModMask: v4 | 1<<intelModLDLat,
				Umasks: []Umask{
					{Name: "LOAD_LATENCY", Code: 0x100, Flags: intelNCombo | intelDFL | intelPEBS | intelLDLat},
				},
			},
			{Name: "INSTRUCTIONS_RETIRED", Equiv: "INST_RETIRED:ANY_P", Code: 0xc0, ModMask: v4},
		},
	}
}

func withPMUs(t *testing.T, pmus ...*PMU) {
	t.Helper()
	saved := loadPMU
	t.Cleanup(func() { loadPMU = saved })
	loadPMU = func(name string) (*PMU, error) {
		for _, p := range pmus {
			if p.Name == name {
				return p, nil
			}
		}
		return nil, fmt.Errorf("no PMU %q", name)
	}
}

// exclude spells the exclude bits as the goldens do: u k h i H G, or "-".
func exclude(a *unix.PerfEventAttr) string {
	s := ""
	for _, b := range []struct {
		bit uint64
		c   string
	}{
		{unix.PerfBitExcludeUser, "u"}, {unix.PerfBitExcludeKernel, "k"}, {unix.PerfBitExcludeHv, "h"},
		{unix.PerfBitExcludeIdle, "i"}, {unix.PerfBitExcludeHost, "H"}, {unix.PerfBitExcludeGuest, "G"},
	} {
		if a.Bits&b.bit != 0 {
			s += b.c
		}
	}
	if s == "" {
		return "-"
	}
	return s
}

func TestEncodeMiniSKX(t *testing.T) {
	withPMUs(t, miniSKX())
	const tail = ":e=0:i=0:c=0:t=0:intx=0:intxcp=0"
	for _, tc := range []struct {
		name    string
		config  uint64
		config1 uint64
		excl    string
		full    string
	}{
		{"INST_RETIRED", 0xc0, 0, "G", "skx::INST_RETIRED:ANY_P" + tail + ":u=1:k=1:precise=0:excl=0:mg=0:mh=1"},
		{"INSTRUCTIONS_RETIRED", 0xc0, 0, "G", "skx::INST_RETIRED:ANY_P" + tail + ":u=1:k=1:precise=0:excl=0:mg=0:mh=1"},
		{"skx::INST_RETIRED:TOTAL_CYCLES", 0xa8001c0, 0, "G",
			"skx::INST_RETIRED:PREC_DIST:e=0:i=1:c=10:t=0:intx=0:intxcp=0:u=1:k=1:precise=0:excl=0:mg=0:mh=1"},
		{"INST_RETIRED:TOTAL_CYCLES:c=10:i", 0xa8001c0, 0, "G",
			"skx::INST_RETIRED:PREC_DIST:e=0:i=1:c=10:t=0:intx=0:intxcp=0:u=1:k=1:precise=0:excl=0:mg=0:mh=1"},
		{"inst_retired:any_p:c=2:e:u", 0x20400c0, 0, "kG",
			"skx::INST_RETIRED:ANY_P:e=1:i=0:c=2:t=0:intx=0:intxcp=0:u=1:k=0:precise=0:excl=0:mg=0:mh=1"},
		{"INST_RETIRED:PREC_DIST:precise=3:period=1000", 0x1c0, 0, "G",
			"skx::INST_RETIRED:PREC_DIST" + tail + ":u=1:k=1:period=1000:freq=1000:precise=3:excl=0:mg=0:mh=1"},
		{"INST_RETIRED:ANY_P:freq=100", 0xc0, 0, "G",
			"skx::INST_RETIRED:ANY_P" + tail + ":u=1:k=1:period=100:freq=100:precise=0:excl=0:mg=0:mh=1"},
		{"INST_RETIRED:0x3", 0x3c0, 0, "G", "skx::INST_RETIRED:0x3" + tail + ":u=1:k=1:precise=0:excl=0:mg=0:mh=1"},
		{"INST_RETIRED:ANY_P.u", 0xc0, 0, "kG", "skx::INST_RETIRED:ANY_P" + tail + ":u=1:k=0:precise=0:excl=0:mg=0:mh=1"},
		{"INST_RETIRED:ANY_P:excl:pinned:cpu=3:mh=0", 0xc0, 0, "G",
			"skx::INST_RETIRED:ANY_P" + tail + ":u=1:k=1:precise=0:excl=1:mg=0:mh=1"},
		{"INST_RETIRED:ANY_P:c=0x10", 0x100000c0, 0, "G",
			"skx::INST_RETIRED:ANY_P:e=0:i=0:c=16:t=0:intx=0:intxcp=0:u=1:k=1:precise=0:excl=0:mg=0:mh=1"},
		{"INST_RETIRED:ANY_P:t=y", 0x2000c0, 0, "G",
			"skx::INST_RETIRED:ANY_P:e=0:i=0:c=0:t=1:intx=0:intxcp=0:u=1:k=1:precise=0:excl=0:mg=0:mh=1"},
		{"INST_RETIRED:ANY_P:mg", 0xc0, 0, "H", "skx::INST_RETIRED:ANY_P" + tail + ":u=1:k=1:precise=0:excl=0:mg=1:mh=0"},
		{"MEM_TRANS_RETIRED:LOAD_LATENCY", 0x1cd, 3, "G",
			"skx::MEM_TRANS_RETIRED:LOAD_LATENCY:e=0:i=0:c=0:t=0:ldlat=3:intx=0:intxcp=0:u=1:k=1:precise=0:excl=0:mg=0:mh=1"},
	} {
		enc, err := Encode(tc.name, Env{}, []string{"skx"})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		a := &enc.Attr
		if a.Type != unix.PERF_TYPE_RAW || a.Config != tc.config || a.Ext1 != tc.config1 || exclude(a) != tc.excl || enc.FullName != tc.full {
			t.Errorf("%s:\n got type %d config %#x config1 %#x exclude %s %s\nwant type 4 config %#x config1 %#x exclude %s %s",
				tc.name, a.Type, a.Config, a.Ext1, exclude(a), enc.FullName, tc.config, tc.config1, tc.excl, tc.full)
		}
	}
	if enc, _ := Encode("INST_RETIRED:ANY_P:excl:pinned:cpu=3", Env{}, []string{"skx"}); enc.CPU != 3 ||
		enc.Attr.Bits&unix.PerfBitPinned == 0 || enc.Attr.Bits&unix.PerfBitExclusive == 0 {
		t.Errorf("cpu=3:pinned:excl gave CPU %d, bits %#x", enc.CPU, enc.Attr.Bits)
	}
}

func TestEncodeMiniSKXErrors(t *testing.T) {
	withPMUs(t, miniSKX())
	for _, tc := range []struct {
		name string
		want error
	}{
		{"INST_RETIRED:TOTAL_CYCLES:i=0", ErrAttrSet},
		{"INST_RETIRED:ANY_P:ALL", ErrFeatComb},
		{"INST_RETIRED:ANY_P:freq=100:period=5", ErrAttrVal},
		{"INST_RETIRED:ANY_P:e", ErrAttr}, // edge without a counter mask
		{"INST_RETIRED:ANY_P:c=256", ErrAttrVal},
		{"INST_RETIRED:ANY_P:u:u=0", ErrAttrSet},
		{"INST_RETIRED:", ErrAttr},
		{"INST_RETIRED:ANY_P:precise=4", ErrAttrVal},
		{"INST_RETIRED:ANY_P:h", ErrAttr},
		{"INST_RETIRED:ANY_P:hw_smpl", ErrAttr},
		{"INST_RETIRED:ANY_P:ldlat=4", ErrAttr},
		{"INST_RETIRED:ANY_P:c=-1", ErrAttrVal},
		{"INST_RETIRED:ANY_P:t=2", ErrAttrVal},
		{"skx::cycles", ErrNotFound},
		{"bdw::INST_RETIRED", ErrNotFound}, // not active
		{"INST_RETIRED,INST_RETIRED", ErrInvalid},
	} {
		_, err := Encode(tc.name, Env{}, []string{"skx"})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
			continue
		}
		var ee *EncodeError
		if !errors.As(err, &ee) || ee.Name != tc.name {
			t.Errorf("%s: error %v does not name the event", tc.name, err)
		}
	}
}

func TestStrtoull(t *testing.T) {
	for _, tc := range []struct {
		in   string
		v    uint64
		used int
	}{
		{"10", 10, 2}, {"0x1f", 31, 4}, {"010", 8, 3}, {"0", 0, 1}, {"0x", 0, 1},
		{"-1", ^uint64(0), 2}, {" +7", 7, 3}, {"99999999999999999999", ^uint64(0), 20}, {"z", 0, 0}, {"08", 0, 1},
	} {
		if v, n := strtoull(tc.in); v != tc.v || n != tc.used {
			t.Errorf("strtoull(%q) = %d, %d; want %d, %d", tc.in, v, n, tc.v, tc.used)
		}
	}
}
