package cgroup

import (
	"strings"
)

// Container runtimes name a Kubernetes pod's cgroup after its UID, with
// "_" for "-" under the systemd driver ("kubepods-burstable-pod1f2e…_….slice")
// and as is under the cgroupfs one ("pod1f2e…-…"), and a container's after
// its id ("cri-containerd-ID.scope", "crio-ID.scope", "docker-ID.scope",
// or the bare id under cgroupfs). The names are matched by hand rather than
// by regular expressions so that the agent does not link package regexp,
// whose tables every start would build.

// podUID is the UID of a pod's cgroup named c, as the regular expression
// (?:^|-)pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?$
// finds it.
func podUID(c string) (string, bool) {
	const n = 36 // 32 hex digits and 4 separators
	c = strings.TrimSuffix(c, ".slice")
	if len(c) < len("pod")+n {
		return "", false
	}
	uid, rest := c[len(c)-n:], c[:len(c)-n]
	for i := 0; i < n; i++ {
		switch i {
		case 8, 13, 18, 23:
			if uid[i] != '-' && uid[i] != '_' {
				return "", false
			}
		default:
			if !isLowerHex(uid[i]) {
				return "", false
			}
		}
	}
	rest, ok := strings.CutSuffix(rest, "pod")
	return uid, ok && (rest == "" || strings.HasSuffix(rest, "-"))
}

// containerID is the id of a container's cgroup named c, as the regular
// expression ^(?:(?:cri-containerd|crio|docker|containerd|libpod)-)?([0-9a-f]{64})(?:\.scope)?$
// finds it.
func containerID(c string) (string, bool) {
	const n = 64
	c = strings.TrimSuffix(c, ".scope")
	if len(c) < n {
		return "", false
	}
	id, runtime := c[len(c)-n:], c[:len(c)-n]
	for i := 0; i < n; i++ {
		if !isLowerHex(id[i]) {
			return "", false
		}
	}
	switch runtime {
	case "", "cri-containerd-", "crio-", "docker-", "containerd-", "libpod-":
		return id, true
	}
	return "", false
}

func isLowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

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
		if uid, ok := podUID(c); ok {
			set("pod_uid", strings.ReplaceAll(uid, "_", "-"))
		} else if id, ok := containerID(c); ok {
			set("container_id", id)
		}
	}
	return out
}
