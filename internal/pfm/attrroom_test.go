package pfm

import "testing"

// The families list an event's attributes with room for the perf layer's
// (attrRoom), so that parseAttrs appends them without growing the slice:
// a grown slice was a copy of every attribute at every encoding.
func TestPattrsLeaveRoomForPerf(t *testing.T) {
	for _, c := range []struct {
		pmu    string
		pattrs func(p *PMU, ev *Event) ([]attrDesc, func(int) bool)
	}{
		{"skx", intelPattrs},
		{"amd64_fam17h_zen2", amdPattrs},
		{"skx_unc_cha0", uncorePattrs},
	} {
		p, err := LoadArch("amd64", c.pmu)
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Events {
			descs, _ := c.pattrs(p, &p.Events[i])
			if cap(descs)-len(descs) < len(perfAttrs) {
				t.Errorf("%s::%s: room for %d attributes after its %d, want %d", c.pmu, p.Events[i].Name, cap(descs)-len(descs), len(descs), len(perfAttrs))
				break
			}
		}
	}
}
