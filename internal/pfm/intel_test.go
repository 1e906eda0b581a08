package pfm

import (
	"errors"
	"strings"
	"testing"
)

// intelEdges are names that reach the corners of the Intel encoder
// (frontend thresholds, load latency, OCR and offcore raw umask widths,
// EXCL_GRP_BUT_0 and GRP_DFL_NONE on Goldmont, hw_smpl on Ice Lake,
// umask aliases spelled with '.', the perf layer's limits, a canonical
// name cut at 255 bytes, and a canonical name parsed again: its
// "mg=0" counts the guest, for libpfm4 looks only at mg's presence), with what
// Debian's libpfm4 4.13 answered for them. Where that libpfm4 could not
// name the PMU of an inactive one, the pmu column holds "?".
const intelEdges = `skl::FRONTEND_RETIRED:IDQ_4_BUBBLES	OK	4	0x1c6	0x400106	0	G	skl	skl::FRONTEND_RETIRED:IDQ_4_BUBBLES:e=0:i=0:c=0:intx=0:intxcp=0:fe_thres=1:u=1:k=1:precise=0:excl=0:mg=0:mh=1
skl::FRONTEND_RETIRED:IDQ_4_BUBBLES:fe_thres=20	OK	4	0x1c6	0x401406	0	G	skl	skl::FRONTEND_RETIRED:IDQ_4_BUBBLES:e=0:i=0:c=0:intx=0:intxcp=0:fe_thres=20:u=1:k=1:precise=0:excl=0:mg=0:mh=1
skl::FRONTEND_RETIRED:LATENCY_GE_16	ERR	invalid event attribute
skl::FRONTEND_RETIRED:LATENCY_GE_16:fe_thres=16	ERR	invalid event attribute
skl::FRONTEND_RETIRED:LATENCY_GE_16:fe_thres=17	ERR	invalid event attribute
skl::FRONTEND_RETIRED:DSB_MISS:fe_thres=5	OK	4	0x1c6	0x11	0	G	skl	skl::FRONTEND_RETIRED:DSB_MISS:e=0:i=0:c=0:intx=0:intxcp=0:fe_thres=5:u=1:k=1:precise=0:excl=0:mg=0:mh=1
skl::MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=64	OK	4	0x1cd	0x40	0	G	skl	skl::MEM_TRANS_RETIRED:LOAD_LATENCY:e=0:i=0:c=0:t=0:ldlat=64:intx=0:intxcp=0:u=1:k=1:precise=0:excl=0:mg=0:mh=1
skl::MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=0	ERR	invalid event attribute value
skl::MEM_TRANS_RETIRED:ldlat=64	ERR	invalid event attribute
icl::TOPDOWN:SLOTS_P	OK	4	0x1a4	0	0	G	?	icl::TOPDOWN:SLOTS_P:e=0:i=0:c=0:intx=0:intxcp=0:u=1:k=1:excl=0:mg=0:mh=1:hw_smpl=0
icl::TOPDOWN:SLOTS_P:SLOTS	ERR	invalid combination of model specific features
icl::INST_RETIRED:ANY:hw_smpl	ERR	invalid event attribute
icl::INST_RETIRED:PREC_DIST:precise=3	OK	4	0x100	0	0	G	?	icl::INST_RETIRED:PREC_DIST:e=0:i=0:c=0:intx=0:intxcp=0:u=1:k=1:precise=3:excl=0:mg=0:mh=1
icl::UOPS_DISPATCHED:PORT_0:hw_smpl=1	OK	4	0x1a1	0	0	G	?	icl::UOPS_DISPATCHED:PORT_0:e=0:i=0:c=0:intx=0:intxcp=0:u=1:k=1:excl=0:mg=0:mh=1:hw_smpl=1
icl::UOPS_DISPATCHED:PORT_0:precise=1	ERR	invalid event attribute
spr::OCR:DEMAND_DATA_RD_ANY_RESPONSE	OK	4	0x12a	0x10001	0	G	?	spr::OCR:DEMAND_DATA_RD_ANY_RESPONSE:e=0:i=0:c=0:intx=0:intxcp=0:u=1:k=1:excl=0:mg=0:mh=1:hw_smpl=0
spr::OCR:0x10001	OK	4	0x12a	0x10001	0	G	?	spr::OCR:0x10001:e=0:i=0:c=0:intx=0:intxcp=0:u=1:k=1:excl=0:mg=0:mh=1:hw_smpl=0
glm::OFFCORE_RESPONSE_0:ANY_REQUEST:ANY_RESPONSE	OK	4	0x1b7	0x18000	0	G	?	glm::OFFCORE_RESPONSE_0:ANY_REQUEST:ANY_RESPONSE:e=0:i=0:c=0:u=1:k=1:excl=0:mg=0:mh=1
glm::OFFCORE_RESPONSE_0:ANY_REQUEST:OUTSTANDING	OK	4	0x1b7	0x4000008000	0	G	?	glm::OFFCORE_RESPONSE_0:ANY_REQUEST:OUTSTANDING:e=0:i=0:c=0:u=1:k=1:excl=0:mg=0:mh=1
glm::OFFCORE_RESPONSE_0:ANY_REQUEST:OUTSTANDING:ANY_RESPONSE	ERR	invalid combination of model specific features
glm::OFFCORE_RESPONSE_0:OUTSTANDING	OK	4	0x1b7	0x4000008000	0	G	?	glm::OFFCORE_RESPONSE_0:ANY_REQUEST:OUTSTANDING:e=0:i=0:c=0:u=1:k=1:excl=0:mg=0:mh=1
snb::OFFCORE_RESPONSE_0:0x3fffffffff	OK	4	0x1b7	0x3fffffffff	0	G	snb	snb::OFFCORE_RESPONSE_0:0xffffffff:e=0:i=0:c=0:t=0:u=1:k=1:excl=0:mg=0:mh=1
snb::OFFCORE_RESPONSE_0:0x4000000000	ERR	invalid event attribute
wsm::OFFCORE_RESPONSE_0:0xffff	OK	4	0x1b7	0xffff	0	G	wsm	wsm::OFFCORE_RESPONSE_0:0xffff:e=0:i=0:c=0:t=0:u=1:k=1:excl=0:mg=0:mh=1
wsm::OFFCORE_RESPONSE_0:0x1ffff	ERR	invalid event attribute
snb::INST_RETIRED:0x100	ERR	invalid event attribute
skx::INST_RETIRED:ANY_P:ANY_P:ANY_P	ERR	invalid combination of model specific features
skx::INST_RETIRED:PREC_DIST.i=1.c=10.TOTAL_CYCLES	OK	4	0xa8001c0	0	0	G	skx	skx::INST_RETIRED:PREC_DIST:e=0:i=1:c=10:t=0:intx=0:intxcp=0:u=1:k=1:precise=0:excl=0:mg=0:mh=1
skx::CYCLE_ACTIVITY:STALLS_TOTAL	OK	4	0x40004a3	0	0	G	skx	skx::CYCLE_ACTIVITY:STALLS_TOTAL:e=0:i=0:c=4:t=0:intx=0:intxcp=0:u=1:k=1:excl=0:mg=0:mh=1
skx::CYCLE_ACTIVITY:STALLS_TOTAL:c=4	OK	4	0x40004a3	0	0	G	skx	skx::CYCLE_ACTIVITY:STALLS_TOTAL:e=0:i=0:c=4:t=0:intx=0:intxcp=0:u=1:k=1:excl=0:mg=0:mh=1
skx::UOPS_ISSUED:ANY:c=1:i:e	OK	4	0x184010e	0	0	G	skx	skx::UOPS_ISSUED:ANY:e=1:i=1:c=1:t=0:intx=0:intxcp=0:u=1:k=1:excl=0:mg=0:mh=1
skx::INST_RETIRED:period=100:freq=10	ERR	invalid event attribute value
skx::INST_RETIRED:k=0:u=0	OK	4	0xc0	0	0	ukG	skx	skx::INST_RETIRED:ANY_P:e=0:i=0:c=0:t=0:intx=0:intxcp=0:u=0:k=0:precise=0:excl=0:mg=0:mh=1
skx::INST_RETIRED:u:k:mg:mh	OK	4	0xc0	0	0	-	skx	skx::INST_RETIRED:ANY_P:e=0:i=0:c=0:t=0:intx=0:intxcp=0:u=1:k=1:precise=0:excl=0:mg=1:mh=1
skx::INST_RETIRED:cpu=2147483647	ERR	invalid event attribute value
skx::INST_RETIRED:cpu=2147483646	OK	4	0xc0	0	0	G	skx	skx::INST_RETIRED:ANY_P:e=0:i=0:c=0:t=0:intx=0:intxcp=0:u=1:k=1:precise=0:excl=0:mg=0:mh=1
skx::INST_RETIRED:c=0777	ERR	invalid event attribute value
skx::INST_RETIRED:u=yes	ERR	invalid event attribute value
SKX::inst_retired:ANY_P	OK	4	0xc0	0	0	G	skx	skx::INST_RETIRED:ANY_P:e=0:i=0:c=0:t=0:intx=0:intxcp=0:u=1:k=1:precise=0:excl=0:mg=0:mh=1
skx::OFFCORE_RESPONSE_0:DMND_DATA_RD:DMND_RFO:DMND_CODE_RD:PF_L2_DATA_RD:PF_L2_RFO:PF_L3_DATA_RD:PF_L3_RFO:PF_L1D_AND_SW:OTHER:L3_HITM:L3_HITE:L3_HITS:L3_HITF:SNP_NONE:SNP_NOT_NEEDED:SNP_MISS:SNP_HIT_NO_FWD:SNP_HIT_WITH_FWD:SNP_HITM:SNP_NON_DRAM	OK	4	0x1b7	0x3f803c85b7	0	G	skx	skx::OFFCORE_RESPONSE_0:DMND_DATA_RD:DMND_RFO:DMND_CODE_RD:PF_L2_DATA_RD:PF_L2_RFO:PF_L3_DATA_RD:PF_L3_RFO:PF_L1D_AND_SW:OTHER:L3_HITM:L3_HITE:L3_HITS:L3_HITF:SNP_NONE:SNP_NOT_NEEDED:SNP_MISS:SNP_HIT_NO_FWD:SNP_HIT_WITH_FWD:SNP_HITM:SNP_NON_DRAM:e=0:i=0:c=0:t=
skx::INST_RETIRED:ANY_P:e=0:i=0:c=0:t=0:intx=0:intxcp=0:u=1:k=1:precise=0:excl=0:mg=0:mh=1	OK	4	0xc0	0	0	-	skx	skx::INST_RETIRED:ANY_P:e=0:i=0:c=0:t=0:intx=0:intxcp=0:u=1:k=1:precise=0:excl=0:mg=1:mh=1
`

func TestEncodeIntelEdges(t *testing.T) {
	env := Env{EncodeInactive: true}
	for _, line := range strings.Split(strings.TrimSpace(intelEdges), "\n") {
		want := strings.Split(line, "\t")
		if len(want) > 7 && want[7] == "?" {
			pmu, _, _ := strings.Cut(want[0], "::")
			want[7] = strings.ToLower(pmu)
		}
		if d := goldenDiff(want[0], want, env, []string{"skx"}); d != "" {
			t.Errorf("%s: %s", want[0], d)
		}
	}
}

func TestEncodeTooManyUmasks(t *testing.T) {
	p, err := Load("skx")
	if err != nil {
		t.Fatal(err)
	}
	name := "OFFCORE_RESPONSE_0"
	for _, ev := range p.Events {
		if ev.Name == name {
			for _, u := range ev.Umasks {
				name += ":" + u.Name
			}
		}
	}
	// libpfm4 4.13 crashes on this one.
	if _, err := Encode(name, Env{}, []string{"skx"}); !errors.Is(err, ErrTooMany) {
		t.Errorf("every umask of OFFCORE_RESPONSE_0: got %v, want %v", err, ErrTooMany)
	}
}

// TestIX86ArchCPUID checks ix86arch's table as CPUID leaf 0xa builds it
// (libpfm4 can only be asked with the forced default, version 3 and
// every event, which the goldens cover).
func TestIX86ArchCPUID(t *testing.T) {
	for _, tc := range []struct {
		arch IntelArchPerfmon
		name string
		full string // "" for an error
		err  error
	}{
		{IntelArchPerfmon{Version: 4}, "ix86arch::LLC_MISSES",
			"ix86arch::LLC_MISSES:e=0:i=0:c=0:t=0:intx=0:intxcp=0:u=1:k=1:excl=0:mg=0:mh=1", nil},
		// Version 5 has no AnyThread, but intx and intxcp (4.13 gave it
		// version 2's modifiers only).
		{IntelArchPerfmon{Version: 5}, "ix86arch::LLC_MISSES",
			"ix86arch::LLC_MISSES:e=0:i=0:c=0:intx=0:intxcp=0:u=1:k=1:excl=0:mg=0:mh=1", nil},
		{IntelArchPerfmon{Version: 2}, "ix86arch::LLC_MISSES",
			"ix86arch::LLC_MISSES:e=0:i=0:c=0:u=1:k=1:excl=0:mg=0:mh=1", nil},
		{IntelArchPerfmon{Version: 5}, "ix86arch::LLC_MISSES:t", "", ErrAttr},
		{IntelArchPerfmon{Version: 2, Unavailable: 1 << 2}, "ix86arch::UNHALTED_REFERENCE_CYCLES", "", ErrNotFound},
		{IntelArchPerfmon{Version: 2, Unavailable: 1 << 2}, "ix86arch::LLC_REFERENCES",
			"ix86arch::LLC_REFERENCES:e=0:i=0:c=0:u=1:k=1:excl=0:mg=0:mh=1", nil},
	} {
		arch := tc.arch
		enc, err := Encode(tc.name, Env{IntelArch: &arch}, []string{"ix86arch"})
		switch {
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("%s with %+v: got %v, want %v", tc.name, arch, err, tc.err)
		case tc.err == nil && (err != nil || enc.FullName != tc.full):
			t.Errorf("%s with %+v: got %q, %v; want %q", tc.name, arch, enc.FullName, err, tc.full)
		}
	}
}

// TestEncodeErrorText checks that an error names the event and what in it
// libpfm4 refuses.
func TestEncodeErrorText(t *testing.T) {
	for name, want := range map[string]string{
		"skx::INST_RETIRED:ANY_P:c=256": `perf event "skx::INST_RETIRED:ANY_P:c=256": c=256: the counter mask is 0 to 255: invalid event attribute value`,
		"skx::INST_RETIRED:FOO":         `perf event "skx::INST_RETIRED:FOO": "FOO": no such umask or modifier for INST_RETIRED: invalid event attribute`,
		"skx::NO_SUCH_EVENT":            `perf event "skx::NO_SUCH_EVENT": event not found`,
	} {
		_, err := Encode(name, Env{}, []string{"skx"})
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %s", name, err, want)
		}
	}
}

// TestEncodeLookupOrder checks that an unprefixed name goes to the first
// active PMU in libpfm4's order that has it, whatever order the caller
// lists them in (ix86arch comes last among the x86 PMUs), and that a
// prefixed one needs its PMU active unless EncodeInactive says otherwise.
func TestEncodeLookupOrder(t *testing.T) {
	active := []string{"ix86arch", "skx"}
	for name, pmu := range map[string]string{"UNHALTED_CORE_CYCLES": "skx", "LLC_MISSES": "ix86arch"} {
		enc, err := Encode(name, Env{}, active)
		if err != nil || enc.PMU.Name != pmu {
			t.Errorf("%s: got %v, %v; want PMU %s", name, enc.PMU, err, pmu)
		}
	}
	if _, err := Encode("icl::INST_RETIRED", Env{}, active); !errors.Is(err, ErrNotFound) {
		t.Errorf("icl::INST_RETIRED with icl inactive: got %v, want %v", err, ErrNotFound)
	}
	if enc, err := Encode("ICL::INST_RETIRED:ANY_P", Env{EncodeInactive: true}, active); err != nil || enc.PMU.Name != "icl" {
		t.Errorf("ICL::INST_RETIRED:ANY_P with EncodeInactive: got %v, %v", enc.PMU, err)
	}
}
