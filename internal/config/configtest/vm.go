package configtest

// VMConf is a perfevent.conf for the "vm" machine of the tests' fixtures,
// which has no core PMU: its [hsw] section cannot be chosen, so [perf] is,
// with a software event, a hardware one the VM refuses, one counted on a
// single CPU, an unknown one, a tracepoint and a raw code; two derived
// metrics follow, one with an alternative. The agent's tests open it and
// setup's plan it (with a [dynamic] section after it), so each knows the
// other's input.
const VMConf = `# a VM: no core PMU, so [hsw] cannot be chosen
[hsw]
UNHALTED_CORE_CYCLES

[perf]
cpu-clock
cycles
page-faults 1
no-such-event
sched:sched_switch
RAW:r1 rawcode=0x1234

[ipc:derived]
instructions
cycles 2
||
cpu-clock

[faults:derived]
page-faults
cpu-clock
`
