package cgroup

import (
	"maps"
	"regexp"
	"strings"
	"testing"
)

func TestLabels(t *testing.T) {
	uid := "1f2e3d4c-5b6a-4798-8a9b-0c1d2e3f4a5b"
	sd := strings.ReplaceAll(uid, "-", "_")
	id := strings.Repeat("0123456789abcdef", 4)
	for _, c := range []struct {
		path string
		want map[string]string
	}{
		{"/system.slice/pmcd.service", nil},
		{"/kubepods.slice/kubepods-burstable.slice", nil},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + sd + ".slice", map[string]string{"pod_uid": uid}},
		{"/kubepods.slice/kubepods-pod" + sd + ".slice/cri-containerd-" + id + ".scope", map[string]string{"pod_uid": uid, "container_id": id}},
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + sd + ".slice/crio-" + id + ".scope", map[string]string{"pod_uid": uid, "container_id": id}},
		{"/kubepods/burstable/pod" + uid + "/" + id, map[string]string{"pod_uid": uid, "container_id": id}},
		{"/system.slice/docker-" + id + ".scope", map[string]string{"container_id": id}},
		{"/docker/" + id, map[string]string{"container_id": id}},
		{"/kubepods.slice/kubepods-pod" + sd[:10] + ".slice", nil}, // not a UID
	} {
		if got := Labels(c.path); !maps.Equal(got, c.want) {
			t.Errorf("Labels(%q) = %v, want %v", c.path, got, c.want)
		}
	}
}

// podUID and containerID, written out, find what the regular expressions
// they replace find, in names built from the runtimes' prefixes and
// suffixes around UIDs and ids, good and broken.
func TestPodUIDAndContainerIDAreTheirPatterns(t *testing.T) {
	podRE := regexp.MustCompile(`(?:^|-)pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?$`)
	containerRE := regexp.MustCompile(`^(?:(?:cri-containerd|crio|docker|containerd|libpod)-)?([0-9a-f]{64})(?:\.scope)?$`)
	uid := "1f2e3d4c-5b6a-4798-8a9b-0c1d2e3f4a5b"
	id := strings.Repeat("0123456789abcdef", 4)
	bodies := []string{
		uid, strings.ReplaceAll(uid, "-", "_"), strings.Replace(uid, "-", "_", 2),
		uid[1:], "a" + uid, strings.ToUpper(uid), strings.Replace(uid, "-", "x", 1),
		uid[:8] + "4" + uid[9:], strings.Replace(uid, "f", "g", 1),
		id, id[1:], "a" + id, strings.Replace(id, "a", "A", 1), strings.Replace(id, "a", "-", 1),
		"", "pod", uid + id,
	}
	prefixes := []string{"", "pod", "-pod", "xpod", "podpod", "kubepods-pod", "kubepods-burstable-pod", "-",
		"cri-containerd-", "crio-", "docker-", "containerd-", "libpod-", "podman-", "x-docker-", "docker"}
	suffixes := []string{"", ".slice", ".scope", ".slice.slice", ".scope.scope", "x", ".Slice", "-"}
	n := 0
	for _, p := range prefixes {
		for _, b := range bodies {
			for _, s := range suffixes {
				c := p + b + s
				n++
				got, ok := podUID(c)
				if m := podRE.FindStringSubmatch(c); ok != (m != nil) || ok && got != m[1] {
					t.Errorf("podUID(%q) = %q, %v; the pattern finds %q", c, got, ok, m)
				}
				got, ok = containerID(c)
				if m := containerRE.FindStringSubmatch(c); ok != (m != nil) || ok && got != m[1] {
					t.Errorf("containerID(%q) = %q, %v; the pattern finds %q", c, got, ok, m)
				}
			}
		}
	}
	if n < 2000 {
		t.Fatalf("only %d names", n)
	}
}
