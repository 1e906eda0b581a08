package pmu

import (
	"golang.org/x/sys/unix"
)

// ScaleFor supports perfevent.conf's perf_scale option: it finds the sysfs
// event whose encoding equals ev's, on the PMU whose type is ev's type, and
// returns that event's .scale and .unit. The C agent compares only the
// event and umask fields, and only when both are non-zero; comparing all
// three config words also works for events without a umask (e.g.
// topdown-retiring) and never matches two different encodings.
// Events resolved from sysfs already carry their scale.
func (fs *FS) ScaleFor(ev Event) (scale float64, unit string, ok bool) {
	if ev.Unit != "" || (ev.Scale != 0 && ev.Scale != 1) {
		return ev.Scale, ev.Unit, true
	}
	if ev.Attr.Type < unix.PERF_TYPE_MAX && ev.Attr.Type != unix.PERF_TYPE_RAW {
		// The kernel's generic types: hardware and cache events have no
		// PMU directory of their own, and the software, tracepoint and
		// breakpoint PMUs list no events.
		return 0, "", false
	}
	want := Encoding{ev.Attr.Config, ev.Attr.Ext1, ev.Attr.Ext2}
	for _, p := range fs.pmusOfType(ev.Attr.Type) {
		for i := range p.Events {
			pe := &p.Events[i]
			if pe.Scale == 1 && pe.Unit == "" {
				continue
			}
			if enc, err := p.Encode(pe, nil); err == nil && enc == want {
				return pe.Scale, pe.Unit, true
			}
		}
	}
	return 0, "", false
}

// pmusOfType reads the PMUs whose type is typ, and only those: this runs
// for every event libpfm4 encodes, and reading every PMU in full (caps,
// formats, events and their companions) each time was most of the agent's
// start-up CPU. A PMU that cannot be read is left out, as in PMUs.
func (fs *FS) pmusOfType(typ uint32) []*PMU {
	names, err := fs.PMUNames()
	if err != nil {
		return nil
	}
	var pmus []*PMU
	for _, n := range names {
		if t, ok := fs.typeOf(n); !ok || t != typ {
			continue
		}
		if p, err := fs.PMU(n); err == nil {
			pmus = append(pmus, p)
		}
	}
	return pmus
}
