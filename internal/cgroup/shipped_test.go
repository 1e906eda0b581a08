package cgroup

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// k8sTree makes, under root, the cgroups of a systemd host running
// Kubernetes with the systemd driver: pods of the three QoS classes with
// a container each, and returns the pods' and containers' paths.
func k8sTree(t testing.TB, root string, pods int) (want []string) {
	t.Helper()
	var dirs []string
	for i := range pods {
		qos := []string{"", "kubepods-burstable.slice/", "kubepods-besteffort.slice/"}[i%3]
		class := strings.TrimSuffix(strings.TrimPrefix(qos, "kubepods"), ".slice/")
		uid := fmt.Sprintf("%08x_1111_4222_8333_%012x", i, i)
		pod := fmt.Sprintf("/kubepods.slice/%skubepods%s-pod%s.slice", qos, class, uid)
		ctr := fmt.Sprintf("%s/cri-containerd-%064x.scope", pod, i)
		dirs = append(dirs, ctr)
		want = append(want, pod, ctr)
	}
	dirs = append(dirs, "/system.slice/pmcd.service", "/system.slice/containerd.service", "/system.slice/kubelet.service",
		"/user.slice/user-1000.slice/user@1000.service/app.slice", "/user.slice/user-1000.slice/session-1.scope",
		"/machine.slice/machine-qemu\\x2d1\\x2dvm.scope", "/init.scope")
	mkdirs(t, root, dirs...)
	return want
}

// The shipped cgroups.conf counts every pod and container of a
// 150-pod Kubernetes node, the systemd services, slices, sessions and
// machines, and not the root cgroup.
func TestShippedConfig(t *testing.T) {
	cfg, missing, errs := ReadConfig("../../cgroups.conf")
	if missing || len(errs) > 0 {
		t.Fatalf("the shipped cgroups.conf: missing %v, errors %v", missing, errs)
	}
	if !slices.Equal(cfg.Events, []string{"cpu-clock", "context-switches"}) {
		t.Errorf("events %q", cfg.Events)
	}
	root := t.TempDir()
	want := k8sTree(t, root, 150)
	want = append(want, "/kubepods.slice", "/kubepods.slice/kubepods-burstable.slice", "/kubepods.slice/kubepods-besteffort.slice",
		"/system.slice", "/system.slice/pmcd.service", "/system.slice/kubelet.service", "/user.slice", "/user.slice/user-1000.slice",
		"/user.slice/user-1000.slice/session-1.scope", "/user.slice/user-1000.slice/user@1000.service",
		"/machine.slice", "/machine.slice/machine-qemu\\x2d1\\x2dvm.scope", "/init.scope")
	// The cgroupfs driver, and a kubelet one level down (kind).
	cgroupfs := []string{"/kubepods/burstable/pod1f2e3d4c-5b6a-4798-8a9b-0c1d2e3f4a5b/" + strings.Repeat("ab", 32),
		"/system.slice/kubepods.slice/kubepods-pod1f2e3d4c_5b6a_4798_8a9b_0c1d2e3f4a5b.slice/crio-" + strings.Repeat("cd", 32) + ".scope"}
	mkdirs(t, root, cgroupfs...)
	want = append(want, cgroupfs...)
	matched, _, truncated := scan(root, cfg.Patterns, nil)
	if truncated {
		t.Fatal("the scan was truncated")
	}
	// On this machine's CPUs, under the shipped caps.
	tr := New(Options{Patterns: cfg.Patterns, Max: cfg.Max, Descriptors: cfg.Descriptors,
		Events: make([]Event, len(cfg.Events)), CPUs: make([]int, 2)})
	chosen, left := choose(matched, nil, tr.o.Max)
	for _, p := range want {
		if !slices.Contains(chosen, p) {
			t.Errorf("%s is not counted", p)
		}
	}
	if slices.Contains(chosen, "/") || slices.Contains(chosen, "/user.slice/user-1000.slice/user@1000.service/app.slice") {
		t.Errorf("counted %q, want neither the root cgroup nor a user's own cgroups", chosen)
	}
	if len(left) > 0 {
		t.Errorf("left out on 2 CPUs: %q", left)
	}
}
