package pfm

import "sync"

// A sketch is what detection reads of a PMU (Name, Family, PerfName,
// CPUFamily, CPUModels), for every PMU of one build in the order of
// ArchPMUsByID, packed into a few pages: the index's PMU values span
// some forty pages per build, and a start that walked them all to
// detect the few of its machine paid for touching every one of those
// pages for the first time (the generated index lives in the binary's
// data, which the kernel maps in on first use).
type sketchTable struct {
	names  string // every Name and PerfName, end to end
	models string // every CPUModels, one byte a model
	rows   []sketchRow
}

// sketchRow is one PMU: its strings as offsets into the table's.
type sketchRow struct {
	name, perfName uint16 // offsets into names
	nameLen        uint8
	perfNameLen    uint8
	family         Family
	modelsLen      uint8
	models         uint16 // offset into models
	cpuFamily      uint16
}

// scratch is SelectByID's sketch and its models, one for the process: a
// PMU made for each call would be the first object of its size, and cost
// the heap a fresh page.
var scratch struct {
	sync.Mutex
	sketch PMU
	models [32]int
}

// SelectByID gives the PMUs of ArchPMUsByID(arch) that keep accepts, in
// that order. keep sees a sketch of each, a PMU with only Name, Family,
// PerfName, CPUFamily and CPUModels set, which it must neither change nor
// keep, nor call SelectByID: only the PMUs it accepts are read from the
// index.
func SelectByID(arch string, keep func(sketch *PMU) bool) []*PMU {
	for _, a := range generatedIndex {
		if a.arch != arch {
			continue
		}
		t := a.sketch
		var out []*PMU
		// One sketch, and one list of models, for every PMU: keep
		// must not keep them.
		scratch.Lock()
		defer scratch.Unlock()
		s := &scratch.sketch
		*s = PMU{}
		models := scratch.models[:0]
		for i := range t.rows {
			r := &t.rows[i]
			models = models[:0]
			for _, m := range []byte(t.models[r.models : int(r.models)+int(r.modelsLen)]) {
				models = append(models, int(m))
			}
			// Field by field: the rest of the sketch stays zero, and is
			// not written again for every PMU.
			s.Name = t.names[r.name : int(r.name)+int(r.nameLen)]
			s.Family = r.family
			s.PerfName = t.names[r.perfName : int(r.perfName)+int(r.perfNameLen)]
			s.CPUFamily = int(r.cpuFamily)
			s.CPUModels = nil
			if r.modelsLen > 0 {
				s.CPUModels = models
			}
			if keep(s) {
				out = append(out, a.byID[i])
			}
		}
		return out
	}
	return nil
}
