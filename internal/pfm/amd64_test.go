package pfm

import "testing"

func TestAMD64(t *testing.T) {
	checkLibpfm4(t, fakeSysfs, `
amd64_fam17h_zen2::RETIRED_INSTRUCTIONS OK 4 0xc0 0 0 hG amd64_fam17h_zen2 amd64_fam17h_zen2::RETIRED_INSTRUCTIONS:e=0:i=0:c=0:g=0:u=1:k=1:excl=0:mg=0:mh=1
amd64_fam17h_zen2::RETIRED_INSTRUCTIONS:0x3 OK 4 0x3c0 0 0 hG amd64_fam17h_zen2 amd64_fam17h_zen2::RETIRED_INSTRUCTIONS:0x3:e=0:i=0:c=0:g=0:u=1:k=1:excl=0:mg=0:mh=1
amd64_fam17h_zen2::RETIRED_INSTRUCTIONS:h ERR invalid event attribute
amd64_fam17h_zen2::L1_ITLB_MISS_L2_ITLB_HIT:c=2 OK 4 0x2000084 0 0 hG amd64_fam17h_zen2 amd64_fam17h_zen2::L1_ITLB_MISS_L2_ITLB_HIT:e=0:i=0:c=2:g=0:u=1:k=1:excl=0:mg=0:mh=1
amd64_fam19h_zen3::RETIRED_SSE_AVX_FLOPS:c=16 OK 4 0x10000f03 0 0 hG amd64_fam19h_zen3 amd64_fam19h_zen3::RETIRED_SSE_AVX_FLOPS:ANY:e=0:i=0:c=16:g=0:u=1:k=1:h=0:excl=0:mg=0:mh=1
amd64_fam19h_zen4::P0_FREQ_CYCLES_NOT_IN_HALT OK 4 0x100000120 0 0 hG amd64_fam19h_zen4 amd64_fam19h_zen4::P0_FREQ_CYCLES_NOT_IN_HALT:P0_FREQ_CYCLES:e=0:i=0:c=0:g=0:u=1:k=1:h=0:excl=0:mg=0:mh=1
amd64_fam10h_barcelona::RETIRED_INSTRUCTIONS:h OK 4 0xc0 0 0 ukG amd64_fam10h_barcelona amd64_fam10h_barcelona::RETIRED_INSTRUCTIONS:e=0:i=0:c=0:g=0:u=0:k=0:h=1:excl=0:mg=0:mh=1
amd64_fam19h_zen3_l3::UNC_L3_REQUESTS OK 100 0xff04 0 0 - amd64_fam19h_zen3_l3 amd64_fam19h_zen3_l3::UNC_L3_REQUESTS:ALL:u=1:k=1:excl=0:mg=1:mh=1
amd64_fam15h_nb::DRAM_ACCESSES OK 101 0x3fe0 0 0 - amd64_fam15h_nb amd64_fam15h_nb::DRAM_ACCESSES:ALL
amd64_fam15h_nb::DRAM_ACCESSES:DCT0_PAGE_HIT OK 101 0x1e0 0 0 - amd64_fam15h_nb amd64_fam15h_nb::DRAM_ACCESSES:DCT0_PAGE_HIT
amd64_rapl::RAPL_ENERGY_PKG OK 102 0x2 0 0 - amd64_rapl amd64_rapl::RAPL_ENERGY_PKG:u=1:k=1:excl=0:mg=1:mh=1
amd64_rapl::RAPL_ENERGY_PKG:u OK 102 0x2 0 0 - amd64_rapl amd64_rapl::RAPL_ENERGY_PKG:u=1:k=1:excl=0:mg=1:mh=1
`)
	// The AMD L3, northbridge and RAPL PMUs need their kernel PMU; the core
	// PMU does not.
	checkLibpfm4(t, Env{}, `
amd64_fam19h_zen3_l3::UNC_L3_REQUESTS ERR not supported
amd64_rapl::RAPL_ENERGY_PKG ERR not supported
amd64_fam17h_zen2::RETIRED_INSTRUCTIONS OK 4 0xc0 0 0 hG amd64_fam17h_zen2 amd64_fam17h_zen2::RETIRED_INSTRUCTIONS:e=0:i=0:c=0:g=0:u=1:k=1:excl=0:mg=0:mh=1
`)
}
