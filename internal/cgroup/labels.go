package cgroup

import (
	"regexp"
	"strings"
	"sync"
)

// Container runtimes name a Kubernetes pod's cgroup after its UID, with
// "_" for "-" under the systemd driver ("kubepods-burstable-pod1f2e…_….slice")
// and as is under the cgroupfs one ("pod1f2e…-…"), and a container's after
// its id ("cri-containerd-ID.scope", "crio-ID.scope", "docker-ID.scope",
// or the bare id under cgroupfs). Compiled when first needed: most agents
// follow no cgroup, and the agent's start-up is what pmcd waits for.
var (
	podRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?:^|-)pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?$`)
	})
	containerRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?:(?:cri-containerd|crio|docker|containerd|libpod)-)?([0-9a-f]{64})(?:\.scope)?$`)
	})
)

// Labels are the labels of a cgroup's instance that its path tells beside
// the path itself: "pod_uid" below a Kubernetes pod's cgroup and
// "container_id" in a container's, so that a client can join them with
// what Kubernetes and the runtime report. Nil when the path has neither.
func Labels(path string) map[string]string {
	var out map[string]string
	set := func(k, v string) {
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	for _, c := range components(path) {
		if m := podRE().FindStringSubmatch(c); m != nil {
			set("pod_uid", strings.ReplaceAll(m[1], "_", "-"))
		} else if m := containerRE().FindStringSubmatch(c); m != nil {
			set("container_id", m[1])
		}
	}
	return out
}
