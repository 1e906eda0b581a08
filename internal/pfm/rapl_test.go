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

// Detected on a server model, RAPL has DRAM but not the cores' counter;
// on a client with PSYS, that too (libpfm4's answers under an emulated
// CPU of that model).
func TestRAPLModelTables(t *testing.T) {
	server, client := fakeSysfs, fakeSysfs
	server.IntelModel, client.IntelModel = 63, 78
	checkLibpfm4(t, server, `
rapl::RAPL_ENERGY_CORES ERR event not found
rapl::RAPL_ENERGY_DRAM OK 102 0x3 0 0 - rapl rapl::RAPL_ENERGY_DRAM:excl=0
`)
	checkLibpfm4(t, client, `
rapl::RAPL_ENERGY_PSYS OK 102 0x5 0 0 - rapl rapl::RAPL_ENERGY_PSYS:excl=0
rapl::RAPL_ENERGY_DRAM ERR event not found
`)
}
