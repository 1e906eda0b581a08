package pfm

import (
	"errors"
	"strings"
	"testing"
)

// armPowerEdges are names that reach the corners of the ARM and POWER
// encoders and the perf layer over them (event aliases, the privilege
// modifiers libpfm4 drops, h on a PMU that filters the hypervisor, the
// PowerBus encoder reading perf modifiers as its own, kernel PMUs
// missing), with what Debian's libpfm4 4.13 (arm64 and ppc64el builds,
// under qemu-user) answered for them with that PMU forced
// (LIBPFM_FORCE_PMU=active, LIBPFM_ENCODE_INACTIVE=1) and no sysfs PMUs.
var armPowerEdges = []struct {
	arch, active, lines string
}{
	{"arm64", "arm_n1", `arm_n1::MEM_READ_ACCESS	OK	4	0x66	0	0	hG	arm_n1	arm_n1::MEM_ACCESS_RD:u=1:k=1:h=0:excl=0:mg=0:mh=1
arm_n1::MEM_READ_ACCESS:u	OK	4	0x66	0	0	khG	arm_n1	arm_n1::MEM_ACCESS_RD:u=1:k=0:h=0:excl=0:mg=0:mh=1
mem_read_access:k=0	OK	4	0x66	0	0	ukhG	arm_n1	arm_n1::MEM_ACCESS_RD:u=0:k=0:h=0:excl=0:mg=0:mh=1
BR_RET_SPEC.h	OK	4	0x79	0	0	ukG	arm_n1	arm_n1::BR_RETURN_SPEC:u=0:k=0:h=1:excl=0:mg=0:mh=1
CPU_CYCLES:hv	ERR	invalid event attribute
CPU_CYCLES:h	OK	4	0x11	0	0	ukG	arm_n1	arm_n1::CPU_CYCLES:u=0:k=0:h=1:excl=0:mg=0:mh=1
CPU_CYCLES:h=0:k	OK	4	0x11	0	0	uhG	arm_n1	arm_n1::CPU_CYCLES:u=0:k=1:h=0:excl=0:mg=0:mh=1
CPU_CYCLES:precise=1	ERR	invalid event attribute
CPU_CYCLES:hw_smpl	ERR	invalid event attribute
CPU_CYCLES:0x1	ERR	invalid event attribute
CPU_CYCLES:period=1000:freq=10	ERR	invalid event attribute value
CPU_CYCLES:freq=10	OK	4	0x11	0	0	hG	arm_n1	arm_n1::CPU_CYCLES:u=1:k=1:h=0:period=10:freq=10:excl=0:mg=0:mh=1
CPU_CYCLES:mg=0	OK	4	0x11	0	0	hH	arm_n1	arm_n1::CPU_CYCLES:u=1:k=1:h=0:excl=0:mg=1:mh=0
CPU_CYCLES:mh=0	OK	4	0x11	0	0	hG	arm_n1	arm_n1::CPU_CYCLES:u=1:k=1:h=0:excl=0:mg=0:mh=1
CPU_CYCLES:cpu=3	OK	4	0x11	0	0	hG	arm_n1	arm_n1::CPU_CYCLES:u=1:k=1:h=0:excl=0:mg=0:mh=1
CPU_CYCLES:cpu=2147483647	ERR	invalid event attribute value
CPU_CYCLES:pinned	OK	4	0x11	0	0	hG	arm_n1	arm_n1::CPU_CYCLES:u=1:k=1:h=0:excl=0:mg=0:mh=1
CPU_CYCLES:	ERR	invalid event attribute
CPU_CYCLES.u	OK	4	0x11	0	0	khG	arm_n1	arm_n1::CPU_CYCLES:u=1:k=0:h=0:excl=0:mg=0:mh=1
arm_n1::cpu_cycles	OK	4	0x11	0	0	hG	arm_n1	arm_n1::CPU_CYCLES:u=1:k=1:h=0:excl=0:mg=0:mh=1
ARM_N1::CPU_CYCLES	OK	4	0x11	0	0	hG	arm_n1	arm_n1::CPU_CYCLES:u=1:k=1:h=0:excl=0:mg=0:mh=1
arm_n1::CPU_CYCLES:u=0:k=0:h=0	OK	4	0x11	0	0	ukhG	arm_n1	arm_n1::CPU_CYCLES:u=0:k=0:h=0:excl=0:mg=0:mh=1
CPU_CYCLES,INST_RETIRED	ERR	invalid parameters
arm_n1::	ERR	event not found
arm_a64fx::L2D_CACHE_SWAP_LOCAL	OK	4	0x396	0	0	hG	arm_a64fx	arm_a64fx::L2D_CACHE_SWAP_LOCAL:u=1:k=1:h=0:excl=0:mg=0:mh=1
tx2_dmc0::UNC_DMC_READS	ERR	not supported
hisi_sccl1_ddrc0::flux_rd:k=0	ERR	not supported`},
	{"ppc64le", "power_torrent", `power_torrent::PM_PBUS_MCD0_PROBE_ISSUED:u	OK	4	0x101200000	0	0	-	power_torrent	power_torrent:::u=1:k=1:h=1:excl=0:mg=1:mh=1
power_torrent::PM_PBUS_MCD0_PROBE_ISSUED:u=0	OK	4	0x1200000	0	0	-	power_torrent	power_torrent:::u=1:k=1:h=1:excl=0:mg=1:mh=1
power_torrent::PM_PBUS_MCD0_PROBE_ISSUED:u:u	OK	4	0x101200000	0	0	-	power_torrent	power_torrent:::u=1:k=1:h=1:excl=0:mg=1:mh=1
power_torrent::PM_PBUS_MCD0_PROBE_ISSUED:k	ERR	invalid event attribute
power_torrent::PM_PBUS_MCD0_PROBE_ISSUED:period=1000	ERR	invalid event attribute
power_torrent::PM_PBUS_MCD0_RCMD_HIT:u:k	ERR	invalid event attribute
power_torrent::PM_PBUS_UTIL_PB_APM_NM_HI_CNT	OK	4	0x1300000	0	0	-	power_torrent	power_torrent:::u=1:k=1:h=1:excl=0:mg=1:mh=1
power_torrent::PM_PBUS_UTIL_PB_APM_NM_HI_CNT:u	OK	4	0x101300000	0	0	-	power_torrent	power_torrent:::u=1:k=1:h=1:excl=0:mg=1:mh=1
power_torrent::PM_PBUS_UTIL_PB_APM_NM_HI_CNT:k	OK	4	0x401300000	0	0	-	power_torrent	power_torrent:::u=1:k=1:h=1:excl=0:mg=1:mh=1
power_torrent::PM_PBUS_UTIL_PB_APM_NM_HI_CNT:u:k	OK	4	0x501300000	0	0	-	power_torrent	power_torrent:::u=1:k=1:h=1:excl=0:mg=1:mh=1
power_torrent::PM_PBUS_UTIL_PB_APM_NM_HI_CNT:k=0:u	OK	4	0x101300000	0	0	-	power_torrent	power_torrent:::u=1:k=1:h=1:excl=0:mg=1:mh=1
power_torrent::PM_PBUS_UTIL_PB_APM_NM_HI_CNT:h	OK	4	0x1300000	0	0	-	power_torrent	power_torrent:::u=1:k=1:h=1:excl=0:mg=1:mh=1
power_torrent::PM_PBUS_UTIL_PB_APM_NM_HI_CNT:period=3	OK	4	0x1300000	0	0	-	power_torrent	power_torrent:::u=1:k=1:h=1:period=3:freq=3:excl=0:mg=1:mh=1
power_torrent::PM_PBUS_UTIL_PB_APM_NM_HI_CNT:u:k:h:period=7:excl	OK	4	0x501300000	0	0	-	power_torrent	power_torrent:::u=1:k=1:h=1:period=7:freq=7:excl=1:mg=1:mh=1
power_torrent::PM_PBUS_UTIL_PB_APM_NM_LO_CNT:u:k	OK	4	0x501300100	0	0	-	power_torrent	power_torrent:::u=1:k=1:h=1:excl=0:mg=1:mh=1
power_torrent::PM_PBUS_UTIL_PB_APM_LM_LO_CNT:k:u	OK	4	0x501300300	0	0	-	power_torrent	power_torrent:::u=1:k=1:h=1:excl=0:mg=1:mh=1
power_torrent::PM_PBUS_UTIL_PB_APM_LM_LO_CNT:type=1	ERR	invalid event attribute
power_torrent::PM_PBUS_W_DISABLED	OK	4	0x1000000	0	0	-	power_torrent	power_torrent:::u=1:k=1:h=1:excl=0:mg=1:mh=1
PM_PBUS_UTIL_PB_APM_NM_HI_CNT:u	OK	4	0x101300000	0	0	-	power_torrent	power_torrent:::u=1:k=1:h=1:excl=0:mg=1:mh=1`},
	{"ppc64le", "power9", `powerpc_nest_mcs_read::MCS_00	ERR	not supported
power4::PM_CYC:u=0	OK	4	0x7	0	0	-	power4	power4::PM_CYC:u=1:k=1:h=1:excl=0:mg=1:mh=1
power4::PM_CYC:k=0:h=0:mh=0	OK	4	0x7	0	0	-	power4	power4::PM_CYC:u=1:k=1:h=1:excl=0:mg=1:mh=1
power9::PM_RUN_CYC:h	OK	4	0x200f4	0	0	ukG	power9	power9::PM_RUN_CYC:u=0:k=0:h=1:excl=0:mg=0:mh=1
power9::PM_RUN_CYC:u=0:mg	OK	4	0x200f4	0	0	ukhH	power9	power9::PM_RUN_CYC:u=0:k=0:h=0:excl=0:mg=1:mh=0
power9::pm_run_cyc:precise=1	ERR	invalid event attribute`},
}

func TestEncodeARMPowerEdges(t *testing.T) {
	for _, b := range armPowerEdges {
		env := Env{Arch: b.arch, EncodeInactive: true}
		for _, line := range strings.Split(b.lines, "\n") {
			want := strings.Split(line, "\t")
			if d := goldenDiff(want[0], want, env, []string{b.active}); d != "" {
				t.Errorf("%s %s: %s", b.arch, want[0], d)
			}
		}
	}
}

// TestEncodeARMPowerKernelPMUs: an uncore PMU counts on the kernel PMU of
// its perf name, whose type sysfs gives; without it the name cannot be
// encoded, and the error says which kernel PMU is missing.
func TestEncodeARMPowerKernelPMUs(t *testing.T) {
	types := map[string]uint32{"uncore_dmc_0": 23, "hisi_sccl3_hha1": 31, "Nest_MCS_Read_BW": 40}
	perfType := func(name string) (uint32, error) {
		if t, ok := types[name]; ok {
			return t, nil
		}
		return 0, errors.New("no such kernel PMU")
	}
	for _, tc := range []struct {
		arch, name string
		typ        uint32
		config     uint64
	}{
		{"arm64", "tx2_dmc0::UNC_DMC_READS:u=0", 23, 0xf},
		{"arm64", "hisi_sccl3_hha1::rx_ops_num", 31, 0},
		{"ppc64le", "powerpc_nest_mcs_read::MCS_01", 40, 0x120},
	} {
		env := Env{Arch: tc.arch, EncodeInactive: true, PerfType: perfType}
		enc, err := Encode(tc.name, env, nil)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if enc.Attr.Type != tc.typ || enc.Attr.Config != tc.config || exclude(&enc.Attr) != "-" {
			t.Errorf("%s: type %d config %#x exclude %s, want %d %#x -", tc.name, enc.Attr.Type, enc.Attr.Config,
				exclude(&enc.Attr), tc.typ, tc.config)
		}
	}
	for _, tc := range []struct {
		arch, name, want string
	}{
		{"arm64", "tx2_llc1::UNC_LLC_READ", `perf event "tx2_llc1::UNC_LLC_READ": kernel PMU uncore_l3c_1: no such kernel PMU: not supported`},
		{"arm64", "hisi_sccl7_ddrc3::flux_rd:u", `perf event "hisi_sccl7_ddrc3::flux_rd:u": kernel PMU hisi_sccl7_ddrc3: no such kernel PMU: not supported`},
		{"ppc64le", "powerpc_nest_mcs_write::MCS_00", `perf event "powerpc_nest_mcs_write::MCS_00": kernel PMU Nest_MCS_Write_BW: no such kernel PMU: not supported`},
		// Attributes are checked first, as libpfm4 parses them first.
		{"arm64", "tx2_llc1::UNC_LLC_READ:hv", `perf event "tx2_llc1::UNC_LLC_READ:hv": "hv": no such umask or modifier for UNC_LLC_READ: invalid event attribute`},
	} {
		env := Env{Arch: tc.arch, EncodeInactive: true, PerfType: perfType}
		_, err := Encode(tc.name, env, nil)
		if err == nil || err.Error() != tc.want || !errors.Is(err, ErrNotSupported) && !errors.Is(err, ErrAttr) {
			t.Errorf("%s: %v\nwant %s", tc.name, err, tc.want)
		}
	}
}

// TestEncodeTorrentErrors: the PowerBus encoder's errors name the
// attribute it read as its own, and the event.
func TestEncodeTorrentErrors(t *testing.T) {
	env := Env{Arch: "ppc64le"}
	for name, want := range map[string]string{
		"PM_PBUS_MCD0_PROBE_ISSUED:k":  `perf event "PM_PBUS_MCD0_PROBE_ISSUED:k": k: the PowerBus MCD event PM_PBUS_MCD0_PROBE_ISSUED takes type alone: invalid event attribute`,
		"PM_PBUS_LL0_IN_IDLE:u":        `perf event "PM_PBUS_LL0_IN_IDLE:u": u: the PowerBus event PM_PBUS_LL0_IN_IDLE takes no attribute: invalid event attribute`,
		"PM_PBUS_W_DISABLED:period=10": `perf event "PM_PBUS_W_DISABLED:period=10": period: the PowerBus event PM_PBUS_W_DISABLED takes no attribute: invalid event attribute`,
	} {
		_, err := Encode(name, env, []string{"power_torrent"})
		if err == nil || err.Error() != want || !errors.Is(err, ErrAttr) {
			t.Errorf("%s: %v\nwant %s", name, err, want)
		}
	}
}
