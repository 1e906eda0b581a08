package pmu

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"perfevent/internal/hostfs"
	"perfevent/internal/pfm"
)

// CPUInfo is the identity of the first CPU in /proc/cpuinfo, as far as
// libpfm4 looks at it: vendor, family, model and stepping on x86,
// implementer and part on ARM, the processor version on POWER.
type CPUInfo struct {
	Vendor   string // "GenuineIntel", "AuthenticAMD"
	Family   int
	Model    int
	Stepping int
	Flags    CPUFlags

	Implementer     int  // ARM "CPU implementer", e.g. 0x41 for Arm Ltd
	Part            int  // ARM "CPU part", e.g. 0xd0c for Neoverse N1
	HasArchitecture bool // ARM "CPU architecture" is there; libpfm4 wants it
	PVR             int  // POWER processor version, e.g. 0x004e for POWER9

	// ARMCores are the distinct ARM cores of every processor, as
	// implementer and part, in the order first seen: more than one on a
	// big.LITTLE machine. libpfm4 after 4.13 activates the PMU of each.
	// Only processors with implementer, architecture and part count.
	ARMCores []ARMCore

	// cores are the Arm cores with their processors, as the vendor
	// lists' detection wants them (see armCores), when coresRead: the
	// file was read to its end, which an Arm one is.
	cores     []armCore
	coresRead bool
}

// CPUFlags are a processor's "flags" as cpuinfo lists them, separated by
// spaces. Detection asks for one of the hundred and more; a map of them
// all was some kilobytes of heap made at every start for that.
type CPUFlags string

// Has reports whether flag is one of f.
func (f CPUFlags) Has(flag string) bool {
	s := string(f)
	for s != "" {
		i := strings.IndexAny(s, " \t")
		tok := s
		if i >= 0 {
			tok, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if tok != "" && tok == flag {
			return true
		}
	}
	return false
}

// ARMCore is one kind of ARM core.
type ARMCore struct{ Implementer, Part int }

// CPUInfo reads the FS's CPUInfoFile up to the end of the first processor,
// once: detection, the vendor lists and the privilege levels all ask, and
// on a large machine the kernel makes the file afresh for every read.
// The result is shared: callers must not modify its Flags.
func (fs *FS) CPUInfo() (CPUInfo, error) {
	fs.cpuOnce.Do(func() {
		path := fs.CPUInfoFile()
		f, err := hostfs.Open(path)
		if err != nil {
			fs.cpuErr = err
			return
		}
		defer f.Close()
		fs.cpu, fs.cpuErr = parseCPUInfo(path, f)
	})
	return fs.cpu, fs.cpuErr
}

func parseCPUInfo(path string, f io.Reader) (CPUInfo, error) {
	info := CPUInfo{}
	sc := bufio.NewScanner(f)
	// Small reads: the kernel writes the file in the reader's chunks, and
	// only the first processor is read.
	sc.Buffer(make([]byte, 4096), 1024*1024)
	line := 0
	seenProcessor := false
	scan := newCoreScan()
	for sc.Scan() {
		line++
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		scan.line(key, val)
		num := func(dst *int) error {
			n, err := strconv.ParseInt(val, 0, 32)
			if err != nil {
				return fmt.Errorf("%s:%d: %s %q is not a number", path, line, key, val)
			}
			*dst = int(n)
			return nil
		}
		var err error
		switch key {
		case "processor":
			if seenProcessor && !info.HasArchitecture {
				return info, nil
			}
			if seenProcessor {
				// ARM: the other processors only for their cores.
				info.ARMCores = info.firstCore()
				rest, err := armCores(path, sc, line, &scan)
				info.ARMCores = appendCores(info.ARMCores, rest...)
				if err == nil {
					info.cores, info.coresRead = scan.done(), true
				}
				return info, err
			}
			seenProcessor = true
		case "vendor_id":
			info.Vendor = val
		case "cpu family":
			err = num(&info.Family)
		case "model":
			err = num(&info.Model)
		case "stepping":
			err = num(&info.Stepping)
		case "flags":
			if info.Flags != "" {
				val = string(info.Flags) + " " + val
			}
			info.Flags = CPUFlags(val)
		case "CPU implementer":
			err = num(&info.Implementer)
		case "CPU part":
			err = num(&info.Part)
		case "CPU architecture":
			info.HasArchitecture = true
		case "revision":
			// POWER: "2.2 (pvr 004e 1202)"; the version is the first half.
			if _, pvr, ok := strings.Cut(val, "(pvr "); ok {
				if v, err := strconv.ParseUint(strings.Fields(pvr)[0], 16, 16); err == nil {
					info.PVR = int(v)
				}
			}
		}
		if err != nil {
			return info, err
		}
	}
	info.ARMCores = info.firstCore()
	if err := sc.Err(); err != nil {
		return info, err
	}
	info.cores, info.coresRead = scan.done(), true
	return info, nil
}

func (c CPUInfo) firstCore() []ARMCore {
	if !c.HasArchitecture || (c.Implementer == 0 && c.Part == 0) {
		return nil
	}
	return []ARMCore{{c.Implementer, c.Part}}
}

// appendCores adds the cores not in list yet.
func appendCores(list []ARMCore, cores ...ARMCore) []ARMCore {
	for _, c := range cores {
		if !slices.Contains(list, c) {
			list = append(list, c)
		}
	}
	return list
}

// armCores reads the rest of an ARM cpuinfo, from the line after the
// second "processor", for the core of each processor; it gives scan
// every line too.
func armCores(path string, sc *bufio.Scanner, line int, scan *coreScan) ([]ARMCore, error) {
	var cores []ARMCore
	var cur ARMCore
	var impl, arch, part bool
	flush := func() {
		if impl && arch && part {
			cores = appendCores(cores, cur)
		}
		cur, impl, arch, part = ARMCore{}, false, false, false
	}
	for sc.Scan() {
		line++
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		scan.line(key, val)
		var dst *int
		switch key {
		case "processor":
			flush()
			continue
		case "CPU architecture":
			arch = true
			continue
		case "CPU implementer":
			dst, impl = &cur.Implementer, true
		case "CPU part":
			dst, part = &cur.Part, true
		default:
			continue
		}
		n, err := strconv.ParseInt(val, 0, 32)
		if err != nil {
			return cores, fmt.Errorf("%s:%d: %s %q is not a number", path, line, key, val)
		}
		*dst = int(n)
	}
	flush()
	return cores, sc.Err()
}

// hasCorePMU reports whether the kernel exposes a core PMU with events.
// Without one, guests whose CPUID still names a real model cannot count
// its events, so that model must not select a perfevent.conf section.
func (fs *FS) hasCorePMU() bool {
	names, _ := fs.PMUNames()
	for _, n := range names {
		// x86 and POWER call it cpu (cpu_core and cpu_atom on hybrid
		// Intel); ARM names it after the architecture and core.
		core := n == "cpu" || n == "cpu_core" || n == "cpu_atom" ||
			strings.HasPrefix(n, "armv8_") || strings.HasPrefix(n, "armv9_")
		if !core {
			continue
		}
		if st, err := os.Stat(filepath.Join(fs.PMUDir(n), "events")); err == nil && st.IsDir() {
			return true
		}
	}
	return false
}

// LibpfmPMUs returns the PMUs of libpfm4's catalog that libpfm4 activates
// on this machine, in libpfm4's order of PMU ids (the order of
// pfm_for_all_pmus, which the C agent logs as "Found PMU"): the CPU's by
// its cpuinfo, whether or not the kernel exposes a core PMU, and the
// generic perf and perf_raw PMUs. Names are encoded and listed among them,
// as libpfm4 encodes them; PresentNames is what chooses a section.
func (fs *FS) LibpfmPMUs() []*pfm.PMU {
	fs.detectOnce.Do(func() {
		cpu, err := fs.CPUInfo()
		arch := cpu.arch()
		if err != nil {
			cpu = CPUInfo{}
		}
		device := func(name string) bool {
			return isPathElem(name) && fs.hasPMU(name)
		}
		fs.active = detectCatalog(cpu, arch, device)
		fs.arch = arch
	})
	return fs.active
}

// libpfmNames are the names of LibpfmPMUs.
func (fs *FS) libpfmNames() []string {
	var names []string
	for _, p := range fs.LibpfmPMUs() {
		names = append(names, p.Name)
	}
	return names
}

// libpfmArch is the libpfm4 build whose tables serve this machine: the
// one of its CPU, which for a fixture need not be the agent's.
func (fs *FS) libpfmArch() string {
	fs.LibpfmPMUs()
	return fs.arch
}

// PresentNames returns the names a perfevent.conf PMU section must use to
// be chosen, as in the C agent: "perf" and "perf_raw" always, then the
// CPU's core, uncore and RAPL PMUs as libpfm4 names them ("skx",
// "snbep_unc_imc0", "amd64_fam19h_zen3") when the kernel exposes a core PMU
// (see hasCorePMU): a guest without one cannot count its CPU's events, so
// its CPU model must not select a section.
func (fs *FS) PresentNames() []string {
	var names []string
	core := fs.hasCorePMU()
	for _, p := range fs.LibpfmPMUs() {
		if core || p.Family == pfm.FamilyPerf {
			names = append(names, p.Name)
		}
	}
	return append(names, fs.vendorNames()...)
}
