package pmu

import (
	"slices"

	"perfevent/internal/pfm"
)

// catalogSource gives libpfm4's PMU list; until the generated catalog is
// wired in it knows only the generic perf PMUs.
var catalogSource = func() []*pfm.PMU {
	return []*pfm.PMU{
		{Name: "perf", ID: 51, Family: pfm.FamilyPerf, Type: pfm.PMUTypeOSGeneric},
		{Name: "perf_raw", ID: 114, Family: pfm.FamilyPerf, Type: pfm.PMUTypeOSGeneric},
	}
}

// catalog returns libpfm4's PMUs in the order of their ids, as
// pfm_for_all_pmus walks them.
func catalog() []*pfm.PMU {
	pmus := slices.Clone(catalogSource())
	slices.SortStableFunc(pmus, func(a, b *pfm.PMU) int { return a.ID - b.ID })
	return pmus
}
