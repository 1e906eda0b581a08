// Package pfm knows event names the way libpfm4 knows them, at the upstream
// commit package tables was generated from (tables.Libpfm4Commit), and
// encodes them into perf_event attributes exactly as libpfm4's perf_events
// layer does, without libpfm4: PCP's C pmdaperfevent resolves every
// perfevent.conf name through libpfm4, so users' configurations are
// written in its vocabulary ("INSTRUCTIONS_RETIRED",
// "MEM_LOAD_UOPS_RETIRED:L3_HIT", "snbep_unc_imc0::UNC_M_CAS_COUNT:RD").
//
// The catalog (every PMU, event and unit mask) is generated from
// libpfm4's own tables; see package tables. The encoders, one per family
// of tables, are written here in Go.
package pfm

// Family is the shape of a PMU's table, and so the encoder that reads
// it. libpfm4 keeps one C entry type per family.
type Family uint8

const (
	FamilyUnknown     Family = iota
	FamilyIntelX86           // intel_x86_entry_t: Intel core PMUs and ix86arch
	FamilyIntelUncore        // intel_x86_entry_t read by the snbep_unc encoder (snbep..spr uncore)
	FamilyIntelRAPL          // intel_x86_entry_t read by the rapl encoder
	FamilyAMD64              // amd64_entry_t: K7 to Zen 6, and amd64_rapl
	FamilyARM                // arm_entry_t: armv6 to armv9 tables
	FamilyPower              // pme_power_entry_t: POWER4 to POWER10
	FamilyPerf               // libpfm4's perf and perf_raw pseudo-PMUs

	// Families added by the table generator, for the PMUs libpfm4 encodes
	// with yet another function.
	FamilyIntelNHMUncore   // intel_x86_entry_t read by the nhm_unc encoder (Nehalem, Westmere, Sandy/Ivy Bridge client uncore)
	FamilyNetburst         // netburst_entry_t: Pentium 4 (see package tables' README for how it maps onto Event)
	FamilyARMKunpengUncore // arm_entry_t read by the HiSilicon Kunpeng uncore encoder (hisi_sccl*)
	FamilyARMTX2Uncore     // arm_entry_t read by the ThunderX2 uncore encoder (tx2_*)
	FamilyPowerTorrent     // pme_torrent_entry_t: the POWER7 PowerBus, its own encoder before the POWER perf layer
)

// PMUType is libpfm4's pfm_pmu_type_t.
type PMUType uint8

const (
	PMUTypeUnknown PMUType = iota
	PMUTypeCore
	PMUTypeUncore
	PMUTypeOSGeneric
)

// PMU is one of libpfm4's PMU models, with its table.
type PMU struct {
	Name     string // libpfm4's short name: "skx", "snbep_unc_imc0", "arm_n1"
	Desc     string
	ID       int // libpfm4's pfm_pmu_t; name lookup walks PMUs in libpfm4's table order, kept in Order
	Order    int // position in libpfm4's list of PMUs (pfmlib_pmus[]), which decides name lookup
	Family   Family
	Type     PMUType
	PerfName string // the kernel PMU libpfm4 opens it through, e.g. "uncore_imc_0"; "" for the core PMU (PERF_TYPE_RAW)

	Flags        uint32 // pfmlib_pmu_t.flags (16 low bits common, 16 high bits per architecture)
	Rev          int    // pfmlib_pmu_t.pmu_rev
	NumCounters  int
	NumFixed     int
	SupportedPLM uint32 // PFM_PLM0|PFM_PLM3|PFM_PLMH... this PMU can filter
	MaxEncoding  int
	CPUFamily    int   // for detection by CPUID family/model (Intel); 0 if the PMU detects otherwise
	CPUModels    []int // likewise, in libpfm4's order
	Events       []Event

	// Added by the table generator.

	// Arch is the Go architecture (amd64, arm64, ppc64le) whose libpfm4
	// build has this PMU; Order counts within that build's list.
	Arch string
	// Modifiers is the PMU's attribute table (pfmlib_pmu_t.atdesc), by
	// position: bit i of an event's ModMask is Modifiers[i]. Entries
	// libpfm4 skips have an empty Name. Filled by Load.
	Modifiers []Modifier
	// ModelTables are the tables detection swaps in by CPU model (only
	// Intel RAPL has them); Events is the table as compiled, which libpfm4
	// keeps when the PMU is not detected. PMUs() gives their CPUModels,
	// Load their Events too.
	ModelTables []ModelTable

	// From the generated index (index_gen.go): the table file and its
	// size, and the hashes of the event names it (and its model tables)
	// holds, sorted, which let a name lookup pass the PMU without
	// decoding its table; nil for a PMU made elsewhere (tests).
	table string
	size  [2]int
	names []uint32
	// full is set on a PMU that Load gave, with its tables.
	full bool
}

// Modifier is one attribute of a PMU's modifier table ("u", "c", "ldlat").
type Modifier struct {
	Name string
	Desc string
	Type ModifierType
}

// ModifierType is libpfm4's pfm_attr_t for modifiers.
type ModifierType uint8

const (
	ModNone ModifierType = iota
	ModUmask
	ModBool
	ModInteger
	ModRawUmask
)

// ModelTable is a table that libpfm4's detection chooses for the CPU models listed.
type ModelTable struct {
	CPUModels []int
	Events    []Event
	table     string // the file it loads from
	size      [2]int // its events and unit masks
}

// Event is one entry of a PMU's table. Fields a family does not have stay
// zero: AMD events have no Equiv or CntMask, ARM ones no unit masks, and
// POWER ones only Name, Code and the two descriptions (Desc is the short
// one, LongDesc the long one).
type Event struct {
	Name       string
	Desc       string
	LongDesc   string
	Equiv      string // libpfm4's alias target, "" if none
	Code       uint64
	CntMask    uint64
	Flags      uint32 // family-specific (INTEL_X86_*, AMD64_FL_*)
	ModMask    uint32 // which of the family's modifiers the event takes
	ModMaskReq uint32 // which it requires
	NumGroups  uint16
	Model      uint16 // only on the PMU with this libpfm4 id (PMU.ID, e.g. skx or clx sharing skl's table), 0 for all
	Umasks     []Umask

	// Added by the table generator.
	Type uint32 // FamilyPerf: the perf_event type (PERF_TYPE_HARDWARE 0, SOFTWARE 1, HW_CACHE 3, RAW 4)
}

// Umask is one unit mask of an event.
type Umask struct {
	Name       string
	Desc       string
	Equiv      string
	CntMask    uint64
	Code       uint64
	Filters    [2]uint64 // uncore filter register values (intel_x86 ufilters)
	Flags      uint32    // family-specific (INTEL_X86_DFL, AMD64_FL_DFL, ...)
	Model      uint16
	Group      uint16 // grpid
	ModHW      uint32 // modifiers hardwired by this umask
	ModMaskReq uint32
}

// PerfOptional marks, in Event.Flags of the perf PMU, the events libpfm4
// adds at initialization only if the kernel's core PMU lists them in
// /sys/devices/cpu/events (slots and the topdown events). It is the
// catalog's own flag, above libpfm4's PERF_FL_* ones.
const PerfOptional = 0x10000
