package cgroup

import (
	"maps"
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
