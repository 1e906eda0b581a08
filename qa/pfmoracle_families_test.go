package qa

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/pfm"
	"perfevent/internal/pfm/pfmgolden"
)

// The uncore, AMD and RAPL encoders against this machine's libpfm4, on
// the names the goldens only sample: every unit mask of the first events'
// with each modifier at and past its limits, and pairs of unit masks.
// libpfm4 reads these PMUs' kernel types from sysfs, so the oracle runs in
// a private mount namespace with a made-up sysfs (the goldens' types),
// which needs root.
func TestOracleUncoreAMD(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the amd64 tables need an amd64 libpfm4")
	}
	if os.Geteuid() != 0 {
		unmet(t, "needs root, to give libpfm4 a made-up sysfs in a private mount namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		unmet(t, "needs unshare (util-linux)")
	}
	o := BuildOracle(t)
	types, err := pfmgolden.PerfTypes("amd64")
	if err != nil {
		t.Fatal(err)
	}
	env := pfm.Env{EncodeInactive: true, PerfType: func(name string) (uint32, error) {
		if t, ok := types[name]; ok {
			return t, nil
		}
		return 0, fmt.Errorf("no kernel PMU %s", name)
	}}
	seen := map[*pfm.Event]bool{} // uncore PMUs sharing a table (cbo0..cbo27) are tried once
	npmu, total, differ := 0, 0, 0
	for _, h := range pfm.ArchPMUs("amd64") {
		switch h.Family {
		case pfm.FamilyIntelUncore, pfm.FamilyIntelRAPL, pfm.FamilyAMD64:
		default:
			continue
		}
		if !in413("amd64", h.Name) {
			continue // newer than this machine's libpfm4: the upstream goldens check it
		}
		p, err := pfm.LoadArch("amd64", h.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Events) == 0 || seen[&p.Events[0]] {
			continue
		}
		if p.Family == pfm.FamilyIntelUncore {
			seen[&p.Events[0]] = true // AMD PMUs sharing a table differ in revision
		}
		npmu++
		names := familyNames(p)
		lines, err := o.encodeWithSysfs(types, []string{"LIBPFM_ENCODE_INACTIVE=1", "LIBPFM_FORCE_PMU=" + p.Name}, names)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		bad := 0
		for i, name := range names {
			if d := oracleDiff(name, lines[i], env, p.Name); d != "" {
				if bad++; bad <= 5 {
					t.Errorf("%s: %s", name, d)
				}
			}
		}
		t.Logf("%-24s compared %6d  differ %d", p.Name, len(names), bad)
		total += len(names)
		differ += bad
	}
	t.Logf("%d PMUs, %d names compared, %d differ", npmu, total, differ)
}

// familyNames are the names tried on one PMU.
func familyNames(p *pfm.PMU) []string {
	var names []string
	add := func(s string) { names = append(names, p.Name+"::"+s) }
	for i, e := range p.Events {
		add(e.Name)
		for _, u := range e.Umasks {
			add(e.Name + ":" + u.Name)
		}
		if i%2 != 0 {
			continue
		}
		bases := []string{e.Name}
		for j, u := range e.Umasks {
			if j < 3 {
				bases = append(bases, e.Name+":"+u.Name)
			}
			for k, v := range e.Umasks {
				if j < 6 && k < 6 && j != k {
					add(e.Name + ":" + u.Name + ":" + v.Name)
				}
			}
		}
		for _, b := range bases {
			for m, mod := range p.Modifiers {
				if e.ModMask&(1<<m) == 0 || mod.Name == "" {
					continue
				}
				for _, v := range modValues(mod) {
					add(b + ":" + mod.Name + v)
				}
			}
			add(b + ":0xff")
			add(b + ":0x100")
		}
	}
	return names
}

// modValues are the values a modifier is tried with: either side of every
// limit the uncore and AMD modifiers have.
func modValues(m pfm.Modifier) []string {
	if m.Type == pfm.ModBool {
		return []string{"", "=0", "=1"}
	}
	switch m.Name {
	case "t", "c", "ff":
		return []string{"=0", "=31", "=32", "=255", "=256"}
	case "tf":
		return []string{"=0", "=1", "=2", "=7", "=8"}
	case "cf":
		return []string{"=0", "=7", "=8", "=15", "=16", "=63", "=64", "=65"}
	case "nf":
		return []string{"=0", "=1", "=255", "=256"}
	case "dnid", "rcsnid":
		return []string{"=0", "=15", "=16"}
	}
	return []string{"=1"}
}

// encodeWithSysfs is Encode with libpfm4 given the kernel PMUs in types:
// /sys/bus/event_source/devices/<name>/type and /sys/devices/<name>, on
// tmpfs in a mount namespace of its own.
func (o *Oracle) encodeWithSysfs(types map[string]uint32, env, names []string) ([]string, error) {
	var script strings.Builder
	script.WriteString("set -e\nmount -t tmpfs none /sys/bus/event_source/devices\nmount -t tmpfs none /sys/devices\n")
	var sorted []string
	for n := range types {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		fmt.Fprintf(&script, "mkdir /sys/bus/event_source/devices/%s /sys/devices/%s\necho %d >/sys/bus/event_source/devices/%s/type\n", n, n, types[n], n)
	}
	script.WriteString("exec \"$0\"\n")
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script.String(), o.bin)
	return encodeWith(cmd, env, names)
}

// oracleErrs are libpfm4's reasons, as pfm's errors.
var oracleErrs = map[string]error{}

func init() {
	for _, e := range []error{pfm.ErrNotSupported, pfm.ErrInvalid, pfm.ErrNotFound, pfm.ErrFeatComb,
		pfm.ErrUmask, pfm.ErrAttr, pfm.ErrAttrVal, pfm.ErrAttrSet, pfm.ErrTooMany} {
		oracleErrs[e.Error()] = e
	}
}

// oracleDiff says how pfm.Encode's answer for name differs from the
// oracle's line, "" if it does not.
func oracleDiff(name, line string, env pfm.Env, pmu string) string {
	enc, err := pfm.Encode(name, env, []string{pmu})
	f := strings.Split(line, "\t")
	if len(f) == 3 && f[1] == "ERR" {
		if err == nil {
			return fmt.Sprintf("libpfm4 refuses it (%s), we encode it as %s", f[2], enc.FullName)
		}
		if w := oracleErrs[f[2]]; w == nil || !errors.Is(err, w) {
			return fmt.Sprintf("libpfm4 refuses it with %q, we with %v", f[2], err)
		}
		return ""
	}
	if err != nil {
		return fmt.Sprintf("libpfm4 says %s, we refuse it: %v", line, err)
	}
	a := enc.Attr
	ex := ""
	for _, b := range []struct {
		bit uint64
		c   string
	}{{unix.PerfBitExcludeUser, "u"}, {unix.PerfBitExcludeKernel, "k"}, {unix.PerfBitExcludeHv, "h"},
		{unix.PerfBitExcludeIdle, "i"}, {unix.PerfBitExcludeHost, "H"}, {unix.PerfBitExcludeGuest, "G"}} {
		if a.Bits&b.bit != 0 {
			ex += b.c
		}
	}
	if ex == "" {
		ex = "-"
	}
	hex := func(v uint64) string {
		if v == 0 {
			return "0"
		}
		return fmt.Sprintf("%#x", v)
	}
	got := strings.Join([]string{name, "OK", fmt.Sprint(a.Type), hex(a.Config), hex(a.Ext1), hex(a.Ext2), ex, enc.PMU.Name, enc.FullName}, "\t")
	if got != line {
		return fmt.Sprintf("libpfm4 says\n\t%s\nwe\n\t%s", line, got)
	}
	return ""
}
