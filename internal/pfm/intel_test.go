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
