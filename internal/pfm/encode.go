package pfm

import "golang.org/x/sys/unix"

// Encoding is what libpfm4's pfm_get_os_event_encoding gives the C
// pmdaperfevent for a name (PFM_OS_PERF_EVENT_EXT, PFM_PLM0|PFM_PLM3).
type Encoding struct {
	PMU   *PMU
	Event *Event
	// Attr holds Type, Config, Ext1 (config1), Ext2 (config2), the
	// exclude bits and precise_ip, as libpfm4 fills them.
	Attr unix.PerfEventAttr
	// FullName is libpfm4's canonical name (its fstr), every umask and
	// modifier spelled out, e.g.
	// "skx::INST_RETIRED:ANY_P:e=0:i=0:c=0:t=0:intx=0:intxcp=0:u=1:k=1:precise=0:excl=0:mg=0:mh=1".
	// It is "" where libpfm4 gives none: TOPDOWN_M's metrics.
	FullName string
	// CPU is the CPU a "cpu=N" modifier asks for, -1 without one.
	CPU int
}

// Env is what encoding needs to know of the machine.
type Env struct {
	// PerfType gives the perf_event type of a kernel PMU, as its sysfs
	// file /sys/bus/event_source/devices/NAME/type says ("uncore_imc_0",
	// "power", "amd_l3"). Nil means no kernel PMU but the core one.
	PerfType func(name string) (uint32, error)

	// Arch picks the libpfm4 build whose tables the names are read in:
	// "amd64", "arm64" or "ppc64le" (see Archs); "" is the host's.
	Arch string

	// EncodeInactive lets a name with a PMU prefix name any PMU of the
	// catalog, detected or not, as LIBPFM_ENCODE_INACTIVE does for
	// libpfm4. The C agent does not set it.
	EncodeInactive bool

	// KernelEvent reports whether a kernel PMU lists an event, as the
	// file /sys/devices/PMU/events/EVENT says: libpfm4's perf PMU has
	// slots and the topdown events only where the core PMU ("cpu") lists
	// them. Nil means no kernel PMU lists any.
	KernelEvent func(pmu, event string) bool

	// IntelArch is the CPU's architectural perfmon (CPUID leaf 0xa),
	// which decides what libpfm4's ix86arch PMU has. Nil stands for what
	// libpfm4 assumes when a PMU is forced on it: version 3, every event.
	IntelArch *IntelArchPerfmon

	// IntelModel is the CPU's model (CPUID family 6) when libpfm4 detects
	// its PMUs rather than being forced: it picks Intel RAPL's table
	// (PMU.ModelTables). 0 keeps the compiled-in table, as a forced or
	// undetected RAPL keeps it.
	IntelModel int
}

// IntelArchPerfmon is what CPUID leaf 0xa says of the architectural
// performance monitoring of an Intel CPU.
type IntelArchPerfmon struct {
	Version     int    // EAX bits 0-7
	Unavailable uint32 // EBX: bit i set when architectural event i is missing
}

// request is one name being encoded by its family's encoder.
type request struct {
	pmu   *PMU
	event *Event
	attrs []string // what followed the event name, split at ':' ("L3_HIT", "u", "c=2")
	// preAttrs are an aliased event's own attributes (its Equiv's),
	// parsed before attrs; nil for most events.
	preAttrs []string
	plm      uint32 // privilege levels asked for before any modifier: PFM_PLM0|PFM_PLM3
	env      Env

	// The encoder fills these.
	attr unix.PerfEventAttr
	fstr []byte // the canonical name without the "pmu::" prefix; see addf

	// parseAttrs fills these for the family encoder, and perfLayer
	// reads them.
	pattrs []attrDesc // what the event accepts, libpfm4's pattrs
	vals   []attrVal  // what the name gave
	raw    uint64     // the raw umask, when vals holds one
	// rawCode is the config a perf_raw name gave ("r1c2"), which
	// libpfm4 reads while it looks the name up.
	rawCode uint64
	cpu     int // cpu=N, or -1
	// noMods is set by the encoder when a unit mask takes no modifier
	// (libpfm4's support_no_mods, after 4.13): the perf layer then
	// refuses any but pinned, and there is no canonical name.
	noMods bool
}

// familyEncoders holds each family's encoder, which does for its tables
// what libpfm4's pmu->get_event_encoding[PFM_OS_PERF_EVENT_EXT] does, nil
// for a family without one. It is an array over every Family value rather
// than a map that init functions fill, so that it is data in the binary
// and no start of the agent spends time building it.
//
// Encode has found r.pmu and r.event (aliases followed) before calling
// it. The encoder
//
//   - calls r.parseAttrs with the event's own attributes (umasks, then
//     modifiers, in libpfm4's order) and which perf-layer modifiers its
//     validate_pattrs keeps (perfKeep has the shared rules), which fills
//     r.pattrs and r.vals;
//   - encodes r.vals into r.attr (Type, Config, Ext1, Ext2), returning
//     badAttr(ErrX, ...) for what libpfm4 refuses;
//   - writes its part of the canonical name with r.addf ("EVENT:UMASK:
//     mod=value").
//
// Encode then applies the perf layer (perfLayer: u, k, h, period, freq,
// precise, excl, mg, mh, cpu, pinned, hw_smpl; the exclude bits; the
// rest of the canonical name). intel.go is the worked example.
var familyEncoders = [1 << 8]func(*request) error{
	FamilyIntelX86:         encodeIntelX86,
	FamilyIntelUncore:      encodeIntelUncore,
	FamilyIntelRAPL:        encodeRAPL,
	FamilyAMD64:            encodeAMD64,
	FamilyARM:              encodeARM,
	FamilyPower:            encodePower,
	FamilyPerf:             encodePerfPMU,
	FamilyIntelNHMUncore:   encodeIntelNHMUncore,
	FamilyNetburst:         encodeNetburst,
	FamilyARMKunpengUncore: encodeARMUncore,
	FamilyARMTX2Uncore:     encodeARMUncore,
	FamilyPowerTorrent:     encodeTorrent,
}

// Privilege levels, as libpfm4 numbers them.
const (
	PLM0 = 0x1 // kernel
	PLM1 = 0x2
	PLM2 = 0x4
	PLM3 = 0x8  // user
	PLMH = 0x10 // hypervisor
)
