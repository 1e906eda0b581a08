package pmu

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
	pmus, _ := fs.PMUs()
	want := Encoding{ev.Attr.Config, ev.Attr.Ext1, ev.Attr.Ext2}
	for _, p := range pmus {
		if p.Type != ev.Attr.Type {
			continue
		}
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
