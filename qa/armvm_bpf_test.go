package qa

import (
	"path/filepath"
	"strings"
	"testing"
)

// bpfVMInit mounts cgroup v2 and runs package bpfcount's hardware tests,
// and three of its software ones.
// It first says whether the kernel can count per cgroup with BPF at all:
// the bpf system call, cgroup v2, and the cgroup-switches software event
// (which perf lists as soon as the kernel has it).
//
// The kernel fires cgroup-switches only between tasks of different
// perf_event cgroups, and gives v2 cgroups that implicit controller once
// the root's cgroup.subtree_control is first written, as systemd does at
// boot: until then every task is in the root's perf_event cgroup, and the
// program runs at no switch.
// TestKernelChargesTheRunningCgroup, which times a software clock against
// a task's own CPU time, runs on the host only: under emulation its
// median of five intervals came out 10 % off once.
const bpfVMInit = vmPrelude + `mount -t cgroup2 none /sys/fs/cgroup
echo +pids > /sys/fs/cgroup/cgroup.subtree_control
uname -r
ls /sys/bus/event_source/devices/
zcat /proc/config.gz 2>/dev/null | grep -E '^CONFIG_(BPF_SYSCALL|BPF_EVENTS|CGROUP_PERF)='
cd /tmp && /bin/bpfcount.test -test.run '^TestKernel(ChargesHardwareEvents|ScalesMultiplexedHardwareEvents|DeepCgroupLeavesItsSums|CacheFollowsTheCountedSet)$' -test.v -test.count=1
echo "=== exit $?"
poweroff -f
`

// TestARMVMBPFCount counts hardware events per cgroup with BPF on a real
// (emulated) PMU: package bpfcount's test binary runs its hardware tests
// inside, where instructions count exactly, and each must pass, not skip:
// a loop in a cgroup is charged what its own task counters count,
// instructions and cycles, and eight copies of instructions, multiplexed
// on the PMU's six counters, each scale to it. The software tests that
// run beside them must not fail either, and the one of the program's
// cache must pass: on arm64, which orders loads as it likes, the
// atomic read of the generation on a miss is what keeps a stale slot
// out of the cache.
func TestARMVMBPFCount(t *testing.T) {
	vm := needARMVM(t)
	work := t.TempDir()
	test := filepath.Join(work, "bpfcount.test")
	buildARM64(t, "test", "-c", "-o", test, "./internal/bpfcount")
	initrd := filepath.Join(work, "initrd.cpio")
	if err := writeInitramfs(initrd, bpfVMInit, map[string]string{"bin/busybox": vm.busybox, "bin/bpfcount.test": test}, nil); err != nil {
		t.Fatal(err)
	}
	console := vm.boot(t, initrd, armShift)
	for _, l := range strings.Split(console, "\n") {
		if strings.Contains(l, "hardware_test.go") || strings.Contains(l, "--- ") {
			t.Log(strings.TrimSpace(l))
		}
	}
	for _, name := range []string{"TestKernelChargesHardwareEvents", "TestKernelScalesMultiplexedHardwareEvents", "TestKernelCacheFollowsTheCountedSet"} {
		if !strings.Contains(console, "--- PASS: "+name) {
			t.Errorf("%s did not pass in the VM", name)
		}
	}
	if strings.Contains(console, "--- FAIL") {
		t.Errorf("a test of package bpfcount failed in the VM")
	}
	if t.Failed() {
		t.Logf("the console:\n%s", console)
	}
}
