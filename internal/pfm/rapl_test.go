package pfm

import "testing"

func TestRAPL(t *testing.T) {
	checkLibpfm4(t, fakeSysfs, `
rapl::RAPL_ENERGY_CORES OK 102 0x1 0 0 - rapl rapl::RAPL_ENERGY_CORES:excl=0
rapl::RAPL_ENERGY_PKG:period=1000 OK 102 0x2 0 0 - rapl rapl::RAPL_ENERGY_PKG:period=1000:freq=1000:excl=0
rapl::RAPL_ENERGY_CORES:u ERR invalid event attribute
`)
	// Without a "power" PMU, libpfm4 falls back to the core PMU's type.
	checkLibpfm4(t, Env{}, `
rapl::RAPL_ENERGY_PKG OK 4 0x2 0 0 - rapl rapl::RAPL_ENERGY_PKG:excl=0
`)
}
