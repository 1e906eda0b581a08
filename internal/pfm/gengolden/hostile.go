package main

import (
	"strings"

	"perfevent/internal/pfm"
)

// hostilePMUs chooses the PMUs that get the hostile corpus: of each
// family, among the PMUs with events and a table of their own, the first
// three and the last in libpfm4's order (the oldest and, mostly, the
// newest models).
func hostilePMUs(arch string, pmus []*pfm.PMU) (map[string]bool, error) {
	byFamily := map[pfm.Family][]string{}
	seen := map[string]bool{}
	for _, h := range pmus {
		p, err := pfm.LoadArch(arch, h.Name)
		if err != nil {
			return nil, err
		}
		if key := tableKey(p); len(p.Events) > 0 && !seen[key] {
			seen[key] = true
			byFamily[p.Family] = append(byFamily[p.Family], p.Name)
		}
	}
	chosen := map[string]bool{}
	for _, names := range byFamily {
		for i, n := range names {
			if i < 3 || i == len(names)-1 {
				chosen[n] = true
			}
		}
	}
	return chosen, nil
}

// hostileNames is a deterministic corpus of names that a careless or
// malicious perfevent.conf could hold, for one PMU: mixed case, repeated
// and contradicting attributes, bad values, raw unit masks, '.' as the
// separator, names whose canonical form passes libpfm4's 255 bytes, and
// empty fields, each written after "PMU::". It is asked of the first, the
// middle and the last event and of the first event with unit masks.
func hostileNames(p *pfm.PMU) []string {
	picks := []int{0, len(p.Events) / 2, len(p.Events) - 1}
	for i := range p.Events {
		if len(p.Events[i].Umasks) > 0 {
			picks = append(picks, i)
			break
		}
	}
	var intMod, boolMod string // a modifier of each kind the PMU has
	for _, m := range p.Modifiers {
		switch {
		case m.Type == pfm.ModInteger && intMod == "":
			intMod = m.Name
		case m.Type == pfm.ModBool && boolMod == "":
			boolMod = m.Name
		}
	}
	var out, late []string
	seen := map[int]bool{}
	for _, i := range picks {
		if seen[i] {
			continue
		}
		seen[i] = true
		e := p.Events[i]
		var all []string
		for _, u := range e.Umasks {
			all = append(all, u.Name)
		}
		r := strings.NewReplacer("{e}", e.Name, "{E}", mixedCase(e.Name),
			"{long}", strings.Repeat(e.Name, 300/len(e.Name)+1),
			"{u*70}", strings.Repeat(":u", 70), "{excl*65}", strings.Repeat(":excl", 65),
			"{m}", intMod, "{M}", strings.ToUpper(intMod), "{b}", boolMod)
		add := func(templates []string) {
			for _, t := range templates {
				n := r.Replace(t)
				// A number too big for strtoull leaves errno at ERANGE,
				// and perf_raw's look-up reads errno without clearing
				// it: every perf_raw name after one would be "not found"
				// in the oracle's process. They go last, to share it alone.
				if strings.Contains(n, "99999999999999999999") {
					late = append(late, n)
				} else {
					out = append(out, n)
				}
			}
		}
		add(hostileEvent)
		if intMod != "" {
			add(hostileIntMod)
		}
		if boolMod != "" {
			add(hostileBoolMod)
		}
		if len(e.Umasks) > 0 {
			r = strings.NewReplacer("{e}", e.Name, "{E}", mixedCase(e.Name), "{m}", intMod,
				"{u0}", all[0], "{u0 lower}", strings.ToLower(all[0]), "{ul}", all[len(all)-1],
				"{all}", strings.Join(all, ":"))
			add(hostileUmask)
			if intMod != "" {
				add([]string{"{e}:{u0}:{m}=1:{m}=2"})
			}
			// every unit mask at once, which where groups combine makes
			// a canonical name longer than libpfm4's 255 bytes
			add([]string{"{e}:{all}", "{e}:{all}:u:k:h"})
		}
	}
	return append(out, late...)
}

// The corpus, by what it needs: {e} is the event, {E} it in mixed case,
// {m} and {M} an integer modifier of the PMU and it in upper case, {b} a
// boolean one, {u0} and {ul} the event's first and last unit masks.
var (
	hostileEvent = []string{
		"{E}", "{e}:U", "{e}:K=0", "{e}:u:u:u", "{e}:u=0:u=1:u=0", "{e}:u=0:u:u=0",
		"{e}:u=2", "{e}:u=yes", "{e}:u=T", "{e}:u=", "{e}:=1", "{e}:", "{e}::u", "{e}:u:",
		"{e}:precise=4", "{e}:precise=-1", "{e}:period=0", "{e}:freq=0", "{e}:period=1:freq=1",
		"{e}:period=0x10", "{e}:period=010", "{e}:period=99999999999999999999",
		"{e}:cpu=-1", "{e}:cpu=2147483646", "{e}:cpu=2147483647",
		"{e}.u", "{e}.k=0.u", "{e} u", "{e},{e}", "{long}", "{e}{u*70}", "{e}{excl*65}",
		"{e}:0x0", "{e}:0x1", "{e}:0xff", "{e}:0X1", "{e}:0x", "{e}:0xzz", "{e}:0x100000000", "{e}:0x1:0x2",
	}
	hostileIntMod = []string{
		"{e}:{m}=", "{e}:{m}=abc", "{e}:{m}=0x", "{e}:{m}=-1", "{e}:{m}=1:{m}=2", "{e}:{m}=1:{m}=1",
		"{e}:{m}=256", "{e}:{m}=4294967296", "{e}:{m}=99999999999999999999", "{e}:{m}", "{e}:{M}=1", "{e}.{m}=1",
	}
	hostileBoolMod = []string{"{e}:{b}=1:{b}=0", "{e}:{b}=n", "{e}:{b}=F", "{e}:{b}=10"}
	hostileUmask   = []string{
		"{E}:{u0 lower}", "{e}.{u0}", "{e}.{u0}.u", "{e}:{u0}:{u0}", "{e}:{u0}:{u0}:{u0}",
		"{e}:{u0}:{ul}", "{e}:{ul}:{u0}", "{e}:{u0}=1", "{e}:{u0}:0x1", "{e}:0x1:{u0}", "{e}:{u0}:u=0:u=1",
	}
)

// hostilePrefixes are hostile names whose fault is in the PMU prefix.
func hostilePrefixes(p *pfm.PMU) []string {
	e := p.Events[0].Name
	return []string{mixedCase(p.Name) + "::" + e, "::" + e, p.Name + "::", p.Name + ":::" + e, p.Name + "::::" + e}
}

// mixedCase alternates the case of a name's letters: "InSt_rEtIrEd".
func mixedCase(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case i%2 == 0 && 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case i%2 == 1 && 'A' <= c && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}
