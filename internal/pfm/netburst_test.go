package pfm

import (
	"errors"
	"testing"
)

// What Debian's libpfm4 4.13 answered with LIBPFM_FORCE_PMU=netburst.
func TestNetburst(t *testing.T) {
	const tail = ":u=1:k=1:excl=0:mg=0:mh=1"
	for _, tc := range []struct {
		name, full string
		config     uint64
		err        error
	}{
		{name: "netburst::TC_deliver_mode:DD:thr=3", config: 0x20f00373000,
			full: "netburst::TC_deliver_mode:DD:k=1:u=1:e=0:cmpl=0:thr=3" + tail},
		// u and k only exclude: the ESCR counts both levels still.
		{name: "netburst::TC_deliver_mode:DD:cmpl:k=0", config: 0x20f000f3000,
			full: "netburst::TC_deliver_mode:DD:k=1:u=1:e=0:cmpl=1:thr=0:u=0:k=0:excl=0:mg=0:mh=1"},
		{name: "netburst::packed_SP_uop:TAG0", config: 0x2000003f00033000,
			full: "netburst::packed_SP_uop:TAG0:k=1:u=1:e=0:cmpl=0:thr=0" + tail},
		{name: "netburst::replay_event:NBOGUS", config: 0x4a00020f0003b000,
			full: "netburst::replay_event:NBOGUS:k=1:u=1:e=0:cmpl=0:thr=0" + tail},
		{name: "netburst::TC_deliver_mode:DD:thr=16", err: ErrAttrVal},
		{name: "netburst::replay_event", err: ErrAttr}, // no default unit mask
	} {
		enc, err := Encode(tc.name, Env{Arch: "amd64"}, []string{"netburst"})
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if enc.Attr.Type != 4 || enc.Attr.Config != tc.config || enc.FullName != tc.full {
			t.Errorf("%s: type %d config %#x %s, want 4 %#x %s", tc.name, enc.Attr.Type, enc.Attr.Config, enc.FullName, tc.config, tc.full)
		}
	}
}
